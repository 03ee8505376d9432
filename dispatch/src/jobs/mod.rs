//! The job table: long tool calls run as jobs that can be polled, cancelled and
//! awaited with progress.
//!
//! A job is a future that produces a tool result. It runs in its own task;
//! cancelling the job aborts that task, which drops the future, and whatever
//! the future holds (a leased worker) cleans up in its `Drop` (the supervisor
//! SIGKILLs the worker's process group). Finished jobs are kept for a TTL so
//! `poll` can return their result.
//!
//! The MCP tasks API (2025-11-25 `tasks/*`, the 2026-07-28 tasks extension) reads
//! and cancels this same table: a task id is a job id (`mcp::tasks` maps views to
//! the wire shapes), so there is one record per unit of work.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reticle_protocol::sync::lock;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::events::EventLog;
use crate::handover::Handover;

mod cursor;
mod handover;
mod reporter;

pub use cursor::InvalidCursor;
pub use handover::{JobRecord, RestoredJob};
pub use reporter::JobReporter;
use reporter::record;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a worker.
    Queued,
    /// Running on a worker.
    Running,
    /// Finished with a result.
    Completed,
    /// Finished with a tool error.
    Failed,
    /// Stopped on request; never completed.
    Cancelled,
}

impl JobStatus {
    /// Whether the job will not change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// How far a job got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JobProgress {
    /// Work done, in units of `total`.
    pub done: f64,
    /// Total work, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What is happening now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A point-in-time view of one job.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    /// The job id.
    pub job_id: String,
    /// The tool that started it.
    pub tool: String,
    /// Its status.
    pub status: JobStatus,
    /// Its progress.
    pub progress: JobProgress,
    /// The tool's `structuredContent` when completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tool error when failed or cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// Milliseconds since the job was submitted.
    pub age_ms: u64,
    /// Times the work was started on a worker (more than 1 after a replay).
    pub attempts: u32,
    /// When the job was submitted (wall clock, for task `createdAt`).
    #[serde(skip)]
    pub created_at: SystemTime,
    /// When its status, progress or outcome last changed (task `lastUpdatedAt`).
    #[serde(skip)]
    pub updated_at: SystemTime,
    /// How long the table keeps it, counted from submission (task `ttl`); grows
    /// while a job without a requested TTL runs, fixed once it finishes.
    #[serde(skip)]
    pub retention: Duration,
    /// The call's presentation arguments (`render`, `detail`), so a deferred
    /// result (`tasks/result`) renders like the direct answer would have.
    #[serde(skip)]
    pub presentation: Map<String, Value>,
    /// Why it was cancelled, when it was.
    #[serde(skip)]
    pub cancel_reason: Option<String>,
}

impl JobView {
    /// The `poll` payload.
    pub fn to_payload(&self) -> Value {
        let mut payload = serde_json::to_value(self).unwrap_or_else(|_| json!({}));
        payload["schema_version"] = json!(SCHEMA_VERSION);
        payload
    }
}

/// One job in the table.
struct JobEntry {
    view: watch::Sender<JobView>,
    submitted: Instant,
    finished: Option<Instant>,
    abort: Option<AbortHandle>,
    /// A TTL the caller asked for (a task's `ttl`), counted from submission.
    requested_ttl: Option<Duration>,
    /// How to run the job again (see [`JobRecord::recipe`]).
    recipe: Option<Value>,
}

/// How a job is submitted beyond its work.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// Keep the job this long after submission (task `ttl`) instead of the
    /// table's TTL after it finishes. Clamped to [`MIN_TASK_TTL`, `MAX_TASK_TTL`].
    pub ttl: Option<Duration>,
    /// `render`/`detail` of the call, kept for rendering the deferred result.
    pub presentation: Map<String, Value>,
    /// How to run the job again after a host reexec: `{"tool", "arguments"}`.
    pub recipe: Option<Value>,
    /// Re-create a job from a reexec snapshot instead of a new one.
    pub restore: Option<RestoredJob>,
}

/// Shortest TTL a task may ask for (a shorter one could expire before its first poll).
pub const MIN_TASK_TTL: Duration = Duration::from_secs(1);
/// Longest TTL a task may ask for (results hold memory; see D16).
pub const MAX_TASK_TTL: Duration = Duration::from_secs(24 * 3600);

