//! `evaluate.plan`, `evaluate.tile`, `evaluate.merge`: a whole-layout evaluation against a
//! rule deck ([`reticle_eval::tile::evaluate_tile`], [`reticle_eval::merge::merge`]).
//! Every record of the merged report goes to `violations.jsonl`; the report holds the
//! summary, the heat map and, at `report_level: detailed`, the first page.

use std::path::Path;
use std::time::Instant;

use reticle_eval::merge::{MergeJob, merge};
use reticle_eval::report::{OnExceeded, ReportLevel, Setup};
use reticle_eval::tile::{TileJob, TileTiming, evaluate_tile_timed};
use reticle_eval::tiles::{RegionPlan, TileIndex};
use reticle_kernel::model::ModelSpec;
use reticle_protocol::args::EvaluateArgs;
use reticle_protocol::error::ToolError;
use serde_json::{Map, Value, json};

use reticle_eval::region_source::RegionSource;

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::op::{Op, OpResult, cancelled, eval_error, parse_args, payload};
use crate::records_file::{DEFAULT_PAGE_RECORDS, Filter, PageRequest, RecordWriter, read_page};
use crate::tiled::{
    DeckRegion, PlanRequest, TiledArgs, UNIT_TILES_MAX, image_tiles_for_evaluation,
    open_deck_region, plan_region, recycle, tile_batch, tile_summary, tiles_in_order, tiles_of,
    unit_summary, write_tile,
};

/// A compute pool with a thread per core of this machine (its CPU affinity), for the merge
/// (D240); `None` (the worker's own threads) when it cannot be built.
fn merge_pool() -> Option<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    rayon::ThreadPoolBuilder::new()
        .num_threads(cores)
        .thread_name(|i| format!("merge-{i}"))
        .build()
        .inspect_err(|e| tracing::warn!(error = %e, "no merge pool: the worker's threads merge"))
        .ok()
}

/// The picture of a merged report.
pub const HEATMAP_FILE: &str = "heatmap.png";

/// `evaluate`'s arguments plus what the host's fan-out adds.
type EvaluateTiledArgs = TiledArgs<EvaluateArgs<ModelSpec>>;

/// The deck setup and the opened layout.
fn open(
    ctx: &AttemptCtx<'_>,
    args: &EvaluateTiledArgs,
) -> Result<(Setup, RegionSource), ToolError> {
    let call = &args.call;
    let deck = DeckArgs::from(call);
    let open = DeckRegion {
        deck: &deck,
        tile_nm: call.tile_nm,
        report_level: call.report_level.unwrap_or_default(),
        limits: call.limits.unwrap_or_default(),
        cell: call.cell.as_deref(),
        mask_layer: call.mask_layer.as_deref(),
    };
    open_deck_region(ctx, &open, args.plan.as_ref())
}

/// The `evaluate.plan` op.
pub struct EvaluatePlan;

impl Op for EvaluatePlan {
    fn name(&self) -> &'static str {
        "evaluate.plan"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: EvaluateTiledArgs = parse_args(self.name(), args_json)?;
        let (setup, source) = open(ctx, &args)?;
        let plan = plan_region(
            ctx,
            &source,
            &PlanRequest {
                box_um: args.call.box_um,
                model: args.call.model.as_ref(),
                pixel_nm: args.call.pixel_nm,
                halo_nm: args.halo_nm,
                layer_name: setup.target.to_string(),
            },
        )?;
        payload(json!({
            "tiles": plan.range.count(),
            "plan": plan,
            "unit_tiles": UNIT_TILES_MAX,
        }))
    }
}

/// The `evaluate.tile` op.
pub struct EvaluateTile;

impl Op for EvaluateTile {
    fn name(&self) -> &'static str {
        "evaluate.tile"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: EvaluateTiledArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("evaluation")?;
        let tiles = tiles_of(plan, args.tile_number, args.tile_count)?;
        let dir = artifacts::dir(ctx)?;
        let batch = tile_batch(ctx, plan)?;
        let mut summaries = Vec::with_capacity(tiles.len());
        // The unit's tiles are imaged `batch` at a time (one on the CPU path, D257), then
        // each is evaluated and written in turn.
        for chunk in tiles.chunks(batch) {
            if ctx.cancel.is_cancelled() {
                return Err(cancelled(ctx.job_id));
            }
            summaries.extend(evaluate_tiles(ctx, &args, plan, chunk, &dir)?);
        }
        payload(unit_summary(summaries))
    }
}

