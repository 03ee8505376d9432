//! `reticle serve`: wire logging, the event log, the protocol stream, the stdin pump,
//! the ready file, the control socket and the server loop together, and take them
//! down in order — or hand them to the next process image (`reticle ctl reexec`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::control::ControlSocket;
use crate::logging;
use crate::readiness::ReadyFile;
use crate::reexec::{self, ReexecSnapshot};
use crate::server::{Server, ShutdownPolicy, StopReason};
use reticle_assets::SchemaCatalog;
use reticle_config::Config;
use reticle_dispatch::events::{EventLog, EventLogConfig};
use reticle_dispatch::workers::ReleaseChoice;
use reticle_tools::ToolRegistry;
use reticle_tools::confine::AllowedRoots;
use reticle_tools::scope::ClientScope;
use reticle_tools::state::HostState;
use reticle_transport::stdin::StdinPump;
use reticle_transport::writer::{self, Writer};

/// Frames read ahead of the dispatcher (each at most 1 MiB).
const READ_AHEAD: usize = 8;

/// Options of `reticle serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where the ready file goes.
    pub ready_file: PathBuf,
    /// Directory of the JSONL logs (`reticle.jsonl`, `events.jsonl`), or `None` for
    /// stderr only.
    pub log_dir: Option<PathBuf>,
    /// `tracing` filter.
    pub log_filter: String,
    /// Drain and EOF timings.
    pub policy: ShutdownPolicy,
    /// How long finished jobs stay pollable.
    pub job_ttl: Duration,
    /// Extra published schemas (`RETICLE_SCHEMAS_DIR`).
    pub schemas_dir: Option<PathBuf>,
    /// Extra examples (`RETICLE_EXAMPLES_DIR`).
    pub examples_dir: Option<PathBuf>,
    /// Start the worker pool at once (else on the first job).
    pub start_workers: bool,
}

