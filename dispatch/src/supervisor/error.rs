//! What can go wrong between the host and its workers.

use std::fmt;

use libmcp::FaultClass;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Serialize;

/// Why a worker process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeathCause {
    /// The process exited or was killed by a signal it did not get from us.
    Exited {
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Terminating signal, when it was signalled.
        signal: Option<i32>,
    },
    /// The socket closed and the process did not exit by itself soon after.
    ConnectionLost,
    /// No frame for longer than the heartbeat timeout.
    HeartbeatTimeout {
        /// Milliseconds since the last frame.
        silent_ms: u64,
    },
    /// The worker broke the wire protocol (undecodable frame, unexpected message).
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The worker reported a fatal fault before going away.
    Fault {
        /// The worker's message.
        message: String,
    },
    /// The kernel refused an allocation at the worker's `RLIMIT_DATA` and the worker
    /// aborted (its stderr said so).
    AllocationRefused {
        /// The rlimit, bytes.
        allowed: u64,
        /// The allocation that was refused, bytes.
        requested: u64,
    },
    /// The host killed the worker because its job went over a limit.
    OverLimit {
        /// Which limit.
        limit: ResourceLimit,
        /// The limit (bytes or milliseconds).
        allowed: u64,
        /// What was measured when the worker was killed (same unit).
        used: u64,
    },
    /// A cluster scheduler ended the batch task running the attempt (Slurm: the array
    /// element left `squeue` in an ended state with the attempt's tile not done).
    SchedulerEnded {
        /// The scheduler's final state of the task (`CANCELLED`, `NODE_FAIL`, `TIMEOUT`…,
        /// `GONE` when it left the queue unseen).
        state: String,
        /// The limit the scheduler stopped it over (`OUT_OF_MEMORY`, `TIMEOUT`), if any.
        limit: Option<ResourceLimit>,
    },
}

/// A per-job resource the host enforces on workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceLimit {
    /// Resident memory of the worker process, bytes (`RETICLE_WORKER_MEMORY_MB`).
    Memory,
    /// Wall time of one job attempt, milliseconds (`RETICLE_JOB_TIMEOUT_S`).
    WallTime,
}

impl DeathCause {
    /// Whether re-running the job on a fresh worker could succeed: not when the job
    /// itself went over a limit (it would again, and take a worker with it each time).
    #[must_use]
    pub fn replayable(&self) -> bool {
        !matches!(
            self,
            Self::OverLimit { .. }
                | Self::AllocationRefused { .. }
                | Self::SchedulerEnded { limit: Some(_), .. }
        )
    }

    /// The limit the run went over, if that is why it ended.
    #[must_use]
    pub fn limit(&self) -> Option<ResourceLimit> {
        match self {
            Self::OverLimit { limit, .. } => Some(*limit),
            Self::AllocationRefused { .. } => Some(ResourceLimit::Memory),
            Self::SchedulerEnded { limit, .. } => *limit,
            _ => None,
        }
    }

    /// libmcp's fault class of this death (D17: heartbeat → timeout, broken wire →
    /// protocol, lost socket → transport, exit → process, over a limit → resource).
    #[must_use]
    pub fn fault_class(&self) -> FaultClass {
        match self {
            Self::HeartbeatTimeout { .. } => FaultClass::Timeout,
            Self::Protocol { .. } => FaultClass::Protocol,
            Self::ConnectionLost => FaultClass::Transport,
            Self::Exited { .. } | Self::Fault { .. } => FaultClass::Process,
            Self::OverLimit { .. } | Self::AllocationRefused { .. } => FaultClass::Resource,
            Self::SchedulerEnded { limit, .. } => match limit {
                Some(_) => FaultClass::Resource,
                None => FaultClass::Process,
            },
        }
    }

    /// A short snake_case code for the cause (fault codes, event records).
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Exited { .. } => "worker_exited",
            Self::ConnectionLost => "worker_connection_lost",
            Self::HeartbeatTimeout { .. } => "worker_heartbeat_timeout",
            Self::Protocol { .. } => "worker_protocol",
            Self::Fault { .. } => "worker_fault",
            Self::OverLimit { .. } | Self::AllocationRefused { .. } => "worker_over_limit",
            Self::SchedulerEnded { limit: Some(_), .. } => "worker_over_limit",
            Self::SchedulerEnded { limit: None, .. } => "worker_task_ended",
        }
    }
}

