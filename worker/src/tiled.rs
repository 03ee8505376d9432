//! Whole-layout plumbing the tiled ops share (docs/DECISIONS.md D57; the ops are
//! [`crate::ops::whole`]): a region's plan, one tile imaged, the tile files in the job's
//! tiles folder (`<artifact dir>/.tiles`, D190) and their merge order.
//!
//! Files are written through a temporary name and a rename, so a tile re-run after its
//! worker died replaces a whole file or nothing.

use std::path::{Path, PathBuf};

use reticle_eval::tile::{LayoutSource, TileOutput};
use reticle_eval::tiles::{RegionPlan, TileGrid, TileIndex};
use reticle_eval::{ImagedWindow, LayoutWindow};
use reticle_kernel::model::{ModelSpec, default_model};
use reticle_layout::{BBox, Point};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use reticle_eval::imaging::{
    Buffers, DEFAULT_SIDE_NM, Imaged, Reads, check_pixel, image_windows_reading,
};
use reticle_eval::region_source::RegionSource;
use reticle_eval::report::{ReportLevel, Setup, ViolationLimits};

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::layouts::{RegionLayers, open_region};
use crate::op::{cancelled, eval_error};

/// A tool's typed arguments plus what the host's fan-out adds for a whole-layout job:
/// the plan (every op after `<tool>.plan`) and the tile's number (`<tool>.tile`).
#[derive(serde::Deserialize)]
pub(crate) struct TiledArgs<A> {
    /// The tool call's arguments.
    #[serde(flatten)]
    pub(crate) call: A,
    /// The tiles' halo (nm); default: the kernel's rule.
    #[serde(default)]
    pub(crate) halo_nm: Option<f64>,
    /// The region's plan, from `<tool>.plan`.
    #[serde(default)]
    pub(crate) plan: Option<RegionPlan>,
    /// Which tile, as its number in the plan's row-major order (the host knows no geometry).
    #[serde(default)]
    pub(crate) tile_number: Option<u64>,
    /// How many consecutive tiles from `tile_number` the unit runs (default 1; at most
    /// [`UNIT_TILES_MAX`], which the plan answers as `unit_tiles`; D255).
    #[serde(default)]
    pub(crate) tile_count: Option<u64>,
}

/// The most tiles one `evaluate.tile` or `simulate.tile` unit runs, one after the other
/// (`tile_count`), answered by their plans as `unit_tiles`: the host's fan-out groups a
/// large region's cheap tiles so that a worker does not wait for the host between them
/// (D255).
pub(crate) const UNIT_TILES_MAX: u64 = 8;

impl<A> TiledArgs<A> {
    /// The plan (`INVALID_INPUT` without one, naming `what`: the evaluation, the
    /// simulation).
    pub(crate) fn plan(&self, what: &str) -> Result<&RegionPlan, ToolError> {
        self.plan
            .as_ref()
            .ok_or_else(|| invalid(format!("this op needs the {what}'s `plan`"), json!({})))
    }
}

/// How a tiled op opens its deck and layout ([`open_deck_region`]).
pub(crate) struct DeckRegion<'a> {
    /// The deck, the layout and the layer.
    pub(crate) deck: &'a DeckArgs,
    /// The report tiles' size (nm); default: the deck's.
    pub(crate) tile_nm: Option<f64>,
    /// The report's level.
    pub(crate) report_level: ReportLevel,
    /// The report's limits.
    pub(crate) limits: ViolationLimits,
    /// The top cell; default: the layout's.
    pub(crate) cell: Option<&'a str>,
    /// A layer imaged in place of the target (post-OPC verification, D180).
    pub(crate) mask_layer: Option<&'a str>,
}

/// The deck setup and the layout's region source for a tiled op ([`open_setup_region`]
/// after the deck's setup): the one way `evaluate.*` and `optimize.*` open a layout.
pub(crate) fn open_deck_region(
    ctx: &AttemptCtx<'_>,
    open: &DeckRegion<'_>,
    plan: Option<&RegionPlan>,
) -> Result<(Setup, RegionSource), ToolError> {
    let setup = open.deck.setup(
        ctx,
        open.tile_nm,
        open.report_level,
        open.limits,
        |_| Ok(()),
    )?;
    let source = open_setup_region(
        ctx,
        &open.deck.layout,
        &setup,
        open.cell,
        open.mask_layer,
        plan,
    )?;
    Ok((setup, source))
}

