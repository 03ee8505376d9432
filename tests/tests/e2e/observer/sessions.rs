//! A session from open to close (queries, measurements, renders), OASIS like GDS, the
//! session TTL, and ids that survive a worker restart.

use super::*;

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
