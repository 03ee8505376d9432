//! The Slurm executor: the tiles of a whole-layout job run as one Slurm job array
//! (docs/DECISIONS.md D60–D63).
//!
//! Plans, merges and every other unit run on the local pool it wraps; the tiles go to
//! [`Executor::run_tiles`], which
//! 1. makes a private (0700) job directory under the shared directory, writes the
//!    manifest ([`BatchManifest`], paths checked against the allowed roots before it is
//!    written) and submits `sbatch --array=0-(E-1) … reticle-worker batch MANIFEST`
//!    (an argument vector: no shell ever parses a path), `tiles_per_task` tiles per
//!    element;
//! 2. follows the array with `squeue` every [`POLL`] and the tiles' outcome files in the
//!    job directory; a finished tile's output is moved into the job's artifact directory,
//!    where the merge (on the local pool) reads it exactly as after a local run;
//! 3. when an element ends (cancelled, failed, node lost) with tiles not done, asks the
//!    replay policy (`dispatch::replay`, the pool's) about each such tile, journaled in
//!    the tile's own track: a Convergent tile runs again in a new array (at most
//!    [`MAX_ATTEMPTS`] runs); an element the scheduler stopped over a limit
//!    (`OUT_OF_MEMORY`, `TIMEOUT`) is never resubmitted: the job fails with the limit's
//!    `RESOURCE_LIMIT` error, as on the pool;
//! 4. cancels every array of the job (`scancel --signal=KILL --full`, then `scancel`)
//!    when the future is dropped: a cancelled MCP job, a disconnect, Ctrl-C.
//!
//! `squeue` is the one source of element states (no accounting database needed: the
//! dev cluster runs without slurmdbd); an element that has left `squeue` altogether is
//! treated as ended.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reticle_protocol::batch::{BatchManifest, MANIFEST_VERSION, ranges_of};
use reticle_protocol::sync::lock;
use reticle_protocol::wire::JobOutcome;
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::MAX_ATTEMPTS;
use super::executor::{
    AttemptLoss, AttemptProgress, AttemptRequest, BatchStats, BoxFuture, Executor, ExecutorError,
    ExecutorHealth, TileBatch,
};
use super::replay::{AfterLoss, after_loss};
use crate::events::EventLog;
use crate::handover::Handover;
use crate::supervisor::{DeathCause, ResourceLimit, lost_run_error};
use reticle_journal::UnitJournal;

mod cli;
mod job_dir;

use cli::{cancel_arrays, sacct, squeue};
use job_dir::{Follow, FollowKey, job_dir, write_private};
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub use cli::{parse_sacct, parse_squeue, split_ranges};
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub use job_dir::{DONE_DIR, collect_outcomes, tile_output_name};

/// How often an array is polled.
pub const POLL: Duration = Duration::from_millis(250);

/// Most elements of one array: Slurm's default `MaxArraySize` is 1001 (indices 0–1000).
/// A batch needing more goes out as several arrays.
const MAX_ARRAY_ELEMENTS: u64 = 1000;

/// Consecutive failed `squeue` calls tolerated (40 polls: 10 s) before the job fails.
const SQUEUE_RETRIES: u32 = 40;

/// Element states after which an element runs no more.
const ENDED: &[&str] = &[
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "SPECIAL_EXIT",
    "REVOKED",
];

/// The Slurm settings the executor needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmSettings {
    /// `--partition` (`None`: the cluster's default).
    pub partition: Option<String>,
    /// `--account` (`None`: the user's default).
    pub account: Option<String>,
    /// `--time` of each element (`None`: the partition's).
    pub time_limit: Option<String>,
    /// Tiles each array element runs.
    pub tiles_per_task: u64,
    /// The shared directory job directories go under.
    pub shared_dir: PathBuf,
    /// The `reticle-worker` binary the nodes run (absolute).
    pub worker_bin: PathBuf,
    /// The whole environment `sbatch` runs with (and exports to the elements): what a
    /// pool worker gets from the host's environment snapshot (D33), the allocator
    /// settings, and `SLURM_CONF`, the one client setting sbatch itself needs.
    pub sbatch_env: Vec<(OsString, OsString)>,
}

