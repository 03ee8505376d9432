//! The supervisor against the REAL worker binary.
//!
//! These tests spawn `target/<profile>/reticle-worker`, found next to the test
//! executable's `deps/` directory (or at `$RETICLE_WORKER_BIN`). Cargo only builds it
//! for `cargo test --workspace`; with `cargo test -p reticle-dispatch` build it first:
//! `cargo build -p reticle-worker`. A missing binary fails the test with that hint.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use reticle_dispatch::supervisor::{
    AttemptProgress, CancelKind, CancelOutcome, DeathCause, JobContext, JobOutcome, KillOutcome,
    ResourceLimit, RunRequest, SlotState, Supervisor, SupervisorConfig, SupervisorError,
    WorkerStderr,
};
use tokio::sync::mpsc;

// The library's own tests (src/ has none: D251); they need no worker binary.
mod units;

fn worker_exe() -> PathBuf {
    if let Some(path) = std::env::var_os("RETICLE_WORKER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/reticle-worker
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let worker = profile_dir.join("reticle-worker");
    assert!(
        worker.exists(),
        "{} is missing: run `cargo build -p reticle-worker` first",
        worker.display()
    );
    worker
}

fn config(workers: usize, runtime_base: &std::path::Path) -> SupervisorConfig {
    SupervisorConfig {
        workers,
        // The host's environment, as the host's `Config` snapshot would hold it.
        host_env: std::env::vars_os().collect(),
        worker_env: vec![("RETICLE_BACKEND".into(), "cpu".into())],
        runtime_dir_base: Some(runtime_base.to_path_buf()),
        heartbeat_interval: Duration::from_millis(200),
        heartbeat_timeout: Duration::from_millis(1500),
        backoff_initial: Duration::from_millis(50),
        worker_stderr: WorkerStderr::Inherit,
        ..SupervisorConfig::with_worker_exe(worker_exe())
    }
}

fn job(id: &str, op: &str, args: serde_json::Value) -> RunRequest {
    RunRequest {
        job_id: id.to_owned(),
        op: op.to_owned(),
        args_json: args.to_string(),
        context: JobContext {
            artifact_dir: None,
            allowed_roots: Vec::new(),
            limits: Default::default(),
        },
    }
}

fn sleep_job(id: &str, ms: u64, steps: u64) -> RunRequest {
    job(
        id,
        "debug.sleep",
        serde_json::json!({"ms": ms, "steps": steps}),
    )
}

fn payload(outcome: &JobOutcome) -> serde_json::Value {
    match outcome {
        JobOutcome::Ok { payload_json } => serde_json::from_str(payload_json).unwrap(),
        JobOutcome::Err { error } => panic!("job failed: {error}"),
    }
}

fn worker_pid(supervisor: &Supervisor) -> u32 {
    supervisor.snapshot().workers[0]
        .pid
        .expect("worker running")
}

/// Waits until slot 0 is idle with a process (after a restart).
async fn wait_idle(supervisor: &Supervisor, limit: Duration) -> u32 {
    let deadline = Instant::now() + limit;
    loop {
        let w = &supervisor.snapshot().workers[0];
        if w.state == SlotState::Idle
            && let Some(pid) = w.pid
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no idle worker: {w:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts `id`, a 60 s sleep that reports progress, and returns once the worker has
/// reported some: the job is then surely running on the worker.
async fn running_long_job(
    supervisor: &Arc<Supervisor>,
    id: &'static str,
) -> (
    tokio::task::JoinHandle<Result<JobOutcome, SupervisorError>>,
    mpsc::Receiver<AttemptProgress>,
) {
    let (tx, mut rx) = mpsc::channel(64);
    let s = Arc::clone(supervisor);
    let running = tokio::spawn(async move { s.run(sleep_job(id, 60_000, 600), tx).await });
    rx.recv().await.unwrap();
    (running, rx)
}

/// Whether `pid` is gone or a zombie (exited, not yet reaped by its new parent).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].trim_start().chars().next())
                == Some('Z')
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_then_a_job_with_monotonic_progress() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(config(1, base.path())).await.unwrap();
    let snap = supervisor.snapshot();
    let w = &snap.workers[0];
    assert_eq!(w.state, SlotState::Idle);
    assert_eq!(w.generation, 1);
    assert_eq!(w.backend.as_ref().unwrap().kind, "cpu");
    let pid = w.pid.unwrap();

    // One private runtime dir; the socket was unlinked once the worker connected.
    let dirs: Vec<_> = std::fs::read_dir(base.path()).unwrap().collect();
    assert_eq!(dirs.len(), 1);
    let dir = dirs[0].as_ref().unwrap().path();
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    let (tx, mut rx) = mpsc::channel::<AttemptProgress>(64);
    let outcome = supervisor
        .run(sleep_job("job_1", 300, 3), tx)
        .await
        .unwrap();
    let value = payload(&outcome);
    assert_eq!(value["slept_ms"], 300);
    assert_eq!(value["pid"], pid);
    let mut seen = Vec::new();
    while let Ok(p) = rx.try_recv() {
        assert_eq!(p.job_id, "job_1");
        seen.push((p.done, p.total));
    }
    assert!(seen.windows(2).all(|p| p[0].0 < p[1].0), "{seen:?}");
    assert_eq!(seen.last(), Some(&(3, 3)));

    // A heartbeat after the job carries the worker's own count.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let w = &supervisor.snapshot().workers[0];
    assert_eq!(w.jobs_run, 1);
    assert_eq!(w.jobs_completed, 1);
    assert!(w.last_heartbeat_age_ms.unwrap() < 1000, "{w:?}");
    let json = serde_json::to_value(supervisor.snapshot()).unwrap();
    assert_eq!(json["workers"][0]["state"], "idle");

    supervisor.shutdown().await;
    assert!(exited(pid));
    assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    assert_eq!(supervisor.snapshot().workers[0].state, SlotState::Stopped);
    assert!(matches!(
        supervisor
            .run(sleep_job("late", 1, 1), mpsc::channel(1).0)
            .await,
        Err(SupervisorError::ShuttingDown)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_job_reaps_the_worker_within_200ms_and_a_replacement_runs_the_next_job() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let pid = worker_pid(&supervisor);
    let (running, _progress) = running_long_job(&supervisor, "job_long").await;

    let started = Instant::now();
    let outcome = supervisor.kill_job("job_long").await.unwrap();
    let elapsed = started.elapsed();
    match outcome {
        KillOutcome::Killed {
            pid: killed,
            reaped_in,
        } => {
            assert_eq!(killed, pid);
            assert!(reaped_in < Duration::from_millis(200), "{reaped_in:?}");
        }
        other => panic!("expected a kill, got {other:?}"),
    }
    assert!(
        elapsed < Duration::from_millis(200),
        "kill_job took {elapsed:?}"
    );
    // Gone and reaped: no /proc entry (not even a zombie), and not waitable any more.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still in /proc"
    );
    assert_eq!(
        waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)),
        Err(Errno::ECHILD)
    );
    assert_eq!(
        running.await.unwrap(),
        Err(SupervisorError::Cancelled {
            job_id: "job_long".into(),
            how: CancelKind::Killed
        })
    );

    let outcome = supervisor
        .run(sleep_job("job_next", 20, 1), mpsc::channel(8).0)
        .await
        .unwrap();
    let new_pid = payload(&outcome)["pid"].as_u64().unwrap() as u32;
    assert_ne!(new_pid, pid);
    let w = &supervisor.snapshot().workers[0];
    assert_eq!(w.generation, 2);
    assert_eq!(w.restarts, 1);
    assert_eq!(
        supervisor.kill_job("job_next").await,
        Err(SupervisorError::JobNotFound {
            job_id: "job_next".into()
        })
    );
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_job_is_worker_died_and_the_replacement_works() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(config(1, base.path())).await.unwrap();
    let pid = worker_pid(&supervisor);
    let err = supervisor
        .run(
            job(
                "job_crash",
                "debug.crash",
                serde_json::json!({"after_ms": 100}),
            ),
            mpsc::channel(8).0,
        )
        .await
        .unwrap_err();
    match err {
        SupervisorError::WorkerDied {
            job_id,
            pid: died,
            generation,
            cause,
        } => {
            assert_eq!(job_id, "job_crash");
            assert_eq!(died, pid);
            assert_eq!(generation, 1);
            assert_eq!(
                cause,
                DeathCause::Exited {
                    code: None,
                    signal: Some(Signal::SIGABRT as i32)
                }
            );
        }
        other => panic!("expected WorkerDied, got {other:?}"),
    }
    assert!(exited(pid));
    let outcome = supervisor
        .run(sleep_job("job_after", 20, 1), mpsc::channel(8).0)
        .await
        .unwrap();
    assert_ne!(payload(&outcome)["pid"], pid);
    let w = &supervisor.snapshot().workers[0];
    assert_eq!(w.restarts, 1);
    assert!(matches!(w.last_death, Some(DeathCause::Exited { .. })));
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_queue_in_the_host_when_the_only_worker_is_busy() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let started = Instant::now();
    let tasks: Vec<_> = (0..3)
        .map(|i| {
            let s = Arc::clone(&supervisor);
            tokio::spawn(async move {
                let out = s
                    .run(sleep_job(&format!("q{i}"), 200, 2), mpsc::channel(8).0)
                    .await;
                (out, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let snap = supervisor.snapshot();
    assert_eq!(snap.running_jobs, 1, "{snap:?}");
    assert_eq!(snap.queued_jobs, 2, "{snap:?}");
    assert_eq!(snap.workers[0].state, SlotState::Busy);

    let mut ends = Vec::new();
    let mut pids = Vec::new();
    for task in tasks {
        let (out, end) = task.await.unwrap();
        pids.push(payload(&out.unwrap())["pid"].clone());
        ends.push(end.duration_since(started));
    }
    // One at a time on the same worker: the last finishes after ≥ 3 × 200 ms.
    assert!(pids.windows(2).all(|p| p[0] == p[1]));
    ends.sort();
    assert!(ends[2] >= Duration::from_millis(600), "{ends:?}");
    assert!(ends[1] >= Duration::from_millis(400), "{ends:?}");
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_are_dequeued_and_running_ones_soft_cancelled() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let pid = worker_pid(&supervisor);
    let spawn_run = |id: &'static str, ms| {
        let s = Arc::clone(&supervisor);
        tokio::spawn(async move { s.run(sleep_job(id, ms, 10), mpsc::channel(8).0).await })
    };
    let first = spawn_run("busy", 60_000);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let queued = spawn_run("waiting", 10);
    tokio::time::sleep(Duration::from_millis(50)).await;

    assert_eq!(
        supervisor.kill_job("waiting").await,
        Ok(KillOutcome::Dequeued)
    );
    assert_eq!(
        queued.await.unwrap(),
        Err(SupervisorError::Cancelled {
            job_id: "waiting".into(),
            how: CancelKind::Dequeued
        })
    );
    assert_eq!(
        supervisor.cancel_job("busy").await,
        Ok(CancelOutcome::Requested)
    );
    assert_eq!(
        first.await.unwrap(),
        Err(SupervisorError::Cancelled {
            job_id: "busy".into(),
            how: CancelKind::Soft
        })
    );
    // A soft cancel keeps the worker.
    assert_eq!(wait_idle(&supervisor, Duration::from_secs(2)).await, pid);
    assert_eq!(
        supervisor.cancel_job("nope").await,
        Err(SupervisorError::JobNotFound {
            job_id: "nope".into()
        })
    );
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_running_job_kills_its_worker_and_a_replacement_takes_over() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let pid = worker_pid(&supervisor);
    let (running, _progress) = running_long_job(&supervisor, "abandoned").await;
    running.abort();
    let deadline = Instant::now() + Duration::from_millis(500);
    while !exited(pid) {
        assert!(
            Instant::now() < deadline,
            "worker {pid} outlived its abandoned job"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let replacement = wait_idle(&supervisor, Duration::from_secs(5)).await;
    assert_ne!(replacement, pid);
    let outcome = supervisor
        .run(sleep_job("next", 10, 1), mpsc::channel(8).0)
        .await
        .unwrap();
    assert!(matches!(outcome, JobOutcome::Ok { .. }), "{outcome:?}");
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_misses_heartbeats_and_is_replaced() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let pid = worker_pid(&supervisor);
    let (running, _progress) = running_long_job(&supervisor, "frozen").await;
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("heartbeat timeout not detected")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err,
            SupervisorError::WorkerDied {
                cause: DeathCause::HeartbeatTimeout { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(exited(pid));
    let new_pid = wait_idle(&supervisor, Duration::from_secs(5)).await;
    assert_ne!(new_pid, pid);
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_run_two_jobs_at_once() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(2, base.path())).await.unwrap());
    let started = Instant::now();
    let runs: Vec<_> = (0..2)
        .map(|i| {
            let s = Arc::clone(&supervisor);
            tokio::spawn(async move {
                s.run(sleep_job(&format!("p{i}"), 400, 2), mpsc::channel(8).0)
                    .await
            })
        })
        .collect();
    let mut pids = Vec::new();
    for run in runs {
        pids.push(payload(&run.await.unwrap().unwrap())["pid"].clone());
    }
    assert_ne!(pids[0], pids[1]);
    assert!(
        started.elapsed() < Duration::from_millis(780),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 2);
    supervisor.shutdown().await;
    assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_supervisor_kills_its_workers() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(config(2, base.path())).await.unwrap();
    let pids: Vec<u32> = supervisor
        .snapshot()
        .workers
        .iter()
        .map(|w| w.pid.unwrap())
        .collect();
    drop(supervisor);
    let deadline = Instant::now() + Duration::from_secs(2);
    while !pids.iter().all(|&p| exited(p)) {
        assert!(
            Instant::now() < deadline,
            "workers {pids:?} survived the drop"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_fails_cleanly_for_a_missing_or_mute_worker_binary() {
    let base = tempfile::tempdir().unwrap();
    let missing = SupervisorConfig {
        worker_exe: "/nonexistent/reticle-worker".into(),
        ..config(1, base.path())
    };
    assert!(matches!(
        Supervisor::start(missing).await,
        Err(SupervisorError::Spawn { .. })
    ));
    // A binary that exits without a hello.
    let mute = SupervisorConfig {
        worker_exe: "true".into(),
        ..config(1, base.path())
    };
    match Supervisor::start(mute).await {
        Err(SupervisorError::Handshake(message)) => assert!(message.contains("exited")),
        other => panic!("expected a handshake failure, got {:?}", other.err()),
    }
}

/// Environment variable that turns [`helper_host_for_orphan_test`] into a host.
const HELPER_ENV: &str = "RETICLE_TEST_SUPERVISOR_HELPER";

/// Not a test on its own: when re-executed by
/// [`workers_die_when_the_host_is_sigkilled`] with `HELPER_ENV` set, this process
/// plays the host: it starts a supervisor, prints the worker pid and waits to be
/// killed. Run normally (without the variable) it returns at once.
#[test]
#[ignore = "helper process for workers_die_when_the_host_is_sigkilled"]
fn helper_host_for_orphan_test() {
    let Some(base) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let supervisor = Supervisor::start(config(1, std::path::Path::new(&base)))
            .await
            .unwrap();
        println!("WORKER_PID={}", worker_pid(&supervisor));
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(supervisor);
    });
}

#[test]
fn workers_die_when_the_host_is_sigkilled() {
    use std::io::BufRead;
    let base = tempfile::tempdir().unwrap();
    let mut host = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_host_for_orphan_test",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER_ENV, base.path())
        .env("RETICLE_WORKER_BIN", worker_exe())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    let mut worker = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(pid) = line.strip_prefix("WORKER_PID=") {
            worker = Some(pid.trim().parse::<u32>().unwrap());
            break;
        }
    }
    let worker = worker.expect("helper host printed no worker pid");
    assert!(!exited(worker));
    host.kill().unwrap(); // SIGKILL: no destructor, no shutdown runs in the host
    host.wait().unwrap();
    let killed = Instant::now();
    while !exited(worker) {
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "worker {worker} orphaned"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_the_time_limit_is_killed_with_a_resource_fault() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(SupervisorConfig {
        job_timeout: Some(Duration::from_millis(600)),
        ..config(1, base.path())
    })
    .await
    .unwrap();
    let pid = wait_idle(&supervisor, Duration::from_secs(15)).await;
    let (tx, _rx) = mpsc::channel(64);
    let started = Instant::now();
    let err = supervisor
        .run(sleep_job("slow", 60_000, 600), tx)
        .await
        .expect_err("the job must be stopped");
    let took = started.elapsed();
    let SupervisorError::WorkerDied { cause, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(cause, DeathCause::OverLimit { limit: ResourceLimit::WallTime, allowed: 600, used } if *used >= 600),
        "{cause:?}"
    );
    assert!(!cause.replayable());
    // Detected at a heartbeat tick (200 ms here) after the limit.
    assert!(took < Duration::from_secs(3), "{took:?}");
    let tool = err.to_tool_error();
    assert_eq!(tool.code.as_str(), "RESOURCE_LIMIT");
    assert_eq!(tool.details["cause"]["limit"], "wall_time");
    assert!(exited(pid), "the worker over its limit is gone");
    // A replacement takes the next job.
    let (tx, _rx) = mpsc::channel(64);
    let next = supervisor.run(sleep_job("next", 10, 1), tx).await.unwrap();
    assert_eq!(payload(&next)["slept_ms"], 10);
    assert_ne!(worker_pid(&supervisor), pid);
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_over_the_memory_limit_is_killed_and_replaced() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(SupervisorConfig {
        memory_limit_bytes: Some(150 << 20),
        ..config(1, base.path())
    })
    .await
    .unwrap();
    let pid = wait_idle(&supervisor, Duration::from_secs(15)).await;
    // The worker grows to 200 MiB and keeps it: over the 150 MiB resident limit, well
    // under its 300 MiB RLIMIT_DATA (so this is the resident check, not the kernel's
    // refusal, whatever the worker's thread stacks take). Caught while allocating, or, if the
    // allocation beat the next heartbeat tick, at the first tick of its next job (an
    // idle worker is not checked).
    let (tx, _rx) = mpsc::channel(64);
    let grow = supervisor
        .run(
            job(
                "grow",
                "debug.alloc",
                serde_json::json!({"bytes": 200u64 << 20}),
            ),
            tx,
        )
        .await;
    let err = match grow {
        Err(e) => e,
        Ok(alloc) => {
            assert_eq!(payload(&alloc)["held_bytes"], 200u64 << 20);
            let (tx, _rx) = mpsc::channel(64);
            supervisor
                .run(sleep_job("victim", 60_000, 600), tx)
                .await
                .expect_err("the worker must be stopped")
        }
    };
    let SupervisorError::WorkerDied { cause, .. } = &err else {
        panic!("{err:?}")
    };
    match cause {
        DeathCause::OverLimit {
            limit: ResourceLimit::Memory,
            allowed,
            used,
        } => assert!(*used > *allowed && *allowed == 150 << 20, "{cause:?}"),
        other => panic!("{other:?}"),
    }
    let tool = err.to_tool_error();
    assert_eq!(tool.code.as_str(), "RESOURCE_LIMIT");
    assert!(tool.message.contains("memory limit"), "{}", tool.message);
    assert!(exited(pid));
    let (tx, _rx) = mpsc::channel(64);
    let next = supervisor.run(sleep_job("next", 10, 1), tx).await.unwrap();
    assert_eq!(payload(&next)["slept_ms"], 10);
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_lets_blue_finish_its_job_and_routes_new_jobs_to_green() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Arc::new(Supervisor::start(config(1, base.path())).await.unwrap());
    let blue_pid = worker_pid(&supervisor);
    let green = base.path().join("reticle-worker-green");
    std::fs::copy(worker_exe(), &green).unwrap();
    // A 1.5 s job is running on blue when the rollout starts.
    let (tx, _rx) = mpsc::channel(64);
    let s = Arc::clone(&supervisor);
    let blue_job = tokio::spawn(async move { s.run(sleep_job("blue", 1500, 3), tx).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let s = Arc::clone(&supervisor);
    let green_path = green.clone();
    let rollout = tokio::spawn(async move { s.rollout(&green_path).await });
    // While blue finishes, a new job must go to green, not wait for blue.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (tx, _rx) = mpsc::channel(64);
    let started = Instant::now();
    let quick = supervisor.run(sleep_job("green", 50, 1), tx).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the new job waited for blue: {:?}",
        started.elapsed()
    );
    payload(&quick);
    assert!(blue_job.await.unwrap().is_ok(), "blue's job must complete");
    let record = rollout.await.unwrap().expect("rollout succeeds");
    assert!(record.ok && record.release == 1, "{record:?}");
    let snap = supervisor.snapshot();
    assert_eq!(snap.workers.len(), 1, "{:?}", snap.workers);
    assert_eq!(snap.workers[0].exe, green.display().to_string());
    assert_ne!(snap.workers[0].pid, Some(blue_pid));
    assert!(exited(blue_pid), "blue was stopped");
    assert_eq!(
        snap.rollout.previous_exe,
        Some(worker_exe().display().to_string())
    );
    supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_whose_green_cannot_start_keeps_blue_serving() {
    let base = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::start(config(2, base.path())).await.unwrap();
    let blue: Vec<_> = supervisor
        .snapshot()
        .workers
        .iter()
        .map(|w| w.pid)
        .collect();
    let broken = base.path().join("broken-worker");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = supervisor.rollout(&broken).await.unwrap_err();
    assert!(
        matches!(&err, SupervisorError::Rollout { message, .. } if message.contains("exited with code 3")),
        "{err}"
    );
    assert_eq!(
        err.to_tool_error().fault_class,
        Some(libmcp::FaultClass::Rollout)
    );
    let snap = supervisor.snapshot();
    assert_eq!(snap.workers.iter().map(|w| w.pid).collect::<Vec<_>>(), blue);
    let last = snap.rollout.last.expect("a rollout record");
    assert!(!last.ok && last.exe == broken.display().to_string());
    assert_eq!(snap.rollout.state, "stable");
    // Not a file at all: refused before starting anything.
    assert!(supervisor.rollout(base.path()).await.is_err());
    // Nothing to roll back to yet.
    assert!(supervisor.rollback().await.is_err());
    let (tx, _rx) = mpsc::channel(64);
    payload(&supervisor.run(sleep_job("after", 10, 1), tx).await.unwrap());
    supervisor.shutdown().await;
}
