//! What an op is ([`Op`]) and what every op shares: parsing its arguments, the error of a
//! cancelled job, an evaluation error as a tool error. The ops themselves are in
//! [`crate::ops`], one module each; none imports another.

use reticle_eval::EvalError;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::attempt::AttemptCtx;

/// One operation.
pub trait Op: Sync {
    /// The name the host sends in `RunRequest::op`.
    fn name(&self) -> &'static str;

    /// Runs the op on `args_json` (the validated tool arguments) and returns its result
    /// as the Rust type it built ([`Payload`]), which [`crate::server::run_op`] serializes once.
    /// Cancellation returns [`ErrorCode::Cancelled`].
    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult;
}

/// An op's result: a value of the type the op built (`ViolationReport`,
/// `SimulationResult`, …), serialized into the frame's JSON text once, at the worker's
/// edge ([`crate::server::run_op`]), with no `serde_json::Value` in between (issue 27 item 4).
pub trait Payload: Send {
    /// The result as JSON text.
    ///
    /// # Errors
    /// What `serde_json` reports for a value it cannot write (a map with non-string keys).
    fn to_json(&self) -> serde_json::Result<String>;
}

impl<T: Serialize + Send> Payload for T {
    fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// What [`Op::run`] returns: the op's typed result, or its tool error.
pub type OpResult = Result<Box<dyn Payload>, ToolError>;

/// `value` as an op's result.
///
/// # Errors
/// Never; the `Result` is the op's.
#[allow(clippy::unnecessary_wraps)]
pub fn payload<T: Serialize + Send + 'static>(value: T) -> OpResult {
    Ok(Box::new(value))
}

/// Parses an op's arguments; a mismatch is the caller's error, never a panic.
pub fn parse_args<T: DeserializeOwned>(op: &str, args_json: &str) -> Result<T, ToolError> {
    serde_json::from_str(args_json).map_err(|e| invalid_arguments(op, &e))
}

/// The error for arguments of `op` that do not parse.
pub fn invalid_arguments(op: &str, e: &serde_json::Error) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidInput,
        format!("invalid arguments for {op}: {e}"),
    )
    .with_details(serde_json::json!({ "op": op }))
}

/// The error an op returns when its job was cancelled.
#[must_use]
pub fn cancelled(job_id: &str) -> ToolError {
    ToolError::new(ErrorCode::Cancelled, "the job was cancelled")
        .with_details(serde_json::json!({ "job_id": job_id }))
}

/// An evaluation error as the op's error (cancellation names the job).
pub fn eval_error(e: EvalError, job_id: &str) -> ToolError {
    match e {
        EvalError::Cancelled => cancelled(job_id),
        EvalError::Tool(e) => e,
    }
}
