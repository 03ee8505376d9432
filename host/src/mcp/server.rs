//! The MCP server loop: frames in, dispatch, responses out.
//!
//! Requests run concurrently, each in its own task, so a long tool call never
//! blocks `ping`, `notifications/cancelled` or another call. A cancelled
//! request's task is aborted and sends nothing. Notifications are never
//! answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use libmcp::ReplayContract;
use reticle_protocol::ToolError;
use serde_json::{Map, Value, json};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::era::{
    self, LogLevel, META_SERVER_INFO, RequestMeta, RpcError, negotiate_legacy, request_meta,
};
use super::tasks::{self, LIST_PAGE, META_MODEL_IMMEDIATE_RESPONSE, TASKS_EXTENSION};
use crate::jobs::{JobOptions, JobRecord, JobStatus, JobView, Jobs, RestoredJob};
use crate::journal::{Journal, JournalHandle};
use crate::reexec::{PendingRequest, ServerSnapshot, SessionSnapshot, TaskWatch};
use crate::state::{FrameCounters, HostState};
use crate::tools::{TaskRequest, TaskSupport, ToolContext, ToolRegistry};
use crate::transport::frame::{Frame, MAX_FRAME_BYTES};
use crate::transport::jsonrpc::{self, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR};
use crate::transport::writer::Outbound;
use crate::workers::WorkerPool;

/// How long the lists we serve stay fresh for a caching client (MCP caching).
const LIST_TTL_MS: u64 = 300_000;

const INSTRUCTIONS: &str = "reticle verifies photomasks: it simulates how a layout prints \
(Hopkins/SOCS lithography) and checks the printed shapes against rules. Start with `health`. \
Errors are values: read structuredContent.error.code and .recoverable before retrying.";

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// stdin reached end of file (the client closed it).
    Eof,
    /// SIGTERM or SIGINT.
    Signal(&'static str),
    /// An operator asked for a self-reexec (`reticle ctl reexec`).
    Reexec,
}

/// An operator's request to the server loop (from the control socket).
#[derive(Debug)]
pub enum LoopCommand {
    /// Hand the session over to a new process image of `bin`.
    Reexec {
        /// The host binary to exec.
        bin: std::path::PathBuf,
    },
}

/// What the loop hands back when it ends.
#[derive(Debug)]
pub struct RunEnd {
    /// Why it ended.
    pub reason: StopReason,
    /// For a reexec: the session as the next image must continue it.
    pub snapshot: Option<ServerSnapshot>,
    /// For a reexec: frames read but not dispatched, and what the stdin pump had
    /// read but not framed.
    pub input: Option<(Vec<Frame>, crate::transport::stdin::PumpState)>,
    /// For a reexec: the binary to exec.
    pub reexec_bin: Option<std::path::PathBuf>,
}

/// A request being processed: enough to answer it after a reexec.
struct InFlight {
    abort: AbortHandle,
    id: Value,
    method: String,
    params: Map<String, Value>,
    /// The job the request started (a waiting `tools/call` waits on it).
    job: Arc<OnceLock<String>>,
}

/// Longest wait, at a reexec, for requests that are not waiting on a job to finish.
const REEXEC_DRAIN: Duration = Duration::from_secs(5);

/// Timing of the two ways out.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownPolicy {
    /// After a signal, how long in-flight requests may take to finish.
    pub drain: Duration,
    /// After stdin EOF, how long in-flight requests may take before they are cancelled.
    pub eof_grace: Duration,
}

