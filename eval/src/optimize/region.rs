//! Optimizing a region of any size in tiles (issue 28 items 2–3, docs/DECISIONS.md
//! D170–D173): the logic the worker's `optimize.plan|tile|merge|compare` ops share, no I/O.
//!
//! - The region is cut on the evaluation's tile grid ([`crate::tiles::TileGrid`]): one
//!   model period window per tile, core plus halo. A tile's ILT window is its core inside
//!   the region, shrunk to whole pixels ([`ilt_box`]); everything else in its window is
//!   frozen context.
//! - Tiles run in four waves, a 2 × 2 colouring by the parity of the tile's column and row
//!   ([`wave_of`], [`nth_in_waves`]): no two tiles of one wave touch, even at a corner, so
//!   a tile's eight neighbours are either finished (an earlier wave) or not started (a
//!   later one), never running. Its frozen context ([`frozen_context`]) is the finished
//!   neighbours' optimized mask inside their ILT boxes and the drawn layout everywhere
//!   else; the mask-rule legalizer sees that context, so every seam is legalized by the
//!   later tile against the earlier tile's final mask.
//! - The optimizer moves more than the ILT box: [`blend_box`] adds [`SEAM_BLEND_NM`] past
//!   each seam, where it starts from the frozen mask and moves less the farther it is
//!   (D248). Only the ILT box is kept, so the seam rule above is unchanged; the tile's
//!   edge is no longer pinned where it meets its neighbour.
//! - The ILT weighs the print near the target's edges more ([`EDGE_WEIGHT`]) and puts the
//!   drawn mask back where its mask prints a new EPE violation ([`epe_revert`], D249): the
//!   ILT's objective does not see EPE, and the new groups it made were mostly EPE.
//! - A tile's output ([`OptTile`]) is the polygons of its ILT box, not a grid: memory and
//!   files grow with the mask's geometry, not with the region's area.
//! - [`compare_groups`] matches the groups of the evaluations before and after by rule
//!   and box; [`seam_distance_nm`] says how far a box is from the nearest seam.
//! - The seam pass ([`put_back`], D252) puts the drawn mask back in squares around the new
//!   groups the re-evaluation still finds (near a seam first), after every tile is done.

pub mod put_back;

use std::collections::BTreeMap;

use reticle_kernel::ilt::{EdgeWeight, EpeRevert};
use reticle_kernel::rules::{Rule, RuleKind};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Point, Polygon};
use serde::{Deserialize, Serialize};

use super::mask::boxes_around;
use crate::tiles::{TileGrid, TileIndex, TileRange, intersection};

/// Waves of the 2 × 2 colouring.
pub const WAVES: usize = 4;

/// ILT iterations (main stage, refinement) of each tile of a region when the call names
/// none (D241): a fifth of one window's default (`IltParams`: 100 + 50). Stopped early,
/// the optimized mask stays nearer the drawn one, and the deck's printed rules, EPE and
/// mask rules (which the ILT's L2 + PV band objective does not see) do better: on three
/// 6 µm boxes of gcd_45nm the printed-rule groups fell by 80–82 % instead of 69–73 %, with
/// half the new groups, in a third of the time.
pub const REGION_ITERATIONS: (u32, u32) = (20, 10);

/// How far past its own box a region's tile lets the ILT move the mask (D248): the
/// pixels of the neighbours' side of each seam, their steps scaled down linearly to 0 at
/// this distance, start from the mask that is there (a finished neighbour's, else the
/// drawn target) and are optimized with the tile's own, then dropped: only the tile's
/// box is kept and legalized. The tile's edge is then not pinned to its neighbour's
/// mask (no jog at the seam), and what it optimizes against stays close to what is
/// there. Measured on three 6 µm boxes of gcd_45nm (50, 100, 150, 200, 300, 400 nm
/// tried): fewer new groups near seams (17 → 13, 29 → 16, 12 → 7) and printed-rule
/// groups in the box down by 84–88 % instead of 80–82 %.
pub const SEAM_BLEND_NM: f64 = 100.0;

/// The extra weight of the ILT's nominal L2 term within 16 nm of the target's edges in a
/// region's tile (D249; one 16 nm block of the main stage, two 8 nm blocks of the
/// refinement, at the default 2 nm pixel). Measured on three 6 µm boxes of gcd_45nm
/// (extras 1, 2, 3, 5; bands 10, 16, 24 nm): with [`EPE_REVERT_NM`], new groups
/// 34 → 13, 26 → 14, 14 → 18, and new groups near seams 13 → 6, 16 → 8, 7 → 3.
pub const EDGE_WEIGHT: EdgeWeight = EdgeWeight {
    extra: 2.0,
    band_nm: 16.0,
};

