//! Writing a repaired layout back: the input library plus a mask layer that holds the
//! optimized mask inside a region and the drawn target shapes everywhere else (issue 28
//! item 4, D160).
//!
//! [`write_back`] takes the library as read, the top cell, the target layer, the region
//! (dbu, top-cell coordinates), the optimized mask polygons and the mask layer, and returns
//! a new [`Library`] to be written in the input's format ([`write_layout`]).
//!
//! # What the result holds
//! Let `b` (the *base*) be the mask layer itself when the input already has shapes on it (a
//! repair continued from an earlier one), else the target layer. Flattened from the top
//! cell, the mask layer of the result is exactly
//! `(mask ∩ region) ∪ (flat(b) ∖ region)`, and every other layer is the input's, cell by
//! cell: no input cell loses or changes a shape or an instance on any layer but the mask
//! layer, and the only instances added place new cells that hold nothing but the mask layer.
//!
//! # How, without flattening the chip
//! A placement *touches* when its box on the base layer (a conservative box, one dbu of
//! slack) shares area with the region; a cell is *touched* when one of its placements below
//! the top cell touches (the top cell when the region meets it). A base shape of a touched
//! cell is *near* when it may reach into the region in one of those touching placements,
//! else *far*. Then:
//! - far shapes (every shape of an untouched cell) are clear of the region wherever their
//!   cell is placed: they are copied onto the mask layer in place, in their own cell (when
//!   continuing, they simply stay);
//! - near shapes of a touched cell leave its mask layer (continuing) or are not copied, and
//!   go to the cell's *variant* `NAME$MASK_L_D`, which holds them on the mask layer plus a
//!   variant instance for each touched child; an untouched cell that places a touched cell
//!   also places that cell's variant, with the same transform and repetition;
//! - from the top cell down, through touching placements only, each cell's near shapes are
//!   placed flat into the top cell minus the region (clipped to the four slabs around it,
//!   so no hole is ever made), and each clear placement of a touched child gets its variant
//!   placed in the top cell with the composed transform; array copies clear of the region
//!   are grouped into sub-arrays (one lattice line at a time, analytically).
//!
//! Every placement of a cell is thus either touching (its near shapes flat in the top cell)
//! or clear (its near shapes through a variant), never both; far shapes come from the cell
//! itself at every placement.
//!
//! Hierarchy is therefore kept everywhere except for the near shapes of the placements that
//! reach into the region, and the region is flat on the mask layer. A composed placement that cannot be
//! written exactly as one transform (non-Manhattan chains whose offsets round) is flattened
//! instead, so the result equals the flattened input up to [`crate::flatten()`]'s own rounding.
//!
//! Mask polygons are clipped to the region. They are simple polygons; a polygon with holes
//! comes with its holes joined to the hull by cut lines (the kernel's convention), which both
//! GDSII and OASIS keep (D131). Texts are never copied, moved or removed.

// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub mod emit;
// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub mod split;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::clip::clip_polygon;
use crate::flatten::{FlattenOptions, summarize};
use crate::gds::{GdsWriteError, write_gds};
use crate::geom::{BBox, Polygon};
use crate::hierarchy::{child_transform, transform_bbox};
use crate::limits::Limits;
use crate::model::{
    Cell, HierarchyError, Instance, LayerKey, Library, Repetition, Shape, Transform,
};
use crate::oasis::{OasisWriteError, write_oasis};
use crate::read::Format;
use crate::transform::{Affine, CoordinateOverflow};

use split::{Run, compose, mapped_steps, shifted, touches};

/// What to write back.
#[derive(Debug, Clone, Copy)]
pub struct WritebackRequest<'a> {
    /// The top cell (index in [`Library::cells`]); no other cell may place it.
    pub top: usize,
    /// The drawn layer the mask was optimized for.
    pub target: LayerKey,
    /// Where the mask goes ([`default_mask_layer`] when the caller names none).
    pub mask_layer: LayerKey,
    /// The repaired region (dbu, top-cell coordinates). A region without area changes
    /// nothing inside; parts outside the layout are allowed.
    pub region: BBox,
    /// The optimized mask (dbu, top-cell coordinates), flattened; clipped to the region.
    pub mask: &'a [Polygon],
}

