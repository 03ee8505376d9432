//! `reticle-worker`: a disposable process that runs engine jobs for the host.
//!
//! The host starts it with [`WORKER_SOCKET_ENV`] naming a Unix socket it listens on.
//! The worker connects, says hello, then runs one job at a time until the socket
//! closes, the host says `shutdown`, or its parent dies. It never writes to stdout
//! (the host's stdout is the MCP stream); logs go to stderr.
//!
//! `reticle-worker bench ...` runs the engine benchmarks instead (see [`bench`]);
//! `reticle-worker batch MANIFEST` runs one element of a cluster job array (see [`batch`]).

mod backend;
mod batch;
mod bench;
mod bench_ilt;
mod cache;
mod job;
mod ops;
mod parent;
mod server;

use std::process::ExitCode;

use reticle_protocol::wire::{KERNEL_CACHE_ENV, WORKER_SOCKET_ENV};

fn main() -> ExitCode {
    init_tracing();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => bench::main(&args[1..]),
        Some("batch") => {
            set_kernel_store();
            batch::main(&args[1..])
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
        None => serve(),
    }
}

/// The on-disk SOCS kernel store: `RETICLE_KERNEL_CACHE_DIR` (`off` for none), else the
/// user's cache directory.
fn kernel_cache_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    match std::env::var_os(KERNEL_CACHE_ENV) {
        Some(v) if v == "off" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("reticle/kernels")),
    }
}

/// Points the engine at the on-disk SOCS kernel store.
fn set_kernel_store() {
    let kernel_cache = kernel_cache_dir();
    tracing::debug!(?kernel_cache, "SOCS kernel store");
    reticle_kernel::socs_store::set_dir(kernel_cache);
}

/// Worker mode: arm the parent-death signal, connect, serve until told to stop.
fn serve() -> ExitCode {
    if let Err(e) = parent::die_with_parent() {
        tracing::error!(error = %e, "parent check failed; exiting");
        return ExitCode::from(3);
    }
    set_kernel_store();
    let Some(socket) = std::env::var_os(WORKER_SOCKET_ENV) else {
        tracing::error!(
            "{WORKER_SOCKET_ENV} is not set; the worker is started by the reticle host"
        );
        return ExitCode::from(2);
    };
    match server::run(std::path::Path::new(&socket)) {
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
