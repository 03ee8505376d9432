//! Long jobs end to end through real worker processes: `simulate` with progress,
//! as a job polled to completion, and [`reticle_tests::long_job`] cancelled for real
//! (the worker is killed and replaced, the next job succeeds).

use std::time::{Duration, Instant};

use reticle_tests::{Host, LONG_JOB_TOOL, alive, fixtures_dir, long_job, long_job_with};
use serde_json::{Value, json};

fn start() -> Host {
    let roots = fixtures_dir();
    let mut host = Host::start_with(&[
        ("RETICLE_ALLOWED_ROOTS", roots.to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
    ]);
    host.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host
}

fn layout() -> String {
    fixtures_dir()
        .join("layouts/lines_and_pad.glp")
        .display()
        .to_string()
}

fn call(host: &mut Host, id: &str, name: &str, arguments: Value) -> Value {
    let response = host.request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    );
    response["result"].clone()
}

fn poll_until_done(host: &mut Host, job_id: &str, timeout: Duration) -> Value {
    let started = Instant::now();
    let mut n = 0;
    loop {
        n += 1;
        let polled = call(
            host,
            &format!("poll-{n}"),
            "poll",
            json!({"job_id": job_id, "render": "json"}),
        );
        let status = polled["structuredContent"]["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        assert_ne!(status, "?", "{polled}");
        if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
            return polled["structuredContent"].clone();
        }
        assert!(
            started.elapsed() < timeout,
            "job {job_id} still {status} after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn busy_worker_pid(host: &mut Host) -> Option<u64> {
    let health = call(host, "health-pid", "health", json!({"render": "json"}));
    health["structuredContent"]["workers"]["workers"]
        .as_array()?
        .iter()
        .find(|w| w["state"] == "busy")
        .and_then(|w| w["pid"].as_u64())
}

#[test]
fn simulate_with_progress_token_streams_increasing_progress() {
    let mut host = start();
    host.send(
        &json!({"jsonrpc": "2.0", "id": "sim", "method": "tools/call", "params": {
        "name": "simulate", "arguments": {"layout": layout()}, "_meta": {"progressToken": "tok"}}}),
    );
    let mut progress = Vec::new();
    let result = loop {
        let message = host.recv();
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "tok");
            progress.push(message["params"]["progress"].as_f64().unwrap());
            continue;
        }
        if message["id"] == "sim" {
            break message["result"].clone();
        }
    };
    assert_eq!(result["isError"], false, "{result}");
    let payload = &result["structuredContent"];
    assert_eq!(payload["status"], "completed");
    assert!(payload["job_id"].as_str().unwrap().starts_with("job_"));
    assert!(!progress.is_empty(), "no progress notifications");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress not strictly increasing: {progress:?}"
    );
    assert_eq!(payload["grid"], json!({"width": 2048, "height": 2048}));
    let metrics = &payload["metrics"];
    // The drawn lines print (L2 is bounded by the area that changes), and the corners differ.
    assert!(
        metrics["l2_px"].as_u64().unwrap() < 2048 * 2048 / 4,
        "{metrics}"
    );
    assert!(metrics["pvb_px"].as_u64().unwrap() > 0, "{metrics}");
    assert!(
        metrics["epe"]["checkpoints"].as_u64().unwrap() > 20,
        "{metrics}"
    );
    assert_eq!(payload["backend"]["kind"], "cpu");
}

#[test]
fn simulate_without_token_returns_a_job_to_poll() {
    let mut host = start();
    let started = call(
        &mut host,
        "sim",
        "simulate",
        json!({"layout": layout(), "render": "json"}),
    );
    let handle = &started["structuredContent"];
    let job_id = handle["job_id"].as_str().expect("job_id").to_owned();
    assert!(
        matches!(handle["status"].as_str(), Some("queued" | "running")),
        "{handle}"
    );
    let done = poll_until_done(&mut host, &job_id, Duration::from_secs(240));
    assert_eq!(done["status"], "completed", "{done}");
    let first = done["result"]["metrics"].clone();
    // The same request waited on gives the same numbers (a worker is a pure function).
    let again = call(
        &mut host,
        "sim2",
        "simulate",
        json!({"layout": layout(), "wait": true}),
    );
    assert_eq!(again["structuredContent"]["metrics"], first);
}

