//! The worker supervisor: a warm pool of disposable `reticle-worker` processes.
//!
//! Each worker runs in its own process group, talks length-prefixed msgpack over a
//! Unix socket in a private 0700 runtime directory, and runs one job at a time. Jobs
//! queue in the host (FIFO) while every worker is busy. A worker that crashes, closes
//! its socket or misses its heartbeats is reaped and replaced with exponential,
//! capped backoff; its in-flight job fails with [`SupervisorError::WorkerDied`] and
//! the caller decides about replay (the supervisor never replays by itself).
//! Cancelling for real ([`Supervisor::kill_job`]) SIGKILLs the worker's whole process
//! group, reaps it, and starts a replacement at once, so device memory is released
//! by the driver deterministically (gate G2).
//!
//! # API
//! The host reaches the pool through the dispatcher: [`LocalPool`], the executor over
//! the pool (defined here, at the end: an attempt enters this file once), turns each
//! attempt into the wire's [`RunRequest`] (the one place the host builds it) and
//! queues it with [`Supervisor::run`].
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use reticle_dispatch::{Dispatcher, LocalPool, Scope, Unit};
//! use reticle_dispatch::supervisor::{Supervisor, SupervisorConfig};
//! let config = reticle_config::init()?; // in `main`: the one read of the settings
//! let supervisor = Arc::new(Supervisor::start(SupervisorConfig::configured(&config)?).await?);
//! let local = Arc::new(LocalPool::with_supervisor(Arc::clone(&supervisor)));
//! let dispatcher = Dispatcher::new(local, config.limits.job.clone());
//! let scope = Scope::cli("demo-1", vec![], |p| tracing::info!(done = p.done, total = p.total, "{}", p.message));
//! // Attempt `demo-1.1` waits for a free worker; its progress goes to the callback.
//! let payload = dispatcher.run(&scope, Unit::new("debug.sleep", &serde_json::json!({"ms": 100}))).await?;
//! // elsewhere, concurrently: supervisor.kill_job("demo-1.1").await → the attempt is cancelled
//! let health = supervisor.snapshot(); // serde::Serialize
//! supervisor.shutdown().await;
//! # let _ = (payload, health); Ok(()) }
//! ```
//!
//! - [`Supervisor::start`] spawns every worker and waits for their handshakes; it
//!   fails if any first start fails (binary missing, wrong wire version).
//! - [`Supervisor::run`] queues a job and resolves with the worker's outcome (a tool
//!   error is `Ok(JobOutcome::Err)`), or with `Cancelled`, `WorkerDied`,
//!   `DuplicateJob`, `QueueFull`, `ShuttingDown`. Progress is forwarded with
//!   `try_send` (lossy under backpressure, never decreasing). Dropping the future
//!   abandons the job: a queued job is skipped, a running one's worker is killed
//!   (nobody will read its result, and its device memory must come back now).
//! - [`Supervisor::kill_job`] returns once the worker is reaped.
//! - [`Supervisor::cancel_job`] asks the worker to stop cooperatively.
//! - Dropping the [`Supervisor`] SIGKILLs every worker process group.
//!
//! `PR_SET_PDEATHSIG` in the worker plus the parent-pid check make workers die with
//! the host even when the host is SIGKILLed.
//!
//! # Blue/green rollout
//! Slots are not fixed: [`Supervisor::rollout`] starts a second set of slots ("green")
//! from a new worker binary in standby (they handshake but take no job), and only when
//! every green worker said a good hello does it route the queue to them and retire the
//! old slots ("blue"): a retiring slot takes no new job, finishes the one it runs, and
//! stops. If any green worker fails its start, green is stopped, blue keeps serving,
//! and the rollout fails with [`SupervisorError::Rollout`] (a rollout fault in health).
//! [`Supervisor::rollback`] rolls out the previous binary the same way. Every step is
//! reported to the configured [`EventHook`].