impl SlurmSettings {
    /// The settings from the host's configuration (`RETICLE_SLURM_*`, the worker binary).
    #[must_use]
    pub fn from_config(config: &reticle_config::Config) -> Self {
        let e = &config.executor;
        let worker_bin = config
            .workers
            .worker_bin
            .clone()
            .unwrap_or_else(reticle_config::names::default_worker_exe);
        Self {
            partition: e.partition.clone(),
            account: e.account.clone(),
            time_limit: e.time_limit.clone(),
            tiles_per_task: e.tiles_per_task.max(1),
            shared_dir: e.shared_dir.clone(),
            worker_bin: worker_bin.canonicalize().unwrap_or(worker_bin),
            sbatch_env: sbatch_environment(&config.process.vars),
        }
    }
}

/// The environment `sbatch` runs with, from the host's environment `host`: the worker
/// allow-list's part of it and the allocator settings (so a tile is as fast on a node as
/// in the pool), then `SLURM_CONF`; never the host's whole environment (tokens, keys).
fn sbatch_environment(host: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let allocator: Vec<(OsString, OsString)> = crate::supervisor::WORKER_ALLOCATOR
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let mut env = crate::supervisor::worker_environment(host.iter().cloned(), &allocator);
    env.extend(host.iter().filter(|(k, _)| k == "SLURM_CONF").cloned());
    env
}

/// Marks the tiles of `manifest` (array `array`, the index in the batch's submissions) as
/// dispatched on their journal tracks (a track opens on a tile's first run) and records
/// which array runs each tile now.
fn dispatched(
    batch: &TileBatch,
    manifest: &BatchManifest,
    array: usize,
    tracks: &mut HashMap<u64, UnitJournal>,
    latest: &mut HashMap<u64, usize>,
) {
    for &[a, b] in &manifest.tiles {
        for t in a..b {
            tracks
                .entry(t)
                .or_insert_with(|| batch.tile_journal(t))
                .dispatched();
            latest.insert(t, array);
        }
    }
}

/// Element counts of one array, for health and telemetry.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
struct ArrayCounts {
    /// The reticle scope it runs for.
    scope: String,
    /// Elements waiting for a node.
    pending: u64,
    /// Elements running.
    running: u64,
    /// Elements that ended with all their tiles done.
    done: u64,
    /// Elements that ended with tiles not done (their tiles were submitted again).
    failed: u64,
}

/// Why an element that ended with tiles not done ended: a limit the scheduler enforced
/// (never replayed), or anything else (the replay policy decides).
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn element_cause(state: Option<&str>) -> DeathCause {
    let state = state.unwrap_or("GONE");
    let limit = match state {
        "OUT_OF_MEMORY" => Some(ResourceLimit::Memory),
        "TIMEOUT" => Some(ResourceLimit::WallTime),
        _ => None,
    };
    DeathCause::SchedulerEnded {
        state: state.to_owned(),
        limit,
    }
}

/// Runs plans and merges on the local pool, tiles as Slurm job arrays.
pub struct SlurmExecutor {
    local: Arc<dyn Executor>,
    settings: SlurmSettings,
    events: Option<Arc<EventLog>>,
    handover: Handover,
    arrays: Mutex<BTreeMap<String, ArrayCounts>>,
    submitted: AtomicU64,
    lost: AtomicU64,
    resubmitted: AtomicU64,
}

impl std::fmt::Debug for SlurmExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmExecutor")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn fault(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::WorkerFault, message)
}

