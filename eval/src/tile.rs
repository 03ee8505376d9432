//! One tile of a whole-layout evaluation (docs/DECISIONS.md D57): the unit of work any
//! executor runs. Its inputs are the layout, the deck's rules on the layer, the grid, the
//! region and the tile's index; its output, a [`TileOutput`], holds the violations the
//! tile owns and the tile's share of the metrics, and nothing that depends on which
//! worker ran it or when.
//!
//! - **Mask rules** run on the drawn polygons (the mask layer's, when the evaluation
//!   images one: post-OPC verification, D180) inside a box around the core (first the
//!   imaging window), merged. A box edge is not a polygon edge: a violation whose marker
//!   reaches an edge of the box where the box cuts the layout may be an artefact of the
//!   cut, or only part of a longer violation; when such a violation could belong to this
//!   tile, the box doubles and the rules run again, until nothing near the core is cut
//!   (at the latest when the box holds the whole layer). A violation is kept when it
//!   touches the region and this tile owns it ([`crate::tiles::TileGrid::owner`]).
//! - **Printed rules** run on the printed contours of the tile's own image inside the core
//!   plus a margin of half the halo. Contours cannot be extended beyond the image, so a
//!   printed violation cut by the margin's edge near the core is kept as a **piece**,
//!   clipped to the core; the merge joins the pieces of neighbouring tiles
//!   ([`crate::stitch`]).
//! - **EPE and PV band** are gauged at the ICCAD checkpoints of whole drawn polygons (a
//!   checkpoint's place depends on its whole edge, not on where a tile cuts it), for the
//!   checkpoints in the core and the region.
//! - **Metrics**: L2 and PV band count the core's pixels whose centre is in the region.

use std::collections::BTreeMap;

use reticle_kernel::metrics::{Checkpoint, checkpoints};
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::rules::{
    AppliesTo, Region, Rule, RuleKind, Violation, ViolationGeometry, check_rule,
};
use reticle_kernel::{CancelToken, Grid};
use reticle_layout::{BBox, Point, Polygon};
use reticle_protocol::ToolError;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{EvalError, check_cancel, invalid};
use crate::found::{Found, from_violation, rule_run};
use crate::gauges::{EpeSums, check_at, iccad_epe_config};
use crate::printed::printed_polygons_of;
use crate::tiles::{RegionPlan, TileGrid, TileIndex, TileRange, grow, intersection, touches};
use crate::window::ImagedWindow;
use pixels::{count_empty_pixels, count_pixels};

/// Polygons of the evaluated layer and of the context layers (the second layers of
/// enclosure rules, by the layer text as the deck names it).
#[derive(Debug, Clone, Default)]
pub struct LayerPolygons {
    /// The evaluated layer (dbu).
    pub target: Vec<Polygon>,
    /// Context layers (dbu).
    pub context: BTreeMap<String, Vec<Polygon>>,
    /// The mask layer, when the evaluation images one instead of the target (post-OPC
    /// verification, D180): what is imaged and what the mask rules check.
    pub mask: Option<Vec<Polygon>>,
}

impl LayerPolygons {
    /// The polygons imaged and checked by the mask rules: the mask layer's, else the
    /// target's.
    #[must_use]
    pub fn mask_polygons(&self) -> &[Polygon] {
        self.mask.as_deref().unwrap_or(&self.target)
    }

    /// Whether nothing at all meets the box (no target, mask or context polygon).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.target.is_empty()
            && self.mask.as_ref().is_none_or(Vec::is_empty)
            && self.context.values().all(Vec::is_empty)
    }
}

/// Where a tile reads the layout: the worker implements it over its parsed layout.
pub trait LayoutSource {
    /// The polygons that meet `b` (dbu): clipped to `b`, or whole with `whole`.
    ///
    /// # Errors
    /// The tool error of a read or a resource limit.
    fn polygons(&mut self, b: BBox, whole: bool) -> Result<LayerPolygons, ToolError>;

    /// The box of everything [`Self::polygons`] can return; a box holding it cuts no shape.
    fn extent(&self) -> Option<BBox>;
}

