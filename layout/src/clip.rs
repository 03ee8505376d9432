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
fn div_round(n: i128, d: i128) -> Option<i128> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn poly(pts: &[(i64, i64)]) -> Polygon {
        Polygon::new(pts.iter().map(|&(x, y)| Point::new(x, y)).collect())
    }

    #[test]
    fn rectangle_clip_is_exact() {
        let r = Polygon::rect(BBox::from_corners(Point::new(-10, -10), Point::new(10, 10)));
        let c = BBox::from_corners(Point::new(0, 0), Point::new(100, 5));
        let out = clip_polygon(&r, &c).expect("overlap");
        assert_eq!(out.signed_area2().abs(), 2 * 10 * 5);
        assert_eq!(
            out.bbox(),
            Some(BBox::from_corners(Point::new(0, 0), Point::new(10, 5)))
        );
    }

    #[test]
    fn outside_and_touching_give_none() {
        let r = Polygon::rect(BBox::from_corners(Point::new(0, 0), Point::new(10, 10)));
        let touching = BBox::from_corners(Point::new(10, 0), Point::new(20, 10));
        assert_eq!(clip_polygon(&r, &touching), None);
        let far = BBox::from_corners(Point::new(50, 50), Point::new(60, 60));
        assert_eq!(clip_polygon(&r, &far), None);
    }

    #[test]
    fn triangle_and_concave_clip_areas() {
        // Right triangle with legs 100; clip to x <= 50 keeps a trapezoid of area 3750.
        let t = poly(&[(0, 0), (100, 0), (0, 100)]);
        let c = BBox::from_corners(Point::new(-1000, -1000), Point::new(50, 1000));
        assert_eq!(
            clip_polygon(&t, &c).expect("overlap").signed_area2(),
            2 * 3750
        );
        // U shape: two 10x30 legs joined by a 30x10 base; clip off the base.
        let u = poly(&[
            (0, 0),
            (30, 0),
            (30, 30),
            (20, 30),
            (20, 10),
            (10, 10),
            (10, 30),
            (0, 30),
        ]);
        let c = BBox::from_corners(Point::new(-5, 10), Point::new(35, 40));
        let out = clip_polygon(&u, &c).expect("overlap");
        assert_eq!(out.signed_area2(), 2 * 2 * 10 * 20);
    }

    #[test]
    fn extreme_coordinates_do_not_overflow() {
        let m = i64::MAX / 2;
        let t = poly(&[(-m, -m), (m, -m + 7), (0, m)]);
        let c = BBox::from_corners(Point::new(i64::MIN, 0), Point::new(i64::MAX, i64::MAX));
        let out = clip_polygon(&t, &c).expect("overlap");
        assert!(out.points.iter().all(|p| p.y >= 0));
    }

    #[test]
    fn rounding_division() {
        assert_eq!(div_round(5, 2), Some(3));
        assert_eq!(div_round(-5, 2), Some(-3));
        assert_eq!(div_round(5, -2), Some(-3));
        assert_eq!(div_round(4, 3), Some(1));
        assert_eq!(div_round(-4, 3), Some(-1));
        assert_eq!(div_round(1, 0), None);
        assert_eq!(div_round(i128::MAX, 1), None);
    }
}
