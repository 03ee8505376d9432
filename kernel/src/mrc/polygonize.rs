//! A binary mask as polygons: pixel boundaries traced into loops (hulls counter-clockwise,
//! holes clockwise, 4-connected components), optionally simplified into curvilinear
//! loops (Douglas–Peucker on the staircase corners, vertices kept on the pixel grid), and
//! each component written as one polygon, its holes joined to the hull by cut lines
//! (the GDSII convention for holes).

use std::collections::HashMap;

use reticle_layout::{Point, Polygon};

use crate::Grid;

/// Pixels `[x0, x1) × [y0, y1)`.
pub type PixelBox = (usize, usize, usize, usize);

/// A vertex in pixel-corner coordinates.
type Vertex = (i64, i64);

/// A closed loop of vertices.
type Ring = Vec<Vertex>;

/// A component's hull and holes.
pub type HullAndHoles = (Ring, Vec<Ring>);

/// One traced loop in pixel-corner coordinates, with its component label.
#[derive(Debug, Clone)]
pub struct Loop {
    pub points: Vec<(i64, i64)>,
    pub(super) component: u32,
}

/// Twice the signed area of a loop (positive: counter-clockwise).
pub fn area2(points: &[(i64, i64)]) -> i128 {
    let n = points.len();
    (0..n)
        .map(|i| {
            let (a, b) = (points[i], points[(i + 1) % n]);
            i128::from(a.0) * i128::from(b.1) - i128::from(b.0) * i128::from(a.1)
        })
        .sum()
}

/// Traces the boundaries of the set pixels of `mask` inside `window` (outside it counts
/// as unset), interior on the left; collinear unit steps merged. `labels` are the
/// 4-connected component labels of `mask` (as [`super::morph::components`] gives).
pub fn trace(mask: &Grid<u8>, window: PixelBox, labels: &[u32]) -> Vec<Loop> {
    let (x0, y0, x1, y1) = window;
    let w = mask.width;
    let set = |x: i64, y: i64| -> bool {
        x >= x0 as i64
            && y >= y0 as i64
            && x < x1 as i64
            && y < y1 as i64
            && *mask.at(x as usize, y as usize) != 0
    };
    // Outgoing unit steps (dx, dy) and the component on their left, per vertex.
    let mut out: HashMap<Vertex, Vec<(i64, i64, u32)>> = HashMap::new();
    let label = |x: i64, y: i64| labels[y as usize * w + x as usize];
    for y in y0 as i64..=y1 as i64 {
        for x in x0 as i64..x1 as i64 {
            let (above, below) = (set(x, y), set(x, y - 1));
            if above && !below {
                out.entry((x, y)).or_default().push((1, 0, label(x, y)));
            } else if below && !above {
                out.entry((x + 1, y))
                    .or_default()
                    .push((-1, 0, label(x, y - 1)));
            }
        }
    }
    for x in x0 as i64..=x1 as i64 {
        for y in y0 as i64..y1 as i64 {
            let (right, left) = (set(x, y), set(x - 1, y));
            if left && !right {
                out.entry((x, y)).or_default().push((0, 1, label(x - 1, y)));
            } else if right && !left {
                out.entry((x, y + 1))
                    .or_default()
                    .push((0, -1, label(x, y)));
            }
        }
    }
    let mut starts: Vec<(i64, i64)> = out.keys().copied().collect();
    starts.sort_unstable();
    let mut loops = Vec::new();
    for start in starts {
        while let Some(first) = out.get_mut(&start).and_then(Vec::pop) {
            let component = first.2;
            let mut pts = vec![start];
            let mut dir = (first.0, first.1);
            let mut at = (start.0 + dir.0, start.1 + dir.1);
            while at != start {
                let cands = out.get_mut(&at).expect("a traced loop is closed");
                // Prefer a left turn, then straight, then right: 4-connected loops.
                let left = (-dir.1, dir.0);
                let pick = [left, dir, (dir.1, -dir.0)]
                    .iter()
                    .find_map(|d| cands.iter().position(|c| (c.0, c.1) == *d))
                    .expect("a boundary vertex has an outgoing edge");
                let next = cands.swap_remove(pick);
                let nd = (next.0, next.1);
                if nd != dir {
                    pts.push(at);
                }
                dir = nd;
                at = (at.0 + dir.0, at.1 + dir.1);
            }
            // Close: drop the start if it is collinear.
            if pts.len() >= 3 {
                let n = pts.len();
                let (a, b, c) = (pts[n - 1], pts[0], pts[1]);
                if (b.0 - a.0) * (c.1 - b.1) == (b.1 - a.1) * (c.0 - b.0) {
                    pts.remove(0);
                }
            }
            if pts.len() >= 4 {
                loops.push(Loop {
                    points: pts,
                    component,
                });
            }
        }
    }
    loops
}

