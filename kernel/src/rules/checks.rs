//! Width, space, notch, enclosure and area checks on merged regions (dbu in, dbu out).

use reticle_layout::BBox;

use super::deck::Metric;
use super::geom::Edge;
use super::index::GridIndex;
use super::region::{MergedPolygon, Region};
use super::relation::{Limit, check_pair, segment_distance};

/// One edge-pair hit in dbu, edges in their region orientation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgePairHit {
    /// Near part of the first edge.
    pub first: Edge,
    /// Near part of the second edge.
    pub second: Edge,
    /// Euclidean distance between the two parts (dbu).
    pub distance: f64,
}

impl EdgePairHit {
    /// Bounding box of both parts.
    #[must_use]
    pub fn bbox(&self) -> BBox {
        self.first.bbox().union(&self.second.bbox())
    }
}

/// Which pairs of a single region are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pairs {
    /// Interior side, same polygon (width: KLayout checks each merged polygon on its own,
    /// so two polygons never give a width marker, even when their interiors face each
    /// other corner to corner).
    Interior,
    /// Exterior side, any polygons (space).
    Exterior,
    /// Exterior side, same polygon (notch).
    ExteriorSamePolygon,
}

fn margin(d: f64) -> i64 {
    d.ceil() as i64 + 1
}

fn grow(b: BBox, m: i64) -> BBox {
    BBox {
        left: b.left - m,
        bottom: b.bottom - m,
        right: b.right + m,
        top: b.top + m,
    }
}

fn self_pairs(region: &Region, d: f64, metric: Metric, pairs: Pairs) -> Vec<EdgePairHit> {
    let edges = region.edges();
    let lim = Limit::new(d);
    let m = margin(d);
    let boxes: Vec<BBox> = edges.iter().map(|e| e.edge.bbox()).collect();
    let cell = GridIndex::suggested_cell(&boxes, 2 * m);
    let index = GridIndex::new(boxes, cell);
    let mut stamp = vec![u32::MAX; index.len()];
    let mut out = Vec::new();
    for (i, a) in edges.iter().enumerate() {
        index.query(grow(a.edge.bbox(), m), &mut stamp, i as u32, |j| {
            let j = j as usize;
            if j <= i {
                return;
            }
            let b = &edges[j];
            let hit = match pairs {
                Pairs::Interior | Pairs::ExteriorSamePolygon if a.polygon != b.polygon => None,
                Pairs::Interior => check_pair(a.edge, b.edge, lim, metric),
                Pairs::Exterior | Pairs::ExteriorSamePolygon => {
                    check_pair(a.edge.reversed(), b.edge.reversed(), lim, metric)
                        .map(|(x, y)| (x.reversed(), y.reversed()))
                }
            };
            if let Some((first, second)) = hit {
                out.push(EdgePairHit {
                    first,
                    second,
                    distance: segment_distance(first, second),
                });
            }
        });
    }
    out
}

/// Width: interior edge pairs of the same polygon closer than `d` dbu.
#[must_use]
pub fn width(region: &Region, d: f64, metric: Metric) -> Vec<EdgePairHit> {
    self_pairs(region, d, metric, Pairs::Interior)
}

/// Space: exterior edge pairs closer than `d` dbu, within one polygon or between two
/// (KLayout's `space`: notches included).
#[must_use]
pub fn space(region: &Region, d: f64, metric: Metric) -> Vec<EdgePairHit> {
    self_pairs(region, d, metric, Pairs::Exterior)
}

/// Notch: exterior edge pairs of the same polygon closer than `d` dbu.
#[must_use]
pub fn notch(region: &Region, d: f64, metric: Metric) -> Vec<EdgePairHit> {
    self_pairs(region, d, metric, Pairs::ExteriorSamePolygon)
}

/// Enclosure: edges of `inner` that lie inside `outer` closer than `d` dbu to an edge of
/// `outer` (KLayout's `outer.enclosing(inner, d)`). The first edge of each hit is the
/// outer one. Inner shapes not covered by `outer` at all are not reported here.
#[must_use]
pub fn enclosure(inner: &Region, outer: &Region, d: f64, metric: Metric) -> Vec<EdgePairHit> {
    let lim = Limit::new(d);
    let m = margin(d);
    let boxes: Vec<BBox> = inner.edges().iter().map(|e| e.edge.bbox()).collect();
    let cell = GridIndex::suggested_cell(&boxes, 2 * m);
    let index = GridIndex::new(boxes, cell);
    let mut stamp = vec![u32::MAX; index.len()];
    let mut out = Vec::new();
    for (i, a) in outer.edges().iter().enumerate() {
        index.query(grow(a.edge.bbox(), m), &mut stamp, i as u32, |j| {
            let b = inner.edges()[j as usize].edge;
            // The inner edge must be on the outer edge's interior (left) side and the outer
            // edge on the inner edge's exterior (right) side.
            if let Some((first, second)) = check_pair(a.edge, b.reversed(), lim, metric) {
                let second = second.reversed();
                out.push(EdgePairHit {
                    first,
                    second,
                    distance: segment_distance(first, second),
                });
            }
        });
    }
    out
}

/// Polygons whose area (hull minus holes, dbu²) is below `min_area`.
#[must_use]
pub fn small_areas(region: &Region, min_area: f64) -> Vec<&MergedPolygon> {
    region
        .polygons()
        .iter()
        .filter(|p| (p.area2 as f64) < 2.0 * min_area)
        .collect()
}
