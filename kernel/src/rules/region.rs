//! Merging the polygons of a layer into a region: the union's boundary edges, chained
//! into hulls and holes.
//!
//! Algorithm (exact for Manhattan input): every input polygon is oriented
//! counter-clockwise; every edge is split at the endpoints of other edges that lie on it
//! and at proper crossings; identical sub-edges are grouped with their net direction; a
//! sub-edge is on the union's boundary when the coverage (winding number, found by a ray
//! cast from its midpoint displaced infinitesimally to one side, with symbolic
//! perturbation) is zero on one side and positive on the other. Boundary edges are
//! oriented with the interior on their left and chained into loops, turning right at
//! vertices where polygons touch corner-to-corner (so kissing corners join one polygon,
//! like KLayout's default `min_coherence = false`); collinear runs are merged.
//!
//! Limits: crossings of non-Manhattan edges at non-integer points are snapped to the
//! nearest dbu (as any integer layout database must); self-intersecting input polygons
//! are taken with the non-zero winding rule.

use std::collections::HashMap;

use reticle_layout::{BBox, Point, Polygon};

use super::geom::{Edge, cross, sub};
use super::index::GridIndex;

/// One polygon of a merged region: a counter-clockwise hull and clockwise holes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedPolygon {
    /// Hull, counter-clockwise, open.
    pub hull: Vec<Point>,
    /// Holes, clockwise, open.
    pub holes: Vec<Vec<Point>>,
    /// Twice the area (hull minus holes).
    pub area2: i128,
    /// Bounding box of the hull.
    pub bbox: BBox,
}

/// A boundary edge of a region, oriented with the region's interior on its left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionEdge {
    /// The edge.
    pub edge: Edge,
    /// Index of its polygon in [`Region::polygons`].
    pub polygon: u32,
}

/// The merged polygons of one layer.
#[derive(Debug, Clone, Default)]
pub struct Region {
    polygons: Vec<MergedPolygon>,
    edges: Vec<RegionEdge>,
}

fn area2(points: &[Point]) -> i128 {
    Polygon::new(points.to_vec()).signed_area2()
}

fn bbox_of(points: &[Point]) -> BBox {
    let first = points[0];
    points
        .iter()
        .fold(BBox::from_corners(first, first), |b, p| {
            b.union(&BBox::from_corners(*p, *p))
        })
}

/// Drops repeated points (the closing repeat included); `None` when nothing with area is left.
fn normalized_ccw(poly: &Polygon) -> Option<Vec<Point>> {
    let mut pts: Vec<Point> = Vec::with_capacity(poly.points.len());
    for &p in &poly.points {
        if pts.last() != Some(&p) {
            pts.push(p);
        }
    }
    while pts.len() > 1 && pts.first() == pts.last() {
        pts.pop();
    }
    if pts.len() < 3 {
        return None;
    }
    let a = area2(&pts);
    if a == 0 {
        return None;
    }
    if a < 0 {
        pts.reverse();
    }
    Some(pts)
}

/// Sign of `a` as -1, 0, 1.
fn sgn(a: i128) -> i32 {
    a.signum() as i32
}

/// Whether `p` lies on segment `e` strictly between its endpoints.
fn strictly_inside_segment(e: Edge, p: Point) -> bool {
    if p == e.p1 || p == e.p2 || cross(sub(e.p2, e.p1), sub(p, e.p1)) != 0 {
        return false;
    }
    let (d, v) = (sub(e.p2, e.p1), sub(p, e.p1));
    let t = d.0 * v.0 + d.1 * v.1;
    t > 0 && t < d.0 * d.0 + d.1 * d.1
}

/// Integer division rounded to nearest (ties away from zero).
fn div_round(n: i128, d: i128) -> i128 {
    let (n, d) = if d < 0 { (-n, -d) } else { (n, d) };
    if n >= 0 {
        (2 * n + d) / (2 * d)
    } else {
        -((-2 * n + d) / (2 * d))
    }
}

