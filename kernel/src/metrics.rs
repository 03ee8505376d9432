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

#[cfg(test)]
mod tests {
    use super::*;
    use reticle_layout::{BBox, Point};

    /// The exhaustive scan `epe_at` was before D208.
    fn epe_by_scan(
        img: &Grid<f32>,
        frame: &PixelFrame,
        c: &Checkpoint,
        level: f64,
        search_nm: f64,
    ) -> Option<f64> {
        let step = frame.pixel_nm / 4.0;
        let steps = (search_nm / step).ceil() as i64;
        let val = |d: f64| sample_bilinear(img, frame, c.x + d * c.nx, c.y + d * c.ny) - level;
        let mut best: Option<f64> = None;
        let mut prev = (-(steps as f64) * step, val(-(steps as f64) * step));
        for i in (-steps + 1)..=steps {
            let d = i as f64 * step;
            let v = val(d);
            if (prev.1 > 0.0) != (v > 0.0) {
                let t = prev.1 / (prev.1 - v);
                let z = prev.0 + t * (d - prev.0);
                if best.is_none_or(|b| z.abs() < b.abs()) {
                    best = Some(z);
                }
            }
            prev = (d, v);
        }
        best
    }

    #[test]
    fn the_outward_search_finds_the_scan_s_crossing_bit_for_bit() {
        let mut state = 11u64;
        let mut unit = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        // Smooth random images (sums of a few waves) with many crossings, some images with
        // plateaus exactly at the level (ties and zero-width crossings), at 1 and 4 nm.
        for (pixel_nm, n) in [(1.0, 160), (4.0, 48), (1.5, 100)] {
            let f = PixelFrame {
                left_nm: 0.0,
                bottom_nm: 0.0,
                pixel_nm,
                width: n,
                height: n,
            };
            for image in 0..6 {
                let waves: Vec<[f64; 4]> = (0..4)
                    .map(|_| [unit() * 0.2, unit() * 0.2, unit() * 6.3, unit()])
                    .collect();
                let data = (0..n * n)
                    .map(|k| {
                        let (x, y) = ((k % n) as f64, (k / n) as f64);
                        let v: f64 = waves
                            .iter()
                            .map(|w| w[3] * (w[0] * x + w[1] * y + w[2]).sin())
                            .sum();
                        let v = if image == 5 {
                            (v * 2.0).round() / 2.0
                        } else {
                            v
                        };
                        v as f32
                    })
                    .collect();
                let img = Grid {
                    width: n,
                    height: n,
                    data,
                };
                let side = n as f64 * pixel_nm;
                for _ in 0..300 {
                    let a = unit() * std::f64::consts::TAU;
                    let c = Checkpoint {
                        x: unit() * side,
                        y: unit() * side,
                        nx: a.cos(),
                        ny: a.sin(),
                    };
                    for level in [0.0, 0.5, 0.25] {
                        let fast = epe_at(&img, &f, &c, level, 60.0);
                        let scan = epe_by_scan(&img, &f, &c, level, 60.0);
                        assert_eq!(
                            fast.map(f64::to_bits),
                            scan.map(f64::to_bits),
                            "{fast:?} {scan:?} at {c:?}, level {level}, {pixel_nm} nm"
                        );
                    }
                }
            }
        }
    }

    fn frame(n: usize) -> PixelFrame {
        PixelFrame {
            left_nm: 0.0,
            bottom_nm: 0.0,
            pixel_nm: 1.0,
            width: n,
            height: n,
        }
    }

    #[test]
    fn checkpoints_every_40nm_with_outward_normals() {
        let sq = Polygon::rect(BBox::from_corners(Point::new(0, 0), Point::new(120, 40)));
        let cps = checkpoints(std::slice::from_ref(&sq), 40.0);
        assert_eq!(cps.len(), 3 + 1 + 3 + 1);
        assert_eq!(
            (cps[0].x, cps[0].y, cps[0].nx, cps[0].ny),
            (20.0, 0.0, 0.0, -1.0)
        );
        let mut cw = sq;
        cw.points.reverse();
        assert!(
            checkpoints(&[cw], 40.0)
                .iter()
                .any(|c| c.x == 20.0 && c.y == 0.0 && c.ny == -1.0)
        );
    }

    #[test]
    fn epe_of_a_shifted_print() {
        // Target 40..160 square; print grown by 10 nm on every side; intensity ramps.
        let n = 200;
        let target = Polygon::rect(BBox::from_corners(Point::new(40, 40), Point::new(160, 160)));
        let grown = |g: f64| {
            let mut img = Grid::filled(n, n, 0.0f32);
            for y in 0..n {
                for x in 0..n {
                    let (cx, cy) = (x as f64 + 0.5, y as f64 + 0.5);
                    // Signed distance to the grown square (positive inside), clamped ramp.
                    let d = (cx - (40.0 - g))
                        .min((160.0 + g) - cx)
                        .min(cy - (40.0 - g))
                        .min((160.0 + g) - cy);
                    *img.at_mut(x, y) = (0.5 + d / 20.0).clamp(0.0, 1.0) as f32;
                }
            }
            img
        };
        let f = frame(n);
        for (g, violations) in [(10.0, 0usize), (20.0, 12)] {
            let img = grown(g);
            let printed = Grid {
                width: n,
                height: n,
                data: img.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
            };
            let r = epe(
                std::slice::from_ref(&target),
                &printed,
                &img,
                0.5,
                &f,
                &EpeConfig::ICCAD2013,
            );
            assert_eq!(r.checkpoints, 12);
            assert_eq!(r.violations, violations, "grow {g}");
            for e in &r.epe_nm {
                let e = e.expect("edge found");
                assert!((e - g).abs() < 0.05, "epe {e} for grow {g}");
            }
        }
        let pa = Grid {
            width: 2,
            height: 1,
            data: vec![1u8, 0],
        };
        let pb = Grid {
            width: 2,
            height: 1,
            data: vec![1u8, 1],
        };
        assert_eq!((l2(&pa, &pb), pvb(&pa, &pa)), (1, 0));
    }
}
