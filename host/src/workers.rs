//! The host's handle on its worker pool: started in the background at serve
//! start (so the MCP handshake never waits for a GPU adapter), awaited by the
//! first job that needs it, shut down at exit.

use std::sync::Arc;

use reticle_protocol::{ErrorCode, ToolError};
use tokio::sync::OnceCell;

use crate::supervisor::{PoolSnapshot, Supervisor, SupervisorConfig};

/// The lazily started pool.
#[derive(Default)]
pub struct WorkerPool {
    pool: OnceCell<Result<Supervisor, String>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.pool.get() {
            None => "not started",
            Some(Ok(_)) => "running",
            Some(Err(_)) => "failed",
        };
        f.debug_struct("WorkerPool").field("state", &state).finish()
    }
}

impl WorkerPool {
    /// A pool that starts on first use (or [`Self::start_in_background`]).
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Starts the workers without waiting for them.
    pub fn start_in_background(self: &Arc<Self>) {
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            let _ = pool.get().await;
        });
    }

    /// The running supervisor, starting it if needed.
    ///
    /// # Errors
    /// `WORKER_FAULT` when the workers cannot be started (binary missing, handshake failed).
    pub async fn get(&self) -> Result<&Supervisor, ToolError> {
        let started = self
            .pool
            .get_or_init(|| async {
                let config = SupervisorConfig::from_env().map_err(|e| e.to_string())?;
                match Supervisor::start(config).await {
                    Ok(supervisor) => {
                        tracing::info!("worker pool ready");
                        Ok(supervisor)
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "worker pool failed to start");
                        Err(e.to_string())
                    }
                }
            })
            .await;
        started.as_ref().map_err(|e| {
            ToolError::new(ErrorCode::WorkerFault, format!("no worker pool: {e}"))
                .with_fault(libmcp::FaultClass::Process, Some(1000))
                .with_hint("the worker pool failed to start; `health` shows why")
        })
    }

    /// The pool's state, if it started.
    pub fn snapshot(&self) -> Option<PoolSnapshot> {
        match self.pool.get() {
            Some(Ok(supervisor)) => Some(supervisor.snapshot()),
            _ => None,
        }
    }

    /// Stops every worker (SIGKILL after a short grace) and reaps them.
    pub async fn shutdown(&self) {
        if let Some(Ok(supervisor)) = self.pool.get() {
            supervisor.shutdown().await;
        }
    }
}