/// Half the side of the square a region's tile puts back to the "before" mask around a
/// checkpoint where its mask prints a new EPE violation, in the first of its rounds
/// (D249, [`EpeRevert`]); 25 and 60 nm measured no better on the same three boxes.
pub const EPE_REVERT_NM: f64 = 40.0;

/// The EPE repair of a region's tile under the deck's `rules`: at the tolerance of its
/// EPE rule; `None` when the deck checks no EPE.
#[must_use]
pub fn epe_revert<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Option<EpeRevert> {
    rules
        .into_iter()
        .find(|r| r.kind == RuleKind::Epe)
        .map(|r| EpeRevert {
            tolerance_nm: r.value,
            radius_nm: EPE_REVERT_NM,
        })
}

/// The box whose pixels a tile's ILT moves: its own box `own` grown by `blend` (dbu),
/// inside the region (the layout outside the region is never changed).
#[must_use]
pub fn blend_box(own: BBox, region: BBox, blend: i64) -> BBox {
    intersection(&crate::tiles::grow(own, blend.max(0)), &region).unwrap_or(own)
}

/// The GDSII limit on the points of one boundary (8,191 XY pairs, the first repeated at
/// the end).
pub const GDS_MAX_POINTS: usize = 8190;

/// The wave of tile `t`: `(ix mod 2) + 2·(iy mod 2)`.
#[must_use]
pub fn wave_of(t: TileIndex) -> usize {
    (t.ix.rem_euclid(2) + 2 * t.iy.rem_euclid(2)) as usize
}

/// The first value `≥ lo` with the parity `parity`, and how many such values `lo..=hi`
/// holds.
fn parity_axis(lo: i64, hi: i64, parity: i64) -> (i64, u64) {
    let first = if lo.rem_euclid(2) == parity {
        lo
    } else {
        lo + 1
    };
    let count = if first > hi {
        0
    } else {
        ((hi - first) / 2 + 1) as u64
    };
    (first, count)
}

/// The tiles of `range` in wave `w`: first column, first row, columns, rows.
fn wave_lattice(range: &TileRange, w: usize) -> (i64, i64, u64, u64) {
    let (px, py) = ((w % 2) as i64, (w / 2) as i64);
    let (x0, nx) = parity_axis(range.ix0, range.ix1, px);
    let (y0, ny) = parity_axis(range.iy0, range.iy1, py);
    (x0, y0, nx, ny)
}

/// How many tiles of `range` each wave has.
#[must_use]
pub fn wave_counts(range: &TileRange) -> [u64; WAVES] {
    let mut counts = [0; WAVES];
    for (w, c) in counts.iter_mut().enumerate() {
        let (_, _, nx, ny) = wave_lattice(range, w);
        *c = nx * ny;
    }
    counts
}

/// Tile `n` when the tiles of `range` are numbered wave by wave, row-major inside a wave.
#[must_use]
pub fn nth_in_waves(range: &TileRange, n: u64) -> Option<TileIndex> {
    let mut left = n;
    for w in 0..WAVES {
        let (x0, y0, nx, ny) = wave_lattice(range, w);
        let count = nx * ny;
        if left < count {
            return Some(TileIndex {
                ix: x0 + 2 * (left % nx) as i64,
                iy: y0 + 2 * (left / nx) as i64,
            });
        }
        left -= count;
    }
    None
}

/// The box a tile optimizes: its core inside the region, shrunk to whole pixels of the
/// tile's window (so no optimized pixel lies outside the region); `None` when no whole
/// pixel is left.
#[must_use]
pub fn ilt_box(grid: &TileGrid, tile: TileIndex, region: BBox) -> Option<BBox> {
    let core = intersection(&grid.core(tile), &region)?;
    let origin = grid.window(tile);
    let p = grid.pixel_dbu;
    let up = |v: i64, o: i64| o + (((v - o) as f64 / p - 1e-9).ceil() * p).round() as i64;
    let down = |v: i64, o: i64| o + (((v - o) as f64 / p + 1e-9).floor() * p).round() as i64;
    let b = BBox {
        left: up(core.left, origin.left),
        bottom: up(core.bottom, origin.bottom),
        right: down(core.right, origin.left),
        top: down(core.top, origin.bottom),
    };
    (b.right > b.left && b.top > b.bottom).then_some(b)
}

/// A finished neighbour as a later tile sees it: the box it optimized and its polygons.
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    /// Its ILT box (dbu).
    pub optimized: BBox,
    /// Its optimized mask inside that box (dbu).
    pub polygons: &'a [Polygon],
}

/// `polygons` clipped to each of `boxes`.
fn clipped(polygons: &[Polygon], boxes: &[BBox]) -> Vec<Polygon> {
    boxes
        .iter()
        .flat_map(|b| polygons.iter().filter_map(|p| clip_polygon(p, b)))
        .collect()
}

