//! The replay policy: what happens after a unit's run was lost with its worker (or its
//! cluster task). The one place that decides, for every executor: the pool's units
//! ([`super::Dispatcher::run`]) and a cluster batch's tiles (`slurm`) alike.
//!
//! First the over-limit rule: a run stopped over a limit (the host's memory or time
//! limit, or the cluster's `OUT_OF_MEMORY`/`TIMEOUT`: [`DeathCause::replayable`] false)
//! is never replayed; its outcome is known (it did not finish) and a replay would go
//! over the limit again. It fails with the limit's `RESOURCE_LIMIT` error. Otherwise
//! libmcp's decision table, fed the request's replay contract, the unit's knowledge and
//! attempts, and probe evidence: Convergent → run again (bounded); ProbeRequired → run
//! the unit's probe, then complete from it or re-run; NeverReplay (or a ProbeRequired
//! unit without a probe) → fail with a fault of class `ambiguous_outcome` that says the
//! effect may or may not have happened.
//!
//! [`DeathCause::replayable`]: super::DeathCause::replayable

use std::future::Future;
use std::pin::Pin;

use libmcp::{FaultClass, ProbeResolution, ReplayContract, RequestDisposition};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};

use super::executor::AttemptLoss;
use reticle_journal::UnitJournal;

/// What a probe learned about an attempt whose worker died.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// The attempt took effect; this is its result. The unit completes without a re-run.
    AlreadyCompleted(Value),
    /// The attempt provably did not take effect; running it again is safe.
    SafeToReplay,
}

/// A ProbeRequired unit's probe: inspects the world after a lost attempt.
pub type Probe = Box<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<ProbeOutcome, ToolError>> + Send>> + Send + Sync,
>;

/// The decision after a loss.
pub(super) enum AfterLoss {
    /// Run the unit again on a fresh worker.
    Replay,
    /// The run was stopped over a limit: the unit fails with this error, never re-run.
    OverLimit(ToolError),
    /// The unit is over: completed from a probe, or failed.
    Done(Result<Value, ToolError>),
}

/// Decides what follows the loss of run `attempt` of a unit: the over-limit rule, then
/// libmcp's decision table (see the module's documentation). Journals the decision in
/// the unit's track.
pub(super) async fn after_loss(
    journal: &UnitJournal,
    loss: &AttemptLoss,
    probe: Option<&Probe>,
    max_attempts: u8,
    attempt: u32,
) -> AfterLoss {
    if !loss.cause.replayable() {
        // The host (or the cluster) stopped the run over a limit (D26): its outcome is
        // known, it did not finish.
        journal.dispatched();
        journal.completed();
        return AfterLoss::OverLimit(loss.error.clone());
    }
    journal.worker_lost();
    let mut evidence = None;
    loop {
        match journal.disposition(evidence, max_attempts) {
            RequestDisposition::Replay => {
                tracing::warn!(
                    attempt_id = loss.attempt_id,
                    attempt,
                    error = %loss,
                    "worker died mid-run; replaying on a fresh worker"
                );
                journal.replaying();
                return AfterLoss::Replay;
            }
            RequestDisposition::HoldForProbe => {
                let Some(probe) = probe else {
                    return failed(ambiguous_outcome(loss, ReplayContract::ProbeRequired));
                };
                journal.probed();
                match probe().await {
                    Ok(ProbeOutcome::AlreadyCompleted(result)) => {
                        evidence = Some(ProbeResolution::AlreadyCompleted);
                        if journal.disposition(evidence, max_attempts)
                            == RequestDisposition::CompleteFromProbe
                        {
                            journal.completed_from_probe();
                            tracing::info!(
                                attempt_id = loss.attempt_id,
                                "probe: the lost attempt took effect"
                            );
                            return AfterLoss::Done(Ok(result));
                        }
                        return failed(ambiguous_outcome(loss, ReplayContract::ProbeRequired));
                    }
                    Ok(ProbeOutcome::SafeToReplay) => {
                        evidence = Some(ProbeResolution::SafeToReplay);
                    }
                    Err(probe_error) => {
                        tracing::warn!(attempt_id = loss.attempt_id, error = %probe_error, "probe failed");
                        let mut fault = ambiguous_outcome(loss, ReplayContract::ProbeRequired);
                        fault.details["probe_error"] = json!(probe_error);
                        return failed(fault);
                    }
                }
            }
            RequestDisposition::RejectAmbiguousOutcome => {
                return failed(ambiguous_outcome(loss, ReplayContract::NeverReplay));
            }
            RequestDisposition::RejectReplayExhausted => {
                return failed(replay_exhausted(loss, attempt));
            }
            other => {
                return failed(
                    ToolError::new(
                        ErrorCode::InternalError,
                        format!("unexpected replay decision {other:?} after a worker loss"),
                    )
                    .with_fault(FaultClass::Invariant, None),
                );
            }
        }
    }
}

fn failed(error: ToolError) -> AfterLoss {
    AfterLoss::Done(Err(error))
}

fn loss_details(loss: &AttemptLoss) -> Value {
    json!({"job_id": loss.attempt_id, "cause": loss.cause})
}

/// The worker died and the contract forbids running the request again unprompted.
fn ambiguous_outcome(loss: &AttemptLoss, contract: ReplayContract) -> ToolError {
    let mut details = loss_details(loss);
    details["outcome"] = json!("unknown");
    details["replay_contract"] = json!(contract);
    ToolError::new(
        ErrorCode::WorkerFault,
        format!("{loss}; the request may or may not have taken effect and was not re-run"),
    )
    .with_details(details)
    .with_fault(FaultClass::AmbiguousOutcome, None)
    .with_hint("check whether the effect happened before calling again; it was not retried")
}

/// The worker died on every allowed run: the request itself is the likely cause.
fn replay_exhausted(loss: &AttemptLoss, attempts: u32) -> ToolError {
    let mut details = loss_details(loss);
    details["attempts"] = json!(attempts);
    ToolError::new(
        ErrorCode::WorkerFault,
        format!("{loss}; gave up after {attempts} runs"),
    )
    .with_details(details)
    .with_fault(FaultClass::Replay, None)
    .with_hint("the request killed its worker on every run: try a smaller window or coarser pixels")
}
