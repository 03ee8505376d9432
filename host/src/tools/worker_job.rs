//! Running one worker op as a job: the part `simulate` and `evaluate` share.
//!
//! The host resolves path arguments (through `confine`) before calling [`run_op_with`]; the
//! job then queues on the supervisor, forwards the worker's progress to the job table,
//! and replays a Convergent op on a fresh worker when its worker died mid-job.

use reticle_protocol::wire::{JobContext, JobOutcome, RunRequest};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{ToolContext, ToolResult};
use crate::replay::{WorkerCall, run_on_worker};
use crate::supervisor::{Progress, Supervisor, SupervisorError};

/// Arguments the host consumes and does not forward to the worker.
pub(super) const HOST_ONLY: [&str; 3] = ["wait", "render", "detail"];
/// Most runs of one Convergent job: the first, plus replays after its worker died
/// (DESIGN.md replay table). A job that kills its worker this often is likely poison.
pub const MAX_ATTEMPTS: u8 = 3;

/// Removes the host-only arguments and returns whether the call waits.
pub(super) fn take_wait(args: &mut Map<String, Value>) -> bool {
    let wait = args.get("wait").and_then(Value::as_bool).unwrap_or(false);
    for key in HOST_ONLY {
        args.remove(key);
    }
    wait
}

/// A payload hook: runs in the job when the worker's payload arrives, before it is
/// stored (`evaluate` fills the session's violation cache, D45; `optimize` and
/// `simulate` name their artifacts).
pub(super) type OnResult = Box<dyn FnOnce(Value) -> ToolResult + Send>;

/// What a job may have besides its arguments.
#[derive(Default)]
pub(super) struct JobExtras {
    /// A host-created directory under the artifact root the job may write to (D44),
    /// held by the job to its end so the retention sweep leaves it alone (D49).
    pub artifact_dir: Option<crate::job_dirs::JobDir>,
    /// Applied to the worker's payload.
    pub on_result: Option<OnResult>,
}

/// Runs worker op `op` on `args` (paths already resolved) as a job of tool `tool`, with
/// an optional artifact directory and payload hook.
pub(super) async fn run_op_with(
    ctx: &ToolContext,
    tool: &'static str,
    op: &'static str,
    args: Map<String, Value>,
    wait: bool,
    extras: JobExtras,
) -> ToolResult {
    let args_json = Value::Object(args).to_string();
    let allowed_roots: Vec<String> = ctx
        .state
        .roots
        .snapshot()
        .0
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let pool = std::sync::Arc::clone(&ctx.workers);
    let journal = ctx.journal.clone();
    let call = WorkerCall {
        op: op.into(),
        args_json,
        allowed_roots,
        max_attempts: MAX_ATTEMPTS,
        artifact_dir: extras
            .artifact_dir
            .as_ref()
            .map(|d| d.path().display().to_string()),
    };
    let on_result = extras.on_result;
    let job_dir = extras.artifact_dir;
    ctx.run_as_job(tool, wait, move |sink| async move {
        // In use until the job ends, however it ends (a cancel drops this future).
        let _job_dir = job_dir;
        let supervisor = pool.get().await?;
        // Convergent (the worker is a pure function of request and files): a run lost
        // with its worker is run again on a fresh one, up to MAX_ATTEMPTS runs, as the
        // replay journal decides.
        let payload = run_on_worker(supervisor, &call, &sink, &journal, None).await?;
        match on_result {
            Some(hook) => hook(payload),
            None => Ok(payload),
        }
    })
    .await
}

/// Runs `op` on `supervisor`, replaying after a worker death up to [`MAX_ATTEMPTS`]
/// runs, and returns the payload parsed from the worker's JSON. `on_attempt` is called
/// before each run, `on_progress` for each progress frame. `reticle eval` uses it (it has
/// no job table or journal); the MCP tools go through [`run_on_worker`], which makes the
/// same decisions and journals them. `artifact_dir` is the job's artifact directory
/// (`reticle demo`), created by the caller.
#[allow(clippy::too_many_arguments)]
pub async fn run_with_replay(
    supervisor: &Supervisor,
    job_id: &str,
    op: &str,
    args_json: &str,
    allowed_roots: &[String],
    artifact_dir: Option<&str>,
    on_attempt: impl Fn(),
    on_progress: impl Fn(Progress) + Clone + Send + 'static,
) -> ToolResult {
    let mut attempt = 0;
    loop {
        attempt += 1;
        on_attempt();
        let request = RunRequest {
            job_id: format!("{job_id}.{attempt}"),
            op: op.into(),
            args_json: args_json.to_owned(),
            context: JobContext {
                artifact_dir: artifact_dir.map(str::to_owned),
                allowed_roots: allowed_roots.to_vec(),
                limits: crate::limits::job_limits(),
            },
        };
        let (tx, mut rx) = mpsc::channel::<Progress>(64);
        let on_progress = on_progress.clone();
        let forward = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                on_progress(p);
            }
        });
        // The job turns `running` with the worker's first progress frame; until then
        // it waits in the supervisor's queue and reads `queued`.
        let outcome = supervisor.run(request, tx).await;
        let _ = forward.await;
        match outcome {
            Ok(JobOutcome::Ok { payload_json }) => {
                return serde_json::from_str(&payload_json).map_err(|e| {
                    ToolError::new(
                        ErrorCode::InternalError,
                        format!("worker sent invalid JSON: {e}"),
                    )
                });
            }
            Ok(JobOutcome::Err { error }) => return Err(error),
            Err(SupervisorError::WorkerDied { cause, .. })
                if attempt < u32::from(MAX_ATTEMPTS) && cause.replayable() =>
            {
                // Convergent: the worker is a pure function of (request, files); run again.
                tracing::warn!(
                    job_id,
                    attempt,
                    "worker died mid-job; replaying on a fresh worker"
                );
            }
            Err(e) => return Err(e.to_tool_error()),
        }
    }
}
