//! What a running attempt sees (the glossary's "attempt": one run of an op on this worker,
//! which the wire calls a job): its id and limits, a cancellation token, a progress sink,
//! and the worker's shared state. Also the frame writer shared by the main loop and
//! the attempt's thread.

use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interprocess::local_socket::Stream;
use reticle_kernel::CancelToken;
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::paths::{Refusal, resolve_under};
use reticle_protocol::sync::lock;
use reticle_protocol::wire::{JobContext, WireError, WorkerMessage, encode_frame};

use crate::backend::Backend;
use crate::cache::LruCache;
use reticle_layout::LayoutIndex;

/// Most parsed layouts one worker keeps.
const LAYOUT_CACHE_ENTRIES: usize = 8;
/// Budget of the layout cache, counted as 4 bytes of memory per byte of layout file.
const LAYOUT_CACHE_BYTES: u64 = 4 << 30;

/// Writes whole frames to the host; clones share the socket and serialize writes so
/// frames from the main loop (pongs) and a job thread (progress) never interleave.
#[derive(Clone)]
pub struct Outbox {
    stream: Arc<Stream>,
    write_lock: Arc<Mutex<()>>,
}

impl Outbox {
    /// A writer over the shared connection.
    #[must_use]
    pub fn new(stream: Arc<Stream>) -> Self {
        Self {
            stream,
            write_lock: Arc::new(Mutex::new(())),
        }
    }

    /// Sends one message as one frame.
    pub fn send(&self, message: &WorkerMessage) -> Result<(), WireError> {
        let frame = encode_frame(message)?;
        let _guard = lock(&self.write_lock);
        let mut writer: &Stream = &self.stream;
        writer.write_all(&frame)?;
        writer.flush()?;
        Ok(())
    }
}

/// State shared by every job of this worker process. Nothing here is authoritative:
/// a fresh worker rebuilds all of it.
pub struct WorkerState {
    /// The imaging backend.
    pub backend: Backend,
    /// Jobs finished (any outcome), reported in pongs.
    pub jobs_run: AtomicU64,
    /// Memory deliberately held by `debug.alloc`, released only at process exit.
    pub ballast: Mutex<Vec<Vec<u8>>>,
    /// Parsed layouts keyed by the sha256 of their bytes, each with its spatial index
    /// (built per cell on first use): the layout ops' and the whole-layout tiles' cache.
    pub layouts: Mutex<LruCache<Arc<LayoutIndex>>>,
}

impl WorkerState {
    /// Fresh state over `backend`.
    #[must_use]
    pub fn new(backend: Backend) -> Self {
        Self {
            backend,
            jobs_run: AtomicU64::new(0),
            ballast: Mutex::new(Vec::new()),
            layouts: Mutex::new(LruCache::new(LAYOUT_CACHE_ENTRIES, LAYOUT_CACHE_BYTES)),
        }
    }

    /// Bytes held by `debug.alloc`.
    #[must_use]
    pub fn ballast_bytes(&self) -> u64 {
        let ballast = lock(&self.ballast);
        ballast.iter().map(|b| b.len() as u64).sum()
    }
}

/// Shortest gap between two progress frames of one job, except the final one.
const PROGRESS_MIN_INTERVAL: Duration = Duration::from_millis(20);

struct ProgressState {
    last_done: Option<u64>,
    last_sent: Option<Instant>,
}

/// Forwards a job's progress to the host: monotonic (a report that goes backwards is
/// dropped) and rate-limited (the final `done == total` report always goes out).
pub struct ProgressSink {
    outbox: Option<Outbox>,
    job_id: String,
    state: Mutex<ProgressState>,
}

impl ProgressSink {
    /// A sink for `job_id`.
    #[must_use]
    pub fn new(outbox: Outbox, job_id: String) -> Self {
        Self {
            outbox: Some(outbox),
            job_id,
            state: Mutex::new(ProgressState {
                last_done: None,
                last_sent: None,
            }),
        }
    }

    /// A sink that sends nothing (a batch worker has no host connection).
    #[must_use]
    pub fn silent(job_id: String) -> Self {
        Self {
            outbox: None,
            job_id,
            state: Mutex::new(ProgressState {
                last_done: None,
                last_sent: None,
            }),
        }
    }