/// The written library and what was done to it.
#[derive(Debug, Clone)]
pub struct Writeback {
    /// The input library plus the mask layer.
    pub library: Library,
    /// Facts about the write-back.
    pub report: WritebackReport,
}

/// Facts about a write-back, for the tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritebackReport {
    /// The mask layer written.
    pub mask_layer: LayerKey,
    /// The layer the mask layer copies outside the region: the mask layer itself when the
    /// input had one (continuing an earlier repair), else the target layer.
    pub base_layer: LayerKey,
    /// Names of the touched cells (placed into the region), sorted.
    pub touched_cells: Vec<String>,
    /// Names of the variant cells added, in the library's order.
    pub variant_cells: Vec<String>,
    /// Cells that got their far target shapes (clear of the region wherever the cell is
    /// placed: all of an untouched cell's) copied onto the mask layer in place.
    pub in_place_cells: usize,
    /// Shapes placed flat into the top cell on the mask layer outside the region (pieces
    /// of near shapes of touching placements).
    pub flat_shapes: usize,
    /// Variant instances added to the top cell for clear placements of touched cells.
    pub top_instances: usize,
    /// Mask polygons written inside the region (after clipping).
    pub mask_polygons: usize,
}

/// Why a layout could not be written back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WritebackError {
    /// The top cell index does not exist.
    #[error("no cell with index {0}")]
    NoSuchCell(usize),
    /// The named top cell is placed by another cell.
    #[error("cell {cell:?} is placed by {parent:?}: the write-back needs a top cell")]
    NotTopCell {
        /// The cell asked for.
        cell: String,
        /// A cell that places it.
        parent: String,
    },
    /// The mask layer is the target layer: the drawn shapes would be lost.
    #[error("mask layer {}/{} is the target layer", .0.layer, .0.datatype)]
    MaskIsTarget(LayerKey),
    /// The region's corners are swapped.
    #[error("region ({left}, {bottom}; {right}, {top}) has left > right or bottom > top")]
    InvalidRegion {
        /// Left.
        left: i64,
        /// Bottom.
        bottom: i64,
        /// Right.
        right: i64,
        /// Top.
        top: i64,
    },
    /// No datatype of the target layer number is free for a default mask layer.
    #[error("layer {0} has no free datatype for a mask layer")]
    NoFreeDatatype(u32),
    /// A resource limit was hit.
    #[error("limit exceeded: {what} (limit {limit})")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
    /// A placed coordinate left the representable range.
    #[error(transparent)]
    Coordinate(#[from] CoordinateOverflow),
    /// Dangling reference or cycle.
    #[error(transparent)]
    Hierarchy(#[from] HierarchyError),
}

/// Why a library could not be encoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteLayoutError {
    /// GDSII writer error.
    #[error("GDSII: {0}")]
    Gds(#[from] GdsWriteError),
    /// OASIS writer error.
    #[error("OASIS: {0}")]
    Oasis(#[from] OasisWriteError),
}

/// Encodes `lib` in `format` ([`write_gds`] or [`write_oasis`]): the inverse of
/// [`crate::read_layout`].
///
/// # Errors
/// [`WriteLayoutError`] when a value does not fit the format.
pub fn write_layout(lib: &Library, format: Format) -> Result<Vec<u8>, WriteLayoutError> {
    Ok(match format {
        Format::Gds => write_gds(lib)?,
        Format::Oasis => write_oasis(lib)?,
    })
}

/// The default mask layer for `target`: the target's layer number with the smallest
/// datatype from 1 up that no shape or text of `lib` uses (11/0 → 11/1, the usual place for
/// an OPC output next to its drawn layer; never the target, never a layer already holding
/// something). Continuing an earlier repair therefore needs the mask layer named.
///
/// # Errors
/// [`WritebackError::NoFreeDatatype`] when datatypes 1 to 65535 are all taken.
pub fn default_mask_layer(lib: &Library, target: LayerKey) -> Result<LayerKey, WritebackError> {
    let used: BTreeSet<LayerKey> = lib.layers().into_iter().collect();
    (1..=u32::from(u16::MAX))
        .map(|d| LayerKey::new(target.layer, d))
        .find(|k| *k != target && !used.contains(k))
        .ok_or(WritebackError::NoFreeDatatype(target.layer))
}

/// Writes the mask back into the layout: see the [module documentation](self) for what the
/// result holds and how hierarchy is kept.
///
/// # Errors
/// [`WritebackError`]: a bad request (cell, layers, region), a hierarchy or coordinate
/// problem, or a limit of `limits` (depth, placements, array size, shapes, points).
pub fn write_back(
    lib: &Library,
    req: &WritebackRequest<'_>,
    limits: &Limits,
) -> Result<Writeback, WritebackError> {
    let top = req.top;
    let top_cell = lib.cells.get(top).ok_or(WritebackError::NoSuchCell(top))?;
    if let Some(parent) = lib
        .cells
        .iter()
        .find(|c| c.instances.iter().any(|i| i.cell == top))
    {
        return Err(WritebackError::NotTopCell {
            cell: top_cell.name.clone(),
            parent: parent.name.clone(),
        });
    }
    if req.mask_layer == req.target {
        return Err(WritebackError::MaskIsTarget(req.target));
    }
    let r = req.region;
    if r.left > r.right || r.bottom > r.top {
        return Err(WritebackError::InvalidRegion {
            left: r.left,
            bottom: r.bottom,
            right: r.right,
            top: r.top,
        });
    }
    let m = req.mask_layer;
    let continuing = lib.cells.iter().any(|c| {
        c.shapes
            .get(&m)
            .is_some_and(|v| v.iter().any(|s| !matches!(s, Shape::Text(_))))
    });
    let base = if continuing { m } else { req.target };
    let order = lib.bottom_up_order()?;
    let opts = FlattenOptions {
        layers: Some(BTreeSet::from([base])),
        ..FlattenOptions::default()
    };
    let bboxes = summarize(lib, &order, &opts).bboxes;
    let mut w = RegionWriter {
        lib,
        base,
        region: r,
        bboxes,
        limits,
        placements: 0,
        points: 0,
        touched: vec![false; lib.cells.len()],
        near: vec![None; lib.cells.len()],
    };
    w.find_touched(top)?;
    let mut out = lib.clone();
    let near = w.near.clone();
    let mut variants = Variants::new(lib, m, base, &near);
    let mut flat = Vec::new();
    let mut top_instances = Vec::new();
    w.emit(top, &mut flat, &mut top_instances, &mut variants)?;
    let mut in_place = 0;
    for (ci, cell) in lib.cells.iter().enumerate() {
        let oc = &mut out.cells[ci];
        let near = w.near[ci].as_deref();
        if continuing {
            // The near shapes move to the flat part and the variant; the rest stay.
            if let (Some(near), Some(v)) = (near, oc.shapes.get_mut(&m)) {
                let old = std::mem::take(v);
                v.extend(
                    old.into_iter()
                        .zip(near)
                        .filter(|(_, n)| !**n)
                        .map(|(s, _)| s),
                );
            }
        } else {
            let copies: Vec<Shape> = selected(cell, base, near, false).cloned().collect();
            if !copies.is_empty() {
                in_place += 1;
                oc.shapes.entry(m).or_default().extend(copies);
            }
        }
        if w.touched[ci] {
            continue;
        }
        for inst in &cell.instances {
            if w.touched[inst.cell] {
                let v = variants.get(inst.cell);
                oc.instances.push(Instance {
                    cell: v,
                    ..inst.clone()
                });
            }
        }
    }
    let variant_cells = variants.finish(&w.touched, &mut out);
    let mut mask_polygons = 0;
    let flat_shapes = flat.len();
    let mut top_shapes = flat;
    for p in req.mask {
        if let Some(c) = clip_polygon(p, &r) {
            w.count_points(c.points.len())?;
            top_shapes.push(Shape::Polygon(c));
            mask_polygons += 1;
        }
    }
    let tc = &mut out.cells[top];
    if !top_shapes.is_empty() {
        tc.shapes.entry(m).or_default().extend(top_shapes);
    }
    let top_added = top_instances.len();
    tc.instances.extend(top_instances);
    let report = WritebackReport {
        mask_layer: m,
        base_layer: base,
        touched_cells: {
            let mut v: Vec<String> = (0..lib.cells.len())
                .filter(|&c| w.touched[c])
                .map(|c| lib.cells[c].name.clone())
                .collect();
            v.sort();
            v
        },
        variant_cells,
        in_place_cells: in_place,
        flat_shapes,
        top_instances: top_added,
        mask_polygons,
    };
    Ok(Writeback {
        library: out,
        report,
    })
}

/// The non-text shapes a cell holds on `key` that are near the region (`want_near`) or
/// not, given the cell's near flags (`None`: none is near).
fn selected<'c>(
    cell: &'c Cell,
    key: LayerKey,
    near: Option<&'c [bool]>,
    want_near: bool,
) -> impl Iterator<Item = &'c Shape> {
    cell.shapes
        .get(&key)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(move |(i, s)| {
            !matches!(s, Shape::Text(_))
                && near.is_some_and(|n| n.get(*i).copied().unwrap_or(false)) == want_near
        })
        .map(|(_, s)| s)
}

