//! `simulate.plan`, `simulate.tile`, `simulate.merge`: a region of any size imaged tile by
//! tile (docs/DECISIONS.md D57): L2, PV band, EPE and the nominal corner's statistics
//! summed over the tiles' cores; with `images: true` (a region within the raster limit)
//! the cores' pixels are stitched into the region's aerial, resist and print images.

use std::io::Write as _;
use std::path::Path;

use reticle_eval::payload::{
    BackendSummary, CornerPrint, GridSize, ImageFiles, MinMaxMean, ModelSummary, ResistSummary,
    SimulatedEpe, SimulatedLayout, SimulatedRegion, SimulationMetrics, SimulationResult,
    SimulationTiming, Statistics, TiledImaging, WindowNm,
};
use reticle_eval::tile::{CoreBlock, TileJob, TileMetrics, core_block, evaluate_tile, pixel_span};
use reticle_eval::tiles::{RegionPlan, TileIndex};
use reticle_kernel::model::ModelSpec;
use reticle_kernel::{Grid, Resist};
use reticle_protocol::args::SimulateArgs;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::json;

use reticle_eval::region_source::RegionSource;

use crate::artifacts::{self, image_files};
use crate::attempt::AttemptCtx;
use crate::layouts::{RegionLayers, open_region};
use crate::op::{Op, OpResult, cancelled, eval_error, parse_args, payload};
use crate::tiled::{
    PlanRequest, TiledArgs, UNIT_TILES_MAX, image_tiles, internal, plan_region, tile_batch,
    tile_summary, tiles_dir, tiles_in_order, tiles_of, unit_summary, write_tile,
};

/// `simulate`'s arguments plus what the host's fan-out adds.
type SimulateTiledArgs = TiledArgs<SimulateArgs<ModelSpec>>;

fn open(ctx: &AttemptCtx<'_>, args: &SimulateTiledArgs) -> Result<RegionSource, ToolError> {
    let call = &args.call;
    open_region(
        ctx,
        Path::new(&call.layout),
        &RegionLayers {
            cell: call.cell.as_deref(),
            layer: call.layer.as_deref(),
            context_layers: &[],
            mask_layer: call.mask_layer.as_deref(),
        },
        args.plan.as_ref().map(|p| p.sha256.as_str()),
        args.plan.as_ref().map(|p| p.extent),
    )
}

/// The region's pixel grid: its first column and row and its size.
fn region_pixels(plan: &RegionPlan) -> (i64, i64, usize, usize) {
    let p = plan.grid.pixel_dbu;
    let r = plan.region;
    let (x0, x1) = pixel_span(r.left, r.right, p);
    let (y0, y1) = pixel_span(r.bottom, r.top, p);
    (x0, y0, (x1 - x0) as usize, (y1 - y0) as usize)
}

/// The `simulate.plan` op.
pub struct SimulatePlan;

impl Op for SimulatePlan {
    fn name(&self) -> &'static str {
        "simulate.plan"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: SimulateTiledArgs = parse_args(self.name(), args_json)?;
        let source = open(ctx, &args)?;
        let plan = plan_region(
            ctx,
            &source,
            &PlanRequest {
                box_um: args.call.box_um,
                model: args.call.model.as_ref(),
                pixel_nm: args.call.pixel_nm,
                halo_nm: args.halo_nm,
                layer_name: args.call.layer.clone().unwrap_or_default(),
            },
        )?;
        if args.call.images == Some(true) {
            let (_, _, w, h) = region_pixels(&plan);
            let pixels = (w as u64).saturating_mul(h as u64);
            if pixels > ctx.context.limits.max_raster_pixels {
                return Err(ToolError::new(
                    ErrorCode::QueryTooLarge,
                    "images of this region would be over the raster limit",
                )
                .with_details(json!({"pixels": pixels, "limit": ctx.context.limits.max_raster_pixels, "hint": "a smaller box, coarser pixels, or images: false (the metrics cover any region)"})));
            }
        }
        payload(json!({
            "tiles": plan.range.count(),
            "plan": plan,
            "unit_tiles": UNIT_TILES_MAX,
        }))
    }
}

/// A core block's file in the job's tiles folder: `tile_<ix>_<iy>.blk` (little-endian: x0,
/// y0 as i64, width, height as u32, then the aerial image as f32, the print and the target
/// as u8, row 0 first).
fn block_file(t: TileIndex) -> String {
    format!("tile_{}_{}.blk", t.ix, t.iy)
}

fn write_block(dir: &Path, t: TileIndex, b: &CoreBlock) -> Result<(), ToolError> {
    let mut bytes = Vec::with_capacity(24 + b.aerial.len() * 6);
    let w = u32::try_from(b.width).map_err(|_| internal("block too wide"))?;
    let h = u32::try_from(b.height).map_err(|_| internal("block too tall"))?;
    let _ = bytes.write_all(&b.x0.to_le_bytes());
    let _ = bytes.write_all(&b.y0.to_le_bytes());
    let _ = bytes.write_all(&w.to_le_bytes());
    let _ = bytes.write_all(&h.to_le_bytes());
    for v in &b.aerial {
        let _ = bytes.write_all(&v.to_le_bytes());
    }
    bytes.extend_from_slice(&b.printed);
    bytes.extend_from_slice(&b.target);
    artifacts::write_named(&tiles_dir(dir)?, &block_file(t), &bytes)?;
    Ok(())
}

