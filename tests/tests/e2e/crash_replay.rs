//! Crash test (issue 5, seed 004 replay contracts): 200 `simulate` requests run on two
//! workers while a killer thread SIGKILLs workers at random moments. `simulate` is
//! Convergent, so every request must complete exactly once with the same numbers as
//! an undisturbed run, no response may be lost or duplicated, telemetry must count the
//! replays, and no worker may outlive the host.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reticle_tests::{Host, alive, check_jsonrpc_line, children_of, fixtures_dir};
use serde_json::{Value, json};

const REQUESTS: usize = 200;
/// The host's bound on runs of one job (`MAX_ATTEMPTS`, `reticle-dispatch`).
const MAX_ATTEMPTS: u32 = 3;

/// A small deterministic generator (the seed is printed, so a failure can be replayed).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn simulate_args() -> Value {
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    // 4 nm pixels: short jobs (tens of ms with warm kernels), but long enough that a kill
    // every 30–130 ms finds a busy worker often.
    json!({"layout": layout, "pixel_nm": 4.0, "wait": true, "render": "json"})
}

#[test]
fn workers_killed_at_random_moments_lose_and_duplicate_nothing() {
    let seed = std::env::var("RETICLE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash test seed {seed} (RETICLE_CRASH_SEED to replay)");
    let roots = fixtures_dir();
    let mut host = Host::start_with(&[
        ("RETICLE_ALLOWED_ROOTS", roots.to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
        ("RETICLE_WORKERS", "2"),
        // All REQUESTS are queued at once; the default cap on unfinished jobs (64) would
        // refuse most of them, and this test is about replay, not about that cap.
        ("RETICLE_MAX_ACTIVE_JOBS", "256"),
    ]);
    let host_pid = host.child.id();
    host.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // The undisturbed answer every replayed run must reproduce.
    let reference = host.request(
        json!("reference"),
        "tools/call",
        json!({"name": "simulate", "arguments": simulate_args()}),
    );
    assert_eq!(reference["result"]["isError"], false, "{reference}");
    let expected = reference["result"]["structuredContent"]["metrics"].clone();
    assert!(expected["epe"]["checkpoints"].as_u64().unwrap() > 0);

    for i in 0..REQUESTS {
        host.send(
            &json!({"jsonrpc": "2.0", "id": format!("sim-{i}"), "method": "tools/call",
            "params": {"name": "simulate", "arguments": simulate_args()}}),
        );
    }
    // At random moments, ask `health` which workers are busy and SIGKILL one of them.
    // A job on its last allowed attempt is spared: the host gives up on a job after
    // MAX_ATTEMPTS deaths (a job that keeps killing workers is poison), and this test
    // is about replay, not about that bound.
    let mut rng = Lcg(seed);
    let mut answers: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut killed = Vec::new();
    let mut spared = 0;
    let mut health_pending = false;
    let mut next_kill = Instant::now() + Duration::from_millis(30 + rng.below(100));
    let deadline = Instant::now() + Duration::from_secs(600);
    while answers.len() < REQUESTS {
        assert!(
            Instant::now() < deadline,
            "only {} of {REQUESTS} answered",
            answers.len()
        );
        if !health_pending && Instant::now() >= next_kill {
            host.send(&json!({"jsonrpc": "2.0", "id": format!("health-{}", killed.len() + spared),
                "method": "tools/call", "params": {"name": "health", "arguments": {"render": "json"}}}));
            health_pending = true;
        }
        let wait = next_kill
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(5), Duration::from_secs(5));
        let Some(line) = host.recv_line(wait) else {
            continue;
        };
        let message = check_jsonrpc_line(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let Some(id) = message["id"].as_str() else {
            continue;
        };
        if id.starts_with("health-") {
            health_pending = false;
            next_kill = Instant::now() + Duration::from_millis(30 + rng.below(100));
            let workers = message["result"]["structuredContent"]["workers"]["workers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let busy: Vec<(u32, u32)> = workers
                .iter()
                .filter(|w| w["state"] == "busy")
                .filter_map(|w| {
                    let attempt = w["current_job"]
                        .as_str()?
                        .rsplit_once('.')?
                        .1
                        .parse()
                        .ok()?;
                    Some((w["pid"].as_u64()? as u32, attempt))
                })
                .collect();
            if busy.is_empty() {
                continue;
            }
            let (victim, attempt) = busy[rng.below(busy.len() as u64) as usize];
            if attempt >= MAX_ATTEMPTS {
                spared += 1;
            } else if kill(Pid::from_raw(victim as i32), Signal::SIGKILL).is_ok() {
                killed.push(victim);
            }
            continue;
        }
        answers.entry(id.to_owned()).or_default().push(message);
    }
    eprintln!(
        "{} workers killed during {REQUESTS} jobs ({spared} spared on a last attempt)",
        killed.len()
    );
    assert!(
        killed.len() >= 5,
        "too few kills to mean anything: {}",
        killed.len()
    );

    for (id, got) in &answers {
        assert_eq!(got.len(), 1, "{id} answered {} times", got.len());
        let result = &got[0]["result"];
        assert_eq!(result["isError"], false, "{id}: {result}");
        assert_eq!(
            result["structuredContent"]["metrics"], expected,
            "{id}: a replay changed the result"
        );
    }
    // Late duplicates would arrive now, after every request was answered once.
    for line in host.drain_lines(Duration::from_millis(300)) {
        let message = check_jsonrpc_line(&line).unwrap();
        let is_health = message["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("health-"));
        assert!(
            message.get("id").is_none() || is_health,
            "an extra response after all were answered: {message}"
        );
    }

    let telemetry = host.request(
        json!("telemetry"),
        "tools/call",
        json!({"name": "telemetry", "arguments": {"render": "json"}}),
    );
    let jobs = &telemetry["result"]["structuredContent"]["jobs"];
    eprintln!("telemetry jobs: {jobs}");
    assert_eq!(jobs["completed"], REQUESTS as u64 + 1, "{jobs}");
    assert_eq!(jobs["failed"], 0, "{jobs}");
    let replays = jobs["replays"].as_u64().unwrap();
    // Each kill hits a busy worker, except when its job ended between the health
    // snapshot and the signal; those kills replay nothing.
    assert!(
        replays <= killed.len() as u64 && replays * 4 >= killed.len() as u64 * 3,
        "replays {replays} for {} kills",
        killed.len()
    );

    let workers = children_of(host_pid);
    let (status, _) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
    for pid in killed.iter().chain(&workers) {
        assert!(!alive(*pid), "worker {pid} outlived the host");
    }
}
