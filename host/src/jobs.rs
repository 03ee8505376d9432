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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::events::EventLog;

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

/// Reports progress from inside a job. Progress only moves forward.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    tx: watch::Sender<JobView>,
    stats: Arc<JobStats>,
    events: Option<Arc<EventLog>>,
}

impl ProgressSink {
    /// Records progress; a value below the last one is ignored (monotonic).
    pub fn report(&self, done: f64, total: Option<f64>, message: Option<String>) {
        self.tx.send_if_modified(|view| {
            if done < view.progress.done || view.status.is_terminal() {
                return false;
            }
            view.progress = JobProgress {
                done,
                total,
                message,
            };
            view.updated_at = SystemTime::now();
            true
        });
    }

    /// The job's id.
    pub fn job_id(&self) -> String {
        self.tx.borrow().job_id.clone()
    }

    /// Records that the work starts on a worker again after its worker died
    /// (a replay, counted in `telemetry`), or for the first time.
    pub fn attempt(&self) {
        self.tx.send_modify(|view| {
            view.attempts += 1;
            view.updated_at = SystemTime::now();
            if view.attempts > 1 {
                self.stats.replays.fetch_add(1, Ordering::Relaxed);
                record(&self.events, view, "replay");
            }
        });
    }

    /// Runs started so far (see [`Self::attempt`]).
    pub fn attempts(&self) -> u32 {
        self.tx.borrow().attempts
    }

    /// Marks the job running (it got a worker).
    pub fn running(&self) {
        self.tx.send_if_modified(|view| {
            if view.status == JobStatus::Queued {
                view.status = JobStatus::Running;
                view.updated_at = SystemTime::now();
                record(&self.events, view, "running");
                true
            } else {
                false
            }
        });
    }
}

/// One `job` record in the event log.
fn record(events: &Option<Arc<EventLog>>, view: &JobView, transition: &str) {
    if let Some(events) = events {
        events.record(
            "job",
            json!({
                "job_id": view.job_id,
                "tool": view.tool,
                "transition": transition,
                "status": view.status,
                "attempts": view.attempts,
                "error": view.error.as_ref().map(|e| e.code),
            }),
        );
    }
}

/// A job as a reexec snapshot carries it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job id (kept: clients poll it).
    pub job_id: String,
    /// The tool that started it.
    pub tool: String,
    /// Status at the snapshot.
    pub status: JobStatus,
    /// Progress at the snapshot.
    pub progress: JobProgress,
    /// The result, when completed.
    pub result: Option<Value>,
    /// The error, when failed or cancelled.
    pub error: Option<ToolError>,
    /// Runs started so far.
    pub attempts: u32,
    /// Submission time, Unix ms.
    pub created_unix_ms: u64,
    /// Age at the snapshot.
    pub age_ms: u64,
    /// Time since it finished, at the snapshot.
    pub finished_ago_ms: Option<u64>,
    /// A TTL the caller asked for.
    pub requested_ttl_ms: Option<u64>,
    /// `render`/`detail` of the call.
    pub presentation: Map<String, Value>,
    /// Why it was cancelled.
    pub cancel_reason: Option<String>,
    /// How to run it again: `{"tool", "arguments"}` (unfinished jobs are re-run from
    /// this after a reexec; the tool's replay contract decides whether they may be).
    pub recipe: Option<Value>,
}

/// A job re-created after a reexec: the same id, history and attempts.
#[derive(Debug, Clone)]
pub struct RestoredJob {
    /// The job id to keep.
    pub job_id: String,
    /// Runs before the reexec (the next run counts as a replay).
    pub attempts: u32,
    /// Original submission time.
    pub created_unix_ms: u64,
    /// Original age at the snapshot (for TTLs).
    pub age_ms: u64,
}

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

