//! `reticle serve --http ADDR`: the Streamable HTTP transport (issue 21), for a reticle
//! that several agents share (the box with the GPU).
//!
//! One host process: one state, worker pool and dispatcher; many clients, each with an
//! MCP [`crate::server::Server`] of its own (its jobs, layout sessions, violation
//! cache and roots: [`reticle_tools::scope::ClientScope`]). The modules, by concern:
//! - [`auth`]: bearer tokens, RFC 9728 metadata, `WWW-Authenticate`, Origin/Host checks;
//! - [`routes`]: POST/GET/DELETE on `/mcp` and the metadata document (axum);
//! - [`hub`]: the clients, their limit, idle expiry, and their end at shutdown;
//! - [`client`]: one client: its server, and where each message it sends goes;
//! - [`stream`]: one buffered, resumable SSE stream.

pub mod auth;
pub mod client;
pub mod hub;
pub mod routes;
pub mod stream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use crate::control::ControlSocket;
use crate::logging;
use crate::readiness::ReadyFile;
use crate::serve::ServeOptions;
use crate::server::{Server, StopReason, WORKER_STOP_BOUND, configured_dispatcher};
use reticle_assets::SchemaCatalog;
use reticle_dispatch::events::{EventLog, EventLogConfig};
use reticle_dispatch::workers::ReleaseChoice;
use reticle_tools::ToolRegistry;
use reticle_tools::confine::AllowedRoots;
use reticle_tools::scope::ClientScope;
use reticle_tools::state::HostState;
use reticle_transport::writer::Outbound;

pub use hub::HttpLimits;

/// Options of `reticle serve --http`.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (loopback by default; port 0 picks a free one).
    pub addr: SocketAddr,
    /// The tokens file (JSON).
    pub tokens_file: Option<PathBuf>,
    /// Tokens from the environment (`name=token,…`).
    pub tokens_env: Option<String>,
    /// Serve without tokens (loopback only).
    pub anonymous: bool,
    /// The endpoint's public URL (behind a TLS proxy), default `http://ADDR/mcp`.
    pub public_url: Option<String>,
    /// Origins allowed besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Authorization servers named in the metadata.
    pub authorization_servers: Vec<String>,
    /// The limits.
    pub limits: HttpLimits,
}

/// How often idle clients are looked for (more often when the idle limit is short).
const IDLE_SWEEP: Duration = Duration::from_secs(5);

