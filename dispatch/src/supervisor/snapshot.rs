//! A point-in-time view of the pool, for health and telemetry.

use std::path::Path;

use serde::{Deserialize, Serialize};

use reticle_protocol::wire::BackendDescription;

use super::DeathCause;

/// Lifecycle state of one worker slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotState {
    /// Spawning or handshaking.
    Starting,
    /// Ready for a job.
    Idle,
    /// Running a job.
    Busy,
    /// Dead, waiting for its restart (backoff).
    Dead,
    /// Shut down for good.
    Stopped,
}

/// Whether a slot takes jobs (blue/green rollout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotMode {
    /// Takes jobs from the queue.
    Active,
    /// Started (green, during a rollout) but takes no job until the whole green set is up.
    Standby,
    /// Takes no new job; stops once its current one is done (blue, after a rollout).
    Retiring,
}

/// One worker slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerSnapshot {
    /// Slot id (unique for the supervisor's life; rollouts add new ones).
    pub slot: usize,
    /// The worker binary.
    pub exe: String,
    /// The version the current process announced in its hello.
    pub worker_version: Option<String>,
    /// The release the slot belongs to (0 at start, +1 per rollout attempt).
    pub release: u64,
    /// Whether it takes jobs.
    pub mode: SlotMode,
    /// Pid of the current process (also its process group id), if one is running.
    pub pid: Option<u32>,
    /// State.
    pub state: SlotState,
    /// How many processes this slot has started (1 for the first).
    pub generation: u64,
    /// Jobs the current process reported finished (from its last pong).
    pub jobs_run: u64,
    /// Jobs this slot finished with a result, over all generations.
    pub jobs_completed: u64,
    /// GPU bytes the current process reported (from its last pong).
    pub device_bytes: u64,
    /// Milliseconds since the current process last sent a frame.
    pub last_heartbeat_age_ms: Option<u64>,
    /// Replacements started after a death or a kill.
    pub restarts: u64,
    /// The job running now.
    pub current_job: Option<String>,
    /// Backend the current process announced.
    pub backend: Option<BackendDescription>,
    /// Why the previous process ended, if one did.
    pub last_death: Option<DeathCause>,
}

impl WorkerSnapshot {
    /// A slot that has not started its first worker yet.
    #[must_use]
    pub fn starting(slot: usize, exe: &Path, release: u64, mode: SlotMode) -> Self {
        Self {
            slot,
            exe: exe.display().to_string(),
            worker_version: None,
            release,
            mode,
            pid: None,
            state: SlotState::Starting,
            generation: 0,
            jobs_run: 0,
            jobs_completed: 0,
            device_bytes: 0,
            last_heartbeat_age_ms: None,
            restarts: 0,
            current_job: None,
            backend: None,
            last_death: None,
        }
    }
}

/// How a rollout (or rollback) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutRecord {
    /// Whether the new binary now serves.
    pub ok: bool,
    /// The binary rolled out.
    pub exe: String,
    /// Its release number.
    pub release: u64,
    /// When it ended (Unix ms).
    pub finished_unix_ms: u64,
    /// How long it took.
    pub duration_ms: u64,
    /// What happened, for operators.
    pub message: String,
}

/// The pool's release state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutSnapshot {
    /// `stable` or `reloading` (a rollout is running).
    pub state: &'static str,
    /// The binary new workers run.
    pub current_exe: String,
    /// The binary `rollback` would return to.
    pub previous_exe: Option<String>,
    /// Rollout attempts so far.
    pub release: u64,
    /// The last rollout's outcome (a failed one is the rollout fault).
    pub last: Option<RolloutRecord>,
}

/// The whole pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    /// Every slot, oldest first.
    pub workers: Vec<WorkerSnapshot>,
    /// Jobs waiting for a worker.
    pub queued_jobs: usize,
    /// Jobs running on a worker.
    pub running_jobs: usize,
    /// Release and rollout state.
    pub rollout: RolloutSnapshot,
}