/// A `tasks/list` cursor that names no position in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor")]
pub struct InvalidCursor;

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
    /// Set by [`Jobs::detach_all`]: the session is being handed to the next image, so a
    /// waiting call dropped from now on leaves its job alone (the next image re-attaches
    /// it) instead of cancelling it.
    handed_over: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Jobs {
    /// A table keeping finished jobs for `ttl`, with the configured cap on unfinished
    /// jobs ([`crate::limits::HostLimits::max_active_jobs`]).
    pub fn new(ttl: Duration) -> Arc<Self> {
        Self::with_max_active(ttl, crate::limits::current().max_active_jobs)
    }

    /// A table keeping finished jobs for `ttl` and refusing a job while `max_active`
    /// are unfinished.
    pub fn with_max_active(ttl: Duration, max_active: usize) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            max_active,
            admission: Mutex::new(()),
            stats: Arc::default(),
            events: None,
            handed_over: Default::default(),
        })
    }

    /// A table with the configured cap that also records every job transition in
    /// `events`.
    pub fn with_events(ttl: Duration, events: Arc<EventLog>) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
            max_active: crate::limits::current().max_active_jobs,
            admission: Mutex::new(()),
            stats: Arc::default(),
            events: Some(events),
            handed_over: Default::default(),
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
        F: FnOnce(ProgressSink) -> Fut,
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
                "setting": crate::limits::MAX_ACTIVE_JOBS_ENV,
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
        F: FnOnce(ProgressSink) -> Fut,
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
        F: FnOnce(ProgressSink) -> Fut,
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
        let sink = ProgressSink {
            tx: tx.clone(),
            stats: Arc::clone(&self.stats),
            events: self.events.clone(),
        };
        let future = work(sink);
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

    /// Every job, for a reexec snapshot.
    pub fn export(&self) -> Vec<JobRecord> {
        let entries = lock(&self.entries);
        let mut records: Vec<JobRecord> = entries
            .values()
            .map(|entry| {
                let view = self.view_of(entry);
                JobRecord {
                    job_id: view.job_id,
                    tool: view.tool,
                    status: view.status,
                    progress: view.progress,
                    result: view.result,
                    error: view.error,
                    attempts: view.attempts,
                    created_unix_ms: view
                        .created_at
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
                    age_ms: view.age_ms,
                    finished_ago_ms: entry
                        .finished
                        .map(|f| u64::try_from(f.elapsed().as_millis()).unwrap_or(u64::MAX)),
                    requested_ttl_ms: entry
                        .requested_ttl
                        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                    presentation: view.presentation,
                    cancel_reason: view.cancel_reason,
                    recipe: entry.recipe.clone(),
                }
            })
            .collect();
        records.sort_by(|a, b| {
            a.created_unix_ms
                .cmp(&b.created_unix_ms)
                .then(a.job_id.cmp(&b.job_id))
        });
        records
    }

    /// Puts a finished job from a reexec snapshot back in the table (unfinished ones are
    /// re-submitted through their tool with [`JobOptions::restore`] instead).
    pub fn import_finished(&self, record: JobRecord) {
        let now = Instant::now();
        let ago = |ms: u64| now.checked_sub(Duration::from_millis(ms)).unwrap_or(now);
        let created_at = SystemTime::UNIX_EPOCH + Duration::from_millis(record.created_unix_ms);
        let (tx, _) = watch::channel(JobView {
            job_id: record.job_id.clone(),
            tool: record.tool,
            status: record.status,
            progress: record.progress,
            result: record.result,
            error: record.error,
            age_ms: record.age_ms,
            attempts: record.attempts,
            created_at,
            updated_at: SystemTime::now(),
            retention: self.ttl,
            presentation: record.presentation,
            cancel_reason: record.cancel_reason,
        });
        lock(&self.entries).insert(
            record.job_id,
            JobEntry {
                view: tx,
                submitted: ago(record.age_ms),
                finished: Some(ago(record.finished_ago_ms.unwrap_or(0))),
                abort: None,
                requested_ttl: record.requested_ttl_ms.map(Duration::from_millis),
                recipe: record.recipe,
            },
        );
    }

    /// Stops every unfinished job's task without marking it (a reexec: the snapshot
    /// already holds the jobs, and the next image re-runs them). Their workers are
    /// killed as their futures drop; waiters see no change.
    ///
    /// Call it before aborting the calls that wait on these jobs: from here on a dropped
    /// wait does not cancel its job, so the snapshot keeps the job unfinished.
    pub fn detach_all(&self) {
        self.handed_over.store(true, Ordering::SeqCst);
        let mut entries = lock(&self.entries);
        for entry in entries.values_mut() {
            if let Some(abort) = entry.abort.take() {
                abort.abort();
            }
        }
    }

    /// Adds lifetime counters carried by a reexec snapshot.
    pub fn restore_stats(&self, stats: &Value) {
        let n = |k: &str| stats[k].as_u64().unwrap_or(0);
        self.stats
            .submitted
            .store(n("submitted"), Ordering::Relaxed);
        self.stats
            .completed
            .store(n("completed"), Ordering::Relaxed);
        self.stats.failed.store(n("failed"), Ordering::Relaxed);
        self.stats
            .cancelled
            .store(n("cancelled"), Ordering::Relaxed);
        self.stats.replays.store(n("replays"), Ordering::Relaxed);
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

    /// One page of jobs, oldest first, after `cursor` (from a previous page's
    /// `next`), at most `limit` long, with the cursor of the next page if any.
    ///
    /// # Errors
    /// [`InvalidCursor`] when the cursor is not one this table issued.
    pub fn list_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<JobView>, Option<String>), InvalidCursor> {
        self.prune();
        let after = cursor.map(decode_cursor).transpose()?;
        let entries = lock(&self.entries);
        let mut views: Vec<JobView> = entries.values().map(|e| self.view_of(e)).collect();
        drop(entries);
        views.sort_by_key(cursor_key);
        let start = match &after {
            None => 0,
            Some(key) => views.partition_point(|v| cursor_key(v) <= *key),
        };
        let page: Vec<JobView> = views.into_iter().skip(start).take(limit + 1).collect();
        if page.len() > limit {
            let mut page = page;
            page.truncate(limit);
            let next = page.last().map(|v| encode_cursor(&cursor_key(v)));
            Ok((page, next))
        } else {
            Ok((page, None))
        }
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

    /// Cancels every unfinished job (stdin EOF).
    pub fn cancel_all(&self, reason: &str) {
        let ids: Vec<String> = lock(&self.entries)
            .iter()
            .filter(|(_, e)| e.abort.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let _ = self.cancel(&id, reason);
        }
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

/// Sort key of `tasks/list`: submission time, then id (ids are unique).
fn cursor_key(view: &JobView) -> (u128, String) {
    let nanos = view
        .created_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos, view.job_id.clone())
}

fn encode_cursor((nanos, id): &(u128, String)) -> String {
    format!("{nanos}.{id}")
}

fn decode_cursor(cursor: &str) -> Result<(u128, String), InvalidCursor> {
    let (nanos, id) = cursor.split_once('.').ok_or(InvalidCursor)?;
    let nanos = nanos.parse().map_err(|_| InvalidCursor)?;
    if !id.starts_with("job_") {
        return Err(InvalidCursor);
    }
    Ok((nanos, id.to_owned()))
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
            if self.armed && !self.jobs.handed_over.load(Ordering::SeqCst) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn completes_with_monotonic_progress() {
        let jobs = Jobs::new(Duration::from_secs(60));
        let rx = jobs.submit("t", |sink| async move {
            sink.running();
            for i in 1..=5 {
                sink.report(f64::from(i), Some(5.0), Some(format!("step {i}")));
                sink.report(0.0, Some(5.0), None); // ignored: progress never goes back
                tokio::task::yield_now().await;
            }
            Ok(json!({"answer": 42}))
        });
        let mut seen = Vec::new();
        let done = wait(&jobs, rx, |v| {
            seen.push(v.progress.done);
            async {}
        })
        .await;
        assert_eq!(done.status, JobStatus::Completed);
        assert_eq!(done.result, Some(json!({"answer": 42})));
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(
            jobs.poll(&done.job_id).unwrap().status,
            JobStatus::Completed
        );
    }

    #[tokio::test]
    async fn cancel_aborts_and_drops_the_work() {
        struct Dropped(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let jobs = Jobs::new(Duration::from_secs(60));
        let held = Dropped(Arc::clone(&flag));
        let rx = jobs.submit("t", move |_sink| async move {
            let _held = held;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!({}))
        });
        let id = rx.borrow().job_id.clone();
        tokio::task::yield_now().await;
        let view = jobs.cancel(&id, "test").unwrap();
        assert_eq!(view.status, JobStatus::Cancelled);
        assert_eq!(view.error.unwrap().code, ErrorCode::Cancelled);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            flag.load(std::sync::atomic::Ordering::SeqCst),
            "work not dropped"
        );
        assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Cancelled);
        assert_eq!(
            jobs.poll("job_nope").unwrap_err().code,
            ErrorCode::JobNotFound
        );
    }

    #[tokio::test]
    async fn dropping_the_waiter_cancels_the_job() {
        let jobs = Jobs::new(Duration::from_secs(60));
        let rx = jobs.submit("t", |_sink| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!({}))
        });
        let id = rx.borrow().job_id.clone();
        let waiter =
            tokio::time::timeout(Duration::from_millis(20), wait(&jobs, rx, |_| async {})).await;
        assert!(waiter.is_err());
        assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Cancelled);
    }

    #[tokio::test]
    async fn a_waiter_dropped_after_a_handover_leaves_its_job_unfinished() {
        let jobs = Jobs::new(Duration::from_secs(60));
        let rx = jobs.submit("t", |_sink| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!({}))
        });
        let id = rx.borrow().job_id.clone();
        let waiting = wait(&jobs, rx, |_| async {});
        let waiter = tokio::time::timeout(Duration::from_millis(20), waiting);
        jobs.detach_all();
        assert!(waiter.await.is_err());
        let view = jobs.poll(&id).unwrap();
        assert!(!view.status.is_terminal(), "{:?}", view.status);
        assert_eq!(jobs.export()[0].job_id, id);
    }

    #[tokio::test]
    async fn finished_jobs_expire_after_the_ttl() {
        let jobs = Jobs::new(Duration::from_millis(30));
        let rx = jobs.submit("t", |_sink| async {
            Err(ToolError::new(ErrorCode::InvalidInput, "bad"))
        });
        let done = wait(&jobs, rx, |_| async {}).await;
        assert_eq!(done.status, JobStatus::Failed);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            jobs.poll(&done.job_id).unwrap_err().code,
            ErrorCode::JobNotFound
        );
    }
    #[tokio::test]
    async fn list_pages_are_ordered_and_cursors_validated() {
        let jobs = Jobs::new(Duration::from_secs(60));
        let mut ids = Vec::new();
        for _ in 0..5 {
            let rx = jobs.submit("t", |_sink| async { Ok(json!({})) });
            ids.push(rx.borrow().job_id.clone());
            // Distinct submission instants keep the expected order unambiguous.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let (page, next) = jobs.list_page(cursor.as_deref(), 2).unwrap();
            pages += 1;
            seen.extend(page.into_iter().map(|v| v.job_id));
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(seen, ids);
        assert_eq!(jobs.list_page(Some("nope"), 2).unwrap_err(), InvalidCursor);
        assert_eq!(jobs.list_page(Some("12.x"), 2).unwrap_err(), InvalidCursor);
    }

    #[tokio::test]
    async fn a_requested_ttl_counts_from_submission_and_is_clamped() {
        let jobs = Jobs::new(Duration::from_secs(3600));
        let options = JobOptions {
            ttl: Some(Duration::from_millis(10)),
            ..JobOptions::default()
        };
        let rx = jobs.submit_with("t", options, |_sink| async { Ok(json!({})) });
        let id = rx.borrow().job_id.clone();
        assert_eq!(jobs.poll(&id).unwrap().retention, MIN_TASK_TTL);
        let options = JobOptions {
            ttl: Some(Duration::from_secs(10 * 24 * 3600)),
            ..JobOptions::default()
        };
        let rx = jobs.submit_with("t", options, |_sink| async { Ok(json!({})) });
        let long = rx.borrow().job_id.clone();
        assert_eq!(jobs.poll(&long).unwrap().retention, MAX_TASK_TTL);
        let done = wait(&jobs, jobs.subscribe(&id).unwrap(), |_| async {}).await;
        assert_eq!(done.status, JobStatus::Completed);
        tokio::time::sleep(MIN_TASK_TTL + Duration::from_millis(50)).await;
        assert_eq!(jobs.poll(&id).unwrap_err().code, ErrorCode::JobNotFound);
        assert!(jobs.poll(&long).is_ok());
    }

    #[tokio::test]
    async fn subscribing_does_not_cancel_on_drop() {
        let jobs = Jobs::new(Duration::from_secs(60));
        let rx = jobs.submit("t", |_sink| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!({}))
        });
        let id = rx.borrow().job_id.clone();
        let sub = jobs.subscribe(&id).unwrap();
        drop(sub);
        drop(rx);
        assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Queued);
        let view = jobs.cancel(&id, "test").unwrap();
        assert_eq!(view.cancel_reason.as_deref(), Some("test"));
        assert!(view.updated_at >= view.created_at);
    }

    #[tokio::test]
    async fn unfinished_jobs_are_capped_and_a_finished_one_frees_a_place() {
        let jobs = Jobs::with_max_active(Duration::from_secs(60), 2);
        let (release, gate) = tokio::sync::oneshot::channel::<()>();
        let first = jobs
            .try_submit_with("t", JobOptions::default(), |_sink| async move {
                let _ = gate.await;
                Ok(json!({}))
            })
            .unwrap();
        let second = jobs
            .try_submit_with("t", JobOptions::default(), |_sink| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(json!({}))
            })
            .unwrap();
        let refused = jobs
            .try_submit_with("t", JobOptions::default(), |_sink| async { Ok(json!({})) })
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::ToolLimitExceeded);
        assert!(refused.recoverable);
        let details = refused.details.clone();
        assert_eq!(details["max"], 2);
        assert_eq!(details["active"], 2);
        assert_eq!(details["setting"], "RETICLE_MAX_ACTIVE_JOBS");
        // A refused call leaves no entry behind.
        assert_eq!(jobs.stats()["submitted"], 2);
        release.send(()).unwrap();
        let done = wait(&jobs, first, |_| async {}).await;
        assert_eq!(done.status, JobStatus::Completed);
        // The finished job still answers polls but no longer counts against the cap.
        assert!(jobs.poll(&done.job_id).is_ok());
        let third = jobs
            .try_submit_with("t", JobOptions::default(), |_sink| async { Ok(json!({})) })
            .unwrap();
        assert_eq!(
            wait(&jobs, third, |_| async {}).await.status,
            JobStatus::Completed
        );
        let second_id = second.borrow().job_id.clone();
        jobs.cancel(&second_id, "test").unwrap();
    }
}
