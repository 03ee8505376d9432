//! Which copies of an instance reach into the region, and how the others group into
//! sub-arrays; composing placements exactly.

use crate::geom::{BBox, Point};
use crate::hierarchy::{child_transform, transform_bbox};
use crate::model::{Instance, Repetition, Transform};
use crate::transform::{Affine, COORD_LIMIT, CoordinateOverflow};

use super::WritebackError;

/// The copies of one instance, as seen from the region.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Copy indices whose box may reach into the region (ascending).
    pub touching: Vec<u64>,
    /// The other copies, grouped.
    pub clear: Vec<Run>,
}

/// Copies of an instance that stay clear of the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Columns `i0..i0 + ni` × rows `j0..j0 + nj` of the instance's lattice.
    Block {
        /// First column.
        i0: u32,
        /// Number of columns.
        ni: u32,
        /// First row.
        j0: u32,
        /// Number of rows.
        nj: u32,
    },
    /// One copy (by index).
    One(u64),
}

/// Whether the real box `b` (grown by one dbu of slack for rounding) shares area with `r`;
/// never for a region without area.
pub(super) fn touches(b: [f64; 4], r: &BBox) -> bool {
    r.left < r.right
        && r.bottom < r.top
        && b[0] - 1.0 < r.right as f64
        && b[2] + 1.0 > r.left as f64
        && b[1] - 1.0 < r.top as f64
        && b[3] + 1.0 > r.bottom as f64
}

/// Splits the copies of `inst`, placed in a cell that `a` maps to the top, into those whose
/// box (the child's box `child_bb`) may reach into `region` and the others. An array under
/// an integral map is split analytically, one lattice line at a time (the shorter side), so
/// a huge array near the region costs what the region meets; anything else is enumerated.
///
/// # Errors
/// `LimitExceeded` when more than `max_array` copies or lines would be looked at.
pub fn split(
    inst: &Instance,
    a: &Affine,
    child_bb: [f64; 4],
    region: &BBox,
    max_array: u64,
) -> Result<Split, WritebackError> {
    if let (
        Some(Repetition::Array {
            cols,
            rows,
            col_step,
            row_step,
        }),
        true,
    ) = (&inst.repetition, a.is_integral())
    {
        return split_array(
            inst, a, child_bb, region, max_array, *cols, *rows, *col_step, *row_step,
        );
    }
    let count = inst.placement_count();
    if count > max_array {
        return Err(WritebackError::LimitExceeded {
            what: "array size",
            limit: max_array,
        });
    }
    let mut out = Split::default();
    for k in 0..count {
        let m = child_transform(a, inst, k);
        if touches(transform_bbox(&m, child_bb), region) {
            out.touching.push(k);
        } else {
            out.clear.push(Run::One(k));
        }
    }
    Ok(out)
}

/// The integer linear part of an integral map applied to a displacement.
fn linear(a: &Affine, v: Point) -> (i128, i128) {
    let m = [a.xx, a.xy, a.yx, a.yy].map(|e| e as i128);
    let (x, y) = (i128::from(v.x), i128::from(v.y));
    (m[0] * x + m[1] * y, m[2] * x + m[3] * y)
}

