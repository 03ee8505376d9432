//! `telemetry`: request counters, latencies and transport counters.

use libmcp::ReplayContract;
use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Map, Value, json};

use super::{Detail, Tool, ToolContext, ToolDef, ToolResult};

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "telemetry",
        title: "Host telemetry",
        description: "Counters and latencies per method and tool since the host started, \
                      transport rejections (oversize, unparseable, invalid frames), jobs, the \
                      replay journal (requests by execution knowledge and replay contract, \
                      replays, probes, refusals), process basics, and the path of the JSONL \
                      log for post-incident reading.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
}

async fn run(ctx: ToolContext, _args: Map<String, Value>) -> ToolResult {
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "telemetry": ctx.state.telemetry(),
        "frames": ctx.state.frames_snapshot(),
        "jobs": ctx.jobs.stats(),
        "journal": ctx.journal.journal().counts(),
        "process": ctx.state.process_snapshot(),
        "log_file": ctx.state.log_file.as_ref().map(|p| p.display().to_string()),
    }))
}

fn porcelain(payload: &Value, detail: Detail) -> String {
    let t = &payload["telemetry"];
    let totals = &t["totals"];
    let f = &payload["frames"];
    let jobs = &payload["jobs"];
    let journal = &payload["journal"];
    let mut text = format!(
        "requests={} ok={} errors={} | lines={} oversize={} parse_errors={} invalid={} | jobs={} completed={} failed={} cancelled={} replays={} | journal open={} outcome_unknown={} ambiguous={} exhausted={}",
        totals["request_count"],
        totals["success_count"],
        totals["error_count"],
        f["lines_read"],
        f["oversize_rejected"],
        f["parse_errors"],
        f["invalid_requests"],
        jobs["submitted"],
        jobs["completed"],
        jobs["failed"],
        jobs["cancelled"],
        jobs["replays"],
        journal["open"],
        journal["open_by_knowledge"]["outcome_unknown"],
        journal["rejected_ambiguous"],
        journal["replay_exhausted"],
    );
    let mut methods: Vec<&Value> = t["methods"]
        .as_array()
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    methods.sort_by_key(|m| std::cmp::Reverse(m["request_count"].as_u64().unwrap_or(0)));
    let shown = if detail == Detail::Full {
        methods.len()
    } else {
        methods.len().min(5)
    };
    for m in &methods[..shown] {
        text.push_str(&format!(
            "\n{} n={} err={} avg={}ms max={}ms",
            m["method"].as_str().unwrap_or("?"),
            m["request_count"],
            m["error_count"],
            m["avg_latency_ms"],
            m["max_latency_ms"],
        ));
    }
    if shown < methods.len() {
        text.push_str(&format!("\n… {} more (detail=full)", methods.len() - shown));
    }
    text
}
