//! The dispatcher (`src/lib.rs`) against a scripted executor: attempt ids, per-unit replay, journal
//! and counters, without worker processes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use libmcp::{FaultClass, ReplayContract};
use reticle_dispatch::jobs::{JobStatus, Jobs, wait};
use reticle_dispatch::supervisor::ResourceLimit;
use reticle_dispatch::{
    AttemptLoss, AttemptProgress, AttemptRequest, BoxFuture, DeathCause, Dispatcher, Executor,
    ExecutorError, ExecutorHealth, Scope, ScopeKind, Unit,
};
use reticle_journal::Journal;
use reticle_protocol::wire::{JobLimits, JobOutcome};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;
use tokio::sync::mpsc;

type Script = Box<dyn Fn(&AttemptRequest) -> Result<JobOutcome, ExecutorError> + Send + Sync>;

/// An executor that answers each attempt from a script and records the attempt ids.
struct Scripted {
    script: Script,
    seen: Mutex<Vec<String>>,
}

impl Scripted {
    fn new(
        script: impl Fn(&AttemptRequest) -> Result<JobOutcome, ExecutorError> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            script: Box::new(script),
            seen: Mutex::default(),
        })
    }

    fn seen(&self) -> Vec<String> {
        let mut seen = self.seen.lock().unwrap().clone();
        seen.sort();
        seen
    }
}

impl Executor for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(async { Ok(()) })
    }

    fn run(
        &self,
        attempt: AttemptRequest,
        progress: mpsc::Sender<AttemptProgress>,
    ) -> BoxFuture<'_, Result<JobOutcome, ExecutorError>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(attempt.attempt_id.clone());
            let _ = progress
                .send(AttemptProgress {
                    job_id: attempt.attempt_id.clone(),
                    done: 1,
                    total: 2,
                    message: "half".into(),
                })
                .await;
            tokio::task::yield_now().await;
            (self.script)(&attempt)
        })
    }

    fn parallelism(&self) -> usize {
        4
    }

    fn health(&self) -> ExecutorHealth {
        ExecutorHealth {
            name: self.name(),
            ready: true,
            summary: String::new(),
        }
    }
}

fn ok(payload: serde_json::Value) -> Result<JobOutcome, ExecutorError> {
    Ok(JobOutcome::Ok {
        payload_json: payload.to_string(),
    })
}

fn lost(attempt: &AttemptRequest, cause: DeathCause) -> Result<JobOutcome, ExecutorError> {
    Err(ExecutorError::Lost(Box::new(AttemptLoss {
        attempt_id: attempt.attempt_id.clone(),
        description: format!("worker 1 {cause} while running job {}", attempt.attempt_id),
        error: ToolError::new(ErrorCode::ResourceLimit, "over the limit")
            .with_fault(FaultClass::Resource, None),
        cause,
    })))
}

fn crash() -> DeathCause {
    DeathCause::Exited {
        code: None,
        signal: Some(9),
    }
}

#[tokio::test]
async fn units_of_one_job_replay_alone_under_their_own_attempt_ids() {
    // Unit 1's first run dies; every other run succeeds.
    let executor = Scripted::new(|a| {
        if a.attempt_id.ends_with(".1.1") {
            lost(a, crash())
        } else {
            ok(json!({"unit": a.attempt_id}))
        }
    });
    let dispatcher = Dispatcher::new(
        Arc::clone(&executor) as Arc<dyn Executor>,
        JobLimits::default(),
    );
    let jobs = Jobs::new(Duration::from_secs(60));
    let journal = Journal::new();
    let entry = journal.open("tools/call:evaluate", ReplayContract::Convergent);
    let worker = Arc::clone(&dispatcher);
    let rx = jobs.submit("evaluate", move |reporter| async move {
        let scope = Scope::job(reporter, entry, Vec::new());
        let unit = |i| worker.run(&scope, Unit::new("t", &json!({})).indexed(i));
        // Concurrently, as a job that fans out over tiles runs them.
        let (a, b, c) = tokio::join!(unit(0), unit(1), unit(2));
        Ok(json!([a?, b?, c?]))
    });
    let job_id = rx.borrow().job_id.clone();
    let view = wait(&jobs, rx, |_| async {}).await;
    assert_eq!(view.status, JobStatus::Completed, "{view:?}");
    let ids: Vec<String> = ["0.1", "1.1", "1.2", "2.1"]
        .iter()
        .map(|s| format!("{job_id}.{s}"))
        .collect();
    assert_eq!(executor.seen(), ids);
    // The job's first run and the one replay.
    assert_eq!(view.attempts, 2);
    assert_eq!(jobs.stats()["replays"], 1);
    let stats = dispatcher.stats();
    assert_eq!(stats["units"], 3, "{stats}");
    assert_eq!(stats["attempts"], 4, "{stats}");
    assert_eq!(stats["replays"], 1, "{stats}");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let c = journal.counts();
    assert_eq!(c["replays"], 1, "{c}");
    assert_eq!(c["worker_losses"], 1, "{c}");
    assert_eq!(c["closed_by_knowledge"]["completed"], 1, "{c}");
}

#[tokio::test]
async fn a_unit_stopped_over_a_limit_fails_once_in_every_scope() {
    let over = || DeathCause::OverLimit {
        limit: ResourceLimit::Memory,
        allowed: 1 << 20,
        used: 2 << 20,
    };
    for kind in [ScopeKind::Call, ScopeKind::Cli] {
        let executor = Scripted::new(move |a| lost(a, over()));
        let dispatcher = Dispatcher::new(
            Arc::clone(&executor) as Arc<dyn Executor>,
            JobLimits::default(),
        );
        let journal = Journal::new();
        let scope = match kind {
            ScopeKind::Call => Scope::call(
                "lay",
                journal.open("tools/call:list_cells", ReplayContract::Convergent),
                Vec::new(),
            ),
            _ => Scope::cli("eval-1", Vec::new(), |_| {}),
        };
        let error = dispatcher
            .run(&scope, Unit::new("t", &json!({})))
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::ResourceLimit, "{kind:?}");
        assert_eq!(executor.seen(), [format!("{}.1", scope.id())], "{kind:?}");
        assert_eq!(dispatcher.stats()["stopped_over_limit"], 1);
    }
}

#[tokio::test]
async fn a_unit_that_kills_every_worker_gives_up_after_three_runs() {
    let executor = Scripted::new(|a| lost(a, crash()));
    let dispatcher = Dispatcher::new(
        Arc::clone(&executor) as Arc<dyn Executor>,
        JobLimits::default(),
    );
    let progress = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&progress);
    let scope = Scope::cli("eval-2", Vec::new(), move |p| {
        seen.lock().unwrap().push(p.job_id.clone());
    });
    let error = dispatcher
        .run(&scope, Unit::new("t", &json!({})))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::WorkerFault);
    assert_eq!(error.fault_class, Some(FaultClass::Replay));
    assert_eq!(error.details["attempts"], 3);
    assert_eq!(executor.seen(), ["eval-2.1", "eval-2.2", "eval-2.3"]);
    assert_eq!(
        progress.lock().unwrap().len(),
        3,
        "progress reaches the callback"
    );
}
