//! Seed 003's layout observer tools end to end: sessions, queries, measurements, renders,
//! KLayout DRC and every seed 003 error code, through the built `reticle` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reticle_tests::{Host, check_jsonrpc_line, fixtures_dir, repo_root};
use serde_json::{Value, json};

struct Observer {
    host: Host,
    artifacts: tempfile::TempDir,
    next_id: u64,
}

impl Observer {
    fn start(extra: &[(&str, &str)]) -> Self {
        let artifacts = tempfile::tempdir().unwrap();
        let root = repo_root();
        let art = artifacts.path().join("root");
        let mut env = vec![
            ("RETICLE_ALLOWED_ROOTS", root.to_str().unwrap().to_owned()),
            ("RETICLE_BACKEND", "cpu".to_owned()),
            (
                "KLAYOUT_MCP_ARTIFACT_ROOT",
                art.to_str().unwrap().to_owned(),
            ),
        ];
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k, (*v).to_owned()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Self {
            host: Host::start_with(&env),
            artifacts,
            next_id: 0,
        }
    }

    /// The full `CallToolResult`.
    fn call_raw(&mut self, tool: &str, args: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.host.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}));
        // Generous: a query that walks a million placements takes seconds on a loaded
        // two-core machine before it fails with QUERY_TOO_LARGE.
        loop {
            let line = self
                .host
                .recv_line(Duration::from_secs(120))
                .unwrap_or_else(|| panic!("no answer to {tool}; stderr:\n{}", self.host.stderr()));
            let message = check_jsonrpc_line(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if message.get("id") == Some(&id) {
                return message["result"].clone();
            }
        }
    }

    /// `structuredContent` of a successful call.
    fn ok(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call_raw(tool, args.clone());
        assert_eq!(
            result["isError"],
            false,
            "{tool}({args}) failed: {result}\nstderr:\n{}",
            self.host.stderr()
        );
        result["structuredContent"].clone()
    }

    /// The error object of a failed call, checking its code.
    fn err(&mut self, tool: &str, args: Value, code: &str) -> Value {
        let result = self.call_raw(tool, args.clone());
        assert_eq!(
            result["isError"], true,
            "{tool}({args}) succeeded: {result}"
        );
        let error = result["structuredContent"]["error"].clone();
        assert_eq!(error["code"], code, "{tool}({args}): {error}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(error["details"].is_object());
        error
    }

    fn open(&mut self, path: &Path) -> Value {
        self.ok("open_layout", json!({"path": path}))
    }
}

fn demo_gds() -> PathBuf {
    fixtures_dir().join("layouts/observer_demo.gds")
}

fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    assert_eq!(info.color_type, png::ColorType::Rgba);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn pixel(rgba: &[u8], width: u32, x: u32, y: u32) -> [u8; 4] {
    let i = ((y * width + x) * 4) as usize;
    [rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]]
}

fn mbox(l: f64, b: f64, r: f64, t: f64) -> Value {
    json!({"left": l, "bottom": b, "right": r, "top": t})
}

