//! Clipping polygons to an axis-aligned rectangle (Sutherland–Hodgman).
//!
//! Concave polygons may come out with zero-width "bridges" along the clip edge; their
//! area is exact and rasterizers fill them correctly, which is all the engine needs.

use crate::geom::{BBox, Point, Polygon};

/// Clips `poly` to `clip`. `None` when nothing of positive area remains.
///
/// Intersections with the clip edges are rounded to the nearest dbu; Manhattan polygons
/// clip exactly.
#[must_use]
pub fn clip_polygon(poly: &Polygon, clip: &BBox) -> Option<Polygon> {
    let bb = poly.bbox()?;
    if !bb.overlaps(clip) {
        return None;
    }
    if bb.left >= clip.left
        && bb.right <= clip.right
        && bb.bottom >= clip.bottom
        && bb.top <= clip.top
    {
        return (poly.points.len() >= 3 && poly.signed_area2() != 0).then(|| poly.clone());
    }
    let mut pts = poly.points.clone();
    for edge in [
        ClipSide::Left,
        ClipSide::Right,
        ClipSide::Bottom,
        ClipSide::Top,
    ] {
        pts = clip_edge(&pts, edge, clip);
        if pts.len() < 3 {
            return None;
        }
    }
    pts.dedup();
    while pts.len() > 1 && pts.first() == pts.last() {
        pts.pop();
    }
    let out = Polygon::new(pts);
    (out.points.len() >= 3 && out.signed_area2() != 0).then_some(out)
}

/// Whether clipping `poly` to `clip` leaves positive area, i.e. whether [`clip_polygon`]
/// returns `Some`; decided from the bounding box alone when it lies inside or outside.
#[must_use]
pub fn keeps_area_inside(poly: &Polygon, clip: &BBox) -> bool {
    let Some(bb) = poly.bbox() else {
        return false;
    };
    if !bb.overlaps(clip) {
        return false;
    }
    if bb.left >= clip.left
        && bb.right <= clip.right
        && bb.bottom >= clip.bottom
        && bb.top <= clip.top
    {
        return poly.points.len() >= 3 && poly.signed_area2() != 0;
    }
    clip_polygon(poly, clip).is_some()
}

#[derive(Clone, Copy)]
enum ClipSide {
    Left,
    Right,
    Bottom,
    Top,
}

fn inside(p: Point, edge: ClipSide, c: &BBox) -> bool {
    match edge {
        ClipSide::Left => p.x >= c.left,
        ClipSide::Right => p.x <= c.right,
        ClipSide::Bottom => p.y >= c.bottom,
        ClipSide::Top => p.y <= c.top,
    }
}

/// Where segment a→b crosses the edge's line (called only when it does).
fn intersect(a: Point, b: Point, edge: ClipSide, c: &BBox) -> Point {
    match edge {
        ClipSide::Left | ClipSide::Right => {
            let x = if matches!(edge, ClipSide::Left) {
                c.left
            } else {
                c.right
            };
            Point::new(x, cross_at(a.y, b.y, a.x, b.x, x))
        }
        ClipSide::Bottom | ClipSide::Top => {
            let y = if matches!(edge, ClipSide::Bottom) {
                c.bottom
            } else {
                c.top
            };
            Point::new(cross_at(a.x, b.x, a.y, b.y, y), y)
        }
    }
}

/// The `u` coordinate where the segment (u0,v0)→(u1,v1) reaches `v = at`, rounded to the
/// nearest dbu: exact in i128, falling back to f64 only for coordinates near the i64 range.
fn cross_at(u0: i64, u1: i64, v0: i64, v1: i64, at: i64) -> i64 {
    let (du, dv, dt) = (
        i128::from(u1) - i128::from(u0),
        i128::from(v1) - i128::from(v0),
        i128::from(at) - i128::from(v0),
    );
    let exact = du
        .checked_mul(dt)
        .and_then(|n| div_round(n, dv))
        .and_then(|q| q.checked_add(i128::from(u0)));
    match exact {
        Some(u) => u.clamp(i128::from(u0.min(u1)), i128::from(u0.max(u1))) as i64,
        None => {
            let t = dt as f64 / dv as f64;
            (u0 as f64 + du as f64 * t)
                .round()
                .clamp(u0.min(u1) as f64, u0.max(u1) as f64) as i64
        }
    }
}

/// `n / d` rounded half away from zero; `None` for `d == 0` or overflow.
// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub fn div_round(n: i128, d: i128) -> Option<i128> {
    if d == 0 {
        return None;
    }
    let (n, d) = if d < 0 {
        (n.checked_neg()?, d.checked_neg()?)
    } else {
        (n, d)
    };
    let two_d = d.checked_mul(2)?;
    if n >= 0 {
        Some(n.checked_mul(2)?.checked_add(d)? / two_d)
    } else {
        Some(-(n.checked_mul(-2)?.checked_add(d)? / two_d))
    }
}

fn clip_edge(pts: &[Point], edge: ClipSide, c: &BBox) -> Vec<Point> {
    let mut out = Vec::with_capacity(pts.len() + 4);
    let Some(&last) = pts.last() else {
        return out;
    };
    let mut prev = last;
    for &cur in pts {
        let (pin, cin) = (inside(prev, edge, c), inside(cur, edge, c));
        if cin {
            if !pin {
                out.push(intersect(prev, cur, edge, c));
            }
            out.push(cur);
        } else if pin {
            out.push(intersect(prev, cur, edge, c));
        }
        prev = cur;
    }
    out
}
