//! The edge-pair relation behind width, space, notch and enclosure, with KLayout's
//! semantics (`dbEdgePairRelations`), reimplemented:
//!
//! - both edges are first oriented so that each must lie on the *left* of the other
//!   (the side that is measured: interior for width, exterior for space);
//! - edges meeting at 90° or more are ignored (KLayout's default `ignore_angle = 90`):
//!   after that orientation the direction vectors must have a negative dot product;
//! - the part of each edge strictly on the measured side of the other and closer than
//!   `d` is kept (Euclidean: distance to the other *segment*, corners included;
//!   projection: only where the edges project onto each other, perpendicular distance);
//! - the pair is a violation when both parts have positive length. A pair exactly at
//!   `d` is not a violation (the comparison is strict and exact in integers for parallel
//!   edges and an integral `d`).

use reticle_layout::Point;

use super::deck::Metric;
use super::geom::{Edge, cross, dot, sub};

/// A limit in dbu with its exact square when it is an integer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    d: f64,
    d2_exact: Option<i128>,
}

impl Limit {
    pub(crate) fn new(d: f64) -> Self {
        let d2_exact = (d.fract() == 0.0 && d.abs() < 1e15).then(|| {
            let di = d as i128;
            di * di
        });
        Self { d, d2_exact }
    }

    pub(crate) fn value(self) -> f64 {
        self.d
    }

    /// Whether `num / den < d²` (den > 0), exactly when possible.
    fn sq_less(self, num: i128, den: i128) -> bool {
        match self.d2_exact {
            Some(d2) => num < d2.saturating_mul(den),
            None => (num as f64) < self.d * self.d * den as f64,
        }
    }
}

const EPS: f64 = 1e-10;

/// Exact: distance from `p` to segment `e` below the limit.
fn point_segment_near(p: Point, e: Edge, lim: Limit) -> bool {
    let ed = sub(e.p2, e.p1);
    let v = sub(p, e.p1);
    let l2 = dot(ed, ed);
    let t = dot(v, ed);
    if t <= 0 || l2 == 0 {
        lim.sq_less(dot(v, v), 1)
    } else if t >= l2 {
        let w = sub(p, e.p2);
        lim.sq_less(dot(w, w), 1)
    } else {
        let c = cross(ed, v);
        lim.sq_less(c * c, l2)
    }
}

fn interval_of_linear(v0: f64, v1: f64, lo: f64, hi: f64) -> Option<(f64, f64)> {
    // Values t where v0 + t·(v1 − v0) lies in [lo, hi].
    let k = v1 - v0;
    if k == 0.0 {
        return (v0 >= lo && v0 <= hi).then_some((f64::NEG_INFINITY, f64::INFINITY));
    }
    let (a, b) = ((lo - v0) / k, (hi - v0) / k);
    Some((a.min(b), a.max(b)))
}

/// Parameters on `g` of its part strictly on the left of `e` and within the limit of `e`.
fn near_part(e: Edge, g: Edge, lim: Limit, metric: Metric) -> Option<(f64, f64)> {
    let ed = sub(e.p2, e.p1);
    let gd = sub(g.p2, g.p1);
    let l2 = dot(ed, ed);
    if l2 == 0 || dot(gd, gd) == 0 {
        return None;
    }
    let s1 = cross(ed, sub(g.p1, e.p1));
    let s2 = cross(ed, sub(g.p2, e.p1));
    if s1 <= 0 && s2 <= 0 {
        return None;
    }
    let (mut t0, mut t1) = (0.0_f64, 1.0_f64);
    if s1 <= 0 {
        t0 = s1 as f64 / (s1 - s2) as f64;
    } else if s2 <= 0 {
        t1 = s1 as f64 / (s1 - s2) as f64;
    }
    let d = lim.value();
    let lf = (l2 as f64).sqrt();
    // Projection of g's ends on e, in units of e's length.
    let u1 = dot(sub(g.p1, e.p1), ed) as f64 / l2 as f64;
    let u2 = dot(sub(g.p2, e.p1), ed) as f64 / l2 as f64;
    let (mut l, mut h) = (f64::INFINITY, f64::NEG_INFINITY);
    if cross(ed, gd) == 0 {
        // Parallel: constant distance s1 / |e|.
        if !lim.sq_less(s1 * s1, l2) {
            return None;
        }
        let reach = match metric {
            Metric::Euclidean => {
                ((d * d * l2 as f64 - (s1 * s1) as f64).max(0.0)).sqrt() / l2 as f64
            }
            Metric::Projection => 0.0,
        };
        if metric == Metric::Euclidean
            && !(point_segment_near(g.p1, e, lim)
                || point_segment_near(g.p2, e, lim)
                || point_segment_near(e.p1, g, lim)
                || point_segment_near(e.p2, g, lim))
        {
            return None;
        }
        let (a, b) = interval_of_linear(u1, u2, -reach, 1.0 + reach)?;
        l = a;
        h = b;
    } else {
        // Band of perpendicular distance in (0, d) intersected with e's slab.
        let band = interval_of_linear(s1 as f64, s2 as f64, 0.0, d * lf)?;
        let slab = interval_of_linear(u1, u2, 0.0, 1.0)?;
        let (a, b) = (band.0.max(slab.0), band.1.min(slab.1));
        if a <= b {
            l = a;
            h = b;
        }
        if metric == Metric::Euclidean {
            let gdf = (gd.0 as f64, gd.1 as f64);
            let ga = gdf.0 * gdf.0 + gdf.1 * gdf.1;
            for o in [e.p1, e.p2] {
                let w = sub(g.p1, o);
                let wf = (w.0 as f64, w.1 as f64);
                let b = (wf.0 * gdf.0 + wf.1 * gdf.1) / ga;
                let c = (wf.0 * wf.0 + wf.1 * wf.1 - d * d) / ga;
                let disc = b * b - c;
                if disc > 0.0 {
                    let r = disc.sqrt();
                    l = l.min(-b - r);
                    h = h.max(-b + r);
                }
            }
        }
    }
    let (l, h) = (l.max(t0), h.min(t1));
    (h - l > EPS).then_some((l, h))
}