fn read_block(dir: &Path, t: TileIndex) -> Result<CoreBlock, ToolError> {
    let path = dir.join(reticle_protocol::wire::TILES_DIR);
    let bytes = std::fs::read(path.join(block_file(t)))
        .map_err(|e| internal(format!("tile {} has no image block: {e}", t.id())))?;
    let corrupt = || internal(format!("tile {}'s image block is corrupt", t.id()));
    let take = |at: usize, n: usize| bytes.get(at..at + n).ok_or_else(corrupt);
    let i64_at = |at| -> Result<i64, ToolError> {
        Ok(i64::from_le_bytes(
            take(at, 8)?.try_into().map_err(|_| corrupt())?,
        ))
    };
    let u32_at = |at| -> Result<u32, ToolError> {
        Ok(u32::from_le_bytes(
            take(at, 4)?.try_into().map_err(|_| corrupt())?,
        ))
    };
    let (x0, y0) = (i64_at(0)?, i64_at(8)?);
    let (width, height) = (u32_at(16)? as usize, u32_at(20)? as usize);
    let n = width * height;
    let aerial = take(24, 4 * n)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let printed = take(24 + 4 * n, n)?.to_vec();
    let target = take(24 + 5 * n, n)?.to_vec();
    Ok(CoreBlock {
        x0,
        y0,
        width,
        height,
        aerial,
        printed,
        target,
    })
}

/// The `simulate.tile` op.
pub struct SimulateTile;

impl Op for SimulateTile {
    fn name(&self) -> &'static str {
        "simulate.tile"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: SimulateTiledArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("simulation")?;
        let tiles = tiles_of(plan, args.tile_number, args.tile_count)?;
        let dir = artifacts::dir(ctx)?;
        let batch = tile_batch(ctx, plan)?;
        let mut summaries = Vec::with_capacity(tiles.len());
        // Imaged `batch` tiles at a time (one on the CPU path, D257), then each in turn.
        for chunk in tiles.chunks(batch) {
            if ctx.cancel.is_cancelled() {
                return Err(cancelled(ctx.job_id));
            }
            let mut source = open(ctx, &args)?;
            let imaged = image_tiles(ctx, plan, chunk, &mut source, args.call.model.as_ref())?;
            for (&tile, imaged) in chunk.iter().zip(imaged) {
                let job = TileJob::of_plan(plan, tile, &[], true);
                let out = evaluate_tile(&job, imaged.as_ref(), &mut source, ctx.cancel)
                    .map_err(|e| eval_error(e, ctx.job_id))?;
                if args.call.images == Some(true)
                    && let Some(block) = core_block(&job, imaged.as_ref())
                {
                    write_block(&dir, tile, &block)?;
                }
                write_tile(&dir, &out)?;
                summaries.push(tile_summary(&out));
            }
        }
        payload(unit_summary(summaries))
    }
}

/// Min, max and mean as the statistics give them (6 decimals).
fn stats(min: f64, max: f64, sum: f64, n: u64) -> Option<MinMaxMean> {
    let r6 = |v: f64| (v * 1e6).round() / 1e6;
    if n == 0 {
        return None;
    }
    Some(MinMaxMean {
        min: r6(min),
        max: r6(max),
        mean: r6(sum / n as f64),
    })
}

/// The `simulate.merge` op.
pub struct SimulateMerge;