pub fn dist2_to_segment(p: (i64, i64), a: (i64, i64), b: (i64, i64)) -> f64 {
    let (px, py) = (p.0 as f64, p.1 as f64);
    let (ax, ay) = (a.0 as f64, a.1 as f64);
    let (dx, dy) = (b.0 as f64 - ax, b.1 as f64 - ay);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((px - ax) * dx + (py - ay) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (ex, ey) = (ax + t * dx - px, ay + t * dy - py);
    ex * ex + ey * ey
}

/// Douglas–Peucker on the open chain `pts[a..=b]`, marking kept vertices.
fn dp(pts: &[(i64, i64)], a: usize, b: usize, tol2: f64, keep: &mut [bool]) {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        if b <= a + 1 {
            continue;
        }
        let (mut worst, mut at) = (-1.0, a);
        for i in a + 1..b {
            let d = dist2_to_segment(pts[i], pts[a], pts[b]);
            if d > worst {
                (worst, at) = (d, i);
            }
        }
        if worst > tol2 {
            keep[at] = true;
            stack.push((a, at));
            stack.push((at, b));
        }
    }
}

/// Simplifies a closed loop: vertices where `anchor` holds are kept, and so is every
/// vertex needed to stay within `tolerance` of the staircase. A loop with no anchor is
/// anchored at its first vertex and the vertex farthest from it.
pub fn simplify(
    points: &[(i64, i64)],
    tolerance: f64,
    anchor: impl Fn((i64, i64)) -> bool,
) -> Vec<(i64, i64)> {
    let n = points.len();
    if n <= 4 {
        return points.to_vec();
    }
    let mut keep: Vec<bool> = points.iter().map(|&p| anchor(p)).collect();
    let anchors: Vec<usize> = (0..n).filter(|&i| keep[i]).collect();
    let anchors = if anchors.len() >= 2 {
        anchors
    } else {
        let first = anchors.first().copied().unwrap_or(0);
        let far = (0..n)
            .max_by_key(|&i| {
                let (dx, dy) = (points[i].0 - points[first].0, points[i].1 - points[first].1);
                (dx * dx + dy * dy, std::cmp::Reverse(i))
            })
            .unwrap_or(0);
        keep[first] = true;
        keep[far] = true;
        let mut v = vec![first, far];
        v.sort_unstable();
        v
    };
    // Unroll once so that every chain between consecutive anchors is contiguous.
    let unrolled: Vec<(i64, i64)> = points.iter().chain(points.iter()).copied().collect();
    let mut keep2 = vec![false; 2 * n];
    let tol2 = tolerance * tolerance;
    for (k, &a) in anchors.iter().enumerate() {
        let b = if k + 1 < anchors.len() {
            anchors[k + 1]
        } else {
            anchors[0] + n
        };
        dp(&unrolled, a, b, tol2, &mut keep2);
    }
    for i in 0..2 * n {
        if keep2[i] {
            keep[i % n] = true;
        }
    }
    let mut out: Vec<(i64, i64)> = (0..n).filter(|&i| keep[i]).map(|i| points[i]).collect();
    // Drop collinear vertices that are not anchors.
    let mut changed = true;
    while changed && out.len() > 3 {
        changed = false;
        let m = out.len();
        for i in 0..m {
            let (a, b, c) = (out[(i + m - 1) % m], out[i], out[(i + 1) % m]);
            if (b.0 - a.0) * (c.1 - b.1) == (b.1 - a.1) * (c.0 - b.0) && !anchor(b) {
                out.remove(i);
                changed = true;
                break;
            }
        }
    }
    out
}

fn cross(o: (i64, i64), a: (i64, i64), b: (i64, i64)) -> i128 {
    i128::from(a.0 - o.0) * i128::from(b.1 - o.1) - i128::from(a.1 - o.1) * i128::from(b.0 - o.0)
}

/// Whether segments `p–q` and `a–b` share any point other than a common endpoint.
fn segments_meet(p: (i64, i64), q: (i64, i64), a: (i64, i64), b: (i64, i64)) -> bool {
    let shared = [p, q].iter().filter(|v| **v == a || **v == b).count();
    let (d1, d2) = (cross(p, q, a), cross(p, q, b));
    let (d3, d4) = (cross(a, b, p), cross(a, b, q));
    if shared > 0 {
        // Only collinear overlap beyond the shared endpoint counts.
        if d1 == 0 && d2 == 0 {
            let on = |s: (i64, i64), e: (i64, i64), t: (i64, i64)| {
                t != s
                    && t != e
                    && t.0 >= s.0.min(e.0)
                    && t.0 <= s.0.max(e.0)
                    && t.1 >= s.1.min(e.1)
                    && t.1 <= s.1.max(e.1)
            };
            return on(p, q, a) || on(p, q, b) || on(a, b, p) || on(a, b, q);
        }
        return false;
    }
    if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
        return true;
    }
    let on = |s: (i64, i64), e: (i64, i64), t: (i64, i64)| {
        t.0 >= s.0.min(e.0) && t.0 <= s.0.max(e.0) && t.1 >= s.1.min(e.1) && t.1 <= s.1.max(e.1)
    };
    (d1 == 0 && on(p, q, a))
        || (d2 == 0 && on(p, q, b))
        || (d3 == 0 && on(a, b, p))
        || (d4 == 0 && on(a, b, q))
}

