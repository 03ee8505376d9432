//! Running one tool request on a worker under its replay contract.
//!
//! [`run_on_worker`] sends the request, forwards progress to the job, records what
//! the host knows in the journal, and when the worker dies mid-run asks libmcp's
//! decision table what to do: Convergent → run again on a fresh worker (bounded);
//! ProbeRequired → run the tool's probe, then complete from it or re-run;
//! NeverReplay (or a ProbeRequired tool without a probe) → fail with a fault of class
//! `ambiguous_outcome` that says the effect may or may not have happened.

use std::future::Future;
use std::pin::Pin;

use libmcp::{FaultClass, ProbeResolution, ReplayContract, RequestDisposition};
use reticle_protocol::wire::{JobContext, JobOutcome, RunRequest};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::jobs::ProgressSink;
use crate::journal::JournalHandle;
use crate::supervisor::{Progress, Supervisor, SupervisorError};

/// What a probe learned about an attempt whose worker died.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// The attempt took effect; this is its result. The request completes without a re-run.
    AlreadyCompleted(Value),
    /// The attempt provably did not take effect; running it again is safe.
    SafeToReplay,
}

/// A ProbeRequired tool's probe: inspects the world after a lost attempt.
pub type Probe = Box<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<ProbeOutcome, ToolError>> + Send>> + Send + Sync,
>;

/// One request for a worker.
#[derive(Debug, Clone)]
pub struct WorkerCall {
    /// The worker op.
    pub op: String,
    /// Its arguments (JSON text).
    pub args_json: String,
    /// Roots the worker may read.
    pub allowed_roots: Vec<String>,
    /// Most runs of the request: the first one plus replays.
    pub max_attempts: u8,
    /// The host-created directory the job may write its artifacts to (D44).
    pub artifact_dir: Option<String>,
}

