//! The tool surface of the reticle host and the state a call reads: the tools (this
//! module), the host's shared state and telemetry ([`state`]), what one client sees
//! ([`scope`]: allowed roots in [`confine`], layout sessions in [`sessions`], the violation
//! cache in [`violation_cache`]) and job artifact directories ([`job_dirs`]).
//! It knows no JSON-RPC method and no transport: the MCP server calls
//! [`ToolRegistry::call`].
//!
//! The tools: the registry and call pipeline ([`registry`]), what handlers get
//! ([`context`]), what they answer and the output check ([`output`]), how answers are
//! shown ([`render`]), and one module per tool.
//!
//! Arguments are validated before the handler runs (a failure is a tool error value
//! with every violation, sorted, so the model can fix its call); every answer is checked
//! against the tool's output schema, in every build, before it is sent — and a job's
//! result before the job table stores it.

pub mod confine;
mod context;
mod debug;
pub mod evaluate;
mod health;
pub mod imaging;
pub mod job_dirs;
mod jobs;
mod layout;
mod media;
pub mod normalize;
pub mod nullable;
mod optimize;
mod optimize_pins;
mod optimize_region;
pub mod optimize_run;
mod optimize_targets;
pub mod output;
mod populate;
pub mod prompts;
mod registry;
mod render;
pub mod resources;
mod schema_tools;
pub mod scope;
pub mod sessions;
mod simulate;
pub mod state;
mod telemetry;
pub mod tool_name;
pub mod viewer;
pub mod violation_cache;
mod violations;
pub mod worker_job;

use reticle_protocol::ToolError;
use serde_json::Value;

pub use context::{TaskRequest, ToolContext, ToolShared, WaitedJob};
pub use context::{progress_params, wait_reporting_progress};
pub use health::{payload as health_payload, porcelain as health_porcelain};
pub use output::{JobStarted, ToolOutput, schema_errors};
pub use registry::{
    CallOutcome, TaskSupport, Tool, ToolDef, ToolProbe, ToolRegistry, probe_answer,
};
pub use render::{Detail, PRESENTATION, clip, error_result, generic_porcelain};
pub use telemetry::{payload as telemetry_payload, porcelain as telemetry_porcelain};
pub use tool_name::ToolName;

/// What a handler answers: a started job or a finished payload ([`ToolOutput`]).
pub type ToolResult = Result<ToolOutput, ToolError>;

/// A payload or a tool error: what a synchronous handler, a job's work and a worker op
/// produce.
pub type PayloadResult = Result<Value, ToolError>;
