//! The MCP server of the reticle host: JSON-RPC methods and lifecycle on top of the
//! transport ([`server`]: the loop and the `Server`; requests in flight, the methods, the
//! tasks API of both eras, the reexec handover), the stdio server's wiring ([`serve`]),
//! Streamable HTTP ([`http`]), the control socket ([`control`]; its command-line client,
//! `reticle ctl`, is the binary's), the self-reexec ([`reexec`]), logging and the ready
//! file. The protocol eras are `reticle_transport::era`; the tools it calls are
//! `reticle_tools`.

pub mod control;
mod handover;
pub mod http;
pub mod logging;
mod methods;
pub mod readiness;
pub mod reexec;
mod requests;
mod resource_methods;
pub mod serve;
pub mod server;
mod task_methods;
pub mod tasks;