impl Default for ShutdownPolicy {
    fn default() -> Self {
        Self {
            drain: Duration::from_secs(30),
            eof_grace: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, Default)]
struct LegacySession {
    version: Option<&'static str>,
    initialized: bool,
    log_level: Option<LogLevel>,
    /// The client declared the `roots` capability in `initialize`.
    client_roots: bool,
    /// Requests we sent to the client.
    requests_sent: u64,
}

/// Prefix of the ids of our `roots/list` requests.
const ROOTS_REQUEST_PREFIX: &str = "reticle-roots-";

/// One MCP server bound to one client stream.
#[derive(Clone)]
pub struct Server {
    out: Outbound,
    state: Arc<HostState>,
    tools: Arc<ToolRegistry>,
    session: Arc<Mutex<LegacySession>>,
    in_flight: Arc<Mutex<HashMap<String, InFlight>>>,
    jobs: Arc<Jobs>,
    journal: Arc<Journal>,
    workers: Arc<WorkerPool>,
    /// 2025-11-25 tasks being followed (job id → the call's progress token), so a
    /// reexec can follow them on in the next image.
    task_watches: Arc<Mutex<HashMap<String, Option<Value>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    /// A server writing to `out`.
    pub fn new(
        out: Outbound,
        state: Arc<HostState>,
        tools: ToolRegistry,
        job_ttl: Duration,
        workers: Arc<WorkerPool>,
    ) -> Self {
        let events = Arc::clone(&state.events);
        Self {
            out,
            state,
            tools: Arc::new(tools),
            session: Arc::default(),
            in_flight: Arc::default(),
            jobs: Jobs::with_events(job_ttl, events),
            journal: Journal::new(),
            workers,
            task_watches: Arc::default(),
        }
    }

    /// The job table (the control socket reads it).
    pub fn jobs(&self) -> &Arc<Jobs> {
        &self.jobs
    }

    /// The host state.
    pub fn state(&self) -> &Arc<HostState> {
        &self.state
    }

    /// The worker pool.
    pub fn workers(&self) -> &Arc<WorkerPool> {
        &self.workers
    }

