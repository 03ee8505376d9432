//! Wire types shared by the reticle host and its workers.
//!
//! - [`error`]: tool errors as values and their stable codes.
//! - [`schemas`]: the JSON Schemas of every public tool.
//! - [`wire`]: the private host ↔ worker protocol (length-prefixed msgpack).
//! - [`violation_id`]: the self-describing `violation_id` ([`ViolationId`]), written and
//!   parsed here only.
//! - [`paths`]: [`paths::resolve_under`], the one "path under the allowed directories"
//!   check of host, worker and batch manifests.
//! - [`files`]: [`files::FileRef`], a file a result names (path, SHA-256, size).
//! - [`optimize_result`]: a region `optimize`'s result as types.
//! - [`sync`]: [`sync::lock`], the one way host and worker take a mutex.
//! - [`SCHEMA_VERSION`]: stamped on every response payload.

pub mod args;
pub mod batch;
pub mod capabilities;
pub mod error;
pub mod files;
pub mod optimize_result;
pub mod paths;
pub mod schemas;
pub mod sync;
pub mod violation_id;
pub mod wire;

pub use error::{ErrorCode, ToolError};
pub use violation_id::{ParseViolationIdError, ViolationId};

/// Version of every response payload's schema (seed 000 §4): minor bumps add
/// fields or enum values, major bumps remove or change meaning. 1.1.0 (issue 20, D74)
/// added `metrics.epe_mean_nm`/`epe_max_nm`, `state_after` on state-changing tools,
/// list truncation metadata, telemetry retries per method and the capabilities' values.
pub const SCHEMA_VERSION: &str = "1.1.0";
