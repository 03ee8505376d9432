//! The real `reticle-worker` binary, driven over its socket the way the host drives it;
//! and its parts, through its library (`units`).

mod units;

use std::io::BufRead;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use reticle_protocol::error::ErrorCode;
use reticle_protocol::wire::{
    HostMessage, JobContext, JobLimits, JobOutcome, RunRequest, WIRE_VERSION,
    WORKER_PARENT_PID_ENV, WORKER_SOCKET_ENV, WireError, WorkerHello, WorkerMessage, read_message,
    write_message,
};

const WORKER: &str = env!("CARGO_BIN_EXE_reticle-worker");

fn accept_within(listener: &UnixListener, limit: Duration) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + limit;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "worker did not connect in {limit:?}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn wait_within(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("worker still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A worker started by this test process, connected and past its hello.
struct Worker {
    child: Child,
    stream: UnixStream,
    hello: WorkerHello,
    _dir: tempfile::TempDir,
}

impl Worker {
    fn start() -> Self {
        Self::start_on("cpu")
    }

    /// A worker on imaging backend `backend` (`RETICLE_BACKEND`).
    fn start_on(backend: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("w.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let child = Command::new(WORKER)
            .env(WORKER_SOCKET_ENV, &socket)
            .env(WORKER_PARENT_PID_ENV, std::process::id().to_string())
            .env("RETICLE_BACKEND", backend)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut stream = accept_within(&listener, Duration::from_secs(20));
        let hello = match read_message::<WorkerMessage>(&mut stream).unwrap() {
            WorkerMessage::Hello(hello) => hello,
            other => panic!("expected hello, got {other:?}"),
        };
        Self {
            child,
            stream,
            hello,
            _dir: dir,
        }
    }

    fn send(&mut self, message: &HostMessage) {
        write_message(&mut self.stream, message).unwrap();
    }

    fn recv(&mut self) -> WorkerMessage {
        read_message(&mut self.stream).unwrap()
    }

    fn run(&mut self, job_id: &str, op: &str, args: serde_json::Value) {
        self.send(&HostMessage::Run(request(job_id, op, args)));
    }

    /// Reads until the job's result; returns the progress seen on the way.
    fn result(&mut self, job_id: &str) -> (Vec<(u64, u64)>, JobOutcome) {
        let mut progress = Vec::new();
        loop {
            match self.recv() {
                WorkerMessage::Progress {
                    job_id: id,
                    done,
                    total,
                    ..
                } => {
                    assert_eq!(id, job_id);
                    progress.push((done, total));
                }
                WorkerMessage::Result {
                    job_id: id,
                    outcome,
                } => {
                    assert_eq!(id, job_id);
                    return (progress, outcome);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request(job_id: &str, op: &str, args: serde_json::Value) -> RunRequest {
    request_with_roots(job_id, op, args, &[])
}

fn request_with_roots(
    job_id: &str,
    op: &str,
    args: serde_json::Value,
    roots: &[&Path],
) -> RunRequest {
    RunRequest {
        job_id: job_id.to_owned(),
        op: op.to_owned(),
        args_json: args.to_string(),
        context: JobContext {
            artifact_dir: None,
            allowed_roots: roots.iter().map(|r| r.display().to_string()).collect(),
            limits: JobLimits::default(),
        },
    }
}

fn error_code(outcome: &JobOutcome) -> ErrorCode {
    match outcome {
        JobOutcome::Err { error } => error.code,
        JobOutcome::Ok { payload_json } => panic!("expected an error, got {payload_json}"),
    }
}

fn payload(outcome: &JobOutcome) -> serde_json::Value {
    match outcome {
        JobOutcome::Ok { payload_json } => serde_json::from_str(payload_json).unwrap(),
        JobOutcome::Err { error } => panic!("expected a result, got {error}"),
    }
}

#[test]
fn hello_run_with_progress_pong_and_shutdown() {
    let mut w = Worker::start();
    assert_eq!(w.hello.wire_version, WIRE_VERSION);
    assert_eq!(w.hello.pid, w.child.id());
    assert_eq!(w.hello.backend.kind, "cpu");

    w.run(
        "job_a",
        "debug.sleep",
        serde_json::json!({"ms": 200, "steps": 4}),
    );
    let started = Instant::now();
    let (progress, outcome) = w.result("job_a");
    assert!(started.elapsed() >= Duration::from_millis(190));
    let value = payload(&outcome);
    assert_eq!(value["slept_ms"], 200);
    assert_eq!(value["pid"], w.child.id());
    // Strictly increasing, ending at 4/4 (the worker may thin intermediate reports).
    assert!(progress.windows(2).all(|p| p[0].0 < p[1].0), "{progress:?}");
    assert_eq!(progress.last(), Some(&(4, 4)));

    w.send(&HostMessage::Ping { seq: 9 });
    match w.recv() {
        WorkerMessage::Pong {
            seq,
            jobs_run,
            device_bytes,
        } => {
            assert_eq!(seq, 9);
            assert_eq!(jobs_run, 1);
            assert_eq!(device_bytes, 0);
        }
        other => panic!("expected pong, got {other:?}"),
    }

    w.send(&HostMessage::Shutdown);
    let status = wait_within(&mut w.child, Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
}

#[test]
fn cancel_stops_a_running_job_quickly_and_the_worker_keeps_serving() {
    let mut w = Worker::start();
    w.run("job_long", "debug.sleep", serde_json::json!({"ms": 60_000}));
    std::thread::sleep(Duration::from_millis(100));
    let sent = Instant::now();
    w.send(&HostMessage::Cancel {
        job_id: "job_long".into(),
    });
    let (_, outcome) = w.result("job_long");
    assert_eq!(error_code(&outcome), ErrorCode::Cancelled);
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );

    w.run(
        "job_next",
        "debug.sleep",
        serde_json::json!({"ms": 10, "steps": 1}),
    );
    assert_eq!(payload(&w.result("job_next").1)["slept_ms"], 10);
}

#[test]
fn unknown_ops_bad_arguments_and_a_second_job_are_typed_errors() {
    let mut w = Worker::start();
    w.run("j1", "no.such.op", serde_json::json!({}));
    assert_eq!(error_code(&w.result("j1").1), ErrorCode::Unsupported);
    w.run("j2", "debug.sleep", serde_json::json!({"ms": "soon"}));
    assert_eq!(error_code(&w.result("j2").1), ErrorCode::InvalidInput);
    w.run("j3", "debug.sleep", serde_json::json!({"ms": 1, "typo": 1}));
    assert_eq!(error_code(&w.result("j3").1), ErrorCode::InvalidInput);

    // One job at a time: a second run while busy is refused, the first one completes.
    w.run(
        "j4",
        "debug.sleep",
        serde_json::json!({"ms": 300, "steps": 1}),
    );
    w.run("j5", "debug.sleep", serde_json::json!({"ms": 1}));
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let WorkerMessage::Result { job_id, outcome } = w.recv() {
            seen.push((job_id, outcome));
        }
    }
    assert_eq!(seen[0].0, "j5");
    assert_eq!(error_code(&seen[0].1), ErrorCode::InternalError);
    assert_eq!(seen[1].0, "j4");
    assert_eq!(payload(&seen[1].1)["slept_ms"], 300);
}

#[test]
fn engine_info_and_alloc_report_what_the_worker_holds() {
    let mut w = Worker::start();
    w.run("a", "debug.alloc", serde_json::json!({"bytes": 8 << 20}));
    assert_eq!(payload(&w.result("a").1)["held_bytes"], 8 << 20);
    w.run("i", "engine.info", serde_json::json!({}));
    let info = payload(&w.result("i").1);
    assert_eq!(info["held_bytes"], 8 << 20);
    assert_eq!(info["pid"], w.child.id());
    assert_eq!(info["backend"]["kind"], "cpu");
    assert_eq!(info["jobs_run"], 1);
    let ops: Vec<&str> = info["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "debug.alloc",
            "debug.crash",
            "debug.malformed",
            "debug.sleep",
            "demo.render",
            "drc.markers",
            "drc.run",
            "engine.info",
            "evaluate",
            "evaluate.merge",
            "evaluate.page",
            "evaluate.plan",
            "evaluate.tile",
            "layout.analyze_waveguide",
            "layout.describe_cell",
            "layout.list_cells",
            "layout.list_layers",
            "layout.measure",
            "layout.open",
            "layout.query_region",
            "layout.render",
            "layout.set_view",
            "optimize",
            "optimize.compare",
            "optimize.merge",
            "optimize.plan",
            "optimize.put_back",
            "optimize.tile",
            "simulate",
            "simulate.merge",
            "simulate.plan",
            "simulate.tile",
        ]
    );
    w.run(
        "big",
        "debug.alloc",
        serde_json::json!({"bytes": 1u64 << 40}),
    );
    assert_eq!(error_code(&w.result("big").1), ErrorCode::ToolLimitExceeded);
}

#[test]
fn debug_crash_aborts_the_process() {
    let mut w = Worker::start();
    w.run("boom", "debug.crash", serde_json::json!({"after_ms": 50}));
    let status = wait_within(&mut w.child, Duration::from_secs(5));
    assert_eq!(status.signal(), Some(libc_sigabrt()), "{status:?}");
    // The socket closes with the process.
    loop {
        match read_message::<WorkerMessage>(&mut w.stream) {
            Ok(WorkerMessage::Progress { .. }) => continue,
            Err(WireError::Closed) => break,
            other => panic!("expected EOF, got {other:?}"),
        }
    }
}

fn libc_sigabrt() -> i32 {
    nix::sys::signal::Signal::SIGABRT as i32
}

#[test]
fn exits_when_the_host_closes_the_socket() {
    let mut w = Worker::start();
    w.run("busy", "debug.sleep", serde_json::json!({"ms": 60_000}));
    w.stream.shutdown(std::net::Shutdown::Both).unwrap();
    let status = wait_within(&mut w.child, Duration::from_secs(2));
    assert!(status.success(), "{status:?}");
}

#[test]
fn refuses_to_run_when_the_expected_parent_is_not_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("w.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let mut child = Command::new(WORKER)
        .env(WORKER_SOCKET_ENV, &socket)
        // Not our pid: as if the host had died before the worker armed its signal.
        .env(WORKER_PARENT_PID_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(3), "{status:?}");
}

/// State letter from `/proc/<pid>/stat`, `None` once the pid is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.trim_start().chars().next()
}

#[test]
fn dies_when_its_parent_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("w.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    // An intermediate parent: a shell that starts the worker, names its pid, and waits.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(r#"RETICLE_WORKER_PARENT_PID=$$ "$0" >/dev/null </dev/null & echo $!; wait"#)
        .arg(WORKER)
        .env(WORKER_SOCKET_ENV, &socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(shell.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let worker_pid: u32 = line.trim().parse().unwrap();
    // Keep the socket open: only the parent's death may stop the worker.
    let mut stream = accept_within(&listener, Duration::from_secs(20));
    assert!(matches!(
        read_message::<WorkerMessage>(&mut stream),
        Ok(WorkerMessage::Hello(_))
    ));
    assert!(matches!(proc_state(worker_pid), Some(c) if c != 'Z'));

    shell.kill().unwrap();
    shell.wait().unwrap();
    let killed = Instant::now();
    loop {
        match proc_state(worker_pid) {
            None | Some('Z') => break,
            Some(_) => {
                assert!(
                    killed.elapsed() < Duration::from_secs(2),
                    "worker {worker_pid} outlived its parent by 2 s"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    // The kernel closed its socket.
    assert!(matches!(
        read_message::<WorkerMessage>(&mut stream),
        Err(WireError::Closed)
    ));
}

#[test]
fn bench_placeholder_exits_2_and_prints_nothing_to_stdout() {
    let out = Command::new(WORKER).arg("bench").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn worker_without_a_socket_variable_exits_2() {
    let out = Command::new(WORKER)
        .env_remove(WORKER_SOCKET_ENV)
        .env_remove(WORKER_PARENT_PID_ENV)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(Path::new(WORKER).exists());
}

/// The worker re-checks paths against the job's roots itself (the host checked first):
/// nothing outside them is opened, not even through a symlink inside a root.
#[test]
fn simulate_reads_only_inside_the_job_roots() {
    let root = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/layouts/lines_and_pad.glp");
    let inside = root.path().join("clip.glp");
    std::fs::copy(&fixture, &inside).unwrap();
    let escape = root.path().join("escape.glp");
    std::os::unix::fs::symlink(&fixture, &escape).unwrap();
    let mut w = Worker::start();
    let cases: [(&str, &Path, &[&Path], ErrorCode); 4] = [
        ("no-roots", &inside, &[], ErrorCode::PathNotAllowed),
        (
            "outside",
            Path::new("/etc/passwd"),
            &[root.path()],
            ErrorCode::PathNotAllowed,
        ),
        (
            "symlink-out",
            &escape,
            &[root.path()],
            ErrorCode::PathNotAllowed,
        ),
        (
            "missing",
            &root.path().join("none.glp"),
            &[root.path()],
            ErrorCode::FileNotFound,
        ),
    ];
    for (id, layout, roots, code) in cases {
        let args = serde_json::json!({"layout": layout, "pixel_nm": 8.0});
        w.send(&HostMessage::Run(request_with_roots(
            id, "simulate", args, roots,
        )));
        assert_eq!(error_code(&w.result(id).1), code, "{id}");
    }
    // Inside the root it runs (the engine is the CPU path in these tests).
    let args = serde_json::json!({"layout": inside, "pixel_nm": 8.0});
    w.send(&HostMessage::Run(request_with_roots(
        "ok",
        "simulate",
        args,
        &[root.path()],
    )));
    let done = payload(&w.result("ok").1);
    assert!(
        done["metrics"]["epe"]["checkpoints"].as_u64().unwrap() > 0,
        "{done}"
    );
}

/// Runs `op` with `args` in artifact directory `dir` under `root` and returns its outcome.
fn run_in(
    w: &mut Worker,
    id: &str,
    op: &str,
    args: &serde_json::Value,
    dir: &Path,
    root: &Path,
) -> JobOutcome {
    let mut req = request_with_roots(id, op, args.clone(), &[root]);
    req.context.artifact_dir = Some(dir.display().to_string());
    w.send(&HostMessage::Run(req));
    w.result(id).1
}

/// The files of a job's tiles folder, by name.
fn tile_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir.join(reticle_protocol::wire::TILES_DIR))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_unit_of_several_tiles_writes_what_one_unit_per_tile_writes() {
    let batches = units_write_what_single_tiles_write("cpu");
    assert!(
        batches.iter().all(|&b| b <= 1),
        "the CPU path images one window at a time: {batches:?}"
    );
}

/// On the GPU path (lavapipe where there is no GPU) a unit's tiles go to the engine as one
/// batch (D257), and what they write is still what one tile a unit writes.
#[test]
fn a_gpu_worker_images_a_unit_as_one_batch_and_writes_what_single_tiles_write() {
    let batches = units_write_what_single_tiles_write("gpu");
    assert!(
        batches.iter().any(|&b| b >= 2),
        "no unit of three was imaged as one batch: {batches:?}"
    );
}

/// Evaluates the fixture's tiles on a worker of `backend`, first one tile a unit, then
/// in units of up to three, and checks the two write the same tile files; returns every
/// grouped tile's `timing.imaging_batch`.
fn units_write_what_single_tiles_write(backend: &str) -> Vec<u64> {
    let root = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/layouts/acceptance_100x4tiles.gds");
    let layout = root.path().join("layout.gds");
    std::fs::copy(&fixture, &layout).unwrap();
    let deck = root.path().join("deck.json");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/decks/acceptance_width.json"),
        &deck,
    )
    .unwrap();
    let (one, grouped) = (root.path().join("one"), root.path().join("grouped"));
    for d in [&one, &grouped] {
        std::fs::create_dir(d).unwrap();
    }
    let mut w = Worker::start_on(backend);
    assert_eq!(w.hello.backend.kind, backend, "{:?}", w.hello.backend);
    let mut args = serde_json::json!({"layout": layout, "deck": deck, "pixel_nm": 8.0});
    let planned = payload(&run_in(
        &mut w,
        "plan",
        "evaluate.plan",
        &args,
        &one,
        root.path(),
    ));
    let tiles = planned["tiles"].as_u64().unwrap();
    assert!(tiles >= 3, "{planned}");
    assert_eq!(planned["unit_tiles"], 8, "{planned}");
    args["plan"] = planned["plan"].clone();
    let mut found = 0;
    for n in 0..tiles {
        args["tile_number"] = n.into();
        let summary = payload(&run_in(
            &mut w,
            &format!("t{n}"),
            "evaluate.tile",
            &args,
            &one,
            root.path(),
        ));
        assert!(summary["tile"].is_string(), "{summary}");
        found += summary["found"].as_u64().unwrap();
    }
    assert!(found > 0, "the fixture's tiles found no violations");
    // The same tiles as units of up to three.
    let mut batches = Vec::new();
    let mut first = 0;
    while first < tiles {
        let count = 3.min(tiles - first);
        args["tile_number"] = first.into();
        args["tile_count"] = count.into();
        let summary = payload(&run_in(
            &mut w,
            &format!("g{first}"),
            "evaluate.tile",
            &args,
            &grouped,
            root.path(),
        ));
        let answered = if count == 1 {
            vec![summary.clone()]
        } else {
            summary["tiles"].as_array().unwrap().clone()
        };
        assert_eq!(answered.len() as u64, count, "{summary}");
        batches.extend(
            answered
                .iter()
                .map(|t| t["timing"]["imaging_batch"].as_u64().unwrap()),
        );
        first += count;
    }
    let (a, b) = (tile_files(&one), tile_files(&grouped));
    assert_eq!(a.len() as u64, tiles);
    assert_eq!(a, b, "the grouped units wrote other tile files");
    // A count past the plan's limit, or none, or past the plan's end is refused.
    for (id, number, count) in [("nine", 0, 9), ("zero", 0, 0), ("past", tiles - 1, 2)] {
        args["tile_number"] = number.into();
        args["tile_count"] = count.into();
        let outcome = run_in(&mut w, id, "evaluate.tile", &args, &grouped, root.path());
        assert_eq!(error_code(&outcome), ErrorCode::InvalidInput, "{id}");
    }
    batches
}
