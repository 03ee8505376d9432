//! Real-valued planar helpers for measurements: distances between segments, polylines and
//! polygons, point-in-polygon, and the area of the intersection of two simple polygons.

use crate::geom::{BBox, Point};
use crate::model::{Instance, Repetition};
use crate::transform::{Affine, CoordinateOverflow, to_coord_i128};

/// A real point (dbu).
pub type P = (f64, f64);

/// The box, in the parent's coordinates mapped by `m`, of every copy of `inst` whose child
/// box is `child` (KLayout semantics: transformed corners, boxed again).
///
/// # Errors
/// [`CoordinateOverflow`] when a corner leaves the coordinate range.
pub fn placed_bbox(inst: &Instance, child: BBox, m: &Affine) -> Result<BBox, CoordinateOverflow> {
    let corners = [
        Point::new(child.left, child.bottom),
        Point::new(child.right, child.bottom),
        Point::new(child.right, child.top),
        Point::new(child.left, child.top),
    ];
    let own = inst.transform.to_affine();
    let mut out: Option<BBox> = None;
    for (dx, dy) in extreme_displacements(inst.repetition.as_ref()) {
        let shifted = Affine {
            dx: own.dx + dx as f64,
            dy: own.dy + dy as f64,
            ..own
        };
        // Exact integral placements stay exact: compose as the flattener does.
        let full = m.then_inner(&shifted);
        for c in corners {
            let p = full.apply(c)?;
            let b = BBox::from_corners(p, p);
            out = Some(out.map_or(b, |o| o.union(&b)));
        }
    }
    // A repetition with no copies still has a placement box of its base copy.
    match out {
        Some(b) => Ok(b),
        None => {
            let full = m.then_inner(&own);
            let p = full.apply(corners[0])?;
            let q = full.apply(corners[2])?;
            Ok(BBox::from_corners(p, q))
        }
    }
}

/// Displacements whose copies' boxes together bound every copy of the repetition.
fn extreme_displacements(rep: Option<&Repetition>) -> Vec<(i64, i64)> {
    let clamp =
        |v: i128| to_coord_i128(v).unwrap_or(if v < 0 { i64::MIN / 4 } else { i64::MAX / 4 });
    match rep {
        None => vec![(0, 0)],
        Some(r @ Repetition::Array { cols, rows, .. }) => {
            let c = u64::from(cols.saturating_sub(1));
            let rr = u64::from(rows.saturating_sub(1));
            let n = u64::from((*cols).max(1));
            [0, c, rr * n, rr * n + c]
                .iter()
                .map(|&k| {
                    let (x, y) = r.displacement(k);
                    (clamp(x), clamp(y))
                })
                .collect()
        }
        Some(Repetition::Explicit(v)) => v.iter().map(|p| (p.x, p.y)).collect(),
    }
}

/// Euclidean distance between two points.
#[must_use]
pub fn dist(a: P, b: P) -> f64 {
    (a.0 - b.0).hypot(a.1 - b.1)
}

/// Distance from `p` to the segment `a`–`b` (a degenerate segment is the point `a`).
///
/// The one implementation in reticle: measurements use it, and so does the simplification
/// of printed contours before rule checks (`reticle-eval`), whose kept vertices depend on
/// the exact rounding of this expression (square root of the summed squares), so it must
/// not change.
#[must_use]
pub fn point_segment_distance(p: P, a: P, b: P) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (qx, qy) = (a.0 + t * dx, a.1 + t * dy);
    ((p.0 - qx).powi(2) + (p.1 - qy).powi(2)).sqrt()
}

fn cross(o: P, a: P, b: P) -> f64 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

/// Whether the closed segments `a`–`b` and `c`–`d` share a point.
#[must_use]
pub fn segments_intersect(a: P, b: P, c: P, d: P) -> bool {
    let (d1, d2) = (cross(c, d, a), cross(c, d, b));
    let (d3, d4) = (cross(a, b, c), cross(a, b, d));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    (d1 == 0.0 && point_segment_distance(a, c, d) == 0.0)
        || (d2 == 0.0 && point_segment_distance(b, c, d) == 0.0)
        || (d3 == 0.0 && point_segment_distance(c, a, b) == 0.0)
        || (d4 == 0.0 && point_segment_distance(d, a, b) == 0.0)
}

/// Distance between the closed segments `a`–`b` and `c`–`d`.
#[must_use]
pub fn segment_distance(a: P, b: P, c: P, d: P) -> f64 {
    if segments_intersect(a, b, c, d) {
        return 0.0;
    }
    point_segment_distance(a, c, d)
        .min(point_segment_distance(b, c, d))
        .min(point_segment_distance(c, a, b))
        .min(point_segment_distance(d, a, b))
}

/// The edges of a closed ring.
fn ring_edges(ring: &[P]) -> impl Iterator<Item = (P, P)> + '_ {
    (0..ring.len()).map(move |i| (ring[i], ring[(i + 1) % ring.len()]))
}

/// The segments of an open polyline (a single point is a zero-length segment).
fn line_segments(line: &[P]) -> Vec<(P, P)> {
    match line.len() {
        0 => Vec::new(),
        1 => vec![(line[0], line[0])],
        _ => line.windows(2).map(|w| (w[0], w[1])).collect(),
    }
}

/// Minimum distance between two open polylines (0 when they cross).
#[must_use]
pub fn polyline_distance(a: &[P], b: &[P]) -> f64 {
    let mut best = f64::INFINITY;
    for (p, q) in line_segments(a) {
        for (r, s) in line_segments(b) {
            best = best.min(segment_distance(p, q, r, s));
        }
    }
    best
}