/// One placement visited from the top: a cell, its map to the top, and that map as one
/// exact transform when there is one.
struct Visit {
    cell: usize,
    a: Affine,
    t: Option<Transform>,
    depth: u32,
}

struct RegionWriter<'a> {
    lib: &'a Library,
    base: LayerKey,
    region: BBox,
    /// Per cell, a box holding its base-layer geometry and its children's (`None`: none).
    bboxes: Vec<Option<[f64; 4]>>,
    limits: &'a Limits,
    placements: u64,
    points: u64,
    touched: Vec<bool>,
    /// Per touched cell, per shape on the base layer: whether it reaches into the region in
    /// some placement visited (the others are clear in every placement: copied in place).
    near: Vec<Option<Vec<bool>>>,
}

impl RegionWriter<'_> {
    fn limit(what: &'static str, limit: u64) -> WritebackError {
        WritebackError::LimitExceeded { what, limit }
    }

    fn count_placement(&mut self, depth: u32) -> Result<(), WritebackError> {
        self.placements += 1;
        if self.placements > self.limits.max_placements {
            return Err(Self::limit("placements", self.limits.max_placements));
        }
        if depth > self.limits.max_depth {
            return Err(Self::limit(
                "hierarchy depth",
                u64::from(self.limits.max_depth),
            ));
        }
        Ok(())
    }

    fn count_points(&mut self, n: usize) -> Result<(), WritebackError> {
        self.points += n as u64;
        if self.points > self.limits.max_points {
            return Err(Self::limit("points", self.limits.max_points));
        }
        Ok(())
    }

    /// Flags the base shapes of `cell` that, placed by `a`, may reach into the region.
    fn mark_near(&mut self, cell: usize, a: &Affine) {
        let Some(shapes) = self.lib.cells[cell].shapes.get(&self.base) else {
            return;
        };
        let near = self.near[cell].get_or_insert_with(|| vec![false; shapes.len()]);
        for (flag, s) in near.iter_mut().zip(shapes) {
            if *flag || matches!(s, Shape::Text(_)) {
                continue;
            }
            if let Some(b) = s.bbox() {
                let bb = [b.left as f64, b.bottom as f64, b.right as f64, b.top as f64];
                *flag = touches(transform_bbox(a, bb), &self.region);
            }
        }
    }

    /// Marks every cell reached through placements that reach into the region.
    fn find_touched(&mut self, top: usize) -> Result<(), WritebackError> {
        let Some(bb) = self.bboxes[top] else {
            return Ok(());
        };
        if !touches(bb, &self.region) {
            return Ok(());
        }
        let mut stack = vec![(top, Affine::IDENTITY, 0u32)];
        while let Some((cell, a, depth)) = stack.pop() {
            self.count_placement(depth)?;
            self.touched[cell] = true;
            self.mark_near(cell, &a);
            for inst in &self.lib.cells[cell].instances {
                let Some(cbb) = self.bboxes[inst.cell] else {
                    continue;
                };
                let s = split::split(inst, &a, cbb, &self.region, self.limits.max_array)?;
                for k in s.touching {
                    stack.push((inst.cell, child_transform(&a, inst, k), depth + 1));
                }
            }
        }
        Ok(())
    }

    /// From the top down through the touched placements: own base shapes flat minus the
    /// region into `flat`, clear placements of touched children as variant instances in
    /// the top cell (or, when not exactly representable, visited flat as well).
    fn emit(
        &mut self,
        top: usize,
        flat: &mut Vec<Shape>,
        top_instances: &mut Vec<Instance>,
        variants: &mut Variants<'_>,
    ) -> Result<(), WritebackError> {
        if !self.touched[top] {
            return Ok(());
        }
        let mut stack = vec![Visit {
            cell: top,
            a: Affine::IDENTITY,
            t: Some(Transform::default()),
            depth: 0,
        }];
        while let Some(v) = stack.pop() {
            self.count_placement(v.depth)?;
            let lib = self.lib;
            let start = flat.len();
            for s in selected(
                &lib.cells[v.cell],
                self.base,
                self.near[v.cell].as_deref(),
                true,
            ) {
                emit::placed_outside(s, &v.a, &self.region, flat)?;
            }
            for s in &flat[start..] {
                if let Shape::Polygon(p) = s {
                    self.count_points(p.points.len())?;
                }
            }
            if flat.len() as u64 > self.limits.max_shapes {
                return Err(Self::limit("shapes", self.limits.max_shapes));
            }
            let mut children = Vec::new();
            for inst in &lib.cells[v.cell].instances {
                if !self.touched[inst.cell] {
                    continue;
                }
                let Some(cbb) = self.bboxes[inst.cell] else {
                    continue;
                };
                let s = split::split(inst, &v.a, cbb, &self.region, self.limits.max_array)?;
                for k in s.touching {
                    children.push(self.visit_of(&v, inst, k)?);
                }
                for run in s.clear {
                    if let Some(placed) = self.variant_instance(&v, inst, run, variants)? {
                        top_instances.push(placed);
                    } else {
                        for k in run_copies(inst, run) {
                            children.push(self.visit_of(&v, inst, k)?);
                        }
                    }
                }
            }
            // Depth first, in instance order.
            stack.extend(children.into_iter().rev());
        }
        Ok(())
    }

    fn visit_of(&self, v: &Visit, inst: &Instance, k: u64) -> Result<Visit, WritebackError> {
        let a = child_transform(&v.a, inst, k);
        let t = match &v.t {
            Some(t) => {
                let c = compose(t, &shifted(inst, k)?)?;
                (c.to_affine() == a).then_some(c)
            }
            None => None,
        };
        Ok(Visit {
            cell: inst.cell,
            a,
            t,
            depth: v.depth + 1,
        })
    }

    /// The variant of `inst`'s cell placed in the top cell for the copies of `run`, when
    /// one transform (and lattice) places them exactly as the input does.
    fn variant_instance(
        &self,
        v: &Visit,
        inst: &Instance,
        run: Run,
        variants: &mut Variants<'_>,
    ) -> Result<Option<Instance>, WritebackError> {
        let Some(t) = &v.t else { return Ok(None) };
        let (k0, repetition) = match (run, &inst.repetition) {
            (Run::One(k), _) => (k, None),
            (
                Run::Block { i0, ni, j0, nj },
                Some(Repetition::Array {
                    cols,
                    col_step,
                    row_step,
                    ..
                }),
            ) => {
                let k0 = u64::from(j0) * u64::from((*cols).max(1)) + u64::from(i0);
                let rep = if ni == 1 && nj == 1 {
                    None
                } else {
                    let (c, r) = mapped_steps(&v.a, *col_step, *row_step)?;
                    Some(Repetition::Array {
                        cols: ni,
                        rows: nj,
                        col_step: c,
                        row_step: r,
                    })
                };
                (k0, rep)
            }
            (Run::Block { .. }, _) => return Ok(None),
        };
        let c = compose(t, &shifted(inst, k0)?)?;
        if c.to_affine() != child_transform(&v.a, inst, k0) {
            return Ok(None);
        }
        Ok(Some(Instance {
            cell: variants.get(inst.cell),
            transform: c,
            repetition,
        }))
    }
}

