//! The tool registry: names, schemas, validation, and the call pipeline.
//!
//! Every tool declares its input and output schema from `protocol/schemas/`.
//! Arguments are validated before the handler runs (a failure is a tool error
//! value with every violation, sorted, so the model can fix its call);
//! results are validated against the output schema in debug builds and tests.

pub mod evaluate;
mod health;
mod jobs;
mod layout;
pub mod normalize;
mod optimize;
mod populate;
mod schema_tools;
mod simulate;
mod telemetry;
pub mod worker_job;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, ToolError, schemas};
use serde_json::{Map, Value, json};

use crate::jobs::{self as job_table, JobOptions, JobStatus, JobView, Jobs, ProgressSink};
use crate::journal::JournalHandle;
use crate::mcp::era::RequestMeta;
use crate::state::HostState;
use crate::transport::writer::Outbound;
use crate::workers::WorkerPool;

pub use health::{payload as health_payload, porcelain as health_porcelain};
pub use telemetry::{payload as telemetry_payload, porcelain as telemetry_porcelain};

/// What a handler returns.
pub type ToolResult = Result<Value, ToolError>;
type BoxFuture = Pin<Box<dyn Future<Output = ToolResult> + Send>>;
type Handler = Arc<dyn Fn(ToolContext, Map<String, Value>) -> BoxFuture + Send + Sync>;
type Porcelain = fn(&Value, Detail) -> String;

/// Everything a handler may use.
#[derive(Clone)]
pub struct ToolContext {
    /// Shared host state (ledger, counters, config).
    pub state: Arc<HostState>,
    /// The request's metadata (era, progress token).
    pub meta: Arc<RequestMeta>,
    /// The job table.
    pub jobs: Arc<Jobs>,
    /// The protocol stream, for progress notifications.
    pub out: Outbound,
    /// The worker pool.
    pub workers: Arc<WorkerPool>,
    /// The request's replay-journal entry; a job keeps a clone until it ends.
    pub journal: JournalHandle,
    /// Set when the call runs as an MCP task: the job starts and the handler
    /// returns at once, whatever `wait` or a `progressToken` say.
    pub task: Option<TaskRequest>,
    /// The call's `render`/`detail` arguments (set by [`ToolRegistry::call`]).
    pub presentation: Map<String, Value>,
    /// The call's validated arguments (set by [`ToolRegistry::call`]): a job keeps them
    /// as its recipe, so a host reexec can run it again.
    pub arguments: Map<String, Value>,
    /// The id of the job this call waits on, once it does (the server reads it to
    /// re-attach the waiting call to its job after a reexec).
    pub job_cell: Arc<OnceLock<String>>,
    /// Set when the call re-creates a job from a reexec snapshot: the job keeps its id
    /// and history, and the call returns at once.
    pub restore: Option<crate::jobs::RestoredJob>,
}

/// A call the client (2025-11-25 `params.task`) or the server (2026-07-28 tasks
/// extension) turned into a task.
#[derive(Debug, Clone, Default)]
pub struct TaskRequest {
    /// The TTL the client asked for.
    pub ttl: Option<Duration>,
    /// The id of the job the handler started (the task id), once it did.
    pub job_id: Arc<OnceLock<String>>,
}

impl ToolContext {
    /// Runs `work` as a job. Without a `progressToken` and without `wait`, returns
    /// `{job_id, status}` at once; otherwise streams `notifications/progress`
    /// (strictly increasing) and returns the final payload with its `job_id`.
    pub async fn run_as_job<F, Fut>(&self, tool: &str, wait: bool, work: F) -> ToolResult
    where
        F: FnOnce(ProgressSink) -> Fut,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let options = JobOptions {
            ttl: self.task.as_ref().and_then(|t| t.ttl),
            presentation: self.presentation.clone(),
            recipe: Some(json!({"tool": tool, "arguments": self.arguments})),
            restore: self.restore.clone(),
        };
        let rx = self.jobs.try_submit_with(tool, options, work)?;
        let job_id = rx.borrow().job_id.clone();
        if let Some(task) = &self.task {
            let _ = task.job_id.set(job_id.clone());
        }
        let token = self.meta.progress_token.clone();
        if self.task.is_some() || self.restore.is_some() || (token.is_none() && !wait) {
            let view = rx.borrow().clone();
            return Ok(json!({
                "schema_version": reticle_protocol::SCHEMA_VERSION,
                "job_id": view.job_id,
                "status": view.status,
                "progress": view.progress,
            }));
        }
        // Only a call that waits is "waiting on its job": a reexec re-attaches it to the job.
        let _ = self.job_cell.set(job_id);
        let view = wait_reporting_progress(&self.jobs, rx, &self.out, token).await;
        final_payload(view)
    }
}

