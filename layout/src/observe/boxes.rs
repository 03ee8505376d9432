//! Cell and instance boxes as KLayout reports them (`Cell.bbox`, `Instance.bbox`): the union
//! over layers of the per-layer hierarchical boxes. Under arbitrary rotations this is
//! tighter than transforming the all-layer box of the child (which is what
//! [`crate::bbox::cell_bboxes`] with no layer gives), and it is what seed 003's `bbox_um`
//! must match.

use super::error::ObserveError;
use super::geometry::placed_bbox;
use crate::bbox::cell_bboxes;
use crate::geom::BBox;
use crate::model::{Instance, Library};
use crate::transform::Affine;

/// Per-layer and overall boxes of every cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellBoxes {
    /// `per_layer[l][cell]` for the layout's layers in sorted order.
    per_layer: Vec<Vec<Option<BBox>>>,
    /// Union over layers, per cell.
    overall: Vec<Option<BBox>>,
}

fn union(a: Option<BBox>, b: Option<BBox>) -> Option<BBox> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.union(&b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl CellBoxes {
    /// Computes the boxes (O(layers × (cells + instances))).
    ///
    /// # Errors
    /// [`ObserveError::Internal`] for a broken hierarchy, `QUERY_TOO_LARGE` on coordinate
    /// overflow.
    pub fn new(lib: &Library) -> Result<Self, ObserveError> {
        let mut overall = vec![None; lib.cells.len()];
        let mut per_layer = Vec::new();
        for key in lib.layers() {
            let boxes = cell_bboxes(lib, Some(key))?;
            for (o, b) in overall.iter_mut().zip(&boxes) {
                *o = union(*o, *b);
            }
            per_layer.push(boxes);
        }
        Ok(Self { per_layer, overall })
    }

    /// The box of cell `cell` (`None` when empty).
    #[must_use]
    pub fn cell(&self, cell: usize) -> Option<BBox> {
        self.overall.get(cell).copied().flatten()
    }

    /// The box of all copies of `inst` in its parent's coordinates (`None` when the child
    /// is empty).
    ///
    /// # Errors
    /// `QUERY_TOO_LARGE` on coordinate overflow.
    pub fn instance(&self, inst: &Instance) -> Result<Option<BBox>, ObserveError> {
        let mut out = None;
        for layer in &self.per_layer {
            if let Some(b) = layer.get(inst.cell).copied().flatten() {
                out = union(out, Some(placed_bbox(inst, b, &Affine::IDENTITY)?));
            }
        }
        Ok(out)
    }
}