#[test]
fn cancel_kills_the_worker_and_the_next_job_succeeds() {
    let mut host = start();
    let started = call(&mut host, "sim", LONG_JOB_TOOL, long_job());
    let job_id = started["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Wait until a worker is busy with it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Some(pid) = busy_worker_pid(&mut host) {
            break pid as u32;
        }
        assert!(Instant::now() < deadline, "no busy worker");
        std::thread::sleep(Duration::from_millis(10));
    };
    let cancelled = call(&mut host, "cancel", "cancel", json!({"job_id": job_id}));
    assert_eq!(
        cancelled["structuredContent"]["status"], "cancelled",
        "{cancelled}"
    );
    let killed_at = Instant::now();
    while alive(pid) {
        assert!(
            killed_at.elapsed() < Duration::from_millis(1000),
            "worker {pid} still alive after cancel"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let gone_after = killed_at.elapsed();
    eprintln!("worker {pid} gone {gone_after:?} after cancel");
    assert!(
        gone_after < Duration::from_millis(200),
        "worker took {gone_after:?} to die"
    );
    let polled = call(
        &mut host,
        "poll",
        "poll",
        json!({"job_id": job_id, "render": "json"}),
    );
    assert_eq!(polled["structuredContent"]["status"], "cancelled");
    let next = call(
        &mut host,
        "next",
        "simulate",
        json!({"layout": layout(), "wait": true}),
    );
    assert_eq!(next["structuredContent"]["status"], "completed", "{next}");
}

/// Sends a request and returns its response, failing on any response to `forbidden`.
fn request_never_answering(
    host: &mut Host,
    forbidden: &str,
    id: &str,
    name: &str,
    arguments: Value,
) -> Value {
    host.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}}));
    loop {
        let message = host.recv();
        assert_ne!(
            message["id"], forbidden,
            "a cancelled request was answered: {message}"
        );
        if message["id"] == id {
            return message["result"].clone();
        }
    }
}

fn wait_for_busy_worker(host: &mut Host) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = busy_worker_pid(host) {
            return pid as u32;
        }
        assert!(Instant::now() < deadline, "no busy worker");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_gone_within(pid: u32, limit: Duration, what: &str) {
    let since = Instant::now();
    while alive(pid) {
        assert!(
            since.elapsed() < Duration::from_secs(2),
            "worker {pid} still alive after {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = since.elapsed();
    eprintln!("worker {pid} gone {took:?} after {what}");
    assert!(took < limit, "worker took {took:?} to die after {what}");
}

#[test]
fn notifications_cancelled_kills_the_worker_and_the_request_is_never_answered() {
    let mut host = start();
    host.send(
        &json!({"jsonrpc": "2.0", "id": "sim", "method": "tools/call",
        "params": {"name": LONG_JOB_TOOL, "arguments": long_job_with(&[("wait", json!(true))])}}),
    );
    let pid = wait_for_busy_worker(&mut host);
    host.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "sim", "reason": "the user gave up"}}),
    );
    assert_gone_within(pid, Duration::from_millis(200), "notifications/cancelled");
    let telemetry = request_never_answering(
        &mut host,
        "sim",
        "t",
        "telemetry",
        json!({"render": "json"}),
    );
    let jobs = &telemetry["structuredContent"]["jobs"];
    assert_eq!(jobs["cancelled"], 1, "{jobs}");
    assert_eq!(jobs["by_status"]["cancelled"], 1, "{jobs}");
    assert!(jobs["by_status"].get("completed").is_none(), "{jobs}");
    let next = request_never_answering(
        &mut host,
        "sim",
        "next",
        "simulate",
        json!({"layout": layout(), "wait": true}),
    );
    assert_eq!(next["structuredContent"]["status"], "completed", "{next}");
    let (status, _) = host.close_and_wait();
    assert!(status.success());
    for line in host.drain_lines(Duration::from_millis(200)) {
        assert!(!line.contains("\"id\":\"sim\""), "{line}");
    }
}

#[test]
fn stdin_eof_kills_a_busy_worker_and_the_host_exits_within_a_second() {
    let mut host = start();
    let started = call(&mut host, "sim", LONG_JOB_TOOL, long_job());
    assert!(
        started["structuredContent"]["job_id"].is_string(),
        "{started}"
    );
    let pid = wait_for_busy_worker(&mut host);
    let (status, took) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(1), "EOF exit took {took:?}");
    // The host reaps its workers before exiting: nothing is left once it is gone.
    assert!(!alive(pid), "worker {pid} outlived the host");
}