/// Runs the stdio server until EOF or a signal. After an operator's reexec request it
/// does not return: the process becomes the new image (or exits 1 if no image could
/// be started).
pub fn serve(options: ServeOptions, config: Arc<Config>) -> anyhow::Result<StopReason> {
    let logs = logging::init(
        &options.log_filter,
        options.log_dir.as_deref(),
        "reticle.jsonl",
    );
    // The settings `main` read: every part gets them from here (the host state).
    // Settings that fell back to their default say so, now that there is a log.
    config.log_warnings();
    // A snapshot from the previous image, when this process is a reexec.
    let restored = match reexec::load() {
        Ok(snapshot) => snapshot,
        Err(e) => {
            tracing::error!(error = %e, "cannot restore the reexec snapshot; starting a fresh session");
            None
        }
    };
    // The binary a reexec without --bin runs: this one, as named at start (if it is
    // replaced on disk, the new file is what an operator means).
    let host_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("reticle"));
    let protocol = writer::claim_stdout()?;
    let protocol_for_exec = protocol.try_clone()?;
    let (out, writer) = Writer::spawn(protocol);
    let schemas = SchemaCatalog::load_with_examples(
        options.schemas_dir.as_deref(),
        options.examples_dir.as_deref(),
    );
    let events = Arc::new(match &options.log_dir {
        Some(dir) => EventLog::open(
            EventLogConfig::configured(dir.clone(), &config.serve),
            restored.as_ref().map_or(0, |r| r.events_seq),
        ),
        None => EventLog::disabled(),
    });
    let scope = Arc::new(ClientScope::new(AllowedRoots::configured(&config), &config));
    let state = Arc::new(match &restored {
        Some(snapshot) => {
            scope
                .roots
                .restore(snapshot.roots.0.clone(), snapshot.roots.1);
            scope.sessions.import(&snapshot.layout_sessions);
            scope.violations.import(&snapshot.violations);
            HostState::restored(
                snapshot.state.clone(),
                Arc::clone(&config),
                logs.file.clone(),
                Arc::clone(&events),
                schemas,
            )
        }
        None => HostState::new(
            Arc::clone(&config),
            logs.file.clone(),
            Arc::clone(&events),
            schemas,
        ),
    });
    let (frames_tx, frames_rx) = mpsc::channel(READ_AHEAD);
    let (carried, pump_state) = restored
        .as_ref()
        .map_or_else(Default::default, |r| (r.frames.clone(), r.pump.clone()));
    let pump = StdinPump::spawn(frames_tx, carried, pump_state)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("reticle-host")
        .build()?;
    let release = ReleaseChoice {
        current: restored.as_ref().and_then(|r| r.worker_exe.clone()),
        previous: restored
            .as_ref()
            .and_then(|r| r.previous_worker_exe.clone()),
    };
    let loop_state = Arc::clone(&state);
    let loop_exe = host_exe.clone();
    let loop_scope = Arc::clone(&scope);
    let end = runtime.block_on(async move {
        let host_exe = loop_exe;
        let state = loop_state;
        let workers = state.worker_pool(release);
        let server = Server::new(out, Arc::clone(&state), Arc::clone(&loop_scope), ToolRegistry::for_settings(&state.config().serve), options.job_ttl, Arc::clone(&workers));
        let pending = match &restored {
            Some(snapshot) => {
                server.restore(&snapshot.server).await;
                snapshot.server.pending.clone()
            }
            None => Vec::new(),
        };
        let (commands_tx, commands_rx) = mpsc::channel(1);
        let control = match ControlSocket::bind(state.config().process.xdg_runtime_dir.as_deref()) {
            Ok(socket) => Some(socket.serve(server.clone(), commands_tx, host_exe.clone())),
            Err(e) => {
                tracing::warn!(error = %e, "no control socket; `reticle ctl` cannot reach this host");
                None
            }
        };
        state.events.record(
            if restored.is_some() { "reexec" } else { "host.start" },
            json!({
                "step": restored.as_ref().map(|_| "restored"),
                "version": env!("CARGO_PKG_VERSION"),
                "exe": host_exe,
                "reexecs": state.reexecs(),
                "control_socket": control.as_ref().map(|c| c.path().to_path_buf()),
                "pending_requests": restored.as_ref().map(|r| r.server.pending.len()),
            }),
        );
        tracing::info!(pid = std::process::id(), log_file = ?state.log_file, reexecs = state.reexecs(), "mcp:ready mode=stdio");
        // The ready file goes last: once it exists, the banner is on stderr and the control
        // socket answers (a client or operator that waits for it finds both).
        let ready = match ReadyFile::create(&options.ready_file) {
            Ok(ready) => Some(ready),
            Err(e) => {
                tracing::error!(path = %options.ready_file.display(), error = %e, "cannot write the ready file");
                None
            }
        };
        if options.start_workers || restored.as_ref().is_some_and(|r| !r.server.jobs.is_empty()) {
            workers.start_in_background();
        }
        let stopping = server.clone();
        let end = server
            .run(frames_rx, options.policy, commands_rx, Some(pump), pending)
            .await;
        drop(control);
        match end {
            Ok(end) if end.reason == StopReason::Reexec => {
                // Same pid: the ready file stays, the next image rewrites it.
                if let Some(ready) = ready {
                    ready.keep();
                }
                Ok(Some((end, workers.release())))
            }
            Ok(end) => {
                // Workers die with the runtime (the supervisor kills their groups on
                // drop): no grace for jobs nobody will read (D6).
                drop(ready);
                // The last telemetry goes into the event log: after a disconnect there is
                // no host left for `reticle ctl telemetry` to ask (D70).
                let telemetry = reticle_tools::telemetry_payload(
                    stopping.state(),
                    stopping.workers(),
                    stopping.jobs(),
                    stopping.journal(),
                    stopping.dispatcher(),
                );
                state.events.record(
                    "host.stop",
                    json!({"reason": format!("{:?}", end.reason), "telemetry": telemetry}),
                );
                Err(end.reason)
            }
            Err(e) => {
                drop(ready);
                tracing::error!(error = %e, "server loop failed");
                Err(StopReason::Eof)
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    // Every sender is gone now: the writer flushes what is queued and stops.
    writer.join();
    let (end, release) = match end {
        Err(reason) => {
            tracing::info!(?reason, "reticle host exiting");
            events.sync();
            return Ok(reason);
        }
        Ok(None) => return Ok(StopReason::Eof),
        Ok(Some(handover)) => handover,
    };
    let (Some(server_snapshot), Some((frames, pump))) = (end.snapshot, end.input) else {
        anyhow::bail!("reexec handover without a snapshot");
    };
    let bin = end.reexec_bin.unwrap_or_else(|| host_exe.clone());
    let snapshot = ReexecSnapshot {
        format: reexec::SNAPSHOT_FORMAT,
        written_by: env!("CARGO_PKG_VERSION").to_owned(),
        state: state.snapshot(),
        events_seq: 0,
        server: server_snapshot,
        frames,
        pump,
        layout_sessions: scope.sessions.export(),
        violations: scope.violations.export(),
        roots: scope.roots.snapshot(),
        worker_exe: release.current,
        previous_worker_exe: release.previous,
    };
    // The exec record goes in before the seq is taken, so the next image continues after it.
    events.record(
        "reexec",
        json!({"step": "exec", "bin": bin, "pending_requests": snapshot.server.pending.len(),
               "jobs": snapshot.server.jobs.len(), "carried_frames": snapshot.frames.len(),
               "unread_bytes": snapshot.pump.unread.len()}),
    );
    let snapshot = ReexecSnapshot {
        events_seq: events.seq(),
        ..snapshot
    };
    events.sync();
    let capsule = match reexec::write(&snapshot) {
        Ok(capsule) => capsule,
        Err(e) => {
            tracing::error!(error = %e, "cannot write the reexec snapshot; exiting");
            anyhow::bail!("reexec snapshot: {e}");
        }
    };
    tracing::info!(bin = %bin.display(), snapshot = %capsule.path().display(), "exec");
    // The client's stdout goes back to fd 1 for the next image; logs flush first.
    writer::restore_stdout(&protocol_for_exec)?;
    drop(logs);
    let error = reexec::exec(&bin, capsule.path());
    // Only on failure: try the binary that is running now, with the same snapshot.
    eprintln!(
        "reticle: exec {} failed: {error}; retrying with {}",
        bin.display(),
        host_exe.display()
    );
    let error = reexec::exec(&host_exe, capsule.path());
    eprintln!(
        "reticle: exec {} failed too: {error}; the session is lost",
        host_exe.display()
    );
    drop(capsule);
    anyhow::bail!("reexec failed: {error}")
}
