//! `optimize.plan`, `optimize.tile`, `optimize.merge`, `optimize.compare`: optimizing a
//! region of any size in tiles (issue 28 items 2–4; docs/DECISIONS.md D170–D173). The
//! logic is [`reticle_eval::optimize::region`]; this module is the adapter.
//!
//! - `optimize.plan` plans the region on the evaluation's grid (the caller's box, else
//!   the whole layer) and answers the tiles and the four `waves` (the host's fan-out runs
//!   wave after wave, D170).
//! - `optimize.tile` images its window, freezes everything outside its ILT box (the drawn
//!   layout, or a finished neighbour's mask read from the job's tiles folder), runs the
//!   legal ILT (`reticle_eval::optimize::run_ilt`, the deck's mask rules with that
//!   context) and writes the polygons of its ILT box as `tile_<ix>_<iy>.json`.
//! - `optimize.merge` ([`merge`]) writes the layout back with the mask layer (input
//!   format, D160), and before/after pictures of the region.
//! - `optimize.compare` ([`merge::OptimizeCompare`]) compares the evaluations of region + halo
//!   before and after: groups resolved, remaining and new per rule, and new groups near a
//!   seam.
//! - `optimize.put_back` ([`put_back`]) is the seam pass (D252): the merged mask with the
//!   drawn target put back in the squares the host names, written back as the merge writes.

pub mod merge;
pub mod put_back;
mod targets;

use std::path::{Path, PathBuf};

use reticle_eval::optimize::region::{
    EDGE_WEIGHT, Finished, OptTile, REGION_ITERATIONS, SEAM_BLEND_NM, TileScore, blend_box,
    clipped_to, epe_revert, frozen_context, ilt_box, nth_in_waves, snap_region, wave_counts,
    wave_of,
};
use reticle_eval::optimize::{IltRun, MaskOptions, run_ilt_with};
use reticle_eval::region_source::RegionSource;
use reticle_eval::report::{ReportLevel, Setup, ViolationLimits};
use reticle_eval::tiles::TileIndex;
use reticle_kernel::model::ModelSpec;
use reticle_kernel::mrc::MaskStyle;
use reticle_layout::BBox;
use reticle_protocol::error::ToolError;
use serde::Deserialize;
use serde_json::json;

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::op::{Op, OpResult, eval_error, parse_args, payload};
use crate::tiled::{
    DeckRegion, PlanRequest, TiledArgs, image_tile, internal, invalid, is_glp, open_deck_region,
    plan_region, tile_file, tiles_dir,
};

/// A region optimize's arguments: the tool's (what a single window takes, without the
/// violation target) plus what the host adds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegionArgs {
    layout: PathBuf,
    deck: String,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    cell: Option<String>,
    /// The region (µm); `None`: the whole evaluated layer.
    #[serde(default)]
    box_um: Option<[f64; 4]>,
    #[serde(default)]
    pixel_nm: Option<f64>,
    #[serde(default)]
    model: Option<ModelSpec>,
    #[serde(default)]
    tile_nm: Option<f64>,
    #[serde(default)]
    iterations: Option<u32>,
    #[serde(default)]
    refine_iterations: Option<u32>,
    #[serde(default)]
    mask_style: MaskStyle,
    #[serde(default)]
    assist_features: Option<bool>,
    /// The mask layer written (`L/D`); default: the target's first free datatype (D160).
    #[serde(default)]
    mask_layer: Option<String>,
    /// The host's: the first tile of this wave when a batch numbers its tiles from 0.
    #[serde(default)]
    tile_offset: Option<u64>,
    /// The host's, for `optimize.compare`: the evaluations before and after (names of
    /// folders in the job's artifact directory holding their `violations.jsonl`).
    #[serde(default)]
    evaluations: Option<[String; 2]>,
    /// The host's, for `optimize.compare`: the ids an `optimize(violation_ids)` listed,
    /// each answered with its group's status (D211).
    #[serde(default)]
    targets: Option<Vec<String>>,
    /// The host's, for `optimize.put_back`: the squares (nm, `[left, bottom, right, top]`)
    /// where the drawn mask goes back (D252).
    #[serde(default)]
    put_back: Option<Vec<[f64; 4]>>,
}

/// How far (nm) from its ILT box a mask-rule violation belongs to a tile's mask: more
/// than any mask rule of the shipped decks (30 nm), less than a halo.
const MASK_RULE_REACH_NM: f64 = 100.0;