/// Counters over the host's lifetime (the table itself forgets jobs after the TTL).
#[derive(Debug, Default)]
struct JobStats {
    submitted: AtomicU64,
    replays: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
}

/// All jobs of this host.
pub struct Jobs {
    entries: Mutex<HashMap<String, JobEntry>>,
    ttl: Duration,
    /// Most unfinished jobs at once (`RETICLE_MAX_ACTIVE_JOBS`).
    max_active: usize,
    /// Held from the cap check to the insertion, so concurrent calls cannot both take
    /// the last place.
    admission: Mutex<()>,
    stats: Arc<JobStats>,
    events: Option<Arc<EventLog>>,
    /// The host's handover flag (set by the host, or by [`Jobs::detach_all`]): once the
    /// session is being handed to the next image, a waiting call dropped leaves its job
    /// alone (the next image re-attaches it) instead of cancelling it.
    handover: Handover,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Jobs {
    /// A table keeping finished jobs for `ttl`, with the default cap on unfinished jobs
    /// ([`reticle_config::limits::DEFAULT_MAX_ACTIVE_JOBS`]).
    pub fn new(ttl: Duration) -> Arc<Self> {
        Self::with_max_active(ttl, reticle_config::limits::DEFAULT_MAX_ACTIVE_JOBS)
    }

    /// A table keeping finished jobs for `ttl` and refusing a job while `max_active`
    /// are unfinished.
    pub fn with_max_active(ttl: Duration, max_active: usize) -> Arc<Self> {
        Self::table(ttl, max_active, None, Handover::new())
    }

    /// A table refusing a job while `max_active` are unfinished that also records every
    /// job transition in `events` and shares the host's `handover` flag.
    pub fn with_events(
        ttl: Duration,
        max_active: usize,
        events: Arc<EventLog>,
        handover: Handover,
    ) -> Arc<Self> {
        Self::table(ttl, max_active, Some(events), handover)
    }

    fn table(
        ttl: Duration,
        max_active: usize,
        events: Option<Arc<EventLog>>,
        handover: Handover,
    ) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            max_active,
            admission: Mutex::new(()),
            stats: Arc::default(),
            events,
            handover,
        })
    }

    /// Like [`Self::submit_with`], but refused while the table already holds its
    /// cap of unfinished jobs: the tools' path, so one agent cannot queue without bound.
    ///
    /// # Errors
    /// `TOOL_LIMIT_EXCEEDED` (recoverable: poll or cancel a job, then retry), naming
    /// the limit and its setting.
    pub fn try_submit_with<F, Fut>(
        self: &Arc<Self>,
        tool: &str,
        options: JobOptions,
        work: F,
    ) -> Result<watch::Receiver<JobView>, ToolError>
    where
        F: FnOnce(JobReporter) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        let _admission = lock(&self.admission);
        let active = lock(&self.entries)
            .values()
            .filter(|e| e.finished.is_none())
            .count();
        if active >= self.max_active {
            return Err(ToolError::new(
                ErrorCode::ToolLimitExceeded,
                format!(
                    "{active} jobs are already queued or running; the limit is {}",
                    self.max_active
                ),
            )
            .with_details(json!({
                "limit": "max_active_jobs",
                "max": self.max_active,
                "active": active,
                "setting": reticle_config::limits::MAX_ACTIVE_JOBS_ENV,
            }))
            .recoverable(true)
            .with_fault(libmcp::FaultClass::Resource, Some(1000))
            .with_hint("wait for a job to finish (poll) or cancel one, then call again"));
        }
        Ok(self.submit_with(tool, options, work))
    }

    /// Starts `work` as a job and returns a watch on it.
    pub fn submit<F, Fut>(self: &Arc<Self>, tool: &str, work: F) -> watch::Receiver<JobView>
    where
        F: FnOnce(JobReporter) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.submit_with(tool, JobOptions::default(), work)
    }

    /// Starts `work` as a job with `options` and returns a watch on it. Not capped:
    /// tools go through [`Self::try_submit_with`]; this records jobs that are already
    /// decided (a task whose tool failed before starting one).
    pub fn submit_with<F, Fut>(
        self: &Arc<Self>,
        tool: &str,
        options: JobOptions,
        work: F,
    ) -> watch::Receiver<JobView>
    where
        F: FnOnce(JobReporter) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.prune();
        let restore = options.restore;
        // 122 random bits from the OS generator: unguessable, as the tasks spec wants
        // of ids that are the only access control on a stdio server.
        let job_id = restore.as_ref().map_or_else(
            || format!("job_{}", uuid::Uuid::new_v4().simple()),
            |r| r.job_id.clone(),
        );
        let requested_ttl = options.ttl.map(|t| t.clamp(MIN_TASK_TTL, MAX_TASK_TTL));
        let now = SystemTime::now();
        let created_at = restore.as_ref().map_or(now, |r| {
            SystemTime::UNIX_EPOCH + Duration::from_millis(r.created_unix_ms)
        });
        let (tx, rx) = watch::channel(JobView {
            job_id: job_id.clone(),
            tool: tool.to_owned(),
            status: JobStatus::Queued,
            progress: JobProgress::default(),
            result: None,
            error: None,
            age_ms: 0,
            attempts: restore.as_ref().map_or(0, |r| r.attempts),
            created_at,
            updated_at: now,
            retention: requested_ttl.unwrap_or(self.ttl),
            presentation: options.presentation,
            cancel_reason: None,
        });
        if restore.is_none() {
            self.stats.submitted.fetch_add(1, Ordering::Relaxed);
        }
        record(
            &self.events,
            &tx.borrow(),
            if restore.is_some() {
                "restored"
            } else {
                "queued"
            },
        );
        let reporter = JobReporter {
            tx: tx.clone(),
            stats: Arc::clone(&self.stats),
            events: self.events.clone(),
            started: Arc::default(),
        };
        let future = work(reporter);
        let mut entries = lock(&self.entries);
        let table = Arc::clone(self);
        let id = job_id.clone();
        // Holding the lock across spawn: the task cannot finish before its entry exists.
        let handle = tokio::spawn(async move {
            let outcome = future.await;
            table.finish(&id, outcome);
        });
        let submitted = restore
            .as_ref()
            .and_then(|r| Instant::now().checked_sub(Duration::from_millis(r.age_ms)))
            .unwrap_or_else(Instant::now);
        entries.insert(
            job_id,
            JobEntry {
                view: tx,
                submitted,
                finished: None,
                abort: Some(handle.abort_handle()),
                requested_ttl,
                recipe: options.recipe,
            },
        );
        rx
    }

    fn finish(&self, job_id: &str, outcome: Result<Value, ToolError>) {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(job_id) else {
            return;
        };
        entry.finished = Some(Instant::now());
        entry.abort = None;
        entry.view.send_if_modified(|view| {
            if view.status.is_terminal() {
                return false;
            }
            view.updated_at = SystemTime::now();
            match outcome {
                Ok(result) => {
                    self.stats.completed.fetch_add(1, Ordering::Relaxed);
                    view.status = JobStatus::Completed;
                    if let Some(total) = view.progress.total {
                        view.progress.done = total;
                    }
                    view.result = Some(result);
                }
                Err(error) => {
                    self.stats.failed.fetch_add(1, Ordering::Relaxed);
                    view.status = JobStatus::Failed;
                    view.error = Some(error);
                }
            }
            record(&self.events, view, "finished");
            true
        });
    }

    /// The job's current view.
    pub fn poll(&self, job_id: &str) -> Result<JobView, ToolError> {
        self.prune();
        let entries = lock(&self.entries);
        let entry = entries
            .get(job_id)
            .ok_or_else(|| not_found(job_id, self.ttl))?;
        Ok(self.view_of(entry))
    }

    fn view_of(&self, entry: &JobEntry) -> JobView {
        let mut view = entry.view.borrow().clone();
        view.age_ms = u64::try_from(entry.submitted.elapsed().as_millis()).unwrap_or(u64::MAX);
        view.retention = self.retention(entry);
        view
    }

    /// How long `entry` is kept, from submission: the requested TTL, else its run
    /// time (so far) plus the table's TTL after finishing.
    fn retention(&self, entry: &JobEntry) -> Duration {
        entry.requested_ttl.unwrap_or_else(|| {
            let ran = entry
                .finished
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(entry.submitted);
            ran + self.ttl
        })
    }

    /// A watch on the job that does not cancel it when dropped (`tasks/result`
    /// waits on this: a client giving up on the wait must not stop the work).
    pub fn subscribe(&self, job_id: &str) -> Result<watch::Receiver<JobView>, ToolError> {
        self.prune();
        lock(&self.entries)
            .get(job_id)
            .map(|entry| entry.view.subscribe())
            .ok_or_else(|| not_found(job_id, self.ttl))
    }

    /// Cancels the job: its task is aborted (dropping whatever it holds) and
    /// it reads `cancelled` from now on. Cancelling a finished job is a no-op.
    pub fn cancel(&self, job_id: &str, reason: &str) -> Result<JobView, ToolError> {
        {
            let mut entries = lock(&self.entries);
            let entry = entries
                .get_mut(job_id)
                .ok_or_else(|| not_found(job_id, self.ttl))?;
            if let Some(abort) = entry.abort.take() {
                abort.abort();
                self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                entry.finished = Some(Instant::now());
                entry.view.send_modify(|view| {
                    view.status = JobStatus::Cancelled;
                    view.updated_at = SystemTime::now();
                    view.cancel_reason = Some(reason.to_owned());
                    view.error = Some(
                        ToolError::new(ErrorCode::Cancelled, format!("job cancelled: {reason}"))
                            .recoverable(true),
                    );
                    record(&self.events, view, "cancelled");
                });
                tracing::info!(job_id, reason, "job cancelled");
            }
        }
        self.poll(job_id)
    }

    /// Cancels every unfinished job (the client went away, or the host is stopping)
    /// and returns their ids, sorted. Each reads `cancelled` with `reason` from now on.
    pub fn cancel_all(&self, reason: &str) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.abort.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        for id in &ids {
            let _ = self.cancel(id, reason);
        }
        ids
    }

    /// Counts of jobs by status.
    pub fn counts(&self) -> Value {
        let entries = lock(&self.entries);
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        for entry in entries.values() {
            let status = serde_json::to_value(entry.view.borrow().status).unwrap_or_default();
            *counts
                .entry(status.as_str().unwrap_or("?").to_owned())
                .or_default() += 1;
        }
        json!(counts)
    }

    /// Lifetime counters: jobs submitted, finished by outcome, and replays after a
    /// worker died mid-job.
    pub fn stats(&self) -> Value {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "submitted": n(&self.stats.submitted),
            "completed": n(&self.stats.completed),
            "failed": n(&self.stats.failed),
            "cancelled": n(&self.stats.cancelled),
            "replays": n(&self.stats.replays),
            "by_status": self.counts(),
        })
    }

    fn prune(&self) {
        let ttl = self.ttl;
        lock(&self.entries).retain(|_, e| match (e.finished, e.requested_ttl) {
            // Unfinished work is never dropped: it holds a worker and a waiter.
            (None, _) => true,
            (Some(_), Some(requested)) => e.submitted.elapsed() < requested,
            (Some(finished), None) => finished.elapsed() < ttl,
        });
    }
}

