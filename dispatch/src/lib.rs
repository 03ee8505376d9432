//! Where the host's work runs, and its record: the dispatcher (this module), the
//! executors behind it (the local worker pool, Slurm), the worker supervisor
//! ([`supervisor`]) and the host's handle on it ([`workers`]), the job table ([`jobs`]),
//! the operator's event log ([`events`]) and the one handover flag ([`handover`]).
//! It knows no MCP method, no tool and no client; it never parses layout bytes.
//!
//! The one way work reaches a worker.
//!
//! Every op — the MCP job tools, the observer tools, `reticle eval`, `reticle demo` —
//! runs through [`Dispatcher::run`]: a *unit* of work ([`Unit`]: an op and its arguments)
//! under a [`Scope`] (a job, a synchronous call, or the command line). For each unit the
//! dispatcher owns
//! - the attempt ids (`<scope>.<run>`, or `<scope>.<unit>.<run>` for one of several),
//! - the journal: the unit's own track in the request's entry ([`reticle_journal`]),
//! - the replay decision after a lost worker (the request's libmcp contract, the unit's
//!   attempts, [`DeathCause::replayable`]: a run the host stopped over a limit is never
//!   replayed) — [`replay`],
//! - progress forwarding (to the scope, or to the unit's own sink for a caller that
//!   aggregates many units),
//! - the counters `telemetry.dispatch` shows, and the job's `attempts`.
//!
//! Where an attempt runs is the [`Executor`]'s business: today [`LocalPool`], the host's
//! pool of worker processes; a cluster scheduler is a second implementation, and no tool
//! changes for it. `run` may be called concurrently, many times, under one scope: each
//! call is one unit with its own attempts and replay decision.

pub mod events;
mod executor;
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub mod fanout;
pub mod handover;
pub mod jobs;
mod replay;
mod scope;
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub mod slurm;
pub mod supervisor;
pub mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use libmcp::FaultClass;
use reticle_protocol::wire::{JobContext, JobLimits, JobOutcome};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use executor::{
    AttemptLoss, AttemptProgress, AttemptRequest, BatchStats, BoxFuture, DeathCause, Executor,
    ExecutorError, ExecutorHealth, TileBatch,
};
pub use fanout::FanOut;
pub use replay::{Probe, ProbeOutcome};
pub use scope::{Scope, ScopeKind};
pub use slurm::{SlurmExecutor, SlurmSettings};
pub use supervisor::LocalPool;

use replay::AfterLoss;

/// Most runs of one unit under a Convergent contract: the first, plus replays after its
/// worker died (DESIGN.md replay table). A unit that kills its worker this often is
/// likely poison.
pub const MAX_ATTEMPTS: u8 = 3;

/// Progress frames buffered per attempt (the supervisor forwards with `try_send`).
const PROGRESS_BUFFER: usize = 64;

/// A per-unit progress sink ([`Unit::on_progress`]).
type UnitProgress = Box<dyn Fn(&AttemptProgress) + Send + Sync>;

/// One unit of work: an op, its arguments, and how it may be run again.
pub struct Unit {
    op: String,
    args_json: String,
    artifact_dir: Option<String>,
    index: Option<u32>,
    max_attempts: u8,
    probe: Option<Probe>,
    on_progress: Option<UnitProgress>,
}

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unit")
            .field("op", &self.op)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Unit {
    /// The scope's only unit: op `op` on `args` (paths already resolved), at most
    /// [`MAX_ATTEMPTS`] runs.
    #[must_use]
    pub fn new(op: impl Into<String>, args: &Value) -> Self {
        Self {
            op: op.into(),
            args_json: args.to_string(),
            artifact_dir: None,
            index: None,
            max_attempts: MAX_ATTEMPTS,
            probe: None,
            on_progress: None,
        }
    }

    /// Makes this unit `index` of several in its scope (attempt ids `<scope>.<index>.<run>`,
    /// its own track in the journal).
    #[must_use]
    pub fn indexed(mut self, index: u32) -> Self {
        self.index = Some(index);
        self
    }

    /// The host-created directory the op may write its artifacts to (D44); a replay
    /// writes into the same one.
    #[must_use]
    pub fn with_artifact_dir(mut self, dir: Option<String>) -> Self {
        self.artifact_dir = dir;
        self
    }

    /// Most runs of the unit (the first one plus replays).
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u8) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The probe a ProbeRequired request runs after a lost run of this unit.
    #[must_use]
    pub fn with_probe(mut self, probe: Probe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// Sends this unit's progress frames to `sink` instead of the scope (a caller that
    /// runs many units aggregates them and reports with [`Scope::report`]).
    #[must_use]
    pub fn on_progress(mut self, sink: impl Fn(&AttemptProgress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Box::new(sink));
        self
    }
}