mod config;
mod error;
mod notify;
mod process;
mod rollout;
mod runtime_dir;
mod slot;
mod snapshot;
mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reticle_protocol::sync::lock;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub use config::{MAX_WORKERS, SupervisorConfig, WORKER_ALLOCATOR, WorkerStderr};
pub use error::{CancelKind, DeathCause, ResourceLimit, SupervisorError, lost_run_error};
pub use notify::{EventHook, SupervisorEvent};
pub use process::{worker_env_allowed, worker_environment};
pub use reticle_protocol::wire::{JobContext, JobLimits, JobOutcome, RunRequest};
pub use snapshot::{
    PoolSnapshot, RolloutRecord, RolloutSnapshot, SlotMode, SlotState, WorkerSnapshot,
};

// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub use process::{LiveGroups, Spawner, refused_allocation_size, start_worker};
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub use runtime_dir::RuntimeDir;

use reticle_protocol::ToolError;

use crate::executor::{
    AttemptLoss, AttemptRequest, BoxFuture, Executor, ExecutorError, ExecutorHealth,
};
use crate::workers::WorkerPool;
use slot::{Slot, SlotCommand};

/// One progress report of a running job (`done` never decreases within a job).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AttemptProgress {
    /// The job.
    pub job_id: String,
    /// Units done.
    pub done: u64,
    /// Units in total.
    pub total: u64,
    /// Short human text.
    pub message: String,
}

/// What [`Supervisor::kill_job`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillOutcome {
    /// The job was still queued; it was removed and never ran.
    Dequeued,
    /// The worker running the job was SIGKILLed (whole process group) and reaped.
    Killed {
        /// The killed worker's pid.
        pid: u32,
        /// Time from the kill to the completed reap.
        reaped_in: Duration,
    },
    /// The job finished before the kill reached its worker.
    AlreadyFinished,
}

/// What [`Supervisor::cancel_job`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job was still queued; it was removed and never ran.
    Dequeued,
    /// The worker was asked to stop; `run` resolves when it does.
    Requested,
}

/// Where an attempt (`RunRequest`, one run of a unit; the supervisor's "job") is.
enum AttemptEntry {
    /// Waiting in the queue; firing `dequeue` makes `run` return `Cancelled`.
    Queued {
        dequeue: Option<oneshot::Sender<()>>,
    },
    /// Sent to the worker of the slot with id `slot`.
    Running { slot: usize },
    /// Removed from the queue by a cancel; the slot that dequeues it skips it.
    Cancelled,
}

/// A job waiting for a worker.
struct QueuedJob {
    request: RunRequest,
    progress: mpsc::Sender<AttemptProgress>,
    reply: oneshot::Sender<Result<JobOutcome, SupervisorError>>,
}

/// One slot as the API sees it: identity, binary, status, command channel, mode.
struct SlotShared {
    /// Unique for the supervisor's life (slots come and go with rollouts).
    id: usize,
    /// The worker binary this slot runs (fixed for the slot's life).
    exe: PathBuf,
    /// Which release the slot belongs to (0: the first; +1 per rollout attempt).
    release: u64,
    status: Mutex<WorkerSnapshot>,
    last_heard: Mutex<Option<Instant>>,
    commands: mpsc::Sender<SlotCommand>,
    mode: watch::Sender<SlotMode>,
}

/// What the pool runs and how its last rollout went.
#[derive(Debug, Clone)]
struct Release {
    current_exe: PathBuf,
    previous_exe: Option<PathBuf>,
    number: u64,
    rolling_out: bool,
    last: Option<RolloutRecord>,
}

/// State shared by the API and the slot tasks.
struct Inner {
    config: Arc<SupervisorConfig>,
    spawner: Spawner,
    live_groups: LiveGroups,
    slots: Mutex<Vec<Arc<SlotShared>>>,
    next_slot_id: AtomicUsize,
    tasks: Mutex<HashMap<usize, JoinHandle<()>>>,
    release: Mutex<Release>,
    rollout_lock: tokio::sync::Mutex<()>,
    jobs: Mutex<HashMap<String, AttemptEntry>>,
    queue_tx: mpsc::Sender<QueuedJob>,
    queue_rx: tokio::sync::Mutex<mpsc::Receiver<QueuedJob>>,
    shutdown: watch::Sender<bool>,
}

