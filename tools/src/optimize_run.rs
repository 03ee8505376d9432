//! `optimize` outside the MCP server: what `reticle optimize` runs (seed 000 G3). The
//! arguments are the tool's, checked against its input schema and resolved by the caller;
//! the work is the tool's own — the tiled region path ([`super::optimize_region`]) for a
//! region or the whole layer, else the `optimize` op in one window — so the result is the
//! tool's `structuredContent` without the job envelope.

use std::sync::Arc;

use reticle_dispatch::{Dispatcher, Scope, Unit};
use reticle_protocol::ToolError;
use serde_json::{Map, Value, json};

/// Runs the optimize of `args` (paths resolved) on `dispatcher` in `scope`, its files in
/// `dir`.
///
/// # Errors
/// The tool's errors.
pub async fn run_in(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    mut args: Map<String, Value>,
    dir: &std::path::Path,
) -> Result<Value, ToolError> {
    if super::optimize_region::wants_region(&args) {
        return super::optimize_region::region_result(dispatcher, scope, dir, args).await;
    }
    // As the tool sends a single window (tools/src/optimize.rs).
    args.remove("tiling");
    args.remove("whole_layer");
    if args.contains_key("violation_id") {
        args.entry("resolved_from")
            .or_insert_with(|| json!("violation_id"));
    }
    let unit = Unit::new(super::optimize::OP, &Value::Object(args))
        .with_artifact_dir(Some(dir.display().to_string()));
    dispatcher.run(scope, unit).await
}
