//! The server loop and the requests in flight: frames in (`Server::run` for stdio,
//! `Server::serve_client` for an HTTP client, both through `on_frame`); each request in
//! its own task, registered under its id so `notifications/cancelled` can abort it and a
//! reexec can hand it over; the dispatch of one request to its method, with its telemetry
//! record and journal entry; and `tools/call`. A request enters this one file from the
//! frame channel until it reaches the tool registry (issue 27 item 6).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use libmcp::ReplayContract;
use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::server::{
    ClientEnd, LoopCommand, RunEnd, Server, ShutdownPolicy, StopReason, WORKER_STOP_BOUND, log_join,
};
use crate::reexec::PendingRequest;
use reticle_journal::JournalHandle;
use reticle_tools::state::FrameCounters;
use reticle_tools::{TaskRequest, TaskSupport, ToolName, WaitedJob};
use reticle_transport::era::{LogLevel, RequestMeta, RpcError, request_meta};
use reticle_transport::frame::{Frame, MAX_FRAME_BYTES};
use reticle_transport::jsonrpc::{self, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR};

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
    /// Serves frames until stdin ends, a signal arrives or an operator asks for a
    /// reexec, then drains per `policy` (or hands the session over, for a reexec).
    /// `pending` are requests a previous process image left unanswered.
    pub async fn run(
        self,
        mut frames: mpsc::Receiver<Frame>,
        policy: ShutdownPolicy,
        mut commands: mpsc::Receiver<LoopCommand>,
        pump: Option<reticle_transport::stdin::StdinPump>,
        pending: Vec<PendingRequest>,
    ) -> std::io::Result<RunEnd> {
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut tasks = JoinSet::new();
        for request in pending {
            self.resume_request(request, &mut tasks).await;
        }
        let mut reexec_bin = None;
        let reason = loop {
            tokio::select! {
                frame = frames.recv() => match frame {
                    None => break StopReason::Eof,
                    Some(frame) => self.on_frame(frame, &mut tasks).await,
                },
                _ = sigterm.recv() => break StopReason::Signal("SIGTERM"),
                _ = sigint.recv() => break StopReason::Signal("SIGINT"),
                Some(LoopCommand::Reexec { bin }) = commands.recv() => {
                    reexec_bin = Some(bin);
                    break StopReason::Reexec;
                }
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => log_join(joined),
            }
        };
        if reason == StopReason::Reexec {
            let mut end = self.hand_over(frames, pump, tasks).await;
            end.reexec_bin = reexec_bin;
            return Ok(end);
        }
        let grace = match reason {
            StopReason::Eof => policy.eof_grace,
            StopReason::Signal(_) | StopReason::Reexec => policy.drain,
        };
        // What ends the jobs still unfinished after the grace or drain (D70). G2: after
        // EOF the client is gone, so nobody can poll or wait for a job any more; after a
        // signal the host is going. Either way a job is cancelled (its task aborted, its
        // worker killed), not left to die with the process, so its terminal state is
        // `cancelled` in the job table, the event log and the telemetry.
        let why = match reason {
            StopReason::Signal(signal) => format!("the host is stopping ({signal})"),
            StopReason::Eof | StopReason::Reexec => {
                "the client disconnected (stdin closed)".to_owned()
            }
        };
        tracing::info!(
            ?reason,
            in_flight = tasks.len(),
            "stopping; draining in-flight requests"
        );
        self.finish(&mut tasks, grace, &why).await;
        // Stop the workers and reap them before the process exits: a SIGKILL sent only
        // from the supervisor's drop can leave a worker still dying after the host is
        // gone (seen under load). Bounded, so a stuck worker cannot hold the exit.
        if tokio::time::timeout(WORKER_STOP_BOUND, self.shared.workers.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("workers not reaped within the exit bound; killed on drop");
        }
        Ok(RunEnd {
            reason,
            snapshot: None,
            input: None,
            reexec_bin: None,
        })
    }

    /// Ends this client's work: in-flight requests get `grace` to finish, then they and
    /// every unfinished job are cancelled with `why`, and `session.end` is recorded.
    async fn finish(&self, tasks: &mut JoinSet<()>, grace: Duration, why: &str) {
        let drained = tokio::time::timeout(grace, async {
            while let Some(joined) = tasks.join_next().await {
                log_join(joined);
            }
        })
        .await;
        let mut cancelled = Vec::new();
        if drained.is_err() {
            tracing::warn!(
                remaining = tasks.len(),
                "in-flight requests cancelled at shutdown"
            );
            // Jobs first, with the reason: a waiting request then answers `cancelled`.
            cancelled = self.shared.jobs.cancel_all(why);
            tasks.shutdown().await;
        }
        // Polled jobs (no request waits on them) are still running.
        cancelled.extend(self.shared.jobs.cancel_all(why));
        cancelled.sort();
        if !cancelled.is_empty() {
            tracing::info!(jobs = cancelled.len(), reason = %why, "cancelled unfinished jobs");
        }
        self.shared.state.events.record(
            "session.end",
            json!({"reason": why, "cancelled_jobs": cancelled, "jobs": self.shared.jobs.stats()}),
        );
    }

    /// Serves one client of a host that has many (Streamable HTTP): the messages in
    /// `frames` until `end` says why the client is gone (or `frames` closes), then
    /// [`Self::finish`]es its work. The workers are the host's and keep running.
    pub async fn serve_client(
        self,
        mut frames: mpsc::Receiver<Frame>,
        end: tokio::sync::oneshot::Receiver<ClientEnd>,
    ) {
        let mut tasks = JoinSet::new();
        let mut end = std::pin::pin!(end);
        let why = loop {
            tokio::select! {
                frame = frames.recv() => match frame {
                    Some(frame) => self.on_frame(frame, &mut tasks).await,
                    None => break ClientEnd { why: "the client's session ended".into(), grace: Duration::ZERO },
                },
                ended = &mut end => break ended.unwrap_or(ClientEnd {
                    why: "the client's session ended".into(),
                    grace: Duration::ZERO,
                }),
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => log_join(joined),
            }
        };
        self.finish(&mut tasks, why.grace, &why.why).await;
        // Nobody can reach this client's layout sessions any more: their artifacts go now,
        // not at a TTL sweep that no call of theirs will trigger.
        let closed = self.shared.scope.sessions.close_all();
        if closed > 0 {
            tracing::info!(
                sessions = closed,
                "closed the layout sessions of an ended client"
            );
        }
    }

    async fn on_frame(&self, frame: Frame, tasks: &mut JoinSet<()>) {
        let counters = &self.shared.state.frames;
        FrameCounters::bump(&counters.lines_read);
        let line = match frame {
            Frame::TooLarge { bytes } => {
                FrameCounters::bump(&counters.oversize_rejected);
                tracing::warn!(bytes, "rejected a line over the size limit");
                self.shared.state.events.record(
                    "frame.rejected",
                    json!({"reason": "payload_too_large", "bytes": bytes}),
                );
                self.shared
                    .out
                    .send(&jsonrpc::payload_too_large(bytes, MAX_FRAME_BYTES))
                    .await;
                return;
            }
            Frame::Line(line) => line,
        };
        match jsonrpc::classify(&line) {
            Incoming::Invalid { id, code, message } => {
                let counter = if code == PARSE_ERROR {
                    &counters.parse_errors
                } else {
                    &counters.invalid_requests
                };
                FrameCounters::bump(counter);
                tracing::warn!(code, %message, "invalid message");
                self.shared.state.events.record(
                    "frame.rejected",
                    json!({"reason": if code == PARSE_ERROR { "parse_error" } else { "invalid_request" },
                           "code": code, "id": id}),
                );
                self.shared
                    .out
                    .send(&jsonrpc::error(&id, code, &message, None))
                    .await;
            }
            Incoming::Response { id, result } => self.on_response(&id, result),
            Incoming::Notification { method, params } => {
                self.on_notification(&method, &params);
                if matches!(
                    method.as_str(),
                    "notifications/initialized" | "notifications/roots/list_changed"
                ) {
                    self.request_roots().await;
                }
            }
            Incoming::Request { id, method, params } => {
                self.spawn_request(id, method, params, tasks).await;
            }
        }
    }
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

impl Server {
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
