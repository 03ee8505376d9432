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
