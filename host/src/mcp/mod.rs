//! MCP semantics on top of the transport: eras, lifecycle, dispatch.

pub mod era;
pub mod server;
pub mod tasks;
