//! The box of a cell's flattened polygons on some layers, composed from per-cell boxes
//! through the placements instead of flattening.
//!
//! Under a Manhattan map (rotations by multiples of 90°, mirrors, any magnification) the
//! box of the mapped geometry is the mapped box, so each cell's box is computed once and
//! reused by every Manhattan placement of it. Under any other map the mapped box of a box
//! is larger than the box of the mapped geometry, so the cell's extent is recomputed in
//! that orientation (the map's linear part divided by its scale: the box of scaled geometry
//! is the scaled box): vertices of its own shapes mapped one by one, children composed the
//! same way, memoised per (cell, orientation). Layouts use few distinct angles; a budget
//! proportional to the library's size bounds the memo for those crafted to use many, and
//! past it cells are boxed by their rotated boxes (a superset, reported as not tight).
//!
//! Flattening rounds each vertex once, after composing the placements; rounding is
//! monotone, so rounding the real box gives the box of the rounded vertices, up to floating
//! point differences in how the maps are composed: exact for integral (Manhattan, integer
//! magnification) placements with coordinates below 2^53, and within one dbu otherwise.

use std::collections::{BTreeSet, HashMap};

use super::LayoutIndex;
use crate::flatten::{FlattenError, extreme_displacements};
use crate::geom::{BBox, Point, Polygon};
use crate::limits::Limits;
use crate::model::{Instance, LayerKey, Repetition, Shape};
use crate::transform::to_coord_f64;

/// The box of some layers' flattened polygons under a cell ([`LayoutIndex::layer_bbox`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerExtent {
    /// The box (dbu); `None` when the layers hold no polygon under the cell.
    pub bbox: Option<BBox>,
    /// Whether `bbox` is the box of the flattened polygons (see
    /// [`LayoutIndex::layer_bbox`] for the rounding); `false` only when the orientation
    /// budget ran out and some non-Manhattan placements were boxed by their rotated
    /// boxes, which gives a box containing the polygons, possibly larger.
    pub tight: bool,
}

/// The linear part of a placement map: `[xx, xy, yx, yy]`.
type Linear = [f64; 4];

const IDENTITY: Linear = [1.0, 0.0, 0.0, 1.0];

/// A non-Manhattan orientation: its memo key and its unit (scale 1) linear map.
type Orientation = ([u64; 4], Linear);

/// Non-identity (cell, orientation) extents one call may compute: this many per cell and
/// instance record of the library, plus [`EXTRA_ORIENTATIONS`]. Keeps the memo within a
/// small multiple of the library's own size.
const ORIENTATIONS_PER_ITEM: usize = 8;
/// See [`ORIENTATIONS_PER_ITEM`].
const EXTRA_ORIENTATIONS: usize = 4096;

/// A cell's extent in one orientation: the real box of its flattened polygons on the kept
/// layers, and the longest chain of placements below it leading to any of them.
#[derive(Debug, Clone, Copy)]
struct Extent {
    bbox: Option<[f64; 4]>,
    height: u32,
}

/// One step of the post-order evaluation.
struct Task {
    cell: usize,
    /// `None`: the identity.
    orientation: Option<Orientation>,
    expanded: bool,
}

fn is_manhattan(l: &Linear) -> bool {
    (l[1] == 0.0 && l[2] == 0.0) || (l[0] == 0.0 && l[3] == 0.0)
}

/// `outer ∘ inner`.
fn compose(outer: &Linear, inner: &Linear) -> Linear {
    [
        outer[0] * inner[0] + outer[1] * inner[2],
        outer[0] * inner[1] + outer[1] * inner[3],
        outer[2] * inner[0] + outer[3] * inner[2],
        outer[2] * inner[1] + outer[3] * inner[3],
    ]
}

fn apply(l: &Linear, x: f64, y: f64) -> (f64, f64) {
    (l[0] * x + l[1] * y, l[2] * x + l[3] * y)
}

fn linear(inst: &Instance) -> Linear {
    let a = inst.transform.to_affine();
    [a.xx, a.xy, a.yx, a.yy]
}

/// `l` as scale × orientation, for a non-Manhattan `l` with a finite positive scale; `None`
/// otherwise (the extent then comes from the identity extent). Keys keep 40 bits of each
/// mantissa, so maps that differ only by floating point noise (one angle reached along
/// different paths) share an entry; the extent is computed for the first of them, off by
/// some 1e-12 of a coordinate for the others.
fn orientation(l: &Linear) -> Option<(Orientation, f64)> {
    const NOISE_BITS: u64 = (1 << 12) - 1;
    if is_manhattan(l) {
        return None;
    }
    let scale = (l[0] * l[3] - l[1] * l[2]).abs().sqrt();
    if !(scale.is_finite() && scale > 0.0) {
        return None;
    }
    let unit = l.map(|v| v / scale);
    // `+ 0.0` turns -0.0 into 0.0.
    let key = unit.map(|v| (v + 0.0).to_bits() & !NOISE_BITS);
    Some(((key, unit), scale))
}

