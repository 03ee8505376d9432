//! Replay contracts against a REAL worker that is SIGKILLed mid-job (seed 004):
//! NeverReplay fails with an `ambiguous_outcome` fault and never runs again;
//! ProbeRequired probes first, then completes from the probe or re-runs; every
//! decision lands in the journal. (Convergent replay is exercised end to end by
//! `tests/tests/e2e/crash_replay.rs`.) No public tool of reticle is NeverReplay or
//! ProbeRequired *and* runs on a worker yet, so these drive the dispatcher
//! (`reticle_dispatch`) directly with the worker's `debug.sleep` op.
//!
//! Like `supervisor.rs`, these need the worker binary built (`cargo build -p
//! reticle-worker`) or `$RETICLE_WORKER_BIN`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libmcp::{FaultClass, ReplayContract};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reticle_dispatch::jobs::{JobStatus, JobView, Jobs};
use reticle_dispatch::supervisor::{SlotState, Supervisor, SupervisorConfig, WorkerStderr};
use reticle_dispatch::{Dispatcher, LocalPool, Probe, ProbeOutcome, Scope, Unit};
use reticle_journal::Journal;
use reticle_protocol::ErrorCode;
use reticle_protocol::wire::JobLimits;
use serde_json::{Value, json};

fn worker_exe() -> PathBuf {
    if let Some(path) = std::env::var_os("RETICLE_WORKER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let worker = profile_dir.join("reticle-worker");
    assert!(
        worker.exists(),
        "{} is missing: run `cargo build -p reticle-worker` first",
        worker.display()
    );
    worker
}

async fn supervisor(runtime: &tempfile::TempDir) -> Arc<Supervisor> {
    let config = SupervisorConfig {
        workers: 1,
        // The host's environment, as the host's `Config` snapshot would hold it.
        host_env: std::env::vars_os().collect(),
        worker_env: vec![("RETICLE_BACKEND".into(), "cpu".into())],
        runtime_dir_base: Some(runtime.path().to_path_buf()),
        heartbeat_interval: Duration::from_millis(200),
        heartbeat_timeout: Duration::from_millis(1500),
        backoff_initial: Duration::from_millis(50),
        worker_stderr: WorkerStderr::Inherit,
        ..SupervisorConfig::with_worker_exe(worker_exe())
    };
    Arc::new(Supervisor::start(config).await.expect("supervisor starts"))
}

/// A 1.5 s sleep in 30 steps on the worker: long enough to kill mid-run.
fn sleep_call() -> Unit {
    Unit::new("debug.sleep", &json!({"ms": 1500, "steps": 30})).with_max_attempts(3)
}

/// The dispatcher over `supervisor`'s workers.
fn dispatcher(supervisor: &Arc<Supervisor>) -> Arc<Dispatcher> {
    Dispatcher::new(
        Arc::new(LocalPool::with_supervisor(Arc::clone(supervisor))),
        JobLimits::default(),
    )
}

/// Waits until the worker is busy, SIGKILLs it, and returns its pid.
async fn kill_busy_worker(supervisor: &Supervisor) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        let w = &supervisor.snapshot().workers[0];
        if w.state == SlotState::Busy
            && let Some(pid) = w.pid
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "worker never busy: {w:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // Let it report some progress first, so the run is surely on the worker.
    tokio::time::sleep(Duration::from_millis(150)).await;
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("kill worker");
    pid
}

struct Run {
    jobs: Arc<Jobs>,
    journal: Arc<Journal>,
    job_id: String,
}

