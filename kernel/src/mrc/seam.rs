//! The window's polygons meet the context's exactly at the window's edge
//! (docs/DECISIONS.md D178).
//!
//! A window's polygons are traced on the pixel lattice; the drawn context outside the window
//! is exact (a drawn edge of gcd_45nm lies anywhere on its 0.1 nm database grid). Where a
//! drawn line crosses the window's edge and the mask keeps its edge, the traced edge lies up
//! to half a pixel beside the drawn one, so the merged mask has a step of less than a pixel
//! right at the edge. No pixel edit can remove it (the pixels on both sides agree), yet a
//! Euclidean width or space rule measures it against any parallel edge within the rule's
//! distance — a line end near the window's edge — and the tile then falls back on the drawn
//! target. [`snap_to_context`] moves such an edge onto the context edge it continues.

use reticle_layout::{Point, Polygon};

/// Where the context's edges cross one side of the window: the side's coordinate and the
/// crossing coordinates along it.
struct Crossings {
    /// `x` of the vertical context edges that end on `y = bottom` or `y = top`.
    bottom: Vec<i64>,
    top: Vec<i64>,
    /// `y` of the horizontal context edges that end on `x = left` or `x = right`.
    left: Vec<i64>,
    right: Vec<i64>,
}

/// The window's box in dbu: left, bottom, right, top.
pub type DbuBox = (i64, i64, i64, i64);

fn crossings(context: &[Polygon], b: DbuBox) -> Crossings {
    let (l, bo, r, t) = b;
    let mut c = Crossings {
        bottom: Vec::new(),
        top: Vec::new(),
        left: Vec::new(),
        right: Vec::new(),
    };
    for p in context {
        let n = p.points.len();
        for i in 0..n {
            let (a, q) = (p.points[i], p.points[(i + 1) % n]);
            if a.x == q.x && a.y != q.y && a.x > l && a.x < r {
                for y in [a.y, q.y] {
                    if y == bo {
                        c.bottom.push(a.x);
                    } else if y == t {
                        c.top.push(a.x);
                    }
                }
            } else if a.y == q.y && a.x != q.x && a.y > bo && a.y < t {
                for x in [a.x, q.x] {
                    if x == l {
                        c.left.push(a.y);
                    } else if x == r {
                        c.right.push(a.y);
                    }
                }
            }
        }
    }
    c
}

/// The crossing of `list` nearest `v` within `tol` (inclusive: a drawn edge exactly half
/// a pixel off is where the coverage threshold puts the traced edge), other than `v`.
fn nearest(list: &[i64], v: i64, tol: i64) -> Option<i64> {
    list.iter()
        .copied()
        .filter(|&x| x != v && (x - v).abs() <= tol)
        .min_by_key(|&x| (x - v).abs())
}

/// Moves each axis-parallel edge of `polygons` that ends on the window's side `b` onto the
/// context edge that crosses that side at most half a pixel (`pixel_dbu / 2`) away, so
/// that the two meet without a step. Edges elsewhere are unchanged.
pub fn snap_to_context(polygons: &mut [Polygon], context: &[Polygon], b: DbuBox, pixel_dbu: f64) {
    let c = crossings(context, b);
    if c.bottom.is_empty() && c.top.is_empty() && c.left.is_empty() && c.right.is_empty() {
        return;
    }
    let tol = (pixel_dbu / 2.0).ceil() as i64;
    let (l, bo, r, t) = b;
    for p in polygons.iter_mut() {
        let n = p.points.len();
        // New coordinates decided on the traced polygon, applied after.
        let mut moves: Vec<(usize, Point)> = Vec::new();
        for i in 0..n {
            let j = (i + 1) % n;
            let (a, q) = (p.points[i], p.points[j]);
            let snapped = if a.x == q.x && a.y != q.y {
                let side = |y: i64| {
                    if y == bo {
                        nearest(&c.bottom, a.x, tol)
                    } else if y == t {
                        nearest(&c.top, a.x, tol)
                    } else {
                        None
                    }
                };
                side(a.y)
                    .or_else(|| side(q.y))
                    .map(|x| (Point::new(x, a.y), Point::new(x, q.y)))
            } else if a.y == q.y && a.x != q.x {
                let side = |x: i64| {
                    if x == l {
                        nearest(&c.left, a.y, tol)
                    } else if x == r {
                        nearest(&c.right, a.y, tol)
                    } else {
                        None
                    }
                };
                side(a.x)
                    .or_else(|| side(q.x))
                    .map(|y| (Point::new(a.x, y), Point::new(q.x, y)))
            } else {
                None
            };
            if let Some((na, nq)) = snapped {
                moves.push((i, na));
                moves.push((j, nq));
            }
        }
        for (i, to) in moves {
            // A vertex moved by both of its edges (a corner on two sides) takes both moves.
            let from = p.points[i];
            p.points[i] = Point::new(
                if to.x == from.x { from.x } else { to.x },
                if to.y == from.y { from.y } else { to.y },
            );
        }
    }
}