    /// Reports `done` of `total` units.
    pub fn report(&self, done: u64, total: u64, message: impl Into<String>) {
        let now = Instant::now();
        {
            let mut st = lock(&self.state);
            if st.last_done.is_some_and(|last| done <= last) {
                return;
            }
            let final_report = done >= total;
            if !final_report
                && st
                    .last_sent
                    .is_some_and(|t| now.duration_since(t) < PROGRESS_MIN_INTERVAL)
            {
                return;
            }
            st.last_done = Some(done);
            st.last_sent = Some(now);
        }
        let Some(outbox) = &self.outbox else {
            return;
        };
        let message = WorkerMessage::Progress {
            job_id: self.job_id.clone(),
            done,
            total,
            message: message.into(),
        };
        if let Err(e) = outbox.send(&message) {
            // The main loop sees the broken socket and exits; the job just stops reporting.
            tracing::debug!(error = %e, "progress not sent");
        }
    }
}

/// Everything an op gets to run one attempt.
pub struct AttemptCtx<'a> {
    /// Host-assigned job id.
    pub job_id: &'a str,
    /// Limits and allowed roots (read by the engine ops; the debug ops need none).
    pub context: &'a JobContext,
    /// Set when the host cancels the job; ops check it at every loop boundary.
    pub cancel: &'a CancelToken,
    /// The worker's shared state (backend, caches).
    pub state: &'a WorkerState,
    /// Progress reporting.
    pub progress: &'a ProgressSink,
}

impl AttemptCtx<'_> {
    /// `path`, canonical, if it lies under one of the job's allowed roots.
    ///
    /// The host resolves every path against the client's roots before a job starts;
    /// this is the second check, in the process that opens the file, so a host bug or
    /// a symlink swapped in between cannot make a worker read outside the roots. No
    /// roots means nothing is readable.
    ///
    /// # Errors
    /// `FILE_NOT_FOUND` when the path does not resolve, `PATH_NOT_ALLOWED` when it
    /// resolves outside every root.
    pub fn readable(&self, path: &std::path::Path) -> Result<std::path::PathBuf, ToolError> {
        resolve_under(path, &self.context.allowed_roots).map_err(|refusal| match refusal {
            Refusal::Unresolved { .. } => unresolved(path, &refusal),
            Refusal::Outside { .. } => ToolError::new(
                ErrorCode::PathNotAllowed,
                format!("{} is outside the allowed roots", path.display()),
            )
            .with_details(
                serde_json::json!({"path": path, "allowed_roots": self.context.allowed_roots}),
            ),
        })
    }

    /// `path`, canonical, if it lies inside the job's artifact directory (files the host
    /// or an earlier job of the same session wrote there: a DRC report).
    ///
    /// # Errors
    /// `FILE_NOT_FOUND` when the path does not resolve, `PATH_NOT_ALLOWED` when it is
    /// outside the artifact directory or the job has none.
    pub fn artifact_readable(
        &self,
        path: &std::path::Path,
    ) -> Result<std::path::PathBuf, ToolError> {
        let dirs: &[String] = self.context.artifact_dir.as_slice();
        resolve_under(path, dirs).map_err(|refusal| match refusal {
            Refusal::Unresolved { .. } => unresolved(path, &refusal),
            Refusal::Outside { .. } => ToolError::new(
                ErrorCode::PathNotAllowed,
                format!("{} is outside the job's artifact directory", path.display()),
            )
            .with_details(serde_json::json!({"path": path})),
        })
    }
}

/// `FILE_NOT_FOUND` for a path that does not resolve.
fn unresolved(path: &std::path::Path, refusal: &Refusal) -> ToolError {
    ToolError::new(ErrorCode::FileNotFound, refusal.to_string())
        .with_details(serde_json::json!({"path": path}))
}

/// The size of the file at `path` (already confined to the job's roots), or
/// `QUERY_TOO_LARGE` ("the `what` is over the size limit") when it holds more than `limit`
/// bytes; checked before reading, so an oversized file is never loaded. A size that cannot
/// be read counts as 0: the read that follows reports the error.
pub fn check_file_size(path: &std::path::Path, limit: u64, what: &str) -> Result<u64, ToolError> {
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if bytes > limit {
        return Err(ToolError::new(
            ErrorCode::QueryTooLarge,
            format!("the {what} is over the size limit"),
        )
        .with_details(serde_json::json!({"bytes": bytes, "limit": limit})));
    }
    Ok(bytes)
}