#[allow(clippy::too_many_arguments)]
fn split_array(
    inst: &Instance,
    a: &Affine,
    child_bb: [f64; 4],
    region: &BBox,
    max_array: u64,
    cols: u32,
    rows: u32,
    col_step: Point,
    row_step: Point,
) -> Result<Split, WritebackError> {
    let (cols, rows) = (cols.max(1), rows.max(1));
    // Copy 0's box, outward to whole dbu plus one of slack.
    let b = transform_bbox(&child_transform(a, inst, 0), child_bb);
    if !b.iter().all(|v| v.is_finite() && v.abs() < 2f64.powi(100)) {
        return Err(WritebackError::Coordinate(CoordinateOverflow));
    }
    let b = [
        b[0].floor() as i128 - 1,
        b[1].floor() as i128 - 1,
        b[2].ceil() as i128 + 1,
        b[3].ceil() as i128 + 1,
    ];
    let (cs, rs) = (linear(a, col_step), linear(a, row_step));
    // Lines along the longer side, one per index of the shorter side.
    let by_rows = rows <= cols;
    let (n_out, n_in, s_out, s_in) = if by_rows {
        (rows, cols, rs, cs)
    } else {
        (cols, rows, cs, rs)
    };
    if u64::from(n_out) > max_array {
        return Err(WritebackError::LimitExceeded {
            what: "array size",
            limit: max_array,
        });
    }
    let r = [
        i128::from(region.left),
        i128::from(region.bottom),
        i128::from(region.right),
        i128::from(region.top),
    ];
    let n = i128::from(n_in);
    let mut out = Split::default();
    let mut touching_count: u64 = 0;
    // Runs of consecutive lines with the same touching interval.
    let mut group: Option<(u32, u32, (i128, i128))> = None;
    let flush = |g: (u32, u32, (i128, i128)), out: &mut Split| {
        let (o0, o1, (lo, hi)) = g;
        let mut blocks = Vec::new();
        if lo >= hi {
            blocks.push((0, n));
        } else {
            blocks.extend([(0, lo), (hi, n)].into_iter().filter(|(s, e)| s < e));
        }
        for (s, e) in blocks {
            // Bounded by n_in and n_out, which are u32.
            let (in0, nin) = (s as u32, (e - s) as u32);
            let (out0, nout) = (o0, o1 - o0);
            out.clear.push(if by_rows {
                Run::Block {
                    i0: in0,
                    ni: nin,
                    j0: out0,
                    nj: nout,
                }
            } else {
                Run::Block {
                    i0: out0,
                    ni: nout,
                    j0: in0,
                    nj: nin,
                }
            });
        }
    };
    for o in 0..n_out {
        let oi = i128::from(o);
        let (ox, oy) = (oi * s_out.0, oi * s_out.1);
        let iv = [
            interval_lt(s_in.0, b[0] + ox - r[2], n),
            interval_lt(-s_in.0, r[0] - b[2] - ox, n),
            interval_lt(s_in.1, b[1] + oy - r[3], n),
            interval_lt(-s_in.1, r[1] - b[3] - oy, n),
        ];
        let lo = iv.iter().map(|v| v.0).max().unwrap_or(0);
        let hi = iv.iter().map(|v| v.1).min().unwrap_or(0);
        let key = if lo < hi { (lo, hi) } else { (0, 0) };
        for i in lo..hi {
            touching_count += 1;
            if touching_count > max_array {
                return Err(WritebackError::LimitExceeded {
                    what: "array size",
                    limit: max_array,
                });
            }
            let (ci, ri) = if by_rows {
                (i as u64, u64::from(o))
            } else {
                (u64::from(o), i as u64)
            };
            out.touching.push(ri * u64::from(cols) + ci);
        }
        group = match group {
            Some((o0, _, k)) if k == key => Some((o0, o + 1, k)),
            Some(g) => {
                flush(g, &mut out);
                Some((o, o + 1, key))
            }
            None => Some((o, o + 1, key)),
        };
    }
    if let Some(g) = group {
        flush(g, &mut out);
    }
    out.touching.sort_unstable();
    Ok(out)
}

/// The integers `i` in `0..n` with `a·i + c < 0`, as a half-open interval.
pub fn interval_lt(a: i128, c: i128, n: i128) -> (i128, i128) {
    if a == 0 {
        return if c < 0 { (0, n) } else { (0, 0) };
    }
    if a > 0 {
        // a·i ≤ −c − 1
        let hi = (-c - 1).div_euclid(a) + 1;
        (0, hi.clamp(0, n))
    } else {
        // b·i ≥ c + 1 with b = −a
        let b = -a;
        let lo = -(-(c + 1)).div_euclid(b);
        (lo.clamp(0, n), n)
    }
}

/// `outer ∘ inner` as one placement: mirrors combine, angles add (the inner angle negated
/// under a mirror), magnifications multiply, the inner offset is mapped by `outer`.
///
/// # Errors
/// [`CoordinateOverflow`] when the offset leaves the coordinate range.
pub fn compose(outer: &Transform, inner: &Transform) -> Result<Transform, CoordinateOverflow> {
    let rot = if outer.mirror_x {
        outer.rotation_deg - inner.rotation_deg
    } else {
        outer.rotation_deg + inner.rotation_deg
    };
    Ok(Transform {
        offset: outer.to_affine().apply(inner.offset)?,
        rotation_deg: rot.rem_euclid(360.0),
        mirror_x: outer.mirror_x != inner.mirror_x,
        magnification: outer.magnification * inner.magnification,
    })
}

/// The instance's own transform moved to copy `k`.
///
/// # Errors
/// [`CoordinateOverflow`] when the offset leaves the coordinate range.
pub(super) fn shifted(inst: &Instance, k: u64) -> Result<Transform, CoordinateOverflow> {
    let (dx, dy) = inst
        .repetition
        .as_ref()
        .map_or((0, 0), |r| r.displacement(k));
    let c = |v: i64, d: i128| {
        let s = i128::from(v) + d;
        if s.abs() <= i128::from(COORD_LIMIT) {
            Ok(s as i64)
        } else {
            Err(CoordinateOverflow)
        }
    };
    Ok(Transform {
        offset: Point::new(
            c(inst.transform.offset.x, dx)?,
            c(inst.transform.offset.y, dy)?,
        ),
        ..inst.transform
    })
}

/// The lattice steps of `rep` mapped by the integral map `a`, as dbu.
///
/// # Errors
/// [`CoordinateOverflow`] when a step leaves the coordinate range.
pub(super) fn mapped_steps(
    a: &Affine,
    col_step: Point,
    row_step: Point,
) -> Result<(Point, Point), CoordinateOverflow> {
    let p = |(x, y): (i128, i128)| {
        let lim = i128::from(COORD_LIMIT);
        if x.abs() <= lim && y.abs() <= lim {
            Ok(Point::new(x as i64, y as i64))
        } else {
            Err(CoordinateOverflow)
        }
    };
    Ok((p(linear(a, col_step))?, p(linear(a, row_step))?))
}
