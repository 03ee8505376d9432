//! The MCP server loop: frames in, dispatch, responses out.
//!
//! Requests run concurrently, each in its own task, so a long tool call never
//! blocks `ping`, `notifications/cancelled` or another call. A cancelled
//! request's task is aborted and sends nothing. Notifications are never
//! answered.
//!
//! The rest of the server is split by concern: requests in flight and the dispatch of
//! methods ([`super::requests`]), the protocol methods and `tools/call`
//! ([`super::methods`]), the tasks API of both eras ([`super::task_methods`]), and the
//! reexec handover ([`super::handover`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};

use super::requests::InFlight;
use crate::reexec::ServerSnapshot;
use reticle_dispatch::jobs::Jobs;
use reticle_dispatch::workers::WorkerPool;
use reticle_dispatch::{Dispatcher, Executor, LocalPool, SlurmExecutor, SlurmSettings};
use reticle_journal::Journal;
use reticle_tools::scope::ClientScope;
use reticle_tools::state::HostState;
use reticle_tools::{ToolRegistry, ToolShared};
use reticle_transport::era::{self, LogLevel, RequestMeta};
use reticle_transport::frame::Frame;
use reticle_transport::writer::Outbound;

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
    pub input: Option<(Vec<Frame>, reticle_transport::stdin::PumpState)>,
    /// For a reexec: the binary to exec.
    pub reexec_bin: Option<std::path::PathBuf>,
}

/// Why a client of a many-client host is gone, and how long its requests may still take.
#[derive(Debug, Clone)]
pub struct ClientEnd {
    /// The reason, as jobs cancelled for it and the event log say.
    pub why: String,
    /// How long in-flight requests may take before they are cancelled.
    pub grace: Duration,
}

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

/// What a legacy-era (`initialize`) session negotiated.
#[derive(Debug, Default)]
pub(super) struct LegacySession {
    pub(super) version: Option<&'static str>,
    pub(super) initialized: bool,
    pub(super) log_level: Option<LogLevel>,
    /// The client declared the `roots` capability in `initialize`.
    pub(super) client_roots: bool,
    /// Requests we sent to the client.
    pub(super) requests_sent: u64,
}

/// How long the stop path waits for the workers to exit and be reaped (the G2 exit bound
/// is 1 s after EOF; idle workers exit in milliseconds).
pub(crate) const WORKER_STOP_BOUND: Duration = Duration::from_millis(400);

/// Prefix of the ids of our `roots/list` requests.
const ROOTS_REQUEST_PREFIX: &str = "reticle-roots-";

/// One MCP server bound to one client stream.
#[derive(Clone)]
pub struct Server {
    /// What every tool call shares (state, jobs, protocol stream, pool, dispatcher).
    pub(super) shared: ToolShared,
    pub(super) tools: Arc<ToolRegistry>,
    pub(super) session: Arc<Mutex<LegacySession>>,
    /// Requests being processed, by id ([`super::requests`]).
    pub(super) in_flight: Arc<Mutex<HashMap<String, InFlight>>>,
    pub(super) journal: Arc<Journal>,
    /// 2025-11-25 tasks being followed (job id → the call's progress token), so a
    /// reexec can follow them on in the next image.
    pub(super) task_watches: Arc<Mutex<HashMap<String, Option<Value>>>>,
}

impl Server {
    /// A server writing to `out`, for the client that sees `scope`, with the dispatcher
    /// the configuration names (the stdio host: one client, one server).
    pub fn new(
        out: Outbound,
        state: Arc<HostState>,
        scope: Arc<ClientScope>,
        tools: ToolRegistry,
        job_ttl: Duration,
        workers: Arc<WorkerPool>,
    ) -> Self {
        let dispatcher = configured_dispatcher(&workers, &state);
        Self::with_dispatcher(
            out,
            state,
            scope,
            Arc::new(tools),
            job_ttl,
            workers,
            dispatcher,
        )
    }

