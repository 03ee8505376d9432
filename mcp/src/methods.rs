//! The protocol methods a server answers itself (`initialize`, `server/discover`,
//! `tools/list`, `logging/setLevel`) and `tools/call`.

use std::sync::Arc;
use std::time::Duration;

use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};

use super::server::Server;
use super::tasks;
use reticle_journal::JournalHandle;
use reticle_tools::{TaskRequest, TaskSupport, ToolName, WaitedJob};
use reticle_transport::era::{
    self, LogLevel, META_SERVER_INFO, RequestMeta, RpcError, TASKS_EXTENSION, negotiate_legacy,
};
use reticle_transport::jsonrpc::{self, METHOD_NOT_FOUND};

/// How long the lists we serve stay fresh for a caching client (MCP caching).
const LIST_TTL_MS: u64 = 300_000;

const INSTRUCTIONS: &str = "reticle verifies photomasks: it simulates how a layout prints \
(Hopkins/SOCS lithography) and checks the printed shapes against rules. Start with `health`. \
Errors are values: read structuredContent.error.code and .recoverable before retrying.";

impl Server {
    pub(super) fn initialize(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("initialize needs a string protocolVersion"))?;
        let version = negotiate_legacy(requested);
        {
            let mut session = lock(&self.session);
            if session.version.is_some() {
                tracing::warn!("initialize received twice; renegotiating");
            }
            session.version = Some(version);
            session.client_roots = params
                .get("capabilities")
                .and_then(|c| c.get("roots"))
                .is_some_and(Value::is_object);
        }
        tracing::info!(requested, negotiated = version, client = ?params.get("clientInfo"), "initialize");
        let mut capabilities = Self::capabilities();
        if version == "2025-11-25" {
            capabilities["tasks"] = tasks::legacy_capability();
        }
        Ok(json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": Self::server_info(),
            "instructions": INSTRUCTIONS,
        }))
    }

    pub(super) fn discover(&self) -> Value {
        let mut capabilities = Self::capabilities();
        capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        json!({
            "supportedVersions": era::supported_versions(),
            "capabilities": capabilities,
            "_meta": {META_SERVER_INFO: Self::server_info()},
            "instructions": INSTRUCTIONS,
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "public",
        })
    }

    pub(super) fn tools_list(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        if params.contains_key("cursor") {
            return Err(RpcError::invalid_params(
                "invalid cursor: tools/list has a single page",
            ));
        }
        let with_task_support = !meta.is_modern() && self.legacy_tasks();
        let mut result = json!({"tools": self.tools.listing(with_task_support)});
        if meta.is_modern() {
            result["ttlMs"] = json!(LIST_TTL_MS);
            result["cacheScope"] = json!("public");
        }
        Ok(result)
    }

    pub(super) fn set_level(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .ok_or_else(|| RpcError::invalid_params("level must be one of debug, info, notice, warning, error, critical, alert, emergency"))?;
        lock(&self.session).log_level = Some(level);
        Ok(json!({}))
    }

    /// `tools/call`: the tool's call pipeline with a context built for this request; a
    /// call that runs as a task answers its `CreateTaskResult`.
    pub(super) async fn tools_call(
        &self,
        mut params: Map<String, Value>,
        meta: Arc<RequestMeta>,
        journal: JournalHandle,
        waited_job: WaitedJob,
    ) -> Result<Value, RpcError> {
        let name = match params.remove("name") {
            Some(Value::String(name)) => name,
            _ => return Err(RpcError::invalid_params("tools/call needs a string name")),
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments,
            Some(_) => return Err(RpcError::invalid_params("arguments must be an object")),
        };
        let Some(tool) = self.tools.get(&name) else {
            if let ToolName::Ambiguous(candidates) = self.tools.resolve_name(&name) {
                return Err(RpcError {
                    code: jsonrpc::INVALID_PARAMS,
                    message: format!(
                        "Ambiguous tool name: {name} could be any of {}",
                        candidates.join(", ")
                    ),
                    data: Some(json!({ "candidates": candidates })),
                });
            }
            return Err(RpcError {
                code: jsonrpc::INVALID_PARAMS,
                message: format!("Unknown tool: {name}"),
                data: Some(
                    json!({"known_tools": self.tools.listing(false).iter().map(|t| t["name"].clone()).collect::<Vec<_>>()}),
                ),
            });
        };
        let task = self.task_request(&params, &meta, tool.task_support(), &arguments)?;
        let started = std::time::Instant::now();
        let ctx = self
            .shared
            .context(Arc::clone(&meta), journal)
            .with_task(task.clone())
            .with_waited_job(waited_job);
        let outcome = self.tools.call(tool, ctx, arguments).await;
        if let Some(task) = task {
            return Ok(self.task_created(&name, &task, outcome, &meta).await);
        }
        let failed = outcome.is_error();
        let level = if failed {
            LogLevel::Warning
        } else {
            LogLevel::Debug
        };
        self.log_to_client(
            &meta,
            level,
            json!({"tool": name, "ok": !failed, "duration_ms": started.elapsed().as_millis() as u64}),
        )
        .await;
        Ok(outcome.result)
    }

    /// Whether this `tools/call` runs as a task: 2025-11-25 when the client sent
    /// `params.task` (a tool that forbids tasks → -32601, the spec's answer); 2026-07-28
    /// when the request carries the tasks extension and the call does not ask to wait
    /// (`wait: true` or a `progressToken` keep the inline answer). A modern
    /// `params.task` is ignored, as the extension says.
    pub(super) fn task_request(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
        support: TaskSupport,
        arguments: &Map<String, Value>,
    ) -> Result<Option<TaskRequest>, RpcError> {
        if meta.is_modern() {
            let waits =
                arguments.get("wait") == Some(&Value::Bool(true)) || meta.progress_token.is_some();
            let elect = meta.tasks_extension && support == TaskSupport::Optional && !waits;
            return Ok(elect.then(TaskRequest::default));
        }
        let Some(task) = params.get("task") else {
            return Ok(None);
        };
        if !self.legacy_tasks() {
            // No tasks capability in this version: the augmentation is ignored.
            return Ok(None);
        }
        let Some(task) = task.as_object() else {
            return Err(RpcError::invalid_params("task must be an object"));
        };
        let ttl = match task.get("ttl") {
            None | Some(Value::Null) => None,
            Some(ttl) => Some(Duration::from_millis(ttl.as_u64().ok_or_else(|| {
                RpcError::invalid_params("task.ttl must be a non-negative integer (ms)")
            })?)),
        };
        if support == TaskSupport::Forbidden {
            return Err(RpcError {
                code: METHOD_NOT_FOUND,
                message: "Method not found: this tool does not support task-augmented calls".into(),
                data: Some(json!({"taskSupport": "forbidden"})),
            });
        }
        Ok(Some(TaskRequest { ttl }))
    }
}
