//! `reticle-worker`: a disposable process that runs engine jobs for the host.
//!
//! The host starts it with [`WORKER_SOCKET_ENV`] naming a Unix socket it listens on.
//! The worker connects, says hello, then runs one job at a time until the socket
//! closes, the host says `shutdown`, or its parent dies. It never writes to stdout
//! (the host's stdout is the MCP stream); logs go to stderr.
//!
//! `reticle-worker bench ...` runs the engine benchmarks instead (see `bench`);
//! `reticle-worker batch MANIFEST` runs one element of a cluster job array (see `batch`).
//!
//! The binary (`src/main.rs`) only calls [`run`]. The library exists so that the worker's
//! parts are tested from `tests/` (the `worker_process` executable) rather than by a second,
//! `cfg(test)` compilation of the whole crate (D251); the modules made public for that are
//! not an API for other crates.

mod allocator;
pub mod artifacts;
mod attempt;
pub mod backend;
mod batch;
mod bench;
mod bench_ilt;
pub mod cache;
pub mod deck_job;
mod deck_pick;
mod imaging;
mod layouts;
pub mod op;
pub mod ops;
mod parent;
mod records_file;
mod resolve_id;
mod server;
pub mod settings;
mod tiled;

use std::process::ExitCode;

use reticle_protocol::wire::WORKER_SOCKET_ENV;
use settings::Settings;

/// The worker process: reads its settings from the environment once, then serves the
/// host, runs a bench or runs one cluster batch element, as its arguments say.
pub fn run() -> ExitCode {
    init_tracing();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The worker's composition root: its one read of the environment. Every part gets
    // what it needs from `settings`.
    let settings = Settings::from_lookup(|name| std::env::var_os(name));
    match args.first().map(String::as_str) {
        Some("bench") => bench::main(&args[1..], &settings),
        Some("batch") => {
            set_kernel_store(&settings);
            batch::main(&args[1..], &settings)
        }
        Some("--version") => {
            eprintln!("reticle-worker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => {
            tracing::error!(
                arg = other,
                "unknown argument; usage: reticle-worker [bench ... | batch MANIFEST]"
            );
            ExitCode::from(2)
        }
        None => serve(&settings),
    }
}

/// Points the engine at the on-disk SOCS kernel store.
fn set_kernel_store(settings: &Settings) {
    let kernel_cache = settings.kernel_cache.clone();
    tracing::debug!(?kernel_cache, "SOCS kernel store");
    reticle_kernel::socs_store::set_dir(kernel_cache);
}

/// Worker mode: arm the parent-death signal, connect, serve until told to stop.
fn serve(settings: &Settings) -> ExitCode {
    if let Err(e) = parent::die_with_parent(settings.parent_pid.as_deref()) {
        tracing::error!(error = %e, "parent check failed; exiting");
        return ExitCode::from(3);
    }
    set_kernel_store(settings);
    if let Some(threads) = settings.threads {
        // Before any parallel loop: the pool's size is fixed once it exists.
        match reticle_kernel::cpu::set_global_threads(threads) {
            Ok(()) => tracing::debug!(threads, "compute threads"),
            Err(e) => tracing::warn!(error = %e, threads, "could not size the compute pool"),
        }
    }
    let Some(socket) = &settings.socket else {
        tracing::error!(
            "{WORKER_SOCKET_ENV} is not set; the worker is started by the reticle host"
        );
        return ExitCode::from(2);
    };
    match server::run(std::path::Path::new(socket), settings.backend) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "worker stopped on an error");
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr only; `RUST_LOG` filters (default `info`).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