    /// A server for one client of a host that serves many (Streamable HTTP): its own
    /// stream, scope, job table and journal over the host's state, tools, workers and
    /// dispatcher.
    pub fn with_dispatcher(
        out: Outbound,
        state: Arc<HostState>,
        scope: Arc<ClientScope>,
        tools: Arc<ToolRegistry>,
        job_ttl: Duration,
        workers: Arc<WorkerPool>,
        dispatcher: Arc<Dispatcher>,
    ) -> Self {
        let events = Arc::clone(&state.events);
        let journal = Journal::new();
        let replays = Arc::clone(&state);
        journal.on_replay(move |method| replays.record_replay(method));
        Self {
            shared: ToolShared {
                jobs: Jobs::with_events(
                    job_ttl,
                    state.config().limits.max_active_jobs,
                    events,
                    state.handover().clone(),
                ),
                state,
                scope,
                out,
                workers,
                dispatcher,
            },
            tools,
            session: Arc::default(),
            in_flight: Arc::default(),
            journal,
            task_watches: Arc::default(),
        }
    }

    /// The counter of messages written on this server's stream (an HTTP router bumps it).
    pub fn written_counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.shared.out.written_counter()
    }

    /// What this server's client sees (roots, layout sessions, violation cache).
    pub fn scope(&self) -> &Arc<ClientScope> {
        &self.shared.scope
    }

    /// The job table (the control socket reads it).
    pub fn jobs(&self) -> &Arc<Jobs> {
        &self.shared.jobs
    }

    /// The host state.
    pub fn state(&self) -> &Arc<HostState> {
        &self.shared.state
    }

    /// The worker pool.
    pub fn workers(&self) -> &Arc<WorkerPool> {
        &self.shared.workers
    }

    /// The dispatcher every op goes through.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.shared.dispatcher
    }

    /// The replay journal.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Asks a legacy client that declared `roots` for its roots (MCP `roots/list`).
    pub(super) async fn request_roots(&self) {
        let id = {
            let mut session = lock(&self.session);
            if !session.client_roots {
                return;
            }
            session.requests_sent += 1;
            format!("{ROOTS_REQUEST_PREFIX}{}", session.requests_sent)
        };
        self.shared
            .out
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"}))
            .await;
    }

    pub(super) fn on_response(&self, id: &Value, result: Option<Value>) {
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
        self.shared.scope.roots.set_client_roots(&uris);
    }

    pub(super) fn on_notification(&self, method: &str, params: &Map<String, Value>) {
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

    pub(super) fn server_info() -> Value {
        json!({"name": "reticle", "title": "reticle: photomask verification", "version": env!("CARGO_PKG_VERSION")})
    }

    pub(super) fn capabilities() -> Value {
        json!({
            "tools": {"listChanged": false},
            "logging": {},
            "resources": {"listChanged": false},
            "prompts": {"listChanged": false},
            "completions": {},
        })
    }

    /// Whether the legacy session speaks 2025-11-25 tasks (2025-06-18 has none; a
    /// session that never initialized is served as the newest version, D5).
    pub(super) fn legacy_tasks(&self) -> bool {
        lock(&self.session)
            .version
            .unwrap_or(era::LEGACY_VERSIONS[0])
            == "2025-11-25"
    }

    /// Sends `notifications/message` when the request (modern) or the session
    /// (legacy `logging/setLevel`) opted in at or below `level`.
    pub(super) async fn log_to_client(&self, meta: &RequestMeta, level: LogLevel, data: Value) {
        let threshold = if meta.is_modern() {
            meta.log_level
        } else {
            lock(&self.session).log_level
        };
        if threshold.is_some_and(|t| level >= t) {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": level.as_str(), "logger": "reticle", "data": data}});
            self.shared
                .out
                .for_request(meta.request_id.as_deref())
                .send(&note)
                .await;
        }
    }
}

/// The dispatcher the configuration names: the local pool, or Slurm in front of it.
pub fn configured_dispatcher(workers: &Arc<WorkerPool>, state: &HostState) -> Arc<Dispatcher> {
    let local: Arc<dyn Executor> = Arc::new(LocalPool::new(Arc::clone(workers)));
    let config = state.config();
    let limits = config.limits.job.clone();
    match config.executor.kind {
        reticle_config::ExecutorKind::Local => Dispatcher::new(local, limits),
        // Cluster arrays outlive this image at a reexec: the next one follows them (D63).
        reticle_config::ExecutorKind::Slurm => Dispatcher::new(
            Arc::new(SlurmExecutor::new(
                local,
                SlurmSettings::from_config(config),
                Some(Arc::clone(&state.events)),
                state.handover().clone(),
            )),
            limits,
        ),
    }
}

pub(super) fn log_join(joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined
        && e.is_panic()
    {
        tracing::error!(error = %e, "a request task panicked");
    }
}