impl Inner {
    /// The next queued job, FIFO across all idle slots. Cancel-safe: an idle slot
    /// that wakes for something else drops its place and loses nothing.
    async fn next_job(&self) -> Option<QueuedJob> {
        self.queue_rx.lock().await.recv().await
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, AttemptEntry>> {
        lock(&self.jobs)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SlotShared>>> {
        lock(&self.slots)
    }

    fn slot(&self, id: usize) -> Option<Arc<SlotShared>> {
        self.slots().iter().find(|s| s.id == id).cloned()
    }

    fn release(&self) -> std::sync::MutexGuard<'_, Release> {
        lock(&self.release)
    }

    /// Reports `event` to the configured hook.
    fn emit(&self, event: SupervisorEvent) {
        self.config.events.emit(&event);
    }

    /// Creates a slot running `exe` in `mode`, spawns its task, and returns the
    /// receiver of its first start's outcome.
    fn add_slot(
        self: &Arc<Self>,
        exe: &Path,
        release: u64,
        mode: SlotMode,
    ) -> (usize, oneshot::Receiver<Result<(), SupervisorError>>) {
        let id = self.next_slot_id.fetch_add(1, Ordering::Relaxed);
        let (commands, commands_rx) = mpsc::channel(16);
        let (mode_tx, mode_rx) = watch::channel(mode);
        let shared = Arc::new(SlotShared {
            id,
            exe: exe.to_path_buf(),
            release,
            status: Mutex::new(WorkerSnapshot::starting(id, exe, release, mode)),
            last_heard: Mutex::new(None),
            commands,
            mode: mode_tx,
        });
        self.slots().push(Arc::clone(&shared));
        let (ready_tx, ready_rx) = oneshot::channel();
        let slot = Slot::new(
            shared,
            Arc::clone(self),
            commands_rx,
            self.shutdown.subscribe(),
            mode_rx,
        );
        let task = tokio::spawn(slot.run(ready_tx));
        lock(&self.tasks).insert(id, task);
        (id, ready_rx)
    }
}

/// The pool of workers. See the [module documentation](self).
pub struct Supervisor {
    inner: Arc<Inner>,
}

impl Supervisor {
    /// Starts `config.workers` workers and waits for each one's handshake. Must be
    /// called inside a Tokio runtime.
    pub async fn start(config: SupervisorConfig) -> Result<Self, SupervisorError> {
        config.validate()?;
        let config = Arc::new(config);
        let spawner = Spawner::start()?;
        let (queue_tx, queue_rx) = mpsc::channel(config.queue_capacity);
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            release: Mutex::new(Release {
                current_exe: config.worker_exe.clone(),
                previous_exe: config.previous_worker_exe.clone(),
                number: 0,
                rolling_out: false,
                last: None,
            }),
            config,
            spawner,
            live_groups: LiveGroups::default(),
            slots: Mutex::new(Vec::new()),
            next_slot_id: AtomicUsize::new(0),
            tasks: Mutex::new(HashMap::new()),
            rollout_lock: tokio::sync::Mutex::new(()),
            jobs: Mutex::new(HashMap::new()),
            queue_tx,
            queue_rx: tokio::sync::Mutex::new(queue_rx),
            shutdown,
        });
        let exe = inner.config.worker_exe.clone();
        let readies: Vec<_> = (0..inner.config.workers)
            .map(|_| inner.add_slot(&exe, 0, SlotMode::Active).1)
            .collect();
        // On an early return the supervisor is dropped, which kills what did start.
        let supervisor = Self { inner };
        for ready in readies {
            match ready.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(SupervisorError::Handshake(
                        "a worker slot ended during start".to_owned(),
                    ));
                }
            }
        }
        Ok(supervisor)
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> &SupervisorConfig {
        &self.inner.config
    }

    /// Runs `request` on the next free worker (queueing FIFO until one is free) and
    /// returns its outcome. Progress reports go to `progress` (lossy, monotonic).
    pub async fn run(
        &self,
        request: RunRequest,
        progress: mpsc::Sender<AttemptProgress>,
    ) -> Result<JobOutcome, SupervisorError> {
        if *self.inner.shutdown.borrow() {
            return Err(SupervisorError::ShuttingDown);
        }
        let job_id = request.job_id.clone();
        let (dequeue_tx, mut dequeue_rx) = oneshot::channel();
        {
            let mut jobs = self.inner.jobs();
            if jobs.contains_key(&job_id) {
                return Err(SupervisorError::DuplicateJob { job_id });
            }
            jobs.insert(
                job_id.clone(),
                AttemptEntry::Queued {
                    dequeue: Some(dequeue_tx),
                },
            );
        }
        let mut guard = JobGuard {
            inner: &self.inner,
            job_id: &job_id,
            finished: false,
        };
        let (reply, mut reply_rx) = oneshot::channel();
        let queued = QueuedJob {
            request,
            progress,
            reply,
        };
        match self.inner.queue_tx.try_send(queued) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                guard.finished = true;
                return Err(SupervisorError::QueueFull {
                    capacity: self.inner.config.queue_capacity,
                });
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                guard.finished = true;
                return Err(SupervisorError::ShuttingDown);
            }
        }
        let result = tokio::select! {
            result = &mut reply_rx => result.unwrap_or(Err(SupervisorError::ShuttingDown)),
            Ok(()) = &mut dequeue_rx => Err(SupervisorError::Cancelled {
                job_id: job_id.clone(),
                how: CancelKind::Dequeued,
            }),
        };
        guard.finished = true;
        result
    }

    /// Stops `job_id` for real: a queued job is removed; a running job's worker gets
    /// SIGKILL on its whole process group and is reaped before this returns; a
    /// replacement starts at once. The pending `run` returns `Cancelled`.
    pub async fn kill_job(&self, job_id: &str) -> Result<KillOutcome, SupervisorError> {
        let slot = match self.dequeue_or_locate(job_id)? {
            Located::Dequeued => return Ok(KillOutcome::Dequeued),
            Located::Running(slot) => slot,
        };
        let Some(slot) = self.inner.slot(slot) else {
            return Ok(KillOutcome::AlreadyFinished);
        };
        let (done, done_rx) = oneshot::channel();
        slot.commands
            .send(SlotCommand::Kill {
                job_id: job_id.to_owned(),
                done,
            })
            .await
            .map_err(|_| SupervisorError::ShuttingDown)?;
        done_rx.await.map_err(|_| SupervisorError::ShuttingDown)
    }

    /// Asks the worker running `job_id` to stop cooperatively (its `run` then returns
    /// `Cancelled` with [`CancelKind::Soft`] when the op honours it); a queued job is
    /// removed. Use [`Supervisor::kill_job`] when the device must be freed now.
    pub async fn cancel_job(&self, job_id: &str) -> Result<CancelOutcome, SupervisorError> {
        let slot = match self.dequeue_or_locate(job_id)? {
            Located::Dequeued => return Ok(CancelOutcome::Dequeued),
            Located::Running(slot) => slot,
        };
        let Some(slot) = self.inner.slot(slot) else {
            return Err(SupervisorError::JobNotFound {
                job_id: job_id.to_owned(),
            });
        };
        slot.commands
            .send(SlotCommand::Cancel {
                job_id: job_id.to_owned(),
            })
            .await
            .map_err(|_| SupervisorError::ShuttingDown)?;
        Ok(CancelOutcome::Requested)
    }

    fn dequeue_or_locate(&self, job_id: &str) -> Result<Located, SupervisorError> {
        let mut jobs = self.inner.jobs();
        let not_found = || SupervisorError::JobNotFound {
            job_id: job_id.to_owned(),
        };
        let entry = jobs.get_mut(job_id).ok_or_else(not_found)?;
        match entry {
            AttemptEntry::Running { slot } => Ok(Located::Running(*slot)),
            AttemptEntry::Cancelled => Err(not_found()),
            AttemptEntry::Queued { dequeue } => {
                if let Some(tx) = dequeue.take() {
                    let _ = tx.send(());
                }
                *entry = AttemptEntry::Cancelled;
                Ok(Located::Dequeued)
            }
        }
    }

    /// The pool now: per worker pid, state, generation, counters, heartbeat age.
    #[must_use]
    pub fn snapshot(&self) -> PoolSnapshot {
        let slots = self.inner.slots().clone();
        let workers = slots
            .iter()
            .map(|slot| {
                let mut s = lock(&slot.status).clone();
                let heard = *lock(&slot.last_heard);
                s.last_heartbeat_age_ms = heard
                    .filter(|_| s.pid.is_some())
                    .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX));
                s
            })
            .collect();
        let jobs = self.inner.jobs();
        let queued_jobs = jobs
            .values()
            .filter(|e| matches!(e, AttemptEntry::Queued { .. }))
            .count();
        let running_jobs = jobs
            .values()
            .filter(|e| matches!(e, AttemptEntry::Running { .. }))
            .count();
        drop(jobs);
        PoolSnapshot {
            workers,
            queued_jobs,
            running_jobs,
            rollout: self.rollout_snapshot(),
        }
    }

    /// Stops the pool: each worker is told to shut down and given the configured
    /// grace to finish its job, then its process group is SIGKILLed and reaped, and
    /// the runtime directories are removed. Queued jobs fail with `ShuttingDown`.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let tasks = std::mem::take(&mut *lock(&self.inner.tasks));
        for (_, task) in tasks {
            let _ = task.await;
        }
        let mut queue = self.inner.queue_rx.lock().await;
        queue.close();
        while let Ok(job) = queue.try_recv() {
            let _ = job.reply.send(Err(SupervisorError::ShuttingDown));
        }
        process::kill_all(&self.inner.live_groups);
        // The kernel's figure, not a sample: a worker's largest moment can be its last
        // few milliseconds (a merge), which no heartbeat or outside sampler is sure to see.
        tracing::info!(
            workers_peak_rss_bytes = process::reaped_children_peak_rss_bytes(),
            "worker pool stopped"
        );
    }
}