impl fmt::Display for DeathCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited {
                code: Some(code), ..
            } => write!(f, "exited with code {code}"),
            Self::Exited {
                signal: Some(sig), ..
            } => write!(f, "killed by signal {sig}"),
            Self::Exited { .. } => f.write_str("exited"),
            Self::ConnectionLost => f.write_str("closed its connection"),
            Self::AllocationRefused { allowed, requested } => write!(
                f,
                "was stopped at its memory ceiling (an allocation of {} refused, RLIMIT_DATA {} MiB)",
                Size(*requested),
                allowed >> 20
            ),
            Self::OverLimit {
                limit: ResourceLimit::Memory,
                allowed,
                used,
            } => write!(
                f,
                "was killed over its memory limit ({} MiB resident, limit {} MiB)",
                used >> 20,
                allowed >> 20
            ),
            Self::OverLimit {
                limit: ResourceLimit::WallTime,
                allowed,
                used,
            } => write!(
                f,
                "was killed over the job time limit ({used} ms, limit {allowed} ms)"
            ),
            Self::HeartbeatTimeout { silent_ms } => {
                write!(f, "missed its heartbeats ({silent_ms} ms silent)")
            }
            Self::Protocol { message } => write!(f, "broke the wire protocol: {message}"),
            Self::Fault { message } => write!(f, "reported a fatal fault: {message}"),
            Self::SchedulerEnded {
                state,
                limit: Some(ResourceLimit::Memory),
            } => write!(
                f,
                "was stopped by the scheduler over its memory limit ({state})"
            ),
            Self::SchedulerEnded {
                state,
                limit: Some(ResourceLimit::WallTime),
            } => write!(
                f,
                "was stopped by the scheduler over its time limit ({state})"
            ),
            Self::SchedulerEnded { state, limit: None } => {
                write!(f, "ended in the scheduler ({state})")
            }
        }
    }
}

/// A byte count in the largest binary unit (up to MiB) that keeps it at least 1.
struct Size(u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            b if b >= 1 << 20 => write!(f, "{} MiB", b >> 20),
            b if b >= 1 << 10 => write!(f, "{} KiB", b >> 10),
            b => write!(f, "{b} bytes"),
        }
    }
}

/// How a job was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelKind {
    /// Removed from the queue before any worker saw it.
    Dequeued,
    /// Its worker's process group was SIGKILLed and reaped.
    Killed,
    /// The worker stopped it cooperatively after a soft cancel.
    Soft,
}

/// What an agent can do about a job that went over the worker memory limit.
const MEMORY_HINT: &str = "ask for a smaller window or a coarser pixel_nm; the operator can raise RETICLE_WORKER_MEMORY_MB";

/// The tool error of a run lost with its worker (or its cluster task), as a caller that
/// does not replay it reports it: over a limit, `RESOURCE_LIMIT` of fault class
/// `resource` with a hint naming the limit's setting (the same on the pool and on a
/// cluster); otherwise `WORKER_FAULT` of the death's fault class, retryable.
#[must_use]
pub fn lost_run_error(job_id: &str, cause: &DeathCause, message: String) -> ToolError {
    let details = serde_json::json!({ "job_id": job_id, "cause": cause });
    let Some(limit) = cause.limit() else {
        return ToolError::new(ErrorCode::WorkerFault, message)
            .with_details(details)
            .with_fault(cause.fault_class(), Some(500))
            .with_hint("a fresh worker replaces the lost one; retry after the delay");
    };
    let scheduler = matches!(cause, DeathCause::SchedulerEnded { .. });
    let hint = match (limit, scheduler) {
        (ResourceLimit::Memory, false) => MEMORY_HINT,
        (ResourceLimit::WallTime, false) => {
            "ask for a smaller window or a coarser pixel_nm; the operator can raise RETICLE_JOB_TIMEOUT_S"
        }
        (ResourceLimit::Memory, true) => {
            "ask for a smaller window or a coarser pixel_nm; the operator can give the cluster's tasks more memory or set fewer RETICLE_SLURM_TILES_PER_TASK"
        }
        (ResourceLimit::WallTime, true) => {
            "ask for a smaller window or a coarser pixel_nm; the operator can raise RETICLE_SLURM_TIME_LIMIT or set fewer RETICLE_SLURM_TILES_PER_TASK"
        }
    };
    ToolError::new(ErrorCode::ResourceLimit, message)
        .with_details(details)
        .with_fault(FaultClass::Resource, None)
        .with_hint(hint)
}