fn not_found(job_id: &str, ttl: Duration) -> ToolError {
    ToolError::new(ErrorCode::JobNotFound, format!("no job {job_id}"))
        .with_details(json!({"job_id": job_id, "finished_jobs_kept_ms": ttl.as_millis() as u64}))
        .recoverable(false)
}

/// Waits for the job to finish, calling `on_progress` on every change.
/// Dropping this future (the request was cancelled) cancels the job.
pub async fn wait<P, PF>(
    jobs: &Arc<Jobs>,
    mut rx: watch::Receiver<JobView>,
    mut on_progress: P,
) -> JobView
where
    P: FnMut(JobView) -> PF,
    PF: Future<Output = ()>,
{
    struct CancelOnDrop<'a> {
        jobs: &'a Arc<Jobs>,
        job_id: String,
        armed: bool,
    }
    impl Drop for CancelOnDrop<'_> {
        fn drop(&mut self) {
            if self.armed && !self.jobs.handover.started() {
                let _ = self
                    .jobs
                    .cancel(&self.job_id, "the waiting request was cancelled");
            }
        }
    }
    let mut guard = CancelOnDrop {
        jobs,
        job_id: rx.borrow().job_id.clone(),
        armed: true,
    };
    loop {
        let view = rx.borrow_and_update().clone();
        if view.status.is_terminal() {
            guard.armed = false;
            return view;
        }
        on_progress(view).await;
        if rx.changed().await.is_err() {
            // The sender lives in the table; it is gone only if the entry was pruned.
            guard.armed = false;
            return rx.borrow().clone();
        }
    }
}