/// `notifications/progress` params for `view` under `token` (total and message when known).
pub(crate) fn progress_params(token: &Value, view: &JobView) -> Value {
    let mut params = json!({"progressToken": token, "progress": view.progress.done});
    if let Some(total) = view.progress.total {
        params["total"] = json!(total);
    }
    if let Some(message) = &view.progress.message {
        params["message"] = json!(message);
    }
    params
}

/// Waits for a job to end on behalf of a call (dropping the wait cancels the job), sending
/// `notifications/progress` for `token`, strictly increasing, when the call has one.
pub(crate) async fn wait_reporting_progress(
    jobs: &Arc<Jobs>,
    rx: tokio::sync::watch::Receiver<JobView>,
    out: &Outbound,
    token: Option<Value>,
) -> JobView {
    let mut last = f64::NEG_INFINITY;
    job_table::wait(jobs, rx, |view| {
        let note = token
            .as_ref()
            .filter(|_| view.progress.done > last)
            .map(|token| {
                last = view.progress.done;
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": progress_params(token, &view)})
            });
        let out = out.clone();
        async move {
            if let Some(note) = note {
                out.send(&note).await;
            }
        }
    })
    .await
}

/// A finished job's answer as its waiting call returns it: the payload named with
/// its job, or the tool error.
fn final_payload(view: JobView) -> ToolResult {
    match view.status {
        JobStatus::Completed => {
            let mut payload = view.result.unwrap_or_else(|| json!({}));
            payload["job_id"] = json!(view.job_id);
            payload["status"] = json!(view.status);
            Ok(payload)
        }
        _ => Err(view.error.unwrap_or_else(|| {
            ToolError::new(ErrorCode::InternalError, "job ended without a result")
        })),
    }
}

/// Whether a tool may run as an MCP task (2025-11-25 `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task: answered directly (the default; omitted from the listing).
    Forbidden,
    /// A job tool: a task when the client asks (2025-11-25) or the server elects
    /// one (2026-07-28 extension), a direct answer otherwise.
    Optional,
}

/// How much a text rendering shows (libmcp doctrine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The essentials.
    Concise,
    /// Everything.
    Full,
}

/// One public tool.
pub struct Tool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    replay: ReplayContract,
    read_only: bool,
    input_schema: Value,
    output_schema: Value,
    input_validator: jsonschema::Validator,
    output_validator: jsonschema::Validator,
    handler: Handler,
    porcelain: Option<Porcelain>,
    task_support: TaskSupport,
    meta: Option<Value>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).finish()
    }
}

/// How to build a [`Tool`].
pub struct ToolDef<F> {
    /// Name (must have schema files in `protocol/schemas/`).
    pub name: &'static str,
    /// Human title.
    pub title: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// libmcp replay contract (DESIGN.md table).
    pub replay: ReplayContract,
    /// Whether the tool only reads.
    pub read_only: bool,
    /// The handler.
    pub handler: F,
    /// Optional porcelain text renderer of a successful payload.
    pub porcelain: Option<Porcelain>,
}