fn grow(bb: &mut Option<[f64; 4]>, b: [f64; 4]) {
    *bb = Some(bb.map_or(b, |a| {
        [
            a[0].min(b[0]),
            a[1].min(b[1]),
            a[2].max(b[2]),
            a[3].max(b[3]),
        ]
    }));
}

/// The box of the box `b` mapped by `l` (exact for a Manhattan `l`).
fn map_box(l: &Linear, b: [f64; 4]) -> [f64; 4] {
    let mut out = None;
    for (x, y) in [(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])] {
        let (x, y) = apply(l, x, y);
        grow(&mut out, [x, y, x, y]);
    }
    out.unwrap_or(b)
}

const fn limit(what: &'static str, limit: u64) -> FlattenError {
    FlattenError::LimitExceeded { what, limit }
}

/// Counts mapped vertices against `limits.max_points`.
fn count_points(points: &mut u64, n: usize, limits: &Limits) -> Result<(), FlattenError> {
    *points = points.saturating_add(n as u64);
    if *points > limits.max_points {
        return Err(limit("points", limits.max_points));
    }
    Ok(())
}

impl LayoutIndex {
    /// The bounding box of the polygons [`crate::flatten()`] makes of cell `cell` with layer
    /// filter `layers` (`None`: all layers) and no clip (texts never count), computed from
    /// per-cell boxes composed through the placements (arrays through their extreme
    /// copies), never materialising a polygon: the region to tile for "evaluate the whole
    /// layer".
    ///
    /// The box equals that of the flattened polygons for integral placements (Manhattan
    /// rotations and mirrors, integer magnifications) with coordinates below 2^53 dbu;
    /// under other placements a side may differ by one dbu where floating point composes
    /// the maps differently before rounding. Cost: each cell below `cell` once, plus once
    /// per distinct non-Manhattan orientation it is placed in; never the number of
    /// placements or copies.
    ///
    /// # Errors
    /// [`FlattenError::NoSuchCell`]; [`FlattenError::Coordinate`] when the box leaves the
    /// coordinate range; `LimitExceeded` for `hierarchy depth` (placements nested deeper
    /// than `limits.max_depth` above kept geometry, as flattening reports it), for
    /// `placements` (more than `limits.max_placements` instance records examined, each
    /// cell counted once per orientation) and for `points` (more than `limits.max_points`
    /// vertices mapped in non-Manhattan orientations). Shape and array-size limits do not
    /// apply: nothing is flattened and no copy is visited.
    pub fn layer_bbox(
        &self,
        cell: usize,
        layers: Option<&BTreeSet<LayerKey>>,
        limits: &Limits,
    ) -> Result<LayerExtent, FlattenError> {
        let lib = self.library();
        if cell >= lib.cells.len() {
            return Err(FlattenError::NoSuchCell(format!("#{cell}")));
        }
        let kept = |key: &LayerKey| layers.is_none_or(|l| l.contains(key));
        let items: usize = lib.cells.iter().map(|c| 1 + c.instances.len()).sum();
        let budget = items
            .saturating_mul(ORIENTATIONS_PER_ITEM)
            .saturating_add(EXTRA_ORIENTATIONS);
        let mut memo: HashMap<(usize, Option<[u64; 4]>), Extent> = HashMap::new();
        let mut oriented = 0usize;
        let mut tight = true;
        let mut examined = 0u64;
        let mut points = 0u64;
        // Explicit post-order: a task is expanded (its children pushed) once, then
        // evaluated once they are all in the memo. The hierarchy is a DAG (checked by
        // `LayoutIndex::new`), so a task is never its own descendant.
        let mut stack = vec![Task {
            cell,
            orientation: None,
            expanded: false,
        }];
        while let Some(task) = stack.pop() {
            let key = (task.cell, task.orientation.map(|o| o.0));
            if memo.contains_key(&key) {
                continue;
            }
            let c = &lib.cells[task.cell];
            let unit = task.orientation.map_or(IDENTITY, |o| o.1);
            if !task.expanded {
                if task.orientation.is_some() {
                    if oriented >= budget {
                        // Out of budget: this cell will be boxed by its rotated box.
                        stack.push(Task {
                            orientation: None,
                            ..task
                        });
                        continue;
                    }
                    oriented += 1;
                }
                examined = examined.saturating_add(1 + c.instances.len() as u64);
                if examined > limits.max_placements {
                    return Err(limit("placements", limits.max_placements));
                }
                stack.push(Task {
                    expanded: true,
                    ..task
                });
                for inst in c.instances.iter().filter(|i| i.placement_count() > 0) {
                    let child = orientation(&compose(&unit, &linear(inst))).map(|o| o.0);
                    if !memo.contains_key(&(inst.cell, child.map(|o| o.0))) {
                        stack.push(Task {
                            cell: inst.cell,
                            orientation: child,
                            expanded: false,
                        });
                    }
                }
                continue;
            }
            let mut bb: Option<[f64; 4]> = None;
            let mut height = 0u32;
            if task.orientation.is_none() {
                for (k, b) in &self.cell(task.cell).polygon_boxes {
                    if kept(k) {
                        grow(
                            &mut bb,
                            [b.left as f64, b.bottom as f64, b.right as f64, b.top as f64],
                        );
                    }
                }
            } else {
                for (_, shapes) in c.shapes.iter().filter(|(k, _)| kept(k)) {
                    for shape in shapes {
                        let outline: Vec<Point>;
                        let vertices: &[Point] = match shape {
                            Shape::Polygon(p) => &p.points,
                            Shape::Box(b) => {
                                outline = Polygon::rect(*b).points;
                                &outline
                            }
                            // Flattening rounds a path's outline in its own cell first.
                            Shape::Path(p) => {
                                outline = p.to_polygon().map_or_else(Vec::new, |o| o.points);
                                &outline
                            }
                            Shape::Text(_) => continue,
                        };
                        count_points(&mut points, vertices.len(), limits)?;
                        for q in vertices {
                            let (x, y) = apply(&unit, q.x as f64, q.y as f64);
                            grow(&mut bb, [x, y, x, y]);
                        }
                    }
                }
            }
            for inst in c.instances.iter().filter(|i| i.placement_count() > 0) {
                let lc = compose(&unit, &linear(inst));
                let oriented_child = orientation(&lc).and_then(|((k, _), scale)| {
                    let e = memo.get(&(inst.cell, Some(k)))?;
                    Some((e.bbox.map(|b| b.map(|v| v * scale)), e.height))
                });
                let (child_box, child_height) = match oriented_child {
                    Some(found) => found,
                    None => {
                        let Some(e) = memo.get(&(inst.cell, None)) else {
                            continue;
                        };
                        // A non-Manhattan map of the identity box: past the budget only.
                        tight &= is_manhattan(&lc) || e.bbox.is_none();
                        (e.bbox.map(|b| map_box(&lc, b)), e.height)
                    }
                };
                let Some(placed) = child_box else { continue };
                height = height.max(child_height.saturating_add(1));
                let Some(s) = shifts(inst, &unit, task.orientation.is_none(), limits, &mut points)?
                else {
                    continue;
                };
                grow(
                    &mut bb,
                    [
                        placed[0] + s[0],
                        placed[1] + s[1],
                        placed[2] + s[2],
                        placed[3] + s[3],
                    ],
                );
            }
            if height > limits.max_depth {
                return Err(limit("hierarchy depth", u64::from(limits.max_depth)));
            }
            memo.insert(key, Extent { bbox: bb, height });
        }
        let bbox = match memo.get(&(cell, None)).and_then(|e| e.bbox) {
            Some(b) => Some(BBox {
                left: to_coord_f64(b[0])?,
                bottom: to_coord_f64(b[1])?,
                right: to_coord_f64(b[2])?,
                top: to_coord_f64(b[3])?,
            }),
            None => None,
        };
        Ok(LayerExtent { bbox, tight })
    }
}

/// The box of the translations `unit · (offset + d)` over the copies' displacements `d`.
fn shifts(
    inst: &Instance,
    unit: &Linear,
    identity: bool,
    limits: &Limits,
    points: &mut u64,
) -> Result<Option<[f64; 4]>, FlattenError> {
    let (ox, oy) = (
        inst.transform.offset.x as f64,
        inst.transform.offset.y as f64,
    );
    let mut out = None;
    let mut add = |dx: f64, dy: f64| {
        let (x, y) = apply(unit, ox + dx, oy + dy);
        grow(&mut out, [x, y, x, y]);
    };
    match (&inst.repetition, identity) {
        // In a non-Manhattan orientation, any displacement of an irregular repetition may
        // be the extreme one.
        (Some(Repetition::Explicit(v)), false) => {
            count_points(points, v.len(), limits)?;
            for d in v {
                add(d.x as f64, d.y as f64);
            }
        }
        // A lattice's extremes are at its corners under any linear map; an irregular
        // repetition's, under the identity, at the corners of its box.
        (rep, _) => {
            for (dx, dy) in extreme_displacements(rep.as_ref()) {
                add(dx, dy);
            }
        }
    }
    Ok(out)
}