/// Submits `call` as a job under `contract` (with `probe`), kills its worker once,
/// and waits for the job to end.
async fn run_and_kill_once(
    supervisor: &Arc<Supervisor>,
    contract: ReplayContract,
    probe: Option<Probe>,
) -> (Run, JobView) {
    let jobs = Jobs::new(Duration::from_secs(60));
    let journal = Journal::new();
    let handle = journal.open("tools/call:test", contract);
    let dispatcher = dispatcher(supervisor);
    let call = match probe {
        Some(probe) => sleep_call().with_probe(probe),
        None => sleep_call(),
    };
    let rx = jobs.submit("test", move |reporter| async move {
        let scope = Scope::job(reporter, handle, Vec::new());
        dispatcher.run(&scope, call).await
    });
    let job_id = rx.borrow().job_id.clone();
    kill_busy_worker(supervisor).await;
    let mut rx = jobs.subscribe(&job_id).unwrap();
    let view = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if rx.borrow_and_update().status.is_terminal() {
                return rx.borrow().clone();
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("job ends");
    // The job's future (and its journal handle) is dropped right after it finishes.
    tokio::time::sleep(Duration::from_millis(50)).await;
    (
        Run {
            jobs,
            journal,
            job_id,
        },
        view,
    )
}

fn counts(run: &Run) -> Value {
    run.journal.counts()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_replay_is_an_ambiguous_outcome_fault_and_never_runs_again() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = supervisor(&runtime).await;
    let (run, view) = run_and_kill_once(&supervisor, ReplayContract::NeverReplay, None).await;
    assert_eq!(view.status, JobStatus::Failed, "{view:?}");
    let error = view.error.expect("error");
    assert_eq!(error.code, ErrorCode::WorkerFault);
    assert_eq!(error.fault_class, Some(FaultClass::AmbiguousOutcome));
    assert_eq!(error.details["outcome"], "unknown");
    assert_eq!(error.details["replay_contract"], "never_replay");
    assert!(
        error.retry_after_ms.is_none(),
        "no retry hint for an unknown outcome"
    );
    assert!(error.hint().is_some());
    assert_eq!(view.attempts, 1, "a NeverReplay request ran again");
    let c = counts(&run);
    assert_eq!(c["rejected_ambiguous"], 1, "{c}");
    assert_eq!(c["replays"], 0, "{c}");
    assert_eq!(c["worker_losses"], 1, "{c}");
    assert_eq!(c["closed_by_knowledge"]["outcome_unknown"], 1, "{c}");
    assert_eq!(c["open"], 0, "{c}");
    // The replacement worker never saw the request: the slot finished no job and
    // holds none.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let w = &supervisor.snapshot().workers[0];
    assert_eq!(w.jobs_completed, 0, "the request ran again: {w:?}");
    assert!(w.current_job.is_none(), "{w:?}");
    assert_eq!(
        run.jobs.poll(&run.job_id).unwrap().status,
        JobStatus::Failed
    );
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_required_completes_from_the_probe_without_a_rerun() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = supervisor(&runtime).await;
    let probes = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&probes);
    let probe: Probe = Box::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(ProbeOutcome::AlreadyCompleted(
                json!({"probed": "effect seen"}),
            ))
        })
    });
    let (run, view) =
        run_and_kill_once(&supervisor, ReplayContract::ProbeRequired, Some(probe)).await;
    assert_eq!(view.status, JobStatus::Completed, "{view:?}");
    assert_eq!(view.result, Some(json!({"probed": "effect seen"})));
    assert_eq!(view.attempts, 1);
    assert_eq!(probes.load(Ordering::SeqCst), 1);
    let c = counts(&run);
    assert_eq!(c["probes"], 1, "{c}");
    assert_eq!(c["completed_from_probe"], 1, "{c}");
    assert_eq!(c["replays"], 0, "{c}");
    assert_eq!(c["closed_by_knowledge"]["completed"], 1, "{c}");
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_required_reruns_when_the_probe_says_it_is_safe() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = supervisor(&runtime).await;
    let probe: Probe = Box::new(|| Box::pin(async { Ok(ProbeOutcome::SafeToReplay) }));
    let (run, view) =
        run_and_kill_once(&supervisor, ReplayContract::ProbeRequired, Some(probe)).await;
    assert_eq!(view.status, JobStatus::Completed, "{view:?}");
    // The worker's own result, from the second run on the replacement worker.
    assert!(view.result.as_ref().unwrap().is_object(), "{view:?}");
    assert_eq!(view.attempts, 2);
    let c = counts(&run);
    assert_eq!(c["probes"], 1, "{c}");
    assert_eq!(c["replays"], 1, "{c}");
    assert_eq!(c["closed_by_knowledge"]["completed"], 1, "{c}");
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_required_without_a_probe_is_an_ambiguous_outcome() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = supervisor(&runtime).await;
    let (_run, view) = run_and_kill_once(&supervisor, ReplayContract::ProbeRequired, None).await;
    let error = view.error.expect("error");
    assert_eq!(error.fault_class, Some(FaultClass::AmbiguousOutcome));
    assert_eq!(error.details["replay_contract"], "probe_required");
    assert_eq!(view.attempts, 1);
    supervisor.shutdown().await;
}

/// A supervisor of one cpu worker with test heartbeats, and `limits` applied.
async fn limited_supervisor(
    runtime: &tempfile::TempDir,
    limits: impl FnOnce(&mut SupervisorConfig),
) -> Arc<Supervisor> {
    let mut config = SupervisorConfig {
        workers: 1,
        // The host's environment, as the host's `Config` snapshot would hold it.
        host_env: std::env::vars_os().collect(),
        worker_env: vec![("RETICLE_BACKEND".into(), "cpu".into())],
        runtime_dir_base: Some(runtime.path().to_path_buf()),
        heartbeat_interval: Duration::from_millis(200),
        heartbeat_timeout: Duration::from_millis(1500),
        backoff_initial: Duration::from_millis(50),
        worker_stderr: WorkerStderr::Inherit,
        ..SupervisorConfig::with_worker_exe(worker_exe())
    };
    limits(&mut config);
    Arc::new(Supervisor::start(config).await.expect("supervisor starts"))
}

/// A 64 MiB memory limit, so `RLIMIT_DATA` is 128 MiB.
fn memory_64mib(config: &mut SupervisorConfig) {
    config.memory_limit_bytes = Some(64 << 20);
}