impl Tool {
    /// Builds a tool, compiling its schemas.
    ///
    /// # Panics
    /// When the schema files are missing or invalid: a build defect caught by
    /// every test run, never by user input.
    pub fn new<F, Fut>(def: ToolDef<F>) -> Self
    where
        F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let files = schemas::tool_schemas(def.name)
            .unwrap_or_else(|| panic!("no schema files for tool {}", def.name));
        let parse = |text: &str, which: &str| -> Value {
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{}.{which}.json is not JSON: {e}", def.name))
        };
        let input_schema = parse(files.input, "input");
        let output_schema = parse(files.output, "output");
        let compile = |schema: &Value, which: &str| {
            jsonschema::validator_for(schema)
                .unwrap_or_else(|e| panic!("{}.{which}.json is not a valid schema: {e}", def.name))
        };
        let handler = def.handler;
        Self {
            name: def.name,
            title: def.title,
            description: def.description,
            replay: def.replay,
            read_only: def.read_only,
            input_validator: compile(&input_schema, "input"),
            output_validator: compile(&output_schema, "output"),
            input_schema,
            output_schema,
            handler: Arc::new(move |ctx, args| Box::pin(handler(ctx, args))),
            porcelain: def.porcelain,
            task_support: TaskSupport::Forbidden,
            meta: None,
        }
    }

    /// The tool with `support` for MCP tasks (job tools: [`TaskSupport::Optional`]).
    #[must_use]
    pub fn with_task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// Whether the tool may run as an MCP task.
    pub fn task_support(&self) -> TaskSupport {
        self.task_support
    }

    /// Whether the tool's work runs as a job on a worker (its journal entry follows
    /// the job; other tools run in the host's request task).
    pub fn is_job(&self) -> bool {
        self.task_support == TaskSupport::Optional
    }

    /// Adds `_meta` to the tool's `tools/list` entry (e.g. `evaluate`'s capabilities matrix).
    #[must_use]
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The tool's replay contract.
    pub fn replay(&self) -> ReplayContract {
        self.replay
    }

    /// The `tools/list` entry; `with_task_support` adds 2025-11-25's
    /// `execution.taskSupport` to tools that may run as tasks.
    pub fn listing(&self, with_task_support: bool) -> Value {
        let mut entry = json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "idempotentHint": matches!(self.replay, ReplayContract::Convergent),
                "openWorldHint": false,
            },
        });
        if with_task_support && self.task_support == TaskSupport::Optional {
            entry["execution"] = json!({"taskSupport": "optional"});
        }
        if let Some(meta) = &self.meta {
            entry["_meta"] = meta.clone();
        }
        entry
    }
}

/// Every violation of `schema` by `instance`, as sorted `{path, msg}` pairs
/// (RFC 6901 pointers; seed 001 §5 ordering).
pub fn schema_errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<Value> {
    let mut errors: Vec<(String, String)> = validator
        .iter_errors(instance)
        .map(|e| (e.instance_path().to_string(), e.to_string()))
        .collect();
    errors.sort();
    errors.dedup();
    errors
        .into_iter()
        .map(|(path, msg)| json!({"path": path, "msg": msg}))
        .collect()
}

/// All tools, by name.
#[derive(Debug)]
pub struct ToolRegistry {
    tools: BTreeMap<&'static str, Tool>,
}

impl ToolRegistry {
    /// The registry of every public tool.
    pub fn standard() -> Self {
        let mut tools = vec![
            evaluate::tool(),
            health::tool(),
            jobs::cancel_tool(),
            jobs::poll_tool(),
            optimize::tool(),
            populate::tool(),
            simulate::tool(),
            telemetry::tool(),
        ];
        tools.extend(schema_tools::tools());
        tools.extend(layout::tools());
        Self::from_tools(tools)
    }

    /// A registry of the given tools.
    pub fn from_tools(tools: Vec<Tool>) -> Self {
        Self {
            tools: tools.into_iter().map(|t| (t.name, t)).collect(),
        }
    }

    /// Looks a tool up.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// The `tools` array of `tools/list`, sorted by name.
    pub fn listing(&self, with_task_support: bool) -> Vec<Value> {
        self.tools
            .values()
            .map(|t| t.listing(with_task_support))
            .collect()
    }

    /// The `CallToolResult` a finished job's call returns, rendered as the direct
    /// answer would have been (`tasks/result`, a completed 2026 task).
    pub fn deferred_result(&self, view: &JobView) -> Value {
        let render = RenderChoice::from_args(&view.presentation);
        match (final_payload(view.clone()), self.get(&view.tool)) {
            (Ok(payload), Some(tool)) => success_result(tool, payload, &render),
            (Ok(payload), None) => json!({
                "content": [{"type": "text", "text": payload.to_string()}],
                "structuredContent": payload,
                "isError": false,
            }),
            (Err(error), _) => error_result(&error),
        }
    }