/// The region source of `layout` for a deck already set up: the deck's target layer (none
/// for an ICCAD clip) and the layers its rules read as context, checked against the plan's
/// layout hash and extent when there is a plan. `open_deck_region` and the id resolution
/// (which sets its deck up first) open a layout through it.
pub(crate) fn open_setup_region(
    ctx: &AttemptCtx<'_>,
    layout: &Path,
    setup: &Setup,
    cell: Option<&str>,
    mask_layer: Option<&str>,
    plan: Option<&RegionPlan>,
) -> Result<RegionSource, ToolError> {
    let context_layers = reticle_eval::deck::context_layers(&setup.deck, setup.target);
    let layer = (!is_glp(layout)).then(|| setup.target.to_string());
    open_region(
        ctx,
        layout,
        &RegionLayers {
            cell,
            layer: layer.as_deref(),
            context_layers: &context_layers,
            mask_layer,
        },
        plan.map(|p| p.sha256.as_str()),
        plan.map(|p| p.extent),
    )
}

/// Most tiles one evaluation may have (a 1 cm² block at 4 nm pixels is about 10⁸ nm² ÷
/// 1 µm² ≈ 10⁸; this bounds what one job asks of a pool and of its artifact directory).
pub const MAX_TILES: u64 = 4_000_000;

pub(crate) fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

pub(crate) fn internal(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InternalError, message)
}

pub(crate) fn is_glp(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("glp"))
}

/// `box_um` in dbu, checked.
pub(crate) fn region_box(box_um: [f64; 4], dbu_nm: f64) -> Result<BBox, ToolError> {
    let [l, b, r, t] = box_um;
    if !(box_um.iter().all(|v| v.is_finite()) && l < r && b < t) {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            "box_um must be [left, bottom, right, top] with left < right and bottom < top",
        )
        .with_details(json!({"box_um": box_um})));
    }
    let to = |um: f64| (um * 1000.0 / dbu_nm).round() as i64;
    Ok(BBox::from_corners(
        Point::new(to(l), to(b)),
        Point::new(to(r), to(t)),
    ))
}

/// What every plan decides from the caller's region, model and pixel.
pub(crate) struct PlanRequest<'a> {
    pub(crate) box_um: Option<[f64; 4]>,
    pub(crate) model: Option<&'a ModelSpec>,
    pub(crate) pixel_nm: Option<f64>,
    pub(crate) halo_nm: Option<f64>,
    /// What the layer is called in errors.
    pub(crate) layer_name: String,
}