/// What the ops parse.
pub(crate) type RegionOpArgs = TiledArgs<RegionArgs>;

impl RegionArgs {
    fn deck_args(&self) -> Result<DeckArgs, ToolError> {
        serde_json::from_value(json!({
            "layout": self.layout,
            "deck": self.deck,
            "layer": self.layer,
            "cell": self.cell,
            "pixel_nm": self.pixel_nm,
            "model": self.model,
        }))
        .map_err(|e| internal(format!("deck arguments: {e}")))
    }
}

/// The deck setup and the layout's region source (the target and context layers).
fn open(ctx: &AttemptCtx<'_>, args: &RegionOpArgs) -> Result<(Setup, RegionSource), ToolError> {
    let call = &args.call;
    let deck = call.deck_args()?;
    let open = DeckRegion {
        deck: &deck,
        tile_nm: call.tile_nm,
        report_level: ReportLevel::Aggregate,
        limits: ViolationLimits::default(),
        cell: call.cell.as_deref(),
        mask_layer: None,
    };
    open_deck_region(ctx, &open, args.plan.as_ref())
}

/// The `optimize.plan` op.
pub struct OptimizePlan;

impl Op for OptimizePlan {
    fn name(&self) -> &'static str {
        "optimize.plan"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RegionOpArgs = parse_args(self.name(), args_json)?;
        if is_glp(&args.call.layout) {
            return Err(invalid(
                "a region optimize writes the layout back: it needs a GDSII or OASIS layout",
                json!({"layout": args.call.layout}),
            ));
        }
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
        // The region on whole pixels: the tiles' ILT boxes then cover it exactly.
        let mut plan = plan;
        plan.region = snap_region(&plan.grid, plan.region).ok_or_else(|| {
            invalid(
                "the region holds no whole pixel",
                json!({"box_um": args.call.box_um, "pixel_nm": plan.pixel_nm}),
            )
        })?;
        plan.range = plan.grid.covering(plan.region);
        payload(json!({
            "tiles": plan.range.count(),
            "waves": wave_counts(&plan.range),
            "plan": plan,
        }))
    }
}

/// Reads tile `t`'s optimize output from the tiles folder of `dir`.
pub(crate) fn read_opt_tile(dir: &Path, t: TileIndex) -> Result<OptTile, ToolError> {
    crate::tiled::read_tile(dir, t)
}

/// The `optimize.tile` op.
pub struct OptimizeTile;