impl SlurmExecutor {
    /// An executor sending tiles to Slurm and everything else to `local`; `events`
    /// records submissions, task failures and resubmissions. Once `handover` is set
    /// (reexec), a dropped batch leaves its arrays running for the next image (D63).
    #[must_use]
    pub fn new(
        local: Arc<dyn Executor>,
        settings: SlurmSettings,
        events: Option<Arc<EventLog>>,
        handover: Handover,
    ) -> Self {
        Self {
            local,
            settings,
            events,
            handover,
            arrays: Mutex::new(BTreeMap::new()),
            submitted: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            resubmitted: AtomicU64::new(0),
        }
    }

    fn event(&self, name: &str, fields: Value) {
        tracing::info!(event = name, %fields, "slurm");
        if let Some(events) = &self.events {
            events.record(name, fields);
        }
    }

    /// Submits `manifest` (already written at `path`) and returns the array's job id.
    async fn submit(&self, dir: &Path, path: &Path, elements: u64) -> Result<String, ToolError> {
        let s = &self.settings;
        let mut cmd = tokio::process::Command::new("sbatch");
        cmd.arg("--parsable")
            .arg("--job-name=reticle-tiles")
            .arg(format!("--array=0-{}", elements.saturating_sub(1)))
            .arg("--no-requeue")
            .arg("--ntasks=1")
            .arg("--cpus-per-task=1")
            .arg(format!("--chdir={}", dir.display()))
            // An element gets what a pool worker gets (D33): sbatch runs with the
            // worker's environment and exports it ([`SlurmSettings::sbatch_env`]).
            .env_clear()
            .envs(s.sbatch_env.iter().cloned())
            .arg("--export=ALL");
        let log = dir.display().to_string();
        if log.contains('%') || log.contains('\\') {
            cmd.arg("--output=/dev/null");
        } else {
            cmd.arg(format!("--output={log}/slurm-%A_%a.log"));
        }
        if let Some(p) = &s.partition {
            cmd.arg(format!("--partition={p}"));
        }
        if let Some(a) = &s.account {
            cmd.arg(format!("--account={a}"));
        }
        if let Some(t) = &s.time_limit {
            cmd.arg(format!("--time={t}"));
        }
        cmd.arg(dir.join("run.sh"))
            .arg(&s.worker_bin)
            .arg("batch")
            .arg(path)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = cmd.output().await.map_err(|e| {
            fault(format!("cannot run sbatch: {e}"))
                .with_hint("install Slurm's client commands, or RETICLE_EXECUTOR=local")
        })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let id = stdout.trim().split(';').next().unwrap_or("").to_owned();
        if !out.status.success() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fault(format!(
                "sbatch failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(id)
    }

    fn set_counts(&self, id: &str, counts: ArrayCounts) {
        lock(&self.arrays).insert(id.to_owned(), counts);
    }

    fn forget(&self, ids: &[String]) {
        let mut arrays = lock(&self.arrays);
        for id in ids {
            arrays.remove(id);
        }
    }

    async fn run_batch(
        &self,
        batch: TileBatch,
        done_tx: mpsc::UnboundedSender<u64>,
    ) -> (BatchStats, Result<(), ToolError>) {
        let mut stats = BatchStats::default();
        let result = self.follow_batch(&batch, &done_tx, &mut stats).await;
        (stats, result)
    }

    async fn follow_batch(
        &self,
        batch: &TileBatch,
        done_tx: &mpsc::UnboundedSender<u64>,
        stats: &mut BatchStats,
    ) -> Result<(), ToolError> {
        let artifact_dir = batch
            .context
            .artifact_dir
            .clone()
            .map(PathBuf::from)
            .ok_or_else(|| {
                ToolError::new(ErrorCode::InternalError, "tiles need an artifact directory")
            })?;
        let k = self.settings.tiles_per_task.max(1);
        let key = FollowKey {
            op: batch.op.clone(),
            args_json: batch.args_json.clone(),
            total: batch.total,
            tiles_per_task: k,
            allowed_roots: batch.context.allowed_roots.clone(),
        };
        let (dir, adopted) = job_dir(&self.settings.shared_dir, &batch.scope_id, &key)?;
        let mut guard = ArrayGuard {
            ids: Vec::new(),
            dir: dir.clone(),
            armed: true,
            handover: self.handover.clone(),
        };
        let mut context = batch.context.clone();
        context.artifact_dir = Some(dir.display().to_string());
        // Each tile's track in the request's journal: its runs, and what the host knows.
        let mut tracks: HashMap<u64, UnitJournal> = HashMap::new();
        // The array (index in `active`) that runs each tile now: only its loss counts.
        let mut latest: HashMap<u64, usize> = HashMap::new();
        let mut done: HashSet<u64> = HashSet::new();
        // Arrays being followed: job id → (manifest, elements already accounted for).
        let mut active: Vec<(String, BatchManifest, HashSet<u64>)> = Vec::new();
        let mut submission = 0u32;
        let mut to_submit: Vec<[u64; 2]> = vec![[0, batch.total]];
        let mut squeue_failures = 0u32;
        let mut follow = Follow {
            key,
            arrays: Vec::new(),
        };
        if let Some(previous) = adopted {
            // A host image before a reexec submitted these arrays: follow them on.
            for (id, file) in &previous.arrays {
                let manifest: BatchManifest = std::fs::read(dir.join(file))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .ok_or_else(|| fault(format!("{file} of an adopted batch is unreadable")))?;
                dispatched(batch, &manifest, active.len(), &mut tracks, &mut latest);
                guard.ids.push(id.clone());
                active.push((id.clone(), manifest, HashSet::new()));
            }
            submission = u32::try_from(previous.arrays.len()).unwrap_or(u32::MAX);
            follow.arrays = previous.arrays;
            to_submit.clear();
            self.event(
                "slurm.adopted",
                json!({"scope": batch.scope_id, "slurm_jobs": guard.ids, "dir": dir}),
            );
        } else {
            write_private(&dir.join("run.sh"), b"#!/bin/sh\nexec \"$@\"\n", 0o700)?;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.join("results"))
                .map_err(|e| fault(format!("cannot create results directory: {e}")))?;
            // A later wave's tiles read what the earlier waves left in the job's tiles
            // folder (an optimize's finished neighbours): the elements find it in theirs.
            job_dir::place_earlier_tiles(&artifact_dir, &dir)?;
        }
        loop {
            if !to_submit.is_empty() {
                // A resubmission, unless nothing was submitted yet.
                let resubmission = !follow.arrays.is_empty();
                let max_tiles = MAX_ARRAY_ELEMENTS * k;
                for chunk in split_ranges(&std::mem::take(&mut to_submit), max_tiles) {
                    submission += 1;
                    let manifest = BatchManifest {
                        version: MANIFEST_VERSION,
                        batch_id: format!("{}.s{submission}", batch.scope_id),
                        op: batch.op.clone(),
                        args_json: batch.args_json.clone(),
                        context: context.clone(),
                        tiles: chunk,
                        tiles_per_task: k,
                    };
                    manifest.check(&dir).map_err(|e| {
                        ToolError::new(ErrorCode::PathNotAllowed, format!("batch manifest: {e}"))
                    })?;
                    let path = dir.join(format!("manifest-{submission}.json"));
                    let bytes = serde_json::to_vec(&manifest)
                        .map_err(|e| fault(format!("manifest: {e}")))?;
                    write_private(&path, &bytes, 0o600)?;
                    let elements = manifest.elements();
                    let id = self.submit(&dir, &path, elements).await?;
                    guard.ids.push(id.clone());
                    // Persisted with the job: a host image after a reexec follows it on.
                    follow
                        .arrays
                        .push((id.clone(), format!("manifest-{submission}.json")));
                    follow.save(&dir)?;
                    // A first run; a replay's run was journaled by the policy.
                    dispatched(batch, &manifest, active.len(), &mut tracks, &mut latest);
                    stats.attempts += manifest.tile_count();
                    self.submitted.fetch_add(1, Ordering::Relaxed);
                    if resubmission {
                        stats.replays += manifest.tile_count();
                        self.resubmitted.fetch_add(1, Ordering::Relaxed);
                    }
                    self.event(
                        if !resubmission {
                            "slurm.submitted"
                        } else {
                            "slurm.resubmitted"
                        },
                        json!({"scope": batch.scope_id, "slurm_job": id, "elements": elements,
                           "tiles": manifest.tile_count(), "submission": submission,
                           "dir": dir}),
                    );
                    self.set_counts(
                        &id,
                        ArrayCounts {
                            scope: batch.scope_id.clone(),
                            pending: elements,
                            ..ArrayCounts::default()
                        },
                    );
                    active.push((id, manifest, HashSet::new()));
                }
            }
            // States first, then outcome files: an element seen ended has written all
            // the outcomes it ever will.
            let ids: Vec<String> = active.iter().map(|(id, _, _)| id.clone()).collect();
            let states = match squeue(&ids).await {
                Ok(states) => {
                    squeue_failures = 0;
                    states
                }
                // slurmctld restarting or busy: wait a few polls before giving up.
                Err(e) if squeue_failures < SQUEUE_RETRIES => {
                    squeue_failures += 1;
                    tracing::warn!(error = %e.message, squeue_failures, "squeue failed; retrying");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut states = states;
            collect_outcomes(&dir, &artifact_dir, &mut done, done_tx, &|tile| {
                if let Some(track) = tracks.get(&tile) {
                    track.completed();
                }
            })?;
            // Elements squeue no longer knows, with tiles not done: their final state is
            // in the accounting, when the cluster keeps one (OUT_OF_MEMORY, TIMEOUT: not
            // resubmitted; D192).
            let forgotten: Vec<String> = active
                .iter()
                .filter(|(id, manifest, accounted)| {
                    (0..manifest.elements()).any(|e| {
                        !accounted.contains(&e)
                            && !states.contains_key(&(id.clone(), e))
                            && manifest
                                .tiles_of_element(e)
                                .iter()
                                .any(|t| !done.contains(t))
                    })
                })
                .map(|(id, _, _)| id.clone())
                .collect();
            if !forgotten.is_empty() {
                for (key, state) in sacct(&forgotten).await {
                    states.entry(key).or_insert(state);
                }
            }
            if done.len() as u64 >= batch.total {
                guard.armed = false;
                self.forget(&guard.ids);
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(());
            }
            let mut lost: Vec<(u64, DeathCause, String)> = Vec::new();
            for (index, (id, manifest, accounted)) in active.iter_mut().enumerate() {
                let mut counts = ArrayCounts {
                    scope: batch.scope_id.clone(),
                    ..ArrayCounts::default()
                };
                for e in 0..manifest.elements() {
                    let state = states.get(&(id.clone(), e)).map(String::as_str);
                    let ended = state.is_none_or(|s| ENDED.contains(&s));
                    if !ended {
                        if state == Some("PENDING") {
                            counts.pending += 1;
                        } else {
                            counts.running += 1;
                        }
                        continue;
                    }
                    let missing: Vec<u64> = manifest
                        .tiles_of_element(e)
                        .into_iter()
                        .filter(|t| !done.contains(t) && latest.get(t) == Some(&index))
                        .collect();
                    if missing.is_empty() {
                        counts.done += 1;
                        continue;
                    }
                    counts.failed += 1;
                    if accounted.insert(e) {
                        stats.losses += 1;
                        self.lost.fetch_add(1, Ordering::Relaxed);
                        let cause = element_cause(state);
                        self.event(
                            "slurm.task_failed",
                            json!({"scope": batch.scope_id, "slurm_job": id, "element": e,
                                   "state": state.unwrap_or("GONE"), "tiles_not_done": missing.len(),
                                   "replayable": cause.replayable()}),
                        );
                        let task = format!("Slurm task {id}_{e}");
                        lost.extend(
                            missing
                                .into_iter()
                                .map(|t| (t, cause.clone(), task.clone())),
                        );
                    }
                }
                self.set_counts(id, counts);
            }
            if !lost.is_empty() {
                lost.sort_unstable_by_key(|(t, _, _)| *t);
                lost.dedup_by_key(|(t, _, _)| *t);
                let mut again = Vec::with_capacity(lost.len());
                for (tile, cause, task) in lost {
                    let track = tracks
                        .entry(tile)
                        .or_insert_with(|| batch.tile_journal(tile));
                    let attempt_id = format!("{}.{tile}", batch.scope_id);
                    let description = format!("{task} {cause} while running tile {tile}");
                    let loss = AttemptLoss {
                        error: lost_run_error(&attempt_id, &cause, description.clone()),
                        attempt_id,
                        cause,
                        description,
                    };
                    let run = u32::from(track.attempts());
                    match after_loss(track, &loss, None, MAX_ATTEMPTS, run).await {
                        AfterLoss::Replay => again.push(tile),
                        AfterLoss::OverLimit(error) => {
                            stats.stopped_over_limit += 1;
                            self.event(
                                "slurm.over_limit",
                                json!({"scope": batch.scope_id, "tile": tile,
                                       "cause": loss.cause, "resubmitted": false}),
                            );
                            return Err(error);
                        }
                        AfterLoss::Done(Err(error)) => return Err(error),
                        AfterLoss::Done(Ok(_)) => {
                            return Err(ToolError::new(
                                ErrorCode::InternalError,
                                "a lost tile was completed from a probe, which tiles do not have",
                            ));
                        }
                    }
                }
                to_submit = ranges_of(&again);
                continue;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Cancels its arrays when dropped before the batch finished, and removes the job
/// directory; during a handover (reexec) it leaves both for the next image to follow.
struct ArrayGuard {
    ids: Vec<String>,
    dir: PathBuf,
    armed: bool,
    handover: Handover,
}

impl Drop for ArrayGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.handover.started() {
            tracing::info!(ids = ?self.ids, dir = %self.dir.display(), "reexec: Slurm arrays left running for the next image");
            return;
        }
        if !self.ids.is_empty() {
            cancel_arrays(&self.ids);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Executor for SlurmExecutor {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), ToolError>> {
        self.local.ready()
    }

    fn run(
        &self,
        attempt: AttemptRequest,
        progress: mpsc::Sender<AttemptProgress>,
    ) -> BoxFuture<'_, Result<JobOutcome, ExecutorError>> {
        self.local.run(attempt, progress)
    }

    fn health(&self) -> ExecutorHealth {
        let local = self.local.health();
        let arrays = lock(&self.arrays);
        let sum = |f: fn(&ArrayCounts) -> u64| arrays.values().map(f).sum::<u64>();
        ExecutorHealth {
            name: self.name(),
            ready: local.ready,
            summary: format!(
                "{} array(s): {} pending, {} running, {} done, {} failed task(s); local: {}",
                arrays.len(),
                sum(|c| c.pending),
                sum(|c| c.running),
                sum(|c| c.done),
                sum(|c| c.failed),
                local.summary
            ),
        }
    }

    fn parallelism(&self) -> usize {
        self.local.parallelism()
    }

    fn run_tiles(
        &self,
        batch: TileBatch,
        done: mpsc::UnboundedSender<u64>,
    ) -> Option<BoxFuture<'_, (BatchStats, Result<(), ToolError>)>> {
        Some(Box::pin(self.run_batch(batch, done)))
    }

    fn stats(&self) -> Value {
        let arrays = lock(&self.arrays);
        json!({
            "arrays": &*arrays,
            "submitted": self.submitted.load(Ordering::Relaxed),
            "tasks_lost": self.lost.load(Ordering::Relaxed),
            "resubmitted": self.resubmitted.load(Ordering::Relaxed),
            "tiles_per_task": self.settings.tiles_per_task,
        })
    }
}