/// The plan of a region of `source`: the region (the box, else a `.glp` clip's ICCAD
/// window, else the layers' box), the model, the pixel (within the model's limit), the
/// halo (the kernel's rule unless given), the grid and the tiles.
pub(crate) fn plan_region(
    ctx: &AttemptCtx<'_>,
    source: &RegionSource,
    req: &PlanRequest<'_>,
) -> Result<RegionPlan, ToolError> {
    let dbu_nm = source.dbu_nm;
    let (region, region_source) = match req.box_um {
        Some(b) => (region_box(b, dbu_nm)?, "box"),
        None if source.format == "glp" => (reticle_kernel::iccad::window(), "iccad_window"),
        None => (
            source.extent().ok_or_else(|| {
                ToolError::new(ErrorCode::InvalidLayer, "the evaluated layer has no shapes")
                    .with_details(json!({"layer": req.layer_name}))
            })?,
            "layer_bbox",
        ),
    };
    let model = req
        .model
        .cloned()
        .unwrap_or_else(|| default_model(DEFAULT_SIDE_NM));
    let period_nm = model.period_nm();
    let pixel_nm = req.pixel_nm.unwrap_or(1.0);
    check_pixel(&model, pixel_nm)?;
    let halo_nm = match req.halo_nm {
        Some(h) => h,
        None => reticle_kernel::tiling::tile_halo_nm(&model, pixel_nm)
            .map_err(|e| invalid(format!("model: {e}"), json!({})))?,
    };
    let grid = TileGrid::new(period_nm, halo_nm, pixel_nm, dbu_nm)?;
    let window_px = (period_nm / pixel_nm).round();
    if window_px * window_px > ctx.context.limits.max_raster_pixels as f64 {
        return Err(ToolError::new(
            ErrorCode::QueryTooLarge,
            "one tile's window (the model period) at this pixel size is over the raster limit",
        )
        .with_details(json!({"pixels": window_px * window_px, "limit": ctx.context.limits.max_raster_pixels, "pixel_nm": pixel_nm})));
    }
    let range = grid.covering(region);
    if range.count() > MAX_TILES {
        return Err(ToolError::new(
            ErrorCode::QueryTooLarge,
            format!(
                "the region needs {} tiles; one evaluation may have {MAX_TILES}",
                range.count()
            ),
        )
        .with_details(json!({"tiles": range.count(), "limit": MAX_TILES, "hint": "use a smaller box or coarser pixels"})));
    }
    let kernels = model
        .kernels()
        .map_err(|e| invalid(format!("model: {e}"), json!({})))?;
    Ok(RegionPlan {
        sha256: source.sha256.clone(),
        format: source.format.to_owned(),
        region,
        region_source: region_source.to_owned(),
        extent: source.extent(),
        grid,
        range,
        period_nm,
        pixel_nm,
        model_kind: reticle_eval::report::model_kind(&model).to_owned(),
        focus_kernels: kernels.focus.scales.len(),
    })
}

/// Tile `number` of `plan`.
pub(crate) fn tile_of(plan: &RegionPlan, number: Option<u64>) -> Result<TileIndex, ToolError> {
    let number = number.ok_or_else(|| invalid("a tile op needs the `tile_number`", json!({})))?;
    plan.range.nth(number).ok_or_else(|| {
        invalid(
            format!(
                "the plan has {} tiles; there is no tile {number}",
                plan.range.count()
            ),
            json!({"tile_number": number}),
        )
    })
}

/// The tiles of a unit: `count` (default 1, at most [`UNIT_TILES_MAX`]) consecutive tiles
/// of `plan` from tile `number`.
pub(crate) fn tiles_of(
    plan: &RegionPlan,
    number: Option<u64>,
    count: Option<u64>,
) -> Result<Vec<TileIndex>, ToolError> {
    let count = count.unwrap_or(1);
    if !(1..=UNIT_TILES_MAX).contains(&count) {
        return Err(invalid(
            format!("`tile_count` must be 1 to {UNIT_TILES_MAX}, not {count}"),
            json!({"tile_count": count}),
        ));
    }
    let first = tile_of(plan, number)?;
    let number = number.unwrap_or(0);
    let mut tiles = vec![first];
    for n in number + 1..number + count {
        tiles.push(tile_of(plan, Some(n))?);
    }
    Ok(tiles)
}

/// What a unit of `summaries.len()` tiles answers: the tile's summary for one tile (as a
/// Slurm element's tile and a unit before D255 answer), else `{"tiles": [summary, …]}`.
pub(crate) fn unit_summary(mut summaries: Vec<Value>) -> Value {
    if summaries.len() == 1 {
        summaries.swap_remove(0)
    } else {
        json!({ "tiles": summaries })
    }
}

/// The tile's window read from `source` and imaged at the three corners with `model` (the
/// plan's default when `None`); `None` when the window holds no geometry (nothing to image:
/// a dark, empty tile).
pub(crate) fn image_tile(
    ctx: &AttemptCtx<'_>,
    plan: &RegionPlan,
    tile: TileIndex,
    source: &mut RegionSource,
    model: Option<&ModelSpec>,
) -> Result<Option<ImagedWindow>, ToolError> {
    image_tiles(ctx, plan, &[tile], source, model).map(first)
}

/// [`image_tile`] of several tiles, in order, as one batch for the engine (the GPU path
/// images up to [`tile_batch`] windows in one submission, D257).
pub(crate) fn image_tiles(
    ctx: &AttemptCtx<'_>,
    plan: &RegionPlan,
    tiles: &[TileIndex],
    source: &mut RegionSource,
    model: Option<&ModelSpec>,
) -> Result<Vec<Option<ImagedWindow>>, ToolError> {
    let reads = tiles.iter().map(|_| None).collect();
    image_tiles_reading(ctx, plan, tiles, source, model, reads)
}

