//! Path (wire) outline: mitred joins and the four GDSII end styles.

use crate::model::{Path, PathEnds};

/// Segments used for a half circle when approximating round path ends.
pub const ROUND_END_SEGMENTS: usize = 16;

/// The outline of `path` as real-valued vertices, counter-clockwise. `None` for a
/// zero-width path, or a single-vertex path with flush ends.
#[must_use]
pub fn path_outline(path: &Path) -> Option<Vec<(f64, f64)>> {
    let half = (path.width as f64).abs() / 2.0;
    if half == 0.0 {
        return None;
    }
    let mut spine: Vec<(f64, f64)> = Vec::with_capacity(path.spine.len());
    for p in &path.spine {
        let q = (p.x as f64, p.y as f64);
        if spine.last() != Some(&q) {
            spine.push(q);
        }
    }
    let first = *spine.first()?;
    if spine.len() == 1 {
        return single_point_outline(first, half, path);
    }
    let dirs: Vec<(f64, f64)> = spine
        .windows(2)
        .map(|w| unit((w[1].0 - w[0].0, w[1].1 - w[0].1)))
        .collect();
    let (begin_ext, end_ext) = path
        .ends
        .extensions(path.width.abs())
        .map_or((0.0, 0.0), |(b, e)| (b as f64, e as f64));
    let n = spine.len();
    let (d0, dn) = (dirs[0], dirs[n - 2]);
    spine[0] = (spine[0].0 - d0.0 * begin_ext, spine[0].1 - d0.1 * begin_ext);
    spine[n - 1] = (
        spine[n - 1].0 + dn.0 * end_ext,
        spine[n - 1].1 + dn.1 * end_ext,
    );

    // Offset of each vertex to the left of the direction of travel.
    let mut left: Vec<(f64, f64)> = Vec::with_capacity(n + 2);
    let mut right: Vec<(f64, f64)> = Vec::with_capacity(n + 2);
    for i in 0..n {
        let p = spine[i];
        let n_in = if i > 0 {
            normal(dirs[i - 1])
        } else {
            normal(dirs[0])
        };
        let n_out = if i + 1 < n { normal(dirs[i]) } else { n_in };
        let dot = n_in.0 * n_out.0 + n_in.1 * n_out.1;
        if 1.0 + dot < 1e-9 {
            // The path doubles back on itself: square off the turn (bevel).
            left.push((p.0 + half * n_in.0, p.1 + half * n_in.1));
            left.push((p.0 + half * n_out.0, p.1 + half * n_out.1));
            right.push((p.0 - half * n_in.0, p.1 - half * n_in.1));
            right.push((p.0 - half * n_out.0, p.1 - half * n_out.1));
        } else {
            // Mitre point: p + half · (n_in + n_out) / (1 + n_in·n_out).
            let k = half / (1.0 + dot);
            let m = ((n_in.0 + n_out.0) * k, (n_in.1 + n_out.1) * k);
            left.push((p.0 + m.0, p.1 + m.1));
            right.push((p.0 - m.0, p.1 - m.1));
        }
    }
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(2 * n + 2 * ROUND_END_SEGMENTS + 4);
    out.extend_from_slice(&left);
    let round = matches!(path.ends, PathEnds::Round);
    if round {
        arc(&mut out, spine[n - 1], half, normal(dn));
    }
    out.extend(right.iter().rev());
    if round {
        arc(&mut out, spine[0], half, neg(normal(d0)));
    }
    out.reverse(); // left-forward, right-back is clockwise
    Some(out)
}

/// A single-vertex path: a square of the extensions (pointing along +x) or a circle.
fn single_point_outline(p: (f64, f64), half: f64, path: &Path) -> Option<Vec<(f64, f64)>> {
    match path.ends.extensions(path.width.abs()) {
        None => {
            let mut out = Vec::with_capacity(2 * ROUND_END_SEGMENTS + 2);
            arc(&mut out, p, half, (0.0, 1.0));
            out.pop();
            arc(&mut out, p, half, (0.0, -1.0));
            out.pop();
            out.reverse();
            Some(out)
        }
        Some((b, e)) if b + e > 0 => {
            let (x0, x1) = (p.0 - b as f64, p.0 + e as f64);
            Some(vec![
                (x0, p.1 - half),
                (x1, p.1 - half),
                (x1, p.1 + half),
                (x0, p.1 + half),
            ])
        }
        Some(_) => None,
    }
}