/// The frozen mask of tile `tile`'s window outside its ILT box `own`: in each of the
/// (up to nine) tile cores the window meets, a finished neighbour's optimized polygons
/// inside its ILT box and the `drawn` polygons (the window's target, clipped to it)
/// everywhere else. `finished` answers for the neighbours of earlier waves.
#[must_use]
pub fn frozen_context<'a>(
    grid: &TileGrid,
    tile: TileIndex,
    own: Option<BBox>,
    drawn: &[Polygon],
    finished: &dyn Fn(TileIndex) -> Option<Finished<'a>>,
) -> Vec<Polygon> {
    let window = grid.window(tile);
    let mut pieces = Vec::new();
    for dy in -1..=1 {
        for dx in -1..=1 {
            let t = TileIndex {
                ix: tile.ix + dx,
                iy: tile.iy + dy,
            };
            let Some(cell) = intersection(&grid.core(t), &window) else {
                continue;
            };
            let (hole, mask): (Option<BBox>, &[Polygon]) = if (dx, dy) == (0, 0) {
                (own, &[])
            } else {
                match finished(t) {
                    Some(f) => (Some(f.optimized), f.polygons),
                    None => (None, &[]),
                }
            };
            match hole.and_then(|h| intersection(&h, &cell)) {
                Some(h) => {
                    pieces.extend(clipped(drawn, &boxes_around(cell, h)));
                    pieces.extend(clipped(mask, &[h]));
                }
                None => pieces.extend(clipped(drawn, &[cell])),
            }
        }
    }
    pieces
}

/// Splits `p` into pieces of at most [`GDS_MAX_POINTS`] points by halving its box (the
/// GDSII limit, D172); a polygon within the limit comes back as it is.
#[must_use]
pub fn split_for_gds(p: &Polygon) -> Vec<Polygon> {
    if p.points.len() <= GDS_MAX_POINTS {
        return vec![p.clone()];
    }
    let Some(b) = p.bbox() else {
        return Vec::new();
    };
    let halves = if b.width() >= b.height() {
        let mid = b.left + b.width() / 2;
        [
            BBox::from_corners(Point::new(b.left, b.bottom), Point::new(mid, b.top)),
            BBox::from_corners(Point::new(mid, b.bottom), Point::new(b.right, b.top)),
        ]
    } else {
        let mid = b.bottom + b.height() / 2;
        [
            BBox::from_corners(Point::new(b.left, b.bottom), Point::new(b.right, mid)),
            BBox::from_corners(Point::new(b.left, mid), Point::new(b.right, b.top)),
        ]
    };
    if halves.iter().any(|h| h.width() == 0 || h.height() == 0) {
        return vec![p.clone()];
    }
    halves
        .iter()
        .filter_map(|h| clip_polygon(p, h))
        .flat_map(|q| split_for_gds(&q))
        .collect()
}

/// L2 and PV band (pixels) of a tile's window, before or after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileScore {
    /// Nominal print ≠ target.
    pub l2_px: u64,
    /// Outer print ≠ inner print.
    pub pvb_px: u64,
}

/// One optimized tile, as written to the job's directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptTile {
    /// The tile.
    pub tile: TileIndex,
    /// Its ILT box (dbu); `None`: nothing of the region to optimize in this tile.
    pub optimized: Option<BBox>,
    /// The optimized mask inside `optimized` (dbu).
    pub polygons: Vec<Polygon>,
    /// The ILT's score of the window before and after.
    pub before: TileScore,
    /// See `before`.
    pub after: TileScore,
    /// Mask-rule violations the legalizer left (0: legal against its context).
    pub mask_rule_violations: usize,
    /// ILT iterations run.
    pub iterations_run: u32,
    /// Why the tile kept the drawn target in its box instead of the ILT's mask
    /// (`mask_rules`: the legalizer left violations; `worse`: the legal mask prints worse,
    /// L2 + PV band, than the drawn target); `None`: the ILT's mask was kept (D171).
    #[serde(default)]
    pub kept_drawn: Option<String>,
}

/// The region snapped inward to the pixel lattice of the grid (windows start at whole
/// pixels from the origin, so every tile's ILT box then ends exactly on the region, and
/// the boxes of the tiles cover it without a sliver); `None` when no whole pixel is left.
#[must_use]
pub fn snap_region(grid: &TileGrid, region: BBox) -> Option<BBox> {
    let p = grid.pixel_dbu;
    let up = |v: i64| ((v as f64 / p - 1e-9).ceil() * p).round() as i64;
    let down = |v: i64| ((v as f64 / p + 1e-9).floor() * p).round() as i64;
    let b = BBox {
        left: up(region.left),
        bottom: up(region.bottom),
        right: down(region.right),
        top: down(region.top),
    };
    (b.right > b.left && b.top > b.bottom).then_some(b)
}

