//! Host-wide state shared by the transport loop, the tools and the control socket:
//! the operational ledger (libmcp), latency windows, transport counters, the event
//! log, and what the worker pool reported (faults, restarts, rollouts).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libmcp::{
    Fault, FaultClass, FaultCode, Generation, HealthSnapshot, LifecycleState, OperationalLedger,
    RecoveryHint, RolloutState, RpcMethod, TelemetrySnapshot, WorkerHandshakePhase,
};
use reticle_protocol::sync::lock;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use reticle_assets::SchemaCatalog;
use reticle_config::Config;
use reticle_dispatch::events::{EventLog, iso_now, unix_ms};
use reticle_dispatch::handover::Handover;
use reticle_dispatch::supervisor::{SlotState, SupervisorEvent};
use reticle_dispatch::workers::WorkerPool;

/// Latency samples kept per method for the percentiles (the most recent ones).
pub const LATENCY_WINDOW: usize = 2048;

/// Transport counters (lines in, rejections).
#[derive(Debug, Default)]
pub struct FrameCounters {
    /// Lines read from stdin (including rejected ones).
    pub lines_read: AtomicU64,
    /// Lines rejected before parsing for exceeding the size limit.
    pub oversize_rejected: AtomicU64,
    /// Lines that were not JSON.
    pub parse_errors: AtomicU64,
    /// JSON that was not a valid request or notification.
    pub invalid_requests: AtomicU64,
}

impl FrameCounters {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn values(&self) -> [u64; 4] {
        [
            self.lines_read.load(Ordering::Relaxed),
            self.oversize_rejected.load(Ordering::Relaxed),
            self.parse_errors.load(Ordering::Relaxed),
            self.invalid_requests.load(Ordering::Relaxed),
        ]
    }

    fn snapshot(&self) -> Value {
        let [lines, oversize, parse, invalid] = self.values();
        json!({
            "lines_read": lines,
            "oversize_rejected": oversize,
            "parse_errors": parse,
            "invalid_requests": invalid,
        })
    }

    fn restore(&self, values: [u64; 4]) {
        self.lines_read.store(values[0], Ordering::Relaxed);
        self.oversize_rejected.store(values[1], Ordering::Relaxed);
        self.parse_errors.store(values[2], Ordering::Relaxed);
        self.invalid_requests.store(values[3], Ordering::Relaxed);
    }
}

/// What carries over a self-reexec: counters and history, so `health` and `telemetry`
/// continue rather than restart from zero.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateSnapshot {
    /// When the first process of this host started (Unix ms).
    pub started_unix_ms: u64,
    /// Reexecs so far (this one included once restored).
    pub reexecs: u64,
    /// libmcp's ledger.
    pub ledger: OperationalLedger,
    /// Recent latencies by method.
    pub latencies: BTreeMap<String, Vec<u64>>,
    /// Transport counters.
    pub frames: [u64; 4],
    /// The last error of any method.
    pub last_method_error: Option<Value>,
    /// The last fault that made the pool restart a worker.
    pub restart_fault: Option<Value>,
    /// Worker restarts so far.
    pub restarts: u64,
}

#[derive(Debug, Default)]
struct History {
    latencies: BTreeMap<String, VecDeque<u64>>,
    last_method_error: Option<Value>,
    restart_fault: Option<Value>,
    restarts: u64,
}

/// State of one host (across reexecs of the same process).
#[derive(Debug)]
pub struct HostState {
    started: Instant,
    started_unix_ms: u64,
    reexecs: AtomicU64,
    ledger: Mutex<OperationalLedger>,
    history: Mutex<History>,
    /// The host's handover flag: requests stopped once it is set are not finished
    /// here (the next image finishes their records).
    handover: Handover,
    /// Transport counters.
    pub frames: FrameCounters,
    in_flight: AtomicU64,
    /// Path of the JSONL `tracing` log file, when file logging is on.
    pub log_file: Option<PathBuf>,
    /// The operator's event log.
    pub events: Arc<EventLog>,
    /// Published schemas (read once at start).
    pub schemas: SchemaCatalog,
    /// The host's settings, read once at start by the composition root.
    config: Arc<Config>,
}