impl Drop for Supervisor {
    /// Kill-on-drop: every worker process group gets SIGKILL now; the slot tasks are
    /// aborted (Tokio reaps the children).
    fn drop(&mut self) {
        self.inner.shutdown.send_replace(true);
        process::kill_all(&self.inner.live_groups);
        for (_, task) in lock(&self.inner.tasks).drain() {
            task.abort();
        }
    }
}

enum Located {
    Dequeued,
    Running(usize),
}

/// Removes a job's table entry when its `run` ends, and kills the worker of a running
/// job whose `run` future was dropped before it finished. A dropped future is how a
/// host-side job cancel (`cancel` tool, `notifications/cancelled`) reaches here, and
/// the worker may be deep in a GPU dispatch that never polls for a soft cancel.
struct JobGuard<'a> {
    inner: &'a Inner,
    job_id: &'a str,
    finished: bool,
}

impl Drop for JobGuard<'_> {
    fn drop(&mut self) {
        let entry = self.inner.jobs().remove(self.job_id);
        if !self.finished
            && let Some(AttemptEntry::Running { slot }) = entry
            && let Some(slot) = self.inner.slot(slot)
        {
            // Nobody awaits the answer: the slot reaps and replaces the worker itself.
            let (done, _) = oneshot::channel();
            let _ = slot.commands.try_send(SlotCommand::Kill {
                job_id: self.job_id.to_owned(),
                done,
            });
        }
    }
}