/// `polygons` clipped to the box `b` (the drawn target a tile keeps).
#[must_use]
pub fn clipped_to(polygons: &[Polygon], b: BBox) -> Vec<Polygon> {
    clipped(polygons, &[b])
}

/// A group of an evaluation, as compared: its rule, kind and box (nm).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupBox {
    /// The group id.
    pub group_id: String,
    /// The rule.
    pub rule_id: String,
    /// `mask` or `printed`.
    pub applies_to: String,
    /// The union of its members' boxes (nm).
    pub bbox_nm: [f64; 4],
}

/// Groups resolved, remaining and new, per rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RuleChange {
    /// `mask` or `printed`.
    pub applies_to: String,
    /// Groups before.
    pub before: u64,
    /// Groups after.
    pub after: u64,
    /// Groups before that no group after of the same rule meets.
    pub resolved: u64,
    /// Groups before that a group after of the same rule meets.
    pub remaining: u64,
    /// Groups after that meet no group before of the same rule.
    pub new: u64,
    /// New groups within the seam distance of a seam.
    pub new_near_seams: u64,
}

/// Whether two nm boxes meet, each grown by `tol`.
fn meet(a: &[f64; 4], b: &[f64; 4], tol: f64) -> bool {
    a[0] - tol <= b[2] && b[0] - tol <= a[2] && a[1] - tol <= b[3] && b[1] - tol <= a[3]
}

/// Compares the groups `before` and `after` (within `tol_nm` of each other, same rule,
/// counts as the same place): per rule, and the new groups themselves. `near_seam` says
/// whether a new group is near a seam.
#[must_use]
pub fn compare_groups<'a>(
    before: &[GroupBox],
    after: &'a [GroupBox],
    tol_nm: f64,
    near_seam: &dyn Fn(&[f64; 4]) -> bool,
) -> (BTreeMap<String, RuleChange>, Vec<&'a GroupBox>) {
    let mut by_rule: BTreeMap<String, RuleChange> = BTreeMap::new();
    let line = |m: &mut BTreeMap<String, RuleChange>, g: &GroupBox| {
        m.entry(g.rule_id.clone())
            .or_insert_with(|| RuleChange {
                applies_to: g.applies_to.clone(),
                ..RuleChange::default()
            })
            .applies_to
            .clone_from(&g.applies_to);
    };
    for g in before {
        line(&mut by_rule, g);
        let still = after
            .iter()
            .any(|a| a.rule_id == g.rule_id && meet(&a.bbox_nm, &g.bbox_nm, tol_nm));
        let r = by_rule.get_mut(&g.rule_id).expect("entry made above");
        r.before += 1;
        if still {
            r.remaining += 1;
        } else {
            r.resolved += 1;
        }
    }
    let mut new = Vec::new();
    for a in after {
        line(&mut by_rule, a);
        let old = before
            .iter()
            .any(|g| g.rule_id == a.rule_id && meet(&a.bbox_nm, &g.bbox_nm, tol_nm));
        let r = by_rule.get_mut(&a.rule_id).expect("entry made above");
        r.after += 1;
        if !old {
            r.new += 1;
            if near_seam(&a.bbox_nm) {
                r.new_near_seams += 1;
            }
            new.push(a);
        }
    }
    (by_rule, new)
}

/// The distance (nm) from the box `b_nm` to the nearest seam of `range` inside `region`
/// (the core boundaries between two tiles of the range, clipped to the region);
/// `f64::INFINITY` when the range has one tile.
#[must_use]
pub fn seam_distance_nm(grid: &TileGrid, range: &TileRange, region: BBox, b_nm: &[f64; 4]) -> f64 {
    let nm = |v: i64| v as f64 * grid.dbu_nm;
    let c = grid.core_dbu;
    let (rl, rb, rr, rt) = (
        nm(region.left),
        nm(region.bottom),
        nm(region.right),
        nm(region.top),
    );
    // Distance from the interval [a0, a1] to the interval [s0, s1] on one axis.
    let gap = |a0: f64, a1: f64, s0: f64, s1: f64| (s0 - a1).max(a0 - s1).max(0.0);
    let mut best = f64::INFINITY;
    for ix in range.ix0 + 1..=range.ix1 {
        let x = nm(ix * c);
        let d = gap(b_nm[0], b_nm[2], x, x).hypot(gap(b_nm[1], b_nm[3], rb, rt));
        best = best.min(d);
    }
    for iy in range.iy0 + 1..=range.iy1 {
        let y = nm(iy * c);
        let d = gap(b_nm[1], b_nm[3], y, y).hypot(gap(b_nm[0], b_nm[2], rl, rr));
        best = best.min(d);
    }
    best
}
