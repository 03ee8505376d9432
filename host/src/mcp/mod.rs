//! MCP semantics on top of the transport: eras, lifecycle, dispatch.

pub mod era;
mod handover;
mod methods;
mod requests;
pub mod server;
mod task_methods;
pub mod tasks;
