//! The stdio transport of the reticle host: bounded framing in, one serialized writer out.
//!
//! - [`frame`]: `FrameReader`, bounded NDJSON lines (1 MiB; longer lines are skipped as
//!   they stream), resumable across a reexec.
//! - [`stdin`]: the stdin pump thread, stoppable between two reads.
//! - [`jsonrpc`]: classifying a line and building JSON-RPC responses.
//! - [`writer`]: `claim_stdout` and the writer thread, the only way to write the protocol.
//! - [`era`]: the MCP protocol versions (legacy and 2026-07-28), a request's `_meta`, log
//!   levels: what both the stdio and the HTTP transport read off a request.
//!
//! It knows nothing of MCP methods, tools or workers: the host's `mcp` module sits on it.

pub mod era;
pub mod frame;
pub mod jsonrpc;
pub mod stdin;
pub mod writer;
