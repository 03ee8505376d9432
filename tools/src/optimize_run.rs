//! `optimize` outside the MCP server: what `reticle optimize` and `reticle bench repair`
//! run (seed 000 G3). The arguments are the tool's, checked against its input schema and
//! resolved by the caller; the work is the tool's own — the tiled region path
//! ([`super::optimize_region`]) for a region, the whole layer or a list of ids, else the
//! `optimize` op in one window — so the result is the tool's `structuredContent` without
//! the job envelope.

use std::sync::Arc;

use reticle_dispatch::{Dispatcher, Scope, Unit};
use reticle_protocol::args::{OptimizeArgs, OptimizeTarget};
use reticle_protocol::optimize_result::RegionTarget;
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};

/// Runs the optimize of `call` (paths resolved, `wait` taken) on `dispatcher` in `scope`,
/// its files in `dir`. A list of ids needs the call's own `layout` (a one-shot command
/// remembers no evaluation); an evaluation job is refused (`INVALID_INPUT`: a one-shot
/// command has no job table, D212).
///
/// # Errors
/// The tool's errors.
pub async fn run_in(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    mut call: OptimizeArgs,
    dir: &std::path::Path,
) -> Result<Value, ToolError> {
    let target = match call.target() {
        OptimizeTarget::Job => {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                "job_id names a job of a running server: a one-shot command has none",
            )
            .with_details(json!({"argument": "job_id"}))
            .with_hint(
                "optimize the job's region instead: --box with the evaluate call's box (and --violation-ids for some of its ids)",
            ));
        }
        OptimizeTarget::Ids => super::optimize_targets::ids_region(&mut call)?,
        OptimizeTarget::Region | OptimizeTarget::WholeLayer => RegionTarget {
            mode: if call.box_um.is_some() {
                "region"
            } else {
                "layer"
            }
            .into(),
            resolved_from: "none".into(),
            ..RegionTarget::default()
        },
        OptimizeTarget::Violation | OptimizeTarget::Window => {
            // As the tool sends a single window (tools/src/optimize.rs).
            let by_id = call.violation_id.is_some();
            let mut args = super::optimize::window_op_args(call);
            if by_id {
                args.entry("resolved_from")
                    .or_insert_with(|| json!("violation_id"));
            }
            let unit = Unit::new(super::optimize::OP, &Value::Object(args))
                .with_artifact_dir(Some(dir.display().to_string()));
            return dispatcher.run(scope, unit).await;
        }
    };
    super::optimize_region::region_result(dispatcher, scope, dir, &call, target).await
}