/// What the tile's pixels add to the report's metrics.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TileMetrics {
    /// Pixels counted (core pixels whose centre is in the region).
    pub pixels: u64,
    /// Nominal print ≠ target.
    pub l2_px: u64,
    /// Max-corner print ≠ min-corner print.
    pub pvb_px: u64,
    /// Target pixels (0 unless [`TileJob::statistics`]).
    pub target_px: u64,
    /// Printed pixels per corner (nominal, max, min; 0 unless [`TileJob::statistics`]).
    pub printed_px: [u64; 3],
    /// Nominal aerial intensity: minimum, maximum and sum over the counted pixels (0 unless
    /// [`TileJob::statistics`]).
    pub aerial_min: f64,
    /// See `aerial_min`.
    pub aerial_max: f64,
    /// See `aerial_min`.
    pub aerial_sum: f64,
    /// Sum of the resist response over the counted pixels (only when the job asks for
    /// statistics: `simulate`).
    pub resist_sum: f64,
    /// EPE gauges at the tile's checkpoints.
    pub epe: EpeSums,
    /// Drawn polygons the tile owns (by their box centre) that touch the region.
    pub polygons: u64,
    /// Whether the window held any geometry (an empty window is not imaged).
    pub imaged: bool,
}

impl TileMetrics {
    /// Adds a later tile's metrics to these (tiles are summed in row-major order, so the
    /// floating-point sums are reproducible).
    pub fn add(&mut self, other: &Self) {
        let first = self.pixels == 0;
        if other.pixels > 0 {
            self.aerial_min = if first {
                other.aerial_min
            } else {
                self.aerial_min.min(other.aerial_min)
            };
            self.aerial_max = if first {
                other.aerial_max
            } else {
                self.aerial_max.max(other.aerial_max)
            };
        }
        self.pixels += other.pixels;
        self.l2_px += other.l2_px;
        self.pvb_px += other.pvb_px;
        self.target_px += other.target_px;
        for (a, b) in self.printed_px.iter_mut().zip(other.printed_px) {
            *a += b;
        }
        self.aerial_sum += other.aerial_sum;
        self.resist_sum += other.resist_sum;
        self.epe.add(&other.epe);
        self.polygons += other.polygons;
        self.imaged |= other.imaged;
    }
}

/// Everything one tile reports.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TileOutput {
    /// The tile.
    pub tile: TileIndex,
    /// Its metrics.
    pub metrics: TileMetrics,
    /// Violations this tile owns, whole.
    pub found: Vec<Found>,
    /// Printed violations cut by the edge of the tile's image, clipped to its core, for
    /// the merge to join.
    pub pieces: Vec<Piece>,
    /// How many times the mask-rule box had to grow (0: the window sufficed).
    pub mask_box_growths: u32,
}

/// Part of a printed violation longer than a tile's image: the edge-pair marker clipped to
/// the tile's core (either side may be empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Piece {
    /// Index of the rule in the rules checked.
    pub rule: usize,
    /// The tile it was cut from.
    pub tile: TileIndex,
    /// The distance measured on this piece (nm).
    pub measured: f64,
    /// The marker's segments inside the core (dbu): `[x1, y1, x2, y2]`.
    pub segments: Vec<[i64; 4]>,
    /// Box of the segments (dbu).
    pub bbox: BBox,
}

/// What a tile evaluation needs besides the layout and the images.
#[derive(Debug, Clone, Copy)]
pub struct TileJob<'a> {
    /// The grid.
    pub grid: &'a TileGrid,
    /// The tiles that cover the region.
    pub range: &'a TileRange,
    /// The region evaluated (dbu).
    pub region: BBox,
    /// This tile.
    pub tile: TileIndex,
    /// The deck's rules on the evaluated layer (`Found::rule` indexes them).
    pub rules: &'a [&'a Rule],
    /// Also the nominal corner's statistics: the aerial intensity's minimum, maximum and
    /// sum, the resist response's sum, the printed pixels of each corner and the target's
    /// (what `simulate`'s statistics need). Without, those metrics are 0: an evaluation's
    /// report reads only L2, PV band, EPE and the polygons (D197).
    pub statistics: bool,
}

