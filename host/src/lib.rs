//! The `reticle` binary's commands other than the server: `reticle validate`, `reticle
//! bench` ([`cli`], [`bench`], [`bench_chip`], [`bench_http`]), `reticle eval`
//! ([`eval_cli`]; what it shares with `reticle optimize`, [`optimize_cli`], is [`cli_run`]), `reticle demo` ([`demo_cli`]) and `reticle ctl` ([`ctl`]). `main` is the one composition root:
//! it reads the settings once (`reticle_config::init`) and hands them on.
//!
//! The server itself is `reticle_mcp::serve::serve`; the data path is
//! `reticle_transport` (bounded frames in, one writer out) → `reticle_mcp::server`
//! (methods, dispatch) → `reticle_tools` (schemas, handlers) → `reticle_dispatch` (units,
//! attempts, workers).

pub mod bench;
pub mod bench_chip;
pub mod bench_http;
pub mod bench_repair;
pub mod cli;
pub mod cli_run;
pub mod ctl;
pub mod demo_cli;
pub mod eval_cli;
pub mod optimize_cli;
