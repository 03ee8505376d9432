//! The stdio transport: bounded framing in, one serialized writer out.

pub mod frame;
pub mod jsonrpc;
pub mod stdin;
pub mod writer;