/// The copy indices of a run.
fn run_copies(inst: &Instance, run: Run) -> Vec<u64> {
    match (run, &inst.repetition) {
        (Run::One(k), _) => vec![k],
        (Run::Block { i0, ni, j0, nj }, Some(Repetition::Array { cols, .. })) => {
            let cols = u64::from((*cols).max(1));
            (j0..j0 + nj)
                .flat_map(|j| (i0..i0 + ni).map(move |i| u64::from(j) * cols + u64::from(i)))
                .collect()
        }
        (Run::Block { .. }, _) => Vec::new(),
    }
}

/// The variant cells, made on first use: index in the output library per touched cell.
struct Variants<'a> {
    lib: &'a Library,
    mask: LayerKey,
    base: LayerKey,
    near: &'a [Option<Vec<bool>>],
    names: HashSet<String>,
    index: BTreeMap<usize, usize>,
    order: Vec<usize>,
}

impl<'a> Variants<'a> {
    fn new(
        lib: &'a Library,
        mask: LayerKey,
        base: LayerKey,
        near: &'a [Option<Vec<bool>>],
    ) -> Self {
        Self {
            lib,
            mask,
            base,
            near,
            names: lib.cells.iter().map(|c| c.name.clone()).collect(),
            index: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// The output index of `cell`'s variant (cells are appended after the input's).
    fn get(&mut self, cell: usize) -> usize {
        if let Some(&i) = self.index.get(&cell) {
            return i;
        }
        let i = self.lib.cells.len() + self.order.len();
        self.index.insert(cell, i);
        self.order.push(cell);
        i
    }

    /// Builds the variant cells (and those of their touched children) into `out`, which
    /// holds exactly the input's cells so far; returns their names.
    fn finish(&mut self, touched: &[bool], out: &mut Library) -> Vec<String> {
        let mut names = Vec::new();
        let mut next = 0;
        while let Some(&cell) = self.order.get(next) {
            next += 1;
            let src = &self.lib.cells[cell];
            let stem = format!(
                "{}$MASK_{}_{}",
                src.name, self.mask.layer, self.mask.datatype
            );
            let mut name = stem.clone();
            let mut n = 1;
            while self.names.contains(&name) {
                name = format!("{stem}_{n}");
                n += 1;
            }
            self.names.insert(name.clone());
            let mut c = Cell::new(name.clone());
            let near = self.near[cell].as_deref();
            let shapes: Vec<Shape> = selected(src, self.base, near, true).cloned().collect();
            if !shapes.is_empty() {
                c.shapes.insert(self.mask, shapes);
            }
            for inst in &src.instances {
                if touched[inst.cell] {
                    c.instances.push(Instance {
                        cell: self.get(inst.cell),
                        ..inst.clone()
                    });
                }
            }
            names.push(name);
            out.cells.push(c);
        }
        names
    }
}
