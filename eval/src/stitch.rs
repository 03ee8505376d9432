//! Joining the pieces of printed violations that ran past the edge of a tile's image
//! ([`crate::tile::Piece`]) into whole violations: pieces of one rule whose boxes touch
//! (within a tolerance: neighbouring tiles contour their own images, which agree to the
//! halo error, not to the bit) are one violation. Its marker is rebuilt from the pieces'
//! segments: they lie along the two edges of the pair, so they are split into the two
//! lines by their offset across the pair's direction, and each line becomes the segment
//! spanning its pieces.

use reticle_layout::{BBox, Point};

use crate::found::{Found, pm};
use crate::r3;
use crate::tile::Piece;

/// Union–find root with path halving.
fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn near(a: &BBox, b: &BBox, tol: i64) -> bool {
    a.left <= b.right + tol
        && b.left <= a.right + tol
        && a.bottom <= b.top + tol
        && b.bottom <= a.top + tol
}

/// Whole violations from `pieces` (any order): the result is sorted and does not depend on
/// the order of the input. `tol_dbu` is how far apart two pieces of one violation may be.
#[must_use]
pub fn join(pieces: &[Piece], dbu_nm: f64, tol_dbu: i64) -> Vec<Found> {
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by(|&a, &b| {
        let (p, q) = (&pieces[a], &pieces[b]);
        (p.rule, p.bbox, p.tile, &p.segments).cmp(&(q.rule, q.bbox, q.tile, &q.segments))
    });
    let sorted: Vec<&Piece> = order.iter().map(|&i| &pieces[i]).collect();
    let n = sorted.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for i in 0..n {
        for j in (i + 1)..n {
            if sorted[j].rule != sorted[i].rule {
                break;
            }
            // Sorted by box left within a rule: later pieces start further right.
            if sorted[j].bbox.left > sorted[i].bbox.right + tol_dbu {
                break;
            }
            if near(&sorted[i].bbox, &sorted[j].bbox, tol_dbu) {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<&Piece>> = Default::default();
    for (i, piece) in sorted.iter().enumerate() {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(piece);
    }
    let mut out: Vec<Found> = groups.values().map(|g| whole(g, dbu_nm)).collect();
    out.sort_by_key(|f| (f.rule, f.at_pm, f.bbox));
    out
}

/// One violation from its pieces.
fn whole(pieces: &[&Piece], dbu_nm: f64) -> Found {
    let bbox = pieces
        .iter()
        .map(|p| p.bbox)
        .reduce(|a, b| a.union(&b))
        .expect("a group has a piece");
    let measured = pieces
        .iter()
        .map(|p| p.measured)
        .fold(f64::INFINITY, f64::min);
    let segments: Vec<[i64; 4]> = pieces
        .iter()
        .flat_map(|p| p.segments.iter().copied())
        .collect();
    let (first, second) = two_lines(&segments);
    let nm = |p: Point| [r3(p.x as f64 * dbu_nm), r3(p.y as f64 * dbu_nm)];
    let at = (
        pm((bbox.left + bbox.right) as f64 / 2.0, dbu_nm),
        pm((bbox.bottom + bbox.top) as f64 / 2.0, dbu_nm),
    );
    Found {
        rule: pieces[0].rule,
        at_pm: at,
        bbox,
        measured: Some(r3(measured)),
        marker: crate::payload::Marker::EdgePair {
            first: [nm(first.0), nm(first.1)],
            second: [nm(second.0), nm(second.1)],
            joined_from_tiles: Some(pieces.iter().map(|p| p.tile.id()).collect()),
        },
    }
}

/// The two edges of a pair from the segments of its pieces: the direction of the longest
/// segment, the segments split at the largest gap in their offset across it, each side the
/// segment spanning its points along the direction (lower side first). One side only (the
/// other was outside every tile) gives that side twice.
fn two_lines(segments: &[[i64; 4]]) -> ((Point, Point), (Point, Point)) {
    let longest = segments
        .iter()
        .max_by_key(|s| (s[2] - s[0]).pow(2) + (s[3] - s[1]).pow(2))
        .copied()
        .unwrap_or([0; 4]);
    let (dx, dy) = (
        (longest[2] - longest[0]) as f64,
        (longest[3] - longest[1]) as f64,
    );
    let len = dx.hypot(dy);
    let (mut ux, mut uy) = if len > 0.0 {
        (dx / len, dy / len)
    } else {
        (1.0, 0.0)
    };
    // One direction for a line whichever way its segments run: pointing right, or up.
    if ux < 0.0 || (ux == 0.0 && uy < 0.0) {
        (ux, uy) = (-ux, -uy);
    }
    let across = |x: f64, y: f64| -uy * x + ux * y;
    let along = |x: f64, y: f64| ux * x + uy * y;
    let mut by_offset: Vec<(f64, [i64; 4])> = segments
        .iter()
        .map(|s| {
            (
                across((s[0] + s[2]) as f64 / 2.0, (s[1] + s[3]) as f64 / 2.0),
                *s,
            )
        })
        .collect();
    by_offset.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let split = (1..by_offset.len())
        .max_by(|&i, &j| {
            let gap = |k: usize| by_offset[k].0 - by_offset[k - 1].0;
            gap(i).total_cmp(&gap(j)).then(j.cmp(&i))
        })
        .filter(|&i| by_offset[i].0 - by_offset[i - 1].0 > 1.0)
        .unwrap_or(by_offset.len());
    let span = |part: &[(f64, [i64; 4])]| -> (Point, Point) {
        let mut points: Vec<Point> = part
            .iter()
            .flat_map(|(_, s)| [Point::new(s[0], s[1]), Point::new(s[2], s[3])])
            .collect();
        points.sort_by(|a, b| {
            along(a.x as f64, a.y as f64)
                .total_cmp(&along(b.x as f64, b.y as f64))
                .then(a.cmp(b))
        });
        (points[0], points[points.len() - 1])
    };
    let lower = span(&by_offset[..split]);
    let upper = if split < by_offset.len() {
        span(&by_offset[split..])
    } else {
        lower
    };
    (lower, upper)
}