/// Lifetime counters of the dispatcher (`telemetry.dispatch`).
#[derive(Debug, Default)]
struct Counters {
    units: AtomicU64,
    attempts: AtomicU64,
    replays: AtomicU64,
    worker_losses: AtomicU64,
    stopped_over_limit: AtomicU64,
}

/// Runs units on an [`Executor`] under the replay rules. Shared by every caller.
pub struct Dispatcher {
    executor: Arc<dyn Executor>,
    /// The limits every attempt's context carries (the host's settings).
    job_limits: JobLimits,
    counters: Counters,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("executor", &self.executor.name())
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A dispatcher sending attempts to `executor`, each with `job_limits`.
    #[must_use]
    pub fn new(executor: Arc<dyn Executor>, job_limits: JobLimits) -> Arc<Self> {
        Arc::new(Self {
            executor,
            job_limits,
            counters: Counters::default(),
        })
    }

    /// The executor attempts go to.
    #[must_use]
    pub fn executor(&self) -> &dyn Executor {
        &*self.executor
    }

    /// The `telemetry.dispatch` payload.
    #[must_use]
    pub fn stats(&self) -> Value {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let c = &self.counters;
        json!({
            "executor": self.executor.name(),
            "units": n(&c.units),
            "attempts": n(&c.attempts),
            "replays": n(&c.replays),
            "worker_losses": n(&c.worker_losses),
            "stopped_over_limit": n(&c.stopped_over_limit),
            "executor_state": self.executor.stats(),
        })
    }

    /// Runs the tiles `0..total` of `op` on `args` (without `tile_number`) as one batch
    /// when the executor runs batches ([`Executor::run_tiles`]), sending each finished
    /// tile's number to `done`; `None` when it does not (the caller runs the tiles as
    /// units). Dropping the future stops the batch.
    ///
    /// # Errors
    /// The first tile's tool error, or the executor's (submission failed, tiles lost
    /// too often).
    pub async fn run_tile_batch(
        &self,
        scope: &Scope,
        op: String,
        args_json: String,
        artifact_dir: Option<String>,
        total: u64,
        done: mpsc::UnboundedSender<u64>,
    ) -> Option<Result<(), ToolError>> {
        let batch = TileBatch {
            scope_id: scope.id().to_owned(),
            op,
            args_json,
            context: JobContext {
                artifact_dir,
                allowed_roots: scope.allowed_roots().to_vec(),
                limits: self.job_limits.clone(),
            },
            total,
            journal: scope.journal().clone(),
        };
        let running = self.executor.run_tiles(batch, done)?;
        if let Err(e) = self.executor.ready().await {
            return Some(Err(e));
        }
        scope.running();
        self.counters.units.fetch_add(total, Ordering::Relaxed);
        let (stats, result) = running.await;
        let c = &self.counters;
        c.attempts.fetch_add(stats.attempts, Ordering::Relaxed);
        c.replays.fetch_add(stats.replays, Ordering::Relaxed);
        c.worker_losses.fetch_add(stats.losses, Ordering::Relaxed);
        c.stopped_over_limit
            .fetch_add(stats.stopped_over_limit, Ordering::Relaxed);
        Some(result)
    }

