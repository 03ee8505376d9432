//! Faults provoked on purpose through the debug tools (`RETICLE_DEBUG_TOOLS=1`):
//! - a release build refuses a result that breaks its output schema with a typed error,
//!   in the call's answer and in `poll` (the check is not a debug-build feature);
//! - an observer-path call whose worker dies at its memory ceiling fails once, typed,
//!   and is not replayed.

use std::time::{Duration, Instant};

use reticle_tests::{Host, fixtures_dir, release_binary};
use serde_json::{Value, json};

fn env(
    artifacts: &str,
    roots: &str,
    extra: &[(&'static str, &'static str)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("RETICLE_DEBUG_TOOLS".into(), "1".into()),
        ("RETICLE_BACKEND".into(), "cpu".into()),
        ("RETICLE_ALLOWED_ROOTS".into(), roots.into()),
        ("KLAYOUT_MCP_ARTIFACT_ROOT".into(), artifacts.into()),
    ];
    env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    env
}

fn start(
    exe: Option<&std::path::Path>,
    extra: &[(&'static str, &'static str)],
) -> (Host, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let vars = env(
        &dir.path().display().to_string(),
        &fixtures_dir().display().to_string(),
        extra,
    );
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut host = match exe {
        Some(exe) => Host::start_exe(exe, &vars),
        None => Host::start_with(&vars),
    };
    let init = host.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (host, dir)
}

/// The typed error a result that breaks its output schema becomes.
fn assert_schema_violation(error: &Value) {
    assert_eq!(error["code"], "INTERNAL_ERROR", "{error}");
    assert_eq!(error["fault_class"], "invariant", "{error}");
    let paths: Vec<&str> = error["details"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no schema errors in {error}"))
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert!(paths.contains(&"/schema_version"), "{error}");
    assert!(paths.contains(&"/metrics"), "{error}");
}

#[test]
fn a_release_build_refuses_a_result_that_breaks_its_output_schema() {
    let exe = release_binary("reticle");
    release_binary("reticle-worker");
    let (mut host, _artifacts) = start(Some(&exe), &[]);
    let list = host.request(json!("list"), "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"debug_malformed_result"), "{names:?}");

    // A call that waits gets the error instead of the malformed payload.
    let result = host.call_tool(
        "waited",
        "debug_malformed_result",
        json!({"wait": true, "render": "json"}),
    );
    assert_eq!(
        result["isError"], true,
        "a malformed result passed: {result}"
    );
    assert_schema_violation(&result["structuredContent"]["error"]);

    // A job's result is checked before it is stored: poll answers the same error.
    let started = host.call_tool("started", "debug_malformed_result", json!({}));
    assert_eq!(started["isError"], false, "{started}");
    let job_id = started["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    let polled = loop {
        let polled = host.call_tool("poll", "poll", json!({"job_id": job_id, "render": "json"}));
        let status = polled["structuredContent"]["status"].clone();
        if status != "queued" && status != "running" {
            break polled;
        }
        assert!(Instant::now() < deadline, "the job never ended: {polled}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let view = &polled["structuredContent"];
    assert_eq!(view["status"], "failed", "{view}");
    assert!(
        view.get("result").is_none(),
        "a malformed result was stored: {view}"
    );
    assert_schema_violation(&view["error"]);
    let (status, _) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
}

#[test]
fn an_observer_call_over_the_memory_limit_is_not_replayed() {
    // 64 MiB resident, so RLIMIT_DATA 128 MiB: a 1 GiB allocation is refused at once.
    let (mut host, _artifacts) = start(None, &[("RETICLE_WORKER_MEMORY_MB", "64")]);
    let result = host.call_tool(
        "alloc",
        "debug_alloc",
        json!({"bytes": 1u64 << 30, "render": "json"}),
    );
    assert_eq!(result["isError"], true, "{result}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["code"], "RESOURCE_LIMIT", "{error}");
    assert_eq!(error["fault_class"], "resource", "{error}");
    assert_eq!(
        error["details"]["cause"]["kind"], "allocation_refused",
        "{error}"
    );
    let attempt = error["details"]["job_id"].as_str().unwrap();
    assert!(
        attempt.starts_with("lay_") && attempt.ends_with(".1"),
        "{attempt}"
    );
    let telemetry = host.call_tool("t", "telemetry", json!({"render": "json"}));
    let dispatch = &telemetry["structuredContent"]["dispatch"];
    assert_eq!(dispatch["attempts"], 1, "the call ran again: {dispatch}");
    assert_eq!(dispatch["replays"], 0, "{dispatch}");
    assert_eq!(dispatch["stopped_over_limit"], 1, "{dispatch}");
    assert_eq!(telemetry["structuredContent"]["journal"]["replays"], 0);
    // One worker died (and was replaced); no replacement ran the call.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let health = host.call_tool("h", "health", json!({"render": "json"}));
        let workers = &health["structuredContent"]["workers"]["workers"];
        let worker = &workers[0];
        if worker["state"] == "idle" {
            assert_eq!(worker["generation"], 2, "{worker}");
            assert_eq!(worker["jobs_completed"], 0, "{worker}");
            break;
        }
        assert!(Instant::now() < deadline, "no replacement worker: {health}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
}
