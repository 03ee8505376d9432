//! Operations a worker runs, dispatched by name.
//!
//! Adding an op: write `ops/<name>.rs` with a unit struct implementing [`Op`], then
//! add its `mod` line and one entry to [`OPS`]. The host decides which ops the MCP
//! surface can reach; `debug.*` ops exist for the supervisor's tests and are never
//! routed from client requests.

pub mod artifacts;
mod debug_alloc;
mod debug_crash;
mod debug_malformed;
mod debug_sleep;
mod deck_job;
mod demo;
pub mod drc;
mod engine_info;
pub mod evaluate;
pub mod observe;
pub mod optimize;
mod region_source;
pub mod simulate;
pub mod whole;

use reticle_eval::EvalError;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::de::DeserializeOwned;

use crate::job::JobCtx;

/// One operation.
pub trait Op: Sync {
    /// The name the host sends in `RunRequest::op`.
    fn name(&self) -> &'static str;

    /// Runs the op on `args_json` (the validated tool arguments) and returns the
    /// structured result. Cancellation returns [`ErrorCode::Cancelled`].
    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<serde_json::Value, ToolError>;
}

/// Every op this worker knows.
static OPS: &[&dyn Op] = &[
    &debug_sleep::DebugSleep,
    &debug_crash::DebugCrash,
    &debug_alloc::DebugAlloc,
    &debug_malformed::DebugMalformed,
    &engine_info::EngineInfo,
    &demo::DemoRender,
    &evaluate::Evaluate,
    &optimize::Optimize,
    &simulate::Simulate,
    &whole::evaluate::Plan,
    &whole::evaluate::Tile,
    &whole::evaluate::Merge,
    &whole::pages::PageOp,
    &whole::simulate::Plan,
    &whole::simulate::Tile,
    &whole::simulate::Merge,
    &observe::OPEN,
    &observe::LIST_CELLS,
    &observe::DESCRIBE_CELL,
    &observe::LIST_LAYERS,
    &observe::QUERY_REGION,
    &observe::MEASURE,
    &observe::ANALYZE_WAVEGUIDE,
    &observe::SET_VIEW,
    &observe::RENDER,
    &drc::DrcRun,
    &drc::DrcMarkers,
];

/// The op named `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static dyn Op> {
    OPS.iter().copied().find(|op| op.name() == name)
}

/// Names of all ops, sorted.
#[must_use]
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<_> = OPS.iter().map(|op| op.name()).collect();
    names.sort_unstable();
    names
}

/// Parses an op's arguments; a mismatch is the caller's error, never a panic.
pub fn parse_args<T: DeserializeOwned>(op: &str, args_json: &str) -> Result<T, ToolError> {
    serde_json::from_str(args_json).map_err(|e| invalid_arguments(op, &e))
}

/// The error for arguments of `op` that do not parse.
fn invalid_arguments(op: &str, e: &serde_json::Error) -> ToolError {
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
fn eval_error(e: EvalError, job_id: &str) -> ToolError {
    match e {
        EvalError::Cancelled => cancelled(job_id),
        EvalError::Tool(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_found_by_its_name_and_names_are_unique() {
        let names = names();
        let mut dedup = names.clone();
        dedup.dedup();
        assert_eq!(names, dedup);
        for name in &names {
            assert_eq!(find(name).map(Op::name), Some(*name));
        }
        assert!(find("no.such.op").is_none());
    }

    #[test]
    fn bad_arguments_are_invalid_input() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        struct A {
            #[allow(dead_code)]
            ms: u64,
        }
        let e = parse_args::<A>("x", r#"{"ms": "soon"}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        let e = parse_args::<A>("x", r#"{"ms": 1, "typo": 2}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(parse_args::<A>("x", r#"{"ms": 1}"#).is_ok());
    }
}
