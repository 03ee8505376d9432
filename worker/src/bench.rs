//! `reticle-worker bench ...`: engine benchmarks, run in a worker process so they see
//! the same backend selection as real jobs. The host's `reticle bench` execs this.
//!
//! A placeholder until the engine's GPU and CPU paths land: it says so and exits 2.

use std::process::ExitCode;

/// Entry point of the `bench` subcommand; `args` are the arguments after `bench`.
pub fn main(args: &[String]) -> ExitCode {
    tracing::error!(?args, "reticle-worker bench: no benchmarks are wired yet");
    ExitCode::from(2)
}