impl<'a> TileJob<'a> {
    /// Tile `tile` of `plan`, checked against `rules` (the worker's tiled evaluate,
    /// simulate and id resolution all build their tiles this way).
    pub fn of_plan(
        plan: &'a RegionPlan,
        tile: TileIndex,
        rules: &'a [&'a Rule],
        statistics: bool,
    ) -> Self {
        Self {
            grid: &plan.grid,
            range: &plan.range,
            region: plan.region,
            tile,
            rules,
            statistics,
        }
    }
}

impl TileJob<'_> {
    fn dbu_nm(&self) -> f64 {
        self.grid.dbu_nm
    }

    /// The largest distance a geometric rule looks across (dbu), area rules by the side
    /// of a square of their area: how far from the core a violation of this tile can lie.
    fn reach_dbu(&self) -> i64 {
        let dbu = self.dbu_nm();
        self.rules
            .iter()
            .map(|r| match r.kind {
                RuleKind::Area => r.value.max(0.0).sqrt() / dbu,
                _ => r.value.max(0.0) / dbu,
            })
            .fold(0.0f64, f64::max)
            .ceil() as i64
            + 1
    }
}

/// Evaluates one tile: mask rules from `source`, printed rules, gauges and metrics from
/// `imaged` (the tile's window imaged at the three corners; `None` when the window holds
/// no geometry).
///
/// # Errors
/// [`EvalError::Cancelled`]; the source's tool errors; `INVALID_INPUT` for a rule that
/// cannot be checked.
pub fn evaluate_tile(
    job: &TileJob<'_>,
    imaged: Option<&ImagedWindow>,
    source: &mut dyn LayoutSource,
    cancel: &CancelToken,
) -> Result<TileOutput, EvalError> {
    evaluate_tile_timed(job, imaged, source, cancel, &mut TileTiming::default())
}

/// [`evaluate_tile`], adding the seconds of each phase to `timing`.
///
/// # Errors
/// As [`evaluate_tile`].
pub fn evaluate_tile_timed(
    job: &TileJob<'_>,
    imaged: Option<&ImagedWindow>,
    source: &mut dyn LayoutSource,
    cancel: &CancelToken,
    timing: &mut TileTiming,
) -> Result<TileOutput, EvalError> {
    let mut clock = std::time::Instant::now();
    let (mut found, growths) = mask_rules(job, source, cancel)?;
    timing.mask_rules_s += TileTiming::lap(&mut clock);
    let mut pieces = Vec::new();
    let mut metrics = TileMetrics::default();
    let core = job.grid.core(job.tile);
    let owned = intersection(&core, &job.region);
    // Whole polygons meeting the core: their checkpoints, and the polygons this tile counts.
    let whole = source.polygons(grow(core, 1), true)?;
    metrics.polygons = whole.target.iter().filter(|p| owns_polygon(job, p)).count() as u64;
    timing.epe_s += TileTiming::lap(&mut clock);
    if let Some(imaged) = imaged {
        metrics.imaged = true;
        printed_rules(job, imaged, &mut found, &mut pieces, timing)?;
        check_cancel(cancel)?;
        TileTiming::lap(&mut clock);
        let dbu_nm = job.dbu_nm();
        let spacing = iccad_epe_config(dbu_nm).spacing_nm;
        let mine: Vec<Checkpoint> = checkpoints(&whole.target, spacing)
            .into_iter()
            .filter(|c| owned.is_some_and(|b| in_half_open(c.x, c.y, &b)))
            .collect();
        let level = f64::from(imaged.resist.threshold);
        if let Some(sums) = check_at(
            job.rules,
            &mine,
            &imaged.frame,
            &imaged.output,
            dbu_nm,
            level,
            &mut found,
        ) {
            metrics.epe = sums;
        }
        timing.epe_s += TileTiming::lap(&mut clock);
        count_pixels(job, imaged, &mut metrics);
        timing.pixels_s += TileTiming::lap(&mut clock);
    } else {
        // An empty window: no checkpoints, nothing printed, a dark image.
        count_empty_pixels(job, &mut metrics);
    }
    check_cancel(cancel)?;
    Ok(TileOutput {
        tile: job.tile,
        metrics,
        found,
        pieces,
        mask_box_growths: growths,
    })
}