/// Appends a clockwise half circle around `c` starting at `c + r·from` (included) and
/// ending at `c - r·from` (included).
fn arc(out: &mut Vec<(f64, f64)>, c: (f64, f64), r: f64, from: (f64, f64)) {
    let start = from.1.atan2(from.0);
    for k in 0..=ROUND_END_SEGMENTS {
        let a = start - std::f64::consts::PI * k as f64 / ROUND_END_SEGMENTS as f64;
        out.push((c.0 + r * a.cos(), c.1 + r * a.sin()));
    }
}

fn unit(d: (f64, f64)) -> (f64, f64) {
    let len = d.0.hypot(d.1);
    (d.0 / len, d.1 / len)
}

const fn normal(d: (f64, f64)) -> (f64, f64) {
    (-d.1, d.0)
}

const fn neg(d: (f64, f64)) -> (f64, f64) {
    (-d.0, -d.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::{BBox, Point, Polygon};

    fn path(pts: &[(i64, i64)], width: i64, ends: PathEnds) -> Path {
        Path {
            spine: pts.iter().map(|&(x, y)| Point::new(x, y)).collect(),
            width,
            ends,
        }
    }

    #[test]
    fn straight_path_end_styles() {
        let flush = path(&[(0, 0), (100, 0)], 10, PathEnds::Flush).to_polygon();
        let flush = flush.expect("outline");
        assert_eq!(
            flush.bbox(),
            Some(BBox::from_corners(Point::new(0, -5), Point::new(100, 5)))
        );
        assert_eq!(flush.signed_area2(), 2 * 1000);
        let ext = path(&[(0, 0), (100, 0)], 10, PathEnds::HalfWidth).to_polygon();
        assert_eq!(
            ext.and_then(|p| p.bbox()),
            Some(BBox::from_corners(Point::new(-5, -5), Point::new(105, 5)))
        );
        let var = path(
            &[(0, 0), (0, 100)],
            10,
            PathEnds::Variable { begin: 3, end: -7 },
        )
        .to_polygon();
        assert_eq!(
            var.and_then(|p| p.bbox()),
            Some(BBox::from_corners(Point::new(-5, -3), Point::new(5, 93)))
        );
        let round = path(&[(0, 0), (10_000, 0)], 1000, PathEnds::Round)
            .to_polygon()
            .expect("outline");
        assert_eq!(
            round.bbox(),
            Some(BBox::from_corners(
                Point::new(-500, -500),
                Point::new(10_500, 500)
            ))
        );
        // Body plus an inscribed 32-gon: between 99% of that 32-gon and the true circle.
        let a = round.signed_area2() as f64 / 2.0;
        let r2 = 500.0 * 500.0;
        let inscribed = 16.0 * r2 * (std::f64::consts::PI / 16.0).sin();
        let circle = std::f64::consts::PI * r2;
        assert!(a > 1e7 + 0.99 * inscribed && a < 1e7 + circle, "{a}");
    }

    #[test]
    fn l_bend_is_mitred() {
        let p = path(&[(0, 0), (100, 0), (100, 100)], 10, PathEnds::Flush)
            .to_polygon()
            .expect("outline");
        let mut pts = p.points.clone();
        pts.sort();
        let expect: Vec<Point> = [(0, -5), (0, 5), (95, 5), (95, 100), (105, -5), (105, 100)]
            .iter()
            .map(|&(x, y)| Point::new(x, y))
            .collect();
        assert_eq!(pts, expect);
        assert!(p.signed_area2() > 0, "counter-clockwise");
        assert_eq!(p.signed_area2(), 2 * (105 * 10 + 95 * 10));
    }

    #[test]
    fn degenerate_paths() {
        assert_eq!(
            path(&[(0, 0), (10, 0)], 0, PathEnds::Flush).to_polygon(),
            None
        );
        assert_eq!(
            path(&[(5, 5), (5, 5)], 4, PathEnds::Flush).to_polygon(),
            None
        );
        let sq = path(&[(5, 5)], 4, PathEnds::HalfWidth).to_polygon();
        assert_eq!(
            sq,
            Some(Polygon::rect(BBox::from_corners(
                Point::new(3, 3),
                Point::new(7, 7)
            )))
        );
        assert_eq!(path(&[], 4, PathEnds::HalfWidth).to_polygon(), None);
    }
}
