//! `health`: is the host up, and how is it doing.

use libmcp::ReplayContract;
use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef};
use crate::state::HostState;
use reticle_dispatch::Dispatcher;
use reticle_dispatch::jobs::Jobs;
use reticle_dispatch::workers::WorkerPool;
use reticle_transport::era::supported_versions;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "health",
        title: "Host health",
        description: "Liveness and state of the reticle host: lifecycle, worker generation, \
                      restarts, rollout state, last fault, uptime, process basics, and per \
                      worker its pid, binary and version, backend and adapter, GPU bytes and \
                      jobs run, plus the queue depth. Cheap; call it first when something \
                      looks wrong.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
}

async fn run(ctx: ToolContext, _args: Map<String, Value>) -> PayloadResult {
    Ok(payload(
        &ctx.state,
        &ctx.scope.roots,
        &ctx.workers,
        &ctx.jobs,
        &ctx.dispatcher,
    ))
}

/// The health payload (the tool's and `reticle ctl health`'s).
pub fn payload(
    state: &HostState,
    roots: &crate::confine::AllowedRoots,
    workers: &WorkerPool,
    jobs: &Jobs,
    dispatcher: &Dispatcher,
) -> Value {
    let host = state.health(workers);
    let pool = workers.snapshot();
    let rollout_failed = pool
        .as_ref()
        .and_then(|p| p.rollout.last.as_ref())
        .is_some_and(|last| !last.ok);
    // The summary says whether something is wrong; a pool still starting is not (the
    // lifecycle says `starting`), one that failed to start is.
    let status = if host.consecutive_failures > 0 || rollout_failed || workers.failed() {
        "degraded"
    } else {
        "ok"
    };
    json!({
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "server": {
            "name": "reticle",
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "protocol_versions": supported_versions(),
            "reexecs": state.reexecs(),
        },
        "host": host,
        "allowed_roots": {
            "roots": roots.snapshot().0,
            "source": roots.snapshot().1,
        },
        "process": state.process_snapshot(),
        "workers": pool,
        "executor": dispatcher.executor().health(),
        "jobs": jobs.counts(),
        "events": {
            "path": state.events.path(),
            "seq": state.events.seq(),
        },
    })
}

/// The text form of the payload.
pub fn porcelain(payload: &Value, detail: Detail) -> String {
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
        text.push_str(&format!(
            "\nlast fault: {} {}: {}",
            fault["class"].as_str().unwrap_or("?"),
            fault["code"].as_str().unwrap_or("?"),
            fault["detail"].as_str().unwrap_or("?")
        ));
    }
    let pool = &payload["workers"];
    if let Some(workers) = pool["workers"].as_array() {
        text.push_str(&format!(
            "\nqueue={} running={} rollout={} release={}",
            pool["queued_jobs"],
            pool["running_jobs"],
            pool["rollout"]["state"].as_str().unwrap_or("?"),
            pool["rollout"]["release"]
        ));
        if let Some(last) = pool["rollout"]["last"].as_object() {
            text.push_str(&format!(
                "\nlast rollout: {} {}",
                if last["ok"] == true { "ok" } else { "FAILED" },
                last["message"].as_str().unwrap_or("")
            ));
        }
        for w in workers {
            text.push_str(&format!(
                "\nworker slot={} pid={} {} {} backend={}:{} gpu_bytes={} jobs={} v{}",
                w["slot"],
                w["pid"],
                w["state"].as_str().unwrap_or("?"),
                w["mode"].as_str().unwrap_or("?"),
                w["backend"]["kind"].as_str().unwrap_or("?"),
                w["backend"]["adapter"].as_str().unwrap_or("?"),
                w["device_bytes"],
                w["jobs_completed"],
                w["worker_version"].as_str().unwrap_or("?"),
            ));
            if detail == Detail::Full {
                text.push_str(&format!(" exe={}", w["exe"].as_str().unwrap_or("?")));
            }
        }
    } else {
        text.push_str("\nworkers: not started");
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
