//! Running one worker op as a job: the part `simulate`, `evaluate` and `optimize` share.
//!
//! The tool resolves path arguments (through `confine`) before calling [`run_op_with`]
//! (in `context`): the job then runs the op as its one unit through the dispatcher
//! (queue, progress into the job, Convergent replay after a lost worker), applies the
//! tool's payload hook, and the job table stores the payload once it passed the output
//! schema. [`run_tiled`] runs a region in tiles as a job.

use serde_json::{Map, Value};

use super::{ToolContext, ToolResult};
use reticle_dispatch::FanOut;

/// Removes `wait` (the host's, never the worker's) and returns whether the call waits
/// (a tool whose arguments are not typed yet: `optimize`, `debug.*`).
pub(super) fn take_wait(args: &mut Map<String, Value>) -> bool {
    args.remove("wait")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// Parses a tool's arguments (already checked against its input schema, `render` and
/// `detail` taken out by the registry) into its type: the one parse, at the tool's edge.
///
/// # Errors
/// `INVALID_INPUT` when they do not fit the type (a schema and its type disagreeing).
pub(super) fn parse_call<T: serde::de::DeserializeOwned>(
    args: Map<String, Value>,
) -> Result<T, reticle_protocol::ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| {
        reticle_protocol::ToolError::new(
            reticle_protocol::ErrorCode::InvalidInput,
            format!("invalid arguments: {e}"),
        )
    })
}

/// The JSON object of typed arguments (what a unit carries to the worker, and what the
/// violation cache keeps of an evaluate call).
pub fn object_of<T: serde::Serialize>(args: &T) -> Map<String, Value> {
    match serde_json::to_value(args) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Resolves a path argument through the caller's allowed roots (`confine`).
///
/// # Errors
/// The roots' refusal (`INVALID_INPUT`, `FILE_NOT_FOUND`, `PATH_NOT_ALLOWED`).
pub(super) fn resolve_path(
    ctx: &ToolContext,
    raw: &str,
) -> Result<String, reticle_protocol::ToolError> {
    Ok(ctx.scope.roots.resolve_read(raw)?.display().to_string())
}

// A job of one op (`run_op_with`, its `JobExtras` and payload hook `OnResult`) is
// started in `context`, beside `ToolContext::run_as_job`, the one function it calls: the
// call enters one file, not two (issue 27 item 6).
pub(super) use crate::context::{JobExtras, OnResult, run_op_with};

/// Runs a tool's work on a region in tiles as a job (docs/DECISIONS.md D57): ops
/// `<prefix>.plan`, `<prefix>.tile` (one unit per tile, spread over the executor) and
/// `<prefix>.merge` (see [`FanOut`]), in a new job artifact directory `<dir_prefix>_…`
/// held until the job ends and kept for the artifact TTL after (D49).
pub(super) async fn run_tiled<A: serde::Serialize>(
    ctx: &ToolContext,
    prefix: &'static str,
    dir_prefix: &'static str,
    args: &A,
    wait: bool,
) -> ToolResult {
    run_tiled_with(ctx, prefix, dir_prefix, args, wait, None).await
}

/// [`run_tiled`] with a payload hook applied to the merged payload (`evaluate` remembers
/// a tiled evaluation for `optimize`, D181).
pub(super) async fn run_tiled_with<A: serde::Serialize>(
    ctx: &ToolContext,
    prefix: &'static str,
    dir_prefix: &'static str,
    args: &A,
    wait: bool,
    on_result: Option<OnResult>,
) -> ToolResult {
    let args = object_of(args);
    let job_dir = ctx.scope.sessions.new_job_dir(dir_prefix)?;
    let dispatcher = std::sync::Arc::clone(&ctx.dispatcher);
    ctx.run_as_job(wait, move |scope| async move {
        let dir = job_dir.path().display().to_string();
        let fan_out = FanOut {
            prefix,
            artifact_dir: &dir,
        };
        let payload = fan_out.run(&dispatcher, &scope, args).await;
        drop(job_dir);
        match on_result {
            Some(hook) => hook(payload?),
            None => payload,
        }
    })
    .await
}
