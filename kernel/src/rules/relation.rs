//! The edge-pair relation behind width, space, notch and enclosure: a port of KLayout's
//! `db::EdgeRelationFilter::check` and `euclidian_near_part_of_edge` /
//! `projected_near_part_of_edge` (`dbEdgePairRelations.cc`, the 0.28 series that
//! Debian ships), with the same integer predicates and the same floating-point formulas
//! in the same order, so that markers agree with KLayout's to the dbu. Semantics:
//!
//! - both edges are first oriented so that the measured side (interior for width,
//!   exterior for space) is on their *right*, KLayout's "width" normalization (reticle's
//!   regions keep the interior on the left, so [`check_pair`] reverses its inputs);
//! - edges meeting at 90° or more are ignored (KLayout's default `ignore_angle = 90`):
//!   the direction vectors must have a negative dot product;
//! - the part of `g` kept for a pair is the part strictly on the measured side of `e`
//!   (cut at `e`'s line, the cut point rounded to the grid) and within the limit of `e`:
//!   - Euclidean: inside the band of perpendicular distance `[0, d]` over `e`'s extent,
//!     or inside a circle of radius `d` around an end of `e` (so corner-to-corner pairs
//!     count); parallel edges must be closer than `d` (their distance rounded to the dbu,
//!     as `db::Edge::distance` does);
//!   - projection: only the band over `e`'s extent (no corner-to-corner pairs);
//! - collinear edges that touch (a "kissing corner" of a self-touching polygon) are an
//!   exception to "strictly": both are kept and the pair has distance 0 (KLayout #281);
//! - the pair is a violation when both kept parts have positive length; their ends are
//!   rounded to the grid (half away from zero). A pair exactly at `d` is not a violation.

use reticle_layout::{BBox, Point};

use super::deck::Metric;
use super::geom::{Edge, cross, dot, sub};

/// A limit in dbu (KLayout's limits are integral dbu; a fractional one is used as is).
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    d: f64,
}

impl Limit {
    pub const fn new(d: f64) -> Self {
        Self { d }
    }
}

/// `coord_traits<int>::rounded`: half away from zero, by truncation after adding ±0.5.
fn rounded(v: f64) -> i64 {
    if v > 0.0 {
        (v + 0.5) as i64
    } else {
        (v - 0.5) as i64
    }
}

fn dvec(e: Edge) -> (i128, i128) {
    sub(e.p2, e.p1)
}

fn fvec(v: (i128, i128)) -> (f64, f64) {
    (v.0 as f64, v.1 as f64)
}

/// `db::vprod` on double vectors.
fn vprod_d(a: (f64, f64), b: (f64, f64)) -> f64 {
    a.0 * b.1 - a.1 * b.0
}

const fn is_degenerate(e: Edge) -> bool {
    e.p1.x == e.p2.x && e.p1.y == e.p2.y
}

/// `db::Edge::side_of`: 1 left, 0 on the line, -1 right.
fn side_of(e: Edge, p: Point) -> i32 {
    if is_degenerate(e) {
        0
    } else {
        cross(dvec(e), sub(p, e.p1)).signum() as i32
    }
}

fn double_sq_length(e: Edge) -> f64 {
    let (dx, dy) = fvec(dvec(e));
    dx * dx + dy * dy
}

fn sq_double_distance(a: Point, b: Point) -> f64 {
    let (dx, dy) = fvec(sub(a, b));
    dx * dx + dy * dy
}

/// `db::Edge::distance`: signed distance of `p` from `e`'s line (positive on the left),
/// rounded to the dbu, divided by the length rounded to the dbu.
fn distance(e: Edge, p: Point) -> i64 {
    if is_degenerate(e) {
        return 0;
    }
    let len = (double_sq_length(e).sqrt() + 0.5).floor();
    rounded(cross(dvec(e), sub(p, e.p1)) as f64 / len)
}

fn touches(a: BBox, b: BBox) -> bool {
    a.left <= b.right && b.left <= a.right && a.bottom <= b.top && b.bottom <= a.top
}