/// Runs the HTTP server until SIGTERM or SIGINT, then ends every client (their requests
/// get the drain time) and stops the workers.
///
/// # Errors
/// A configuration that cannot serve (no token, `--anonymous` off loopback, a bad
/// tokens file) or an address that cannot be bound.
pub fn serve_http(
    options: ServeOptions,
    http: HttpOptions,
    config: Arc<reticle_config::Config>,
) -> anyhow::Result<StopReason> {
    let logs = logging::init(
        &options.log_filter,
        options.log_dir.as_deref(),
        "reticle.jsonl",
    );
    // The settings `main` read: every part gets them from the host state.
    config.log_warnings();
    if http.anonymous && !http.addr.ip().is_loopback() {
        anyhow::bail!(
            "--anonymous serves without authorization and is refused on {}: bind a loopback address or configure tokens",
            http.addr
        );
    }
    let tokens = auth::Tokens::load(
        http.tokens_file.as_deref(),
        http.tokens_env.as_deref(),
        http.anonymous,
    )?;
    let schemas = SchemaCatalog::load_with_examples(
        options.schemas_dir.as_deref(),
        options.examples_dir.as_deref(),
    );
    let events = Arc::new(match &options.log_dir {
        Some(dir) => EventLog::open(EventLogConfig::configured(dir.clone(), &config.serve), 0),
        None => EventLog::disabled(),
    });
    let state = Arc::new(HostState::new(
        config,
        logs.file.clone(),
        Arc::clone(&events),
        schemas,
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("reticle-host")
        .build()?;
    let host_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("reticle"));
    let result = runtime.block_on(run(options, http, tokens, Arc::clone(&state), host_exe));
    runtime.shutdown_timeout(Duration::from_millis(200));
    events.sync();
    result
}

async fn run(
    options: ServeOptions,
    http: HttpOptions,
    tokens: auth::Tokens,
    state: Arc<HostState>,
    host_exe: PathBuf,
) -> anyhow::Result<StopReason> {
    let workers = state.worker_pool(ReleaseChoice::default());
    let dispatcher = configured_dispatcher(&workers, &state);
    let tools = Arc::new(ToolRegistry::for_settings(&state.config().serve));
    let listener = tokio::net::TcpListener::bind(http.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", http.addr))?;
    let bound = listener.local_addr()?;
    let resource = auth::Resource::new(
        bound,
        http.public_url.as_deref(),
        http.authorization_servers.clone(),
    );
    let origins = auth::OriginPolicy::new(bound, &http.allowed_origins, &resource.url);
    // The operator's view (`reticle ctl`): a server of its own over the shared parts.
    // Its stream goes nowhere (no MCP client talks to it).
    let (operator_out, mut operator_stream) = Outbound::channel();
    tokio::spawn(async move { while operator_stream.recv().await.is_some() {} });
    let operator = Server::with_dispatcher(
        operator_out,
        Arc::clone(&state),
        Arc::new(ClientScope::new(
            AllowedRoots::configured(state.config()),
            state.config(),
        )),
        Arc::clone(&tools),
        options.job_ttl,
        Arc::clone(&workers),
        Arc::clone(&dispatcher),
    );
    let (commands_tx, commands_rx) = tokio::sync::mpsc::channel(1);
    // A reexec cannot carry TCP connections to the next image: the request is refused
    // (the command channel has no reader).
    drop(commands_rx);
    let control = match ControlSocket::bind(state.config().process.xdg_runtime_dir.as_deref()) {
        Ok(socket) => Some(socket.serve(operator.clone(), commands_tx, host_exe.clone())),
        Err(e) => {
            tracing::warn!(error = %e, "no control socket; `reticle ctl` cannot reach this host");
            None
        }
    };
    let endpoint = Arc::new(routes::Endpoint {
        hub: hub::Hub::new(
            hub::HostParts {
                state: Arc::clone(&state),
                workers: Arc::clone(&workers),
                dispatcher: Arc::clone(&dispatcher),
                tools,
                job_ttl: options.job_ttl,
            },
            http.limits,
        ),
        tokens,
        resource,
        origins,
    });
    state.events.record(
        "host.start",
        json!({"version": env!("CARGO_PKG_VERSION"), "exe": host_exe, "transport": "http",
               "url": endpoint.resource.url, "anonymous": endpoint.tokens.is_anonymous(),
               "tokens": endpoint.tokens.len(),
               "control_socket": control.as_ref().map(|c| c.path().to_path_buf())}),
    );
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "listening beyond loopback: put a TLS-terminating proxy in front (docs/HTTP.md)");
    }
    tracing::info!(pid = std::process::id(), url = %endpoint.resource.url, anonymous = endpoint.tokens.is_anonymous(),
        "mcp:ready mode=http");
    // The bound address, not the public URL: a supervisor on this machine reads the
    // port from here (port 0 picks one).
    let bound_url = format!("http://{bound}{}", auth::MCP_PATH);
    let ready = match ReadyFile::create_with(&options.ready_file, Some(&bound_url)) {
        Ok(ready) => Some(ready),
        Err(e) => {
            tracing::error!(path = %options.ready_file.display(), error = %e, "cannot write the ready file");
            None
        }
    };
    if options.start_workers {
        workers.start_in_background();
    }
    let sweeper = {
        let endpoint = Arc::clone(&endpoint);
        tokio::spawn(async move {
            let every = IDLE_SWEEP
                .min(endpoint.hub.limits.idle / 2)
                .max(Duration::from_millis(100));
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                endpoint.hub.expire_idle();
            }
        })
    };
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<&'static str>();
    tokio::spawn(async move {
        let which = tokio::select! {
            _ = sigterm.recv() => "SIGTERM",
            _ = sigint.recv() => "SIGINT",
        };
        let _ = stop_tx.send(which);
    });
    let app = routes::router(Arc::clone(&endpoint));
    // An SSE answer is several small writes (priming event, messages): without
    // TCP_NODELAY, Nagle's algorithm and the client's delayed ACK hold the last one
    // back ~40 ms.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    let (signal_tx, signal_rx) = tokio::sync::watch::channel(None::<&'static str>);
    let server = axum::serve(listener, app).with_graceful_shutdown({
        let mut signal_rx = signal_rx.clone();
        async move {
            let _ = signal_rx.wait_for(Option::is_some).await;
        }
    });
    let serving = tokio::spawn(async move { server.await });
    let which = stop_rx.await.unwrap_or("SIGTERM");
    tracing::info!(
        signal = which,
        clients = endpoint.hub.len(),
        "stopping; ending every client"
    );
    sweeper.abort();
    // No new connections and no new clients from now on; then every client ends (its
    // streams close, so the graceful shutdown has no open body left to wait for).
    let _ = signal_tx.send(Some(which));
    endpoint
        .hub
        .end_all(
            &format!("the host is stopping ({which})"),
            options.policy.drain,
        )
        .await;
    if tokio::time::timeout(Duration::from_secs(2), serving)
        .await
        .is_err()
    {
        tracing::warn!("connections still open after 2 s; closing them");
    }
    drop(control);
    if tokio::time::timeout(WORKER_STOP_BOUND, workers.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("workers not reaped within the exit bound; killed on drop");
    }
    let telemetry = reticle_tools::telemetry_payload(
        operator.state(),
        operator.workers(),
        operator.jobs(),
        operator.journal(),
        operator.dispatcher(),
    );
    state.events.record(
        "host.stop",
        json!({"reason": format!("Signal({which:?})"), "telemetry": telemetry}),
    );
    drop(ready);
    Ok(StopReason::Signal(which))
}