/// Whether this tile counts polygon `p`: the tile holding the lowest (then leftmost)
/// vertex of its part inside the region, where the polygon has area just above and right
/// of that vertex, inside the region, so that tile's overlap query returns it.
fn owns_polygon(job: &TileJob<'_>, p: &Polygon) -> bool {
    let Some(inside) =
        reticle_layout::clip::clip_polygon(p, &job.region).filter(|q| q.signed_area2() != 0)
    else {
        return false;
    };
    let Some(v) = inside.points.iter().min_by_key(|q| (q.y, q.x)) else {
        return false;
    };
    let pm = |c: i64| (c as f64 * job.dbu_nm() * 1000.0).round() as i64;
    job.grid.owner(job.range, (pm(v.x), pm(v.y))) == job.tile
}

fn in_half_open(x: f64, y: f64, b: &BBox) -> bool {
    x >= b.left as f64 && x < b.right as f64 && y >= b.bottom as f64 && y < b.top as f64
}

/// The sides of `bounds` that lie inside `extent` (left, bottom, right, top): only there can
/// the box have cut a shape.
fn cutting_sides(bounds: &BBox, extent: Option<BBox>) -> [Option<i64>; 4] {
    let Some(e) = extent else {
        return [None; 4];
    };
    [
        (bounds.left > e.left).then_some(bounds.left),
        (bounds.bottom > e.bottom).then_some(bounds.bottom),
        (bounds.right < e.right).then_some(bounds.right),
        (bounds.top < e.top).then_some(bounds.top),
    ]
}

/// Whether a marker point lies on a cutting side of the box.
fn on_cut(p: Point, sides: &[Option<i64>; 4]) -> bool {
    sides[0] == Some(p.x) || sides[2] == Some(p.x) || sides[1] == Some(p.y) || sides[3] == Some(p.y)
}

/// Whether the box may have cut `v` (a marker point on a cutting side).
fn is_cut(v: &Violation, sides: &[Option<i64>; 4]) -> bool {
    match &v.marker {
        ViolationGeometry::EdgePair { first, second } => [first.p1, first.p2, second.p1, second.p2]
            .iter()
            .any(|p| on_cut(*p, sides)),
        ViolationGeometry::Polygon { hull } => hull.iter().any(|p| on_cut(*p, sides)),
    }
}

/// `v` with the edges of a symmetric pair (width, space, notch) in a canonical order, so a
/// violation's marker does not depend on the order of the polygons around it (which a
/// tile's box changes). Enclosure keeps the enclosing edge first.
#[must_use]
pub fn canonical(mut v: Violation) -> Violation {
    if matches!(v.kind, RuleKind::Width | RuleKind::Space | RuleKind::Notch)
        && let ViolationGeometry::EdgePair { first, second } = &mut v.marker
    {
        let key = |e: &reticle_kernel::rules::Edge| (e.p1, e.p2);
        if key(second) < key(first) {
            std::mem::swap(first, second);
        }
    }
    v
}

