//! `reticle bench output-schema`: what the output-schema check costs per call.
//!
//! Every answer is checked against its tool's output schema (and a job's result once more
//! before the job table stores it). The benchmark times that check on representative
//! payloads and prints it as a ratio to a reference every answer pays anyway in the same
//! process: serializing the payload (the response line is at least that). Payloads are
//! built here, with the shapes the tools return: a small synchronous answer, a job
//! handle, and violation reports with 0, 100 and 10 000 records.

use std::hint::black_box;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Value, json};

use reticle_dispatch::jobs::{JobProgress, JobStatus};
use reticle_tools::{JobStarted, Tool, ToolOutput, ToolRegistry};

/// Rounds per measurement; the median round is reported.
const ROUNDS: usize = 5;

/// `reticle bench output-schema [--iterations N] [--json]`.
pub fn output_schema(args: &[String]) -> ExitCode {
    let mut iterations = 200u32;
    let mut as_json = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => as_json = true,
            "--iterations" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => iterations = n,
                _ => return usage("--iterations needs a positive number"),
            },
            "--help" | "-h" => return usage(""),
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let registry = ToolRegistry::standard();
    let (Some(evaluate), Some(close)) = (registry.get("evaluate"), registry.get("close_session"))
    else {
        eprintln!("reticle bench: the evaluate and close_session tools are missing");
        return ExitCode::FAILURE;
    };
    let mut rows = Vec::new();
    let small = json!({"schema_version": SCHEMA_VERSION, "session_id": "ses_0123456789ab",
                       "closed": true, "artifact_dir_deleted": true,
                       "state_after": {"session_id": "ses_0123456789ab", "open": false, "live_sessions": 0}});
    rows.push(measure(
        "close_session answer",
        close,
        &small,
        false,
        iterations,
    ));
    let started = JobStarted {
        job_id: "job_00112233445566778899aabbccddeeff".into(),
        status: JobStatus::Queued,
        progress: JobProgress::default(),
    };
    rows.push(measure_started(evaluate, &started, iterations));
    for records in [0usize, 100, 10_000] {
        let name = format!("evaluate report, {records} violations");
        rows.push(measure(&name, evaluate, &report(records), true, iterations));
    }
    let mut out = std::io::stdout().lock();
    let written = if as_json {
        writeln!(out, "{}", Value::Array(rows))
    } else {
        let us = |r: &Value, key: &str| {
            r[key]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
        };
        writeln!(
            out,
            "{:<36} {:>10} {:>14} {:>14} {:>14} {:>8}",
            "payload", "bytes", "answer µs", "store µs", "serialize µs", "ratio"
        )
        .and_then(|()| {
            rows.iter().try_for_each(|r| {
                writeln!(
                    out,
                    "{:<36} {:>10} {:>14} {:>14} {:>14} {:>7.2}×",
                    r["payload"].as_str().unwrap_or("?"),
                    r["bytes"].as_u64().unwrap_or(0),
                    us(r, "answer_check_us"),
                    us(r, "store_check_us"),
                    us(r, "serialize_us"),
                    r["ratio"].as_f64().unwrap_or(0.0),
                )
            })
        })
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn usage(problem: &str) -> ExitCode {
    if !problem.is_empty() {
        eprintln!("reticle bench output-schema: {problem}");
    }
    eprintln!("usage: reticle bench output-schema [--iterations N] [--json]");
    ExitCode::from(2)
}

/// Median time per call of `f` over [`ROUNDS`] rounds of `iterations` calls.
fn per_call(iterations: u32, mut f: impl FnMut()) -> Duration {
    let mut rounds: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed() / iterations
        })
        .collect();
    rounds.sort();
    rounds[ROUNDS / 2]
}

/// One row: the check of `payload` as `tool`'s answer against serializing it; for a job
/// result also the check before the job table stores it (a waited call pays both).
fn measure(name: &str, tool: &Tool, payload: &Value, job: bool, iterations: u32) -> Value {
    let answer = if job {
        let mut answer = payload.clone();
        answer["job_id"] = json!("job_00112233445566778899aabbccddeeff");
        answer["status"] = json!("completed");
        ToolOutput::Finished(answer)
    } else {
        ToolOutput::Finished(payload.clone())
    };
    let answer_violations = tool.output_violations(&answer);
    let result_violations = tool.result_violations(payload);
    assert!(
        answer_violations.is_empty() && result_violations.is_empty(),
        "the benchmark's payload {name:?} must pass the schema: as the answer {answer_violations:?}, \
         as the stored result {result_violations:?}"
    );
    let check = per_call(iterations, || {
        black_box(tool.output_violations(black_box(&answer)).len());
    });
    let store = job.then(|| {
        per_call(iterations, || {
            black_box(tool.result_violations(black_box(payload)).len());
        })
    });
    let ToolOutput::Finished(answer) = &answer else {
        unreachable!("built as Finished above")
    };
    let serialize = per_call(iterations, || {
        black_box(
            serde_json::to_string(black_box(answer))
                .map(|s| s.len())
                .ok(),
        );
    });
    row(name, answer.to_string().len(), check, store, serialize)
}

