//! Gate G1: drive the host through every tool, every error path and a corpus
//! of malformed input, and check that every stdout line is a JSON-RPC 2.0
//! message, that every request is answered exactly once with the right code,
//! and that notifications are never answered.

use std::collections::BTreeMap;
use std::time::Duration;

use reticle_tests::{Host, check_jsonrpc_line, repo_root};
use serde_json::{Value, json};

mod corpus;

use corpus::corpus;

const MODERN: &str = "io.modelcontextprotocol/protocolVersion";

/// What a corpus entry must produce.
#[derive(Debug, Clone)]
enum Expect {
    /// A result (optionally a tool error with this code).
    Ok,
    /// A tool result with `isError` and this error code.
    ToolError(&'static str),
    /// A JSON-RPC error with this code.
    Rpc(i64),
}

#[test]
fn every_stdout_line_is_jsonrpc_and_every_request_is_answered_once() {
    let (lines, expect, anonymous_errors) = corpus();
    let root = repo_root();
    let artifacts = tempfile::tempdir().unwrap();
    let mut host = Host::start_with(&[
        ("RETICLE_BACKEND_URL", ""),
        ("RETICLE_ALLOWED_ROOTS", root.to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
        (
            "KLAYOUT_MCP_ARTIFACT_ROOT",
            artifacts.path().to_str().unwrap(),
        ),
    ]);
    for line in &lines {
        let mut line = line.clone();
        line.push(b'\n');
        host.write_raw(&line);
    }
    // Collect until every expected answer arrived, then close stdin.
    let mut by_id: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut null_id_errors = Vec::new();
    let mut notifications = Vec::new();
    let mut bad_lines = Vec::new();
    let mut consume =
        |line: String, by_id: &mut BTreeMap<String, Vec<Value>>| match check_jsonrpc_line(&line) {
            Err(e) => bad_lines.push(format!(
                "{e}: {}",
                line.chars().take(300).collect::<String>()
            )),
            Ok(message) => match message.get("id") {
                None => notifications.push(message),
                Some(Value::Null) => null_id_errors.push(message),
                Some(Value::String(id)) => by_id.entry(id.clone()).or_default().push(message),
                Some(other) => by_id.entry(other.to_string()).or_default().push(message),
            },
        };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while by_id.len() < expect.len() && std::time::Instant::now() < deadline {
        if let Some(line) = host.recv_line(Duration::from_secs(5)) {
            consume(line, &mut by_id);
        }
    }
    let (status, took) = host.close_and_wait();
    for line in host.drain_lines(Duration::from_millis(500)) {
        consume(line, &mut by_id);
    }
    assert!(
        bad_lines.is_empty(),
        "non-JSON-RPC lines on stdout:\n{}",
        bad_lines.join("\n")
    );
    assert!(status.success(), "exit status {status:?}");
    assert!(took < Duration::from_secs(1), "EOF exit took {took:?}");

    for (id, want) in &expect {
        let got = by_id
            .get(id)
            .unwrap_or_else(|| panic!("no answer for {id}"));
        assert_eq!(got.len(), 1, "{id} answered {} times: {got:?}", got.len());
        let message = &got[0];
        match want {
            Expect::Ok => {
                let result = message
                    .get("result")
                    .unwrap_or_else(|| panic!("{id}: {message}"));
                assert_ne!(
                    result.get("isError"),
                    Some(&Value::Bool(true)),
                    "{id}: {message}"
                );
            }
            Expect::ToolError(code) => {
                let result = &message["result"];
                assert_eq!(result["isError"], true, "{id}: {message}");
                assert_eq!(
                    result["structuredContent"]["error"]["code"], *code,
                    "{id}: {message}"
                );
                assert!(result["structuredContent"]["error"]["recoverable"].is_boolean());
                if *code == "INVALID_INPUT" {
                    let errors = result["structuredContent"]["error"]["details"]["errors"]
                        .as_array()
                        .unwrap();
                    assert!(!errors.is_empty(), "{id}: {message}");
                }
            }
            Expect::Rpc(code) => {
                assert_eq!(message["error"]["code"], *code, "{id}: {message}");
            }
        }
    }
    let unexpected: Vec<&String> = by_id.keys().filter(|k| !expect.contains_key(*k)).collect();
    assert!(
        unexpected.is_empty(),
        "answers to things that must not be answered: {unexpected:?}"
    );
    assert_eq!(
        null_id_errors.len(),
        anonymous_errors,
        "{null_id_errors:#?}"
    );
    let codes: Vec<i64> = null_id_errors
        .iter()
        .map(|m| m["error"]["code"].as_i64().unwrap())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == -32700).count(),
        3,
        "parse errors: {codes:?}"
    );
    let too_large = null_id_errors
        .iter()
        .find(|m| m["error"]["message"] == "payload_too_large")
        .expect("payload_too_large answer");
    let data = &too_large["error"]["data"];
    assert_eq!(data["ok"], false);
    assert_eq!(data["reason"], "validation_failed");
    assert_eq!(
        data["errors"],
        json!([{"path": "", "msg": "payload_too_large"}])
    );
    // Log notifications were requested (setLevel debug, per-request logLevel) and are well-formed.
    assert!(
        notifications
            .iter()
            .all(|n| n["method"] == "notifications/message"),
        "{notifications:?}"
    );
    assert!(
        !notifications.is_empty(),
        "no notifications/message despite logging opt-in"
    );