    /// Runs one call through validation, the handler and output checking, and
    /// returns the `CallToolResult` (without `resultType`).
    pub async fn call(
        &self,
        tool: &Tool,
        mut ctx: ToolContext,
        mut arguments: Map<String, Value>,
    ) -> Value {
        // Unambiguous respellings first (aliases, "100", file:// and ~), then the schema.
        if let Err(error) = normalize::normalize(tool.name, &tool.input_schema, &mut arguments) {
            return error_result(&error);
        }
        let args_value = Value::Object(arguments);
        let errors = schema_errors(&tool.input_validator, &args_value);
        if !errors.is_empty() {
            let error = ToolError::new(
                ErrorCode::InvalidInput,
                format!("arguments do not match the {} input schema", tool.name),
            )
            .with_details(json!({"errors": errors}));
            return error_result(&error);
        }
        let Value::Object(mut arguments) = args_value else {
            unreachable!("constructed as an object above")
        };
        let render = RenderChoice::from_args(&arguments);
        ctx.arguments = arguments.clone();
        // Presentation is the registry's business: handlers (and the workers they call)
        // never see `render`/`detail`.
        ctx.presentation = PRESENTATION
            .into_iter()
            .filter_map(|k| arguments.remove(k).map(|v| (k.to_owned(), v)))
            .collect();
        match (tool.handler)(ctx, arguments).await {
            Ok(payload) => success_result(tool, payload, &render),
            Err(error) => error_result(&error),
        }
    }
}

/// The `CallToolResult` of a successful payload: checked against the output schema
/// (debug builds, tests), `content[0]` rendered per `render`.
fn success_result(tool: &Tool, payload: Value, render: &RenderChoice) -> Value {
    if check_outputs() {
        let errors = schema_errors(&tool.output_validator, &payload);
        if !errors.is_empty() {
            tracing::error!(tool = tool.name, ?errors, "output schema violation");
            let error = ToolError::new(
                ErrorCode::InternalError,
                format!(
                    "{} produced a result that violates its output schema",
                    tool.name
                ),
            )
            .with_details(json!({"errors": errors}))
            .with_fault(libmcp::FaultClass::Invariant, None);
            return error_result(&error);
        }
    }
    let text = match (render.json, tool.porcelain) {
        (false, Some(porcelain)) => porcelain(&payload, render.detail),
        (false, None) => generic_porcelain(tool.name, &payload, render.detail),
        (true, _) => payload.to_string(),
    };
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": payload,
        "isError": false,
    })
}

/// The presentation arguments every tool accepts (seed 004): `render` and `detail`.
pub const PRESENTATION: [&str; 2] = ["render", "detail"];

/// Porcelain of a tool without a bespoke renderer: a summary line (the tool and the
/// size of each top-level list), then libmcp's bounded JSON projection, one top-level
/// field per line (`schema_version` left out). Concise: at most 24 lines of at most
/// 120-character previews (lists show their first items). Full: every top-level list
/// item on its own line, at most 200 lines of 400-character previews. Deterministic:
/// the payload's own key order, no clocks.
pub fn generic_porcelain(tool: &str, payload: &Value, detail: Detail) -> String {
    let (max_lines, max_chars) = match detail {
        Detail::Concise => (24, 120),
        Detail::Full => (200, 400),
    };
    let mut body = payload.clone();
    if let Value::Object(map) = &mut body {
        map.shift_remove("schema_version");
    }
    let lists: Vec<String> = body
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_array().map(|a| format!("{} {k}", a.len())))
                .take(4)
                .collect()
        })
        .unwrap_or_default();
    let summary = if lists.is_empty() {
        format!("{tool}: ok")
    } else {
        format!("{tool}: {}", lists.join(", "))
    };
    let config = libmcp::JsonPorcelainConfig::try_new(max_lines - 1, max_chars).unwrap_or_default();
    let mut lines = vec![summary];
    match (&body, detail) {
        (Value::Object(map), Detail::Full) => {
            for (key, value) in map {
                let single = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
                match value {
                    Value::Array(items) if !items.is_empty() => {
                        let rendered = libmcp::render_json_porcelain(value, config);
                        let mut item_lines = rendered.lines();
                        if let Some(head) = item_lines.next() {
                            lines.push(format!("{key}: {head}"));
                        }
                        lines.extend(item_lines.map(|l| format!("  {l}")));
                    }
                    _ => lines.extend(
                        libmcp::render_json_porcelain(&single, config)
                            .lines()
                            .map(str::to_owned),
                    ),
                }
            }
        }
        _ => lines.extend(
            libmcp::render_json_porcelain(&body, config)
                .lines()
                .map(str::to_owned),
        ),
    }
    if lines.len() > max_lines {
        let omitted = lines.len() - max_lines + 1;
        lines.truncate(max_lines - 1);
        lines.push(format!("… {omitted} line(s) omitted"));
    }
    lines.join("\n")
}