/// The crossing point of two segments that cross properly (interiors, one point), snapped.
fn proper_crossing(a: Edge, b: Edge) -> Option<Point> {
    let (r, s) = (sub(a.p2, a.p1), sub(b.p2, b.p1));
    let d1 = sgn(cross(r, sub(b.p1, a.p1)));
    let d2 = sgn(cross(r, sub(b.p2, a.p1)));
    let d3 = sgn(cross(s, sub(a.p1, b.p1)));
    let d4 = sgn(cross(s, sub(a.p2, b.p1)));
    if d1 * d2 >= 0 || d3 * d4 >= 0 {
        return None;
    }
    let den = cross(r, s);
    let num = cross(sub(b.p1, a.p1), s);
    let x = i128::from(a.p1.x) + div_round(num * r.0, den);
    let y = i128::from(a.p1.y) + div_round(num * r.1, den);
    Some(Point::new(i64::try_from(x).ok()?, i64::try_from(y).ok()?))
}

/// Input edges bucketed in horizontal rows for the ray casts.
struct RowIndex {
    y0: i128,
    height: i128,
    rows: Vec<Vec<u32>>,
}

impl RowIndex {
    /// `edges` in doubled coordinates.
    fn new(edges: &[(Point2, Point2)]) -> Self {
        let (mut lo, mut hi) = (i128::MAX, i128::MIN);
        for (u, v) in edges {
            lo = lo.min(u.1.min(v.1));
            hi = hi.max(u.1.max(v.1));
        }
        if edges.is_empty() {
            return Self {
                y0: 0,
                height: 1,
                rows: Vec::new(),
            };
        }
        let n_rows = (edges.len() / 4).clamp(1, 1 << 16) as i128;
        let height = ((hi - lo) / n_rows + 1).max(1);
        let count = ((hi - lo) / height + 1) as usize;
        let mut rows = vec![Vec::new(); count];
        for (i, (u, v)) in edges.iter().enumerate() {
            let r0 = ((u.1.min(v.1) - lo) / height) as usize;
            let r1 = ((u.1.max(v.1) - lo) / height) as usize;
            for row in &mut rows[r0..=r1] {
                row.push(i as u32);
            }
        }
        Self {
            y0: lo,
            height,
            rows,
        }
    }

    fn row(&self, y: i128) -> &[u32] {
        if y < self.y0 {
            return &[];
        }
        self.rows
            .get(((y - self.y0) / self.height) as usize)
            .map_or(&[], Vec::as_slice)
    }
}

/// A point in doubled coordinates (so midpoints are integers), widened.
type Point2 = (i128, i128);

fn double(p: Point) -> Point2 {
    (2 * i128::from(p.x), 2 * i128::from(p.y))
}

/// Winding contribution of edge `(u, v)` for a +x ray from `m + ε·n` (ε → 0⁺).
fn ray_crossing(m: Point2, n: Point2, u: Point2, v: Point2) -> i32 {
    let below = |y: i128| if y == m.1 { n.1 >= 0 } else { y < m.1 };
    let (lu, lv) = (below(u.1), below(v.1));
    if lu == lv {
        return 0;
    }
    let (dxv, dyv) = (v.0 - u.0, v.1 - u.1);
    let n0 = (u.0 - m.0) * dyv + (m.1 - u.1) * dxv;
    let n1 = -n.0 * dyv + n.1 * dxv;
    let s = if n0 != 0 { n0.signum() } else { n1.signum() };
    if s * dyv.signum() <= 0 {
        return 0;
    }
    if lu { 1 } else { -1 }
}

/// Winding number at `m + ε·n` over the indexed edges.
fn winding_at(m: Point2, n: Point2, edges: &[(Point2, Point2)], rows: &RowIndex) -> i32 {
    rows.row(m.1)
        .iter()
        .map(|&i| {
            let (u, v) = edges[i as usize];
            if u.0.max(v.0) < m.0 {
                0
            } else {
                ray_crossing(m, n, u, v)
            }
        })
        .sum()
}

/// Winding number of a closed loop at `m + ε·n` (no index; small loops).
fn loop_winding(m: Point2, n: Point2, pts: &[Point]) -> i32 {
    (0..pts.len())
        .map(|i| ray_crossing(m, n, double(pts[i]), double(pts[(i + 1) % pts.len()])))
        .sum()
}

/// Turning angle from direction `a` to direction `b` in (-π, π].
fn turn(a: (i128, i128), b: (i128, i128)) -> f64 {
    let c = (a.0 * b.1 - a.1 * b.0) as f64;
    let d = (a.0 * b.0 + a.1 * b.1) as f64;
    c.atan2(d)
}

