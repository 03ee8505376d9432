//! Printed shapes as polygons: marching squares at a level, sub-pixel.
//!
//! Samples sit at pixel centres; the field is treated as below the level outside the
//! grid, so every contour closes (at the clip border at the latest; a shape touching a
//! corner of the clip is chamfered there by half a pixel). Crossings are
//! placed by linear interpolation along cell edges; saddles are resolved by the cell
//! average. Outer boundaries come out counter-clockwise, holes clockwise, in layout nm.

use std::collections::HashMap;

use serde::Serialize;

use crate::Grid;
use crate::raster::PixelFrame;

/// One closed contour, first point not repeated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contour {
    /// Vertices `(x, y)` in nm.
    pub points: Vec<(f64, f64)>,
}

impl Contour {
    /// Signed area (nm²): positive for outer boundaries, negative for holes.
    #[must_use]
    pub fn signed_area(&self) -> f64 {
        let n = self.points.len();
        (0..n)
            .map(|i| {
                let (a, b) = (self.points[i], self.points[(i + 1) % n]);
                a.0 * b.1 - b.0 * a.1
            })
            .sum::<f64>()
            / 2.0
    }
}

/// Edge between two lattice samples, keyed by its lower-left sample and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct EdgeKey {
    x: i64,
    y: i64,
    vertical: bool,
}

/// Closed contours of `{v > level}`.
#[must_use]
pub fn contours(img: &Grid<f32>, level: f32, frame: &PixelFrame) -> Vec<Contour> {
    let (w, h) = (img.width as i64, img.height as i64);
    let value = |x: i64, y: i64| -> Option<f32> {
        (x >= 0 && y >= 0 && x < w && y < h).then(|| *img.at(x as usize, y as usize))
    };
    let inside = |x: i64, y: i64| value(x, y).is_some_and(|v| v > level);
    // Crossing position on an edge, in lattice coordinates.
    let crossing = |e: EdgeKey| -> (f64, f64) {
        let (bx, by) = if e.vertical {
            (e.x, e.y + 1)
        } else {
            (e.x + 1, e.y)
        };
        let t = match (value(e.x, e.y), value(bx, by)) {
            (Some(a), Some(b)) if a != b => f64::from((level - a) / (b - a)).clamp(0.0, 1.0),
            _ => 0.5, // one end outside the grid: the clip border, half a pixel out
        };
        if e.vertical {
            (e.x as f64, e.y as f64 + t)
        } else {
            (e.x as f64 + t, e.y as f64)
        }
    };
    let mut next: HashMap<EdgeKey, EdgeKey> = HashMap::new();
    for cy in -1..h {
        for cx in -1..w {
            // Corners counter-clockwise: (x,y), (x+1,y), (x+1,y+1), (x,y+1).
            let ins = [
                inside(cx, cy),
                inside(cx + 1, cy),
                inside(cx + 1, cy + 1),
                inside(cx, cy + 1),
            ];
            if ins.iter().all(|&b| b) || ins.iter().all(|&b| !b) {
                continue;
            }
            let edges = [
                EdgeKey {
                    x: cx,
                    y: cy,
                    vertical: false,
                },
                EdgeKey {
                    x: cx + 1,
                    y: cy,
                    vertical: true,
                },
                EdgeKey {
                    x: cx,
                    y: cy + 1,
                    vertical: false,
                },
                EdgeKey {
                    x: cx,
                    y: cy,
                    vertical: true,
                },
            ];
            // Crossings walking the cell boundary counter-clockwise.
            let mut leave = Vec::new(); // inside → outside
            let mut enter = Vec::new(); // outside → inside
            for i in 0..4 {
                match (ins[i], ins[(i + 1) % 4]) {
                    (true, false) => leave.push(i),
                    (false, true) => enter.push(i),
                    _ => {}
                }
            }
            let centre_inside = {
                let vals = [(cx, cy), (cx + 1, cy), (cx + 1, cy + 1), (cx, cy + 1)]
                    .map(|(x, y)| value(x, y).map_or(f32::NEG_INFINITY, |v| v));
                vals.iter().sum::<f32>() / 4.0 > level
            };
            for &l in &leave {
                // Segment from a leaving crossing to the entering crossing that keeps the
                // inside on its left: the next one CCW when the centre is inside, else the
                // previous one (they coincide when there are only two crossings).
                let pick = |step: usize| {
                    (1..4)
                        .map(|d| (l + step * d) % 4)
                        .find(|i| enter.contains(i))
                };
                let e = if centre_inside { pick(1) } else { pick(3) };
                if let Some(e) = e {
                    next.insert(edges[l], edges[e]);
                }
            }
        }
    }
    let to_nm = |(x, y): (f64, f64)| (frame.center_x(x), frame.center_y(y));
    let mut keys: Vec<EdgeKey> = next.keys().copied().collect();
    keys.sort_by_key(|k| (k.y, k.x, k.vertical));
    let mut out = Vec::new();
    for start in keys {
        if !next.contains_key(&start) {
            continue;
        }
        let mut pts = Vec::new();
        let mut cur = start;
        while let Some(n) = next.remove(&cur) {
            pts.push(to_nm(crossing(cur)));
            cur = n;
            if cur == start {
                break;
            }
        }
        if pts.len() >= 3 {
            out.push(Contour { points: pts });
        }
    }
    out
}
