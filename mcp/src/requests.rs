//! Requests in flight: each request runs in its own task, registered under its id so
//! `notifications/cancelled` can abort it and a reexec can hand it over; and the dispatch
//! of one request to its method, with its telemetry record and journal entry.

use std::future::Future;
use std::sync::Arc;

use libmcp::ReplayContract;
use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};
use tokio::task::{AbortHandle, JoinSet};

use super::server::Server;
use reticle_tools::state::FrameCounters;
use reticle_tools::{ToolName, WaitedJob};
use reticle_transport::era::{RequestMeta, RpcError, request_meta};
use reticle_transport::jsonrpc::{self, INVALID_REQUEST, METHOD_NOT_FOUND};

/// A request being processed: enough to answer it after a reexec.
pub(super) struct InFlightRequest {
    pub(super) id: Value,
    pub(super) method: String,
    pub(super) params: Map<String, Value>,
    /// The job the request waits on, once it does (a waiting `tools/call`).
    pub(super) waited_job: WaitedJob,
}

/// A request in flight: the request and the handle that aborts its task.
pub(super) struct InFlight {
    pub(super) abort: AbortHandle,
    pub(super) request: InFlightRequest,
}

impl Server {
    /// Spawns a request read from stdin.
    pub(super) async fn spawn_request(
        &self,
        id: Value,
        method: String,
        params: Map<String, Value>,
        tasks: &mut JoinSet<()>,
    ) {
        self.spawn_request_as(id, method, params, tasks, false)
            .await;
    }

    /// Spawns a request; `resumed` for one a previous image counted already (its
    /// telemetry record continues instead of starting again).
    pub(super) async fn spawn_request_as(
        &self,
        id: Value,
        method: String,
        params: Map<String, Value>,
        tasks: &mut JoinSet<()>,
        resumed: bool,
    ) {
        let params = self.with_registered_tool_name(&method, params);
        if lock(&self.in_flight).contains_key(&id.to_string()) {
            FrameCounters::bump(&self.shared.state.frames.invalid_requests);
            let msg = "Invalid Request: a request with this id is already in flight";
            self.shared
                .out
                .send(&jsonrpc::error(&id, INVALID_REQUEST, msg, None))
                .await;
            return;
        }
        let waited_job = WaitedJob::default();
        let request = InFlightRequest {
            id: id.clone(),
            method: method.clone(),
            params: params.clone(),
            waited_job: waited_job.clone(),
        };
        let server = self.clone();
        self.register(tasks, request, async move {
            // The work runs in an inner task so that a panic becomes an internal
            // error response instead of a silently missing one; aborting the
            // outer task (a cancel) aborts the inner one through the guard.
            let request_id = id.clone();
            let inner = AbortOnDrop(tokio::spawn(async move {
                server
                    .handle_request(&request_id, &method, params, waited_job, resumed)
                    .await
            }));
            match inner.join().await {
                Ok(response) => response,
                Err(e) => {
                    tracing::error!(error = %e, request_id = %id, "request handler panicked");
                    jsonrpc::error(&id, jsonrpc::INTERNAL_ERROR, "Internal error", None)
                }
            }
        });
    }

    /// Runs `respond` as the task of `request`, registered in flight under its id, and
    /// sends its response unless the request was cancelled or handed over meanwhile.
    pub(super) fn register(
        &self,
        tasks: &mut JoinSet<()>,
        request: InFlightRequest,
        respond: impl Future<Output = Value> + Send + 'static,
    ) {
        let key = request.id.to_string();
        let task_key = key.clone();
        let server = self.clone();
        // Hold the map lock across spawn so the task cannot remove its entry before it exists.
        let mut in_flight = lock(&self.in_flight);
        let abort = tasks.spawn(async move {
            let response = respond.await;
            // Remove first: once the response is queued, a late cancel has nothing to abort.
            // An entry already gone means the request was cancelled or handed to the next
            // image at a reexec: either way this task must not answer.
            if lock(&server.in_flight).remove(&task_key).is_some() {
                server.shared.out.send(&response).await;
            }
        });
        in_flight.insert(key, InFlight { abort, request });
    }

    /// A `tools/call` that names a tool by a respelling (`listLayers`, `list-layers`: seed
    /// 004) carries the registered name from here on, so the in-flight record, telemetry,
    /// the journal and a handover all see one name. Unknown and ambiguous spellings stay
    /// as sent, for `tools/call` to refuse.
    fn with_registered_tool_name(
        &self,
        method: &str,
        mut params: Map<String, Value>,
    ) -> Map<String, Value> {
        if method == "tools/call"
            && let Some(Value::String(spelling)) = params.get("name")
            && let ToolName::Canonical(name) = self.tools.resolve_name(spelling)
            && spelling != name
        {
            params.insert("name".into(), Value::String(name.to_owned()));
        }
        params
    }

