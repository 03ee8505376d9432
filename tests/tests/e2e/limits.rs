//! Issue 10.4 through the MCP server: each limit has a setting, and going over it is a
//! typed error naming the limit; a malformed setting stops the server at start.

use std::process::Command;
use std::time::{Duration, Instant};

use reticle_tests::{Host, LONG_JOB_TOOL, binary, fixtures_dir, long_job_with};
use serde_json::{Value, json};

fn call(host: &mut Host, id: &str, name: &str, arguments: Value) -> Value {
    let answer = host.request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    );
    answer["result"].clone()
}

fn error_of(result: &Value) -> &Value {
    assert_eq!(result["isError"], true, "expected an error: {result}");
    &result["structuredContent"]["error"]
}

/// A host reading only the fixtures, with its artifacts in a directory that lives as
/// long as the returned guard.
fn start(env: &[(&str, &str)]) -> (Host, tempfile::TempDir) {
    let roots = fixtures_dir().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().display().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("RETICLE_ALLOWED_ROOTS", roots.as_str()),
        ("RETICLE_BACKEND", "cpu"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.as_str()),
    ];
    all.extend_from_slice(env);
    (Host::start_initialized(&all), dir)
}

#[test]
fn layout_size_and_raster_limits_are_settings_with_typed_errors() {
    let (mut host, _artifacts) = start(&[
        ("RETICLE_MAX_LAYOUT_BYTES", "500"),
        ("RETICLE_MAX_RASTER_PIXELS", "1000"),
    ]);
    let fixtures = fixtures_dir();
    // observer_demo.gds is 906 bytes: over the 500-byte setting.
    let result = call(
        &mut host,
        "open",
        "open_layout",
        json!({"path": fixtures.join("layouts/observer_demo.gds")}),
    );
    let error = error_of(&result);
    assert_eq!(error["code"], "QUERY_TOO_LARGE", "{error}");
    assert_eq!(error["details"]["limit"], 500, "{error}");
    assert_eq!(error["details"]["bytes"], 906, "{error}");
    // lines_and_pad.glp (358 bytes) reads, but its default window is far over 1000 pixels.
    let result = call(
        &mut host,
        "sim",
        "simulate",
        json!({"layout": fixtures.join("layouts/lines_and_pad.glp"), "wait": true}),
    );
    let error = error_of(&result);
    assert_eq!(error["code"], "QUERY_TOO_LARGE", "{error}");
    assert_eq!(error["details"]["limit"], 1000, "{error}");
    assert!(
        error["details"]["pixels"].as_f64().unwrap() > 1000.0,
        "{error}"
    );
}

#[test]
fn active_jobs_and_shapes_per_query_are_settings_with_typed_errors() {
    let (mut host, _artifacts) = start(&[
        ("RETICLE_MAX_ACTIVE_JOBS", "1"),
        ("RETICLE_MAX_SHAPES", "2"),
    ]);
    let fixtures = fixtures_dir();
    let glp = fixtures.join("layouts/lines_and_pad.glp");
    let gds = fixtures.join("layouts/observer_demo.gds");
    // A long job (seconds on two cores) holds the only place.
    let first = call(
        &mut host,
        "long",
        LONG_JOB_TOOL,
        long_job_with(&[("render", json!("json"))]),
    );
    assert_eq!(first["isError"], false, "{first}");
    let job_id = first["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = call(
        &mut host,
        "second",
        "simulate",
        json!({"layout": glp, "wait": true}),
    );
    let error = error_of(&refused);
    assert_eq!(error["code"], "TOOL_LIMIT_EXCEEDED", "{error}");
    assert_eq!(error["recoverable"], true, "{error}");
    assert_eq!(error["details"]["max"], 1, "{error}");
    assert_eq!(
        error["details"]["setting"], "RETICLE_MAX_ACTIVE_JOBS",
        "{error}"
    );
    // The refused call left no job behind; cancelling the first frees the place.
    let cancelled = call(
        &mut host,
        "cancel",
        "cancel",
        json!({"job_id": job_id, "render": "json"}),
    );
    assert_eq!(
        cancelled["structuredContent"]["status"], "cancelled",
        "{cancelled}"
    );
    // observer_demo.gds has 6 shapes on layer 1/0: over the 2-shape setting for one window
    // around the layer (a tiled region flattens each tile's window on its own, D57).
    let started = Instant::now();
    let result = call(
        &mut host,
        "shapes",
        "simulate",
        json!({"layout": gds, "layer": "1/0", "tiling": "window", "wait": true}),
    );
    let error = error_of(&result);
    assert_eq!(error["code"], "QUERY_TOO_LARGE", "{error}");
    assert_eq!(error["details"]["what"], "shapes", "{error}");
    assert_eq!(error["details"]["limit"], 2, "{error}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let telemetry = call(&mut host, "tele", "telemetry", json!({"render": "json"}));
    let jobs = &telemetry["structuredContent"]["jobs"];
    assert_eq!(
        jobs["submitted"], 2,
        "the refused call is not a job: {jobs}"
    );
    // The same setting bounds what render_view flattens: the whole of observer_demo.gds
    // is more than 2 shapes.
    let opened = call(&mut host, "open", "open_layout", json!({"path": gds}));
    assert_eq!(opened["isError"], false, "{opened}");
    let sid = opened["structuredContent"]["session_id"].clone();
    let result = call(
        &mut host,
        "render",
        "render_view",
        json!({"session_id": sid}),
    );
    let error = error_of(&result);
    assert_eq!(error["code"], "QUERY_TOO_LARGE", "{error}");
    assert_eq!(error["details"]["limit"], 2, "{error}");
}

#[test]
fn a_malformed_limit_stops_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary("reticle"))
        .arg("serve")
        .env("MCP_READY_FILE", dir.path().join("ready"))
        .env("RETICLE_LOG_DIR", dir.path().join("logs"))
        .env("RETICLE_MAX_SHAPES", "lots")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        output.stdout.is_empty(),
        "stdout is the protocol: {output:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("RETICLE_MAX_SHAPES"), "{stderr}");
    assert!(!dir.path().join("ready").exists());
}

