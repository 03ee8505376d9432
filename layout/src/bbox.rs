//! Hierarchical bounding boxes with KLayout's semantics.
//!
//! A cell's box is the union of its shapes' boxes and of each placement's *transformed child
//! box*: the four corners of the child's box, transformed and rounded to the grid, boxed
//! again. Under arbitrary rotations this is larger than the tight box of the flattened
//! geometry, and it is what KLayout (and therefore seed 003's `bbox_um`) reports.

use crate::flatten::FlattenError;
use crate::geom::{BBox, Point};
use crate::model::{LayerKey, Library, Repetition};

/// The box of every cell (index-aligned with `lib.cells`); `None` for cells with nothing in
/// them. With `layer`, only shapes on that layer count (KLayout's `bbox_per_layer`).
///
/// # Errors
/// [`FlattenError::Hierarchy`] for a dangling reference or cycle,
/// [`FlattenError::Coordinate`] when a box leaves the coordinate range.
pub fn cell_bboxes(
    lib: &Library,
    layer: Option<LayerKey>,
) -> Result<Vec<Option<BBox>>, FlattenError> {
    let order = lib.bottom_up_order()?;
    let mut boxes: Vec<Option<BBox>> = vec![None; lib.cells.len()];
    for &ci in &order {
        let cell = &lib.cells[ci];
        let mut bb: Option<BBox> = None;
        for (key, shapes) in &cell.shapes {
            if layer.is_some_and(|l| l != *key) {
                continue;
            }
            for s in shapes {
                bb = union(bb, s.bbox());
            }
        }
        for inst in &cell.instances {
            let Some(child) = boxes[inst.cell] else {
                continue;
            };
            let m = inst.transform.to_affine();
            let corners = [
                Point::new(child.left, child.bottom),
                Point::new(child.right, child.bottom),
                Point::new(child.right, child.top),
                Point::new(child.left, child.top),
            ];
            let mut placed: Option<BBox> = None;
            for c in corners {
                let p = m.apply(c)?;
                placed = union(placed, Some(BBox::from_corners(p, p)));
            }
            let Some(placed) = placed else { continue };
            for (dx, dy) in corner_displacements(inst.repetition.as_ref()) {
                let shifted = shift(placed, dx, dy)?;
                bb = union(bb, Some(shifted));
            }
        }
        boxes[ci] = bb;
    }
    Ok(boxes)
}

fn union(a: Option<BBox>, b: Option<BBox>) -> Option<BBox> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.union(&b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn shift(b: BBox, dx: i128, dy: i128) -> Result<BBox, FlattenError> {
    let c = |v: i64, d: i128| crate::transform::to_coord_i128(i128::from(v) + d);
    Ok(BBox {
        left: c(b.left, dx)?,
        bottom: c(b.bottom, dy)?,
        right: c(b.right, dx)?,
        top: c(b.top, dy)?,
    })
}

/// Displacements whose boxes' union covers every copy of the repetition.
fn corner_displacements(rep: Option<&Repetition>) -> Vec<(i128, i128)> {
    match rep {
        None => vec![(0, 0)],
        Some(r @ Repetition::Array { cols, rows, .. }) => {
            let (c, rr) = (
                u64::from(cols.saturating_sub(1)),
                u64::from(rows.saturating_sub(1)),
            );
            let cols = u64::from((*cols).max(1));
            [0, c, rr * cols, rr * cols + c]
                .iter()
                .map(|&k| r.displacement(k))
                .collect()
        }
        Some(Repetition::Explicit(v)) => v
            .iter()
            .map(|p| (i128::from(p.x), i128::from(p.y)))
            .collect(),
    }
}
