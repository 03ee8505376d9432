//! Supervisor configuration.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::{EventHook, SupervisorError};
use reticle_config::names::default_worker_exe;

/// Most workers one supervisor runs.
pub const MAX_WORKERS: usize = 64;

/// Where a worker's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStderr {
    /// Read line by line and re-emitted as `tracing` events tagged with the worker pid.
    Tracing,
    /// Copied line by line to the host's stderr.
    Inherit,
    /// Discarded.
    Null,
}

/// A worker's private writable memory (`RLIMIT_DATA`) may reach this many times its
/// resident-memory limit: the kernel's hard ceiling for what the once-a-second resident
/// check would catch too late (D26).
pub const DATA_RLIMIT_FACTOR: u64 = 2;

/// How the supervisor runs its pool. [`Default`] gives the production values.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Warm workers (≥ 1, ≤ [`MAX_WORKERS`]).
    pub workers: usize,
    /// Cores the pool's workers share (default: what the host may run on,
    /// `std::thread::available_parallelism`); each worker computes on its share,
    /// [`SupervisorConfig::threads_per_worker`].
    pub cores: usize,
    /// The `reticle-worker` binary.
    pub worker_exe: PathBuf,
    /// Extra arguments for the worker.
    pub worker_args: Vec<OsString>,
    /// The host's environment, as `reticle_config::Config` read it once at start
    /// (`ProcessEnv::vars`): only its allow-listed part reaches a worker (D33). Empty by
    /// default: a worker then sees only `worker_env` and the socket variables.
    pub host_env: Vec<(OsString, OsString)>,
    /// Extra environment for the worker (the socket variables are always set).
    pub worker_env: Vec<(OsString, OsString)>,
    /// Parent of the per-worker runtime directories; `None`: `/tmp` ([`Self::configured`]
    /// sets `$XDG_RUNTIME_DIR` when it is a directory).
    pub runtime_dir_base: Option<PathBuf>,
    /// Longest time from spawn to a valid hello.
    pub handshake_timeout: Duration,
    /// How often the supervisor pings each worker.
    pub heartbeat_interval: Duration,
    /// A worker silent for this long (no pong, no other frame) is declared dead.
    pub heartbeat_timeout: Duration,
    /// First restart delay after a worker died; doubles per consecutive failure.
    pub backoff_initial: Duration,
    /// Cap of the restart delay.
    pub backoff_max: Duration,
    /// A worker that lived this long, or finished a job, resets the failure count.
    pub backoff_reset_after: Duration,
    /// How long `shutdown` lets a worker finish before SIGKILLing its group.
    pub shutdown_grace: Duration,
    /// Where worker stderr goes.
    pub worker_stderr: WorkerStderr,
    /// Most jobs waiting for a worker; further `run` calls fail with `QueueFull`.
    pub queue_capacity: usize,
    /// A job attempt running longer is stopped: its worker is killed and the job fails
    /// with a resource fault (not replayed). `None`: no limit.
    pub job_timeout: Option<Duration>,
    /// A worker whose resident memory exceeds this (checked at every heartbeat) is
    /// killed; its job fails with a resource fault (not replayed). It also sets the
    /// worker's `RLIMIT_DATA` ([`SupervisorConfig::data_rlimit_bytes`]). `None`: no limit.
    pub memory_limit_bytes: Option<u64>,
    /// The binary of the release before `worker_exe`, for [`super::Supervisor::rollback`]
    /// (carried across a host reexec).
    pub previous_worker_exe: Option<PathBuf>,
    /// Told about worker starts, faults, restarts and rollout steps.
    pub events: EventHook,
}

