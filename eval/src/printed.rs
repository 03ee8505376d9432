//! Printed contours as polygons: marching squares of the nominal aerial image at the resist
//! threshold, simplified, snapped to the dbu grid.

use reticle_kernel::contour::contours;
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::{Grid, LithoOutput};
use reticle_layout::observe::geometry::point_segment_distance;
use reticle_layout::{Point, Polygon};

use crate::window::ImagedWindow;

/// Douglas–Peucker tolerance (dbu) for printed contours before they are snapped to the
/// grid: marching squares plus rounding leave 1-dbu jogs whose opposite-facing micro-edges
/// would pair as false width/space markers along straight printed edges (D24).
pub const SIMPLIFY_DBU: f64 = 0.75;

/// Printed contours of `output`'s nominal corner, imaged on `imaged`'s frame, as integer
/// polygons (outer boundaries only); none when the nominal aerial image was not kept.
#[must_use]
pub fn printed_polygons(imaged: &ImagedWindow, output: &LithoOutput) -> Vec<Polygon> {
    let Some(aerial) = output.corners[0].aerial.as_ref() else {
        return Vec::new();
    };
    printed_polygons_of(aerial, &imaged.frame, imaged.resist.threshold)
}

/// Printed contours of `aerial` (placed by `frame`, dbu) at `level` as integer polygons
/// (outer boundaries only). Contours close along the image border (the field counts as
/// below the level outside it).
#[must_use]
pub fn printed_polygons_of(aerial: &Grid<f32>, frame: &PixelFrame, level: f32) -> Vec<Polygon> {
    contours(aerial, level, frame)
        .into_iter()
        .filter(|c| c.signed_area() > 0.0)
        .filter_map(|c| {
            let simplified = simplify_closed(&c.points, SIMPLIFY_DBU);
            let mut points: Vec<Point> = Vec::with_capacity(simplified.len());
            for (x, y) in simplified {
                let p = Point::new(x.round() as i64, y.round() as i64);
                if points.last() != Some(&p) {
                    points.push(p);
                }
            }
            while points.len() > 1 && points.first() == points.last() {
                points.pop();
            }
            (points.len() >= 3).then(|| Polygon::new(points))
        })
        .collect()
}

/// Douglas–Peucker on the open chain `pts[first..=last]`; pushes kept interior indices.
fn simplify_chain(pts: &[(f64, f64)], first: usize, last: usize, eps: f64, keep: &mut Vec<usize>) {
    if last <= first + 1 {
        return;
    }
    let (mut worst, mut at) = (0.0, first);
    for i in (first + 1)..last {
        let d = point_segment_distance(pts[i], pts[first], pts[last]);
        if d > worst {
            (worst, at) = (d, i);
        }
    }
    if worst > eps {
        simplify_chain(pts, first, at, eps, keep);
        keep.push(at);
        simplify_chain(pts, at, last, eps, keep);
    }
}

/// A closed contour simplified within `eps`: split at the first point and the point
/// farthest from it, each half simplified (deterministic). The `geo` crate's
/// Ramer–Douglas–Peucker treats a ring as one open chain from its first point, which keeps
/// other vertices; the report's markers depend on these exact ones.
#[must_use]
pub fn simplify_closed(points: &[(f64, f64)], eps: f64) -> Vec<(f64, f64)> {
    let n = points.len();
    if n < 4 {
        return points.to_vec();
    }
    let far = (1..n)
        .max_by(|&i, &j| {
            let d = |k: usize| {
                (points[k].0 - points[0].0).powi(2) + (points[k].1 - points[0].1).powi(2)
            };
            d(i).total_cmp(&d(j)).then(j.cmp(&i))
        })
        .unwrap_or(1);
    let mut ring: Vec<(f64, f64)> = points.to_vec();
    ring.push(points[0]);
    let mut keep = vec![0];
    simplify_chain(&ring, 0, far, eps, &mut keep);
    keep.push(far);
    simplify_chain(&ring, far, n, eps, &mut keep);
    keep.into_iter().map(|i| ring[i]).collect()
}