/// Removes vertices between collinear same-direction edges.
fn merge_collinear(mut pts: Vec<Point>) -> Vec<Point> {
    loop {
        let n = pts.len();
        if n < 3 {
            return pts;
        }
        let keep: Vec<bool> = (0..n)
            .map(|i| {
                let (a, b, c) = (pts[(i + n - 1) % n], pts[i], pts[(i + 1) % n]);
                let (u, v) = (sub(b, a), sub(c, b));
                !(cross(u, v) == 0 && u.0 * v.0 + u.1 * v.1 > 0)
            })
            .collect();
        if keep.iter().all(|k| *k) {
            return pts;
        }
        pts = pts
            .into_iter()
            .zip(keep)
            .filter_map(|(p, k)| k.then_some(p))
            .collect();
    }
}

impl Region {
    /// Merges `polygons` (any orientation, overlapping or abutting) into a region.
    #[must_use]
    pub fn from_polygons(polygons: &[Polygon]) -> Self {
        let loops: Vec<Vec<Point>> = polygons.iter().filter_map(normalized_ccw).collect();
        let mut input: Vec<Edge> = Vec::new();
        for l in &loops {
            for i in 0..l.len() {
                input.push(Edge::new(l[i], l[(i + 1) % l.len()]));
            }
        }
        if input.is_empty() {
            return Self::default();
        }
        let boundary = union_boundary(&input);
        Self::from_boundary(&boundary)
    }

    /// Builds a region from boundary edges that already have the interior on their left
    /// (e.g. contours traced from a raster), chaining them into polygons.
    fn from_boundary(boundary: &[Edge]) -> Self {
        let loops = chain_loops(boundary);
        let (mut outers, mut holes): (Vec<Vec<Point>>, Vec<Vec<Point>>) = (Vec::new(), Vec::new());
        for l in loops {
            let l = merge_collinear(l);
            if l.len() < 3 {
                continue;
            }
            match area2(&l).signum() {
                1 => outers.push(l),
                -1 => holes.push(l),
                _ => {}
            }
        }
        let mut polygons: Vec<MergedPolygon> = outers
            .into_iter()
            .map(|hull| MergedPolygon {
                area2: area2(&hull),
                bbox: bbox_of(&hull),
                hull,
                holes: Vec::new(),
            })
            .collect();
        // Deterministic polygon order: by bbox, then hull.
        polygons.sort_by(|a, b| (a.bbox, &a.hull).cmp(&(b.bbox, &b.hull)));
        let mut by_area: Vec<usize> = (0..polygons.len()).collect();
        by_area.sort_by_key(|&i| (polygons[i].area2, i));
        for hole in holes {
            let hb = bbox_of(&hole);
            let (a, b) = (hole[0], hole[1]);
            let m = (
                i128::from(a.x) + i128::from(b.x),
                i128::from(a.y) + i128::from(b.y),
            );
            let d = sub(b, a);
            let left = (-d.1, d.0);
            let owner = by_area.iter().copied().find(|&i| {
                let p = &polygons[i];
                p.bbox.left <= hb.left
                    && p.bbox.bottom <= hb.bottom
                    && p.bbox.right >= hb.right
                    && p.bbox.top >= hb.top
                    && loop_winding(m, left, &p.hull) != 0
            });
            if let Some(i) = owner {
                polygons[i].area2 += area2(&hole);
                polygons[i].holes.push(hole);
            }
        }
        let mut edges = Vec::new();
        for (pi, p) in polygons.iter_mut().enumerate() {
            p.holes.sort();
            for ring in std::iter::once(&p.hull).chain(p.holes.iter()) {
                for i in 0..ring.len() {
                    edges.push(RegionEdge {
                        edge: Edge::new(ring[i], ring[(i + 1) % ring.len()]),
                        polygon: pi as u32,
                    });
                }
            }
        }
        Self { polygons, edges }
    }

    /// The merged polygons, sorted by bounding box.
    #[must_use]
    pub fn polygons(&self) -> &[MergedPolygon] {
        &self.polygons
    }

    /// Every boundary edge (hulls and holes), interior on the left.
    #[must_use]
    pub fn edges(&self) -> &[RegionEdge] {
        &self.edges
    }

