//! MCP tasks on the wire, for both eras, over the job table (a task id is a job id).
//!
//! - 2025-11-25 (core, experimental): task-augmented `tools/call` (`params.task`)
//!   answers a `CreateTaskResult`; `tasks/get`, `tasks/result` (blocks until
//!   terminal), `tasks/list` (paginated), `tasks/cancel`; `ttl` in milliseconds.
//! - 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): the
//!   server elects a task for a request whose per-request capabilities carry the
//!   extension (`resultType: "task"`); `tasks/get` inlines the result; `tasks/update`
//!   and `tasks/cancel` are acknowledgements; no `tasks/list`, no `tasks/result`;
//!   `ttlSeconds`, `pollIntervalMilliseconds`.
//!
//! Status mapping (D16): queued and running are `working`; completed is
//! `completed`; a tool error is `failed` in 2025-11-25 (its spec counts `isError`
//! results as failed) but `completed` with the `isError` result in the 2026
//! extension (whose `failed` is reserved for JSON-RPC errors, which a tool job never
//! produces); cancelled is `cancelled`.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use reticle_dispatch::jobs::{JobStatus, JobView};

/// `_meta` key tying a message to its task.
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// `_meta` key of the text a host may hand the model while a task runs (2025-11-25).
pub const META_MODEL_IMMEDIATE_RESPONSE: &str = "io.modelcontextprotocol/model-immediate-response";
/// Suggested polling interval: jobs take from under a second to minutes.
pub const POLL_INTERVAL_MS: u64 = 1000;
/// Tasks per `tasks/list` page.
pub const LIST_PAGE: usize = 50;

/// The 2025-11-25 `tasks` server capability: list, cancel, task-augmented `tools/call`.
pub fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// `_meta` naming the related task.
pub fn related_task_meta(task_id: &str) -> Value {
    json!({ META_RELATED_TASK: {"taskId": task_id} })
}

fn iso8601(at: SystemTime) -> String {
    time::OffsetDateTime::from(at)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The task status of a job in the 2025-11-25 core API.
pub fn legacy_status(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Queued | JobStatus::Running => "working",
        JobStatus::Completed => "completed",
        JobStatus::Failed => "failed",
        JobStatus::Cancelled => "cancelled",
    }
}

/// The task status of a job in the 2026-07-28 extension.
pub fn modern_status(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Queued | JobStatus::Running => "working",
        JobStatus::Completed | JobStatus::Failed => "completed",
        JobStatus::Cancelled => "cancelled",
    }
}

/// One line on where the job is, for `statusMessage`.
pub fn status_message(view: &JobView) -> String {
    let p = &view.progress;
    match view.status {
        JobStatus::Queued => format!("{} queued: waiting for a worker", view.tool),
        JobStatus::Running => {
            let mut text = format!("{} running", view.tool);
            if let Some(total) = p.total {
                text.push_str(&format!(" {}/{}", p.done, total));
            }
            if let Some(message) = &p.message {
                text.push_str(&format!(": {message}"));
            }
            if view.attempts > 1 {
                text.push_str(&format!(" (run {} after a worker loss)", view.attempts));
            }
            text
        }
        JobStatus::Completed => format!("{} completed", view.tool),
        JobStatus::Failed => match &view.error {
            Some(e) => format!("{} failed: {}: {}", view.tool, e.code, e.message),
            None => format!("{} failed", view.tool),
        },
        JobStatus::Cancelled => format!(
            "{} cancelled: {}",
            view.tool,
            view.cancel_reason.as_deref().unwrap_or("by request")
        ),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The 2025-11-25 `Task` of a job.
pub fn legacy_task(view: &JobView) -> Value {
    json!({
        "taskId": view.job_id,
        "status": legacy_status(view.status),
        "statusMessage": status_message(view),
        "createdAt": iso8601(view.created_at),
        "lastUpdatedAt": iso8601(view.updated_at),
        "ttl": millis(view.retention),
        "pollInterval": POLL_INTERVAL_MS,
    })
}

/// The 2026-07-28 `Task` of a job (without the inlined result; see [`modern_detailed`]).
pub fn modern_task(view: &JobView) -> Value {
    json!({
        "taskId": view.job_id,
        "status": modern_status(view.status),
        "statusMessage": status_message(view),
        "createdAt": iso8601(view.created_at),
        "lastUpdatedAt": iso8601(view.updated_at),
        "ttlSeconds": millis(view.retention).div_ceil(1000),
        "pollIntervalMilliseconds": POLL_INTERVAL_MS,
    })
}

/// The 2026-07-28 `DetailedTask` of `tasks/get`: the task, plus the call's result
/// once it completed (tool errors included, as `isError` results).
pub fn modern_detailed(view: &JobView, call_result: Option<Value>) -> Value {
    let mut task = modern_task(view);
    if modern_status(view.status) == "completed"
        && let Some(result) = call_result
    {
        task["result"] = result;
    }
    task
}

#[cfg(test)]
mod tests {
    use super::*;
    use reticle_dispatch::jobs::JobProgress;

    fn view(status: JobStatus) -> JobView {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        JobView {
            job_id: "job_1".into(),
            tool: "simulate".into(),
            status,
            progress: JobProgress {
                done: 2.0,
                total: Some(5.0),
                message: Some("imaging".into()),
            },
            result: None,
            error: None,
            age_ms: 0,
            attempts: 1,
            created_at: at,
            updated_at: at + Duration::from_millis(1500),
            retention: Duration::from_millis(60_500),
            presentation: Default::default(),
            cancel_reason: None,
        }
    }

    #[test]
    fn both_eras_map_statuses_and_units() {
        let running = view(JobStatus::Running);
        let legacy = legacy_task(&running);
        assert_eq!(legacy["status"], "working");
        assert_eq!(legacy["ttl"], 60_500);
        assert_eq!(legacy["createdAt"], "2026-05-28T20:26:40Z");
        assert_eq!(legacy["lastUpdatedAt"], "2026-05-28T20:26:41.5Z");
        assert_eq!(legacy["statusMessage"], "simulate running 2/5: imaging");
        let modern = modern_task(&running);
        assert_eq!(modern["ttlSeconds"], 61);
        assert_eq!(modern["pollIntervalMilliseconds"], POLL_INTERVAL_MS);
        assert!(modern.get("ttl").is_none());
        assert_eq!(legacy_status(JobStatus::Queued), "working");
        assert_eq!(legacy_status(JobStatus::Failed), "failed");
        assert_eq!(modern_status(JobStatus::Failed), "completed");
        assert_eq!(modern_status(JobStatus::Cancelled), "cancelled");
        let failed = modern_detailed(&view(JobStatus::Failed), Some(json!({"isError": true})));
        assert_eq!(failed["result"]["isError"], true);
        let working = modern_detailed(&running, Some(json!({})));
        assert!(working.get("result").is_none());
    }
}