#[test]
fn open_query_measure_render_close() {
    let mut o = Observer::start(&[]);
    let opened = o.open(&demo_gds());
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    assert!(
        sid.len() == 16
            && sid.starts_with("ses_")
            && sid[4..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "{sid}"
    );
    assert_eq!(opened["selected_top_cell"], "TOP");
    assert_eq!(opened["top_cells"], json!(["TOP"]));
    assert_eq!(opened["dbu"], 0.001);
    assert_eq!(opened["bbox_um"], mbox(0.0, -1.0, 71.0, 27.0));
    assert_eq!(
        opened["bbox_dbu"],
        json!({"left": 0, "bottom": -1000, "right": 71000, "top": 27000})
    );
    assert_eq!(opened["layer_count"], 4);
    assert_eq!(opened["source"]["format"], "gds");
    let bytes = std::fs::read(demo_gds()).unwrap();
    assert_eq!(opened["source"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        opened["source"]["path"],
        json!(demo_gds().canonicalize().unwrap())
    );
    let session_dir = PathBuf::from(opened["artifact_root"].as_str().unwrap());
    let art_root = o.artifacts.path().join("root").canonicalize().unwrap();
    assert_eq!(session_dir, art_root.join("sessions").join(&sid));
    let record: Value =
        serde_json::from_slice(&std::fs::read(session_dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(record["session_id"], sid);
    assert!(bytes.len() > 100);

    // Cells, sorted by name.
    let cells = o.ok("list_cells", json!({"session_id": sid}));
    let names: Vec<&str> = cells["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["MMI", "PAD", "TOP"]);
    let top = &cells["cells"][2];
    assert_eq!(top["is_top"], true);
    assert_eq!(top["child_instance_count"], 3);
    assert_eq!(top["shape_count"], 7, "path, 3 boxes, triangle, 2 texts");
    let only_top = o.ok("list_cells", json!({"session_id": sid, "max_depth": 0}));
    assert_eq!(only_top["cells"].as_array().unwrap().len(), 1);

    // Layers, sorted, with flattened counts.
    let layers = o.ok("list_layers", json!({"session_id": sid}));
    let counts: Vec<(u64, u64, u64)> = layers["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["layer"].as_u64().unwrap(),
                l["datatype"].as_u64().unwrap(),
                l["shape_count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [(1, 0, 6), (2, 0, 3), (3, 0, 6), (10, 0, 2)]);

    let described = o.ok("describe_cell", json!({"session_id": sid, "cell": "TOP"}));
    assert_eq!(described["cell"], "TOP");
    assert_eq!(described["depth_used"], 1);
    assert_eq!(described["instances"].as_array().unwrap().len(), 3);
    let texts: Vec<&str> = described["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["IN", "OUT"]);
    let array = described["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["child_cell"] == "PAD")
        .unwrap();
    assert!(!array["array"].is_null(), "{array}");

    // The waveguide path, measured and analyzed.
    let q = o.ok(
        "query_region",
        json!({"session_id": sid, "box": mbox(-1.0, -1.0, 41.0, 1.0), "layers": [{"layer": 1, "datatype": 0}], "hierarchy_mode": "top"}),
    );
    assert_eq!(q["truncation"]["shapes_dropped"], 0);
    let shapes = q["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 1, "{q}");
    assert_eq!(shapes[0]["kind"], "path");
    assert_eq!(shapes[0]["path_width_um"], 0.5);
    assert_eq!(shapes[0]["bbox_um"], mbox(0.0, -0.25, 40.0, 0.25));
    let path_id = shapes[0]["id"].as_str().unwrap().to_owned();
    let again = o.ok(
        "query_region",
        json!({"session_id": sid, "box": mbox(-1.0, -1.0, 41.0, 1.0), "layers": [{"layer": 1, "datatype": 0}], "hierarchy_mode": "top"}),
    );
    assert_eq!(again["shapes"][0]["id"], path_id.as_str(), "ids are stable");
    let width = o.ok(
        "measure_geometry",
        json!({"session_id": sid, "mode": "path_width", "target_ids": [path_id]}),
    );
    assert_eq!(width["value_um"], 0.5);
    assert_eq!(width["value_dbu"], 500);
    let length = o.ok(
        "measure_geometry",
        json!({"session_id": sid, "mode": "segment_length", "target_ids": [path_id]}),
    );
    assert_eq!(length["value_um"], 40.0);
    let wg = o.ok(
        "analyze_waveguide",
        json!({"session_id": sid, "target_id": path_id}),
    );
    assert_eq!(wg["orientation"], "horizontal");
    assert_eq!(wg["segment_length_um"], 40.0);
    assert_eq!(wg["path_width_um"], 0.5);
    assert_eq!(wg["is_axis_aligned"], true);
    assert_eq!(wg["center_um"], json!({"x": 20.0, "y": 0.0}));

    // Two boxes 0.2 um apart.
    let q = o.ok(
        "query_region",
        json!({"session_id": sid, "box": mbox(11.5, 4.0, 17.0, 9.0), "layers": [{"layer": 1, "datatype": 0}]}),
    );
    let ids: Vec<String> = q["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{q}");
    let gap = o.ok(
        "measure_geometry",
        json!({"session_id": sid, "mode": "edge_gap", "target_ids": ids}),
    );
    assert_eq!(gap["value_um"], 0.2);
    assert_eq!(gap["value_dbu"], 200);

    // Recursive query: the rotated MMI's shapes carry their instance path.
    let q = o.ok(
        "query_region",
        json!({"session_id": sid, "box": mbox(68.0, 9.0, 72.0, 17.0), "hierarchy_mode": "recursive"}),
    );
    assert_eq!(q["summary"]["shape_count"], 2, "{q}");
    assert_eq!(q["shapes"][0]["cell"], "MMI");
    assert_eq!(q["shapes"][0]["bbox_um"], mbox(69.0, 10.0, 71.0, 16.0));
    assert_eq!(q["shapes"][0]["instance_path"].as_array().unwrap().len(), 2);

    // Renders: byte-identical twice, shapes where the layout has them.
    let render_args = json!({
        "session_id": sid,
        "box": mbox(0.0, 0.0, 40.0, 10.0),
        "layers": [{"layer": 1, "datatype": 0}],
        "image_size": {"width": 400, "height": 100},
        "style": "mask",
    });
    let first = o.ok("render_view", render_args.clone());
    let path = PathBuf::from(first["image"]["path"].as_str().unwrap());
    assert!(path.starts_with(session_dir.join("renders")), "{path:?}");
    assert_eq!(first["image"]["media_type"], "image/png");
    let bytes_first = std::fs::read(&path).unwrap();
    let second = o.ok("render_view", render_args);
    assert_eq!(second["render_id"], first["render_id"]);
    let bytes_second = std::fs::read(second["image"]["path"].as_str().unwrap()).unwrap();
    assert_eq!(bytes_first, bytes_second, "renders are byte-stable");
    let (w, h, rgba) = decode_png(&bytes_first);
    assert_eq!((w, h), (400, 100));
    // 10 px per um; y = 10 um is row 0. The box 12..14 x 5..8 is white; 11 um is a gap.
    assert_eq!(
        pixel(&rgba, w, 130, 35),
        [255, 255, 255, 255],
        "inside a box"
    );
    assert_eq!(pixel(&rgba, w, 110, 35), [0, 0, 0, 255], "between boxes");
    assert_eq!(
        pixel(&rgba, w, 101, 35),
        [255, 255, 255, 255],
        "the 0.2 um box"
    );
    // The triangle is on 2/0, filtered out here; drawn when all layers are shown.
    assert_eq!(pixel(&rgba, w, 220, 40), [0, 0, 0, 255]);
    let all = o.ok(
        "render_view",
        json!({"session_id": sid, "box": mbox(0.0, 0.0, 40.0, 10.0), "image_size": {"width": 400, "height": 100}, "style": "mask"}),
    );
    let (_, _, rgba_all) =
        decode_png(&std::fs::read(all["image"]["path"].as_str().unwrap()).unwrap());
    assert_eq!(pixel(&rgba_all, w, 220, 40), [255, 255, 255, 255]);
    assert_ne!(all["render_id"], first["render_id"]);

    // set_view feeds render_view; annotations outline ids.
    let view = o.ok(
        "set_view",
        json!({"session_id": sid, "box": mbox(0.0, -1.0, 20.0, 9.0), "layers": [{"layer": 1, "datatype": 0}]}),
    );
    assert_eq!(view["view"]["cell"], "TOP");
    assert_eq!(view["view"]["box_um"], mbox(0.0, -1.0, 20.0, 9.0));
    let viewed = o.ok(
        "render_view",
        json!({"session_id": sid, "image_size": {"width": 200, "height": 100}, "annotations": [{"kind": "shape_outline", "target_ids": [path_id], "color": "#ff0000"}]}),
    );
    assert_eq!(viewed["box_um"], mbox(0.0, -1.0, 20.0, 9.0));
    assert_eq!(viewed["style"], "light");

    // Close: the directory goes, the id is gone.
    let closed = o.ok("close_session", json!({"session_id": sid}));
    assert_eq!(closed["closed"], true);
    assert_eq!(closed["artifact_dir_deleted"], true);
    assert!(!session_dir.exists());
    let closed = o.ok("close_session", json!({"session_id": sid}));
    assert_eq!(
        closed,
        json!({"schema_version": closed["schema_version"], "session_id": sid, "closed": false, "artifact_dir_deleted": false,
               "state_after": {"session_id": sid, "open": false, "live_sessions": 0}})
    );
    o.err(
        "list_cells",
        json!({"session_id": sid}),
        "SESSION_NOT_FOUND",
    );
}

#[test]
fn oasis_opens_like_gds() {
    let mut o = Observer::start(&[]);
    let gds = o.open(&demo_gds());
    let oas = o.open(&fixtures_dir().join("layouts/observer_demo.oas"));
    assert_eq!(oas["source"]["format"], "oasis");
    for key in [
        "selected_top_cell",
        "top_cells",
        "dbu",
        "bbox_um",
        "bbox_dbu",
        "layer_count",
    ] {
        assert_eq!(gds[key], oas[key], "{key}");
    }
    let a = o.ok("list_layers", json!({"session_id": gds["session_id"]}));
    let b = o.ok("list_layers", json!({"session_id": oas["session_id"]}));
    assert_eq!(a["layers"], b["layers"]);
    assert_ne!(gds["session_id"], oas["session_id"]);
    // An explicit format overrides the extension.
    let explicit = o.ok(
        "open_layout",
        json!({"path": fixtures_dir().join("layouts/observer_demo.oas"), "format": "OAS"}),
    );
    assert_eq!(explicit["source"]["format"], "oasis");
}

#[test]
fn every_seed_003_error_code_is_reachable() {
    let mut o = Observer::start(&[]);
    let fixtures = fixtures_dir();
    // FILE_NOT_FOUND, UNSUPPORTED_FORMAT, TOP_CELL_NOT_FOUND, PATH_NOT_ALLOWED.
    o.err(
        "open_layout",
        json!({"path": fixtures.join("layouts/none.gds")}),
        "FILE_NOT_FOUND",
    );
    o.err(
        "open_layout",
        json!({"path": repo_root().join("README.md")}),
        "UNSUPPORTED_FORMAT",
    );
    o.err(
        "open_layout",
        json!({"path": repo_root().join("README.md"), "format": "gds"}),
        "UNSUPPORTED_FORMAT",
    );
    o.err(
        "open_layout",
        json!({"path": demo_gds(), "format": "dxf"}),
        "UNSUPPORTED_FORMAT",
    );
    o.err(
        "open_layout",
        json!({"path": demo_gds(), "top_cell": "NOPE"}),
        "TOP_CELL_NOT_FOUND",
    );
    let outside = o.err(
        "open_layout",
        json!({"path": "/etc/hosts"}),
        "PATH_NOT_ALLOWED",
    );
    assert_eq!(
        outside["details"]["allowed_roots"],
        json!([repo_root()]),
        "names the allowed roots"
    );
    o.err(
        "open_layout",
        json!({"path": "fixtures/layouts/observer_demo.gds"}),
        "INVALID_INPUT",
    );
    // SESSION_NOT_FOUND on every session tool.
    for (tool, extra) in [
        ("list_cells", json!({})),
        ("describe_cell", json!({})),
        ("list_layers", json!({})),
        ("query_region", json!({"box": mbox(0.0, 0.0, 1.0, 1.0)})),
        (
            "measure_geometry",
            json!({"mode": "path_width", "target_ids": ["shp_0"]}),
        ),
        ("analyze_waveguide", json!({"target_id": "shp_0"})),
        ("set_view", json!({})),
        ("render_view", json!({})),
        (
            "run_drc_script",
            json!({"script_path": fixtures.join("decks/width_space.drc")}),
        ),
        ("extract_markers", json!({"run_id": "drc_00000000"})),
    ] {
        let mut args = extra;
        args["session_id"] = json!("ses_000000000000");
        o.err(tool, args, "SESSION_NOT_FOUND");
    }

    let sid = o.open(&demo_gds())["session_id"].clone();
    // INVALID_BOX.
    o.err(
        "query_region",
        json!({"session_id": sid, "box": mbox(5.0, 0.0, 1.0, 1.0)}),
        "INVALID_BOX",
    );
    o.err(
        "set_view",
        json!({"session_id": sid, "box": mbox(0.0, 0.0, 0.0, 1.0)}),
        "INVALID_BOX",
    );
    // INVALID_LAYER.
    let e = o.err(
        "query_region",
        json!({"session_id": sid, "box": mbox(0.0, 0.0, 1.0, 1.0), "layers": [{"layer": 99, "datatype": 0}]}),
        "INVALID_LAYER",
    );
    assert_eq!(e["details"]["layer"], 99);
    o.err(
        "render_view",
        json!({"session_id": sid, "layers": [{"layer": 7, "datatype": 7}]}),
        "INVALID_LAYER",
    );
    // TOP_CELL_NOT_FOUND for a query cell.
    o.err(
        "describe_cell",
        json!({"session_id": sid, "cell": "NOPE"}),
        "TOP_CELL_NOT_FOUND",
    );
    // INVALID_TARGET: unknown id; a box is not a path; wrong target count.
    o.err(
        "measure_geometry",
        json!({"session_id": sid, "mode": "edge_gap", "target_ids": ["shp_0123456789abcdef", "shp_1"]}),
        "INVALID_TARGET",
    );
    let q = o.ok(
        "query_region",
        json!({"session_id": sid, "box": mbox(11.5, 4.0, 17.0, 9.0), "layers": [{"layer": 1, "datatype": 0}]}),
    );
    let box_id = q["shapes"][0]["id"].clone();
    o.err(
        "analyze_waveguide",
        json!({"session_id": sid, "target_id": box_id}),
        "INVALID_TARGET",
    );
    o.err(
        "measure_geometry",
        json!({"session_id": sid, "mode": "edge_gap", "target_ids": [box_id]}),
        "INVALID_TARGET",
    );
    o.err(
        "render_view",
        json!({"session_id": sid, "annotations": [{"kind": "shape_outline", "target_ids": ["shp_nope"]}]}),
        "INVALID_TARGET",
    );
    // TOOL_LIMIT_EXCEEDED.
    o.err(
        "query_region",
        json!({"session_id": sid, "box": mbox(0.0, 0.0, 1.0, 1.0), "max_shapes": 20000}),
        "TOOL_LIMIT_EXCEEDED",
    );
    o.err(
        "render_view",
        json!({"session_id": sid, "image_size": {"width": 5000, "height": 10}}),
        "TOOL_LIMIT_EXCEEDED",
    );
    // RENDER_FAILED: the render directory is not writable as a directory any more.
    let dir = o
        .artifacts
        .path()
        .join("root/sessions")
        .join(sid.as_str().unwrap())
        .join("renders");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    o.err("render_view", json!({"session_id": sid}), "RENDER_FAILED");
    // QUERY_TOO_LARGE: two million placements exceed the query budget.
    let huge = o.open(&fixtures.join("layouts/observer_huge_array.gds"));
    let e = o.err(
        "query_region",
        json!({"session_id": huge["session_id"], "box": mbox(-1.0, -1.0, 2001.0, 1001.0)}),
        "QUERY_TOO_LARGE",
    );
    assert!(e["details"]["what"].is_string(), "{e}");
    // A script whose extension names no KLayout interpreter.
    o.err(
        "run_drc_script",
        json!({"session_id": sid, "script_path": fixtures.join("decks/iccad13_m1.json")}),
        "INVALID_INPUT",
    );
    // INVALID_INPUT for schema violations (unknown mode, typo'd field).
    o.err(
        "measure_geometry",
        json!({"session_id": sid, "mode": "area", "target_ids": ["a"]}),
        "INVALID_INPUT",
    );
    o.err(
        "query_region",
        json!({"session_id": sid, "box": mbox(0.0, 0.0, 1.0, 1.0), "hierarchy": "top"}),
        "INVALID_INPUT",
    );
    // extract_markers of a run this session never made.
    o.err(
        "extract_markers",
        json!({"session_id": sid, "run_id": "drc_00000000"}),
        "NOT_FOUND",
    );
}

#[test]
fn drc_without_klayout_and_internal_errors() {
    let mut o = Observer::start(&[("KLAYOUT_BIN", "/nonexistent/klayout")]);
    let sid = o.open(&demo_gds())["session_id"].clone();
    let e = o.err(
        "run_drc_script",
        json!({"session_id": sid, "script_path": fixtures_dir().join("decks/width_space.drc")}),
        "DRC_RUN_FAILED",
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("KLayout is not installed"),
        "{e}"
    );
    assert_eq!(e["details"]["reason"], "klayout_not_found");
    // The script path is confined like any read.
    o.err(
        "run_drc_script",
        json!({"session_id": sid, "script_path": "/etc/passwd"}),
        "PATH_NOT_ALLOWED",
    );
    // INTERNAL_ERROR: the configured artifact root cannot be created.
    let mut broken = Observer::start(&[("KLAYOUT_MCP_ARTIFACT_ROOT", "/dev/null/artifacts")]);
    let e = broken.err("open_layout", json!({"path": demo_gds()}), "INTERNAL_ERROR");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("KLAYOUT_MCP_ARTIFACT_ROOT"),
        "{e}"
    );
}

#[test]
fn sessions_expire_after_their_ttl() {
    let mut o = Observer::start(&[("KLAYOUT_MCP_SESSION_TTL_SECONDS", "1")]);
    let opened = o.open(&demo_gds());
    let sid = opened["session_id"].clone();
    let dir = PathBuf::from(opened["artifact_root"].as_str().unwrap());
    assert_eq!(opened["ttl_seconds"], 1);
    // Use keeps it alive.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        o.ok("list_layers", json!({"session_id": sid}));
    }
    std::thread::sleep(Duration::from_millis(1300));
    // Another session's call sweeps the expired one (lazily, at the next operation).
    o.err(
        "list_cells",
        json!({"session_id": "ses_ffffffffffff"}),
        "SESSION_NOT_FOUND",
    );
    assert!(!dir.exists(), "the expired session's directory is deleted");
    let e = o.err("list_layers", json!({"session_id": sid}), "SESSION_EXPIRED");
    assert_eq!(e["details"]["ttl_seconds"], 1);
    let closed = o.ok("close_session", json!({"session_id": sid}));
    assert_eq!(closed["closed"], false);
}

fn klayout_bin() -> String {
    let bin = std::env::var("KLAYOUT_BIN").unwrap_or_else(|_| "klayout".into());
    let found = Command::new(&bin).arg("-v").output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "KLayout is required for the DRC tests (scripts/setup.sh test installs it): {bin}: {found:?}"
    );
    bin
}

/// Markers KLayout itself reports for `deck` on `layout` (an independent batch run).
fn klayout_marker_counts(
    bin: &str,
    deck: &Path,
    layout: &Path,
    params: &[(&str, &str)],
) -> Vec<(String, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.lyrdb");
    let mut cmd = Command::new(bin);
    cmd.arg("-b").arg("-r").arg(deck);
    cmd.arg("-rd").arg(format!("input={}", layout.display()));
    cmd.arg("-rd").arg(format!("report={}", report.display()));
    for (k, v) in params {
        cmd.arg("-rd").arg(format!("{k}={v}"));
    }
    cmd.env("HOME", dir.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let xml = std::fs::read_to_string(report).unwrap();
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for item in xml.split("<item>").skip(1) {
        let cat = item
            .split("<category>")
            .nth(1)
            .and_then(|s| s.split("</category>").next())
            .unwrap()
            .trim_matches('\'')
            .to_owned();
        *counts.entry(cat).or_default() += 1;
    }
    counts.into_iter().collect()
}

#[test]
fn run_drc_script_reports_what_klayout_reports_and_extract_markers_crops_them() {
    let bin = klayout_bin();
    let mut o = Observer::start(&[("KLAYOUT_BIN", bin.as_str())]);
    let deck = fixtures_dir().join("decks/width_space.drc");
    let opened = o.open(&demo_gds());
    let sid = opened["session_id"].clone();
    let run = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "script_type": "ruby", "params": {"WG_MIN_SPACE": "0.3", "WG_MIN_WIDTH": "0.3"}}),
    );
    assert_eq!(run["return_code"], 0);
    assert_eq!(run["script_type"], "ruby");
    let expected = klayout_marker_counts(
        &bin,
        &deck,
        &demo_gds(),
        &[("WG_MIN_SPACE", "0.3"), ("WG_MIN_WIDTH", "0.3")],
    );
    assert_eq!(
        expected,
        [
            ("wg_min_space".to_owned(), 1),
            ("wg_min_width".to_owned(), 1)
        ]
    );
    let got: Vec<(String, u64)> = run["rule_counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(got, expected, "{run}");
    assert_eq!(run["marker_count"], 2);
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let run_dir = PathBuf::from(opened["artifact_root"].as_str().unwrap())
        .join("drc")
        .join(&run_id);
    for f in [
        "report.lyrdb",
        "markers.json",
        "layout.gds",
        "stdout.txt",
        "stderr.txt",
    ] {
        assert!(run_dir.join(f).is_file(), "{f} missing in {run_dir:?}");
    }
    assert_eq!(
        std::fs::read(run_dir.join("layout.gds")).unwrap(),
        std::fs::read(demo_gds()).unwrap(),
        "the deck ran on a copy of the session layout"
    );
    let report = run["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "drc_report")
        .unwrap();
    assert_eq!(report["path"], json!(run_dir.join("report.lyrdb")));
    let markers_json: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("markers.json")).unwrap()).unwrap();
    assert_eq!(markers_json["marker_count"], 2);

    // Parameters are data: a smaller minimum space finds no space marker.
    let relaxed = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "params": {"WG_MIN_SPACE": "0.1"}}),
    );
    let expected = klayout_marker_counts(&bin, &deck, &demo_gds(), &[("WG_MIN_SPACE", "0.1")]);
    assert_eq!(expected, [("wg_min_width".to_owned(), 1)]);
    assert_eq!(relaxed["rule_counts"], json!({"wg_min_width": 1}));
    assert_ne!(relaxed["run_id"], run["run_id"]);
    // A shell fragment in a value stays a string.
    let odd = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "params": {"WG_MIN_SPACE": "0.3; touch /tmp/reticle_pwned"}}),
    );
    assert_eq!(odd["return_code"], 0);
    assert!(!Path::new("/tmp/reticle_pwned").exists());

    let markers = o.ok(
        "extract_markers",
        json!({"session_id": sid, "run_id": run_id, "include_crops": true, "crop_size_um": {"x": 4.0, "y": 4.0}}),
    );
    let list = markers["markers"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(markers["truncation"]["markers_dropped"], 0);
    let width = list.iter().find(|m| m["rule"] == "wg_min_width").unwrap();
    assert_eq!(width["box_um"], mbox(10.0, 5.0, 10.2, 8.0));
    let space = list.iter().find(|m| m["rule"] == "wg_min_space").unwrap();
    assert_eq!(space["box_um"], mbox(14.0, 5.0, 14.2, 8.0));
    for m in list {
        let crop = PathBuf::from(m["crop"]["path"].as_str().unwrap());
        assert!(crop.starts_with(run_dir.join("crops")), "{crop:?}");
        let (w, h, _) = decode_png(&std::fs::read(&crop).unwrap());
        assert_eq!((w, h), (256, 256));
    }
    let plain = o.ok(
        "extract_markers",
        json!({"session_id": sid, "run_id": run_id, "include_crops": false}),
    );
    assert!(plain["markers"][0].get("crop").is_none());
    // A deck that writes no report is a DRC failure, with KLayout's output kept.
    let decks = tempfile::tempdir().unwrap();
    let bad_deck = decks.path().join("no_report.drc");
    std::fs::write(&bad_deck, "source($input)\n").unwrap();
    let root = format!("{}:{}", repo_root().display(), decks.path().display());
    drop(o);
    let mut o = Observer::start(&[
        ("KLAYOUT_BIN", bin.as_str()),
        ("RETICLE_ALLOWED_ROOTS", root.as_str()),
    ]);
    let sid = o.open(&demo_gds())["session_id"].clone();
    let e = o.err(
        "run_drc_script",
        json!({"session_id": sid, "script_path": bad_deck}),
        "DRC_RUN_FAILED",
    );
    assert!(e["message"].as_str().unwrap().contains("no report"), "{e}");
}

