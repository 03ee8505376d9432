//! The tool registry: each [`Tool`]'s name, schemas and handler, and the call pipeline
//! (normalize → validate input → handler → check output → render).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, ToolError, schemas};
use serde_json::{Map, Value, json};

use super::context::{ToolContext, ToolShared, final_payload};
use super::output::{OutputSchema, ToolOutput, schema_errors};
use super::render::{Detail, PRESENTATION, RenderChoice, error_result, success_result};
use super::{
    PayloadResult, ToolResult, debug, evaluate, health, jobs, layout, normalize, optimize,
    populate, schema_tools, simulate, telemetry, tool_name, violations,
};
use crate::scope::ClientScope;
use crate::tool_name::ToolName;
use reticle_dispatch::ProbeOutcome;
use reticle_dispatch::jobs::JobView;

type HandlerFuture = Pin<Box<dyn Future<Output = ToolResult> + Send>>;
type Handler = Arc<dyn Fn(ToolContext, Map<String, Value>) -> HandlerFuture + Send + Sync>;
type Porcelain = fn(&Value, Detail) -> String;
/// A ProbeRequired tool's probe: after a call was interrupted with its outcome unknown,
/// did its effect happen (and what was its answer), or is running it again safe?
pub type ToolProbe = fn(&ToolShared, &Map<String, Value>) -> ProbeOutcome;

