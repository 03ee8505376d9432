//! [`ToolContext`]: what a handler may use, built in one place ([`ToolShared::context`]),
//! and [`ToolContext::run_as_job`], the way a job tool starts its job ([`run_op_with`]:
//! a job of one worker op).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};

use super::output::{JobStarted, OutputSchema, ToolOutput};
use super::{PayloadResult, ToolProbe, ToolResult};
use crate::scope::ClientScope;
use crate::state::HostState;
use reticle_dispatch::jobs::{
    self as job_table, JobOptions, JobReporter, JobStatus, JobView, Jobs, RestoredJob,
};
use reticle_dispatch::workers::WorkerPool;
use reticle_dispatch::{Dispatcher, Scope, Unit};
use reticle_journal::JournalHandle;
use reticle_transport::era::RequestMeta;
use reticle_transport::writer::Outbound;

/// What every call of one server shares.
#[derive(Clone)]
pub struct ToolShared {
    /// Host state (ledger, counters, sessions, roots).
    pub state: Arc<HostState>,
    /// The job table of this client.
    pub jobs: Arc<Jobs>,
    /// What this client sees: roots, layout sessions, violation cache.
    pub scope: Arc<ClientScope>,
    /// The protocol stream, for progress notifications.
    pub out: Outbound,
    /// The local worker pool (health, telemetry and rollouts read it; ops go through
    /// the dispatcher).
    pub workers: Arc<WorkerPool>,
    /// The one way work reaches a worker.
    pub dispatcher: Arc<Dispatcher>,
}

impl ToolShared {
    /// The context of one call, journaled under `journal`: the one place a
    /// [`ToolContext`] is built (the call's specifics are set with its `with_*` methods).
    #[must_use]
    pub fn context(&self, meta: Arc<RequestMeta>, journal: JournalHandle) -> ToolContext {
        ToolContext {
            state: Arc::clone(&self.state),
            jobs: Arc::clone(&self.jobs),
            scope: Arc::clone(&self.scope),
            out: self.out.for_request(meta.request_id.as_deref()),
            workers: Arc::clone(&self.workers),
            dispatcher: Arc::clone(&self.dispatcher),
            meta,
            journal,
            task: None,
            presentation: Map::new(),
            arguments: Map::new(),
            waited_job: WaitedJob::default(),
            restore: None,
            tool: "",
            output: None,
            probe: None,
        }
    }
}

/// Everything a handler may use.
#[derive(Clone)]
pub struct ToolContext {
    /// Shared host state (ledger, counters, config).
    pub state: Arc<HostState>,
    /// The job table of this client.
    pub jobs: Arc<Jobs>,
    /// What this client sees: roots, layout sessions, violation cache.
    pub scope: Arc<ClientScope>,
    /// The protocol stream, for this call's notifications.
    pub out: Outbound,
    /// The local worker pool (introspection only; ops go through `dispatcher`).
    pub workers: Arc<WorkerPool>,
    /// Runs ops on workers.
    pub dispatcher: Arc<Dispatcher>,
    /// The request's metadata (era, progress token).
    pub meta: Arc<RequestMeta>,
    /// The request's replay-journal entry; a job keeps a clone until it ends.
    pub journal: JournalHandle,
    /// Set when the call runs as an MCP task: the job starts and the handler returns
    /// at once, whatever `wait` or a `progressToken` say.
    pub task: Option<TaskRequest>,
    /// The call's `render`/`detail` arguments (set by the registry).
    pub presentation: Map<String, Value>,
    /// The call's validated arguments (set by the registry): a job keeps them as its
    /// recipe, so a host reexec can run it again.
    pub arguments: Map<String, Value>,
    /// The job this call waits on, once it does (the server's in-flight entry shares
    /// it, to re-attach the call to its job after a reexec).
    pub waited_job: WaitedJob,
    /// Set when the call re-creates a job from a reexec snapshot: the job keeps its id
    /// and history, and the call returns at once.
    pub restore: Option<RestoredJob>,
    /// The tool being called (set by the registry).
    pub(crate) tool: &'static str,
    /// Its output schema (set by the registry): a job's result is checked before the
    /// job table stores it.
    pub(crate) output: Option<Arc<OutputSchema>>,
    /// The tool's probe, when it is ProbeRequired (set by the registry): its units
    /// carry it ([`Self::unit`]).
    pub(crate) probe: Option<ToolProbe>,
}

