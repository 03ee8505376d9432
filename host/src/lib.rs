//! The reticle host: a long-lived MCP server on stdio that keeps sessions,
//! jobs and telemetry, and sends heavy work to disposable worker processes.
//!
//! Start at [`serve::serve`]; the data path is `reticle_transport` (bounded frames in,
//! one writer out) → `mcp::server` (eras, dispatch) → `tools` (schemas, handlers).

pub mod bench;
pub mod bench_chip;
pub mod bench_http;
pub mod cli;
pub mod control;
pub mod demo_cli;
pub mod eval_cli;
pub mod http;
pub mod logging;
pub mod mcp;
pub mod readiness;
pub mod reexec;
pub mod serve;