impl HostState {
    /// Fresh state.
    pub fn new(
        config: Arc<Config>,
        log_file: Option<PathBuf>,
        events: Arc<EventLog>,
        schemas: SchemaCatalog,
    ) -> Self {
        Self {
            schemas,
            config,
            started: Instant::now(),
            started_unix_ms: unix_ms(),
            reexecs: AtomicU64::new(0),
            ledger: Mutex::new(OperationalLedger::new(Generation::genesis())),
            history: Mutex::new(History::default()),
            handover: Handover::new(),
            frames: FrameCounters::default(),
            in_flight: AtomicU64::new(0),
            log_file,
            events,
        }
    }

    /// State continued from a reexec snapshot: uptime counts from the first start.
    pub fn restored(
        snapshot: StateSnapshot,
        config: Arc<Config>,
        log_file: Option<PathBuf>,
        events: Arc<EventLog>,
        schemas: SchemaCatalog,
    ) -> Self {
        let mut state = Self::new(config, log_file, events, schemas);
        let age = Duration::from_millis(unix_ms().saturating_sub(snapshot.started_unix_ms));
        state.started = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        state.started_unix_ms = snapshot.started_unix_ms;
        state.reexecs = AtomicU64::new(snapshot.reexecs + 1);
        state.ledger = Mutex::new(snapshot.ledger);
        state.frames.restore(snapshot.frames);
        state.history = Mutex::new(History {
            latencies: snapshot
                .latencies
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
            last_method_error: snapshot.last_method_error,
            restart_fault: snapshot.restart_fault,
            restarts: snapshot.restarts,
        });
        state
    }

