//! One job fanned out into many units: a plan, then the tiles' units, then a merge
//! (whole-layout evaluation, docs/DECISIONS.md D57).
//!
//! The host knows nothing of the geometry: the plan unit answers how many tiles there are,
//! tile `n` is the unit `<op>.tile` with `tile_number: n` (the worker turns the number into
//! a place on its grid), and the merge reads what the tiles wrote into the job's artifact
//! directory. When the plan answers `unit_tiles`, a large wave's unit runs up to that many
//! consecutive tiles, `tile_count: k` ([`tiles_per_unit`], D255). Every unit goes through
//! [`Dispatcher::run`], so each unit has its own attempts and replay decision (a unit whose
//! worker died runs again; the others are not touched), whatever executor runs them. About
//! [`Executor::parallelism`] units are in flight at once; dropping the future (cancel,
//! disconnect) drops them all, which stops their attempts. TilesProgress is the scope's:
//! tiles done of the total, and the time left.
//!
//! A plan may also answer `waves`: the tile counts of consecutive waves (tiles numbered
//! wave by wave). Then each wave runs to its end before the next starts, so a tile of a
//! later wave can read what the earlier waves wrote (the tiled `optimize`, D170); each
//! wave is one batch on an executor that takes batches, its tiles numbered from 0 with
//! `tile_offset` (the wave's first tile) in the arguments.
//!
//! [`Executor::parallelism`]: super::Executor::parallelism

use std::sync::Arc;
use std::time::Instant;

use reticle_protocol::wire::TILES_DIR;
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use super::{Dispatcher, Scope, Unit};

/// The ops of one fanned-out job: `<prefix>.plan`, `<prefix>.tile`, `<prefix>.merge`.
#[derive(Debug, Clone, Copy)]
pub struct FanOut<'a> {
    /// The op prefix (`evaluate`).
    pub prefix: &'a str,
    /// The job's artifact directory (tiles write their outputs there).
    pub artifact_dir: &'a str,
}

/// A tiled job's progress line: tiles done, and the time left at the rate so far.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn progress_message(done: u64, total: u64, started: Instant) -> String {
    if done == 0 {
        return format!("tile 0/{total}");
    }
    let per_tile = started.elapsed().as_secs_f64() / done as f64;
    let left = (per_tile * (total - done) as f64).round() as u64;
    format!("tile {done}/{total}, about {left} s left")
}