/// Point strictly inside a loop (even-odd; `2×` coordinates so a midpoint is exact).
fn inside2(loop_: &[(i64, i64)], p2: (i64, i64)) -> bool {
    let n = loop_.len();
    let mut inside = false;
    for i in 0..n {
        let (a, b) = (loop_[i], loop_[(i + 1) % n]);
        let (a, b) = ((2 * a.0, 2 * a.1), (2 * b.0, 2 * b.1));
        if (a.1 > p2.1) != (b.1 > p2.1) {
            let x = a.0 as f64 + (p2.1 - a.1) as f64 * (b.0 - a.0) as f64 / (b.1 - a.1) as f64;
            if (p2.0 as f64) < x {
                inside = !inside;
            }
        }
    }
    inside
}

/// Joins each hole to the outer loop by a cut line between two vertices that see each
/// other, so that the component is one polygon. Holes that cannot be joined are
/// returned as they are (the caller counts them).
pub fn keyhole(hull: Vec<(i64, i64)>, holes: Vec<Vec<(i64, i64)>>) -> HullAndHoles {
    let mut outer = hull;
    let mut pending = holes;
    // Holes with the largest x first (any order works; this one keeps cuts short).
    pending.sort_by_key(|h| std::cmp::Reverse(h.iter().map(|p| p.0).max().unwrap_or(0)));
    let mut failed = Vec::new();
    let mut remaining: Vec<Vec<(i64, i64)>> = pending.clone();
    for hole in pending {
        remaining.remove(0);
        let hi = (0..hole.len())
            .max_by_key(|&i| (hole[i].0, hole[i].1))
            .unwrap_or(0);
        let h = hole[hi];
        let mut cands: Vec<usize> = (0..outer.len()).collect();
        cands.sort_by_key(|&i| {
            let (dx, dy) = (outer[i].0 - h.0, outer[i].1 - h.1);
            (dx * dx + dy * dy, i)
        });
        let edges_of = |l: &[(i64, i64)]| -> Vec<((i64, i64), (i64, i64))> {
            (0..l.len()).map(|i| (l[i], l[(i + 1) % l.len()])).collect()
        };
        let mut all_edges = edges_of(&outer);
        all_edges.extend(edges_of(&hole));
        for r in &remaining {
            all_edges.extend(edges_of(r));
        }
        let found = cands.into_iter().take(256).find(|&oi| {
            let v = outer[oi];
            if v == h {
                return false;
            }
            let mid2 = (h.0 + v.0, h.1 + v.1);
            inside2(&outer, mid2)
                && !inside2(&hole, mid2)
                && !remaining.iter().any(|r| inside2(r, mid2))
                && !all_edges.iter().any(|&(a, b)| segments_meet(h, v, a, b))
        });
        match found {
            Some(oi) => {
                let mut joined = Vec::with_capacity(outer.len() + hole.len() + 2);
                joined.extend_from_slice(&outer[..=oi]);
                joined.extend(hole[hi..].iter().chain(hole[..hi].iter()).copied());
                joined.push(h);
                joined.extend_from_slice(&outer[oi..]);
                outer = joined;
            }
            None => failed.push(hole),
        }
    }
    (outer, failed)
}

/// The traced loops of one component: its hull (counter-clockwise, the largest) and holes.
pub fn group(loops: Vec<Loop>) -> Vec<HullAndHoles> {
    let mut by: std::collections::BTreeMap<u32, (Option<Ring>, Vec<Ring>)> =
        std::collections::BTreeMap::new();
    for l in loops {
        let e = by.entry(l.component).or_default();
        if area2(&l.points) > 0 {
            // A component has one outer loop when traced 4-connected; keep the largest.
            match &e.0 {
                Some(h) if area2(h) >= area2(&l.points) => e.1.push(l.points),
                _ => {
                    if let Some(old) = e.0.replace(l.points) {
                        e.1.push(old);
                    }
                }
            }
        } else {
            e.1.push(l.points);
        }
    }
    by.into_values()
        .filter_map(|(h, holes)| h.map(|h| (h, holes)))
        .collect()
}

/// Loop vertices (pixel corners) as a polygon in the frame's dbu: `x ↦ left + x·pixel`.
pub(super) fn to_dbu(points: &[(i64, i64)], left: f64, bottom: f64, pixel: f64) -> Polygon {
    Polygon::new(
        points
            .iter()
            .map(|&(x, y)| {
                Point::new(
                    (left + x as f64 * pixel).round() as i64,
                    (bottom + y as f64 * pixel).round() as i64,
                )
            })
            .collect(),
    )
}