    /// What a reexec carries over.
    pub fn snapshot(&self) -> StateSnapshot {
        let history = lock(&self.history);
        StateSnapshot {
            started_unix_ms: self.started_unix_ms,
            reexecs: self.reexecs.load(Ordering::Relaxed),
            ledger: lock(&self.ledger).clone(),
            latencies: history
                .latencies
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().copied().collect()))
                .collect(),
            frames: self.frames.values(),
            last_method_error: history.last_method_error.clone(),
            restart_fault: history.restart_fault.clone(),
            restarts: history.restarts,
        }
    }

    /// Milliseconds since the host first started (a reexec does not reset it).
    pub fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Self-reexecs this host went through.
    pub fn reexecs(&self) -> u64 {
        self.reexecs.load(Ordering::Relaxed)
    }

    fn with_ledger<T>(&self, f: impl FnOnce(&mut OperationalLedger) -> T) -> T {
        f(&mut lock(&self.ledger))
    }

    /// Records the start of request `id` to `method` (`tools/call:<tool>` for tool
    /// calls); the returned guard records its end in the ledger and the event log.
    pub fn begin(&self, method: &str, id: &Value) -> RequestRecord<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let ledger_method = RpcMethod::try_new(method).ok();
        if let Some(m) = &ledger_method {
            self.with_ledger(|l| {
                if let Err(e) = l.record_request(m.clone()) {
                    tracing::warn!(error = %e, "telemetry counter");
                }
            });
        }
        RequestRecord {
            state: self,
            method: method.to_owned(),
            ledger_method,
            id: id.clone(),
            started: Instant::now(),
            finished: false,
        }
    }

    /// Counts one replay of a request of `method` (its key, `tools/call:<tool>`) in the
    /// ledger's retry counts, per method and in total (seed 004). A replay after the
    /// request already answered (a job's unit) counts in `telemetry.dispatch.replays`
    /// only: the ledger counts retries of requests in flight.
    pub fn record_replay(&self, method: &str) {
        let Ok(method) = RpcMethod::try_new(method) else {
            return;
        };
        self.with_ledger(|l| {
            if let Err(e) = l.record_replay(&method) {
                tracing::debug!(error = %e, "replay not counted in the ledger");
            }
        });
    }

    /// Continues the record of request `id`, which a previous image began (its ledger
    /// count came with the snapshot): only the outcome is recorded here.
    pub fn resume(&self, method: &str, id: &Value) -> RequestRecord<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        RequestRecord {
            state: self,
            method: method.to_owned(),
            ledger_method: RpcMethod::try_new(method).ok(),
            id: id.clone(),
            started: Instant::now(),
            finished: false,
        }
    }

    /// From now on, requests that stop unfinished are being handed to the next image
    /// (reexec): their records stay open in the ledger the snapshot carries.
    pub fn begin_handover(&self) {
        self.handover.begin();
    }

    /// The host's settings: what every part of the server is configured with.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The host's one handover flag, for what else must know of it (the job table, a
    /// Slurm executor).
    #[must_use]
    pub fn handover(&self) -> &Handover {
        &self.handover
    }

    /// Requests being processed now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// libmcp's health view of the host, with the lifecycle, handshake and rollout
    /// state read from the worker pool.
    pub fn health(&self, workers: &WorkerPool) -> HealthSnapshot {
        let uptime = self.uptime_ms();
        let (state, handshake, rollout) = pool_phase(workers);
        self.with_ledger(|l| l.health_snapshot(uptime, state, handshake, Some(rollout)))
    }

    /// libmcp's telemetry view of the host.
    pub fn telemetry(&self, workers: &WorkerPool) -> TelemetrySnapshot {
        let uptime = self.uptime_ms();
        let (state, handshake, _) = pool_phase(workers);
        self.with_ledger(|l| l.telemetry_snapshot(uptime, state, handshake))
    }

    /// Per-method aggregates: counts from the ledger, p50/p95 over the latency window.
    pub fn method_aggregates(&self) -> Vec<Value> {
        let ledger = self.with_ledger(|l| {
            l.telemetry_snapshot(0, LifecycleState::Ready, WorkerHandshakePhase::Ready)
        });
        let history = lock(&self.history);
        ledger
            .methods
            .iter()
            .map(|m| {
                let name = m.method().as_str();
                let mut samples: Vec<u64> = history
                    .latencies
                    .get(name)
                    .map(|w| w.iter().copied().collect())
                    .unwrap_or_default();
                samples.sort_unstable();
                json!({
                    "method": name,
                    "count": m.request_count(),
                    "successes": m.success_count(),
                    "errors": m.error_count(),
                    "retries": m.retry_count(),
                    "in_flight": m.request_count() - m.success_count() - m.error_count(),
                    "p50_ms": percentile(&samples, 50),
                    "p95_ms": percentile(&samples, 95),
                    "max_ms": m.max_latency_ms(),
                    "avg_ms": m.avg_latency_ms(),
                    "samples": samples.len(),
                    "last_error": m.last_error(),
                })
            })
            .collect()
    }

    /// The last error of any method: `{method, error, at}`.
    pub fn last_method_error(&self) -> Option<Value> {
        lock(&self.history).last_method_error.clone()
    }

    /// The most recent fault that made the pool restart a worker.
    pub fn restart_fault(&self) -> Option<Value> {
        lock(&self.history).restart_fault.clone()
    }

    /// Worker restarts (replacements after a fault or a cancel-kill) so far.
    pub fn restarts(&self) -> u64 {
        lock(&self.history).restarts
    }

    /// Transport counters as JSON.
    pub fn frames_snapshot(&self) -> Value {
        self.frames.snapshot()
    }

    /// Process basics from `/proc/self` (zeros where unavailable).
    pub fn process_snapshot(&self) -> Value {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
        json!({
            "pid": std::process::id(),
            "rss_bytes": field("VmRSS:") * 1024,
            "threads": field("Threads:"),
            "open_fds": open_fds,
            "in_flight_requests": self.in_flight(),
            "reexecs": self.reexecs(),
        })
    }

    /// The host's worker pool, its events reported to this state ([`Self::on_pool_event`]),
    /// starting with the worker binaries `release` names.
    pub fn worker_pool(
        self: &Arc<Self>,
        release: reticle_dispatch::workers::ReleaseChoice,
    ) -> Arc<WorkerPool> {
        let state = Arc::clone(self);
        WorkerPool::with_hook(
            &self.config,
            reticle_dispatch::supervisor::EventHook::new(move |event| state.on_pool_event(event)),
            release,
        )
    }

    /// Records what the worker pool reported: in the event log, and faults, restarts
    /// and failed rollouts in the ledger (health's last fault, generation, restarts).
    pub fn on_pool_event(&self, event: &SupervisorEvent) {
        match event {
            SupervisorEvent::WorkerReady {
                slot,
                pid,
                generation,
                exe,
                version,
                backend,
                release,
            } => {
                self.events.record(
                    "worker.ready",
                    json!({"slot": slot, "worker_pid": pid, "generation": generation, "exe": exe,
                           "version": version, "backend": backend, "release": release}),
                );
            }
            SupervisorEvent::WorkerFault {
                slot,
                pid,
                cause,
                job_id,
            } => {
                let class = cause.fault_class();
                let detail = format!("worker {pid} (slot {slot}) {cause}");
                self.events.record(
                    "worker.fault",
                    json!({"slot": slot, "worker_pid": pid, "cause": cause, "class": class,
                           "code": cause.code(), "job_id": job_id, "detail": detail}),
                );
                self.record_fault(class, cause.code(), &detail);
                lock(&self.history).restart_fault = Some(json!({
                    "at": iso_now(), "slot": slot, "worker_pid": pid, "class": class,
                    "code": cause.code(), "cause": cause, "job_id": job_id, "detail": detail,
                }));
            }
            SupervisorEvent::WorkerRestart {
                slot,
                generation,
                delay_ms,
                after,
            } => {
                lock(&self.history).restarts += 1;
                self.with_ledger(|l| {
                    if let Ok(next) = l
                        .telemetry_snapshot(0, LifecycleState::Ready, WorkerHandshakePhase::Ready)
                        .generation
                        .next()
                        && let Err(e) = l.replace_worker(next)
                    {
                        tracing::warn!(error = %e, "ledger generation");
                    }
                });
                self.events.record(
                    "worker.restart",
                    json!({"slot": slot, "generation": generation, "delay_ms": delay_ms, "after": after}),
                );
            }
            SupervisorEvent::WorkerRetired { slot, release } => {
                self.events
                    .record("worker.retired", json!({"slot": slot, "release": release}));
            }
            SupervisorEvent::Rollout {
                step,
                exe,
                release,
                detail,
            } => {
                self.events.record(
                    "rollout",
                    json!({"step": step, "exe": exe, "release": release, "detail": detail}),
                );
                if *step == "failed" {
                    self.record_fault(
                        FaultClass::Rollout,
                        "rollout_failed",
                        detail.as_deref().unwrap_or("rollout failed"),
                    );
                }
            }
        }
    }

    fn record_fault(&self, class: FaultClass, code: &str, detail: &str) {
        self.with_ledger(|l| {
            let generation = l
                .telemetry_snapshot(0, LifecycleState::Ready, WorkerHandshakePhase::Ready)
                .generation;
            let Ok(code) = FaultCode::try_new(code) else {
                return;
            };
            let hint = (class != FaultClass::Rollout).then_some(RecoveryHint::ReplaceWorker);
            let fault = Fault::new(generation, class, code, hint, detail);
            if let Err(e) = l.record_recovery_fault(None, fault) {
                tracing::warn!(error = %e, "ledger fault");
            }
        });
    }
}

