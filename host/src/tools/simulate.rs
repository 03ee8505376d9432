//! `simulate`: image a layout window at the ICCAD-2013 corners on a worker.
//! A job: returns `{job_id, status}` at once unless the call waits.

use libmcp::ReplayContract;
use reticle_protocol::wire::{JobContext, JobLimits, JobOutcome, RunRequest};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::{Detail, Tool, ToolContext, ToolDef, ToolResult};
use crate::supervisor::{Progress, SupervisorError};

/// Arguments the host consumes and does not forward to the worker.
const HOST_ONLY: [&str; 3] = ["wait", "render", "detail"];
/// Most runs of one Convergent job: the first, plus replays after its worker died
/// (DESIGN.md replay table). A job that kills its worker this often is likely poison.
const MAX_ATTEMPTS: u32 = 3;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "simulate",
        title: "Simulate printing",
        description: "Images a square window of a layout (.glp, .gds, .oas) with Hopkins/SOCS \
                      lithography at the ICCAD-2013 corners (nominal, max dose, min dose + \
                      defocus) and reports L2 against the drawn shapes, PV band and EPE. \
                      Returns a job_id at once (poll it) unless `wait` is true or the call \
                      carries a progressToken.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
}

async fn run(ctx: ToolContext, mut args: Map<String, Value>) -> ToolResult {
    let wait = args.get("wait").and_then(Value::as_bool).unwrap_or(false);
    for key in HOST_ONLY {
        args.remove(key);
    }
    let raw = args
        .get("layout")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let path = ctx.state.roots.resolve_read(&raw)?;
    args.insert("layout".into(), json!(path));
    let args_json = Value::Object(args).to_string();
    let allowed_roots: Vec<String> = ctx
        .state
        .roots
        .snapshot()
        .0
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let pool = std::sync::Arc::clone(&ctx.workers);
    ctx.run_as_job("simulate", wait, move |sink| async move {
        let supervisor = pool.get().await?;
        let job_id = sink.job_id();
        let mut attempt = 0;
        loop {
            attempt += 1;
            sink.attempt();
            let request = RunRequest {
                job_id: format!("{job_id}.{attempt}"),
                op: "simulate".into(),
                args_json: args_json.clone(),
                context: JobContext {
                    artifact_dir: None,
                    allowed_roots: allowed_roots.clone(),
                    limits: JobLimits::default(),
                },
            };
            let (tx, mut rx) = mpsc::channel::<Progress>(64);
            let forward_sink = sink.clone();
            let forward = tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    forward_sink.running();
                    forward_sink.report(p.done as f64, Some(p.total as f64), Some(p.message));
                }
            });
            // The job turns `running` with the worker's first progress frame; until then
            // it waits in the supervisor's queue and reads `queued`.
            let outcome = supervisor.run(request, tx).await;
            let _ = forward.await;
            match outcome {
                Ok(JobOutcome::Ok { payload_json }) => {
                    return serde_json::from_str(&payload_json).map_err(|e| {
                        ToolError::new(
                            ErrorCode::InternalError,
                            format!("worker sent invalid JSON: {e}"),
                        )
                    });
                }
                Ok(JobOutcome::Err { error }) => return Err(error),
                Err(SupervisorError::WorkerDied { cause, .. })
                    if attempt < MAX_ATTEMPTS && cause.replayable() =>
                {
                    // Convergent: the worker is a pure function of (request, files); run again.
                    tracing::warn!(
                        job_id,
                        attempt,
                        "worker died mid-job; replaying on a fresh worker"
                    );
                }
                Err(e) => return Err(e.to_tool_error()),
            }
        }
    })
    .await
}

fn porcelain(payload: &Value, _detail: Detail) -> String {
    if payload.get("metrics").is_none() {
        return format!(
            "{} {} (poll it with poll(job_id))",
            payload["job_id"].as_str().unwrap_or("?"),
            payload["status"].as_str().unwrap_or("?")
        );
    }
    let m = &payload["metrics"];
    format!(
        "{} {}: L2={} px PVB={} px EPE violations={}/{} | {}×{} px at {} nm | {} ({}) | {} ms",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        m["l2_px"],
        m["pvb_px"],
        m["epe"]["violations"],
        m["epe"]["checkpoints"],
        payload["grid"]["width"],
        payload["grid"]["height"],
        payload["pixel_nm"],
        payload["backend"]["kind"].as_str().unwrap_or("?"),
        payload["backend"]["adapter"].as_str().unwrap_or("?"),
        payload["timing_ms"]["total"],
    )
}