/// How many of `plan`'s tiles the engine images in one batch: one on the CPU path (its
/// threads already share one window), up to its memory cap on a GPU (D257).
pub(crate) fn tile_batch(ctx: &AttemptCtx<'_>, plan: &RegionPlan) -> Result<usize, ToolError> {
    let side = (plan.grid.window_dbu() as f64 / plan.grid.pixel_dbu).ceil() as usize;
    Ok(ctx.state.backend.engine()?.batch_windows(side).max(1))
}

/// The only element of a batch of one.
fn first(mut imaged: Vec<Option<ImagedWindow>>) -> Option<ImagedWindow> {
    imaged.pop().flatten()
}

/// The images, mask raster and target of the last tile evaluated in this process, handed
/// back by [`recycle`]: the next tile's are written into their buffers (D194, D195).
static RECYCLED: std::sync::Mutex<Option<Buffers>> = std::sync::Mutex::new(None);

/// Hands a tile's images back once it is evaluated, for [`image_tiles_for_evaluation`] to
/// reuse their buffers.
pub(crate) fn recycle(imaged: Option<ImagedWindow>) {
    if let (Some(w), Ok(mut slot)) = (imaged, RECYCLED.lock()) {
        *slot = Some(Buffers::from(w));
    }
}

/// [`image_tiles`] for `reticle_eval::tile::evaluate_tile` under `rules`, which reads the
/// images only in the core plus half the halo (the printed contours, when `rules` trace
/// them) or an EPE search around the core's checkpoints, and counts its own core: the
/// engine images no more (D193, D197); those pixels are the same bits as [`image_tile`]'s.
/// The first tile reuses the buffers [`recycle`] handed back.
pub(crate) fn image_tiles_for_evaluation(
    ctx: &AttemptCtx<'_>,
    plan: &RegionPlan,
    tiles: &[TileIndex],
    source: &mut RegionSource,
    model: Option<&ModelSpec>,
    rules: &[&reticle_kernel::rules::Rule],
) -> Result<Vec<Option<ImagedWindow>>, ToolError> {
    let reach = reticle_eval::tile::image_reach_dbu(&plan.grid, rules);
    let aerial_corners = reticle_eval::tile::image_aerial_corners(rules);
    let mut recycled = RECYCLED.lock().ok().and_then(|mut slot| slot.take());
    let reads = tiles
        .iter()
        .map(|&tile| {
            let core = plan.grid.core(tile);
            Some(Reads {
                pixels: BBox {
                    left: core.left - reach,
                    bottom: core.bottom - reach,
                    right: core.right + reach,
                    top: core.top + reach,
                },
                aerial_corners,
                reuse: recycled.take().unwrap_or_default(),
            })
        })
        .collect();
    image_tiles_reading(ctx, plan, tiles, source, model, reads)
}

/// The shared body of [`image_tiles`] and [`image_tiles_for_evaluation`]: the tiles with
/// geometry go to the engine as one batch; the empty ones answer `None`.
fn image_tiles_reading(
    ctx: &AttemptCtx<'_>,
    plan: &RegionPlan,
    tiles: &[TileIndex],
    source: &mut RegionSource,
    model: Option<&ModelSpec>,
    reads: Vec<Option<Reads>>,
) -> Result<Vec<Option<ImagedWindow>>, ToolError> {
    let mut windows = Vec::with_capacity(tiles.len());
    let mut lit = Vec::with_capacity(tiles.len());
    for (&tile, reads) in tiles.iter().zip(reads) {
        let window = plan.grid.window(tile);
        let polygons = source.polygons(window, false)?;
        lit.push(!polygons.is_empty());
        if polygons.is_empty() {
            continue;
        }
        let layout = LayoutWindow {
            format: if plan.format == "glp" {
                "glp"
            } else {
                "gds/oasis"
            },
            sha256: plan.sha256.clone(),
            dbu_nm: plan.grid.dbu_nm,
            polygons: polygons.target,
            mask: polygons.mask,
            window,
            context: polygons.context,
        };
        windows.push((layout, reads));
    }
    let model = model
        .cloned()
        .unwrap_or_else(|| default_model(plan.period_nm));
    let mut imaged = if windows.is_empty() {
        Vec::new()
    } else {
        let engine = ctx.state.backend.engine()?;
        image_windows_reading(engine, windows, &model, plan.pixel_nm, ctx.cancel, |_| {})
            .map_err(|e| eval_error(e, ctx.job_id))?
    }
    .into_iter()
    .map(|Imaged { window, .. }| window);
    if ctx.cancel.is_cancelled() {
        return Err(cancelled(ctx.job_id));
    }
    Ok(lit
        .into_iter()
        .map(|lit| if lit { imaged.next() } else { None })
        .collect())
}

