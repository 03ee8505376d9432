//! Geometry on the mask layer outside the region: a shape placed by a map, minus the
//! region, as shapes of the top cell.

use crate::clip::clip_polygon;
use crate::geom::{BBox, Point, Polygon};
use crate::model::Shape;
use crate::transform::{Affine, CoordinateOverflow};

/// The four closed half-planes and slabs whose union is the plane minus the open region:
/// left of it, right of it, and below and above it between its sides. Clipping to each
/// never creates a hole, so `polygon ∖ region` is a list of simple polygons even when the
/// polygon surrounds the region.
pub(super) fn outside_pieces(region: &BBox) -> [BBox; 4] {
    let (lo, hi) = (i64::MIN, i64::MAX);
    [
        BBox {
            left: lo,
            bottom: lo,
            right: region.left,
            top: hi,
        },
        BBox {
            left: region.right,
            bottom: lo,
            right: hi,
            top: hi,
        },
        BBox {
            left: region.left,
            bottom: lo,
            right: region.right,
            top: region.bottom,
        },
        BBox {
            left: region.left,
            bottom: region.top,
            right: region.right,
            top: hi,
        },
    ]
}

/// Intersection of two boxes with positive area.
pub(super) fn box_meet(a: &BBox, b: &BBox) -> Option<BBox> {
    let m = BBox {
        left: a.left.max(b.left),
        bottom: a.bottom.max(b.bottom),
        right: a.right.min(b.right),
        top: a.top.min(b.top),
    };
    (m.left < m.right && m.bottom < m.top).then_some(m)
}

/// `shape` (a polygon, box or path; texts give nothing) placed by `m` and cut to the
/// outside of `region`, pushed onto `out`. The vertices are those [`crate::flatten()`] gives
/// the shape (paths: the outline rounded in the cell, then placed). A box under a Manhattan
/// map stays a box (pieces of it too); a shape clear of the region is kept whole.
///
/// # Errors
/// [`CoordinateOverflow`] when a placed vertex leaves the coordinate range.
pub fn placed_outside(
    shape: &Shape,
    m: &Affine,
    region: &BBox,
    out: &mut Vec<Shape>,
) -> Result<(), CoordinateOverflow> {
    let poly = match shape {
        Shape::Text(_) => return Ok(()),
        Shape::Box(b) => {
            let corners = [
                Point::new(b.left, b.bottom),
                Point::new(b.right, b.bottom),
                Point::new(b.right, b.top),
                Point::new(b.left, b.top),
            ];
            let pts = m.apply_all(corners.into_iter())?;
            if m.is_manhattan() && m.is_integral() {
                let placed = BBox::from_corners(pts[0], pts[2]);
                if placed.width() == 0 || placed.height() == 0 {
                    return Ok(());
                }
                if placed.overlaps(region) {
                    for piece in outside_pieces(region) {
                        if let Some(b) = box_meet(&placed, &piece) {
                            out.push(Shape::Box(b));
                        }
                    }
                } else {
                    out.push(Shape::Box(placed));
                }
                return Ok(());
            }
            Polygon::new(pts)
        }
        Shape::Polygon(p) => Polygon::new(m.apply_all(p.points.iter().copied())?),
        Shape::Path(p) => match p.to_polygon() {
            Some(outline) => Polygon::new(m.apply_all(outline.points.into_iter())?),
            None => return Ok(()),
        },
    };
    let Some(bb) = poly.bbox() else {
        return Ok(());
    };
    if bb.overlaps(region) {
        for piece in outside_pieces(region) {
            if let Some(p) = clip_polygon(&poly, &piece) {
                out.push(Shape::Polygon(p));
            }
        }
    } else if poly.points.len() >= 3 && poly.signed_area2() != 0 {
        out.push(Shape::Polygon(poly));
    }
    Ok(())
}