/// Errors of the supervisor API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupervisorError {
    /// The configuration is unusable.
    #[error("invalid supervisor configuration: {0}")]
    Config(String),
    /// The private runtime directory could not be made safe.
    #[error("runtime directory {path}: {message}")]
    RuntimeDir {
        /// The directory.
        path: String,
        /// What failed.
        message: String,
    },
    /// The worker binary could not be started.
    #[error("cannot start worker {exe}: {message}")]
    Spawn {
        /// The binary.
        exe: String,
        /// The OS error.
        message: String,
    },
    /// A started worker did not complete the handshake.
    #[error("worker handshake failed: {0}")]
    Handshake(String),
    /// The job was cancelled (it never completed).
    #[error("job {job_id} was cancelled ({how:?})")]
    Cancelled {
        /// The job.
        job_id: String,
        /// How.
        how: CancelKind,
    },
    /// The worker died while the job was in flight: its outcome is unknown. The
    /// caller decides whether to replay (by the tool's replay contract).
    #[error("worker {pid} (generation {generation}) {cause} while running job {job_id}")]
    WorkerDied {
        /// The job.
        job_id: String,
        /// The worker's pid.
        pid: u32,
        /// The slot generation the worker had.
        generation: u64,
        /// Why it died.
        cause: DeathCause,
    },
    /// A job with this id is already queued or running.
    #[error("job {job_id} is already queued or running")]
    DuplicateJob {
        /// The job.
        job_id: String,
    },
    /// No queued or running job has this id.
    #[error("no queued or running job {job_id}")]
    JobNotFound {
        /// The job.
        job_id: String,
    },
    /// The queue is full.
    #[error("the job queue is full ({capacity} jobs waiting)")]
    QueueFull {
        /// Its capacity.
        capacity: usize,
    },
    /// The supervisor is shutting down and takes no more jobs.
    #[error("the worker supervisor is shutting down")]
    ShuttingDown,
    /// A rollout could not be done; the workers that served before still serve.
    #[error("rollout of {exe} failed: {message}")]
    Rollout {
        /// The binary that was to be rolled out.
        exe: String,
        /// Why.
        message: String,
    },
}

impl SupervisorError {
    /// The tool error a client sees for this failure (DESIGN.md "Errors are values"),
    /// for callers that do not replay.
    #[must_use]
    pub fn to_tool_error(&self) -> ToolError {
        let message = self.to_string();
        match self {
            Self::Cancelled { job_id, .. } => ToolError::new(ErrorCode::Cancelled, message)
                .with_details(serde_json::json!({ "job_id": job_id }))
                .recoverable(false),
            Self::WorkerDied { job_id, cause, .. } => lost_run_error(job_id, cause, message),
            Self::QueueFull { capacity } => ToolError::new(ErrorCode::WorkerFault, message)
                .with_details(serde_json::json!({ "capacity": capacity }))
                .with_fault(FaultClass::Resource, Some(1000))
                .with_hint("every worker is busy and the queue is full; retry after the delay or cancel a job"),
            Self::JobNotFound { job_id } | Self::DuplicateJob { job_id } => {
                ToolError::new(ErrorCode::JobNotFound, message)
                    .with_details(serde_json::json!({ "job_id": job_id }))
            }
            Self::Spawn { .. } | Self::Handshake(_) | Self::RuntimeDir { .. } => {
                ToolError::new(ErrorCode::WorkerFault, message)
                    .with_fault(FaultClass::Process, Some(1000))
                    .with_hint("no worker could start; `health` shows why; retry after the delay")
            }
            Self::ShuttingDown => ToolError::new(ErrorCode::WorkerFault, message)
                .with_fault(FaultClass::Process, None)
                .recoverable(false)
                .with_hint("the server is stopping; call again once it is back"),
            Self::Rollout { exe, .. } => ToolError::new(ErrorCode::WorkerFault, message)
                .with_details(serde_json::json!({ "exe": exe }))
                .with_fault(FaultClass::Rollout, None)
                .recoverable(false)
                .with_hint("the previous workers keep serving; fix the new worker binary and roll out again"),
            Self::Config(_) => ToolError::new(ErrorCode::InternalError, message)
                .with_fault(FaultClass::Invariant, None)
                .with_hint("the worker configuration is invalid; an operator must fix it"),
        }
    }
}
