//! `reticle optimize` (issue 28 item 5, seed 000 G3, D183): the command line prints the
//! bytes of the tool's `structuredContent` for the same arguments (less the job envelope,
//! `job_id` and `status`, and with the CLI's `--out` where the tool has its job directory),
//! with progress on stderr; a bad argument prints the tool's error object and exits 1.

use std::process::Command;

use reticle_tests::{Host, binary, fixtures_dir};
use serde_json::{Value, json};

fn layout() -> String {
    fixtures_dir()
        .join("layouts/acceptance_100x4tiles.gds")
        .display()
        .to_string()
}

fn deck() -> String {
    fixtures_dir()
        .join("decks/acceptance_width.json")
        .display()
        .to_string()
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary("reticle"))
        .arg("optimize")
        .args(args)
        .env("RETICLE_ALLOWED_ROOTS", fixtures_dir())
        .env("RETICLE_BACKEND", "cpu")
        .env("RETICLE_WORKERS", "2")
        .env("RETICLE_WORKER_BIN", binary("reticle-worker"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn cli_prints_the_tools_structured_content_for_a_region() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cli");
    let (layout, deck) = (layout(), deck());
    let (code, stdout, stderr) = cli(&[
        "--deck",
        &deck,
        "--box",
        "0.5,0.5,1.5,1.5",
        "--pixel-nm",
        "8",
        "--out",
        out.to_str().unwrap(),
        &layout,
    ]);
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    assert!(
        stderr.contains("optimize: ["),
        "progress on stderr: {stderr}"
    );
    let cli_bytes = stdout.strip_suffix('\n').expect("one line").to_owned();
    assert!(!cli_bytes.contains('\n'));
    let out_dir = out.canonicalize().unwrap().display().to_string();

    let artifacts = tmp.path().join("artifacts");
    let mut host = Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", fixtures_dir().to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
        ("RETICLE_WORKERS", "2"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.to_str().unwrap()),
    ]);
    // A waited region optimize answers when it is done (a minute under the load of the
    // whole e2e run).
    let r = host.request_within(
        json!("opt"),
        "tools/call",
        json!({"name": "optimize", "arguments": {
            "layout": layout, "deck": deck, "box_um": [0.5, 0.5, 1.5, 1.5], "pixel_nm": 8,
            "wait": true, "render": "json"}}),
        std::time::Duration::from_secs(300),
    );
    assert_ne!(r["result"]["isError"], true, "{r}");
    let mut waited = r["result"]["structuredContent"].clone();
    let tool_dir = waited["artifacts"]["dir"].as_str().unwrap().to_owned();
    assert_eq!(waited["status"], "completed");
    let envelope = waited.as_object_mut().unwrap();
    envelope.remove("job_id");
    envelope.remove("status");
    let tool_bytes = serde_json::to_string(&waited).unwrap();
    assert_eq!(
        tool_bytes.replace(&tool_dir, &out_dir),
        cli_bytes,
        "the tool's structuredContent (job envelope off, its job directory as --out) vs the CLI"
    );
    // The written layouts are the same bytes.
    let path = |v: &Value| v["layout_out"]["path"].as_str().unwrap().to_owned();
    let cli_payload: Value = serde_json::from_str(&cli_bytes).unwrap();
    assert_eq!(
        std::fs::read(path(&waited)).unwrap(),
        std::fs::read(path(&cli_payload)).unwrap()
    );
}

#[test]
fn a_bad_argument_prints_the_tools_error_and_exits_1() {
    let (code, stdout, _) = cli(&["--layer", "eleven", &layout()]);
    assert_eq!(code, 1, "{stdout}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["error"]["code"], "INVALID_INPUT", "{v}");
    assert!(v["schema_version"].is_string(), "{v}");
}

/// A host for the tool side of a comparison, its artifacts in `artifacts`.
fn tool_host(artifacts: &std::path::Path) -> Host {
    Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", fixtures_dir().to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
        ("RETICLE_WORKERS", "2"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.to_str().unwrap()),
    ])
}