/// Whether a tool may run as an MCP task (2025-11-25 `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task: answered directly (the default; omitted from the listing).
    Forbidden,
    /// A job tool: a task when the client asks (2025-11-25) or the server elects
    /// one (2026-07-28 extension), a direct answer otherwise.
    Optional,
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
    output: Arc<OutputSchema>,
    handler: Handler,
    porcelain: Option<Porcelain>,
    task_support: TaskSupport,
    meta: Option<Value>,
    /// The MCP Apps view of the tool's results (`_meta.ui`), if it has one.
    ui: Option<Value>,
    probe: Option<ToolProbe>,
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
    pub fn new<F, Fut, O>(def: ToolDef<F>) -> Self
    where
        F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let files = schemas::tool_schemas(def.name)
            .unwrap_or_else(|| panic!("no schema files for tool {}", def.name));
        let name = def.name;
        let parse = |text: &str, which: &str| -> Value {
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{name}.{which}.json is not JSON: {e}"))
        };
        let (input, output) = (parse(files.input, "input"), parse(files.output, "output"));
        Self::with_schemas(def, input, output)
    }

    /// Builds a tool whose schemas are given (tools not published in
    /// `protocol/schemas/`: the debug tools).
    ///
    /// # Panics
    /// When a schema is invalid (a build defect).
    pub fn with_schemas<F, Fut, O>(
        def: ToolDef<F>,
        input_schema: Value,
        output_schema: Value,
    ) -> Self
    where
        F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        // Published (and validated) as seed 002 says: optional fields admit `null`.
        let input_schema = super::nullable::publish(&input_schema);
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
            output: Arc::new(OutputSchema::compile(def.name, &output_schema)),
            input_schema,
            output_schema,
            handler: Arc::new(move |ctx, args| {
                let answer = handler(ctx, args);
                Box::pin(async move { answer.await.map(Into::into) })
            }),
            porcelain: def.porcelain,
            task_support: TaskSupport::Forbidden,
            meta: None,
            ui: None,
            probe: None,
        }
    }

    /// The tool with the viewer (`_meta.ui.resourceUri`, MCP Apps, D205).
    #[must_use]
    pub fn with_viewer(mut self) -> Self {
        self.ui = Some(crate::viewer::tool_meta());
        self
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

    /// The tool with `probe`, run when a call of it was interrupted with its outcome
    /// unknown (a ProbeRequired tool; seed 004).
    #[must_use]
    pub fn with_probe(mut self, probe: ToolProbe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// The tool's probe, if it has one.
    pub fn probe(&self) -> Option<ToolProbe> {
        self.probe
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

    /// Its porcelain renderer, if it has a bespoke one.
    pub(crate) fn porcelain(&self) -> Option<Porcelain> {
        self.porcelain
    }

    /// Checks an answer against the tool's output schema (what every call's answer
    /// passes; `reticle bench output-schema` times it).
    ///
    /// # Errors
    /// `INTERNAL_ERROR`, fault class `invariant`, with the schema errors in `details`.
    pub fn check_output(&self, output: ToolOutput) -> ToolResult {
        self.output.check(self.name, output)
    }

    /// Checks a job's finished payload as the job table's store does.
    ///
    /// # Errors
    /// As [`Self::check_output`].
    pub fn check_result(&self, payload: Value) -> PayloadResult {
        self.output.check_result(self.name, payload)
    }

    /// The schema violations of an answer (`{path, msg}`; empty when it passes): what
    /// [`Self::check_output`] decides on, without taking the answer.
    #[must_use]
    pub fn output_violations(&self, output: &ToolOutput) -> Vec<Value> {
        self.output.errors(output)
    }

    /// The schema violations of a job's finished payload (see [`Self::check_result`]).
    #[must_use]
    pub fn result_violations(&self, payload: &Value) -> Vec<Value> {
        self.output.result_errors(payload)
    }

    /// The tool's replay contract.
    pub fn replay(&self) -> ReplayContract {
        self.replay
    }

    /// The `tools/list` entry; `with_task_support` adds 2025-11-25's
    /// `execution.taskSupport` to tools that may run as tasks. `_meta.replay_contract`
    /// publishes the tool's libmcp replay contract (`convergent`, `probe_required`,
    /// `never_replay`: what the host does with a call whose worker died, D85), next to
    /// the tool's own `_meta` (`evaluate`'s capabilities).
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
        let mut meta = json!({"replay_contract": self.replay});
        if let Some(Value::Object(own)) = &self.meta {
            for (key, value) in own {
                meta[key] = value.clone();
            }
        }
        if let Some(ui) = &self.ui {
            meta["ui"] = ui.clone();
        }
        entry["_meta"] = meta;
        entry
    }
}

/// The tools whose results the viewer shows (`_meta.ui.resourceUri`, D205).
pub const VIEWER_TOOLS: [&str; 3] = ["evaluate", "optimize", "render_view"];

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
            violations::tool(),
        ];
        tools.extend(schema_tools::tools());
        tools.extend(layout::tools());
        let tools = tools.into_iter().map(|tool| {
            if VIEWER_TOOLS.contains(&tool.name) {
                tool.with_viewer()
            } else {
                tool
            }
        });
        Self::from_tools(tools.collect())
    }

    /// The public tools, plus the debug tools when `serve` lists them
    /// (`RETICLE_DEBUG_TOOLS`, fault tests only).
    pub fn for_settings(serve: &reticle_config::ServeSettings) -> Self {
        let mut registry = Self::standard();
        if serve.debug_tools {
            for tool in debug::tools() {
                registry.tools.insert(tool.name, tool);
            }
        }
        registry
    }

    /// A registry of the given tools.
    pub fn from_tools(tools: Vec<Tool>) -> Self {
        Self {
            tools: tools.into_iter().map(|t| (t.name, t)).collect(),
        }
    }

    /// Looks a tool up by its registered name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// What a client's spelling of a tool name resolves to ([`crate::tool_name`]).
    pub fn resolve_name(&self, spelling: &str) -> ToolName {
        tool_name::resolve(self.tools.keys().copied(), spelling)
    }

    /// The `tools` array of `tools/list`, sorted by name.
    pub fn listing(&self, with_task_support: bool) -> Vec<Value> {
        self.tools
            .values()
            .map(|t| t.listing(with_task_support))
            .collect()
    }

    /// The `CallToolResult` a finished job's call returns, rendered as the direct
    /// answer would have been (`tasks/result`, a completed 2026 task), for the client
    /// of `scope`.
    pub fn deferred_result(&self, view: &JobView, scope: &ClientScope) -> Value {
        let render = RenderChoice::from_args(&view.presentation);
        let answer = final_payload(view.clone());
        match (answer, self.get(&view.tool)) {
            (Ok(payload), Some(tool)) => match tool.check_output(ToolOutput::Finished(payload)) {
                Ok(output) => success_result(tool, output, &render, scope),
                Err(error) => error_result(&error),
            },
            (Ok(payload), None) => json!({
                "content": [{"type": "text", "text": payload.to_string()}],
                "structuredContent": payload,
                "isError": false,
            }),
            (Err(error), _) => error_result(&error),
        }
    }

    /// Runs one call through normalization, input validation, the handler and the
    /// output check, and renders the `CallToolResult` (without `resultType`).
    pub async fn call(
        &self,
        tool: &Tool,
        mut ctx: ToolContext,
        mut arguments: Map<String, Value>,
    ) -> CallOutcome {
        // Unambiguous respellings first (aliases, "100", file:// and ~), then the schema.
        let home = ctx.state.config().process.home.clone();
        if let Err(error) = normalize::normalize(
            tool.name,
            &tool.input_schema,
            &mut arguments,
            home.as_deref(),
        ) {
            return CallOutcome::failed(error);
        }
        let args_value = Value::Object(arguments);
        let errors = schema_errors(&tool.input_validator, &args_value);
        if !errors.is_empty() {
            let error = ToolError::new(
                ErrorCode::InvalidInput,
                format!("arguments do not match the {} input schema", tool.name),
            )
            .with_details(json!({"errors": errors}));
            return CallOutcome::failed(error);
        }
        let Value::Object(mut arguments) = args_value else {
            unreachable!("constructed as an object above")
        };
        let render = RenderChoice::from_args(&arguments);
        ctx.arguments = arguments.clone();
        ctx.tool = tool.name;
        ctx.output = Some(Arc::clone(&tool.output));
        ctx.probe = tool.probe;
        // Presentation is the registry's business: handlers (and the workers they call)
        // never see `render`/`detail`.
        ctx.presentation = PRESENTATION
            .into_iter()
            .filter_map(|k| arguments.remove(k).map(|v| (k.to_owned(), v)))
            .collect();
        let state = Arc::clone(&ctx.state);
        let scope = Arc::clone(&ctx.scope);
        let answer = (tool.handler)(ctx, arguments)
            .await
            .and_then(|output| tool.check_output(output));
        debug_answer_delay(&state.config().serve, tool.name).await;
        match answer {
            Ok(output) => {
                let started = match &output {
                    ToolOutput::Started(started) => Some(started.job_id.clone()),
                    ToolOutput::Finished(_) => None,
                };
                CallOutcome {
                    result: success_result(tool, output, &render, &scope),
                    started,
                    error: None,
                }
            }
            Err(error) => CallOutcome::failed(error),
        }
    }
}