impl Op for SimulateMerge {
    fn name(&self) -> &'static str {
        "simulate.merge"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let started = std::time::Instant::now();
        let args: SimulateTiledArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("simulation")?;
        let dir = artifacts::dir(ctx)?;
        let mut sum = TileMetrics::default();
        let mut tiles = 0u64;
        for tile in tiles_in_order(ctx, &dir, plan) {
            let tile = tile?;
            sum.add(&tile.metrics);
            tiles += 1;
            if ctx.cancel.is_cancelled() {
                return Err(cancelled(ctx.job_id));
            }
        }
        let resist = Resist::ICCAD2013;
        let sigmoid = |i: f64| {
            1.0 / (1.0 + (-f64::from(resist.steepness) * (i - f64::from(resist.threshold))).exp())
        };
        let px_area = plan.pixel_nm * plan.pixel_nm;
        let corners = ["nominal", "max", "min"]
            .iter()
            .zip(sum.printed_px)
            .map(|(name, n)| CornerPrint {
                corner: (*name).to_owned(),
                printed_px: n,
                printed_area_nm2: n as f64 * px_area,
            })
            .collect();
        let statistics = Statistics {
            corner: "nominal".to_owned(),
            aerial_intensity: stats(sum.aerial_min, sum.aerial_max, sum.aerial_sum, sum.pixels),
            resist_response: stats(
                sigmoid(sum.aerial_min),
                sigmoid(sum.aerial_max),
                sum.resist_sum,
                sum.pixels,
            ),
            resist: ResistSummary {
                steepness: f64::from(resist.steepness),
                threshold: f64::from(resist.threshold),
            },
            printed_px: sum.printed_px[0],
            printed_area_nm2: sum.printed_px[0] as f64 * px_area,
            target_px: sum.target_px,
            target_area_nm2: sum.target_px as f64 * px_area,
            pixel_area_nm2: px_area,
            corners,
        };
        let (_, _, width, height) = region_pixels(plan);
        let images = if args.call.images == Some(true) {
            Some(stitched_images(&dir, plan)?)
        } else {
            None
        };
        let backend = ctx.state.backend.engine()?.info();
        let to_nm = |v: i64| reticle_eval::r3(v as f64 * plan.grid.dbu_nm);
        let r = plan.region;
        let path = ctx.readable(Path::new(&args.call.layout))?;
        let result = SimulationResult {
            statistics: Some(statistics),
            images,
            schema_version: reticle_protocol::SCHEMA_VERSION.to_owned(),
            layout: SimulatedLayout {
                path: path.display().to_string(),
                sha256: plan.sha256.clone(),
                format: if plan.format == "glp" {
                    "glp"
                } else {
                    "gds/oasis"
                }
                .to_owned(),
                polygons_in_window: sum.polygons,
            },
            window_nm: WindowNm {
                left: to_nm(r.left),
                bottom: to_nm(r.bottom),
                right: to_nm(r.right),
                top: to_nm(r.top),
            },
            pixel_nm: plan.pixel_nm,
            grid: GridSize { width, height },
            model: ModelSummary {
                kind: plan.model_kind.clone(),
                period_nm: plan.period_nm,
                focus_kernels: plan.focus_kernels,
            },
            backend: BackendSummary {
                kind: backend.kind,
                adapter: backend.adapter,
            },
            metrics: SimulationMetrics {
                l2_px: Some(sum.l2_px),
                pvb_px: Some(sum.pvb_px),
                epe: Some(SimulatedEpe::Tiled(sum.epe.summary())),
            },
            timing_ms: SimulationTiming {
                imaging: None,
                total: None,
                merge: Some((started.elapsed().as_secs_f64() * 1e4).round() / 10.0),
            },
            region: Some(SimulatedRegion {
                source: plan.region_source.clone(),
                box_nm: [to_nm(r.left), to_nm(r.bottom), to_nm(r.right), to_nm(r.top)],
                pixels: sum.pixels,
            }),
            imaging: Some(TiledImaging {
                mode: "tiled".to_owned(),
                period_nm: plan.period_nm,
                core_nm: to_nm(plan.grid.core_dbu),
                halo_nm: to_nm(plan.grid.halo_dbu),
                tiles,
            }),
        };
        payload(result)
    }
}

/// The region's nominal aerial, resist and print images stitched from the tiles' core
/// blocks, written as `simulate` writes one window's.
fn stitched_images(dir: &Path, plan: &RegionPlan) -> Result<ImageFiles, ToolError> {
    let (x0, y0, width, height) = region_pixels(plan);
    let mut aerial = Grid::filled(width, height, 0.0f32);
    let mut printed = Grid::filled(width, height, 0u8);
    let mut target = Grid::filled(width, height, 0u8);
    for t in plan.range.iter() {
        if reticle_eval::tiles::intersection(&plan.grid.core(t), &plan.region).is_none() {
            continue;
        }
        let b = read_block(dir, t)?;
        for row in 0..b.height {
            for col in 0..b.width {
                let (gx, gy) = (b.x0 + col as i64 - x0, b.y0 + row as i64 - y0);
                if gx < 0 || gy < 0 || gx as usize >= width || gy as usize >= height {
                    return Err(internal(format!(
                        "tile {}'s block lies outside the region",
                        t.id()
                    )));
                }
                let i = row * b.width + col;
                *aerial.at_mut(gx as usize, gy as usize) = b.aerial[i];
                *printed.at_mut(gx as usize, gy as usize) = b.printed[i];
                *target.at_mut(gx as usize, gy as usize) = b.target[i];
            }
        }
    }
    let resist = Resist::ICCAD2013;
    let response = Grid {
        width,
        height,
        data: aerial
            .data
            .iter()
            .map(|&i| 1.0 / (1.0 + (-resist.steepness * (i - resist.threshold)).exp()))
            .collect(),
    };
    let mut images = image_files(dir, &aerial, &response, &printed, &target)?;
    images.orientation =
        "row 0 of the .npy and the bottom row of the PNG are the bottom of the region".to_owned();
    images.origin_px = Some([x0, y0]);
    Ok(images)
}