/// `g.cut_point(e)`: where `g`'s line crosses `e`'s line, rounded to the grid. Only
/// called for crossing lines.
fn cut_point(g: Edge, e: Edge) -> Point {
    let (de, dg) = (dvec(e), dvec(g));
    let pr1 = cross(sub(e.p1, g.p1), dg) as f64;
    let pr2 = cross(de, dg) as f64;
    let f = pr1 / pr2;
    let (dx, dy) = fvec(de);
    Point::new(e.p1.x - rounded(dx * f), e.p1.y - rounded(dy * f))
}

/// `g.p1 + round(g.d · l)`.
fn at(g: Edge, l: f64) -> Point {
    let (dx, dy) = fvec(dvec(g));
    Point::new(g.p1.x + rounded(dx * l), g.p1.y + rounded(dy * l))
}

/// The part of `other` on the right of `e` (the measured side), cut at `e`'s line;
/// `None` when nothing is there. Collinear touching edges are kept whole (kissing corners).
fn inside_part(e: Edge, other: Edge) -> Option<Edge> {
    let s1 = side_of(e, other.p1);
    let s2 = side_of(e, other.p2);
    let include_zero = s1 == 0 && s2 == 0 && touches(e.bbox(), other.bbox());
    let thr = if include_zero { 0 } else { -1 };
    if s1 > thr && s2 > thr {
        None
    } else if s2 > thr {
        Some(Edge::new(other.p1, cut_point(other, e)))
    } else if s1 > thr {
        Some(Edge::new(cut_point(other, e), other.p2))
    } else {
        Some(other)
    }
}

/// Parameters on `g` where it crosses `e`'s line shifted by `d` to the right and `e`'s
/// line itself, ordered (`g` not parallel to `e`).
fn band(d: f64, e: Edge, g: Edge, en: (f64, f64)) -> (f64, f64) {
    let (ed, gd) = (fvec(dvec(e)), fvec(dvec(g)));
    let e1d = (e.p1.x as f64 + en.0 * d, e.p1.y as f64 + en.1 * d);
    let det = vprod_d(gd, ed);
    let lp1 = vprod_d((e1d.0 - g.p1.x as f64, e1d.1 - g.p1.y as f64), ed) / det;
    let lp2 = vprod_d(fvec(sub(e.p1, g.p1)), ed) / det;
    if lp1 > lp2 { (lp2, lp1) } else { (lp1, lp2) }
}

/// Parameters on `g` between the perpendiculars to `e` at its ends, ordered (`g` not
/// perpendicular to `e`).
fn slab(e: Edge, g: Edge, en: (f64, f64)) -> (f64, f64) {
    let det = vprod_d(fvec(dvec(g)), en);
    let lt1 = vprod_d(fvec(sub(e.p1, g.p1)), en) / det;
    let lt2 = vprod_d(fvec(sub(e.p2, g.p1)), en) / det;
    if lt1 > lt2 { (lt2, lt1) } else { (lt1, lt2) }
}

/// Right-hand unit normal of `e`.
fn normal(e: Edge) -> (f64, f64) {
    let ef = 1.0 / double_sq_length(e).sqrt();
    let (dx, dy) = fvec(dvec(e));
    (ef * dy, -ef * dx)
}