/// The id of the job a `tools/call` waits on, once it does: one cell shared by the call's
/// [`ToolContext`] (which sets it) and the server's entry for the request in flight (which
/// reads it at a reexec, to hand the waiting call over to its job). Clones share the cell.
#[derive(Debug, Clone, Default)]
pub struct WaitedJob(Arc<OnceLock<String>>);

impl WaitedJob {
    /// A cell that already holds `job_id` (a call re-attached to its job).
    #[must_use]
    pub fn of(job_id: String) -> Self {
        let waited_job = Self::default();
        waited_job.set(job_id);
        waited_job
    }

    /// Records the job; the first id set stays.
    pub fn set(&self, job_id: String) {
        let _ = self.0.set(job_id);
    }

    /// The job waited on, if the call waits on one.
    #[must_use]
    pub fn get(&self) -> Option<&String> {
        self.0.get()
    }
}

/// A call the client (2025-11-25 `params.task`) or the server (2026-07-28 tasks
/// extension) turned into a task.
#[derive(Debug, Clone, Default)]
pub struct TaskRequest {
    /// The TTL the client asked for.
    pub ttl: Option<Duration>,
}

impl ToolContext {
    /// The call runs as a task.
    #[must_use]
    pub fn with_task(mut self, task: Option<TaskRequest>) -> Self {
        self.task = task;
        self
    }

    /// The call's waited job goes into `waited_job` (shared with the server's in-flight
    /// entry).
    #[must_use]
    pub fn with_waited_job(mut self, waited_job: WaitedJob) -> Self {
        self.waited_job = waited_job;
        self
    }

    /// The call re-creates `job` from a reexec snapshot.
    #[must_use]
    pub fn restoring(mut self, job: RestoredJob) -> Self {
        self.restore = Some(job);
        self
    }

