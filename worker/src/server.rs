//! The worker's connection to the host: hello, then one message at a time.
//!
//! The main thread only reads the socket and dispatches; a job runs on its own
//! thread so pings and cancels are answered while it computes. Returning from
//! [`run`] ends the process, job thread included.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use interprocess::local_socket::{GenericFilePath, Stream, ToFsName, prelude::*};
use reticle_kernel::CancelToken;
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::sync::lock;
use reticle_protocol::wire::{
    HostMessage, JobOutcome, RunRequest, WIRE_VERSION, WireError, WorkerHello, WorkerMessage,
    read_message,
};

use crate::attempt::{AttemptCtx, Outbox, ProgressSink, WorkerState};
use crate::backend::Backend;
use crate::ops;

/// Why the worker stopped other than by an orderly close.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Connecting to the host's socket failed.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The wire failed.
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// The job in flight: set when it starts, cleared by its thread just before the
/// result goes out, so a `run` that follows a result never sees a stale busy flag.
type Current = Arc<Mutex<Option<(String, CancelToken)>>>;

/// Connects to `socket`, says hello, and serves until the host closes the socket
/// (`Ok`) or says `shutdown` (`Ok`, after the running job finished).
pub fn run(socket: &Path, backend: reticle_kernel::gpu::BackendPref) -> Result<(), ServerError> {
    let connect_err = |source| ServerError::Connect {
        path: socket.display().to_string(),
        source,
    };
    let name = socket
        .to_fs_name::<GenericFilePath>()
        .map_err(connect_err)?;
    let stream = Arc::new(Stream::connect(name).map_err(connect_err)?);
    let outbox = Outbox::new(Arc::clone(&stream));
    let state = Arc::new(WorkerState::new(Backend::select(backend)));
    outbox.send(&WorkerMessage::Hello(WorkerHello {
        wire_version: WIRE_VERSION,
        worker_version: env!("CARGO_PKG_VERSION").to_owned(),
        pid: std::process::id(),
        backend: state.backend.description().clone(),
    }))?;
    tracing::info!(
        pid = std::process::id(),
        backend = %state.backend.description().adapter,
        "worker connected"
    );

    let current: Current = Arc::new(Mutex::new(None));
    let mut last_job: Option<JoinHandle<()>> = None;
    loop {
        let mut reader: &Stream = &stream;
        let message = match read_message::<HostMessage>(&mut reader) {
            Ok(m) => m,
            Err(WireError::Closed) => {
                tracing::info!("host closed the socket; exiting");
                return Ok(());
            }
            Err(e @ (WireError::Decode(_) | WireError::TooLarge(_))) => {
                let _ = outbox.send(&WorkerMessage::Fault {
                    job_id: None,
                    message: format!("undecodable host frame: {e}"),
                    fatal: true,
                });
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        match message {
            HostMessage::Run(request) => {
                if let Some(handle) = start_attempt(request, &outbox, &state, &current) {
                    last_job = Some(handle);
                }
            }
            HostMessage::Cancel { job_id } => {
                let cur = lock(&current);
                match cur.as_ref() {
                    Some((id, token)) if *id == job_id => token.cancel(),
                    _ => tracing::debug!(job_id, "cancel for a job not running here"),
                }
            }
            HostMessage::Ping { seq } => outbox.send(&WorkerMessage::Pong {
                seq,
                device_bytes: state.backend.device_bytes(),
                jobs_run: state.jobs_run.load(Ordering::Relaxed),
            })?,
            HostMessage::Shutdown => {
                tracing::info!("shutdown requested");
                if let Some(handle) = last_job.take() {
                    let _ = handle.join();
                }
                return Ok(());
            }
        }
    }
}

/// Starts `request` on a job thread, or answers at once when it cannot run.
fn start_attempt(
    request: RunRequest,
    outbox: &Outbox,
    state: &Arc<WorkerState>,
    current: &Current,
) -> Option<JoinHandle<()>> {
    let refuse = |error: ToolError| {
        let _ = outbox.send(&WorkerMessage::Result {
            job_id: request.job_id.clone(),
            outcome: JobOutcome::Err { error },
        });
        None
    };
    let Some(op) = ops::find(&request.op) else {
        return refuse(
            ToolError::new(
                ErrorCode::Unsupported,
                format!("unknown op {:?}", request.op),
            )
            .with_details(serde_json::json!({ "op": request.op, "known": ops::names() })),
        );
    };
    let cancel = CancelToken::new();
    {
        let mut cur = lock(current);
        if let Some((running, _)) = cur.as_ref() {
            let busy = ToolError::new(
                ErrorCode::InternalError,
                "worker is busy: the host sent a second job",
            )
            .with_details(serde_json::json!({ "running": running }));
            drop(cur);
            return refuse(busy);
        }
        *cur = Some((request.job_id.clone(), cancel.clone()));
    }
    let job_id = request.job_id.clone();
    let job_outbox = outbox.clone();
    let state = Arc::clone(state);
    let job_current = Arc::clone(current);
    let spawned = std::thread::Builder::new()
        .name(format!("job {job_id}"))
        .spawn(move || {
            let outbox = job_outbox;
            let current = job_current;
            let progress = ProgressSink::new(outbox.clone(), request.job_id.clone());
            let ctx = AttemptCtx {
                job_id: &request.job_id,
                context: &request.context,
                cancel: &cancel,
                state: &state,
                progress: &progress,
            };
            tracing::debug!(job_id = %request.job_id, op = op.name(), "job started");
            let outcome = run_op(&ctx, op, &request.args_json);
            state.jobs_run.fetch_add(1, Ordering::Relaxed);
            *lock(&current) = None;
            let message = WorkerMessage::Result {
                job_id: request.job_id.clone(),
                outcome,
            };
            if let Err(e) = outbox.send(&message) {
                tracing::warn!(error = %e, job_id = %request.job_id, "result not sent");
            }
        });
    match spawned {
        Ok(handle) => Some(handle),
        Err(e) => {
            *lock(current) = None;
            let _ = outbox.send(&WorkerMessage::Result {
                job_id,
                outcome: JobOutcome::Err {
                    error: ToolError::new(
                        ErrorCode::InternalError,
                        format!("cannot start a job thread: {e}"),
                    ),
                },
            });
            None
        }
    }
}

/// Runs `op` on `args_json` in `ctx`: its typed result serialized once into the frame's
/// JSON text (the one serialization of a result, issue 27 item 4), its tool error, or a
/// panic as `INTERNAL_ERROR`. The one way an op runs: the pool worker's job thread above
/// and a batch element (`crate::batch`).
pub(crate) fn run_op(ctx: &AttemptCtx<'_>, op: &dyn ops::Op, args_json: &str) -> JobOutcome {
    // The op runs on a thread of the compute pool, so that its parallel loops start there
    // instead of each being handed over from this thread and waited for (D242).
    let run = || {
        rayon::scope(|_| {
            let result = op.run(ctx, args_json)?;
            result
                .to_json()
                .map_err(|e| ToolError::new(ErrorCode::InternalError, format!("serialize: {e}")))
        })
    };
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    // What the op freed goes back to the system before the next one (D244).
    crate::allocator::release_free_heap();
    match caught {
        Ok(Ok(payload_json)) => JobOutcome::Ok { payload_json },
        Ok(Err(error)) => JobOutcome::Err { error },
        Err(_) => JobOutcome::Err {
            error: ToolError::new(
                ErrorCode::InternalError,
                format!("op {} panicked", op.name()),
            ),
        },
    }
}