impl Op for OptimizeTile {
    fn name(&self) -> &'static str {
        "optimize.tile"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RegionOpArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("optimization")?;
        let number = args
            .tile_number
            .ok_or_else(|| invalid("a tile op needs the `tile_number`", json!({})))?
            + args.call.tile_offset.unwrap_or(0);
        let tile = nth_in_waves(&plan.range, number).ok_or_else(|| {
            invalid(
                format!("the plan has {} tiles", plan.range.count()),
                json!({"tile_number": number}),
            )
        })?;
        let dir = artifacts::dir(ctx)?;
        let (setup, mut source) = open(ctx, &args)?;
        let own = ilt_box(&plan.grid, tile, plan.region);
        let mut out = OptTile {
            tile,
            optimized: own,
            polygons: Vec::new(),
            before: TileScore::default(),
            after: TileScore::default(),
            mask_rule_violations: 0,
            iterations_run: 0,
            kept_drawn: None,
        };
        let imaged = match own {
            Some(_) => image_tile(ctx, plan, tile, &mut source, args.call.model.as_ref())?,
            None => None,
        };
        if let (Some(own), Some(imaged)) = (own, imaged.filter(|i| !i.layout.polygons.is_empty())) {
            // The finished neighbours: those of earlier waves.
            let mine = wave_of(tile);
            let mut done = Vec::new();
            for (dx, dy) in (-1..=1).flat_map(|dy| (-1..=1).map(move |dx| (dx, dy))) {
                let t = TileIndex {
                    ix: tile.ix + dx,
                    iy: tile.iy + dy,
                };
                if t != tile && plan.range.contains(t) && wave_of(t) < mine {
                    done.push(read_opt_tile(&dir, t)?);
                }
            }
            let finished = |t: TileIndex| {
                done.iter().find(|o| o.tile == t).and_then(|o| {
                    o.optimized.map(|b| Finished {
                        optimized: b,
                        polygons: &o.polygons,
                    })
                })
            };
            let context = frozen_context(
                &plan.grid,
                tile,
                Some(own),
                &imaged.layout.polygons,
                &finished,
            );
            let frame = &imaged.frame;
            let n = imaged.target.width;
            let px = |v: i64, origin: f64| {
                (((v as f64 - origin) / frame.pixel_nm).round() as usize).min(n)
            };
            let pixels = |b: BBox| {
                (
                    px(b.left, frame.left_nm),
                    px(b.bottom, frame.bottom_nm),
                    px(b.right, frame.left_nm),
                    px(b.top, frame.bottom_nm),
                )
            };
            let window = pixels(own);
            // The pixels the ILT moves: its box and the first `SEAM_BLEND_NM` past each
            // seam inside the region (D248); only `window` is kept.
            let blend_dbu = (SEAM_BLEND_NM / plan.grid.dbu_nm).round() as i64;
            let blend = pixels(blend_box(own, plan.region, blend_dbu));
            let rules: Vec<_> = setup.rules().into_iter().cloned().collect();
            let options = MaskOptions {
                style: args.call.mask_style,
                assist_features: args.call.assist_features.unwrap_or(true),
            };
            // The frozen mask as pixels of the window's frame: what the optimizer images
            // around its box (the finished neighbours' mask, the drawn layout elsewhere).
            let coverage = reticle_kernel::raster::rasterize_in(&context, frame);
            let frozen = reticle_kernel::Grid {
                width: coverage.width,
                height: coverage.height,
                data: coverage.data.iter().map(|&c| u8::from(c >= 0.5)).collect(),
            };
            let ilt = run_ilt_with(
                &imaged,
                &IltRun {
                    px: window,
                    iterations: args.call.iterations.unwrap_or(REGION_ITERATIONS.0),
                    refine_iterations: args.call.refine_iterations.unwrap_or(REGION_ITERATIONS.1),
                    rules: &rules,
                    context: &context,
                    frozen: Some(&frozen),
                    blend: Some(blend),
                    edge: Some(EDGE_WEIGHT),
                    epe_revert: epe_revert(&rules),
                    options,
                },
                ctx.cancel,
                &mut |_| {},
            )
            .map_err(|e| eval_error(e, ctx.job_id))?;
            out.before = TileScore {
                l2_px: ilt.ilt.before.l2,
                pvb_px: ilt.ilt.before.pvb,
            };
            out.after = TileScore {
                l2_px: ilt.ilt.after.l2,
                pvb_px: ilt.ilt.after.pvb,
            };
            // Violations the window's edge makes (drawn shapes cut by it) are not the
            // mask's: only those meeting the ILT box grown by the reach of a mask rule count.
            let reach = (MASK_RULE_REACH_NM / plan.grid.dbu_nm).round() as i64;
            let near = reticle_eval::tiles::grow(own, reach);
            out.mask_rule_violations = ilt
                .legal
                .violations
                .iter()
                .filter(|v| reticle_eval::tiles::touches(&v.bbox, &near))
                .count();
            out.iterations_run = ilt.ilt.iterations_run;
            // A mask the legalizer could not make legal, or one that prints worse than
            // the drawn target, is not kept: the tile's box keeps the drawn target (legal
            // against every neighbour, which was legalized against it; D171).
            let score = |s: &TileScore| s.l2_px + s.pvb_px;
            out.kept_drawn = if out.mask_rule_violations > 0 {
                Some("mask_rules".to_owned())
            } else if score(&out.after) > score(&out.before) {
                Some("worse".to_owned())
            } else {
                None
            };
            out.polygons = match out.kept_drawn {
                None => ilt.legal.polygons,
                Some(_) => clipped_to(&imaged.layout.polygons, own),
            };
        }
        let bytes = serde_json::to_vec(&out).map_err(|e| internal(format!("tile output: {e}")))?;
        artifacts::write_named(&tiles_dir(&dir)?, &tile_file(tile), &bytes)?;
        payload(json!({
            "tile": tile.id(),
            "polygons": out.polygons.len(),
            "mask_rule_violations": out.mask_rule_violations,
            "kept_drawn": out.kept_drawn,
            "l2_px": [out.before.l2_px, out.after.l2_px],
        }))
    }
}
