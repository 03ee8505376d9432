//! The MCP tasks API of both eras over the job table (D16): a task-augmented call's
//! `CreateTaskResult`, following a 2025-11-25 task with status and progress
//! notifications, and `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`. The wire
//! shapes are [`super::tasks`]'.

use std::sync::Arc;

use reticle_protocol::ToolError;
use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};

use super::server::Server;
use super::tasks::{self, LIST_PAGE, META_MODEL_IMMEDIATE_RESPONSE};
use reticle_dispatch::jobs::{JobOptions, JobView};
use reticle_tools::{CallOutcome, TaskRequest};
use reticle_transport::era::{RequestMeta, RpcError};

impl Server {
    /// The `CreateTaskResult` of a call that ran as a task. A call that failed before
    /// its job started (bad arguments, a path outside the roots) still gets a task,
    /// already failed, so the client finds the error where it looks for results.
    pub(super) async fn task_created(
        &self,
        tool: &str,
        task: &TaskRequest,
        outcome: CallOutcome,
        meta: &RequestMeta,
    ) -> Value {
        let job_id = match outcome.started {
            Some(job_id) => job_id,
            None => {
                let error = outcome.error.unwrap_or_else(|| {
                    ToolError::new(
                        reticle_protocol::ErrorCode::InternalError,
                        "the tool neither started a job nor failed",
                    )
                });
                let options = JobOptions {
                    ttl: task.ttl,
                    ..JobOptions::default()
                };
                let rx = self
                    .shared
                    .jobs
                    .submit_with(tool, options, |_| async move { Err(error) });
                rx.borrow().job_id.clone()
            }
        };
        let view = match self.shared.jobs.poll(&job_id) {
            Ok(view) => view,
            Err(e) => {
                tracing::error!(job_id, error = %e, "a task's job vanished at creation");
                return reticle_tools::error_result(&e);
            }
        };
        if meta.is_modern() {
            let mut created = tasks::modern_task(&view);
            created["resultType"] = json!("task");
            return created;
        }
        self.follow_task(
            &job_id,
            meta.progress_token.clone(),
            tasks::legacy_status(view.status),
        );
        let mut meta_out = tasks::related_task_meta(&job_id);
        meta_out[META_MODEL_IMMEDIATE_RESPONSE] = json!(format!(
            "{tool} is running as task {job_id}; its result will be available from tasks/result"
        ));
        json!({"task": tasks::legacy_task(&view), "_meta": meta_out})
    }

    /// Follows a 2025-11-25 task until it ends: `notifications/progress` for the
    /// call's `progressToken` (valid for the task's lifetime) and
    /// `notifications/tasks/status` on every status change after `last_told`, the
    /// status the client last heard (a change before this task runs is sent too).
    pub(super) fn follow_task(
        &self,
        job_id: &str,
        progress_token: Option<Value>,
        last_told: &'static str,
    ) {
        let Ok(mut rx) = self.shared.jobs.subscribe(job_id) else {
            return;
        };
        let out = self.shared.out.clone();
        let watches = Arc::clone(&self.task_watches);
        lock(&watches).insert(job_id.to_owned(), progress_token.clone());
        let job_id = job_id.to_owned();
        tokio::spawn(async move {
            let current = rx.borrow_and_update().clone();
            let mut last_status = tasks::legacy_status(current.status);
            if last_status != last_told {
                out.send(
                    &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                    "params": tasks::legacy_task(&current)}),
                )
                .await;
            }
            if current.status.is_terminal() {
                lock(&watches).remove(&job_id);
                return;
            }
            let mut last_progress = f64::NEG_INFINITY;
            while rx.changed().await.is_ok() {
                let view = rx.borrow_and_update().clone();
                if let Some(token) = &progress_token
                    && view.progress.done > last_progress
                {
                    last_progress = view.progress.done;
                    let mut params = reticle_tools::progress_params(token, &view);
                    params["_meta"] = tasks::related_task_meta(&view.job_id);
                    out.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
                        .await;
                }
                let status = tasks::legacy_status(view.status);
                if status != last_status {
                    last_status = status;
                    out.send(
                        &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                        "params": tasks::legacy_task(&view)}),
                    )
                    .await;
                }
                if view.status.is_terminal() {
                    break;
                }
            }
            lock(&watches).remove(&job_id);
        });
    }

    fn task_view(&self, params: &Map<String, Value>) -> Result<JobView, RpcError> {
        let task_id = task_id(params)?;
        self.shared
            .jobs
            .poll(task_id)
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))
    }

    pub(super) fn tasks_get(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        let view = self.task_view(params)?;
        if meta.is_modern() {
            let result = view
                .status
                .is_terminal()
                .then(|| self.tools.deferred_result(&view, &self.shared.scope));
            return Ok(tasks::modern_detailed(&view, result));
        }
        Ok(tasks::legacy_task(&view))
    }

    /// `tasks/result`: waits for the task to end (without cancelling it if this
    /// request is cancelled) and returns what the call would have returned.
    pub(super) async fn tasks_result(
        &self,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let task_id = task_id(params)?.to_owned();
        let mut rx = self
            .shared
            .jobs
            .subscribe(&task_id)
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        loop {
            if rx.borrow_and_update().status.is_terminal() {
                break;
            }
            if rx.changed().await.is_err() {
                return Err(RpcError::invalid_params(
                    "Failed to retrieve task: Task has expired",
                ));
            }
        }
        let view = self
            .shared
            .jobs
            .poll(&task_id)
            .unwrap_or_else(|_| rx.borrow().clone());
        let mut result = self.tools.deferred_result(&view, &self.shared.scope);
        result["_meta"] = tasks::related_task_meta(&task_id);
        Ok(result)
    }

    pub(super) fn tasks_list(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.as_str()),
            Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
        };
        let (views, next) = self
            .shared
            .jobs
            .list_page(cursor, LIST_PAGE)
            .map_err(|_| RpcError::invalid_params("Invalid cursor"))?;
        let mut result = json!({"tasks": views.iter().map(tasks::legacy_task).collect::<Vec<_>>()});
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(result)
    }

    /// `tasks/cancel`: SIGKILLs the job's worker like the `cancel` tool. 2025-11-25
    /// answers the cancelled task (a terminal one is -32602); the 2026 extension
    /// acknowledges any id.
    pub(super) fn tasks_cancel(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        if meta.is_modern() {
            let task_id = task_id(params)?;
            if let Ok(view) = self.shared.jobs.poll(task_id)
                && !view.status.is_terminal()
            {
                let _ = self.shared.jobs.cancel(task_id, "tasks/cancel");
            }
            return Ok(json!({}));
        }
        let view = self.task_view(params)?;
        if view.status.is_terminal() {
            return Err(RpcError::invalid_params(format!(
                "Cannot cancel task: already in terminal status '{}'",
                tasks::legacy_status(view.status)
            )));
        }
        let view = self
            .shared
            .jobs
            .cancel(&view.job_id, "tasks/cancel")
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        Ok(tasks::legacy_task(&view))
    }
}

/// `params.taskId`, the source of truth for the task (a related-task `_meta` is ignored).
fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("taskId must be a string"))
}
