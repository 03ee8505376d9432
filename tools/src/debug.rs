//! Debug tools for fault tests, listed only when `RETICLE_DEBUG_TOOLS=1`: they reach the
//! worker's `debug.*` ops through the same paths as the public tools, so a test can break
//! a worker on purpose where a real tool would need a hostile input.
//!
//! - `debug_malformed_result`: a job tool (like `evaluate`) whose op returns a payload
//!   that breaks the tool's output schema; the check must turn it into a typed error in
//!   every build.
//! - `debug_alloc`: a synchronous call (the observer tools' path, [`super::layout`])
//!   whose op allocates; over the worker's memory limit it must fail once, not replay.

use libmcp::ReplayContract;
use reticle_protocol::SCHEMA_VERSION;
use serde_json::{Map, Value, json};

use super::worker_job::{JobExtras, run_op_with, take_wait};
use super::{PayloadResult, TaskSupport, Tool, ToolContext, ToolDef, ToolResult};

/// The debug tools.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::with_schemas(
            ToolDef {
                name: "debug_malformed_result",
                title: "Debug: a result that breaks its schema",
                description: "Debug only (RETICLE_DEBUG_TOOLS=1). Runs the worker op \
                              debug.malformed as a job; its payload breaks this tool's \
                              output schema, so the call (or poll) must answer \
                              INTERNAL_ERROR.",
                replay: ReplayContract::Convergent,
                read_only: true,
                handler: malformed,
                porcelain: None,
            },
            input_schema(json!({"wait": {"type": "boolean"}})),
            json!({
                "type": "object",
                "additionalProperties": true,
                "required": ["schema_version", "job_id", "status"],
                "anyOf": [{"$ref": "#/$defs/job_started"}, {"$ref": "#/$defs/finished"}],
                "$defs": {
                    "job_started": {
                        "type": "object",
                        "required": ["schema_version", "job_id", "status"],
                    },
                    "result": {
                        "type": "object",
                        "required": ["schema_version", "metrics"],
                        "properties": {
                            "schema_version": {"type": "string"},
                            "metrics": {"type": "object"},
                        },
                    },
                    "finished": {
                        "allOf": [
                            {"$ref": "#/$defs/result"},
                            {"required": ["job_id", "status"]},
                        ],
                    },
                },
            }),
        )
        .with_task_support(TaskSupport::Optional),
        Tool::with_schemas(
            ToolDef {
                name: "debug_alloc",
                title: "Debug: allocate on a worker",
                description: "Debug only (RETICLE_DEBUG_TOOLS=1). Runs the worker op \
                              debug.alloc as a synchronous call, the layout tools' path.",
                replay: ReplayContract::Convergent,
                read_only: true,
                handler: alloc,
                porcelain: None,
            },
            input_schema(json!({"bytes": {"type": "integer", "minimum": 0}})),
            json!({
                "type": "object",
                "additionalProperties": true,
                "required": ["schema_version", "allocated_bytes"],
                "properties": {
                    "schema_version": {"type": "string"},
                    "allocated_bytes": {"type": "integer"},
                },
            }),
        ),
    ]
}

/// A closed input schema with `properties` and the presentation arguments.
fn input_schema(properties: Value) -> Value {
    let mut properties = properties;
    properties["render"] = json!({"type": "string", "enum": ["porcelain", "json"]});
    properties["detail"] = json!({"type": "string", "enum": ["concise", "full"]});
    json!({"type": "object", "additionalProperties": false, "properties": properties})
}

async fn malformed(ctx: ToolContext, mut args: Map<String, Value>) -> ToolResult {
    let wait = take_wait(&mut args);
    run_op_with(&ctx, "debug.malformed", &args, wait, JobExtras::default()).await
}

async fn alloc(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0);
    let mut out = super::layout::run_op(&ctx, "debug.alloc", json!({"bytes": bytes}), None).await?;
    out["schema_version"] = json!(SCHEMA_VERSION);
    Ok(out)
}
