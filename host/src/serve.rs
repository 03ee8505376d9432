//! `reticle serve`: wire logging, the protocol stream, the ready file and the
//! server loop together, and take them down in order.

use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::assets::SchemaCatalog;
use crate::confine::AllowedRoots;
use crate::logging;
use crate::mcp::server::{Server, ShutdownPolicy, StopReason};
use crate::readiness::ReadyFile;
use crate::state::HostState;
use crate::tools::ToolRegistry;
use crate::transport::frame::FrameReader;
use crate::transport::writer::{self, Writer};
use crate::workers::WorkerPool;

/// Frames read ahead of the dispatcher (each at most 1 MiB).
const READ_AHEAD: usize = 8;

/// Options of `reticle serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where the ready file goes.
    pub ready_file: PathBuf,
    /// Directory of the JSONL log, or `None` for stderr only.
    pub log_dir: Option<PathBuf>,
    /// `tracing` filter.
    pub log_filter: String,
    /// Drain and EOF timings.
    pub policy: ShutdownPolicy,
    /// How long finished jobs stay pollable.
    pub job_ttl: Duration,
    /// Extra published schemas (`RETICLE_SCHEMAS_DIR`).
    pub schemas_dir: Option<PathBuf>,
    /// Extra examples (`RETICLE_EXAMPLES_DIR`).
    pub examples_dir: Option<PathBuf>,
    /// Start the worker pool at once (else on the first job).
    pub start_workers: bool,
}

/// Runs the stdio server until EOF or a signal.
pub fn serve(options: ServeOptions) -> anyhow::Result<StopReason> {
    let logs = logging::init(
        &options.log_filter,
        options.log_dir.as_deref(),
        "reticle.jsonl",
    );
    let protocol = writer::claim_stdout()?;
    let (out, writer) = Writer::spawn(protocol);
    let schemas = SchemaCatalog::load_with_examples(
        options.schemas_dir.as_deref(),
        options.examples_dir.as_deref(),
    );
    let state = Arc::new(HostState::new(
        logs.file.clone(),
        schemas,
        AllowedRoots::from_env(),
    ));
    let (frames_tx, frames_rx) = mpsc::channel(READ_AHEAD);
    std::thread::Builder::new()
        .name("stdin-reader".into())
        .spawn(move || {
            let mut reader =
                FrameReader::new(BufReader::with_capacity(64 * 1024, std::io::stdin()));
            loop {
                match reader.next_frame() {
                    Ok(Some(frame)) => {
                        if frames_tx.blocking_send(frame).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        tracing::error!(error = %e, "stdin read failed; treating as end of input");
                        return;
                    }
                }
            }
        })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("reticle-host")
        .build()?;
    let reason = runtime.block_on(async move {
        let ready = match ReadyFile::create(&options.ready_file) {
            Ok(ready) => Some(ready),
            Err(e) => {
                tracing::error!(path = %options.ready_file.display(), error = %e, "cannot write the ready file");
                None
            }
        };
        tracing::info!(pid = std::process::id(), log_file = ?state.log_file, "mcp:ready mode=stdio");
        let workers = WorkerPool::new();
        if options.start_workers {
            workers.start_in_background();
        }
        let server = Server::new(out, state, ToolRegistry::standard(), options.job_ttl, workers);
        let reason = server.run(frames_rx, options.policy).await;
        drop(ready);
        reason
    })?;
    runtime.shutdown_timeout(Duration::from_millis(200));
    // Every sender is gone now: the writer flushes what is queued and stops.
    writer.join();
    tracing::info!(?reason, "reticle host exiting");
    Ok(reason)
}
