//! The host's handle on its worker pool: started in the background at serve
//! start (so the MCP handshake never waits for a GPU adapter), awaited by the
//! first job that needs it, rolled out and back by operators, shut down at exit.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reticle_protocol::sync::lock;
use reticle_protocol::{ErrorCode, ToolError};
use tokio::sync::OnceCell;

use crate::supervisor::{
    EventHook, PoolSnapshot, RolloutRecord, Supervisor, SupervisorConfig, SupervisorError,
};

/// Which worker binaries the pool starts with (a reexec carries the rolled-out ones).
#[derive(Debug, Clone, Default)]
pub struct ReleaseChoice {
    /// The binary to run instead of the configured one.
    pub current: Option<PathBuf>,
    /// The binary `rollback` returns to.
    pub previous: Option<PathBuf>,
}

/// The lazily started pool.
#[derive(Default)]
pub struct WorkerPool {
    pool: OnceCell<Result<Supervisor, String>>,
    started: AtomicBool,
    hook: EventHook,
    release: Mutex<ReleaseChoice>,
    /// The supervisor's settings, from the host's configuration (`None`: the defaults).
    settings: Option<Result<SupervisorConfig, String>>,
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

    /// A pool configured by `host` that reports worker events to `hook` and starts with
    /// `release`.
    pub fn with_hook(
        host: &reticle_config::Config,
        hook: EventHook,
        release: ReleaseChoice,
    ) -> Arc<Self> {
        Arc::new(Self {
            hook,
            release: Mutex::new(release),
            settings: Some(SupervisorConfig::configured(host).map_err(|e| e.to_string())),
            ..Self::default()
        })
    }

    /// Starts the workers without waiting for them.
    pub fn start_in_background(self: &Arc<Self>) {
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            let _ = pool.get().await;
        });
    }

    /// Whether a start was requested.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Whether the start failed.
    pub fn failed(&self) -> bool {
        matches!(self.pool.get(), Some(Err(_)))
    }

    /// The running supervisor, starting it if needed.
    ///
    /// # Errors
    /// `WORKER_FAULT` when the workers cannot be started (binary missing, handshake failed).
    pub async fn get(&self) -> Result<&Supervisor, ToolError> {
        self.started.store(true, Ordering::Relaxed);
        let started = self
            .pool
            .get_or_init(|| async {
                let mut config = match &self.settings {
                    Some(settings) => settings.clone()?,
                    None => SupervisorConfig::default(),
                };
                config.events = self.hook.clone();
                let release = lock(&self.release).clone();
                if let Some(current) = release.current {
                    config.worker_exe = current;
                }
                config.previous_worker_exe = release.previous;
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

    /// The binaries a reexec should carry over: the pool's current and previous ones
    /// (or what it was told to start with, when it has not started).
    pub fn release(&self) -> ReleaseChoice {
        match self.pool.get() {
            Some(Ok(supervisor)) => {
                let r = supervisor.rollout_snapshot();
                ReleaseChoice {
                    current: Some(PathBuf::from(r.current_exe)),
                    previous: r.previous_exe.map(PathBuf::from),
                }
            }
            _ => lock(&self.release).clone(),
        }
    }

    /// Blue/green rollout of `exe` (see [`Supervisor::rollout`]); starts the pool first
    /// if it is not running.
    ///
    /// # Errors
    /// The supervisor's rollout error, or the pool's start error.
    pub async fn rollout(&self, exe: &std::path::Path) -> Result<RolloutRecord, String> {
        let supervisor = self.get().await.map_err(|e| e.message)?;
        supervisor
            .rollout(exe)
            .await
            .map_err(|e: SupervisorError| e.to_string())
    }

    /// Rolls back to the previous binary (see [`Supervisor::rollback`]).
    ///
    /// # Errors
    /// The supervisor's rollback error, or the pool's start error.
    pub async fn rollback(&self) -> Result<RolloutRecord, String> {
        let supervisor = self.get().await.map_err(|e| e.message)?;
        supervisor.rollback().await.map_err(|e| e.to_string())
    }

    /// Stops every worker (SIGKILL after a short grace) and reaps them.
    pub async fn shutdown(&self) {
        if let Some(Ok(supervisor)) = self.pool.get() {
            supervisor.shutdown().await;
        }
    }
}
