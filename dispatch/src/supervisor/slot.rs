//! One worker slot: a task that owns one worker process at a time, feeds it jobs
//! from the shared queue, pings it, and replaces it when it dies or is killed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reticle_protocol::error::ErrorCode;
use reticle_protocol::sync::lock;
use reticle_protocol::wire::{HostMessage, JobOutcome, WorkerMessage};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::MissedTickBehavior;

use super::WorkerSnapshot;
use super::process::{LiveWorker, start_worker};
use super::runtime_dir::RuntimeDir;
use super::snapshot::{SlotMode, SlotState};
use super::wire::{ConnEvent, write_message};
use super::{AttemptEntry, AttemptProgress, CancelKind, DeathCause, Inner, KillOutcome, QueuedJob};
use super::{ResourceLimit, SlotShared, SupervisorConfig, SupervisorError, SupervisorEvent};

/// Resolves once shutdown is requested (the watch guard never lives across an await).
async fn wait_shutdown(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}

/// Requests to a slot from the supervisor API.
pub enum SlotCommand {
    /// SIGKILL the worker if it runs `job_id`, reap it, answer once reaped.
    Kill {
        /// The job.
        job_id: String,
        /// Answered after the reap.
        done: oneshot::Sender<KillOutcome>,
    },
    /// Forward a cooperative cancel if the worker runs `job_id`.
    Cancel {
        /// The job.
        job_id: String,
    },
}

/// The job a worker is running.
struct ActiveJob {
    job: QueuedJob,
    last_done: Option<u64>,
    soft_cancelled: bool,
    /// When the run message went to the worker (for the job time limit).
    started: Instant,
}

/// How serving one worker process ended.
enum ServeEnd {
    /// We killed it for a cancel: replace at once.
    Killed,
    /// It died: replace after backoff.
    Died(DeathCause),
    /// The supervisor is shutting down.
    Shutdown,
    /// The slot was retired (rollout) and its worker stopped gracefully.
    Retired,
}

/// The task behind one slot.
pub struct Slot {
    shared: Arc<SlotShared>,
    index: usize,
    inner: Arc<Inner>,
    commands: mpsc::Receiver<SlotCommand>,
    shutdown: watch::Receiver<bool>,
    mode: watch::Receiver<SlotMode>,
    generation: u64,
    failures: u32,
}

impl Slot {
    /// The task of slot `shared`, taking commands from `commands` and its mode from `mode`.
    pub fn new(
        shared: Arc<SlotShared>,
        inner: Arc<Inner>,
        commands: mpsc::Receiver<SlotCommand>,
        shutdown: watch::Receiver<bool>,
        mode: watch::Receiver<SlotMode>,
    ) -> Self {
        Self {
            index: shared.id,
            shared,
            inner,
            commands,
            shutdown,
            mode,
            generation: 0,
            failures: 0,
        }
    }

    fn update(&self, f: impl FnOnce(&mut WorkerSnapshot)) {
        let mut status = lock(&self.shared.status);
        f(&mut status);
    }

    /// Records that the worker just sent a frame.
    fn heard(&self) {
        *lock(&self.shared.last_heard) = Some(Instant::now());
    }

    fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    fn retiring(&self) -> bool {
        *self.mode.borrow() == SlotMode::Retiring
    }

    fn takes_jobs(&self) -> bool {
        *self.mode.borrow() == SlotMode::Active
    }

