//! `health`: is the host up, and how is it doing.

use libmcp::ReplayContract;
use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Map, Value, json};

use super::{Detail, Tool, ToolContext, ToolDef, ToolResult};
use crate::mcp::era::supported_versions;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "health",
        title: "Host health",
        description: "Liveness and state of the reticle host: lifecycle, worker generation, \
                      restarts, last fault, uptime and process basics. Cheap; call it first \
                      when something looks wrong.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
}

async fn run(ctx: ToolContext, _args: Map<String, Value>) -> ToolResult {
    let host = ctx.state.health();
    let status = if host.consecutive_failures > 0 {
        "degraded"
    } else {
        "ok"
    };
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "server": {
            "name": "reticle",
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "protocol_versions": supported_versions(),
        },
        "host": host,
        "allowed_roots": {
            "roots": ctx.state.roots.snapshot().0,
            "source": ctx.state.roots.snapshot().1,
        },
        "process": ctx.state.process_snapshot(),
        "workers": ctx.workers.snapshot(),
        "jobs": ctx.jobs.counts(),
    }))
}

fn porcelain(payload: &Value, detail: Detail) -> String {
    let host = &payload["host"];
    let mut text = format!(
        "reticle {} {}: state={} worker={} generation={} restarts={} uptime={}s",
        payload["server"]["version"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        host["state"].as_str().unwrap_or("?"),
        host["worker_handshake"].as_str().unwrap_or("?"),
        host["generation"],
        host["restart_count"],
        host["uptime_ms"].as_u64().unwrap_or(0) / 1000,
    );
    if let Some(fault) = host.get("last_fault") {
        text.push_str(&format!("\nlast fault: {fault}"));
    }
    if detail == Detail::Full {
        let p = &payload["process"];
        text.push_str(&format!(
            "\nprocess: pid={} rss={} MiB threads={} fds={} in_flight={}",
            p["pid"],
            p["rss_bytes"].as_u64().unwrap_or(0) >> 20,
            p["threads"],
            p["open_fds"],
            p["in_flight_requests"],
        ));
    }
    text
}