/// glibc allocator settings every worker starts with (docs/DECISIONS.md D57, D191, D244):
/// blocks up to 32 MiB (the largest mmap threshold glibc takes on 64-bit) come from the
/// heap instead of a mapping of their own, and up to 256 MiB of free heap is kept while an
/// op runs, so an op that allocates and frees its rasters over and over (the ILT's
/// iterations) reuses memory instead of faulting fresh pages in each time: −38 % wall on
/// a region optimize. The worker hands the free heap back after every op
/// (`malloc_trim`), which keeps its resident size from creeping with the number of
/// tiles, the reason D191's first attempt was reverted.
pub const WORKER_ALLOCATOR: [(&str, &str); 2] = [
    ("MALLOC_MMAP_THRESHOLD_", "33554432"),
    ("MALLOC_TRIM_THRESHOLD_", "268435456"),
];

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            cores: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            worker_exe: default_worker_exe(),
            worker_args: Vec::new(),
            host_env: Vec::new(),
            worker_env: WORKER_ALLOCATOR
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            runtime_dir_base: None,
            handshake_timeout: Duration::from_secs(15),
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            backoff_reset_after: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(2),
            worker_stderr: WorkerStderr::Tracing,
            queue_capacity: 1024,
            job_timeout: Some(Duration::from_secs(600)),
            memory_limit_bytes: Some(8 << 30),
            previous_worker_exe: None,
            events: EventHook::default(),
        }
    }
}

impl SupervisorConfig {
    /// Production defaults with the worker binary at `worker_exe`.
    #[must_use]
    pub fn with_worker_exe(worker_exe: impl Into<PathBuf>) -> Self {
        Self {
            worker_exe: worker_exe.into(),
            ..Self::default()
        }
    }

    /// The `RLIMIT_DATA` (soft and hard) every worker starts under:
    /// [`DATA_RLIMIT_FACTOR`] times the resident-memory limit, `None` without one.
    #[must_use]
    pub fn data_rlimit_bytes(&self) -> Option<u64> {
        self.memory_limit_bytes
            .map(|bytes| bytes.saturating_mul(DATA_RLIMIT_FACTOR))
    }

    /// Defaults overridden by the pool settings of `host` ([`reticle_config::WorkerSettings`]:
    /// `RETICLE_WORKERS`, `RETICLE_WORKER_BIN`, `RETICLE_JOB_TIMEOUT_S`,
    /// `RETICLE_WORKER_MEMORY_MB`; runtime directories under `XDG_RUNTIME_DIR`; the
    /// environment snapshot the workers' allow-listed variables come from).
    ///
    /// # Errors
    /// A setting that did not parse (named), or a pool size out of range.
    pub fn configured(host: &reticle_config::Config) -> Result<Self, SupervisorError> {
        let settings = host.worker_settings().map_err(SupervisorError::Config)?;
        let mut config = Self {
            workers: settings.workers,
            job_timeout: settings.job_timeout,
            memory_limit_bytes: settings.memory_limit_bytes,
            host_env: host.process.vars.clone(),
            runtime_dir_base: host
                .process
                .xdg_runtime_dir
                .as_ref()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.is_dir()),
            ..Self::default()
        };
        if let Some(exe) = &settings.worker_bin {
            config.worker_exe.clone_from(exe);
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks the bounds `start` relies on.
    ///
    /// (`job_timeout` and `memory_limit_bytes` need no check: any value is a limit.)
    pub fn validate(&self) -> Result<(), SupervisorError> {
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(SupervisorError::Config(format!(
                "workers must be in 1..={MAX_WORKERS}, got {}",
                self.workers
            )));
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_timeout <= self.heartbeat_interval {
            return Err(SupervisorError::Config(
                "heartbeat_timeout must exceed a non-zero heartbeat_interval".to_owned(),
            ));
        }
        if self.queue_capacity == 0 {
            return Err(SupervisorError::Config(
                "queue_capacity must be ≥ 1".to_owned(),
            ));
        }
        Ok(())
    }

    /// The compute threads each worker gets (`RETICLE_WORKER_THREADS`): its share of
    /// [`Self::cores`], at least one. Workers run side by side, so a worker with every
    /// core would contend with the others for them (D222).
    #[must_use]
    pub fn threads_per_worker(&self) -> usize {
        (self.cores / self.workers.max(1)).max(1)
    }

    /// Restart delay after `failures` consecutive failures (1 → `backoff_initial`).
    #[must_use]
    pub fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32 << (failures - 1).min(20);
        self.backoff_initial
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}
