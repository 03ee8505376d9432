//! Pattern metrics: L2, PV band and edge placement error (EPE).
//!
//! - L2: pixels where the nominal print differs from the target.
//! - PVB: pixels where the max-corner print differs from the min-corner print.
//! - EPE (ICCAD-2013): checkpoints every `spacing` nm along the target edges (at the
//!   centres of equal sub-segments, at least one per edge); a checkpoint is violated
//!   when the print is not "inside at `tolerance` nm inward and outside at `tolerance`
//!   nm outward" along the edge normal, i.e. when the printed edge is off by more than
//!   `tolerance`.
//! - EPE in nm: the signed distance along the outward normal from the target edge to
//!   the printed contour (the level crossing of the intensity, located by linear
//!   interpolation of bilinearly sampled intensity), positive when the print is too big.

use reticle_layout::Polygon;
use serde::Serialize;

use crate::Grid;
use crate::raster::PixelFrame;

/// Pixels where `a` and `b` disagree (non-zero = printed).
#[must_use]
pub fn count_diff(a: &Grid<u8>, b: &Grid<u8>) -> u64 {
    a.data
        .iter()
        .zip(&b.data)
        .filter(|(x, y)| (**x != 0) != (**y != 0))
        .count() as u64
}

/// L2 of a nominal print against its target.
#[must_use]
pub fn l2(nominal: &Grid<u8>, target: &Grid<u8>) -> u64 {
    count_diff(nominal, target)
}

/// PV band between the max and min corner prints.
#[must_use]
pub fn pvb(max: &Grid<u8>, min: &Grid<u8>) -> u64 {
    count_diff(max, min)
}

/// EPE settings (ICCAD-2013 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpeConfig {
    /// Distance between checkpoints along an edge (nm).
    pub spacing_nm: f64,
    /// Largest tolerated |EPE| (nm).
    pub tolerance_nm: f64,
    /// How far along the normal the sub-pixel search looks (nm).
    pub search_nm: f64,
}

impl EpeConfig {
    /// ICCAD-2013: 40 nm spacing, 15 nm tolerance.
    pub const ICCAD2013: Self = Self {
        spacing_nm: 40.0,
        tolerance_nm: 15.0,
        search_nm: 60.0,
    };
}

/// One checkpoint on a target edge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Checkpoint {
    /// Position (nm).
    pub x: f64,
    /// Position (nm).
    pub y: f64,
    /// Outward unit normal.
    pub nx: f64,
    /// Outward unit normal.
    pub ny: f64,
}

/// Checkpoints along all polygon edges, with outward normals.
#[must_use]
pub fn checkpoints(polygons: &[Polygon], spacing_nm: f64) -> Vec<Checkpoint> {
    let mut out = Vec::new();
    for poly in polygons {
        let n = poly.points.len();
        if n < 3 {
            continue;
        }
        // Counter-clockwise: the outside is on the right of each edge.
        let ccw = poly.signed_area2() > 0;
        for i in 0..n {
            let a = poly.points[i];
            let b = poly.points[(i + 1) % n];
            let (dx, dy) = ((b.x - a.x) as f64, (b.y - a.y) as f64);
            let len = dx.hypot(dy);
            if len == 0.0 {
                continue;
            }
            let (mut nx, mut ny) = (dy / len, -dx / len);
            if !ccw {
                (nx, ny) = (-nx, -ny);
            }
            let count = ((len / spacing_nm).floor() as usize).max(1);
            for j in 0..count {
                let t = (j as f64 + 0.5) / count as f64;
                out.push(Checkpoint {
                    x: a.x as f64 + t * dx,
                    y: a.y as f64 + t * dy,
                    nx,
                    ny,
                });
            }
        }
    }
    out
}

/// EPE results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpeReport {
    /// Number of checkpoints.
    pub checkpoints: usize,
    /// Checkpoints whose |EPE| exceeds the tolerance (ICCAD binary test).
    pub violations: usize,
    /// Sub-pixel EPE per checkpoint (nm, positive = print too big); `None` when no
    /// edge was found within the search range.
    pub epe_nm: Vec<Option<f64>>,
}

fn printed_at(printed: &Grid<u8>, frame: &PixelFrame, x: f64, y: f64) -> bool {
    let px = ((x - frame.left_nm) / frame.pixel_nm).floor();
    let py = ((y - frame.bottom_nm) / frame.pixel_nm).floor();
    if px < 0.0 || py < 0.0 || px >= printed.width as f64 || py >= printed.height as f64 {
        return false;
    }
    *printed.at(px as usize, py as usize) != 0
}

/// ICCAD-2013 EPE violations of a print against target polygons.
#[must_use]
pub fn epe_violations(
    target: &[Polygon],
    printed: &Grid<u8>,
    frame: &PixelFrame,
    cfg: &EpeConfig,
) -> usize {
    checkpoints(target, cfg.spacing_nm)
        .iter()
        .filter(|c| epe_violated_at(printed, frame, c, cfg.tolerance_nm))
        .count()
}