#[test]
fn live_layout_sessions_are_a_setting_with_a_typed_error() {
    let (mut host, _artifacts) = start(&[("RETICLE_MAX_SESSIONS", "1")]);
    let gds = fixtures_dir().join("layouts/observer_demo.gds");
    let opened = call(&mut host, "open-1", "open_layout", json!({"path": gds}));
    assert_eq!(opened["isError"], false, "{opened}");
    let sid = opened["structuredContent"]["session_id"].clone();
    let refused = call(&mut host, "open-2", "open_layout", json!({"path": gds}));
    let error = error_of(&refused);
    assert_eq!(error["code"], "TOOL_LIMIT_EXCEEDED", "{error}");
    assert_eq!(
        error["details"]["setting"], "RETICLE_MAX_SESSIONS",
        "{error}"
    );
    assert_eq!(error["recoverable"], true, "{error}");
    let closed = call(
        &mut host,
        "close",
        "close_session",
        json!({"session_id": sid}),
    );
    assert_eq!(closed["structuredContent"]["closed"], true, "{closed}");
    let again = call(&mut host, "open-3", "open_layout", json!({"path": gds}));
    assert_eq!(again["isError"], false, "{again}");
}

/// Job artifacts are bounded (D49): with `RETICLE_MAX_JOB_ARTIFACT_BYTES` below one image
/// set, each `simulate(images)` deletes the finished job's files before it writes its own,
/// so the disk holds one set at a time, and the newest set is always complete.
#[test]
fn job_artifacts_stay_under_their_byte_quota() {
    let (mut host, artifacts) = start(&[("RETICLE_MAX_JOB_ARTIFACT_BYTES", "100000")]);
    let glp = fixtures_dir().join("layouts/lines_and_pad.glp");
    let simulate = |host: &mut Host, id: &str| {
        let result = call(
            host,
            id,
            "simulate",
            json!({"layout": glp, "pixel_nm": 8, "images": true, "wait": true}),
        );
        assert_ne!(result["isError"], true, "{result}");
        result["structuredContent"]["images"].clone()
    };
    let paths = |images: &Value| -> Vec<std::path::PathBuf> {
        ["aerial", "resist", "printed"]
            .iter()
            .flat_map(|k| ["png", "npy"].map(|f| images[k][f]["path"].as_str().unwrap().into()))
            .collect()
    };
    let first = paths(&simulate(&mut host, "first"));
    let bytes = |files: &[std::path::PathBuf]| -> u64 {
        files
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum()
    };
    // One set of 256² images (two f32 arrays, one u8 array, three PNGs) is over the quota.
    assert!(bytes(&first) > 100_000, "{}", bytes(&first));
    let second = paths(&simulate(&mut host, "second"));
    assert!(
        first.iter().all(|p| !p.exists()),
        "the finished job's files went"
    );
    assert!(
        second.iter().all(|p| p.exists()),
        "the new job's files are whole"
    );
    let jobs_dir = artifacts.path().join("jobs");
    assert_eq!(std::fs::read_dir(&jobs_dir).unwrap().count(), 1);
}
