//! Logs: human lines on stderr and JSON lines in a file, both via `tracing`.
//! Nothing here can reach stdout.

use std::path::{Path, PathBuf};

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

/// Keeps the file writer alive; drop it last to flush.
#[derive(Debug)]
pub struct LogGuard {
    _file: Option<WorkerGuard>,
    /// The JSONL file, when one could be opened.
    pub file: Option<PathBuf>,
}

/// Installs the global subscriber. `filter` uses `RUST_LOG` syntax (`RETICLE_LOG`).
pub fn init(filter: &str, log_dir: Option<&Path>, file_name: &str) -> LogGuard {
    let env_filter = || EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_filter(env_filter());
    let mut problem = None;
    let (file_layer, guard, file) = match log_dir.map(|dir| (dir, std::fs::create_dir_all(dir))) {
        Some((dir, Ok(()))) => {
            let appender = tracing_appender::rolling::never(dir, file_name);
            let (writer, guard) = tracing_appender::non_blocking(appender);
            let layer = fmt::layer()
                .json()
                .with_writer(writer)
                .with_current_span(false)
                .with_filter(env_filter());
            (Some(layer), Some(guard), Some(dir.join(file_name)))
        }
        Some((dir, Err(e))) => {
            problem = Some(format!("cannot create log dir {}: {e}", dir.display()));
            (None, None, None)
        }
        None => (None, None, None),
    };
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file_layer)
        .try_init();
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging to stderr only");
    }
    LogGuard { _file: guard, file }
}