/// Whether `p` lies inside the ring or on its boundary.
#[must_use]
pub fn point_in_polygon(p: P, ring: &[P]) -> bool {
    if ring_edges(ring).any(|(a, b)| point_segment_distance(p, a, b) == 0.0) {
        return true;
    }
    let mut inside = false;
    for (a, b) in ring_edges(ring) {
        if (a.1 > p.1) != (b.1 > p.1) {
            let x = a.0 + (p.1 - a.1) * (b.0 - a.0) / (b.1 - a.1);
            if p.0 < x {
                inside = !inside;
            }
        }
    }
    inside
}

/// Distance from `p` to the filled polygon (0 inside).
#[must_use]
pub fn point_polygon_distance(p: P, ring: &[P]) -> f64 {
    if point_in_polygon(p, ring) {
        return 0.0;
    }
    ring_edges(ring)
        .map(|(a, b)| point_segment_distance(p, a, b))
        .fold(f64::INFINITY, f64::min)
}

/// Distance between two filled polygons: 0 when they touch, overlap or one contains the
/// other, else the smallest edge-to-edge distance.
#[must_use]
pub fn polygon_distance(a: &[P], b: &[P]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return f64::INFINITY;
    }
    if point_in_polygon(a[0], b) || point_in_polygon(b[0], a) {
        return 0.0;
    }
    let mut best = f64::INFINITY;
    for (p, q) in ring_edges(a) {
        for (r, s) in ring_edges(b) {
            best = best.min(segment_distance(p, q, r, s));
            if best == 0.0 {
                return 0.0;
            }
        }
    }
    best
}

/// Signed area (positive counter-clockwise).
#[must_use]
pub fn signed_area(ring: &[P]) -> f64 {
    ring_edges(ring)
        .map(|(a, b)| a.0 * b.1 - b.0 * a.1)
        .sum::<f64>()
        / 2.0
}

/// The ring, counter-clockwise.
fn ccw(ring: &[P]) -> Vec<P> {
    let mut r = ring.to_vec();
    if signed_area(&r) < 0.0 {
        r.reverse();
    }
    r
}

/// Area of the intersection of two simple polygons, by Green's theorem over the boundary
/// of the intersection: the parts of A's edges inside B plus the parts of B's edges inside
/// A (both counter-clockwise). Boundary stretches shared by both count once when the edges
/// run the same way and not at all when they run opposite ways.
#[must_use]
pub fn intersection_area(a: &[P], b: &[P]) -> f64 {
    if a.len() < 3 || b.len() < 3 {
        return 0.0;
    }
    let (a, b) = (ccw(a), ccw(b));
    let total = boundary_inside(&a, &b, true) + boundary_inside(&b, &a, false);
    (total / 2.0).max(0.0)
}

/// Σ cross(p, q) over the pieces of `ring`'s edges that lie inside `other`; pieces on
/// `other`'s boundary count only when `keep_shared` and they run the same way.
fn boundary_inside(ring: &[P], other: &[P], keep_shared: bool) -> f64 {
    let mut sum = 0.0;
    for (p, q) in ring_edges(ring) {
        // Split the edge at every crossing with the other polygon's edges.
        let mut ts = vec![0.0, 1.0];
        for (r, s) in ring_edges(other) {
            ts.extend(split_params(p, q, r, s));
        }
        ts.sort_by(f64::total_cmp);
        ts.dedup_by(|x, y| (*x - *y).abs() < 1e-12);
        let at = |t: f64| (p.0 + t * (q.0 - p.0), p.1 + t * (q.1 - p.1));
        for w in ts.windows(2) {
            let (u, v) = (at(w[0]), at(w[1]));
            let mid = at((w[0] + w[1]) / 2.0);
            let on = ring_edges(other).find(|(r, s)| point_segment_distance(mid, *r, *s) < 1e-9);
            let count = match on {
                Some((r, s)) => {
                    let same = (q.0 - p.0) * (s.0 - r.0) + (q.1 - p.1) * (s.1 - r.1) > 0.0;
                    keep_shared && same
                }
                None => point_in_polygon(mid, other),
            };
            if count {
                sum += u.0 * v.1 - v.0 * u.1;
            }
        }
    }
    sum
}

/// Parameters along `p`–`q` where it meets `r`–`s` (crossing point, or the ends of a
/// collinear overlap).
fn split_params(p: P, q: P, r: P, s: P) -> Vec<f64> {
    let d = (q.0 - p.0, q.1 - p.1);
    let e = (s.0 - r.0, s.1 - r.1);
    let den = d.0 * e.1 - d.1 * e.0;
    let len2 = d.0 * d.0 + d.1 * d.1;
    if len2 == 0.0 {
        return Vec::new();
    }
    let proj = |x: P| ((x.0 - p.0) * d.0 + (x.1 - p.1) * d.1) / len2;
    if den == 0.0 {
        // Parallel: collinear overlap contributes its end points.
        if cross(p, q, r) != 0.0 {
            return Vec::new();
        }
        return [proj(r), proj(s)]
            .into_iter()
            .filter(|t| *t > 0.0 && *t < 1.0)
            .collect();
    }
    let t = ((r.0 - p.0) * e.1 - (r.1 - p.1) * e.0) / den;
    let u = ((r.0 - p.0) * d.1 - (r.1 - p.1) * d.0) / den;
    if (0.0..=1.0).contains(&t) && (0.0..=1.0).contains(&u) {
        vec![t]
    } else {
        Vec::new()
    }
}