/// Output schemas are checked in debug builds, and in release builds when
/// `RETICLE_CHECK_OUTPUT=1` (the test suite sets it).
fn check_outputs() -> bool {
    cfg!(debug_assertions) || std::env::var_os("RETICLE_CHECK_OUTPUT").is_some_and(|v| v == "1")
}

struct RenderChoice {
    json: bool,
    detail: Detail,
}

impl RenderChoice {
    fn from_args(args: &Map<String, Value>) -> Self {
        Self {
            json: args.get("render").and_then(Value::as_str) == Some("json"),
            detail: if args.get("detail").and_then(Value::as_str) == Some("full") {
                Detail::Full
            } else {
                Detail::Concise
            },
        }
    }
}

/// The `CallToolResult` of a failed call: errors are values (seed 002).
pub fn error_result(error: &ToolError) -> Value {
    let mut text = format!("{}: {}", error.code, error.message);
    if error.recoverable {
        text.push_str(" (recoverable");
        if let Some(ms) = error.retry_after_ms {
            text.push_str(&format!(", retry after {ms} ms"));
        }
        text.push(')');
    }
    if let Some(hint) = error.hint() {
        text.push_str(&format!("\nhint: {hint}"));
    }
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": error.to_structured(),
        "isError": true,
    })
}

/// The porcelain line of a job tool's payload that is only the job envelope (the call
/// did not wait): `<job_id> <status> (poll it with poll(job_id))`; `None` once the payload
/// carries `metrics`, the result every job tool here returns.
pub(crate) fn started_job_line(payload: &Value) -> Option<String> {
    payload.get("metrics").is_none().then(|| {
        format!(
            "{} {} (poll it with poll(job_id))",
            payload["job_id"].as_str().unwrap_or("?"),
            payload["status"].as_str().unwrap_or("?")
        )
    })
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_accepts_render_and_detail_and_refuses_unknown_fields() {
        let registry = ToolRegistry::standard();
        let listing = registry.listing(true);
        assert!(listing.len() >= 25, "{} tools", listing.len());
        for entry in listing {
            let schema = &entry["inputSchema"];
            let name = entry["name"].as_str().unwrap();
            assert_eq!(schema["additionalProperties"], false, "{name}");
            assert_eq!(
                schema["properties"]["render"]["enum"],
                json!(["porcelain", "json"]),
                "{name}"
            );
            assert_eq!(
                schema["properties"]["detail"]["enum"],
                json!(["concise", "full"]),
                "{name}"
            );
        }
    }

    #[test]
    fn generic_porcelain_is_summary_first_bounded_and_deterministic() {
        let cells: Vec<Value> = (0..1000)
            .map(|i| json!({"name": format!("CELL_{i:04}"), "bbox": [0, 0, i, i], "note": "x".repeat(500)}))
            .collect();
        let mut payload =
            json!({"schema_version": "1", "session_id": "ses_0123456789ab", "cells": cells});
        for i in 0..100 {
            payload[format!("k{i:03}")] = json!(i);
        }
        let concise = generic_porcelain("list_cells", &payload, Detail::Concise);
        let lines: Vec<&str> = concise.lines().collect();
        assert_eq!(lines[0], "list_cells: 1000 cells");
        assert!(lines.len() <= 24, "{} lines", lines.len());
        assert!(lines.iter().all(|l| l.chars().count() <= 140), "{concise}");
        assert!(lines.last().unwrap().contains("omitted"), "{concise}");
        assert!(!concise.contains("schema_version"));
        let full = generic_porcelain("list_cells", &payload, Detail::Full);
        assert!(full.lines().count() > lines.len() && full.lines().count() <= 200);
        assert_eq!(
            concise,
            generic_porcelain("list_cells", &payload.clone(), Detail::Concise)
        );
        assert_eq!(
            generic_porcelain("close_session", &json!({"closed": true}), Detail::Concise),
            "close_session: ok\nclosed: true"
        );
    }
}