    // Era-specific shapes.
    let modern = &by_id["list-modern"][0]["result"];
    assert_eq!(modern["resultType"], "complete");
    assert!(modern["ttlMs"].as_u64().is_some());
    assert_eq!(modern["cacheScope"], "public");
    assert!(by_id["list"][0]["result"].get("resultType").is_none());
    let discover = &by_id["discover"][0]["result"];
    assert_eq!(discover["resultType"], "complete");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "reticle"
    );
    assert_eq!(by_id["init"][0]["result"]["protocolVersion"], "2025-11-25");
    let example = &by_id["get-example"][0]["result"]["structuredContent"];
    assert_eq!(example["validated"], true, "{example}");
    assert_eq!(example["schema"], "poll.input");
    let listed = by_id["list-examples"][0]["result"]["structuredContent"]["examples"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, 2, "the two shipped examples");
    let bad = &by_id["validate-bad"][0]["result"]["structuredContent"];
    assert_eq!(bad["ok"], false);
    assert_eq!(bad["errors"][0]["path"], "", "{bad}");
    assert_eq!(bad["errors"][1]["path"], "/job_id", "{bad}");
    assert_eq!(
        by_id["validate-ok"][0]["result"]["structuredContent"]["ok"],
        true
    );
    let patch = &by_id["diff"][0]["result"]["structuredContent"]["patch"];
    assert_eq!(
        patch,
        &json!([{"op": "replace", "path": "/a", "value": 2}, {"op": "remove", "path": "/b"}, {"op": "add", "path": "/c", "value": null}])
    );
    let simulated = &by_id["simulate-ok"][0]["result"]["structuredContent"];
    assert_eq!(simulated["status"], "completed", "{simulated}");
    assert!(
        simulated["metrics"]["epe"]["checkpoints"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{simulated}"
    );
    let opened = &by_id["open-layout"][0]["result"]["structuredContent"];
    assert!(
        opened["session_id"]
            .as_str()
            .is_some_and(|s| s.starts_with("ses_") && s.len() == 16),
        "{opened}"
    );
    assert_eq!(
        by_id["open-layout-oasis"][0]["result"]["structuredContent"]["bbox_um"],
        opened["bbox_um"]
    );
    let unsupported = &by_id["old-version"][0]["error"]["data"];
    assert_eq!(unsupported["requested"], "1900-01-01");
}

#[test]
fn tools_list_declares_closed_input_schemas_and_output_schemas() {
    let mut host = Host::start();
    let list = host.request(json!(1), "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "tools/list is sorted by name");
    for tool in tools {
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{tool}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 20),
            "{tool}"
        );
    }
}

/// Seed 000 G1 acceptance on the CLI: `reticle eval --report-level=detailed --format=json`
/// writes only JSON lines to stdout (progress and logs go to stderr).
#[test]
fn reticle_eval_stdout_is_json_lines_only() {
    let glp = repo_root().join("fixtures/layouts/lines_and_pad.glp");
    let out = std::process::Command::new(reticle_tests::binary("reticle"))
        .args([
            "eval",
            "--report-level=detailed",
            "--format=json",
            "--deck",
            "iccad13_m1",
        ])
        .arg(&glp)
        .env("RETICLE_ALLOWED_ROOTS", repo_root())
        .env("RETICLE_BACKEND", "cpu")
        .env(
            "RETICLE_WORKER_BIN",
            reticle_tests::binary("reticle-worker"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut n = 0;
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let _: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        n += 1;
    }
    assert_eq!(n, 1, "one JSON document");
}