// The local executor: attempts run on this host's pool of `reticle-worker` processes. It
// wraps the lazily started `WorkerPool` of `reticle serve` (or a supervisor the caller
// already started: `reticle eval`/`demo`, tests) and turns each attempt into the wire's
// `RunRequest`, the one place the host builds it, queued by `Supervisor::run` above.

/// Where the local executor's supervisor comes from.
enum PoolState {
    /// The server's pool, started in the background or on first use.
    Lazy(Arc<WorkerPool>),
    /// A supervisor the caller started.
    Started(Arc<Supervisor>),
}

/// Runs attempts on local worker processes.
pub struct LocalPool {
    pool: PoolState,
}

impl std::fmt::Debug for LocalPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPool").finish_non_exhaustive()
    }
}

impl LocalPool {
    /// The executor over the server's lazily started pool.
    #[must_use]
    pub fn new(pool: Arc<WorkerPool>) -> Self {
        Self {
            pool: PoolState::Lazy(pool),
        }
    }

    /// The executor over a running supervisor.
    #[must_use]
    pub fn with_supervisor(supervisor: Arc<Supervisor>) -> Self {
        Self {
            pool: PoolState::Started(supervisor),
        }
    }

    async fn supervisor(&self) -> Result<&Supervisor, ToolError> {
        match &self.pool {
            PoolState::Lazy(pool) => pool.get().await,
            PoolState::Started(supervisor) => Ok(supervisor),
        }
    }
}

