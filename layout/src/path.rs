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
    // Round caps replace the flat end edges; the first and last offsets of each side
    // are then dropped since the cap's outermost vertices lie beyond them.
    if round {
        left.pop();
        right.remove(0);
        right.pop();
        left.remove(0);
        out.clear();
        out.extend_from_slice(&left);
        arc(&mut out, spine[n - 1], half, dn);
        out.extend(right.iter().rev());
        arc(&mut out, spine[0], half, neg(d0));
    } else {
        out.extend(right.iter().rev());
    }
    out.reverse(); // left-forward, right-back is clockwise
    Some(out)
}

/// A single-vertex path: a square of the extensions (pointing along +x) or a circle.
fn single_point_outline(p: (f64, f64), half: f64, path: &Path) -> Option<Vec<(f64, f64)>> {
    match path.ends.extensions(path.width.abs()) {
        None => {
            let mut out = Vec::with_capacity(2 * ROUND_END_SEGMENTS);
            arc(&mut out, p, half, (1.0, 0.0));
            arc(&mut out, p, half, (-1.0, 0.0));
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

/// Appends a half-circle cap around `c` bulging towards the unit direction `out`, going
/// clockwise from the left side of `out` to its right side. Like KLayout, it uses
/// [`ROUND_END_SEGMENTS`] vertices at half-step angles on the circumscribed radius
/// `r / cos(π / 2n)`, so the cap's extreme points lie exactly at distance `r`.
fn arc(out: &mut Vec<(f64, f64)>, c: (f64, f64), r: f64, dir: (f64, f64)) {
    let n = ROUND_END_SEGMENTS as f64;
    let step = std::f64::consts::PI / n;
    let rc = r / (step / 2.0).cos();
    let left = normal(dir);
    for k in 0..ROUND_END_SEGMENTS {
        let phi = std::f64::consts::FRAC_PI_2 - (k as f64 + 0.5) * step;
        let (s, co) = phi.sin_cos();
        out.push((
            c.0 + rc * (dir.0 * co + left.0 * s),
            c.1 + rc * (dir.1 * co + left.1 * s),
        ));
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
        assert_eq!(round.points.len(), 32, "16 vertices per cap, as KLayout");
        // Body plus a 32-gon of circumradius r / cos(π/32); rounding each cap vertex to the
        // grid moves the area by at most half a dbu times the caps' perimeter (≈ 2πr).
        let a = round.signed_area2() as f64 / 2.0;
        let pi = std::f64::consts::PI;
        let rc = 500.0 / (pi / 32.0).cos();
        let expected = 1e7 + 16.0 * rc * rc * (pi / 16.0).sin();
        assert!(
            (a - expected).abs() < 0.5 * 2.0 * pi * 500.0,
            "{a} vs {expected}"
        );
        assert!(a > 1e7 + pi * 500.0 * 500.0, "caps enclose the circle");
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