/// Mask rules of the tile, growing the box until no violation near the core is cut.
/// Returns the violations this tile owns and how often the box grew.
fn mask_rules(
    job: &TileJob<'_>,
    source: &mut dyn LayoutSource,
    cancel: &CancelToken,
) -> Result<(Vec<Found>, u32), EvalError> {
    let mask: Vec<(usize, &Rule)> = job
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.applies_to == AppliesTo::Mask && rule_run(r).engine_path == "mrc.standard"
        })
        .map(|(i, r)| (i, *r))
        .collect();
    if mask.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let dbu_nm = job.dbu_nm();
    let core = job.grid.core(job.tile);
    let near_core = grow(core, job.reach_dbu());
    let extent = source.extent();
    let check_err = |e: reticle_kernel::rules::CheckError| invalid(e.to_string(), json!({}));
    let mut bounds = job.grid.window(job.tile);
    let mut growths = 0;
    loop {
        let layers = source.polygons(bounds, false)?;
        let target = Region::from_polygons(layers.mask_polygons());
        let sides = cutting_sides(&bounds, extent);
        // Pieces the box cut out may be one polygon beyond it: width and notch, which pair
        // edges of one polygon only, are also run with the cut pieces taken as one, and a
        // pair that only that finds, near the core, needs a larger box to be decided.
        let cut: Vec<usize> = target
            .polygons()
            .iter()
            .enumerate()
            .filter(|(_, p)| p.hull.iter().any(|q| on_cut(*q, &sides)))
            .map(|(i, _)| i)
            .collect();
        let joined = (cut.len() > 1).then(|| target.with_polygons_joined(&cut));
        let mut found = Vec::new();
        let mut cut_near_core = false;
        for &(i, rule) in &mask {
            let outer = match rule.kind {
                RuleKind::Enclosure => Some(Region::from_polygons(
                    rule.other_layer
                        .and_then(|l| layers.context.get(&l.to_string()))
                        .map_or(&[][..], Vec::as_slice),
                )),
                _ => None,
            };
            let hits = check_rule(rule, &target, outer.as_ref(), dbu_nm).map_err(check_err)?;
            if let Some(joined) = joined
                .as_ref()
                .filter(|_| matches!(rule.kind, RuleKind::Width | RuleKind::Notch))
            {
                for v in check_rule(rule, joined, None, dbu_nm).map_err(check_err)? {
                    if !hits.contains(&v) && touches(&v.bbox, &job.region) {
                        cut_near_core |= touches(&v.bbox, &near_core);
                    }
                }
            }
            for v in hits {
                if !touches(&v.bbox, &job.region) {
                    continue;
                }
                if is_cut(&v, &sides) {
                    cut_near_core |= touches(&v.bbox, &near_core);
                    continue;
                }
                let f = from_violation(i, &canonical(v), dbu_nm);
                if job.grid.owner(job.range, f.at_pm) == job.tile {
                    found.push(f);
                }
            }
            check_cancel(cancel)?;
        }
        if !cut_near_core || sides.iter().all(Option::is_none) {
            return Ok((found, growths));
        }
        // Double the box's side around the same centre.
        bounds = grow(bounds, bounds.width().max(bounds.height()) / 2);
        growths += 1;
    }
}

/// The rules checked on printed contours, with their indexes in `rules`.
fn printed_contour_rules<'a>(rules: &[&'a Rule]) -> Vec<(usize, &'a Rule)> {
    rules
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let run = rule_run(r);
            r.applies_to == AppliesTo::Printed
                && run.checked
                && run.engine_path == "drc.printed_contour"
        })
        .map(|(i, r)| (i, *r))
        .collect()
}

/// How far past its core (dbu) [`evaluate_tile`] reads a tile's images: half the halo when
/// `rules` trace printed contours (the contours' margin), else only the EPE search around
/// the core's checkpoints, plus two pixels (D197). The imaging of an evaluated tile
/// computes no pixel farther out (D193).
#[must_use]
pub fn image_reach_dbu(grid: &TileGrid, rules: &[&Rule]) -> i64 {
    let search = (reticle_kernel::metrics::EpeConfig::ICCAD2013.search_nm / grid.dbu_nm).ceil();
    let epe = search as i64 + (2.0 * grid.pixel_dbu).ceil() as i64;
    if printed_contour_rules(rules).is_empty() {
        epe
    } else {
        (grid.halo_dbu / 2).max(epe)
    }
}

/// How many corners, from the nominal one, whose aerial image [`evaluate_tile`] reads: all
/// three when `rules` hold a PV-band rule (it measures the high- and low-dose corners'
/// contours), else the nominal corner only (EPE, printed contours, D228). The other
/// corners are still printed (the PV band's pixel count).
#[must_use]
pub fn image_aerial_corners(rules: &[&Rule]) -> usize {
    if rules.iter().any(|r| r.kind == RuleKind::Pvband) {
        usize::MAX
    } else {
        1
    }
}

