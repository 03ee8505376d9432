//! `poll` and `cancel`: the job table seen by the model.

use libmcp::ReplayContract;
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef};

pub(super) fn poll_tool() -> Tool {
    Tool::new(ToolDef {
        name: "poll",
        title: "Poll a job",
        description: "State of a job started by a long tool (simulate, evaluate, optimize): \
                      status (queued, running, completed, failed, cancelled), progress, and \
                      the result once completed. Finished jobs are kept for a while, then \
                      JOB_NOT_FOUND.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: poll,
        porcelain: Some(porcelain),
    })
}

pub(super) fn cancel_tool() -> Tool {
    Tool::new(ToolDef {
        name: "cancel",
        title: "Cancel a job",
        description: "Stops a job for real: its worker process is killed (freeing GPU memory) \
                      and the job reads `cancelled`. Cancelling a finished job changes nothing.",
        replay: ReplayContract::Convergent,
        read_only: false,
        handler: cancel,
        porcelain: Some(porcelain),
    })
}

fn job_id(args: &Map<String, Value>) -> &str {
    // The input schema requires a string job_id.
    args.get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

async fn poll(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    Ok(ctx.jobs.poll(job_id(&args))?.to_payload())
}

async fn cancel(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let view = ctx.jobs.cancel(job_id(&args), "cancel tool")?;
    let mut payload = view.to_payload();
    // Seed 002: the state after the call, the job and the table it belongs to.
    payload["state_after"] = json!({
        "job_id": view.job_id,
        "status": view.status,
        "cancel_reason": view.cancel_reason,
        "jobs_by_status": ctx.jobs.counts(),
    });
    Ok(payload)
}

fn porcelain(payload: &Value, detail: Detail) -> String {
    let progress = &payload["progress"];
    let mut text = format!(
        "{} {} {}: {}{}",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["tool"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        progress["done"],
        progress
            .get("total")
            .map(|t| format!("/{t}"))
            .unwrap_or_default(),
    );
    if let Some(message) = progress["message"].as_str() {
        text.push_str(&format!(" ({message})"));
    }
    if let Some(error) = payload.get("error") {
        text.push_str(&format!("\nerror {}: {}", error["code"], error["message"]));
    }
    if payload.get("result").is_some() {
        text.push_str(if detail == Detail::Full {
            "\nresult:\n"
        } else {
            "\nresult ready (render=json or detail=full to see it)"
        });
        if detail == Detail::Full {
            text.push_str(&payload["result"].to_string());
        }
    }
    text
}