/// A tile's file name in the job's tiles folder.
pub(crate) fn tile_file(t: TileIndex) -> String {
    format!("tile_{}_{}.json", t.ix, t.iy)
}

/// The folder of the per-tile intermediates inside the job's artifact directory
/// ([`reticle_protocol::wire::TILES_DIR`]; D190), created when missing.
///
/// # Errors
/// `INTERNAL_ERROR` when it cannot be created.
pub(crate) fn tiles_dir(dir: &Path) -> Result<PathBuf, ToolError> {
    let tiles = dir.join(reticle_protocol::wire::TILES_DIR);
    std::fs::create_dir_all(&tiles)
        .map_err(|e| internal(format!("cannot create {}: {e}", tiles.display())))?;
    Ok(tiles)
}

/// Writes a tile's output into the job's tiles folder.
pub(crate) fn write_tile(dir: &Path, out: &TileOutput) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec(out).map_err(|e| internal(format!("tile output: {e}")))?;
    artifacts::write_named(&tiles_dir(dir)?, &tile_file(out.tile), &bytes)?;
    Ok(())
}

/// Reads tile `t`'s output (an evaluation's [`TileOutput`], or another fan-out's tile
/// type) back from the job's tiles folder.
pub(crate) fn read_tile<T: serde::de::DeserializeOwned>(
    dir: &Path,
    t: TileIndex,
) -> Result<T, ToolError> {
    let path = dir
        .join(reticle_protocol::wire::TILES_DIR)
        .join(tile_file(t));
    let bytes = std::fs::read(&path).map_err(|e| {
        internal(format!(
            "tile {} has no output ({}): {e}",
            t.id(),
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| internal(format!("tile {} output is corrupt: {e}", t.id())))
}

/// The summary a tile op answers with (its output is the file).
pub(crate) fn tile_summary(out: &TileOutput) -> Value {
    json!({
        "tile": out.tile.id(),
        "found": out.found.len(),
        "pieces": out.pieces.len(),
        "imaged": out.metrics.imaged,
        "l2_px": out.metrics.l2_px,
        "pvb_px": out.metrics.pvb_px,
    })
}

/// Tiles the merge reads and parses at once (D240): enough for every core of a cluster
/// node, and the merge holds only that many parsed tiles beyond what it keeps.
const MERGE_CHUNK: usize = 256;

/// Every tile's output of `plan`, in order, reporting merge progress: read and parsed a
/// chunk at a time on every compute thread (D240), handed on in the plan's order.
pub(crate) fn tiles_in_order<'a>(
    ctx: &'a AttemptCtx<'_>,
    dir: &'a Path,
    plan: &'a RegionPlan,
) -> impl Iterator<Item = Result<TileOutput, ToolError>> + 'a {
    use rayon::prelude::*;
    let total = plan.range.count();
    let mut order = plan.range.iter();
    let mut done = 0u64;
    std::iter::from_fn(move || {
        let chunk: Vec<TileIndex> = order.by_ref().take(MERGE_CHUNK).collect();
        if chunk.is_empty() {
            return None;
        }
        ctx.progress.report(done, total, "merging tiles");
        done += chunk.len() as u64;
        let read: Vec<Result<TileOutput, ToolError>> =
            chunk.par_iter().map(|&t| read_tile(dir, t)).collect();
        Some(read)
    })
    .flatten()
}