/// Runs `call` for the job behind `sink`, journaled under `journal` (whose contract
/// decides replay), and returns the worker's payload or the tool error.
///
/// # Errors
/// The worker's tool error; `WORKER_FAULT` with fault class `replay` once the
/// attempts are spent, `ambiguous_outcome` when the contract forbids a re-run after
/// a loss; the supervisor's faults (queue full, shutting down) otherwise.
pub async fn run_on_worker(
    supervisor: &Supervisor,
    call: &WorkerCall,
    sink: &ProgressSink,
    journal: &JournalHandle,
    probe: Option<&Probe>,
) -> Result<Value, ToolError> {
    let job_id = sink.job_id();
    loop {
        sink.attempt();
        let attempt = sink.attempts();
        let request = RunRequest {
            job_id: format!("{job_id}.{attempt}"),
            op: call.op.clone(),
            args_json: call.args_json.clone(),
            context: JobContext {
                artifact_dir: call.artifact_dir.clone(),
                allowed_roots: call.allowed_roots.clone(),
                limits: crate::limits::job_limits(),
            },
        };
        let (tx, mut rx) = mpsc::channel::<Progress>(64);
        let forward_sink = sink.clone();
        let forward_journal = journal.clone();
        let forward = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                // A progress frame proves the request reached a worker.
                forward_journal.dispatched();
                forward_sink.running();
                forward_sink.report(p.done as f64, Some(p.total as f64), Some(p.message));
            }
        });
        // The job turns `running` with the worker's first progress frame; until then
        // it waits in the supervisor's queue and reads `queued`.
        let outcome = supervisor.run(request, tx).await;
        let _ = forward.await;
        let death = match outcome {
            Ok(JobOutcome::Ok { payload_json }) => {
                journal.dispatched();
                journal.completed();
                return serde_json::from_str(&payload_json).map_err(|e| {
                    ToolError::new(
                        ErrorCode::InternalError,
                        format!("worker sent invalid JSON: {e}"),
                    )
                    .with_fault(FaultClass::Protocol, None)
                    .with_hint("report this: the worker broke its result contract")
                });
            }
            Ok(JobOutcome::Err { error }) => {
                journal.dispatched();
                journal.completed();
                return Err(error);
            }
            Err(death @ SupervisorError::WorkerDied { .. }) => {
                if let SupervisorError::WorkerDied { cause, .. } = &death
                    && !cause.replayable()
                {
                    // The host stopped the job over a limit (D26): its outcome is known (it
                    // did not finish) and a replay would go over the limit again.
                    journal.dispatched();
                    journal.completed();
                    return Err(death.to_tool_error());
                }
                death
            }
            Err(other) => return Err(other.to_tool_error()),
        };
        journal.worker_lost();
        let mut evidence = None;
        loop {
            match journal.disposition(evidence, call.max_attempts) {
                RequestDisposition::Replay => {
                    tracing::warn!(
                        job_id,
                        attempt,
                        error = %death,
                        "worker died mid-job; replaying on a fresh worker"
                    );
                    journal.replaying();
                    break;
                }
                RequestDisposition::HoldForProbe => {
                    let Some(probe) = probe else {
                        return Err(ambiguous_outcome(&death, ReplayContract::ProbeRequired));
                    };
                    journal.probed();
                    match probe().await {
                        Ok(ProbeOutcome::AlreadyCompleted(result)) => {
                            evidence = Some(ProbeResolution::AlreadyCompleted);
                            if journal.disposition(evidence, call.max_attempts)
                                == RequestDisposition::CompleteFromProbe
                            {
                                journal.completed_from_probe();
                                tracing::info!(job_id, "probe: the lost attempt took effect");
                                return Ok(result);
                            }
                            return Err(ambiguous_outcome(&death, ReplayContract::ProbeRequired));
                        }
                        Ok(ProbeOutcome::SafeToReplay) => {
                            evidence = Some(ProbeResolution::SafeToReplay);
                        }
                        Err(probe_error) => {
                            tracing::warn!(job_id, error = %probe_error, "probe failed");
                            let mut fault =
                                ambiguous_outcome(&death, ReplayContract::ProbeRequired);
                            fault.details["probe_error"] = json!(probe_error);
                            return Err(fault);
                        }
                    }
                }
                RequestDisposition::RejectAmbiguousOutcome => {
                    return Err(ambiguous_outcome(&death, ReplayContract::NeverReplay));
                }
                RequestDisposition::RejectReplayExhausted => {
                    return Err(replay_exhausted(&death, attempt));
                }
                other => {
                    return Err(ToolError::new(
                        ErrorCode::InternalError,
                        format!("unexpected replay decision {other:?} after a worker loss"),
                    )
                    .with_fault(FaultClass::Invariant, None));
                }
            }
        }
    }
}

fn death_details(death: &SupervisorError) -> Value {
    match death {
        SupervisorError::WorkerDied { job_id, cause, .. } => {
            json!({"job_id": job_id, "cause": cause})
        }
        other => json!({"error": other.to_string()}),
    }
}

/// The worker died and the contract forbids running the request again unprompted.
fn ambiguous_outcome(death: &SupervisorError, contract: ReplayContract) -> ToolError {
    let mut details = death_details(death);
    details["outcome"] = json!("unknown");
    details["replay_contract"] = json!(contract);
    ToolError::new(
        ErrorCode::WorkerFault,
        format!("{death}; the request may or may not have taken effect and was not re-run"),
    )
    .with_details(details)
    .with_fault(FaultClass::AmbiguousOutcome, None)
    .with_hint("check whether the effect happened before calling again; it was not retried")
}

/// The worker died on every allowed run: the request itself is the likely cause.
fn replay_exhausted(death: &SupervisorError, attempts: u32) -> ToolError {
    let mut details = death_details(death);
    details["attempts"] = json!(attempts);
    ToolError::new(
        ErrorCode::WorkerFault,
        format!("{death}; gave up after {attempts} runs"),
    )
    .with_details(details)
    .with_fault(FaultClass::Replay, None)
    .with_hint("the request killed its worker on every run: try a smaller window or coarser pixels")
}