#[test]
fn cli_violation_ids_print_the_tools_bytes_with_each_ids_status() {
    let tmp = tempfile::tempdir().unwrap();
    let (layout, deck) = (layout(), deck());
    // Ids from a tiled evaluation of a box of the acceptance layout.
    let mut host = tool_host(&tmp.path().join("eval-artifacts"));
    let r = host.call_tool_within(
        "eval",
        "evaluate",
        json!({"layout": layout, "deck": deck, "box_um": [0.5, 0.5, 1.5, 1.5], "pixel_nm": 8,
               "report_level": "detailed", "wait": true, "render": "json"}),
        std::time::Duration::from_secs(300),
    );
    assert_ne!(r["isError"], true, "{r}");
    let records = r["structuredContent"]["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        records.len() >= 2,
        "the box has fewer than two records: {r}"
    );
    let ids: Vec<String> = records[..2]
        .iter()
        .map(|v| v["violation_id"].as_str().unwrap().to_owned())
        .collect();
    drop(host);

    let out = tmp.path().join("cli");
    let joined = ids.join(",");
    let (code, stdout, stderr) = cli(&[
        "--deck",
        &deck,
        "--violation-ids",
        &joined,
        "--pixel-nm",
        "8",
        "--out",
        out.to_str().unwrap(),
        &layout,
    ]);
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    let cli_bytes = stdout.strip_suffix('\n').expect("one line").to_owned();
    let cli_payload: Value = serde_json::from_str(&cli_bytes).unwrap();
    let target = &cli_payload["target"];
    assert_eq!(target["mode"], "violation_ids", "{target}");
    assert_eq!(target["resolved_from"], "violation_ids", "{target}");
    let statuses = target["ids"].as_array().unwrap();
    assert_eq!(statuses.len(), 2, "{target}");
    for (s, id) in statuses.iter().zip(&ids) {
        assert_eq!(s["violation_id"], json!(id), "{s}");
        // Evaluated on this layout with these arguments: each id's record is found.
        assert_ne!(s["status"], "not_found", "{s}");
        assert_eq!(s["resolved"], json!(s["status"] == "resolved"), "{s}");
    }

    // The tool on a new connection, with the same arguments: the same bytes.
    let mut host = tool_host(&tmp.path().join("artifacts"));
    let r = host.call_tool_within(
        "opt",
        "optimize",
        json!({"layout": layout, "deck": deck, "violation_ids": ids, "pixel_nm": 8,
               "wait": true, "render": "json"}),
        std::time::Duration::from_secs(300),
    );
    assert_ne!(r["isError"], true, "{r}");
    let mut waited = r["structuredContent"].clone();
    let tool_dir = waited["artifacts"]["dir"].as_str().unwrap().to_owned();
    let envelope = waited.as_object_mut().unwrap();
    envelope.remove("job_id");
    envelope.remove("status");
    let out_dir = out.canonicalize().unwrap().display().to_string();
    assert_eq!(
        serde_json::to_string(&waited)
            .unwrap()
            .replace(&tool_dir, &out_dir),
        cli_bytes,
        "the tool's structuredContent vs the CLI for violation_ids"
    );
}

#[test]
fn cli_job_id_is_refused_with_the_tools_error() {
    // A one-shot command has no job table (D212): the refusal says so and what to pass.
    let (code, stdout, _) = cli(&["--job-id", "job_1", &layout()]);
    assert_eq!(code, 1, "{stdout}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["error"]["code"], "INVALID_INPUT", "{v}");
    assert_eq!(v["error"]["details"]["argument"], "job_id", "{v}");
    assert!(v["error"]["details"]["hint"].is_string(), "{v}");
    // (A region's tiles on Slurm are no longer refused, D253: tests/tests/slurm/optimize.rs
    // runs them on the dev cluster.)
}