/// KLayout's `euclidian_near_part_of_edge`: the part of `other` on the right of `e`
/// within Euclidean distance `d` of the segment `e`.
fn euclidean_near_part(d: f64, e: Edge, other: Edge) -> Option<Edge> {
    if is_degenerate(e) {
        return None;
    }
    let g = inside_part(e, other)?;
    if is_degenerate(g) {
        // A point strictly inside: within d of the segment?
        let o = g.p1;
        if side_of(e, o) >= 0 {
            return None;
        }
        let a = double_sq_length(e);
        let b = dot(sub(e.p1, o), dvec(e)) as f64;
        let c = sq_double_distance(e.p1, o) - d * d;
        let s = b * b - a * c;
        if s >= 0.0 {
            let l1 = f64::max(0.0, (-b - s.sqrt()) / a);
            let l2 = f64::min(1.0, (-b + s.sqrt()) / a);
            if l1 <= l2 {
                return Some(g);
            }
        }
        return None;
    }
    let (mut l1, mut l2) = (f64::MAX, -f64::MAX);
    if cross(dvec(e), dvec(g)) == 0 {
        if (distance(e, g.p1) as f64).abs() >= d {
            return None;
        }
    } else {
        let en = normal(e);
        let (lp1, lp2) = band(d, e, g, en);
        if dot(dvec(e), dvec(g)) == 0 {
            if side_of(g, e.p1) * side_of(g, e.p2) <= 0 {
                (l1, l2) = (lp1, lp2);
            }
        } else {
            let (lt1, lt2) = slab(e, g, en);
            let (ll1, ll2) = (lp1.max(lt1), lp2.min(lt2));
            if ll1 <= ll2 {
                (l1, l2) = (ll1, ll2);
            }
        }
    }
    // The circles of radius d around e's ends.
    for o in [e.p1, e.p2] {
        let a = double_sq_length(g);
        let b = dot(sub(g.p1, o), dvec(g)) as f64;
        let c = sq_double_distance(g.p1, o) - d * d;
        let s = b * b - a * c;
        if s >= 0.0 {
            l1 = l1.min((-b - s.sqrt()) / a);
            l2 = l2.max((-b + s.sqrt()) / a);
        }
    }
    let (l1, l2) = (l1.max(0.0), l2.min(1.0));
    (l1 < l2).then(|| Edge::new(at(g, l1), at(g, l2)))
}

/// KLayout's `projected_near_part_of_edge`: the part of `other` on the right of `e`
/// closer than `d` to `e`'s line and inside `e`'s extent (perpendicular projection).
fn projected_near_part(d: f64, e: Edge, other: Edge) -> Option<Edge> {
    if is_degenerate(e) {
        return None;
    }
    let g = inside_part(e, other)?;
    let within_extent =
        |p: Point| dot(sub(p, e.p1), dvec(e)) >= 0 && dot(sub(e.p2, p), dvec(e)) >= 0;
    if is_degenerate(g) {
        let gd = distance(e, g.p1) as f64;
        return (gd > -d && gd < 0.0 && within_extent(g.p1)).then_some(g);
    }
    let (mut l1, mut l2) = (f64::MIN_POSITIVE, f64::MAX);
    let en = normal(e);
    if cross(dvec(e), dvec(g)) == 0 {
        if (distance(e, g.p1) as f64).abs() >= d {
            return None;
        }
    } else {
        (l1, l2) = band(d, e, g, en);
    }
    if dot(dvec(e), dvec(g)) == 0 {
        if !within_extent(g.p1) {
            return None;
        }
    } else {
        let (lt1, lt2) = slab(e, g, en);
        l1 = l1.max(lt1);
        l2 = l2.min(lt2);
    }
    let (l1, l2) = (l1.max(0.0), l2.min(1.0));
    (l1 < l2).then(|| Edge::new(at(g, l1), at(g, l2)))
}

/// Euclidean distance between two segments that do not cross.
pub fn segment_distance(a: Edge, b: Edge) -> f64 {
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

/// Checks two edges oriented so that each must lie on the *left* of the other (reticle's
/// orientation: for width, both region edges as they are). Returns the near parts, in
/// that orientation, when they violate (KLayout's `EdgeRelationFilter::check`).
pub fn check_pair(a: Edge, b: Edge, lim: Limit, metric: Metric) -> Option<(Edge, Edge)> {
    // KLayout measures on the right: reverse both.
    let (an, bn) = (a.reversed(), b.reversed());
    if dot(dvec(an), dvec(bn)) >= 0 {
        return None;
    }
    let near = match metric {
        Metric::Euclidean => euclidean_near_part,
        Metric::Projection => projected_near_part,
    };
    let pb = near(lim.d, an, bn)?;
    let pa = near(lim.d, bn, an)?;
    Some((pa.reversed(), pb.reversed()))
}