/// Pids of the host's workers, from `health`.
fn worker_pids(o: &mut Observer) -> Vec<i32> {
    let health = o.ok("health", json!({"render": "json", "detail": "full"}));
    health["workers"]["workers"]
        .as_array()
        .unwrap_or_else(|| panic!("no workers in health: {health}"))
        .iter()
        .filter_map(|w| w["pid"].as_i64())
        .map(|p| p as i32)
        .collect()
}

#[test]
fn a_restarted_worker_gives_the_same_ids_and_resolves_earlier_ones() {
    let mut o = Observer::start(&[]);
    let sid = o.open(&demo_gds())["session_id"].clone();
    let query = json!({"session_id": sid, "box": mbox(-1.0, -1.0, 80.0, 30.0)});
    let before = o.ok("query_region", query.clone());
    let path_id = before["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "path")
        .unwrap()["id"]
        .clone();
    let old = worker_pids(&mut o);
    assert!(!old.is_empty());
    for pid in &old {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL)
            .unwrap();
    }
    // The parsed layout and its cache died with the worker; the session did not.
    let width = o.ok(
        "measure_geometry",
        json!({"session_id": sid, "mode": "path_width", "target_ids": [path_id]}),
    );
    assert_eq!(width["value_um"], 0.5);
    let after = o.ok("query_region", query);
    assert_eq!(after["shapes"], before["shapes"], "same shapes, same ids");
    let new = worker_pids(&mut o);
    assert!(new.iter().all(|p| !old.contains(p)), "{old:?} -> {new:?}");
}