fn at(g: Edge, t: f64) -> Point {
    let gd = sub(g.p2, g.p1);
    Point::new(
        g.p1.x + (gd.0 as f64 * t).round() as i64,
        g.p1.y + (gd.1 as f64 * t).round() as i64,
    )
}

fn sub_edge(g: Edge, (l, h): (f64, f64)) -> Edge {
    Edge::new(at(g, l), at(g, h))
}

/// Euclidean distance between two segments that do not cross.
pub(crate) fn segment_distance(a: Edge, b: Edge) -> f64 {
    fn pd(p: Point, e: Edge) -> f64 {
        let ed = sub(e.p2, e.p1);
        let v = sub(p, e.p1);
        let l2 = dot(ed, ed);
        let t = if l2 == 0 {
            0.0
        } else {
            (dot(v, ed) as f64 / l2 as f64).clamp(0.0, 1.0)
        };
        let dx = v.0 as f64 - ed.0 as f64 * t;
        let dy = v.1 as f64 - ed.1 as f64 * t;
        dx.hypot(dy)
    }
    pd(a.p1, b)
        .min(pd(a.p2, b))
        .min(pd(b.p1, a))
        .min(pd(b.p2, a))
}

/// Checks two edges already oriented so that each must be on the left of the other.
/// Returns the near parts (in that orientation) when they violate.
pub(crate) fn check_pair(a: Edge, b: Edge, lim: Limit, metric: Metric) -> Option<(Edge, Edge)> {
    if dot(sub(a.p2, a.p1), sub(b.p2, b.p1)) >= 0 {
        return None;
    }
    let pb = near_part(a, b, lim, metric)?;
    let pa = near_part(b, a, lim, metric)?;
    Some((sub_edge(a, pa), sub_edge(b, pb)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(x1: i64, y1: i64, x2: i64, y2: i64) -> Edge {
        Edge::new(Point::new(x1, y1), Point::new(x2, y2))
    }

    #[test]
    fn facing_parallel_edges() {
        // Left side of a rectangle 0..30 wide (going down) and its right side (going up).
        let a = e(0, 100, 0, 0);
        let b = e(30, 0, 30, 100);
        let m = Metric::Euclidean;
        assert!(check_pair(a, b, Limit::new(31.0), m).is_some());
        assert!(
            check_pair(a, b, Limit::new(30.0), m).is_none(),
            "at the limit is fine"
        );
        assert!(check_pair(b, a, Limit::new(31.0), m).is_some(), "symmetric");
        assert!(
            check_pair(a.reversed(), b.reversed(), Limit::new(100.0), m).is_none(),
            "wrong side"
        );
    }

    #[test]
    fn corner_to_corner_is_euclidean() {
        // Offset parallel edges: nearest points (0,0) and (30,-40): distance 50.
        let a = e(0, 100, 0, 0);
        let b = e(30, -100, 30, -40);
        assert!(check_pair(a, b, Limit::new(50.0), Metric::Euclidean).is_none());
        let (na, nb) = check_pair(a, b, Limit::new(51.0), Metric::Euclidean).unwrap();
        assert_eq!(na.p2, Point::new(0, 0));
        assert_eq!(nb.p2, Point::new(30, -40));
        assert!(check_pair(a, b, Limit::new(51.0), Metric::Projection).is_none());
    }

    #[test]
    fn perpendicular_edges_are_ignored() {
        let a = e(0, 100, 0, 0);
        let b = e(10, 0, 10, 1);
        assert!(check_pair(a, b, Limit::new(50.0), Metric::Euclidean).is_some());
        let c = e(5, 50, 20, 50);
        assert!(check_pair(a, c, Limit::new(50.0), Metric::Euclidean).is_none());
    }

    #[test]
    fn partial_overlap_near_parts() {
        let a = e(0, 100, 0, 0);
        let b = e(10, 50, 10, 200);
        let (na, nb) = check_pair(a, b, Limit::new(20.0), Metric::Projection).unwrap();
        assert_eq!(na, e(0, 100, 0, 50));
        assert_eq!(nb, e(10, 50, 10, 100));
        assert!((segment_distance(na, nb) - 10.0).abs() < 1e-12);
    }
}