    /// The replay journal.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Serves frames until stdin ends, a signal arrives or an operator asks for a
    /// reexec, then drains per `policy` (or hands the session over, for a reexec).
    /// `pending` are requests a previous process image left unanswered.
    pub async fn run(
        self,
        mut frames: mpsc::Receiver<Frame>,
        policy: ShutdownPolicy,
        mut commands: mpsc::Receiver<LoopCommand>,
        pump: Option<crate::transport::stdin::StdinPump>,
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
        tracing::info!(
            ?reason,
            in_flight = tasks.len(),
            "stopping; draining in-flight requests"
        );
        let drained = tokio::time::timeout(grace, async {
            while let Some(joined) = tasks.join_next().await {
                log_join(joined);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                remaining = tasks.len(),
                "in-flight requests cancelled at shutdown"
            );
            tasks.shutdown().await;
        }
        Ok(RunEnd {
            reason,
            snapshot: None,
            input: None,
            reexec_bin: None,
        })
    }

    /// The reexec handover: stop reading stdin (keeping what was read), let requests
    /// that do not wait on a job finish (up to [`REEXEC_DRAIN`]), snapshot the session,
    /// then stop every request task, job and worker without answering or marking
    /// anything: the next image answers the pending requests and re-runs the jobs.
    async fn hand_over(
        &self,
        mut frames: mpsc::Receiver<Frame>,
        pump: Option<crate::transport::stdin::StdinPump>,
        mut tasks: JoinSet<()>,
    ) -> RunEnd {
        use crate::transport::stdin::{PumpEnd, PumpState};
        let pump_state = match pump {
            Some(pump) => match tokio::task::spawn_blocking(move || pump.stop()).await {
                Ok(PumpEnd::Stopped(state)) => state,
                Ok(PumpEnd::Eof) | Err(_) => PumpState::default(),
            },
            None => PumpState::default(),
        };
        // The pump has stopped: what is in the channel is everything read and framed.
        let mut carried = Vec::new();
        while let Ok(frame) = frames.try_recv() {
            carried.push(frame);
        }
        let deadline = Instant::now() + REEXEC_DRAIN;
        loop {
            while let Some(joined) = tasks.try_join_next() {
                log_join(joined);
            }
            let busy = lock(&self.in_flight)
                .values()
                .filter(|r| r.job.get().is_none())
                .count();
            if busy == 0 || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Taking the entries out is what hands the requests over: a task that finishes
        // from now on finds its entry gone and does not answer (the next image does),
        // and an aborted request leaves its telemetry record open for the next image.
        self.state.begin_handover();
        let entries: Vec<InFlight> = lock(&self.in_flight).drain().map(|(_, r)| r).collect();
        // Detach the jobs before aborting their waiters: an aborted wait drops on another
        // thread whenever the runtime gets to it, and a drop before the detach would
        // cancel the job the next image is to re-attach the call to.
        self.jobs.detach_all();
        for entry in &entries {
            entry.abort.abort();
        }
        let snapshot = self.snapshot(&entries);
        tasks.shutdown().await;
        self.workers.shutdown().await;
        tracing::info!(
            carried_frames = carried.len(),
            unread_bytes = pump_state.unread.len(),
            pending = snapshot.pending.len(),
            jobs = snapshot.jobs.len(),
            "session handed over for reexec"
        );
        RunEnd {
            reason: StopReason::Reexec,
            snapshot: Some(snapshot),
            input: Some((carried, pump_state)),
            reexec_bin: None,
        }
    }

    /// The session as the next process image needs it, with `pending` as the requests to
    /// answer.
    fn snapshot(&self, pending: &[InFlight]) -> ServerSnapshot {
        let session = {
            let s = lock(&self.session);
            SessionSnapshot {
                version: s.version.map(str::to_owned),
                initialized: s.initialized,
                log_level: s.log_level.map(|l| l.as_str().to_owned()),
                client_roots: s.client_roots,
                requests_sent: s.requests_sent,
            }
        };
        let pending = pending
            .iter()
            .map(|r| match r.job.get() {
                Some(job_id) => PendingRequest::AwaitJob {
                    id: r.id.clone(),
                    job_id: job_id.clone(),
                    params: r.params.clone(),
                },
                None => {
                    let contract = match (
                        r.method.as_str(),
                        r.params.get("name").and_then(Value::as_str),
                    ) {
                        ("tools/call", Some(name)) => self
                            .tools
                            .get(name)
                            .map_or(ReplayContract::Convergent, |t| t.replay()),
                        _ => ReplayContract::Convergent,
                    };
                    if contract == ReplayContract::Convergent {
                        PendingRequest::Redispatch {
                            id: r.id.clone(),
                            method: r.method.clone(),
                            params: r.params.clone(),
                        }
                    } else {
                        PendingRequest::Fail {
                            id: r.id.clone(),
                            method: r.method.clone(),
                            params: r.params.clone(),
                        }
                    }
                }
            })
            .collect();
        let mut task_watches: Vec<TaskWatch> = lock(&self.task_watches)
            .iter()
            .map(|(job_id, progress_token)| TaskWatch {
                job_id: job_id.clone(),
                progress_token: progress_token.clone(),
            })
            .collect();
        task_watches.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        ServerSnapshot {
            session,
            jobs: self.jobs.export(),
            job_stats: self.jobs.stats(),
            pending,
            task_watches,
        }
    }

    /// Continues a session from a reexec snapshot: the negotiated session, the finished
    /// jobs; unfinished jobs are re-run (Convergent tools; others fail with an
    /// ambiguous-outcome error, like a worker death would).
    pub async fn restore(&self, snapshot: &ServerSnapshot) {
        {
            let mut s = lock(&self.session);
            s.version = snapshot.session.version.as_deref().and_then(|v| {
                era::LEGACY_VERSIONS
                    .iter()
                    .find(|known| **known == v)
                    .copied()
            });
            s.initialized = snapshot.session.initialized;
            s.log_level = snapshot
                .session
                .log_level
                .as_deref()
                .and_then(LogLevel::parse);
            s.client_roots = snapshot.session.client_roots;
            s.requests_sent = snapshot.session.requests_sent;
        }
        self.jobs.restore_stats(&snapshot.job_stats);
        for record in &snapshot.jobs {
            if record.status.is_terminal() {
                self.jobs.import_finished(record.clone());
            } else {
                self.rerun_job(record).await;
            }
        }
        // The client still expects status notifications for the tasks it was following;
        // each was unfinished ("working") when the old image last told it.
        for watch in &snapshot.task_watches {
            self.follow_task(&watch.job_id, watch.progress_token.clone(), "working");
        }
    }

    /// Re-creates an unfinished job from its recipe under its old id.
    async fn rerun_job(&self, record: &JobRecord) {
        let restore = RestoredJob {
            job_id: record.job_id.clone(),
            attempts: record.attempts,
            created_unix_ms: record.created_unix_ms,
            age_ms: record.age_ms,
        };
        let recipe = record.recipe.as_ref();
        let tool = recipe
            .and_then(|r| r["tool"].as_str())
            .and_then(|name| self.tools.get(name));
        let arguments = recipe.and_then(|r| r["arguments"].as_object()).cloned();
        let (Some(tool), Some(arguments)) = (tool, arguments) else {
            self.fail_restored_job(
                record,
                restore,
                "the job's recipe did not survive the reexec",
            );
            return;
        };
        if tool.replay() != ReplayContract::Convergent {
            self.fail_restored_job(
                record,
                restore,
                "the job may have taken effect before the reexec and its tool is not replayable",
            );
            return;
        }
        let ctx = ToolContext {
            state: Arc::clone(&self.state),
            meta: Arc::new(RequestMeta::default()),
            jobs: Arc::clone(&self.jobs),
            out: self.out.clone(),
            workers: Arc::clone(&self.workers),
            journal: self
                .journal
                .open(&format!("tools/call:{}", tool.name()), tool.replay()),
            task: None,
            presentation: Map::new(),
            arguments: Map::new(),
            job_cell: Arc::default(),
            restore: Some(restore.clone()),
        };
        let result = self.tools.call(tool, ctx, arguments).await;
        if result["isError"] == Value::Bool(true) && self.jobs.poll(&record.job_id).is_err() {
            // The tool refused before starting the job (a file that vanished, say):
            // keep the id answering, with that error.
            let error = serde_json::from_value(result["structuredContent"]["error"].clone())
                .unwrap_or_else(|_| {
                    ToolError::new(reticle_protocol::ErrorCode::InternalError, "restore failed")
                });
            let options = JobOptions {
                restore: Some(restore),
                presentation: record.presentation.clone(),
                ..JobOptions::default()
            };
            self.jobs
                .submit_with(&record.tool, options, |_| async move { Err(error) });
        }
    }

    fn fail_restored_job(&self, record: &JobRecord, restore: RestoredJob, why: &str) {
        let error = ToolError::new(
            reticle_protocol::ErrorCode::WorkerFault,
            format!(
                "job {} was interrupted by a host reexec: {why}",
                record.job_id
            ),
        )
        .with_fault(libmcp::FaultClass::AmbiguousOutcome, None)
        .recoverable(false)
        .with_hint("check whether the job's effect happened before calling again");
        let options = JobOptions {
            restore: Some(restore),
            presentation: record.presentation.clone(),
            ..JobOptions::default()
        };
        self.jobs
            .submit_with(&record.tool, options, |_| async move { Err(error) });
    }

    /// Answers a request a previous image left pending.
    async fn resume_request(&self, request: PendingRequest, tasks: &mut JoinSet<()>) {
        match request {
            PendingRequest::Redispatch { id, method, params } => {
                tracing::info!(request_id = %id, method, "re-dispatching a request after reexec");
                self.spawn_request_as(id, method, params, tasks, true).await;
            }
            PendingRequest::Fail { id, method, params } => {
                let message = format!(
                    "{method} was interrupted by a host reexec and is not replayable; its outcome is unknown"
                );
                self.state
                    .resume(&ledger_key_of(&method, &params), &id)
                    .error("ambiguous_outcome");
                let response = if method == "tools/call" {
                    let error = ToolError::new(reticle_protocol::ErrorCode::WorkerFault, message)
                        .with_fault(libmcp::FaultClass::AmbiguousOutcome, None)
                        .recoverable(false)
                        .with_hint("check whether the call took effect before calling again");
                    let mut result = crate::tools::error_result(&error);
                    if request_meta(&params).is_ok_and(|m| m.is_modern()) {
                        result["resultType"] = json!("complete");
                    }
                    jsonrpc::result(&id, result)
                } else {
                    jsonrpc::error(&id, jsonrpc::INTERNAL_ERROR, &message, None)
                };
                self.out.send(&response).await;
            }
            PendingRequest::AwaitJob { id, job_id, params } => {
                let server = self.clone();
                let key = id.to_string();
                let job_cell = Arc::new(OnceLock::new());
                let _ = job_cell.set(job_id.clone());
                let task_key = key.clone();
                let entry_id = id.clone();
                let entry_params = params.clone();
                let mut in_flight = lock(&self.in_flight);
                let handle = tasks.spawn(async move {
                    let response = server.await_job(&id, &job_id, &params).await;
                    if lock(&server.in_flight).remove(&task_key).is_some() {
                        server.out.send(&response).await;
                    }
                });
                in_flight.insert(
                    key,
                    // The same shape as the original call's entry: a second reexec
                    // hands it over again.
                    InFlight {
                        abort: handle,
                        id: entry_id,
                        method: "tools/call".to_owned(),
                        params: entry_params,
                        job: job_cell,
                    },
                );
            }
        }
    }

    /// Waits for a restored job on behalf of the call that started it, with its
    /// progress notifications, and returns that call's response.
    async fn await_job(&self, id: &Value, job_id: &str, params: &Map<String, Value>) -> Value {
        let meta = request_meta(params).unwrap_or_default();
        let record = self.state.resume(&ledger_key_of("tools/call", params), id);
        let Ok(rx) = self.jobs.subscribe(job_id) else {
            record.error("JOB_NOT_FOUND");
            let error = ToolError::new(
                reticle_protocol::ErrorCode::JobNotFound,
                format!("job {job_id} did not survive the reexec"),
            );
            return jsonrpc::result(id, crate::tools::error_result(&error));
        };
        let view = crate::tools::wait_reporting_progress(
            &self.jobs,
            rx,
            &self.out,
            meta.progress_token.clone(),
        )
        .await;
        let mut result = self.tools.deferred_result(&view);
        if view.status == JobStatus::Completed {
            record.success();
        } else {
            record.error(view.error.as_ref().map_or("?", |e| e.code.as_str()));
        }
        if meta.is_modern() {
            result["resultType"] = json!("complete");
        }
        jsonrpc::result(id, result)
    }

    async fn on_frame(&self, frame: Frame, tasks: &mut JoinSet<()>) {
        let counters = &self.state.frames;
        FrameCounters::bump(&counters.lines_read);
        let line = match frame {
            Frame::TooLarge { bytes } => {
                FrameCounters::bump(&counters.oversize_rejected);
                tracing::warn!(bytes, "rejected a line over the size limit");
                self.state.events.record(
                    "frame.rejected",
                    json!({"reason": "payload_too_large", "bytes": bytes}),
                );
                self.out
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
                self.state.events.record(
                    "frame.rejected",
                    json!({"reason": if code == PARSE_ERROR { "parse_error" } else { "invalid_request" },
                           "code": code, "id": id}),
                );
                self.out
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

    /// Asks a legacy client that declared `roots` for its roots (MCP `roots/list`).
    async fn request_roots(&self) {
        let id = {
            let mut session = lock(&self.session);
            if !session.client_roots {
                return;
            }
            session.requests_sent += 1;
            format!("{ROOTS_REQUEST_PREFIX}{}", session.requests_sent)
        };
        self.out
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"}))
            .await;
    }

    fn on_response(&self, id: &Value, result: Option<Value>) {
        let ours = id
            .as_str()
            .is_some_and(|id| id.starts_with(ROOTS_REQUEST_PREFIX));
        if !ours {
            tracing::debug!(%id, "ignored a response to a request we did not send");
            return;
        }
        let Some(roots) = result
            .as_ref()
            .and_then(|r| r.get("roots"))
            .and_then(Value::as_array)
        else {
            tracing::warn!(%id, "roots/list failed or returned no roots; keeping the configured roots");
            return;
        };
        let uris: Vec<String> = roots
            .iter()
            .filter_map(|r| r.get("uri").and_then(Value::as_str).map(str::to_owned))
            .collect();
        self.state.roots.set_client_roots(&uris);
    }

    fn on_notification(&self, method: &str, params: &Map<String, Value>) {
        match method {
            "notifications/initialized" => lock(&self.session).initialized = true,
            "notifications/cancelled" => {
                let Some(id) = params.get("requestId") else {
                    tracing::debug!("cancel without requestId");
                    return;
                };
                let handle = lock(&self.in_flight).remove(&id.to_string());
                match handle {
                    Some(handle) => {
                        handle.abort.abort();
                        tracing::info!(request_id = %id, reason = ?params.get("reason"), "request cancelled by client");
                    }
                    None => tracing::debug!(request_id = %id, "cancel for a request not in flight"),
                }
            }
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    async fn spawn_request(
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
    async fn spawn_request_as(
        &self,
        id: Value,
        method: String,
        params: Map<String, Value>,
        tasks: &mut JoinSet<()>,
        resumed: bool,
    ) {
        let key = id.to_string();
        if lock(&self.in_flight).contains_key(&key) {
            FrameCounters::bump(&self.state.frames.invalid_requests);
            let msg = "Invalid Request: a request with this id is already in flight";
            self.out
                .send(&jsonrpc::error(&id, INVALID_REQUEST, msg, None))
                .await;
            return;
        }
        let server = self.clone();
        let task_key = key.clone();
        let job = Arc::new(OnceLock::new());
        let entry_id = id.clone();
        let entry_method = method.clone();
        let entry_params = params.clone();
        let job_cell = Arc::clone(&job);
        // Hold the map lock across spawn so the task cannot remove its entry before it exists.
        let mut in_flight = lock(&self.in_flight);
        let handle = tasks.spawn(async move {
            // The work runs in an inner task so that a panic becomes an internal
            // error response instead of a silently missing one; aborting the
            // outer task (a cancel) aborts the inner one through the guard.
            let worker = server.clone();
            let request_id = id.clone();
            let inner = AbortOnDrop(tokio::spawn(async move {
                worker
                    .handle_request(&request_id, &method, params, job_cell, resumed)
                    .await
            }));
            let response = match inner.join().await {
                Ok(response) => response,
                Err(e) => {
                    tracing::error!(error = %e, request_id = %id, "request handler panicked");
                    jsonrpc::error(&id, jsonrpc::INTERNAL_ERROR, "Internal error", None)
                }
            };
            // Remove first: once the response is queued, a late cancel has nothing to abort.
            // An entry already gone means the request was cancelled or handed to the next
            // image at a reexec: either way this task must not answer.
            if lock(&server.in_flight).remove(&task_key).is_some() {
                server.out.send(&response).await;
            }
        });
        in_flight.insert(
            key,
            InFlight {
                abort: handle,
                id: entry_id,
                method: entry_method,
                params: entry_params,
                job,
            },
        );
    }

    async fn handle_request(
        &self,
        id: &Value,
        method: &str,
        params: Map<String, Value>,
        job_cell: Arc<OnceLock<String>>,
        resumed: bool,
    ) -> Value {
        let meta = match request_meta(&params) {
            Ok(meta) => Arc::new(meta),
            Err(e) => return jsonrpc::error(id, e.code, &e.message, e.data),
        };
        let ledger_key = ledger_key_of(method, &params);
        let state = Arc::clone(&self.state);
        let record = if resumed {
            state.resume(&ledger_key, id)
        } else {
            state.begin(&ledger_key, id)
        };
        // Every public request is journaled with its replay contract: a tool's own,
        // Convergent for protocol methods (reads, or idempotent like tasks/cancel).
        let contract = match (method, params.get("name").and_then(Value::as_str)) {
            ("tools/call", Some(name)) => self
                .tools
                .get(name)
                .map_or(ReplayContract::Convergent, |t| t.replay()),
            _ => ReplayContract::Convergent,
        };
        let journal = self.journal.open(&ledger_key, contract);
        if method != "tools/call" {
            journal.dispatched();
        }
        let legacy_tasks = !meta.is_modern() && self.legacy_tasks();
        let outcome = match method {
            "initialize" => self.initialize(&params),
            "ping" => Ok(json!({})),
            "server/discover" => Ok(self.discover()),
            "tools/list" => self.tools_list(&params, &meta),
            "tools/call" => {
                self.tools_call(params, Arc::clone(&meta), journal.clone(), job_cell)
                    .await
            }
            "logging/setLevel" if !meta.is_modern() => self.set_level(&params),
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
        if method != "tools/call" {
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

    fn server_info() -> Value {
        json!({"name": "reticle", "title": "reticle: photomask verification", "version": env!("CARGO_PKG_VERSION")})
    }

    fn capabilities() -> Value {
        json!({"tools": {"listChanged": false}, "logging": {}})
    }

    /// Whether the legacy session speaks 2025-11-25 tasks (2025-06-18 has none; a
    /// session that never initialized is served as the newest version, D5).
    fn legacy_tasks(&self) -> bool {
        lock(&self.session)
            .version
            .unwrap_or(era::LEGACY_VERSIONS[0])
            == "2025-11-25"
    }

    fn initialize(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
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

    fn discover(&self) -> Value {
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

    fn tools_list(
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

    fn set_level(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .ok_or_else(|| RpcError::invalid_params("level must be one of debug, info, notice, warning, error, critical, alert, emergency"))?;
        lock(&self.session).log_level = Some(level);
        Ok(json!({}))
    }

    async fn tools_call(
        &self,
        mut params: Map<String, Value>,
        meta: Arc<RequestMeta>,
        journal: JournalHandle,
        job_cell: Arc<OnceLock<String>>,
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
        let ctx = ToolContext {
            state: Arc::clone(&self.state),
            meta: Arc::clone(&meta),
            jobs: Arc::clone(&self.jobs),
            out: self.out.clone(),
            workers: Arc::clone(&self.workers),
            journal: journal.clone(),
            task: task.clone(),
            presentation: Map::new(),
            arguments: Map::new(),
            job_cell,
            restore: None,
        };
        if !tool.is_job() {
            journal.dispatched();
        }
        let result = self.tools.call(tool, ctx, arguments).await;
        if !tool.is_job() {
            journal.completed();
        }
        if let Some(task) = task {
            return Ok(self.task_created(&name, &task, result, &meta).await);
        }
        let failed = result["isError"] == Value::Bool(true);
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
        Ok(result)
    }

    /// Whether this `tools/call` runs as a task: 2025-11-25 when the client sent
    /// `params.task` (a tool that forbids tasks → -32601, the spec's answer); 2026-07-28
    /// when the request carries the tasks extension and the call does not ask to wait
    /// (`wait: true` or a `progressToken` keep the inline answer). A modern
    /// `params.task` is ignored, as the extension says.
    fn task_request(
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
        Ok(Some(TaskRequest {
            ttl,
            ..TaskRequest::default()
        }))
    }

    /// The `CreateTaskResult` of a call that ran as a task. A call that failed before
    /// its job started (bad arguments, a path outside the roots) still gets a task,
    /// already failed, so the client finds the error where it looks for results.
    async fn task_created(
        &self,
        tool: &str,
        task: &TaskRequest,
        result: Value,
        meta: &RequestMeta,
    ) -> Value {
        let job_id = match task.job_id.get() {
            Some(job_id) => job_id.clone(),
            None => {
                let error: ToolError =
                    serde_json::from_value(result["structuredContent"]["error"].clone())
                        .unwrap_or_else(|_| {
                            ToolError::new(
                                reticle_protocol::ErrorCode::InternalError,
                                "the tool neither started a job nor failed",
                            )
                        });
                let options = JobOptions {
                    ttl: task.ttl,
                    ..JobOptions::default()
                };
                let rx = self
                    .jobs
                    .submit_with(tool, options, |_| async move { Err(error) });
                rx.borrow().job_id.clone()
            }
        };
        let view = match self.jobs.poll(&job_id) {
            Ok(view) => view,
            Err(e) => {
                tracing::error!(job_id, error = %e, "a task's job vanished at creation");
                return crate::tools::error_result(&e);
            }
        };
        if meta.is_modern() {
            let mut created = tasks::modern_task(&view);
            created["resultType"] = json!("task");
            return created;
        }
        self.follow_task(
            &job_id,
            meta.progress_token.clone(),
            tasks::legacy_status(view.status),
        );
        let mut meta_out = tasks::related_task_meta(&job_id);
        meta_out[META_MODEL_IMMEDIATE_RESPONSE] = json!(format!(
            "{tool} is running as task {job_id}; its result will be available from tasks/result"
        ));
        json!({"task": tasks::legacy_task(&view), "_meta": meta_out})
    }

    /// Follows a 2025-11-25 task until it ends: `notifications/progress` for the
    /// call's `progressToken` (valid for the task's lifetime) and
    /// `notifications/tasks/status` on every status change after `last_told`, the
    /// status the client last heard (a change before this task runs is sent too).
    fn follow_task(&self, job_id: &str, progress_token: Option<Value>, last_told: &'static str) {
        let Ok(mut rx) = self.jobs.subscribe(job_id) else {
            return;
        };
        let out = self.out.clone();
        let watches = Arc::clone(&self.task_watches);
        lock(&watches).insert(job_id.to_owned(), progress_token.clone());
        let job_id = job_id.to_owned();
        tokio::spawn(async move {
            let current = rx.borrow_and_update().clone();
            let mut last_status = tasks::legacy_status(current.status);
            if last_status != last_told {
                out.send(
                    &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                    "params": tasks::legacy_task(&current)}),
                )
                .await;
            }
            if current.status.is_terminal() {
                lock(&watches).remove(&job_id);
                return;
            }
            let mut last_progress = f64::NEG_INFINITY;
            while rx.changed().await.is_ok() {
                let view = rx.borrow_and_update().clone();
                if let Some(token) = &progress_token
                    && view.progress.done > last_progress
                {
                    last_progress = view.progress.done;
                    let mut params = crate::tools::progress_params(token, &view);
                    params["_meta"] = tasks::related_task_meta(&view.job_id);
                    out.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
                        .await;
                }
                let status = tasks::legacy_status(view.status);
                if status != last_status {
                    last_status = status;
                    out.send(
                        &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                        "params": tasks::legacy_task(&view)}),
                    )
                    .await;
                }
                if view.status.is_terminal() {
                    break;
                }
            }
            lock(&watches).remove(&job_id);
        });
    }

    fn task_view(&self, params: &Map<String, Value>) -> Result<JobView, RpcError> {
        let task_id = task_id(params)?;
        self.jobs
            .poll(task_id)
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))
    }

    fn tasks_get(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        let view = self.task_view(params)?;
        if meta.is_modern() {
            let result = view
                .status
                .is_terminal()
                .then(|| self.tools.deferred_result(&view));
            return Ok(tasks::modern_detailed(&view, result));
        }
        Ok(tasks::legacy_task(&view))
    }

    /// `tasks/result`: waits for the task to end (without cancelling it if this
    /// request is cancelled) and returns what the call would have returned.
    async fn tasks_result(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let task_id = task_id(params)?.to_owned();
        let mut rx = self
            .jobs
            .subscribe(&task_id)
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        loop {
            if rx.borrow_and_update().status.is_terminal() {
                break;
            }
            if rx.changed().await.is_err() {
                return Err(RpcError::invalid_params(
                    "Failed to retrieve task: Task has expired",
                ));
            }
        }
        let view = self
            .jobs
            .poll(&task_id)
            .unwrap_or_else(|_| rx.borrow().clone());
        let mut result = self.tools.deferred_result(&view);
        result["_meta"] = tasks::related_task_meta(&task_id);
        Ok(result)
    }

    fn tasks_list(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.as_str()),
            Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
        };
        let (views, next) = self
            .jobs
            .list_page(cursor, LIST_PAGE)
            .map_err(|_| RpcError::invalid_params("Invalid cursor"))?;
        let mut result = json!({"tasks": views.iter().map(tasks::legacy_task).collect::<Vec<_>>()});
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(result)
    }

    /// `tasks/cancel`: SIGKILLs the job's worker like the `cancel` tool. 2025-11-25
    /// answers the cancelled task (a terminal one is -32602); the 2026 extension
    /// acknowledges any id.
    fn tasks_cancel(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        if meta.is_modern() {
            let task_id = task_id(params)?;
            if let Ok(view) = self.jobs.poll(task_id)
                && !view.status.is_terminal()
            {
                let _ = self.jobs.cancel(task_id, "tasks/cancel");
            }
            return Ok(json!({}));
        }
        let view = self.task_view(params)?;
        if view.status.is_terminal() {
            return Err(RpcError::invalid_params(format!(
                "Cannot cancel task: already in terminal status '{}'",
                tasks::legacy_status(view.status)
            )));
        }
        let view = self
            .jobs
            .cancel(&view.job_id, "tasks/cancel")
            .map_err(|_| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        Ok(tasks::legacy_task(&view))
    }

    /// Sends `notifications/message` when the request (modern) or the session
    /// (legacy `logging/setLevel`) opted in at or below `level`.
    async fn log_to_client(&self, meta: &RequestMeta, level: LogLevel, data: Value) {
        let threshold = if meta.is_modern() {
            meta.log_level
        } else {
            lock(&self.session).log_level
        };
        if threshold.is_some_and(|t| level >= t) {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": level.as_str(), "logger": "reticle", "data": data}});
            self.out.send(&note).await;
        }
    }
}

/// The telemetry key of a request: `tools/call:<tool>` for tool calls, else the method.
fn ledger_key_of(method: &str, params: &Map<String, Value>) -> String {
    match (method, params.get("name").and_then(Value::as_str)) {
        ("tools/call", Some(name)) => format!("tools/call:{name}"),
        _ => method.to_owned(),
    }
}

/// `params.taskId`, the source of truth for the task (a related-task `_meta` is ignored).
fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("taskId must be a string"))
}

fn log_join(joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined
        && e.is_panic()
    {
        tracing::error!(error = %e, "a request task panicked");
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
