//! The name of every environment variable the host reads or hands on, and the defaults
//! other modules need to know: defined here only (issue 27). Subsystems import their
//! names from `config`; `config` imports nothing from them, so there is no cycle.
//! The limits' names are in [`super::limits`], the tools' and serve settings' in
//! `settings`.

use std::path::PathBuf;

/// Environment variable: number of warm workers (default 1).
pub const WORKERS_ENV: &str = "RETICLE_WORKERS";
/// Environment variable: path of the worker binary (default: next to the current executable).
pub const WORKER_BIN_ENV: &str = "RETICLE_WORKER_BIN";
/// Environment variable: longest wall time of one job attempt, seconds (`0`: none).
pub const JOB_TIMEOUT_ENV: &str = "RETICLE_JOB_TIMEOUT_S";
/// Environment variable: most resident memory of one worker, MiB (`0`: none).
pub const WORKER_MEMORY_ENV: &str = "RETICLE_WORKER_MEMORY_MB";

/// Environment variable: size at which `events.jsonl` is rotated, bytes.
pub const EVENTS_MAX_BYTES_ENV: &str = "RETICLE_EVENTS_MAX_BYTES";
/// Environment variable: rotated files kept besides the live one.
pub const EVENTS_KEEP_ENV: &str = "RETICLE_EVENTS_KEEP";
/// Default size cap of one event file (16 MiB).
pub const DEFAULT_EVENTS_MAX_BYTES: u64 = 16 << 20;
/// Default number of rotated files kept (so at most 5 × 16 MiB on disk).
pub const DEFAULT_EVENTS_KEEP: u32 = 4;

/// Environment variable: root of the layout sessions' and jobs' artifacts (seed 003).
pub const ARTIFACT_ROOT_ENV: &str = "KLAYOUT_MCP_ARTIFACT_ROOT";
/// Environment variable: seconds of inactivity before a session expires.
pub const SESSION_TTL_ENV: &str = "KLAYOUT_MCP_SESSION_TTL_SECONDS";
/// Default session TTL (seed 003).
pub const DEFAULT_SESSION_TTL_SECONDS: u64 = 3600;

/// Environment variable naming the KLayout binary (default `klayout`, looked up on `PATH`).
pub const KLAYOUT_BIN_ENV: &str = "KLAYOUT_BIN";

/// Environment variable naming the snapshot file for the new image (reexec; read and
/// set through libmcp).
pub const SNAPSHOT_ENV: &str = "RETICLE_REEXEC_SNAPSHOT";

/// Default ready file (seed 001).
pub const DEFAULT_READY_FILE: &str = "/tmp/mcp.ready";

/// `reticle-worker` in the directory of the current executable, where cargo and the
/// installers put both binaries: the default of [`WORKER_BIN_ENV`].
#[must_use]
pub fn default_worker_exe() -> PathBuf {
    let name = "reticle-worker";
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}
