//! The worker's settings: `main` (the worker's composition root, and the one place the
//! worker reads its environment) looks each variable up once through
//! [`Settings::from_lookup`] and hands the value to the parts that need them. The host sets
//! them at spawn (D33): the socket and its own pid, the kernel store, the backend, the
//! reference data; a Slurm element gets its array index from Slurm. This module is the
//! worker's configuration: the variables only the worker reads are named here; the two
//! the host sets for the handshake are the wire contract's (`reticle_protocol::wire`).

use std::ffi::OsString;
use std::path::PathBuf;

use reticle_kernel::gpu::BackendPref;
use reticle_protocol::wire::{WORKER_PARENT_PID_ENV, WORKER_SOCKET_ENV, WORKER_THREADS_ENV};

/// Setting: the worker's imaging backend, `auto`, `gpu` or `cpu`.
pub const BACKEND_ENV: &str = "RETICLE_BACKEND";

/// Setting: where workers keep built SOCS kernels on disk, shared across workers and
/// restarts (default `$XDG_CACHE_HOME/reticle/kernels`, else `~/.cache/reticle/kernels`;
/// `off` keeps them in memory only).
pub const KERNEL_CACHE_ENV: &str = "RETICLE_KERNEL_CACHE_DIR";

/// Setting: the reference data (ICCAD-2013, the benchmarks' layouts); unset, the engine
/// looks in `../shared/data` beside the workspace.
pub const DATA_DIR_ENV: &str = "RETICLE_DATA_DIR";

/// Slurm's variable naming a job array element's index.
pub const ARRAY_TASK_ID_ENV: &str = "SLURM_ARRAY_TASK_ID";

/// Everything the worker reads from its environment.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `RETICLE_WORKER_SOCKET`: the host's socket (pool mode).
    pub socket: Option<OsString>,
    /// `RETICLE_WORKER_PARENT_PID`: the host's pid, checked after arming the parent-death
    /// signal.
    pub parent_pid: Option<OsString>,
    /// The on-disk SOCS kernel store: `RETICLE_KERNEL_CACHE_DIR` (`off` or empty: none),
    /// else `$XDG_CACHE_HOME/reticle/kernels`, else `~/.cache/reticle/kernels`.
    pub kernel_cache: Option<PathBuf>,
    /// `RETICLE_BACKEND` (`auto` when unset; an unknown value is `auto`, with a warning).
    pub backend: BackendPref,
    /// `SLURM_ARRAY_TASK_ID`: a batch element's index, when Slurm started it.
    pub array_element: Option<String>,
    /// `RETICLE_DATA_DIR`: the reference data, handed to `reticle_kernel::data`.
    pub data_dir: Option<PathBuf>,
    /// `RETICLE_WORKER_THREADS`: the threads of the worker's compute pool, its share of
    /// the machine the host computed (unset, 0 or unreadable: every core, rayon's
    /// default).
    pub threads: Option<usize>,
}

impl Settings {
    /// The settings `lookup` (an environment) gives.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Self {
        let kernel_cache = match lookup(KERNEL_CACHE_ENV) {
            Some(v) if v == "off" || v.is_empty() => None,
            Some(v) => Some(PathBuf::from(v)),
            None => lookup("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| lookup("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("reticle/kernels")),
        };
        let backend = match lookup(BACKEND_ENV) {
            None => BackendPref::Auto,
            Some(raw) => raw
                .to_str()
                .ok_or_else(|| format!("{BACKEND_ENV} is not valid UTF-8"))
                .and_then(|v| v.parse().map_err(|e| format!("{BACKEND_ENV}: {e}")))
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "bad {BACKEND_ENV}; using auto");
                    BackendPref::Auto
                }),
        };
        Self {
            socket: lookup(WORKER_SOCKET_ENV),
            parent_pid: lookup(WORKER_PARENT_PID_ENV),
            kernel_cache,
            backend,
            array_element: lookup(ARRAY_TASK_ID_ENV).and_then(|v| v.into_string().ok()),
            data_dir: lookup(DATA_DIR_ENV).map(PathBuf::from),
            threads: lookup(WORKER_THREADS_ENV)
                .and_then(|v| v.into_string().ok())
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0),
        }
    }
}
