//! The region walk: every shape of a cell and what it places, meeting a box, on the kept
//! layers, within the query budget.

use std::collections::BTreeSet;

use super::placed::{PlacedGeometry, PlacedShape, place_geometry, shape_id, step_name};
use super::{QueryBudget, ShapeLocator, Step};
use crate::geom::BBox;
use crate::hierarchy::{Placement, PlacementVisitor, walk_placements};
use crate::model::{LayerKey, Library};
use crate::observe::error::ObserveError;
use crate::transform::Affine;

/// Visits every shape of `root` (and, with `descend`, of everything it places) whose placed
/// box meets `clip` (closed), on the kept layers, in a deterministic order.
///
/// # Errors
/// [`ObserveError::QueryTooLarge`] when the budget runs out.
pub fn visit_shapes(
    lib: &Library,
    root: usize,
    clip: Option<BBox>,
    layers: Option<&BTreeSet<LayerKey>>,
    descend: bool,
    budget: &QueryBudget,
    visit: &mut dyn FnMut(PlacedShape),
) -> Result<(), ObserveError> {
    walk_shapes(lib, root, clip, layers, descend, budget, None, visit)
}

/// [`visit_shapes`], optionally only for the shape with id `want_id` (checked before any
/// geometry is computed, so a search costs little more than hashing).
#[allow(clippy::too_many_arguments)]
fn walk_shapes(
    lib: &Library,
    root: usize,
    clip: Option<BBox>,
    layers: Option<&BTreeSet<LayerKey>>,
    descend: bool,
    budget: &QueryBudget,
    want_id: Option<&str>,
    visit: &mut dyn FnMut(PlacedShape),
) -> Result<(), ObserveError> {
    let boxes: Vec<Option<[f64; 4]>> = crate::bbox::cell_bboxes(lib, None)?
        .into_iter()
        .map(|b| b.map(|b| [b.left as f64, b.bottom as f64, b.right as f64, b.top as f64]))
        .collect();
    let root_name = lib.cells[root].name.clone();
    let mut walk = ShapeWalk {
        lib,
        clip,
        layers,
        budget,
        want_id,
        visit,
        names: vec![root_name.clone()],
        root_name,
        steps: Vec::new(),
        visited: 0,
        placements: 0,
    };
    walk.own(root, &Affine::IDENTITY)?;
    if !descend {
        return Ok(());
    }
    walk_placements(lib, root, &boxes, clip.as_ref(), None, &mut walk)
}

/// The state of one region walk: where it is (placement steps and their names from the
/// query cell) and how much of the budget it spent.
struct ShapeWalk<'a, 'v> {
    lib: &'a Library,
    clip: Option<BBox>,
    layers: Option<&'a BTreeSet<LayerKey>>,
    budget: &'a QueryBudget,
    want_id: Option<&'a str>,
    visit: &'v mut dyn FnMut(PlacedShape),
    root_name: String,
    steps: Vec<Step>,
    names: Vec<String>,
    visited: u64,
    placements: u64,
}

impl ShapeWalk<'_, '_> {
    /// Visits the shapes `cell` holds directly, placed by `m`, whose box meets the clip.
    fn own(&mut self, cell: usize, m: &Affine) -> Result<(), ObserveError> {
        let lib = self.lib;
        let budget = self.budget;
        let meets = |b: &BBox| {
            self.clip.is_none_or(|c| {
                b.left <= c.right && c.left <= b.right && b.bottom <= c.top && c.bottom <= b.top
            })
        };
        for (key, shapes) in &lib.cells[cell].shapes {
            if self.layers.is_some_and(|l| !l.contains(key)) {
                continue;
            }
            for (index, shape) in shapes.iter().enumerate() {
                self.visited += 1;
                if self.visited > budget.max_visited_shapes {
                    return Err(ObserveError::QueryTooLarge {
                        what: "shapes visited",
                        limit: budget.max_visited_shapes,
                    });
                }
                let locator = ShapeLocator {
                    root: self.root_name.clone(),
                    steps: self.steps.clone(),
                    layer: key.layer,
                    datatype: key.datatype,
                    index,
                };
                let id = shape_id(lib, &locator, shape);
                if self.want_id.is_some_and(|w| w != id) {
                    continue;
                }
                let geometry = place_geometry(shape, m)?;
                let bb = match &geometry {
                    PlacedGeometry::Polygon(p) => p.bbox(),
                    PlacedGeometry::EmptyPath => None,
                    PlacedGeometry::Text(p) => Some(BBox::from_corners(*p, *p)),
                };
                if !bb.is_some_and(|b| meets(&b)) {
                    continue;
                }
                (self.visit)(PlacedShape {
                    id,
                    locator,
                    cell: lib.cells[cell].name.clone(),
                    instance_path: self.names.clone(),
                    key: *key,
                    shape: shape.clone(),
                    transform: *m,
                    geometry,
                });
            }
        }
        Ok(())
    }
}

/// The query budget checked as the walk goes; each placement entered visits its cell's
/// own shapes with the placement's provenance.
impl PlacementVisitor for ShapeWalk<'_, '_> {
    type Error = ObserveError;

    fn instance(&mut self, depth: u32, _copies: u64) -> Result<(), ObserveError> {
        if depth > self.budget.max_depth {
            return Err(ObserveError::QueryTooLarge {
                what: "hierarchy depth",
                limit: u64::from(self.budget.max_depth),
            });
        }
        Ok(())
    }

    fn placement(&mut self) -> Result<(), ObserveError> {
        self.placements += 1;
        if self.placements > self.budget.max_placements {
            return Err(ObserveError::QueryTooLarge {
                what: "placements visited",
                limit: self.budget.max_placements,
            });
        }
        Ok(())
    }

    fn enter(&mut self, placement: &Placement) -> Result<(), ObserveError> {
        let step = Step {
            instance: placement.instance,
            copy: placement.copy,
        };
        self.names.push(step_name(self.lib, placement.parent, step));
        self.steps.push(step);
        self.own(placement.cell, &placement.transform)
    }

    fn leave(&mut self) {
        self.steps.pop();
        self.names.pop();
    }
}

/// Finds a shape by id with a full walk of `root` (for ids whose locator was lost, e.g.
/// after a host restart). `Ok(None)` when no shape has that id.
///
/// # Errors
/// [`ObserveError::QueryTooLarge`] when the walk exceeds the budget.
pub fn find_by_id(
    lib: &Library,
    root: usize,
    id: &str,
    budget: &QueryBudget,
) -> Result<Option<PlacedShape>, ObserveError> {
    let mut found = None;
    walk_shapes(lib, root, None, None, true, budget, Some(id), &mut |s| {
        if found.is_none() {
            found = Some(s);
        }
    })?;
    Ok(found)
}