    /// Runs `unit` under `scope` to its end and returns the worker's payload.
    ///
    /// Each run is journaled in the unit's track of the scope's entry; a run lost with
    /// its worker is replayed as the request's contract and libmcp's table allow, a run
    /// stopped over a limit never is. Dropping the future stops the running attempt
    /// (its worker is killed). Safe to call concurrently under one scope.
    ///
    /// # Errors
    /// The op's tool error; `RESOURCE_LIMIT` for a run stopped over a limit;
    /// `WORKER_FAULT` with fault class `replay` once the attempts are spent, or
    /// `ambiguous_outcome` when the contract forbids a re-run; the executor's error when
    /// nothing could run (no worker pool, queue full, shutting down).
    pub async fn run(&self, scope: &Scope, unit: Unit) -> Result<Value, ToolError> {
        // Nothing counts as an attempt before the executor can take one.
        self.executor.ready().await?;
        self.counters.units.fetch_add(1, Ordering::Relaxed);
        let journal = scope.unit_journal(unit.index.unwrap_or(0));
        let mut run = 0u32;
        loop {
            run += 1;
            scope.attempt_started(run > 1);
            self.counters.attempts.fetch_add(1, Ordering::Relaxed);
            let attempt = AttemptRequest {
                attempt_id: scope.attempt_id(unit.index, run),
                op: unit.op.clone(),
                args_json: unit.args_json.clone(),
                context: JobContext {
                    artifact_dir: unit.artifact_dir.clone(),
                    allowed_roots: scope.allowed_roots().to_vec(),
                    limits: self.job_limits.clone(),
                },
            };
            let (tx, mut rx) = mpsc::channel::<AttemptProgress>(PROGRESS_BUFFER);
            // Progress is forwarded while the attempt runs; the executor drops its sender
            // when the attempt ends, which ends this loop too.
            let forward = async {
                while let Some(p) = rx.recv().await {
                    // A progress frame proves the run reached a worker; until then the
                    // job waits in the executor's queue and reads `queued`.
                    journal.dispatched();
                    scope.running();
                    match &unit.on_progress {
                        Some(sink) => sink(&p),
                        None => scope.progress(&p),
                    }
                }
            };
            let (outcome, ()) = tokio::join!(self.executor.run(attempt, tx), forward);
            let loss = match outcome {
                Ok(JobOutcome::Ok { payload_json }) => {
                    journal.dispatched();
                    journal.completed();
                    return parse_payload(&payload_json);
                }
                Ok(JobOutcome::Err { error }) => {
                    journal.dispatched();
                    journal.completed();
                    return Err(error);
                }
                Err(ExecutorError::Refused(error)) => return Err(error),
                Err(ExecutorError::Lost(loss)) => *loss,
            };
            self.counters.worker_losses.fetch_add(1, Ordering::Relaxed);
            match replay::after_loss(&journal, &loss, unit.probe.as_ref(), unit.max_attempts, run)
                .await
            {
                AfterLoss::Replay => {
                    self.counters.replays.fetch_add(1, Ordering::Relaxed);
                }
                AfterLoss::OverLimit(error) => {
                    self.counters
                        .stopped_over_limit
                        .fetch_add(1, Ordering::Relaxed);
                    return Err(error);
                }
                AfterLoss::Done(result) => return result,
            }
        }
    }
}

/// The worker's payload, which must be JSON: anything else breaks the result contract.
fn parse_payload(payload_json: &str) -> Result<Value, ToolError> {
    serde_json::from_str(payload_json).map_err(|e| {
        ToolError::new(
            ErrorCode::InternalError,
            format!("worker sent invalid JSON: {e}"),
        )
        .with_fault(FaultClass::Protocol, None)
        .with_hint("report this: the worker broke its result contract")
    })
}