impl FanOut<'_> {
    fn unit(&self, op: &str, args: &Map<String, Value>, index: u32) -> Unit {
        Unit::new(
            format!("{}.{op}", self.prefix),
            &Value::Object(args.clone()),
        )
        .indexed(index)
        .with_artifact_dir(Some(self.artifact_dir.to_owned()))
        // The fan-out reports for the whole job; units' own frames are not forwarded.
        .on_progress(|_| {})
    }

    /// Runs the plan, every tile and the merge of `args` under `scope`, and returns the
    /// merge's payload.
    ///
    /// # Errors
    /// The first unit's error (the other tiles are stopped); `INTERNAL_ERROR` when the
    /// plan does not say how many tiles there are.
    pub async fn run(
        &self,
        dispatcher: &Arc<Dispatcher>,
        scope: &Scope,
        args: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        self.run_at(dispatcher, scope, args, 0).await
    }

    /// [`Self::run`] with the units numbered from `base` (unit `base` is the plan): several
    /// fan-outs of one job (the tiled `optimize` evaluates, optimizes and evaluates again)
    /// keep distinct attempt ids and journal tracks.
    ///
    /// # Errors
    /// As [`Self::run`].
    pub async fn run_at(
        &self,
        dispatcher: &Arc<Dispatcher>,
        scope: &Scope,
        args: Map<String, Value>,
        base: u32,
    ) -> Result<Value, ToolError> {
        scope.report(0.0, None, Some("planning".into()));
        let planned = dispatcher
            .run(scope, self.unit("plan", &args, base))
            .await?;
        let total = planned["tiles"].as_u64().ok_or_else(|| {
            ToolError::new(
                ErrorCode::InternalError,
                "the plan did not say how many tiles",
            )
        })?;
        let mut args = args;
        args.insert("plan".into(), planned["plan"].clone());
        let steps = (total + 1) as f64;
        let started = Instant::now();
        scope.report(0.0, Some(steps), Some(progress_message(0, total, started)));
        let waves: Vec<u64> = match planned.get("waves").and_then(Value::as_array) {
            Some(w) => w.iter().filter_map(Value::as_u64).collect(),
            None => vec![total],
        };
        if waves.iter().sum::<u64>() != total {
            return Err(ToolError::new(
                ErrorCode::InternalError,
                "the plan's waves do not add up to its tiles",
            ));
        }
        let mut progress = TilesProgress {
            done: 0,
            total,
            steps,
            started,
            unit_tiles: planned["unit_tiles"].as_u64().unwrap_or(1).max(1),
        };
        let mut first = 0u64;
        for count in waves {
            self.run_wave(
                dispatcher,
                scope,
                &args,
                (first, count),
                base,
                &mut progress,
            )
            .await?;
            first += count;
        }
        let index = u32::try_from(u64::from(base) + total + 1).unwrap_or(u32::MAX);
        let merged = dispatcher
            .run(scope, self.unit("merge", &args, index))
            .await?;
        // The tiles' intermediates are the job's, not the caller's (D190): once merged,
        // the artifact directory keeps the results only.
        let tiles = std::path::Path::new(self.artifact_dir).join(TILES_DIR);
        if let Err(e) = std::fs::remove_dir_all(&tiles)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %tiles.display(), error = %e, "cannot remove the tiles' folder");
        }
        scope.report(steps, Some(steps), Some("merged".into()));
        Ok(merged)
    }

    /// Runs the `count` tiles from `first`: as one batch when the executor takes batches
    /// (a cluster, D60), else one unit each, about [`Executor::parallelism`] at once.
    ///
    /// [`Executor::parallelism`]: super::Executor::parallelism
    async fn run_wave(
        &self,
        dispatcher: &Arc<Dispatcher>,
        scope: &Scope,
        args: &Map<String, Value>,
        (first, count): (u64, u64),
        base: u32,
        progress: &mut TilesProgress,
    ) -> Result<(), ToolError> {
        if count == 0 {
            return Ok(());
        }
        // An executor that runs batches (a cluster) gets every tile of the wave at once.
        let mut batch_args = args.clone();
        batch_args.remove("tile_number");
        if first > 0 || count < progress.total {
            batch_args.insert("tile_offset".into(), json!(first));
        }
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let batch = dispatcher.run_tile_batch(
            scope,
            format!("{}.tile", self.prefix),
            Value::Object(batch_args).to_string(),
            Some(self.artifact_dir.to_owned()),
            count,
            done_tx,
        );
        tokio::pin!(batch);
        let mut batched = true;
        loop {
            tokio::select! {
                result = &mut batch => {
                    match result {
                        None => batched = false,
                        Some(result) => result?,
                    }
                    break;
                }
                Some(_tile) = done_rx.recv() => progress.tile_done(scope),
            }
        }
        // Tiles the batch finished after the last report.
        while done_rx.try_recv().is_ok() {
            progress.tile_done(scope);
        }
        if batched {
            return Ok(());
        }
        let parallelism = dispatcher.executor().parallelism().max(1) as u64;
        let per_unit = tiles_per_unit(count, parallelism, progress.unit_tiles);
        // Units (not tiles) in flight: one queued behind each running one.
        let in_flight = parallelism + 1;
        let mut running = JoinSet::new();
        let end = first + count;
        let (mut next, mut done) = (first, first);
        while done < end {
            while next < end && running.len() < in_flight as usize {
                let tiles = per_unit.min(end - next);
                let mut tile_args = args.clone();
                tile_args.insert("tile_number".into(), json!(next));
                if tiles > 1 {
                    tile_args.insert("tile_count".into(), json!(tiles));
                }
                let index = u32::try_from(u64::from(base) + next + 1).unwrap_or(u32::MAX);
                let unit = self.unit("tile", &tile_args, index);
                let (dispatcher, scope) = (Arc::clone(dispatcher), scope.clone());
                running.spawn(async move { (tiles, dispatcher.run(&scope, unit).await) });
                next += tiles;
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            match joined {
                Ok((tiles, Ok(_summary))) => {
                    done += tiles;
                    for _ in 0..tiles {
                        progress.tile_done(scope);
                    }
                }
                Ok((_, Err(error))) => return Err(error),
                Err(e) => {
                    return Err(ToolError::new(
                        ErrorCode::InternalError,
                        format!("a tile's task failed: {e}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Units of a wave each worker should get at least, so that the last units' tail stays
/// short and progress moves often (D255).
const UNITS_PER_WORKER: u64 = 16;

/// How many consecutive tiles of a wave of `count` one unit runs on a pool of
/// `parallelism`, when the op takes up to `unit_tiles` (the plan's `unit_tiles`; 1 for an op
/// that runs one tile a unit). A tile then costs one round trip between the host and a worker
/// in `per_unit`, and a worker does not wait for the host between them; a small wave keeps
/// one tile per unit (D255).
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
#[must_use]
pub fn tiles_per_unit(count: u64, parallelism: u64, unit_tiles: u64) -> u64 {
    (count / (parallelism.max(1) * UNITS_PER_WORKER)).clamp(1, unit_tiles.max(1))
}

/// A fan-out's progress over all its tiles (every wave).
struct TilesProgress {
    done: u64,
    total: u64,
    steps: f64,
    started: Instant,
    /// The most tiles the op runs in one unit (the plan's `unit_tiles`).
    unit_tiles: u64,
}

impl TilesProgress {
    fn tile_done(&mut self, scope: &Scope) {
        self.done += 1;
        scope.report(
            self.done as f64,
            Some(self.steps),
            Some(progress_message(self.done, self.total, self.started)),
        );
    }
}
