//! A point-in-time view of the pool, for health and telemetry.

use serde::Serialize;

use reticle_protocol::wire::BackendDescription;

use super::DeathCause;

/// Lifecycle state of one worker slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
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

/// One worker slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerSnapshot {
    /// Slot index (stable for the supervisor's life).
    pub slot: usize,
    /// Pid of the current process (also its process group id), if one is running.
    pub pid: Option<u32>,
    /// State.
    pub state: WorkerState,
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

/// The whole pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    /// Every slot, by index.
    pub workers: Vec<WorkerSnapshot>,
    /// Jobs waiting for a worker.
    pub queued_jobs: usize,
    /// Jobs running on a worker.
    pub running_jobs: usize,
}