/// Printed rules on the contours of the tile's image inside the core plus half the halo.
fn printed_rules(
    job: &TileJob<'_>,
    imaged: &ImagedWindow,
    found: &mut Vec<Found>,
    pieces: &mut Vec<Piece>,
    timing: &mut TileTiming,
) -> Result<(), EvalError> {
    let mut clock = std::time::Instant::now();
    let printed = printed_contour_rules(job.rules);
    let Some(aerial) = imaged.output.corners[0].aerial.as_ref() else {
        return Ok(());
    };
    if printed.is_empty() {
        return Ok(());
    }
    let dbu_nm = job.dbu_nm();
    let core = job.grid.core(job.tile);
    let (crop, frame) = crop_around(aerial, &imaged.frame, &grow(core, job.grid.halo_dbu / 2));
    let polygons = printed_polygons_of(&crop, &frame, imaged.resist.threshold);
    let region = Region::from_polygons(&polygons);
    timing.contours_s += TileTiming::lap(&mut clock);
    // A contour closes along the crop's border; a marker within a pixel of it was cut.
    let edge = BBox {
        left: (frame.left_nm + frame.pixel_nm).floor() as i64,
        bottom: (frame.bottom_nm + frame.pixel_nm).floor() as i64,
        right: (frame.left_nm + (frame.width as f64 - 1.0) * frame.pixel_nm).ceil() as i64,
        top: (frame.bottom_nm + (frame.height as f64 - 1.0) * frame.pixel_nm).ceil() as i64,
    };
    let near_core = grow(core, job.reach_dbu());
    let check_err = |e: reticle_kernel::rules::CheckError| invalid(e.to_string(), json!({}));
    for (i, rule) in printed {
        for v in check_rule(rule, &region, None, dbu_nm).map_err(check_err)? {
            if !touches(&v.bbox, &job.region) {
                continue;
            }
            let inside = v.bbox.left > edge.left
                && v.bbox.bottom > edge.bottom
                && v.bbox.right < edge.right
                && v.bbox.top < edge.top;
            if inside {
                let f = from_violation(i, &canonical(v), dbu_nm);
                if job.grid.owner(job.range, f.at_pm) == job.tile {
                    found.push(f);
                }
            } else if touches(&v.bbox, &near_core)
                && let Some(piece) = clip_piece(i, job.tile, &v, &core)
            {
                pieces.push(piece);
            }
        }
    }
    timing.printed_rules_s += TileTiming::lap(&mut clock);
    Ok(())
}

/// The part of `aerial` (placed by `frame`) inside `b` (dbu), with its frame.
fn crop_around(aerial: &Grid<f32>, frame: &PixelFrame, b: &BBox) -> (Grid<f32>, PixelFrame) {
    let px = |v: f64, origin: f64, n: usize| {
        (((v - origin) / frame.pixel_nm).round().max(0.0) as usize).min(n)
    };
    let x0 = px(b.left as f64, frame.left_nm, frame.width);
    let x1 = px(b.right as f64, frame.left_nm, frame.width).max(x0);
    let y0 = px(b.bottom as f64, frame.bottom_nm, frame.height);
    let y1 = px(b.top as f64, frame.bottom_nm, frame.height).max(y0);
    let (w, h) = (x1 - x0, y1 - y0);
    let mut data = Vec::with_capacity(w * h);
    for y in y0..y1 {
        data.extend_from_slice(&aerial.data[y * aerial.width + x0..y * aerial.width + x1]);
    }
    let sub = PixelFrame {
        left_nm: frame.left_nm + x0 as f64 * frame.pixel_nm,
        bottom_nm: frame.bottom_nm + y0 as f64 * frame.pixel_nm,
        pixel_nm: frame.pixel_nm,
        width: w,
        height: h,
    };
    (
        Grid {
            width: w,
            height: h,
            data,
        },
        sub,
    )
}

/// `v`'s edge-pair marker restricted to the stretch whose midline lies in `core` (closed):
/// both edges over the same stretch, so the pieces of neighbouring tiles abut along the
/// pair and a tile edge running between the two edges never splits the pair. `None` when
/// the midline misses the core.
fn clip_piece(rule: usize, tile: TileIndex, v: &Violation, core: &BBox) -> Option<Piece> {
    let ViolationGeometry::EdgePair { first, second } = &v.marker else {
        return None;
    };
    let f = |p: Point| (p.x as f64, p.y as f64);
    let (a1, a2) = (f(first.p1), f(first.p2));
    // Pair each end of the first edge with the facing end of the second.
    let (da, db) = (
        (a2.0 - a1.0, a2.1 - a1.1),
        (
            second.p2.x as f64 - second.p1.x as f64,
            second.p2.y as f64 - second.p1.y as f64,
        ),
    );
    let (b1, b2) = if da.0 * db.0 + da.1 * db.1 < 0.0 {
        (f(second.p2), f(second.p1))
    } else {
        (f(second.p1), f(second.p2))
    };
    let mid = |p: (f64, f64), q: (f64, f64)| ((p.0 + q.0) / 2.0, (p.1 + q.1) / 2.0);
    let (t0, t1) = clip_parameters(mid(a1, b1), mid(a2, b2), core)?;
    let at = |p: (f64, f64), q: (f64, f64), t: f64| {
        Point::new(
            (p.0 + t * (q.0 - p.0)).round() as i64,
            (p.1 + t * (q.1 - p.1)).round() as i64,
        )
    };
    let seg = |p, q| {
        let (s, e) = (at(p, q, t0), at(p, q, t1));
        [s.x, s.y, e.x, e.y]
    };
    let segments = vec![seg(a1, a2), seg(b1, b2)];
    let bbox = segments
        .iter()
        .map(|s| BBox::from_corners(Point::new(s[0], s[1]), Point::new(s[2], s[3])))
        .reduce(|a, b| a.union(&b))?;
    Some(Piece {
        rule,
        tile,
        measured: v.measured,
        segments,
        bbox,
    })
}

