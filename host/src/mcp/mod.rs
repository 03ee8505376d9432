//! MCP semantics on top of the transport: lifecycle, dispatch (the eras are `reticle_transport::era`).

mod handover;
mod methods;
mod requests;
pub mod server;
mod task_methods;
pub mod tasks;