/// The ICCAD-2013 binary EPE test at one checkpoint: violated unless the print covers the
/// point `tolerance_nm` inside the target edge and not the point as far outside.
#[must_use]
pub fn epe_violated_at(
    printed: &Grid<u8>,
    frame: &PixelFrame,
    c: &Checkpoint,
    tolerance_nm: f64,
) -> bool {
    let t = tolerance_nm;
    let inside = printed_at(printed, frame, c.x - t * c.nx, c.y - t * c.ny);
    let outside = printed_at(printed, frame, c.x + t * c.nx, c.y + t * c.ny);
    !inside || outside
}

/// Bilinear sample of pixel-centred values at a layout point (clamped at the border).
#[must_use]
pub fn sample_bilinear(img: &Grid<f32>, frame: &PixelFrame, x: f64, y: f64) -> f64 {
    let fx = ((x - frame.left_nm) / frame.pixel_nm - 0.5).clamp(0.0, (img.width - 1) as f64);
    let fy = ((y - frame.bottom_nm) / frame.pixel_nm - 0.5).clamp(0.0, (img.height - 1) as f64);
    let (x0, y0) = (fx.floor() as usize, fy.floor() as usize);
    let (x1, y1) = ((x0 + 1).min(img.width - 1), (y0 + 1).min(img.height - 1));
    let (tx, ty) = (fx - x0 as f64, fy - y0 as f64);
    let v = |x: usize, y: usize| f64::from(*img.at(x, y));
    (v(x0, y0) * (1.0 - tx) + v(x1, y0) * tx) * (1.0 - ty)
        + (v(x0, y1) * (1.0 - tx) + v(x1, y1) * tx) * ty
}

/// Sub-pixel EPE at one checkpoint: the crossing of `level` nearest to the target
/// edge along the normal, searching `±search_nm` in steps of a quarter pixel.
///
/// The steps are sampled outward from the checkpoint, both sides at once, and the search
/// stops once no unsampled step can hold a nearer crossing (D208). The answer is the
/// exhaustive scan's bit for bit: the same samples and interpolation of each crossing,
/// and among crossings equally near, the one farthest along `-normal` (the scan's first).
#[must_use]
pub fn epe_at(
    img: &Grid<f32>,
    frame: &PixelFrame,
    c: &Checkpoint,
    level: f64,
    search_nm: f64,
) -> Option<f64> {
    let step = frame.pixel_nm / 4.0;
    let steps = (search_nm / step).ceil() as i64;
    let val = |d: f64| sample_bilinear(img, frame, c.x + d * c.nx, c.y + d * c.ny) - level;
    // Step `i` lies at `i · step`; the crossing between steps `i - 1` and `i` (for
    // `-steps < i <= steps`) interpolates linearly, as the scan does.
    let crossing = |(da, va): (f64, f64), (db, vb): (f64, f64)| {
        ((va > 0.0) != (vb > 0.0)).then(|| {
            let t = va / (va - vb);
            da + t * (db - da)
        })
    };
    // The nearest crossing so far and its interval's `i` (ties: the smaller `i`).
    let mut best: Option<(f64, i64)> = None;
    let keep = |best: &mut Option<(f64, i64)>, z: f64, i: i64| {
        let nearer = best.is_none_or(|(b, bi)| z.abs() < b.abs() || (z.abs() == b.abs() && i < bi));
        if nearer {
            *best = Some((z, i));
        }
    };
    let at = |i: i64| {
        let d = i as f64 * step;
        (d, val(d))
    };
    let (mut low, mut high) = (at(0), at(0));
    for r in 0..steps {
        // Ring r: the intervals `-r` (steps -r-1, -r) and `r + 1` (steps r, r+1), whose
        // crossings lie at least `r · step` from the checkpoint.
        let next = at(-r - 1);
        if let Some(z) = crossing(next, low) {
            keep(&mut best, z, -r);
        }
        low = next;
        let next = at(r + 1);
        if let Some(z) = crossing(high, next) {
            keep(&mut best, z, r + 1);
        }
        high = next;
        // Every interval left lies at least (r + 1) · step away, up to rounding: stop when
        // the nearest crossing is closer than r · step.
        if best.is_some_and(|(b, _)| b.abs() < r as f64 * step) {
            break;
        }
    }
    best.map(|(z, _)| z)
}

/// Full EPE report: ICCAD violations from `printed`, sub-pixel EPE from `intensity`
/// at `level` (the print threshold, in the same units as `intensity`).
#[must_use]
pub fn epe(
    target: &[Polygon],
    printed: &Grid<u8>,
    intensity: &Grid<f32>,
    level: f64,
    frame: &PixelFrame,
    cfg: &EpeConfig,
) -> EpeReport {
    let cps = checkpoints(target, cfg.spacing_nm);
    EpeReport {
        checkpoints: cps.len(),
        violations: epe_violations(target, printed, frame, cfg),
        epe_nm: cps
            .iter()
            .map(|c| epe_at(intensity, frame, c, level, cfg.search_nm))
            .collect(),
    }
}