/// Evaluates `tiles` of `plan` (their images as one batch), writes each one's output into
/// the job's tiles folder and returns their summaries, with where their time went (the
/// batch's opening and imaging shared out evenly).
fn evaluate_tiles(
    ctx: &AttemptCtx<'_>,
    args: &EvaluateTiledArgs,
    plan: &RegionPlan,
    tiles: &[TileIndex],
    dir: &Path,
) -> Result<Vec<Value>, ToolError> {
    let share = 1.0 / tiles.len().max(1) as f64;
    let mut clock = Instant::now();
    let (setup, mut source) = open(ctx, args)?;
    let open_s = TileTiming::lap(&mut clock) * share;
    let rules = setup.rules();
    let imaged = image_tiles_for_evaluation(
        ctx,
        plan,
        tiles,
        &mut source,
        args.call.model.as_ref(),
        &rules,
    )?;
    let imaging_s = TileTiming::lap(&mut clock) * share;
    let batch = imaged.iter().filter(|w| w.is_some()).count();
    let mut summaries = Vec::with_capacity(tiles.len());
    for (&tile, imaged) in tiles.iter().zip(imaged) {
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let job = TileJob::of_plan(plan, tile, &rules, false);
        let mut timing = TileTiming::default();
        TileTiming::lap(&mut clock);
        let out = evaluate_tile_timed(&job, imaged.as_ref(), &mut source, ctx.cancel, &mut timing)
            .map_err(|e| eval_error(e, ctx.job_id))?;
        recycle(imaged);
        TileTiming::lap(&mut clock);
        write_tile(dir, &out)?;
        let write_s = TileTiming::lap(&mut clock);
        let mut summary = tile_summary(&out);
        // Where the tile's time went (issue 29 item 6; `reticle bench chip` adds these up),
        // and how many windows the engine imaged in the tile's batch (D257).
        summary["timing"] = json!({
            "open_s": open_s,
            "imaging_s": imaging_s,
            "imaging_batch": batch,
            "phases": timing,
            "write_s": write_s,
        });
        summaries.push(summary);
    }
    Ok(summaries)
}

/// The `evaluate.merge` op.
pub struct EvaluateMerge;

impl Op for EvaluateMerge {
    fn name(&self) -> &'static str {
        "evaluate.merge"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: EvaluateTiledArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("evaluation")?;
        let dir = artifacts::dir(ctx)?;
        let (setup, mut source) = open(ctx, &args)?;
        let rules = setup.rules();
        let job = MergeJob::for_plan(&setup, &rules, plan);
        let mut writer = RecordWriter::create(&dir)?;
        // The merge is the job's last step, after every tile: it reads and builds on all of
        // this machine's cores, not the worker's share of them (D240).
        let started = Instant::now();
        let mut run = || {
            merge(
                &job,
                tiles_in_order(ctx, &dir, plan),
                &mut |record| writer.write_line(&record.line),
                ctx.cancel,
            )
        };
        let pool = merge_pool();
        let threads = pool.as_ref().map_or_else(
            rayon::current_num_threads,
            rayon::ThreadPool::current_num_threads,
        );
        let merged = match pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
        .map_err(|e| eval_error(e, ctx.job_id))?;
        let file = writer.finish()?;
        tracing::info!(
            tiles = plan.range.count(),
            records = merged.records,
            seconds = started.elapsed().as_secs_f64(),
            threads,
            "evaluate.merge: tiles merged"
        );
        let mut payload = merged.payload;
        let picture = reticle_eval::heatmap::draw(
            plan.region,
            &plan.grid,
            &plan.range,
            reticle_eval::records::tile_dbu(setup.tile_nm, plan.grid.dbu_nm),
            &merged.canonical_nm,
            &mut source,
        )?;
        let png = artifacts::png_rgba(
            picture.width as usize,
            picture.height as usize,
            &picture.rgba,
        )?;
        let heatmap = artifacts::write(&dir, HEATMAP_FILE, &png)?;
        let total_records = merged.records;
        let limit = setup.limits.max_violations;
        let detailed = setup.report_level == ReportLevel::Detailed;
        let exceeded = total_records > limit;
        let degraded =
            detailed && exceeded && setup.limits.on_exceeded == OnExceeded::DegradeToAggregate;
        payload["degraded_to_aggregate"] = json!(degraded);
        if degraded {
            payload["degraded_reason"] = json!(format!(
                "{total_records} violation records exceed limits.max_violations = {limit}"
            ));
        }
        let mut first_page = None;
        if detailed && !degraded {
            let page = read_page(
                &dir,
                &PageRequest {
                    cursor: None,
                    limit: DEFAULT_PAGE_RECORDS,
                    cap: limit,
                    filter: Filter::default(),
                },
            )?;
            payload["page"] = json!({
                "returned": page.records.len(),
                "next_cursor": page.next_cursor,
                "page_records": DEFAULT_PAGE_RECORDS,
                "continue_with": "violations(job_id, cursor)",
            });
            first_page = Some(page.records);
        }
        payload["truncation"] = json!({
            "truncated": detailed && exceeded && !degraded,
            "max_violations": limit,
            "total_records": total_records,
            "returned": first_page.as_ref().map_or(0, Vec::len),
            "on_exceeded": setup.limits.on_exceeded.name(),
            "paged": true,
        });
        payload["artifacts"] = json!({
            "dir": dir,
            "violations": file,
            "heatmap": {
                "png": heatmap,
                "width": picture.width,
                "height": picture.height,
                "nm_per_pixel": reticle_eval::r3(picture.nm_per_pixel),
                "legend": reticle_eval::heatmap::LEGEND.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<Map<String, Value>>(),
            },
        });
        if let Some(records) = first_page {
            payload["violations"] = Value::Array(records);
        }
        let total = plan.range.count();
        ctx.progress.report(total, total, "merged");
        crate::op::payload(payload)
    }
}