fn measure_started(tool: &Tool, started: &JobStarted, iterations: u32) -> Value {
    let answer = ToolOutput::Started(started.clone());
    let check = per_call(iterations, || {
        black_box(tool.output_violations(black_box(&answer)).len());
    });
    let payload = started.to_payload();
    let serialize = per_call(iterations, || {
        black_box(
            serde_json::to_string(black_box(&payload))
                .map(|s| s.len())
                .ok(),
        );
    });
    row(
        "evaluate job handle",
        payload.to_string().len(),
        check,
        None,
        serialize,
    )
}

/// A row: times per call in µs and the checks' ratio to serializing (the answer check,
/// and for a job the store check too: what one waited call pays).
fn row(
    name: &str,
    bytes: usize,
    check: Duration,
    store: Option<Duration>,
    serialize: Duration,
) -> Value {
    let us = |d: Duration| (d.as_secs_f64() * 1e7).round() / 10.0;
    let total = check + store.unwrap_or_default();
    json!({
        "payload": name,
        "bytes": bytes,
        "answer_check_us": us(check),
        "store_check_us": store.map(us),
        "serialize_us": us(serialize),
        "ratio": ((total.as_secs_f64() / serialize.as_secs_f64().max(1e-9)) * 100.0).round() / 100.0,
    })
}

/// A violation report with `records` violation records, shaped as `evaluate` returns it
/// at `report_level: detailed` (every seed 000 §2 field of a record).
fn report(records: usize) -> Value {
    let violations: Vec<Value> = (0..records)
        .map(|i| {
            let x = (i % 100) as f64 * 20.5;
            let y = (i / 100) as f64 * 20.5;
            json!({
                "violation_id": format!("rv1:0123456789abcdef:fedcba9876543210:M1.W.1:{}:{}:T_0_0:00112233aabbccdd:{i}", i * 1000, i * 500),
                "violation_group_id": "00112233aabbccdd",
                "rule_id": "M1.W.1",
                "rule_deck": "iccad13_m1",
                "rule_kind": "width",
                "applies_to": "mask",
                "severity": "error",
                "layer": "1/0",
                "coordinate_frame": "input_layout_native",
                "location_nm": [x, y],
                "bbox_nm": [x - 10.0, y - 10.0, x + 10.0, y + 10.0],
                "measured": 30.0,
                "required": 40.0,
                "unit": "nm",
                "marker": {"type": "edge_pair", "edges": [[x, y, x + 10.0, y], [x, y + 30.0, x + 10.0, y + 30.0]]},
                "transforms": [],
                "context": {"tile_id": "T_0_0", "tile_origin_nm": [0.0, 0.0], "tile_size_nm": 1024.0, "tile_local_nm": [x, y]},
                "dedup_strategy": if i % 4 == 0 { "canonical" } else { "shadow" },
                "dedup_provenance": {
                    "rule_deck_hash": format!("sha256:{}", "ab".repeat(32)),
                    "radius_nm": 100.0,
                    "rule_id": "M1.W.1",
                    "canonical_location_nm": [x, y],
                    "canonical_violation_id": "rv1:0123456789abcdef:fedcba9876543210:M1.W.1:0:0:T_0_0:00112233aabbccdd:0",
                    "group_size": 4,
                },
            })
        })
        .collect();
    let detailed = records > 0;
    let mut payload = json!({
        "schema_version": SCHEMA_VERSION,
        "report_level": if detailed { "detailed" } else { "aggregate" },
        "layout": {"name": "bench.gds", "sha256": "ab".repeat(32), "format": "gds", "dbu_nm": 1.0, "layer": "1/0", "polygons_in_window": 79},
        "deck": {"name": "iccad13_m1", "version": "1", "hash": format!("sha256:{}", "cd".repeat(32)), "source": "shipped", "rules_on_layer": 3},
        "window_nm": {"left": 0.0, "bottom": 0.0, "right": 2048.0, "top": 2048.0},
        "pixel_nm": 1.0,
        "model": {"kind": "hopkins", "period_nm": 2048.0, "focus_kernels": 24},
        "coordinate_frame": "input_layout_native",
        "tiling": {"tile_nm": 1024.0, "origin_nm": [0.0, 0.0]},
        "metrics": {"l2_px": 116_661, "pvb_px": 42_918, "epe_mean_nm": 4.2, "epe_max_nm": 21.0, "epe": {"checkpoints": 400, "violations": 12, "mean_abs_nm": 4.2, "max_abs_nm": 21.0}, "mrc_pass_rate": 0.5, "drc_pass_rate": 0.75},
        "counts": {"records": records, "groups": records / 4, "groups_by_severity": {"error": records / 4},
                   "by_rule": [{"rule_id": "M1.W.1", "kind": "width", "applies_to": "mask", "severity": "error", "engine_path": "mrc.standard", "checked": true, "records": records, "groups": records / 4}]},
        "degraded_to_aggregate": false,
        "truncation": {"truncated": false, "max_violations": 100_000, "total_records": records, "returned": records, "on_exceeded": "truncate"},
    });
    if detailed {
        payload["violations"] = Value::Array(violations);
    }
    payload
}