    /// Runs the slot until shutdown. `ready` gets the outcome of the first start;
    /// if that fails the slot ends (the supervisor's `start` fails).
    pub async fn run(mut self, ready: oneshot::Sender<Result<(), SupervisorError>>) {
        let dir =
            match RuntimeDir::create(self.inner.config.runtime_dir_base.as_deref(), self.index) {
                Ok(dir) => dir,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
        let mut ready = Some(ready);
        let mut after: Option<(&'static str, u64)> = None;
        loop {
            if self.shutting_down() || self.retiring() {
                break;
            }
            self.generation += 1;
            if let Some((after, delay_ms)) = after.take() {
                self.inner.emit(SupervisorEvent::WorkerRestart {
                    slot: self.index,
                    generation: self.generation,
                    delay_ms,
                    after,
                });
            }
            let generation = self.generation;
            self.update(|s| {
                s.state = SlotState::Starting;
                s.generation = generation;
                s.pid = None;
                s.current_job = None;
            });
            let started = start_worker(
                &self.inner.config,
                &self.shared.exe,
                &self.inner.spawner,
                &self.inner.live_groups,
                &dir,
                self.index,
                generation,
            );
            let mut shutdown = self.shutdown.clone();
            let started = tokio::select! {
                started = started => started,
                _ = wait_shutdown(&mut shutdown) => break,
            };
            let mut worker = match started {
                Ok(worker) => worker,
                Err(e) => {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(Err(e));
                        break;
                    }
                    tracing::warn!(slot = self.index, generation, error = %e, "worker start failed");
                    self.failures += 1;
                    let delay = self.inner.config.backoff(self.failures);
                    if !self.backoff().await {
                        break;
                    }
                    after = Some(("start_failed", millis(delay)));
                    continue;
                }
            };
            self.update(|s| {
                s.state = SlotState::Idle;
                s.pid = Some(worker.pid);
                s.backend = Some(worker.hello.backend.clone());
                s.worker_version = Some(worker.hello.worker_version.clone());
                s.jobs_run = 0;
                s.device_bytes = 0;
            });
            self.heard();
            self.inner.emit(SupervisorEvent::WorkerReady {
                slot: self.index,
                pid: worker.pid,
                generation,
                exe: self.shared.exe.display().to_string(),
                version: worker.hello.worker_version.clone(),
                backend: worker.hello.backend.clone(),
                release: self.shared.release,
            });
            // Only now: `start` returning means the snapshot already shows the worker.
            if let Some(ready) = ready.take() {
                let _ = ready.send(Ok(()));
            }
            let end = self.serve(&mut worker).await;
            let lived = worker.started_at.elapsed();
            drop(worker);
            match end {
                ServeEnd::Shutdown => break,
                ServeEnd::Retired => {
                    self.inner.emit(SupervisorEvent::WorkerRetired {
                        slot: self.index,
                        release: self.shared.release,
                    });
                    break;
                }
                ServeEnd::Killed => {
                    if self.retiring() {
                        break;
                    }
                    self.update(|s| s.restarts += 1);
                    after = Some(("killed", 0));
                }
                ServeEnd::Died(cause) => {
                    tracing::warn!(slot = self.index, generation, %cause, "worker died");
                    if lived >= self.inner.config.backoff_reset_after {
                        self.failures = 0;
                    }
                    self.failures += 1;
                    self.update(|s| s.last_death = Some(cause));
                    if self.retiring() {
                        break;
                    }
                    self.update(|s| s.restarts += 1);
                    let delay = self.inner.config.backoff(self.failures);
                    if !self.backoff().await {
                        break;
                    }
                    after = Some(("fault", millis(delay)));
                }
            }
        }
        self.update(|s| {
            s.state = SlotState::Stopped;
            s.pid = None;
            s.current_job = None;
        });
        drop(dir);
    }

    /// Waits the backoff delay, marked dead; `false` if shutdown or retirement came first.
    async fn backoff(&mut self) -> bool {
        let delay = self.inner.config.backoff(self.failures);
        self.update(|s| {
            s.state = SlotState::Dead;
            s.pid = None;
            s.current_job = None;
        });
        let mut shutdown = self.shutdown.clone();
        let mut mode = self.mode.clone();
        tokio::select! {
            () = tokio::time::sleep(delay) => !self.retiring(),
            _ = wait_shutdown(&mut shutdown) => false,
            _ = mode.wait_for(|m| *m == SlotMode::Retiring) => false,
        }
    }

    /// Serves one live worker until it dies, is killed, or the pool shuts down.
    async fn serve(&mut self, worker: &mut LiveWorker) -> ServeEnd {
        let config = Arc::clone(&self.inner.config);
        let mut ticker = tokio::time::interval(config.heartbeat_interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut seq = 0u64;
        let mut last_heard = Instant::now();
        let mut active: Option<ActiveJob> = None;
        let mut fault: Option<String> = None;
        let mut shutdown = self.shutdown.clone();
        let mut mode = self.mode.clone();
        let inner = Arc::clone(&self.inner);
        loop {
            let idle = active.is_none();
            if idle && self.retiring() {
                // Blue after a rollout: its last job is done; stop without a fault.
                self.graceful_stop(worker, None).await;
                return ServeEnd::Retired;
            }
            let takes_jobs = idle && self.takes_jobs();
            tokio::select! {
                biased;
                event = worker.events.recv() => {
                    match event {
                        Some(ConnEvent::Message(message)) => {
                            last_heard = Instant::now();
                            self.heard();
                            if let Err(cause) = self.on_message(message, &mut active, &mut fault) {
                                return self.died(worker, active, cause).await;
                            }
                        }
                        Some(ConnEvent::Broken(message)) => {
                            return self.died(worker, active, DeathCause::Protocol { message }).await;
                        }
                        Some(ConnEvent::Closed) | None => {
                            // Give the process a moment to exit so the cause names its status.
                            let mut cause = worker.reap_within(Duration::from_millis(200)).await;
                            if let Some(message) = fault.take() {
                                cause = DeathCause::Fault { message };
                            }
                            return self.died(worker, active, cause).await;
                        }
                    }
                }
                status = worker.child.wait() => {
                    let cause = worker.reaped(status);
                    return self.died(worker, active, cause).await;
                }
                command = self.commands.recv() => {
                    if let Some(end) = self.on_command(command, worker, &mut active).await {
                        return end;
                    }
                }
                _ = wait_shutdown(&mut shutdown) => {
                    self.graceful_stop(worker, active).await;
                    return ServeEnd::Shutdown;
                }
                // A mode change (standby → active, active → retiring): re-check at the top.
                Ok(()) = mode.changed() => {}
                _ = ticker.tick() => {
                    if let Some(cause) = over_limit(&config, worker.pid, active.as_ref()) {
                        tracing::warn!(pid = worker.pid, %cause, "stopping a worker over its limit");
                        worker.kill_and_reap().await;
                        return self.died(worker, active, cause).await;
                    }
                    let silent = last_heard.elapsed();
                    if silent > config.heartbeat_timeout {
                        let cause = DeathCause::HeartbeatTimeout {
                            silent_ms: u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
                        };
                        worker.kill_and_reap().await;
                        return self.died(worker, active, cause).await;
                    }
                    seq += 1;
                    if let Err(message) = write_message(&mut worker.writer, &HostMessage::Ping { seq }, config.heartbeat_timeout).await {
                        worker.kill_and_reap().await;
                        return self.died(worker, active, DeathCause::Protocol { message }).await;
                    }
                }
                job = inner.next_job(), if takes_jobs => {
                    let Some(job) = job else { continue };
                    let Some(job) = self.claim(job) else { continue };
                    let job_id = job.request.job_id.clone();
                    let run = HostMessage::Run(job.request.clone());
                    active = Some(ActiveJob { job, last_done: None, soft_cancelled: false, started: Instant::now() });
                    self.update(|s| {
                        s.state = SlotState::Busy;
                        s.current_job = Some(job_id);
                    });
                    if let Err(message) = write_message(&mut worker.writer, &run, config.heartbeat_timeout).await {
                        worker.kill_and_reap().await;
                        return self.died(worker, active, DeathCause::Protocol { message }).await;
                    }
                }
            }
        }
    }

    /// Marks a dequeued job as running here, unless it was cancelled or abandoned
    /// while it waited.
    fn claim(&self, job: QueuedJob) -> Option<QueuedJob> {
        let mut jobs = lock(&self.inner.jobs);
        match jobs.get_mut(&job.request.job_id) {
            Some(entry @ AttemptEntry::Queued { .. }) => {
                *entry = AttemptEntry::Running { slot: self.index };
                Some(job)
            }
            _ => None,
        }
    }

    fn on_message(
        &mut self,
        message: WorkerMessage,
        active: &mut Option<ActiveJob>,
        fault: &mut Option<String>,
    ) -> Result<(), DeathCause> {
        match message {
            WorkerMessage::Pong {
                device_bytes,
                jobs_run,
                ..
            } => self.update(|s| {
                s.device_bytes = device_bytes;
                s.jobs_run = jobs_run;
            }),
            WorkerMessage::Progress {
                job_id,
                done,
                total,
                message,
            } => {
                if let Some(a) = active.as_mut()
                    && a.job.request.job_id == job_id
                    && a.last_done.is_none_or(|last| done > last)
                {
                    a.last_done = Some(done);
                    // Lossy by design: a slow consumer must not stall the heartbeats.
                    let _ = a.job.progress.try_send(AttemptProgress {
                        job_id,
                        done,
                        total,
                        message,
                    });
                }
            }
            WorkerMessage::Result { job_id, outcome } => {
                let matches = active
                    .as_ref()
                    .is_some_and(|a| a.job.request.job_id == job_id);
                if !matches {
                    return Err(DeathCause::Protocol {
                        message: format!("result for job {job_id:?}, which is not running"),
                    });
                }
                if let Some(a) = active.take() {
                    self.finish(a, outcome);
                }
            }
            WorkerMessage::Fault {
                job_id,
                message,
                fatal,
            } => {
                tracing::warn!(slot = self.index, ?job_id, fatal, %message, "worker fault");
                *fault = Some(message);
            }
            WorkerMessage::Hello(_) => {
                return Err(DeathCause::Protocol {
                    message: "second hello".to_owned(),
                });
            }
        }
        Ok(())
    }

    fn finish(&mut self, active: ActiveJob, outcome: JobOutcome) {
        let job_id = active.job.request.job_id.clone();
        let result = match outcome {
            JobOutcome::Err { error }
                if active.soft_cancelled && error.code == ErrorCode::Cancelled =>
            {
                Err(SupervisorError::Cancelled {
                    job_id,
                    how: CancelKind::Soft,
                })
            }
            outcome => Ok(outcome),
        };
        let _ = active.job.reply.send(result);
        // A worker that finishes jobs is healthy: restart promptly after its next death.
        self.failures = 0;
        self.update(|s| {
            s.state = SlotState::Idle;
            s.current_job = None;
            s.jobs_completed += 1;
        });
    }

    async fn on_command(
        &mut self,
        command: Option<SlotCommand>,
        worker: &mut LiveWorker,
        active: &mut Option<ActiveJob>,
    ) -> Option<ServeEnd> {
        match command? {
            SlotCommand::Kill { job_id, done } => {
                let running = active
                    .as_ref()
                    .is_some_and(|a| a.job.request.job_id == job_id);
                if !running {
                    let _ = done.send(KillOutcome::AlreadyFinished);
                    return None;
                }
                let started = Instant::now();
                worker.kill_and_reap().await;
                let reaped_in = started.elapsed();
                tracing::info!(
                    slot = self.index,
                    pid = worker.pid,
                    job_id,
                    ?reaped_in,
                    "job killed"
                );
                if let Some(a) = active.take() {
                    let _ = a.job.reply.send(Err(SupervisorError::Cancelled {
                        job_id,
                        how: CancelKind::Killed,
                    }));
                }
                self.update(|s| {
                    s.state = SlotState::Dead;
                    s.pid = None;
                    s.current_job = None;
                });
                let _ = done.send(KillOutcome::Killed {
                    pid: worker.pid,
                    reaped_in,
                });
                Some(ServeEnd::Killed)
            }
            SlotCommand::Cancel { job_id } => {
                if let Some(a) = active.as_mut()
                    && a.job.request.job_id == job_id
                {
                    a.soft_cancelled = true;
                    let timeout = self.inner.config.heartbeat_timeout;
                    if let Err(message) =
                        write_message(&mut worker.writer, &HostMessage::Cancel { job_id }, timeout)
                            .await
                    {
                        worker.kill_and_reap().await;
                        let cause = DeathCause::Protocol { message };
                        return Some(self.died(worker, active.take(), cause).await);
                    }
                }
                None
            }
        }
    }

    /// Reaps a dead worker and fails its in-flight job with `WorkerDied`.
    async fn died(
        &mut self,
        worker: &mut LiveWorker,
        active: Option<ActiveJob>,
        cause: DeathCause,
    ) -> ServeEnd {
        worker.kill_and_reap().await;
        let cause = self.refine_abort(worker, cause).await;
        self.inner.emit(SupervisorEvent::WorkerFault {
            slot: self.index,
            pid: worker.pid,
            cause: cause.clone(),
            job_id: active.as_ref().map(|a| a.job.request.job_id.clone()),
        });
        if let Some(a) = active {
            let _ = a.job.reply.send(Err(SupervisorError::WorkerDied {
                job_id: a.job.request.job_id.clone(),
                pid: worker.pid,
                generation: self.generation,
                cause: cause.clone(),
            }));
        }
        ServeEnd::Died(cause)
    }

    /// A worker whose stderr reported an allocation refused under its `RLIMIT_DATA` went
    /// over its memory ceiling: a resource fault, not a crash to replay. That holds
    /// whatever ended it next: the abort that follows, or, while the runtime was still
    /// printing a backtrace, the resident-memory check or a missed heartbeat.
    async fn refine_abort(&self, worker: &mut LiveWorker, cause: DeathCause) -> DeathCause {
        let Some(allowed) = self.inner.config.data_rlimit_bytes() else {
            return cause;
        };
        match worker.refused_allocation().await {
            Some(requested) => DeathCause::AllocationRefused { allowed, requested },
            None => cause,
        }
    }

    /// Asks the worker to finish and exit; whatever is still running after the grace
    /// period is SIGKILLed. A result that arrives in time is delivered.
    async fn graceful_stop(&mut self, worker: &mut LiveWorker, mut active: Option<ActiveJob>) {
        let grace = self.inner.config.shutdown_grace;
        let deadline = tokio::time::Instant::now() + grace;
        if write_message(&mut worker.writer, &HostMessage::Shutdown, grace)
            .await
            .is_ok()
        {
            let mut fault = None;
            loop {
                tokio::select! {
                    event = worker.events.recv() => match event {
                        Some(ConnEvent::Message(message)) => {
                            if self.on_message(message, &mut active, &mut fault).is_err() {
                                break;
                            }
                        }
                        _ => break,
                    },
                    status = worker.child.wait() => {
                        worker.reaped(status);
                        break;
                    }
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        worker.reap_within(remaining).await;
        if let Some(a) = active {
            let _ = a.job.reply.send(Err(SupervisorError::ShuttingDown));
        }
    }
}

/// The limit a busy worker has gone over, if any: its job's wall time, or its
/// resident memory (read from `/proc`; an idle worker's memory is its caches and is
/// left alone until a job makes it grow). Checked at every heartbeat tick.
fn over_limit(
    config: &SupervisorConfig,
    pid: u32,
    active: Option<&ActiveJob>,
) -> Option<DeathCause> {
    let active = active?;
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if let Some(limit) = config.job_timeout {
        let elapsed = active.started.elapsed();
        if elapsed > limit {
            return Some(DeathCause::OverLimit {
                limit: ResourceLimit::WallTime,
                allowed: millis(limit),
                used: millis(elapsed),
            });
        }
    }
    let allowed = config.memory_limit_bytes?;
    let used = resident_bytes(pid)?;
    (used > allowed).then_some(DeathCause::OverLimit {
        limit: ResourceLimit::Memory,
        allowed,
        used,
    })
}

/// Resident set size of `pid` (`/proc/<pid>/statm`, second field, in pages).
fn resident_bytes(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| u64::try_from(p).ok())
        .unwrap_or(4096);
    Some(pages.saturating_mul(page))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