    /// The roots workers may read for this call, now.
    #[must_use]
    pub fn allowed_roots(&self) -> Vec<String> {
        self.scope
            .roots
            .snapshot()
            .0
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    /// A unit of this call's work: op `op` on `args`. A ProbeRequired tool's unit carries
    /// the tool's probe, which the replay policy runs after a lost run (the same probe
    /// a reexec runs for a call it interrupted, D76).
    #[must_use]
    pub fn unit(&self, op: impl Into<String>, args: &Value) -> Unit {
        let unit = Unit::new(op, args);
        let Some(probe) = self.probe else {
            return unit;
        };
        let shared = ToolShared {
            state: Arc::clone(&self.state),
            jobs: Arc::clone(&self.jobs),
            scope: Arc::clone(&self.scope),
            out: self.out.clone(),
            workers: Arc::clone(&self.workers),
            dispatcher: Arc::clone(&self.dispatcher),
        };
        let arguments = self.arguments.clone();
        unit.with_probe(Box::new(move || {
            let outcome = probe(&shared, &arguments);
            Box::pin(async move { Ok(outcome) })
        }))
    }

    /// A scope for units of this call that run synchronously (no job entry), with ids
    /// `<prefix>_<uuid>`, journaled under the call's entry.
    #[must_use]
    pub fn call_scope(&self, prefix: &str) -> Scope {
        Scope::call(prefix, self.journal.clone(), self.allowed_roots())
    }

    /// Runs `work` as a job of the calling tool; `work` gets the job's [`Scope`] (its
    /// units' progress and attempts go to the job). Returns [`ToolOutput::Started`] at
    /// once when the call runs as a task, restores a job, or neither waits (`wait`) nor
    /// has a `progressToken`; otherwise streams `notifications/progress` (strictly
    /// increasing) and returns the finished payload with its `job_id`/`status`.
    ///
    /// The payload is checked against the tool's output schema before the job table
    /// stores it, so `poll` and `tasks/result` return a payload that passed.
    ///
    /// # Errors
    /// `TOOL_LIMIT_EXCEEDED` when the job table is full; a waited job's tool error.
    pub async fn run_as_job<F, Fut>(&self, wait: bool, work: F) -> ToolResult
    where
        F: FnOnce(Scope) -> Fut,
        Fut: Future<Output = PayloadResult> + Send + 'static,
    {
        let options = JobOptions {
            ttl: self.task.as_ref().and_then(|t| t.ttl),
            presentation: self.presentation.clone(),
            recipe: Some(json!({"tool": self.tool, "arguments": self.arguments})),
            restore: self.restore.clone(),
        };
        let journal = self.journal.clone();
        let roots = self.allowed_roots();
        let (tool, output) = (self.tool, self.output.clone());
        let rx = self
            .jobs
            .try_submit_with(self.tool, options, move |reporter: JobReporter| {
                let work = work(Scope::job(reporter, journal, roots));
                async move {
                    let payload = work.await?;
                    match &output {
                        Some(schema) => schema.check_result(tool, payload),
                        None => Ok(payload),
                    }
                }
            })?;
        let token = self.meta.progress_token.clone();
        if self.task.is_some() || self.restore.is_some() || (token.is_none() && !wait) {
            return Ok(ToolOutput::Started(JobStarted::of(&rx.borrow())));
        }
        // Only a call that waits is "waiting on its job": a reexec re-attaches it to the job.
        self.waited_job.set(rx.borrow().job_id.clone());
        let view = wait_reporting_progress(&self.jobs, rx, &self.out, token).await;
        final_payload(view).map(ToolOutput::Finished)
    }
}

/// `notifications/progress` params for `view` under `token` (total and message when known).
pub fn progress_params(token: &Value, view: &JobView) -> Value {
    let mut params = json!({"progressToken": token, "progress": view.progress.done});
    if let Some(total) = view.progress.total {
        params["total"] = json!(total);
    }
    if let Some(message) = &view.progress.message {
        params["message"] = json!(message);
    }
    params
}

/// Waits for a job to end on behalf of a call (dropping the wait cancels the job), sending
/// `notifications/progress` for `token`, strictly increasing, when the call has one.
pub async fn wait_reporting_progress(
    jobs: &Arc<Jobs>,
    rx: tokio::sync::watch::Receiver<JobView>,
    out: &Outbound,
    token: Option<Value>,
) -> JobView {
    let mut last = f64::NEG_INFINITY;
    job_table::wait(jobs, rx, |view| {
        let note = token
            .as_ref()
            .filter(|_| view.progress.done > last)
            .map(|token| {
                last = view.progress.done;
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": progress_params(token, &view)})
            });
        let out = out.clone();
        async move {
            if let Some(note) = note {
                out.send(&note).await;
            }
        }
    })
    .await
}

/// A finished job's answer as its waiting call returns it: the payload named with
/// its job, or the tool error.
pub(crate) fn final_payload(view: JobView) -> PayloadResult {
    match view.status {
        JobStatus::Completed => {
            let mut payload = view.result.unwrap_or_else(|| json!({}));
            payload["job_id"] = json!(view.job_id);
            payload["status"] = json!(view.status);
            Ok(payload)
        }
        _ => Err(view.error.unwrap_or_else(|| {
            ToolError::new(ErrorCode::InternalError, "job ended without a result")
        })),
    }
}

/// A payload hook: runs in the job when the worker's payload arrives, before it is
/// checked and stored (`evaluate` fills the session's violation cache, D45).
pub(crate) type OnResult = Box<dyn FnOnce(Value) -> PayloadResult + Send>;

/// What a job may have besides its arguments.
#[derive(Default)]
pub(crate) struct JobExtras {
    /// A host-created directory under the artifact root the job may write to (D44),
    /// held by the job to its end so the retention sweep leaves it alone (D49).
    pub artifact_dir: Option<crate::job_dirs::JobDir>,
    /// Applied to the worker's payload.
    pub on_result: Option<OnResult>,
}

/// Runs worker op `op` on `args` (paths already resolved) as a job of the calling tool,
/// with an optional artifact directory and payload hook.
pub(crate) async fn run_op_with<A: serde::Serialize>(
    ctx: &ToolContext,
    op: &'static str,
    args: &A,
    wait: bool,
    extras: JobExtras,
) -> ToolResult {
    let unit = ctx
        .unit(op, &Value::Object(crate::worker_job::object_of(args)))
        .with_artifact_dir(
            extras
                .artifact_dir
                .as_ref()
                .map(|d| d.path().display().to_string()),
        );
    let dispatcher = std::sync::Arc::clone(&ctx.dispatcher);
    let on_result = extras.on_result;
    let job_dir = extras.artifact_dir;
    ctx.run_as_job(wait, move |scope| async move {
        // In use until the job ends, however it ends (a cancel drops this future).
        let _job_dir = job_dir;
        let payload = dispatcher.run(&scope, unit).await?;
        match on_result {
            Some(hook) => hook(payload),
            None => Ok(payload),
        }
    })
    .await
}