    /// Whether the region is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.polygons.is_empty()
    }

    /// The same region with the polygons `joined` (indices into [`Self::polygons`]) taken
    /// as one polygon by the checks that pair edges of one polygon only (width, notch).
    /// The geometry is unchanged. A tile of a whole-layout check uses it for the pieces a
    /// box cut out of polygons that may be one beyond the box.
    #[must_use]
    pub fn with_polygons_joined(&self, joined: &[usize]) -> Self {
        let Some(&label) = joined.iter().min() else {
            return self.clone();
        };
        let mut member = vec![false; self.polygons.len()];
        for &i in joined {
            if let Some(m) = member.get_mut(i) {
                *m = true;
            }
        }
        let mut out = self.clone();
        for e in &mut out.edges {
            if member.get(e.polygon as usize).copied().unwrap_or(false) {
                e.polygon = label as u32;
            }
        }
        out
    }
}

/// The union's boundary edges, interior on the left, unsorted.
fn union_boundary(input: &[Edge]) -> Vec<Edge> {
    let boxes: Vec<BBox> = input.iter().map(|e| e.bbox()).collect();
    let cell = GridIndex::suggested_cell(&boxes, 1);
    let index = GridIndex::new(boxes, cell);
    let mut splits: Vec<Vec<Point>> = input.iter().map(|e| vec![e.p1, e.p2]).collect();
    let mut stamp = vec![u32::MAX; input.len()];
    for (i, &a) in input.iter().enumerate() {
        index.query(a.bbox(), &mut stamp, i as u32, |j| {
            let j = j as usize;
            if j == i {
                return;
            }
            let b = input[j];
            for p in [b.p1, b.p2] {
                if strictly_inside_segment(a, p) {
                    splits[i].push(p);
                }
            }
            if let Some(x) = proper_crossing(a, b) {
                splits[i].push(x);
            }
        });
    }
    // Net direction per undirected sub-edge: +1 for each copy running min → max.
    let mut net: HashMap<(Point, Point), i32> = HashMap::new();
    for (e, pts) in input.iter().zip(splits.iter_mut()) {
        let d = sub(e.p2, e.p1);
        pts.sort_by_key(|p| {
            let v = sub(*p, e.p1);
            v.0 * d.0 + v.1 * d.1
        });
        pts.dedup();
        for w in pts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a == b {
                continue;
            }
            let (key, dir) = if a < b { ((a, b), 1) } else { ((b, a), -1) };
            *net.entry(key).or_insert(0) += dir;
        }
    }
    let doubled: Vec<(Point2, Point2)> =
        input.iter().map(|e| (double(e.p1), double(e.p2))).collect();
    let rows = RowIndex::new(&doubled);
    let mut out = Vec::new();
    let mut keys: Vec<(&(Point, Point), &i32)> = net.iter().filter(|(_, n)| **n != 0).collect();
    keys.sort();
    for (&(a, b), &n) in keys {
        let m = (
            i128::from(a.x) + i128::from(b.x),
            i128::from(a.y) + i128::from(b.y),
        );
        let d = sub(b, a);
        let right = (d.1, -d.0);
        let w_right = winding_at(m, right, &doubled, &rows);
        let w_left = w_right + n;
        match (w_left > 0, w_right > 0) {
            (true, false) => out.push(Edge::new(a, b)),
            (false, true) => out.push(Edge::new(b, a)),
            _ => {}
        }
    }
    out
}

/// Chains interior-left edges into closed loops, turning right where several continue.
fn chain_loops(edges: &[Edge]) -> Vec<Vec<Point>> {
    let mut outgoing: HashMap<Point, Vec<usize>> = HashMap::new();
    for (i, e) in edges.iter().enumerate() {
        outgoing.entry(e.p1).or_default().push(i);
    }
    let mut used = vec![false; edges.len()];
    let mut loops = Vec::new();
    for start in 0..edges.len() {
        if used[start] {
            continue;
        }
        used[start] = true;
        let mut pts = vec![edges[start].p1];
        let mut cur = start;
        loop {
            let e = edges[cur];
            if e.p2 == edges[start].p1 && outgoing[&e.p2].iter().all(|&k| used[k]) {
                break;
            }
            let din = sub(e.p2, e.p1);
            let next = outgoing.get(&e.p2).and_then(|c| {
                c.iter().copied().filter(|&k| !used[k]).min_by(|&x, &y| {
                    let tx = turn(din, sub(edges[x].p2, edges[x].p1));
                    let ty = turn(din, sub(edges[y].p2, edges[y].p1));
                    tx.total_cmp(&ty).then(x.cmp(&y))
                })
            });
            match next {
                Some(k) => {
                    used[k] = true;
                    pts.push(e.p2);
                    cur = k;
                }
                None => break,
            }
        }
        loops.push(pts);
    }
    loops
}