/// Runs `call` as a Convergent job to its end and checks it failed once with a
/// resource fault and was not replayed; returns the error's `details.cause`.
async fn fails_once_over_a_limit(supervisor: &Arc<Supervisor>, call: Unit) -> Value {
    let jobs = Jobs::new(Duration::from_secs(60));
    let journal = Journal::new();
    let handle = journal.open("tools/call:test", ReplayContract::Convergent);
    let dispatcher = dispatcher(supervisor);
    let rx = jobs.submit("test", move |reporter| async move {
        let scope = Scope::job(reporter, handle, Vec::new());
        dispatcher.run(&scope, call).await
    });
    let job_id = rx.borrow().job_id.clone();
    let mut rx = jobs.subscribe(&job_id).unwrap();
    let view = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if rx.borrow_and_update().status.is_terminal() {
                return rx.borrow().clone();
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("job ends");
    assert_eq!(view.status, JobStatus::Failed, "{view:?}");
    let error = view.error.expect("error");
    assert_eq!(error.code, ErrorCode::ResourceLimit, "{error:?}");
    assert_eq!(error.fault_class, Some(FaultClass::Resource));
    assert!(error.hint().is_some());
    assert_eq!(view.attempts, 1, "an over-limit job ran again: {error:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let c = journal.counts();
    assert_eq!(c["replays"], 0, "{c}");
    assert_eq!(c["open"], 0, "{c}");
    error.details["cause"].clone()
}

/// A Convergent job that goes over the job time limit is not replayed: the host killed
/// its worker on purpose (D26), so the outcome is known and a re-run would go over again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_its_time_limit_fails_once_and_is_not_replayed() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = limited_supervisor(&runtime, |c| {
        c.job_timeout = Some(Duration::from_millis(500));
    })
    .await;
    let cause = fails_once_over_a_limit(&supervisor, sleep_call()).await;
    assert_eq!(cause["limit"], "wall_time", "{cause}");
    supervisor.shutdown().await;
}

/// A job whose allocation the kernel refuses at the worker's RLIMIT_DATA (twice the
/// 64 MiB memory limit here) aborts its worker at once, long before a resident-memory
/// tick: the host reads the refusal from the worker's stderr, and the job fails once
/// with a resource fault instead of being replayed as a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_refused_memory_by_the_rlimit_fails_once_and_is_not_replayed() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = limited_supervisor(&runtime, memory_64mib).await;
    let call = Unit::new("debug.alloc", &json!({"bytes": 1u64 << 30}));
    let cause = fails_once_over_a_limit(&supervisor, call).await;
    assert_eq!(cause["kind"], "allocation_refused", "{cause}");
    assert_eq!(cause["allowed"], 128u64 << 20, "{cause}");
    assert_eq!(cause["requested"], 1u64 << 30, "{cause}");
    supervisor.shutdown().await;
}

/// An observer call (the layout tools' synchronous scope, `Scope::call`, ids `lay_…`)
/// whose worker dies at its memory ceiling fails once with a typed resource fault: the
/// dispatcher does not replay it, as it would not replay a job (before the dispatcher,
/// the observer tools replayed any worker death).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_call_over_its_memory_limit_fails_once_and_is_not_replayed() {
    let runtime = tempfile::tempdir().unwrap();
    let supervisor = limited_supervisor(&runtime, memory_64mib).await;
    let dispatcher = dispatcher(&supervisor);
    let journal = Journal::new();
    let scope = Scope::call(
        "lay",
        journal.open("tools/call:open_layout", ReplayContract::Convergent),
        Vec::new(),
    );
    let error = dispatcher
        .run(
            &scope,
            Unit::new("debug.alloc", &json!({"bytes": 1u64 << 30})),
        )
        .await
        .expect_err("the call must fail");
    assert_eq!(error.code, ErrorCode::ResourceLimit, "{error:?}");
    assert_eq!(error.fault_class, Some(FaultClass::Resource));
    assert!(error.hint().is_some());
    assert_eq!(
        error.details["cause"]["kind"], "allocation_refused",
        "{error:?}"
    );
    let attempt = error.details["job_id"].as_str().unwrap();
    assert!(
        attempt.starts_with(&format!("{}.", scope.id())) && attempt.ends_with(".1"),
        "{attempt}"
    );
    let stats = dispatcher.stats();
    assert_eq!(
        stats["attempts"], 1,
        "an over-limit observer call ran again: {stats}"
    );
    assert_eq!(stats["replays"], 0, "{stats}");
    assert_eq!(stats["stopped_over_limit"], 1, "{stats}");
    drop(scope);
    let c = journal.counts();
    assert_eq!(c["replays"], 0, "{c}");
    assert_eq!(c["open"], 0, "{c}");
    // The replacement worker never saw the request.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let w = &supervisor.snapshot().workers[0];
    assert_eq!(w.jobs_completed, 0, "the request ran again: {w:?}");
    assert!(w.current_job.is_none(), "{w:?}");
    supervisor.shutdown().await;
}