/// Lifecycle, handshake and rollout state of the pool.
fn pool_phase(workers: &WorkerPool) -> (LifecycleState, WorkerHandshakePhase, RolloutState) {
    let Some(pool) = workers.snapshot() else {
        return if workers.failed() {
            (
                LifecycleState::Cold,
                WorkerHandshakePhase::Failed,
                RolloutState::Stable,
            )
        } else if workers.started() {
            (
                LifecycleState::Starting,
                WorkerHandshakePhase::Starting,
                RolloutState::Stable,
            )
        } else {
            (
                LifecycleState::Cold,
                WorkerHandshakePhase::Absent,
                RolloutState::Stable,
            )
        };
    };
    let rollout = if pool.rollout.state == "reloading" {
        RolloutState::Reloading
    } else {
        RolloutState::Stable
    };
    let serving = pool
        .workers
        .iter()
        .any(|w| matches!(w.state, SlotState::Idle | SlotState::Busy));
    let recovering = pool
        .workers
        .iter()
        .any(|w| matches!(w.state, SlotState::Dead | SlotState::Starting));
    let (state, handshake) = match (serving, recovering) {
        (true, false) => (LifecycleState::Ready, WorkerHandshakePhase::Ready),
        (true, true) => (LifecycleState::Recovering, WorkerHandshakePhase::Ready),
        (false, true) => (LifecycleState::Recovering, WorkerHandshakePhase::Starting),
        (false, false) => (LifecycleState::Cold, WorkerHandshakePhase::Absent),
    };
    (state, handshake, rollout)
}

