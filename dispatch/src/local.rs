//! The local executor: attempts run on this host's pool of `reticle-worker` processes.
//!
//! It wraps the lazily started [`WorkerPool`] of `reticle serve` (or a supervisor the
//! caller already started: `reticle eval`/`demo`, tests) and turns each attempt into the
//! wire's [`RunRequest`], the one place the host builds it.

use std::sync::Arc;

use reticle_protocol::ToolError;
use reticle_protocol::wire::{JobOutcome, RunRequest};
use tokio::sync::mpsc;

use super::executor::{
    AttemptLoss, AttemptProgress, AttemptRequest, BoxFuture, Executor, ExecutorError,
    ExecutorHealth,
};
use crate::supervisor::{SlotMode, SlotState, Supervisor, SupervisorError};
use crate::workers::WorkerPool;

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
