//! `telemetry`: request counters, latencies and transport counters.

use libmcp::ReplayContract;
use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef};
use crate::state::HostState;
use reticle_dispatch::Dispatcher;
use reticle_dispatch::jobs::Jobs;
use reticle_dispatch::workers::WorkerPool;
use reticle_journal::Journal;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "telemetry",
        title: "Host telemetry",
        description: "Request, success, error and retry counts and per-method aggregates \
                      (count, errors, p50/p95/max latency) since the host started, the last \
                      method error, the most recent fault that restarted a worker, worker \
                      restarts, transport rejections, jobs, the replay journal, process \
                      basics, and where the JSONL event log is (its `seq` now) for \
                      post-incident reading.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
}

async fn run(ctx: ToolContext, _args: Map<String, Value>) -> PayloadResult {
    Ok(payload(
        &ctx.state,
        &ctx.workers,
        &ctx.jobs,
        ctx.journal.journal(),
        &ctx.dispatcher,
    ))
}

/// The telemetry payload (the tool's and `reticle ctl telemetry`'s).
pub fn payload(
    state: &HostState,
    workers: &WorkerPool,
    jobs: &Jobs,
    journal: &Journal,
    dispatcher: &Dispatcher,
) -> Value {
    let telemetry = state.telemetry(workers);
    let job_stats = jobs.stats();
    let totals = &telemetry.totals;
    json!({
        "schema_version": SCHEMA_VERSION,
        "totals": {
            "requests": totals.request_count(),
            "successes": totals.success_count(),
            "errors": totals.error_count(),
            "in_flight": state.in_flight(),
            // Every replay of a unit on a fresh worker: job units and the layout
            // tools' synchronous units alike (per method: `methods[].retry_count`).
            "retries": dispatcher.stats()["replays"],
            "restarts": state.restarts(),
        },
        "methods": state.method_aggregates(),
        "last_method_error": state.last_method_error(),
        "restart_fault": state.restart_fault(),
        "telemetry": telemetry,
        "frames": state.frames_snapshot(),
        "jobs": job_stats,
        "journal": journal.counts(),
        "dispatch": dispatcher.stats(),
        "process": state.process_snapshot(),
        "log_file": state.log_file.as_ref().map(|p| p.display().to_string()),
        "events": {
            "path": state.events.path(),
            "seq": state.events.seq(),
            "max_bytes": state.events.config().map(|c| c.max_bytes),
            "keep": state.events.config().map(|c| c.keep),
        },
    })
}

/// The text form of the payload.
pub fn porcelain(payload: &Value, detail: Detail) -> String {
    let totals = &payload["totals"];
    let f = &payload["frames"];
    let jobs = &payload["jobs"];
    let journal = &payload["journal"];
    let mut text = format!(
        "requests={} ok={} errors={} retries={} restarts={} in_flight={} | lines={} oversize={} parse_errors={} invalid={} | jobs={} completed={} failed={} cancelled={} | journal open={} outcome_unknown={} ambiguous={} exhausted={}",
        totals["requests"],
        totals["successes"],
        totals["errors"],
        totals["retries"],
        totals["restarts"],
        totals["in_flight"],
        f["lines_read"],
        f["oversize_rejected"],
        f["parse_errors"],
        f["invalid_requests"],
        jobs["submitted"],
        jobs["completed"],
        jobs["failed"],
        jobs["cancelled"],
        journal["open"],
        journal["open_by_knowledge"]["outcome_unknown"],
        journal["rejected_ambiguous"],
        journal["replay_exhausted"],
    );
    if let Some(e) = payload["last_method_error"].as_object() {
        text.push_str(&format!(
            "\nlast error: {} {} at {}",
            e["method"].as_str().unwrap_or("?"),
            e["error"].as_str().unwrap_or("?"),
            e["at"].as_str().unwrap_or("?")
        ));
    }
    if let Some(fault) = payload["restart_fault"].as_object() {
        text.push_str(&format!(
            "\nrestart fault: {} at {}",
            fault["detail"].as_str().unwrap_or("?"),
            fault["at"].as_str().unwrap_or("?")
        ));
    }
    let mut methods: Vec<&Value> = payload["methods"]
        .as_array()
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    methods.sort_by_key(|m| std::cmp::Reverse(m["count"].as_u64().unwrap_or(0)));
    let shown = if detail == Detail::Full {
        methods.len()
    } else {
        methods.len().min(5)
    };
    for m in &methods[..shown] {
        text.push_str(&format!(
            "\n{} n={} err={} p50={}ms p95={}ms max={}ms",
            m["method"].as_str().unwrap_or("?"),
            m["count"],
            m["errors"],
            m["p50_ms"],
            m["p95_ms"],
            m["max_ms"],
        ));
    }
    if shown < methods.len() {
        text.push_str(&format!("\n… {} more (detail=full)", methods.len() - shown));
    }
    if let Some(path) = payload["events"]["path"].as_str() {
        text.push_str(&format!(
            "\nevents: {path} (seq {})",
            payload["events"]["seq"]
        ));
    }
    text
}
