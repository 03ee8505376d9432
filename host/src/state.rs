//! Host-wide state shared by the transport loop and the tools.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use libmcp::{
    Generation, HealthSnapshot, LifecycleState, OperationalLedger, RpcMethod, TelemetrySnapshot,
    WorkerHandshakePhase,
};
use serde_json::{Value, json};

use crate::assets::SchemaCatalog;
use crate::confine::AllowedRoots;

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

    fn snapshot(&self) -> Value {
        json!({
            "lines_read": self.lines_read.load(Ordering::Relaxed),
            "oversize_rejected": self.oversize_rejected.load(Ordering::Relaxed),
            "parse_errors": self.parse_errors.load(Ordering::Relaxed),
            "invalid_requests": self.invalid_requests.load(Ordering::Relaxed),
        })
    }
}

/// State of one host process.
#[derive(Debug)]
pub struct HostState {
    started: Instant,
    ledger: Mutex<OperationalLedger>,
    /// Transport counters.
    pub frames: FrameCounters,
    in_flight: AtomicU64,
    /// Path of the JSONL log file, when file logging is on.
    pub log_file: Option<PathBuf>,
    /// Published schemas (read once at start).
    pub schemas: SchemaCatalog,
    /// What tools may read.
    pub roots: AllowedRoots,
    /// Layout sessions and their artifacts (seed 003).
    pub sessions: crate::sessions::Sessions,
    /// The connection's violation cache (seed 000 §5, D46).
    pub violations: crate::violation_cache::ViolationCache,
}

impl HostState {
    /// Fresh state.
    pub fn new(log_file: Option<PathBuf>, schemas: SchemaCatalog, roots: AllowedRoots) -> Self {
        Self {
            schemas,
            roots,
            sessions: crate::sessions::Sessions::from_env(),
            violations: crate::violation_cache::ViolationCache::default(),
            started: Instant::now(),
            ledger: Mutex::new(OperationalLedger::new(Generation::genesis())),
            frames: FrameCounters::default(),
            in_flight: AtomicU64::new(0),
            log_file,
        }
    }

    /// Milliseconds since start.
    pub fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn with_ledger<T>(&self, f: impl FnOnce(&mut OperationalLedger) -> T) -> T {
        let mut ledger = self
            .ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut ledger)
    }

    /// Records the start of a request to `method`; the returned guard records its end.
    pub fn begin(&self, method: &str) -> RequestRecord<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let method = RpcMethod::try_new(method).ok();
        if let Some(method) = &method {
            self.with_ledger(|l| {
                if let Err(e) = l.record_request(method.clone()) {
                    tracing::warn!(error = %e, "telemetry counter");
                }
            });
        }
        RequestRecord {
            state: self,
            method,
            started: Instant::now(),
            finished: false,
        }
    }

    /// Requests being processed now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// libmcp's health view of the host.
    pub fn health(&self) -> HealthSnapshot {
        let uptime = self.uptime_ms();
        self.with_ledger(|l| {
            l.health_snapshot(
                uptime,
                LifecycleState::Ready,
                WorkerHandshakePhase::Absent,
                None,
            )
        })
    }

    /// libmcp's telemetry view of the host.
    pub fn telemetry(&self) -> TelemetrySnapshot {
        let uptime = self.uptime_ms();
        self.with_ledger(|l| {
            l.telemetry_snapshot(uptime, LifecycleState::Ready, WorkerHandshakePhase::Absent)
        })
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
        })
    }
}

/// Outcome bookkeeping for one request; records an error if dropped unfinished
/// (the request was cancelled or its task aborted).
#[derive(Debug)]
pub struct RequestRecord<'a> {
    state: &'a HostState,
    method: Option<RpcMethod>,
    started: Instant,
    finished: bool,
}

impl RequestRecord<'_> {
    /// Records a success.
    pub fn success(mut self) {
        self.finish(None);
    }

    /// Records an error with a short detail.
    pub fn error(mut self, detail: &str) {
        self.finish(Some(detail));
    }

    fn finish(&mut self, error: Option<&str>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
        let Some(method) = &self.method else { return };
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
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
}

impl Drop for RequestRecord<'_> {
    fn drop(&mut self) {
        self.finish(Some("cancelled"));
    }
}
