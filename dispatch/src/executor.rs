//! The executor seam: what runs one attempt of a unit somewhere.
//!
//! The [`super::Dispatcher`] decides *whether* an attempt runs (ids, replay, journal);
//! an [`Executor`] decides *where*: today the local worker pool ([`super::LocalPool`]),
//! later a cluster scheduler. An executor knows nothing of jobs, tools or MCP: it gets an
//! [`AttemptRequest`], forwards progress, and answers with the worker's outcome or an
//! [`ExecutorError`]. Dropping the future it returns must stop the attempt (kill its
//! worker), since that is how a cancelled job lets go of its work.

use std::future::Future;
use std::pin::Pin;

use reticle_protocol::ToolError;
use reticle_protocol::wire::{JobContext, JobOutcome};
use serde::Serialize;
use tokio::sync::mpsc;

use reticle_journal::{JournalHandle, UnitJournal};

pub use crate::supervisor::{AttemptProgress, DeathCause};

/// One run of one unit on one worker.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRequest {
    /// `<scope id>.<run>` for a scope's only unit, `<scope id>.<unit>.<run>` otherwise;
    /// unique among the attempts an executor runs at once.
    pub attempt_id: String,
    /// The worker op.
    pub op: String,
    /// Its arguments (JSON text).
    pub args_json: String,
    /// Roots, artifact directory and limits the worker enforces.
    pub context: JobContext,
}

/// A run lost with its worker: the outcome is unknown unless the cause says the host
/// stopped it over a limit ([`DeathCause::replayable`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptLoss {
    /// The attempt that was lost.
    pub attempt_id: String,
    /// Why the worker died.
    pub cause: DeathCause,
    /// What happened, for messages (`worker 12 (generation 2) exited … while running job …`).
    pub description: String,
    /// The executor's own error for the loss, used when it is not replayed.
    pub error: ToolError,
}

impl std::fmt::Display for AttemptLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// Why an attempt has no outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutorError {
    /// The attempt ran and its worker died with it (boxed: the error stays small on
    /// the hot `Result` path).
    Lost(Box<AttemptLoss>),
    /// The attempt never ran, or was stopped (queue full, shutting down, cancelled): the
    /// tool error the caller gets.
    Refused(ToolError),
}

/// What health shows of an executor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutorHealth {
    /// The executor's name ([`Executor::name`]).
    pub name: &'static str,
    /// Whether it can run attempts now.
    pub ready: bool,
    /// One line on its state (`3 workers, 1 busy, 0 queued`).
    pub summary: String,
}

/// The tiles of one fanned-out job, handed to an executor that runs them as one batch
/// ([`Executor::run_tiles`]): the tile op on tiles `0..total`.
#[derive(Debug, Clone)]
pub struct TileBatch {
    /// The scope's id: the prefix of the batch's attempt ids and names.
    pub scope_id: String,
    /// The tile op (`evaluate.tile`).
    pub op: String,
    /// Its arguments without `tile_number` (JSON object text).
    pub args_json: String,
    /// Roots, the job's artifact directory (where tile outputs must end up) and limits.
    pub context: JobContext,
    /// How many tiles.
    pub total: u64,
    /// The request's journal entry: each tile has its own track in it, as when it runs
    /// as a unit ([`Self::tile_journal`]).
    pub journal: JournalHandle,
}

impl TileBatch {
    /// The journal track of tile `tile`: unit `tile + 1` of the fan-out (unit 0 is the
    /// plan), the same track the tile has when it runs as a unit on the pool.
    #[must_use]
    pub fn tile_journal(&self, tile: u64) -> UnitJournal {
        self.journal
            .unit(u32::try_from(tile + 1).unwrap_or(u32::MAX))
    }
}

/// What a batch run of tiles did, for `telemetry.dispatch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Tile runs started (tiles, plus tiles run again).
    pub attempts: u64,
    /// Tiles run again after their array task was lost.
    pub replays: u64,
    /// Array tasks lost (cancelled, failed, node down, over a limit).
    pub losses: u64,
    /// Tiles whose task the scheduler stopped over a limit (never run again).
    pub stopped_over_limit: u64,
}

/// A future an executor returns (boxed so the trait stays object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs attempts somewhere. Object-safe: the dispatcher holds an `Arc<dyn Executor>`.
pub trait Executor: Send + Sync {
    /// A short name for health and telemetry (`local`).
    fn name(&self) -> &'static str;

    /// Makes the executor ready to run attempts (starts the local pool); called before
    /// a unit's first attempt, so a unit that cannot run counts no attempt.
    ///
    /// # Errors
    /// The tool error a caller gets when nothing can run (no worker pool).
    fn ready(&self) -> BoxFuture<'_, Result<(), ToolError>>;

    /// Runs one attempt and resolves with the worker's outcome (a tool error from the op
    /// is `Ok(JobOutcome::Err)`). Progress goes to `progress`; the sender is dropped when
    /// the attempt ends. Dropping the future stops the attempt.
    ///
    /// # Errors
    /// [`ExecutorError::Lost`] when the worker died with the attempt,
    /// [`ExecutorError::Refused`] when it never ran or was stopped.
    fn run(
        &self,
        attempt: AttemptRequest,
        progress: mpsc::Sender<AttemptProgress>,
    ) -> BoxFuture<'_, Result<JobOutcome, ExecutorError>>;

    /// Its state for `health`.
    fn health(&self) -> ExecutorHealth;

    /// How many attempts it runs at once (after [`Self::ready`]): a caller that fans one
    /// job out into many units keeps about this many in flight.
    fn parallelism(&self) -> usize;

    /// Runs every tile of `batch` as one batch (a cluster job array), sending each tile's
    /// number to `done` once its output is in the job's artifact directory; `None` when
    /// the executor runs tiles one unit at a time through [`Self::run`] (the default).
    /// A tile whose task was lost runs again inside the batch when the replay policy
    /// (`dispatch::replay`) allows it; dropping the future stops every task of the batch.
    /// The statistics come back whether the batch succeeded or not.
    fn run_tiles(
        &self,
        batch: TileBatch,
        done: mpsc::UnboundedSender<u64>,
    ) -> Option<BoxFuture<'_, (BatchStats, Result<(), ToolError>)>> {
        let _ = (batch, done);
        None
    }

    /// The executor's own state for `telemetry` (a cluster's arrays); `null` by default.
    fn stats(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
