//! What a host reexec carries of the job table: every job as a [`JobRecord`], the
//! lifetime counters, and the handover itself ([`Jobs::detach_all`]); the next image
//! imports the finished jobs and re-runs the others under their ids ([`RestoredJob`]).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use reticle_protocol::ToolError;
use reticle_protocol::sync::lock;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::{JobEntry, JobProgress, JobStatus, JobView, Jobs};

/// A job as a reexec snapshot carries it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job id (kept: clients poll it).
    pub job_id: String,
    /// The tool that started it.
    pub tool: String,
    /// Status at the snapshot.
    pub status: JobStatus,
    /// Progress at the snapshot.
    pub progress: JobProgress,
    /// The result, when completed.
    pub result: Option<Value>,
    /// The error, when failed or cancelled.
    pub error: Option<ToolError>,
    /// Runs started so far.
    pub attempts: u32,
    /// Submission time, Unix ms.
    pub created_unix_ms: u64,
    /// Age at the snapshot.
    pub age_ms: u64,
    /// Time since it finished, at the snapshot.
    pub finished_ago_ms: Option<u64>,
    /// A TTL the caller asked for.
    pub requested_ttl_ms: Option<u64>,
    /// `render`/`detail` of the call.
    pub presentation: Map<String, Value>,
    /// Why it was cancelled.
    pub cancel_reason: Option<String>,
    /// How to run it again: `{"tool", "arguments"}` (unfinished jobs are re-run from
    /// this after a reexec; the tool's replay contract decides whether they may be).
    pub recipe: Option<Value>,
}

/// A job re-created after a reexec: the same id, history and attempts.
#[derive(Debug, Clone)]
pub struct RestoredJob {
    /// The job id to keep.
    pub job_id: String,
    /// Runs before the reexec (the next run counts as a replay).
    pub attempts: u32,
    /// Original submission time.
    pub created_unix_ms: u64,
    /// Original age at the snapshot (for TTLs).
    pub age_ms: u64,
}

impl Jobs {
    /// Every job, for a reexec snapshot.
    pub fn export(&self) -> Vec<JobRecord> {
        let entries = lock(&self.entries);
        let mut records: Vec<JobRecord> = entries
            .values()
            .map(|entry| {
                let view = self.view_of(entry);
                JobRecord {
                    job_id: view.job_id,
                    tool: view.tool,
                    status: view.status,
                    progress: view.progress,
                    result: view.result,
                    error: view.error,
                    attempts: view.attempts,
                    created_unix_ms: view
                        .created_at
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
                    age_ms: view.age_ms,
                    finished_ago_ms: entry
                        .finished
                        .map(|f| u64::try_from(f.elapsed().as_millis()).unwrap_or(u64::MAX)),
                    requested_ttl_ms: entry
                        .requested_ttl
                        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                    presentation: view.presentation,
                    cancel_reason: view.cancel_reason,
                    recipe: entry.recipe.clone(),
                }
            })
            .collect();
        records.sort_by(|a, b| {
            a.created_unix_ms
                .cmp(&b.created_unix_ms)
                .then(a.job_id.cmp(&b.job_id))
        });
        records
    }

    /// Puts a finished job from a reexec snapshot back in the table (unfinished ones are
    /// re-submitted through their tool with [`JobOptions::restore`] instead).
    pub fn import_finished(&self, record: JobRecord) {
        let now = Instant::now();
        let ago = |ms: u64| now.checked_sub(Duration::from_millis(ms)).unwrap_or(now);
        let created_at = SystemTime::UNIX_EPOCH + Duration::from_millis(record.created_unix_ms);
        let (tx, _) = watch::channel(JobView {
            job_id: record.job_id.clone(),
            tool: record.tool,
            status: record.status,
            progress: record.progress,
            result: record.result,
            error: record.error,
            age_ms: record.age_ms,
            attempts: record.attempts,
            created_at,
            updated_at: SystemTime::now(),
            retention: self.ttl,
            presentation: record.presentation,
            cancel_reason: record.cancel_reason,
        });
        lock(&self.entries).insert(
            record.job_id,
            JobEntry {
                view: tx,
                submitted: ago(record.age_ms),
                finished: Some(ago(record.finished_ago_ms.unwrap_or(0))),
                abort: None,
                requested_ttl: record.requested_ttl_ms.map(Duration::from_millis),
                recipe: record.recipe,
            },
        );
    }

    /// Stops every unfinished job's task without marking it (a reexec: the snapshot
    /// already holds the jobs, and the next image re-runs them). Their workers are
    /// killed as their futures drop; waiters see no change.
    ///
    /// Call it before aborting the calls that wait on these jobs: from here on a dropped
    /// wait does not cancel its job, so the snapshot keeps the job unfinished.
    pub fn detach_all(&self) {
        self.handover.begin();
        let mut entries = lock(&self.entries);
        for entry in entries.values_mut() {
            if let Some(abort) = entry.abort.take() {
                abort.abort();
            }
        }
    }

    /// Adds lifetime counters carried by a reexec snapshot.
    pub fn restore_stats(&self, stats: &Value) {
        let n = |k: &str| stats[k].as_u64().unwrap_or(0);
        self.stats
            .submitted
            .store(n("submitted"), Ordering::Relaxed);
        self.stats
            .completed
            .store(n("completed"), Ordering::Relaxed);
        self.stats.failed.store(n("failed"), Ordering::Relaxed);
        self.stats
            .cancelled
            .store(n("cancelled"), Ordering::Relaxed);
        self.stats.replays.store(n("replays"), Ordering::Relaxed);
    }
}