/// Fault tests only (`RETICLE_DEBUG_TOOLS` and `RETICLE_DEBUG_ANSWER_DELAY=<tool>:<ms>`):
/// holds `tool`'s answer after its effect, so a test can interrupt such a call (a reexec)
/// and see the probe decide.
async fn debug_answer_delay(serve: &reticle_config::ServeSettings, tool: &str) {
    if let (true, Some((name, delay))) = (serve.debug_tools, &serve.debug_answer_delay)
        && name == tool
    {
        tracing::warn!(tool, ?delay, "debug: holding the answer");
        tokio::time::sleep(*delay).await;
    }
}

/// Renders a probe's `payload` as the answer of a call of `tool` with `arguments`: the
/// output check and the rendering a handler's answer gets (for the client of `scope`).
pub fn probe_answer(
    tool: &Tool,
    arguments: &Map<String, Value>,
    payload: Value,
    scope: &ClientScope,
) -> CallOutcome {
    let render = RenderChoice::from_args(arguments);
    match tool.check_output(ToolOutput::Finished(payload)) {
        Ok(output) => CallOutcome {
            result: success_result(tool, output, &render, scope),
            started: None,
            error: None,
        },
        Err(error) => CallOutcome::failed(error),
    }
}

/// A call's answer: the rendered `CallToolResult`, and what the server needs to know
/// beyond it (the job it started, or its error) without reading it back out of JSON.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The `CallToolResult`.
    pub result: Value,
    /// The job the call started and returned at once.
    pub started: Option<String>,
    /// The call's error, when it failed.
    pub error: Option<ToolError>,
}

impl CallOutcome {
    fn failed(error: ToolError) -> Self {
        Self {
            result: error_result(&error),
            started: None,
            error: Some(error),
        }
    }

    /// Whether the call failed (`isError`).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.error.is_some()
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
                json!(["porcelain", "json", null]),
                "{name}"
            );
            assert_eq!(
                schema["properties"]["detail"]["enum"],
                json!(["concise", "full", null]),
                "{name}"
            );
        }
    }
    #[test]
    fn every_listing_publishes_its_replay_contract() {
        let listing = ToolRegistry::standard().listing(true);
        let contract = |name: &str| {
            let entry = listing.iter().find(|e| e["name"] == name).unwrap();
            entry["_meta"]["replay_contract"].clone()
        };
        for entry in &listing {
            let name = entry["name"].as_str().unwrap();
            assert!(
                ["convergent", "probe_required", "never_replay"]
                    .contains(&entry["_meta"]["replay_contract"].as_str().unwrap_or("")),
                "{name}: {}",
                entry["_meta"]
            );
        }
        assert_eq!(contract("evaluate"), "convergent");
        assert_eq!(contract("close_session"), "probe_required");
        assert_eq!(contract("populate_backend"), "never_replay");
        let evaluate = listing.iter().find(|e| e["name"] == "evaluate").unwrap();
        assert!(
            evaluate["_meta"]["capabilities"].is_object(),
            "the tool's own _meta is kept next to the contract"
        );
        for entry in &listing {
            let shown = VIEWER_TOOLS.contains(&entry["name"].as_str().unwrap());
            assert_eq!(
                entry["_meta"]["ui"]["resourceUri"].as_str(),
                shown.then_some(crate::viewer::URI),
                "{}",
                entry["name"]
            );
        }
    }
}