/// The `q`-th percentile (nearest rank) of sorted samples; `None` when empty.
fn percentile(sorted: &[u64], q: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Outcome bookkeeping for one request; records an error if dropped unfinished
/// (the request was cancelled or its task aborted).
#[derive(Debug)]
pub struct RequestRecord<'a> {
    state: &'a HostState,
    method: String,
    ledger_method: Option<RpcMethod>,
    id: Value,
    started: Instant,
    finished: bool,
}

impl RequestRecord<'_> {
    /// Records a success.
    pub fn success(mut self) {
        self.finish(None);
    }

    /// Records an error with a short detail (the tool error code or the JSON-RPC message).
    pub fn error(mut self, detail: &str) {
        self.finish(Some(detail));
    }

    fn finish(&mut self, error: Option<&str>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(method) = &self.ledger_method {
            self.state.with_ledger(|l| {
                let recorded = match error {
                    None => l.record_success(method, ms),
                    Some(detail) => l.record_error(method, ms, detail),
                };
                if let Err(e) = recorded {
                    tracing::warn!(error = %e, "telemetry counter");
                }
            });
        }
        {
            let mut history = lock(&self.state.history);
            let window = history.latencies.entry(self.method.clone()).or_default();
            if window.len() == LATENCY_WINDOW {
                window.pop_front();
            }
            window.push_back(ms);
            if let Some(detail) = error {
                history.last_method_error = Some(json!({
                    "method": self.method, "error": detail, "at": iso_now(),
                }));
            }
        }
        // The same order as the ledger: a client that saw the response finds both.
        self.state.events.record(
            "request",
            json!({
                "id": self.id,
                "method": self.method,
                "outcome": if error.is_some() { "error" } else { "ok" },
                "error": error,
                "latency_ms": ms,
            }),
        );
    }
}

impl Drop for RequestRecord<'_> {
    fn drop(&mut self) {
        if !self.finished && self.state.handover.started() {
            // Handed to the next image, which records the outcome (`resume`).
            self.finished = true;
            self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        self.finish(Some("cancelled"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&samples, 50), Some(50));
        assert_eq!(percentile(&samples, 95), Some(95));
        assert_eq!(percentile(&[7], 95), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn requests_reach_ledger_history_and_event_log_alike() {
        let dir = tempfile::tempdir().unwrap();
        let events = Arc::new(EventLog::open(
            reticle_dispatch::events::EventLogConfig {
                dir: dir.path().to_path_buf(),
                max_bytes: 1 << 20,
                keep: 1,
            },
            0,
        ));
        let config = Arc::new(reticle_config::Config::from_lookup(|_| None));
        let state = HostState::new(
            Arc::clone(&config),
            None,
            Arc::clone(&events),
            SchemaCatalog::load_with_examples(None, None),
        );
        state.begin("ping", &json!(1)).success();
        state
            .begin("tools/call:health", &json!(2))
            .error("INVALID_INPUT");
        drop(state.begin("tools/call:simulate", &json!("x")));
        let methods = state.method_aggregates();
        assert_eq!(methods.len(), 3);
        let (records, _) =
            reticle_dispatch::events::read_since(dir.path(), &reticle_dispatch::events::Since::All);
        let outcomes: Vec<&str> = records
            .iter()
            .map(|r| r["outcome"].as_str().unwrap())
            .collect();
        assert_eq!(outcomes, ["ok", "error", "error"]);
        assert_eq!(records[2]["error"], "cancelled");
        assert_eq!(
            state.last_method_error().unwrap()["method"],
            "tools/call:simulate"
        );
        let again = HostState::restored(
            state.snapshot(),
            config,
            None,
            events,
            SchemaCatalog::load_with_examples(None, None),
        );
        assert_eq!(again.reexecs(), 1);
        assert_eq!(again.method_aggregates(), state.method_aggregates());
    }
}
