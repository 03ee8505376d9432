//! [`JobReporter`]: the job's side of its entry in the table.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde_json::json;
use tokio::sync::watch;

use super::{JobProgress, JobStats, JobStatus, JobView};
use crate::events::EventLog;

/// What a running job uses to report to its entry in the table: progress (which only
/// moves forward), the runs started on workers, and that it got a worker.
///
/// Clones report for the same job. One job may run several units concurrently (each its
/// own attempt sequence, see [`crate`]): the first run of the job counts as
/// its first attempt, every replay of any unit as one more.
#[derive(Debug, Clone)]
pub struct JobReporter {
    pub(super) tx: watch::Sender<JobView>,
    pub(super) stats: Arc<JobStats>,
    pub(super) events: Option<Arc<EventLog>>,
    /// Whether any unit of the job has started a run (shared by the clones).
    pub(super) started: Arc<AtomicBool>,
}

impl JobReporter {
    /// Records progress; a value below the last one is ignored (monotonic).
    pub fn report(&self, done: f64, total: Option<f64>, message: Option<String>) {
        self.tx.send_if_modified(|view| {
            if done < view.progress.done || view.status.is_terminal() {
                return false;
            }
            view.progress = JobProgress {
                done,
                total,
                message,
            };
            view.updated_at = SystemTime::now();
            true
        });
    }

    /// The job's id.
    pub fn job_id(&self) -> String {
        self.tx.borrow().job_id.clone()
    }

    /// Records that a unit of the job starts a run on a worker: `replay` when the unit
    /// runs again after its worker died. The job's first run and every replay count as
    /// an attempt; a replay (or the first run of a job restored after a reexec, which
    /// had attempts before) is counted in `telemetry` and recorded in the event log.
    pub fn attempt(&self, replay: bool) {
        let first = !self.started.swap(true, Ordering::SeqCst);
        if !(first || replay) {
            // Another unit of a job that is already running: not a new attempt.
            return;
        }
        self.tx.send_modify(|view| {
            view.attempts += 1;
            view.updated_at = SystemTime::now();
            if view.attempts > 1 {
                self.stats.replays.fetch_add(1, Ordering::Relaxed);
                record(&self.events, view, "replay");
            }
        });
    }

    /// Runs started so far (see [`Self::attempt`]).
    pub fn attempts(&self) -> u32 {
        self.tx.borrow().attempts
    }

    /// Marks the job running (it got a worker).
    pub fn running(&self) {
        self.tx.send_if_modified(|view| {
            if view.status == JobStatus::Queued {
                view.status = JobStatus::Running;
                view.updated_at = SystemTime::now();
                record(&self.events, view, "running");
                true
            } else {
                false
            }
        });
    }
}

/// One `job` record in the event log.
pub(super) fn record(events: &Option<Arc<EventLog>>, view: &JobView, transition: &str) {
    if let Some(events) = events {
        events.record(
            "job",
            json!({
                "job_id": view.job_id,
                "tool": view.tool,
                "transition": transition,
                "status": view.status,
                "attempts": view.attempts,
                "error": view.error.as_ref().map(|e| e.code),
                "cancel_reason": view.cancel_reason,
            }),
        );
    }
}