impl Executor for LocalPool {
    fn name(&self) -> &'static str {
        "local"
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(async move { self.supervisor().await.map(|_| ()) })
    }

    fn run(
        &self,
        attempt: AttemptRequest,
        progress: mpsc::Sender<AttemptProgress>,
    ) -> BoxFuture<'_, Result<JobOutcome, ExecutorError>> {
        Box::pin(async move {
            let supervisor = self.supervisor().await.map_err(ExecutorError::Refused)?;
            let request = RunRequest {
                job_id: attempt.attempt_id,
                op: attempt.op,
                args_json: attempt.args_json,
                context: attempt.context,
            };
            // Dropping this future drops `run`, which kills the worker (D12).
            supervisor
                .run(request, progress)
                .await
                .map_err(|error| match &error {
                    SupervisorError::WorkerDied { job_id, cause, .. } => {
                        ExecutorError::Lost(Box::new(AttemptLoss {
                            attempt_id: job_id.clone(),
                            cause: cause.clone(),
                            description: error.to_string(),
                            error: error.to_tool_error(),
                        }))
                    }
                    other => ExecutorError::Refused(other.to_tool_error()),
                })
        })
    }

    fn parallelism(&self) -> usize {
        let snapshot = match &self.pool {
            PoolState::Lazy(pool) => pool.snapshot(),
            PoolState::Started(supervisor) => Some(supervisor.snapshot()),
        };
        snapshot
            .map(|s| {
                s.workers
                    .iter()
                    .filter(|w| w.mode == SlotMode::Active && w.state != SlotState::Stopped)
                    .count()
            })
            .unwrap_or(1)
            .max(1)
    }

    fn health(&self) -> ExecutorHealth {
        let snapshot = match &self.pool {
            PoolState::Lazy(pool) => pool.snapshot(),
            PoolState::Started(supervisor) => Some(supervisor.snapshot()),
        };
        let failed = matches!(&self.pool, PoolState::Lazy(pool) if pool.failed());
        match snapshot {
            Some(s) => ExecutorHealth {
                name: self.name(),
                ready: s
                    .workers
                    .iter()
                    .any(|w| matches!(w.state, SlotState::Idle | SlotState::Busy)),
                summary: format!(
                    "{} worker slot(s), {} running, {} queued",
                    s.workers.len(),
                    s.running_jobs,
                    s.queued_jobs
                ),
            },
            None => ExecutorHealth {
                name: self.name(),
                ready: false,
                summary: if failed {
                    "the worker pool failed to start".into()
                } else {
                    "the worker pool has not started".into()
                },
            },
        }
    }
}
