//! Every seed 003 error code is reachable; DRC without KLayout and internal errors.

use super::*;

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
