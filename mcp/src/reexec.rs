//! Host self-reexec: replace the host binary under a live client without the client
//! noticing (seed 004, "host self-reexec snapshot file handoff").
//!
//! The old image stops reading stdin between two reads (`transport::stdin`), lets
//! requests that do not wait on a job finish, and writes a [`ReexecSnapshot`] — the
//! negotiated session, pending requests, the job table with each unfinished job's
//! recipe, layout sessions, the violation cache, roots, counters, the event-log position, and the bytes and
//! frames it had read but not yet served — to a private file (libmcp's
//! `write_snapshot_file`: 0600, created exclusively under a 0700 directory). It then
//! points fd 1 back at the protocol stream and `execve`s the new binary with the same
//! pid, stdin and stdout and `RETICLE_REEXEC_SNAPSHOT=<file>`. The new image loads the
//! file with libmcp's `load_snapshot_file_from_env` (opened `O_NOFOLLOW`, owner and
//! mode checked, deleted on read) and continues: it answers the pending requests, re-runs
//! unfinished jobs under their ids (Convergent tools; D-reexec), and reads on.
//!
//! Workers are not adopted: they die with the old image (their parent-death signal
//! fires when the spawning thread is gone) and are reaped before the exec; their jobs
//! are replayed per contract by the new image, counted as replays.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use libmcp::SnapshotCapsule;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use reticle_config::names::SNAPSHOT_ENV;
use reticle_dispatch::jobs::JobRecord;
use reticle_tools::confine::RootsSource;
use reticle_tools::state::StateSnapshot;
use reticle_transport::frame::Frame;
use reticle_transport::stdin::PumpState;

/// Largest snapshot a new image accepts (results of finished jobs make up most of it).
pub const MAX_SNAPSHOT_BYTES: usize = 512 << 20;
/// Version of the snapshot layout; an image refuses a snapshot of another version.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// The negotiated client session of the legacy era.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSnapshot {
    /// Negotiated protocol version.
    pub version: Option<String>,
    /// Whether `notifications/initialized` arrived.
    pub initialized: bool,
    /// `logging/setLevel`.
    pub log_level: Option<String>,
    /// The client declared `roots`.
    pub client_roots: bool,
    /// Requests we sent to the client (ids stay unique).
    pub requests_sent: u64,
}

/// A request the old image did not answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PendingRequest {
    /// A `tools/call` waiting on its job: answer when the (re-run) job ends.
    AwaitJob {
        /// The request id.
        id: Value,
        /// The job.
        job_id: String,
        /// The original params (for `_meta`: era, progress token).
        params: Map<String, Value>,
    },
    /// A Convergent request cut short: run it again.
    Redispatch {
        /// The request id.
        id: Value,
        /// The method.
        method: String,
        /// The params.
        params: Map<String, Value>,
    },
    /// A request that may have taken effect and may not run again: answer with an
    /// ambiguous-outcome error.
    Fail {
        /// The request id.
        id: Value,
        /// The method.
        method: String,
        /// The params.
        params: Map<String, Value>,
    },
}

/// What the MCP server carries over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerSnapshot {
    /// The client session.
    pub session: SessionSnapshot,
    /// Every job in the table.
    pub jobs: Vec<JobRecord>,
    /// Lifetime job counters.
    pub job_stats: Value,
    /// Requests to answer.
    pub pending: Vec<PendingRequest>,
    /// 2025-11-25 tasks whose status the client was being sent, with the call's
    /// `progressToken`: the next image follows them on (absent in older snapshots).
    #[serde(default)]
    pub task_watches: Vec<TaskWatch>,
}

/// A 2025-11-25 task the server streams `notifications/tasks/status` (and progress) for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskWatch {
    /// The task (job) id.
    pub job_id: String,
    /// The creating call's `progressToken`, if it had one.
    pub progress_token: Option<Value>,
}

/// Everything one image hands to the next.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReexecSnapshot {
    /// [`SNAPSHOT_FORMAT`].
    pub format: u32,
    /// Version of the image that wrote it.
    pub written_by: String,
    /// Counters and history.
    pub state: StateSnapshot,
    /// The event log's last `seq`.
    pub events_seq: u64,
    /// The MCP session.
    pub server: ServerSnapshot,
    /// Frames read but not dispatched, oldest first.
    pub frames: Vec<Frame>,
    /// Bytes read but not framed.
    pub pump: PumpState,
    /// Layout sessions (`Sessions::export`).
    pub layout_sessions: Value,
    /// The violation cache of seed 000 §5 (`ViolationCache::export`).
    #[serde(default)]
    pub violations: Value,
    /// The roots in force and their source.
    pub roots: (Vec<PathBuf>, RootsSource),
    /// The worker binary in use (after a rollout it differs from the configured one).
    pub worker_exe: Option<PathBuf>,
    /// The binary a rollback returns to.
    pub previous_worker_exe: Option<PathBuf>,
}

/// Checks that `bin` can take over: a regular executable file that answers `--version`
/// with a reticle version within 10 s. Run before anything is torn down.
///
/// # Errors
/// What is wrong with it.
pub fn check_binary(bin: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{} is not an executable file", bin.display()));
    }
    let mut child = Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(status)) => {
                return Err(format!("{} --version failed ({status})", bin.display()));
            }
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} --version did not answer in 10 s",
                    bin.display()
                ));
            }
            Err(e) => return Err(format!("waiting for {}: {e}", bin.display())),
        }
    }
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        use std::io::Read;
        let _ = stdout.read_to_string(&mut out);
    }
    let version = out.trim().to_owned();
    if !version.starts_with("reticle ") {
        return Err(format!(
            "{} does not look like a reticle host (its --version said {version:?})",
            bin.display()
        ));
    }
    Ok(version)
}

/// Writes the snapshot to a private file. Keep the capsule alive until the exec: it
/// deletes the file when dropped.
///
/// # Errors
/// When the file cannot be written.
pub fn write(snapshot: &ReexecSnapshot) -> std::io::Result<SnapshotCapsule> {
    libmcp::write_snapshot_file("reticle-reexec", snapshot)
}

/// Loads (and deletes) the snapshot named by [`SNAPSHOT_ENV`], if any.
///
/// # Errors
/// When the variable is set but the file is missing, unsafe (a link, another owner,
/// group/other permissions), too big, not a snapshot, or of another format.
pub fn load() -> std::io::Result<Option<ReexecSnapshot>> {
    let snapshot: Option<ReexecSnapshot> =
        libmcp::load_snapshot_file_from_env(SNAPSHOT_ENV, MAX_SNAPSHOT_BYTES)?;
    if let Some(s) = &snapshot
        && s.format != SNAPSHOT_FORMAT
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "snapshot format {} written by {}; this image reads format {SNAPSHOT_FORMAT}",
                s.format, s.written_by
            ),
        ));
    }
    Ok(snapshot)
}

/// Replaces the process image with `bin`, keeping the pid and the original arguments,
/// and pointing the new image at `snapshot`. Returns only if `execve` failed.
pub fn exec(bin: &Path, snapshot: &Path) -> std::io::Error {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    Command::new(bin)
        .args(args)
        .env(SNAPSHOT_ENV, snapshot)
        .exec()
}
