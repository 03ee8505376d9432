//! Readiness and shutdown (seed 001 §3, §10): the ready file, `mcp:ready` on
//! stderr, EOF exits within 1 s, SIGTERM/SIGINT exit 0, and no process is left
//! behind.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reticle_tests::{Host, alive, children_of};
use serde_json::json;

fn pid_of(host: &Host) -> u32 {
    host.child.id()
}

#[test]
fn ready_file_and_banner() {
    let mut host = Host::start();
    let text = std::fs::read_to_string(host.ready_file()).unwrap();
    let (pid, stamp) = text.trim_end().split_once(' ').expect("`<pid> <ISO8601>`");
    assert_eq!(pid, pid_of(&host).to_string());
    assert!(
        stamp.len() >= 20 && stamp.contains('T'),
        "timestamp {stamp:?}"
    );
    assert!(text.ends_with('\n'));
    assert!(
        host.stderr().contains("mcp:ready mode=stdio"),
        "{}",
        host.stderr()
    );
    let ping = host.request(json!("p"), "ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    let (status, _) = host.close_and_wait();
    assert!(status.success());
}

#[test]
fn eof_exits_within_one_second_and_leaves_nothing_behind() {
    let mut host = Host::start();
    let pid = pid_of(&host);
    host.request(json!(1), "tools/call", json!({"name": "health"}));
    let children = children_of(pid);
    let (status, took) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    assert!(!host.ready_file().exists(), "ready file left behind");
    for child in children {
        assert!(!alive(child), "child {child} outlived the host");
    }
    // The JSONL log was written and every line is JSON.
    let log =
        std::fs::read_to_string(host.dir.path().join("logs/reticle.jsonl")).expect("JSONL log");
    assert!(log.lines().count() >= 2);
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}

fn signal_exits_cleanly(signal: Signal) {
    let mut host = Host::start();
    let pid = pid_of(&host);
    // The host answers, then the signal arrives while it idles. (Draining a
    // request that is still running is covered by the job tests, which have
    // long-running tools.)
    let answer = host.request(json!("before"), "tools/call", json!({"name": "telemetry"}));
    assert!(answer.get("result").is_some(), "{answer}");
    kill(Pid::from_raw(pid as i32), signal).unwrap();
    let started = Instant::now();
    let (status, took) = host.wait_exit(started, Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(0),
        "{signal:?} → {status:?}; stderr:\n{}",
        host.stderr()
    );
    assert!(
        took < Duration::from_secs(5),
        "{signal:?} exit took {took:?}"
    );
    assert!(
        !host.ready_file().exists(),
        "ready file left behind after {signal:?}"
    );
}

#[test]
fn sigterm_drains_and_exits_zero() {
    signal_exits_cleanly(Signal::SIGTERM);
}

#[test]
fn sigint_drains_and_exits_zero() {
    signal_exits_cleanly(Signal::SIGINT);
}