/// The parameter range `[t0, t1]` ⊆ `[0, 1]` of the segment `a`–`b` inside the closed box
/// `c` (Liang–Barsky); `None` when it misses the box.
fn clip_parameters(a: (f64, f64), b: (f64, f64), c: &BBox) -> Option<(f64, f64)> {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, a.0 - c.left as f64),
        (dx, c.right as f64 - a.0),
        (-dy, a.1 - c.bottom as f64),
        (dy, c.top as f64 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    (t0 <= t1).then_some((t0, t1))
}

/// The pixels of a tile's core inside the region, as a block of the region's pixel grid:
/// what `simulate` stitches into the region's images.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CoreBlock {
    /// First column of the block in the global pixel grid (pixel `k` spans
    /// `[k·p, (k+1)·p)` from the layout origin).
    pub x0: i64,
    /// First row, likewise.
    pub y0: i64,
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Nominal aerial intensity, row 0 at the bottom.
    pub aerial: Vec<f32>,
    /// Nominal print (0/1).
    pub printed: Vec<u8>,
    /// Target (0/1).
    pub target: Vec<u8>,
}

/// The global pixel columns (or rows) whose centres lie in `[lo, hi)` (dbu), for pixels of
/// `p` dbu: `k0..k1`.
#[must_use]
pub fn pixel_span(lo: i64, hi: i64, p: f64) -> (i64, i64) {
    let first = |v: i64| (v as f64 / p - 0.5).ceil() as i64;
    (first(lo), first(hi).max(first(lo)))
}

/// The block of `imaged` (a tile's window) inside the tile's core and the region; `None`
/// when they do not meet. An empty window (`imaged` `None`) is a dark block.
#[must_use]
pub fn core_block(job: &TileJob<'_>, imaged: Option<&ImagedWindow>) -> Option<CoreBlock> {
    let owned = intersection(&job.grid.core(job.tile), &job.region)?;
    let p = job.grid.pixel_dbu;
    let (x0, x1) = pixel_span(owned.left, owned.right, p);
    let (y0, y1) = pixel_span(owned.bottom, owned.top, p);
    let (width, height) = ((x1 - x0).max(0) as usize, (y1 - y0).max(0) as usize);
    let n = width * height;
    let mut block = CoreBlock {
        x0,
        y0,
        width,
        height,
        aerial: vec![0.0; n],
        printed: vec![0; n],
        target: vec![0; n],
    };
    let Some(imaged) = imaged else {
        return Some(block);
    };
    let frame = &imaged.frame;
    let wx0 = (frame.left_nm / p).round() as i64;
    let wy0 = (frame.bottom_nm / p).round() as i64;
    let nominal = &imaged.output.corners[0];
    for row in 0..height {
        let wy = (y0 + row as i64 - wy0) as usize;
        for col in 0..width {
            let wx = (x0 + col as i64 - wx0) as usize;
            let i = row * width + col;
            if let Some(a) = nominal.aerial.as_ref() {
                block.aerial[i] = *a.at(wx, wy);
            }
            if let Some(pr) = nominal.printed.as_ref() {
                block.printed[i] = *pr.at(wx, wy);
            }
            block.target[i] = *imaged.target.at(wx, wy);
        }
    }
    Some(block)
}

// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub mod pixels;
pub mod timing;
pub use timing::TileTiming;
