//! The G1 corpus: every method and tool, every error path and malformed input, in the
//! order they are sent, with what each request must produce.

use super::*;

pub(super) fn corpus() -> (Vec<Vec<u8>>, BTreeMap<String, Expect>, usize) {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut expect = BTreeMap::new();
    let mut anonymous_errors = 0usize;
    fn req(
        lines: &mut Vec<Vec<u8>>,
        expect: &mut BTreeMap<String, Expect>,
        id: &str,
        method: &str,
        params: Value,
        e: Expect,
    ) {
        lines.push(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                .to_string()
                .into_bytes(),
        );
        expect.insert(id.to_owned(), e);
    }
    // Lifecycle, both eras.
    req(
        &mut lines,
        &mut expect,
        "init",
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "g1", "version": "0"}}),
        Expect::Ok,
    );
    lines.push(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec());
    req(
        &mut lines,
        &mut expect,
        "ping",
        "ping",
        json!({}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "discover",
        "server/discover",
        json!({"_meta": {MODERN: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "discover-legacy-probe",
        "server/discover",
        json!({}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "old-version",
        "tools/list",
        json!({"_meta": {MODERN: "1900-01-01"}}),
        Expect::Rpc(-32022),
    );
    req(
        &mut lines,
        &mut expect,
        "list",
        "tools/list",
        json!({}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "list-modern",
        "tools/list",
        json!({"_meta": {MODERN: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "list-cursor",
        "tools/list",
        json!({"cursor": "nope"}),
        Expect::Rpc(-32602),
    );
    req(
        &mut lines,
        &mut expect,
        "setlevel",
        "logging/setLevel",
        json!({"level": "debug"}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "setlevel-bad",
        "logging/setLevel",
        json!({"level": "loud"}),
        Expect::Rpc(-32602),
    );
    req(
        &mut lines,
        &mut expect,
        "init-bad",
        "initialize",
        json!({"protocolVersion": 5}),
        Expect::Rpc(-32602),
    );
    // Every tool, every render/detail.
    for tool in ["health", "telemetry"] {
        for render in ["porcelain", "json"] {
            for detail in ["concise", "full"] {
                let id = format!("{tool}-{render}-{detail}");
                req(
                    &mut lines,
                    &mut expect,
                    &id,
                    "tools/call",
                    json!({"name": tool, "arguments": {"render": render, "detail": detail}}),
                    Expect::Ok,
                );
            }
        }
        req(
            &mut lines,
            &mut expect,
            &format!("{tool}-noargs"),
            "tools/call",
            json!({"name": tool}),
            Expect::Ok,
        );
        req(
            &mut lines,
            &mut expect,
            &format!("{tool}-modern"),
            "tools/call",
            json!({"name": tool, "arguments": {}, "_meta": {MODERN: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/logLevel": "debug"}}),
            Expect::Ok,
        );
        req(
            &mut lines,
            &mut expect,
            &format!("{tool}-unknown-field"),
            "tools/call",
            json!({"name": tool, "arguments": {"verbose": true}}),
            Expect::ToolError("INVALID_INPUT"),
        );
        req(
            &mut lines,
            &mut expect,
            &format!("{tool}-wrong-type"),
            "tools/call",
            json!({"name": tool, "arguments": {"render": 3}}),
            Expect::ToolError("INVALID_INPUT"),
        );
        req(
            &mut lines,
            &mut expect,
            &format!("{tool}-bad-enum"),
            "tools/call",
            json!({"name": tool, "arguments": {"detail": "extreme"}}),
            Expect::ToolError("INVALID_INPUT"),
        );
    }
    // simulate: a real worker job, and each way its input can be wrong. The host's
    // allowed root is the repository, so README.md is an allowed but non-layout file.
    let glp = repo_root().join("fixtures/layouts/lines_and_pad.glp");
    let glp = glp.to_str().unwrap();
    let simulate_cases: [(&str, Value, Expect); 9] = [
        (
            "simulate-ok",
            json!({"layout": glp, "wait": true}),
            Expect::Ok,
        ),
        (
            "simulate-outside-roots",
            json!({"layout": "/etc/passwd", "wait": true}),
            Expect::ToolError("PATH_NOT_ALLOWED"),
        ),
        (
            "simulate-missing",
            json!({"layout": repo_root().join("fixtures/none.glp"), "wait": true}),
            Expect::ToolError("FILE_NOT_FOUND"),
        ),
        (
            "simulate-not-a-layout",
            json!({"layout": repo_root().join("README.md"), "wait": true}),
            Expect::ToolError("UNSUPPORTED_FORMAT"),
        ),
        (
            "simulate-wrong-type",
            json!({"layout": 3}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "simulate-no-layout",
            json!({"wait": true}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "simulate-unknown-field",
            json!({"layout": glp, "turbo": true}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        // One periodic window must be a square of the model period (issue 18 made any other
        // box a tiled region: the same box in tiles is simulated).
        (
            "simulate-not-square",
            json!({"layout": glp, "box_um": [0.0, 0.0, 1.0, 2.0], "tiling": "window", "wait": true}),
            Expect::ToolError("INVALID_BOX"),
        ),
        (
            "simulate-not-square-tiled",
            json!({"layout": glp, "box_um": [0.0, 0.0, 1.0, 2.0], "wait": true}),
            Expect::Ok,
        ),
    ];
    for (id, arguments, want) in simulate_cases {
        req(
            &mut lines,
            &mut expect,
            id,
            "tools/call",
            json!({"name": "simulate", "arguments": arguments}),
            want,
        );
    }
    // Layout observer tools (seed 003): a session opens; unknown sessions, bad paths and
    // bad arguments are typed errors.
    let demo = repo_root().join("fixtures/layouts/observer_demo.gds");
    let missing_session = json!("ses_000000000000");
    let layout_cases: Vec<(&str, &str, Value, Expect)> = vec![
        (
            "open-layout",
            "open_layout",
            json!({"path": demo}),
            Expect::Ok,
        ),
        (
            "open-layout-oasis",
            "open_layout",
            json!({"path": repo_root().join("fixtures/layouts/observer_demo.oas")}),
            Expect::Ok,
        ),
        (
            "open-layout-outside-roots",
            "open_layout",
            json!({"path": "/etc/hosts"}),
            Expect::ToolError("PATH_NOT_ALLOWED"),
        ),
        (
            "open-layout-missing",
            "open_layout",
            json!({"path": repo_root().join("fixtures/none.gds")}),
            Expect::ToolError("FILE_NOT_FOUND"),
        ),
        (
            "open-layout-format",
            "open_layout",
            json!({"path": demo, "format": "dxf"}),
            Expect::ToolError("UNSUPPORTED_FORMAT"),
        ),
        (
            "open-layout-top",
            "open_layout",
            json!({"path": demo, "top_cell": "NOPE"}),
            Expect::ToolError("TOP_CELL_NOT_FOUND"),
        ),
        (
            "open-layout-no-path",
            "open_layout",
            json!({}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "close-session-unknown",
            "close_session",
            json!({"session_id": missing_session}),
            Expect::Ok,
        ),
        (
            "list-cells-unknown",
            "list_cells",
            json!({"session_id": missing_session}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "describe-cell-unknown",
            "describe_cell",
            json!({"session_id": missing_session}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "list-layers-unknown",
            "list_layers",
            json!({"session_id": missing_session}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "query-region-unknown",
            "query_region",
            json!({"session_id": missing_session, "box": {"left": 0, "bottom": 0, "right": 1, "top": 1}}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "query-region-no-box",
            "query_region",
            json!({"session_id": missing_session}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "measure-unknown",
            "measure_geometry",
            json!({"session_id": missing_session, "mode": "edge_gap", "target_ids": ["a", "b"]}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "measure-bad-mode",
            "measure_geometry",
            json!({"session_id": missing_session, "mode": "area", "target_ids": ["a"]}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "analyze-unknown",
            "analyze_waveguide",
            json!({"session_id": missing_session, "target_id": "shp_0"}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "set-view-unknown",
            "set_view",
            json!({"session_id": missing_session}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "render-view-unknown",
            "render_view",
            json!({"session_id": missing_session, "style": "mask"}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "render-view-bad-style",
            "render_view",
            json!({"session_id": missing_session, "style": "neon"}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "run-drc-unknown",
            "run_drc_script",
            json!({"session_id": missing_session, "script_path": repo_root().join("fixtures/decks/width_space.drc")}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "run-drc-bad-param",
            "run_drc_script",
            json!({"session_id": missing_session, "script_path": "/x.drc", "params": {"a b": "1"}}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "extract-markers-unknown",
            "extract_markers",
            json!({"session_id": missing_session, "run_id": "drc_00000000"}),
            Expect::ToolError("SESSION_NOT_FOUND"),
        ),
        (
            "extract-markers-bad-run",
            "extract_markers",
            json!({"session_id": missing_session, "run_id": "../../etc"}),
            Expect::ToolError("INVALID_INPUT"),
        ),
    ];
    for (id, tool, arguments, want) in layout_cases {
        req(
            &mut lines,
            &mut expect,
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            want,
        );
    }
    // evaluate: a worker job with a deck, detailed, and its typed input errors.
    let evaluate_cases: [(&str, Value, Expect); 6] = [
        (
            "evaluate-ok",
            json!({"layout": glp, "deck": "iccad13_m1", "report_level": "detailed", "wait": true}),
            Expect::Ok,
        ),
        (
            "evaluate-outside-roots",
            json!({"layout": "/etc/passwd", "deck": "iccad13_m1", "wait": true}),
            Expect::ToolError("PATH_NOT_ALLOWED"),
        ),
        (
            "evaluate-no-deck",
            json!({"layout": glp, "wait": true}),
            Expect::ToolError("INVALID_INPUT"),
        ),
        (
            "evaluate-unknown-deck",
            json!({"layout": glp, "deck": "no_such_deck", "wait": true}),
            Expect::ToolError("NOT_FOUND"),
        ),
        (
            "evaluate-missing-deck",
            json!({"layout": glp, "deck": repo_root().join("fixtures/decks/none.json"), "wait": true}),
            Expect::ToolError("FILE_NOT_FOUND"),
        ),
        (
            "evaluate-bad-layer",
            json!({"layout": glp, "deck": "iccad13_m1", "layer": "9/9", "wait": true}),
            Expect::ToolError("INVALID_LAYER"),
        ),
    ];
    for (id, arguments, want) in evaluate_cases {
        req(
            &mut lines,
            &mut expect,
            id,
            "tools/call",
            json!({"name": "evaluate", "arguments": arguments}),
            want,
        );
    }
    // Schema tools.
    req(
        &mut lines,
        &mut expect,
        "list-schemas",
        "tools/call",
        json!({"name": "list_schemas", "arguments": {"render": "json"}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "get-schema",
        "tools/call",
        json!({"name": "get_schema", "arguments": {"name": "health.output"}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "get-schema-missing",
        "tools/call",
        json!({"name": "get_schema", "arguments": {"name": "nope"}}),
        Expect::ToolError("NOT_FOUND"),
    );
    req(
        &mut lines,
        &mut expect,
        "validate-ok",
        "tools/call",
        json!({"name": "validate_asset", "arguments": {"schema": "poll.input", "asset": {"job_id": "job_1"}}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "validate-bad",
        "tools/call",
        json!({"name": "validate_asset", "arguments": {"schema": "poll.input", "asset": {"job_id": 1, "x": 2}}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "validate-no-schema",
        "tools/call",
        json!({"name": "validate_asset", "arguments": {"asset": {}}}),
        Expect::ToolError("INVALID_INPUT"),
    );
    req(
        &mut lines,
        &mut expect,
        "diff",
        "tools/call",
        json!({"name": "diff_assets", "arguments": {"base": {"a": 1, "b": [1]}, "new": {"a": 2, "c": null}}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "list-examples",
        "tools/call",
        json!({"name": "list_examples", "arguments": {}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "get-example",
        "tools/call",
        json!({"name": "get_example", "arguments": {"path": "protocol/examples/poll-request.json"}}),
        Expect::Ok,
    );
    req(
        &mut lines,
        &mut expect,
        "get-example-missing",
        "tools/call",
        json!({"name": "get_example", "arguments": {"path": "/etc/passwd"}}),
        Expect::ToolError("NOT_FOUND"),
    );
    req(
        &mut lines,
        &mut expect,
        "populate-no-backend",
        "tools/call",
        json!({"name": "populate_backend", "arguments": {"asset": {}, "validate_first": false}}),
        Expect::ToolError("UNSUPPORTED"),
    );
    // The job tools: unknown jobs and bad arguments.
    req(
        &mut lines,
        &mut expect,
        "poll-unknown",
        "tools/call",
        json!({"name": "poll", "arguments": {"job_id": "job_0000"}}),
        Expect::ToolError("JOB_NOT_FOUND"),
    );
    req(
        &mut lines,
        &mut expect,
        "cancel-unknown",
        "tools/call",
        json!({"name": "cancel", "arguments": {"job_id": "job_0000"}}),
        Expect::ToolError("JOB_NOT_FOUND"),
    );
    req(
        &mut lines,
        &mut expect,
        "poll-missing-id",
        "tools/call",
        json!({"name": "poll", "arguments": {}}),
        Expect::ToolError("INVALID_INPUT"),
    );
    req(
        &mut lines,
        &mut expect,
        "poll-id-number",
        "tools/call",
        json!({"name": "poll", "arguments": {"job_id": 7}}),
        Expect::ToolError("INVALID_INPUT"),
    );
    // Tool-call protocol errors.
    req(
        &mut lines,
        &mut expect,
        "call-unknown-tool",
        "tools/call",
        json!({"name": "rm_rf"}),
        Expect::Rpc(-32602),
    );
    req(
        &mut lines,
        &mut expect,
        "call-no-name",
        "tools/call",
        json!({"arguments": {}}),
        Expect::Rpc(-32602),
    );
    req(
        &mut lines,
        &mut expect,
        "call-args-array",
        "tools/call",
        json!({"name": "health", "arguments": [1]}),
        Expect::Rpc(-32602),
    );
    req(
        &mut lines,
        &mut expect,
        "unknown-method",
        "resources/subscribe",
        json!({}),
        Expect::Rpc(-32601),
    );
    req(
        &mut lines,
        &mut expect,
        "bad-meta",
        "ping",
        json!({"_meta": "x"}),
        Expect::Rpc(-32602),
    );
    // Envelope errors with a readable id.
    lines.push(br#"{"jsonrpc":"1.0","id":"wrong-version","method":"ping"}"#.to_vec());
    expect.insert("wrong-version".into(), Expect::Rpc(-32600));
    lines.push(br#"{"jsonrpc":"2.0","id":"method-number","method":42}"#.to_vec());
    expect.insert("method-number".into(), Expect::Rpc(-32600));
    lines.push(br#"{"jsonrpc":"2.0","id":"params-string","method":"ping","params":"x"}"#.to_vec());
    expect.insert("params-string".into(), Expect::Rpc(-32600));
    lines.push(br#"{"jsonrpc":"2.0","id":"no-method"}"#.to_vec());
    expect.insert("no-method".into(), Expect::Rpc(-32600));
    // Malformed lines answered with id null.
    let anonymous: Vec<Vec<u8>> = vec![
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec(), // invalid UTF-8
        br#"{"jsonrpc":"2.0","id":2,"method":"ping""#.to_vec(),             // truncated
        b"not json at all".to_vec(),
        br#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#.to_vec(), // batch
        b"[]".to_vec(),
        b"42".to_vec(),
        b"\"a string\"".to_vec(),
        br#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#.to_vec(), // id of wrong type
        br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","method":7}"#.to_vec(), // bad notification
        vec![b'{'; 2 * 1024 * 1024],                 // 2 MiB line
    ];
    anonymous_errors += anonymous.len();
    lines.extend(anonymous);
    // Things that must not be answered.
    lines.push(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-sent"}}"#.to_vec());
    lines.push(br#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#.to_vec());
    lines.push(br#"{"jsonrpc":"2.0","id":"client-response","result":{}}"#.to_vec());
    lines.push(b"   ".to_vec());
    // Still alive and answering after all of that.
    req(
        &mut lines,
        &mut expect,
        "final-health",
        "tools/call",
        json!({"name": "health"}),
        Expect::Ok,
    );
    (lines, expect, anonymous_errors)
}