    /// Whether the request is a call of a job tool (its work runs as a job).
    fn starts_a_job(&self, method: &str, params: &Map<String, Value>) -> bool {
        method == "tools/call"
            && params
                .get("name")
                .and_then(Value::as_str)
                .and_then(|name| self.tools.get(name))
                .is_some_and(|tool| tool.is_job())
    }

    /// The replay contract of a request: a tool's own, Convergent for protocol methods
    /// (reads, or idempotent like `tasks/cancel`).
    pub(super) fn contract_of(&self, method: &str, params: &Map<String, Value>) -> ReplayContract {
        match (method, params.get("name").and_then(Value::as_str)) {
            ("tools/call", Some(name)) => self
                .tools
                .get(name)
                .map_or(ReplayContract::Convergent, |t| t.replay()),
            _ => ReplayContract::Convergent,
        }
    }

    /// Answers one request: the telemetry record, the journal entry, the method.
    async fn handle_request(
        &self,
        id: &Value,
        method: &str,
        params: Map<String, Value>,
        waited_job: WaitedJob,
        resumed: bool,
    ) -> Value {
        let meta = match request_meta(&params) {
            Ok(meta) => Arc::new(RequestMeta {
                request_id: Some(id.to_string()),
                ..meta
            }),
            Err(e) => return jsonrpc::error(id, e.code, &e.message, e.data),
        };
        let ledger_key = ledger_key_of(method, &params);
        let state = Arc::clone(&self.shared.state);
        let record = if resumed {
            state.resume(&ledger_key, id)
        } else {
            state.begin(&ledger_key, id)
        };
        // Every public request is journaled with its replay contract. A request answered
        // in the host is its own execution, journaled here; a job tool's work is
        // journaled by the dispatcher, unit by unit, while its job runs.
        let journal = self
            .journal
            .open(&ledger_key, self.contract_of(method, &params));
        let in_host = !self.starts_a_job(method, &params);
        if in_host {
            journal.dispatched();
        }
        let legacy_tasks = !meta.is_modern() && self.legacy_tasks();
        let outcome = match method {
            "initialize" => self.initialize(&params),
            "ping" => Ok(json!({})),
            "server/discover" => Ok(self.discover()),
            "tools/list" => self.tools_list(&params, &meta),
            "tools/call" => {
                self.tools_call(params, Arc::clone(&meta), journal.clone(), waited_job)
                    .await
            }
            "logging/setLevel" if !meta.is_modern() => self.set_level(&params),
            "resources/list" => self.resources_list(&params, &meta),
            "resources/templates/list" => self.resource_templates(&params, &meta),
            "resources/read" => self.resources_read(&params, &meta),
            "prompts/list" => self.prompts_list(&params, &meta),
            "prompts/get" => self.prompts_get(&params),
            "completion/complete" => self.complete(&params),
            "tasks/get" if legacy_tasks || meta.is_modern() => self.tasks_get(&params, &meta),
            "tasks/result" if legacy_tasks => self.tasks_result(&params).await,
            "tasks/list" if legacy_tasks => self.tasks_list(&params),
            "tasks/cancel" if legacy_tasks || meta.is_modern() => self.tasks_cancel(&params, &meta),
            "tasks/update" if meta.is_modern() => Ok(json!({})),
            _ => Err(RpcError {
                code: METHOD_NOT_FOUND,
                message: format!("Method not found: {method}"),
                data: None,
            }),
        };
        if in_host {
            journal.completed();
        }
        match outcome {
            Ok(mut result) => {
                if result.get("isError") == Some(&Value::Bool(true)) {
                    let code = result["structuredContent"]["error"]["code"]
                        .as_str()
                        .unwrap_or("?");
                    record.error(code);
                } else {
                    record.success();
                }
                if meta.is_modern() && result.get("resultType").is_none() {
                    result["resultType"] = json!("complete");
                }
                jsonrpc::result(id, result)
            }
            Err(e) => {
                record.error(&e.message);
                jsonrpc::error(id, e.code, &e.message, e.data)
            }
        }
    }
}

/// The telemetry key of a request: `tools/call:<tool>` for tool calls, else the method.
pub(super) fn ledger_key_of(method: &str, params: &Map<String, Value>) -> String {
    match (method, params.get("name").and_then(Value::as_str)) {
        ("tools/call", Some(name)) => format!("tools/call:{name}"),
        _ => method.to_owned(),
    }
}

/// Aborts the task when dropped (the outer request task was cancelled).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
