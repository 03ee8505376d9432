//! Flattening: a cell and everything it places, as polygons per (layer, datatype).
//!
//! Transforms compose exactly for Manhattan placements (see [`crate::transform`]); other
//! placements round each vertex to the nearest dbu. An optional clip box prunes whole
//! subtrees by their bounding boxes and clips the remaining polygons; an optional layer
//! filter drops other layers (and subtrees that hold none of them). [`Limits`] are
//! enforced while walking, so a hostile hierarchy fails fast with bounded memory.
//!
//! [`ClipMode::Overlap`] keeps the polygons that meet the clip box whole instead of cutting
//! them. A [`LayoutIndex`] makes a clipped flattening cost what the clip box holds rather
//! than what the cells hold ([`LayoutIndex::flatten`]); the result is the same.

use std::collections::{BTreeMap, BTreeSet};

use crate::clip::{clip_polygon, keeps_area_inside};
use crate::geom::{BBox, Point, Polygon};
use crate::hierarchy::{
    InstanceFilter, Placement, PlacementVisitor, transform_bbox, walk_placements,
};
use crate::index::LayoutIndex;
use crate::limits::Limits;
use crate::model::{HierarchyError, LayerKey, Library, Repetition, Shape};
use crate::transform::{Affine, CoordinateOverflow};

/// What to flatten and how.
#[derive(Debug, Clone, Default)]
pub struct FlattenOptions {
    /// Keep only geometry overlapping this box (dbu, in the flattened cell's coordinates),
    /// clipped to it. Texts are kept when their anchor lies inside (edges included).
    pub clip: Option<BBox>,
    /// Keep only these layers; `None` keeps all.
    pub layers: Option<BTreeSet<LayerKey>>,
    /// Also report texts (they are never polygons).
    pub include_texts: bool,
    /// Resource limits.
    pub limits: Limits,
}

/// What a clip box does to the polygons that cross its edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClipMode {
    /// Cut them to the box (what [`flatten`] does).
    #[default]
    Clip,
    /// Keep them whole, unclipped: exactly the polygons [`ClipMode::Clip`] keeps (those
    /// with area inside the box), each as it is in the layout, so per-polygon work (EPE
    /// checkpoints along whole edges) does not depend on where a tile boundary falls.
    Overlap,
}

/// Why flattening failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlattenError {
    /// No cell of that name (or the library has no cells).
    #[error("no such cell: {0:?}")]
    NoSuchCell(String),
    /// A resource limit was hit; the flattening was abandoned.
    #[error("limit exceeded: {what} (limit {limit})")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
    /// A transformed coordinate left the representable range.
    #[error(transparent)]
    Coordinate(#[from] CoordinateOverflow),
    /// Dangling reference or cycle.
    #[error(transparent)]
    Hierarchy(#[from] HierarchyError),
}

/// A text label in flattened coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatText {
    /// Layer and text type.
    pub key: LayerKey,
    /// The string.
    pub string: String,
    /// Anchor position (dbu).
    pub position: Point,
}

/// The result of [`flatten`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlatLayout {
    /// Polygons per layer, in walk order (deterministic for a given library).
    pub polygons: BTreeMap<LayerKey, Vec<Polygon>>,
    /// Texts, when requested.
    pub texts: Vec<FlatText>,
}

impl FlatLayout {
    /// Total number of polygons.
    #[must_use]
    pub fn polygon_count(&self) -> usize {
        self.polygons.values().map(Vec::len).sum()
    }
}

/// Geometry of one flattened shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlatGeometry {
    /// A polygon (from a polygon, box or path), transformed and clipped.
    Polygon(Polygon),
    /// A text anchor, transformed.
    Text(Point),
}

/// One shape as the walker sees it: its source, where it came from, and its geometry in
/// the flattened cell's coordinates.
#[derive(Debug, Clone)]
pub struct FlatShape<'a> {
    /// Layer and datatype.
    pub key: LayerKey,
    /// The shape as stored in its cell.
    pub source: &'a Shape,
    /// Cell indices from the flattened cell down to the cell holding the shape.
    pub cell_path: &'a [usize],
    /// Map from the holding cell's coordinates to the flattened cell's.
    pub transform: Affine,
    /// Transformed (and clipped) geometry.
    pub geometry: FlatGeometry,
}

/// The cell a caller asked for: by name, or else the alphabetically first top cell.
///
/// # Errors
/// [`FlattenError::NoSuchCell`].
pub fn resolve_cell(lib: &Library, name: Option<&str>) -> Result<usize, FlattenError> {
    match name {
        Some(n) => lib
            .cell_index(n)
            .ok_or_else(|| FlattenError::NoSuchCell(n.to_owned())),
        None => lib
            .top_cells()
            .first()
            .copied()
            .ok_or_else(|| FlattenError::NoSuchCell(String::new())),
    }
}

/// Flattens cell `cell` into polygons per layer.
///
/// # Errors
/// [`FlattenError`]; in particular `LimitExceeded` as soon as a limit is crossed.
pub fn flatten(
    lib: &Library,
    cell: usize,
    opts: &FlattenOptions,
) -> Result<FlatLayout, FlattenError> {
    flatten_with_mode(lib, cell, opts, ClipMode::Clip)
}

/// [`flatten`] with the clip box applied as `mode` says.
///
/// # Errors
/// [`FlattenError`]; in particular `LimitExceeded` as soon as a limit is crossed.
pub fn flatten_with_mode(
    lib: &Library,
    cell: usize,
    opts: &FlattenOptions,
    mode: ClipMode,
) -> Result<FlatLayout, FlattenError> {
    let mut out = FlatLayout::default();
    walk_with_mode(lib, cell, opts, mode, &mut |s| out.push(s))?;
    Ok(out)
}

impl FlatLayout {
    /// Adds a shape the walk visited (texts keep their string).
    pub(crate) fn push(&mut self, s: FlatShape<'_>) {
        match s.geometry {
            FlatGeometry::Polygon(p) => self.polygons.entry(s.key).or_default().push(p),
            FlatGeometry::Text(position) => {
                if let Shape::Text(t) = s.source {
                    self.texts.push(FlatText {
                        key: s.key,
                        string: t.string.clone(),
                        position,
                    });
                }
            }
        }
    }
}

/// Visits every shape of `cell` and its descendants (after layer filter and clip) in a
/// deterministic order: a cell's own shapes by layer, then its instances in order, each
/// repetition in index order.
///
/// # Errors
/// [`FlattenError`]; in particular `LimitExceeded` as soon as a limit is crossed.
pub fn walk(
    lib: &Library,
    cell: usize,
    opts: &FlattenOptions,
    visit: &mut dyn FnMut(FlatShape<'_>),
) -> Result<(), FlattenError> {
    walk_with_mode(lib, cell, opts, ClipMode::Clip, visit)
}

/// [`walk`] with the clip box applied as `mode` says.
///
/// # Errors
/// [`FlattenError`]; in particular `LimitExceeded` as soon as a limit is crossed.
pub fn walk_with_mode(
    lib: &Library,
    cell: usize,
    opts: &FlattenOptions,
    mode: ClipMode,
    visit: &mut dyn FnMut(FlatShape<'_>),
) -> Result<(), FlattenError> {
    if cell >= lib.cells.len() {
        return Err(FlattenError::NoSuchCell(format!("#{cell}")));
    }
    let summary = summarize(lib, &lib.bottom_up_order()?, opts);
    walk_summarized(lib, None, &summary, cell, opts, mode, visit)
}

/// The walk proper, given the library's [`Summary`] for `opts`, optionally narrowed by an
/// index of `lib` (which must be the library the index holds).
pub(crate) fn walk_summarized(
    lib: &Library,
    index: Option<&LayoutIndex>,
    summary: &Summary,
    cell: usize,
    opts: &FlattenOptions,
    mode: ClipMode,
    visit: &mut dyn FnMut(FlatShape<'_>),
) -> Result<(), FlattenError> {
    if cell >= lib.cells.len() {
        return Err(FlattenError::NoSuchCell(format!("#{cell}")));
    }
    let limits = &opts.limits;
    // Without a clip, the exact output size is known up front: fail before any work.
    if opts.clip.is_none() && summary.counts[cell] > limits.max_shapes as f64 {
        return Err(limit("shapes", limits.max_shapes));
    }
    let mut walker = Walker {
        lib,
        opts,
        index,
        mode,
        visit,
        shapes: 0,
        points: 0,
        placements: 0,
        path: vec![cell],
    };
    walker.own_shapes(cell, &Affine::IDENTITY)?;
    let filter = index.map(|i| i as &dyn InstanceFilter);
    walk_placements(
        lib,
        cell,
        &summary.bboxes,
        opts.clip.as_ref(),
        filter,
        &mut walker,
    )
}

const fn limit(what: &'static str, limit: u64) -> FlattenError {
    FlattenError::LimitExceeded { what, limit }
}

/// Per-cell facts computed bottom-up: bounding box of kept geometry (real-valued so huge
/// arrays cannot overflow) and the number of shapes a full flattening would emit. Depends
/// on the options' layer filter and `include_texts` only.
pub(crate) struct Summary {
    pub(crate) bboxes: Vec<Option<[f64; 4]>>,
    counts: Vec<f64>,
}

impl Summary {
    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bboxes.capacity() * size_of::<Option<[f64; 4]>>()
            + self.counts.capacity() * size_of::<f64>()
    }
}

fn keeps(opts: &FlattenOptions, key: &LayerKey, shape: &Shape) -> bool {
    (opts.include_texts || !matches!(shape, Shape::Text(_))) && keeps_layer(opts, key)
}

fn keeps_layer(opts: &FlattenOptions, key: &LayerKey) -> bool {
    opts.layers.as_ref().is_none_or(|l| l.contains(key))
}

/// The [`Summary`] of every cell for `opts`, given the library's cells leaves first.
pub(crate) fn summarize(lib: &Library, order: &[usize], opts: &FlattenOptions) -> Summary {
    let n = lib.cells.len();
    let mut bboxes: Vec<Option<[f64; 4]>> = vec![None; n];
    let mut counts = vec![0.0f64; n];
    for &ci in order {
        let cell = &lib.cells[ci];
        let mut bb: Option<[f64; 4]> = None;
        let mut count = 0.0;
        for (key, shapes) in &cell.shapes {
            for shape in shapes.iter().filter(|s| keeps(opts, key, s)) {
                count += 1.0;
                if let Some(b) = shape_bound(shape) {
                    bb = union(bb, b);
                }
            }
        }
        for inst in &cell.instances {
            let Some(child) = bboxes[inst.cell] else {
                continue;
            };
            count += counts[inst.cell] * inst.placement_count() as f64;
            let m = inst.transform.to_affine();
            let placed = transform_bbox(&m, child);
            for (dx, dy) in extreme_displacements(inst.repetition.as_ref()) {
                bb = union(
                    bb,
                    [
                        placed[0] + dx,
                        placed[1] + dy,
                        placed[2] + dx,
                        placed[3] + dy,
                    ],
                );
            }
        }
        bboxes[ci] = bb;
        counts[ci] = count;
    }
    Summary { bboxes, counts }
}

/// A cheap box that surely contains the shape's geometry (paths: spine box grown by the
/// largest of half-width and extensions), for pruning only.
fn shape_bound(shape: &Shape) -> Option<[f64; 4]> {
    let f = |b: BBox| [b.left as f64, b.bottom as f64, b.right as f64, b.top as f64];
    match shape {
        Shape::Path(p) => {
            let first = *p.spine.first()?;
            let spine = p
                .spine
                .iter()
                .fold(BBox::from_corners(first, first), |b, q| {
                    b.union(&BBox::from_corners(*q, *q))
                });
            let half = p.width.abs() as f64 / 2.0;
            let grow = match p.ends.extensions(p.width.abs()) {
                Some((b, e)) => half.max(b.abs() as f64).max(e.abs() as f64),
                None => half,
            } + 1.0;
            let [l, b, r, t] = f(spine);
            Some([l - grow, b - grow, r + grow, t + grow])
        }
        other => other.bbox().map(f),
    }
}

fn union(a: Option<[f64; 4]>, b: [f64; 4]) -> Option<[f64; 4]> {
    Some(a.map_or(b, |a| {
        [
            a[0].min(b[0]),
            a[1].min(b[1]),
            a[2].max(b[2]),
            a[3].max(b[3]),
        ]
    }))
}

/// Displacements whose bounding box equals that of all copies of the repetition.
pub(crate) fn extreme_displacements(rep: Option<&Repetition>) -> Vec<(f64, f64)> {
    match rep {
        None => vec![(0.0, 0.0)],
        Some(Repetition::Array {
            cols,
            rows,
            col_step,
            row_step,
        }) => {
            let (c, r) = (
                f64::from(cols.saturating_sub(1)),
                f64::from(rows.saturating_sub(1)),
            );
            let (cx, cy, rx, ry) = (
                col_step.x as f64 * c,
                col_step.y as f64 * c,
                row_step.x as f64 * r,
                row_step.y as f64 * r,
            );
            vec![(0.0, 0.0), (cx, cy), (rx, ry), (cx + rx, cy + ry)]
        }
        Some(Repetition::Explicit(v)) => {
            let mut b: Option<[f64; 4]> = None;
            for p in v {
                b = union(b, [p.x as f64, p.y as f64, p.x as f64, p.y as f64]);
            }
            b.map_or_else(Vec::new, |b| vec![(b[0], b[1]), (b[2], b[3])])
        }
    }
}

struct Walker<'a, 'v> {
    lib: &'a Library,
    opts: &'a FlattenOptions,
    /// Narrows the shapes and instances looked at when there is a clip.
    index: Option<&'a LayoutIndex>,
    mode: ClipMode,
    visit: &'v mut dyn FnMut(FlatShape<'_>),
    shapes: u64,
    points: u64,
    placements: u64,
    path: Vec<usize>,
}

impl Walker<'_, '_> {
    fn emit(
        &mut self,
        key: LayerKey,
        source: &Shape,
        m: &Affine,
        geometry: FlatGeometry,
    ) -> Result<(), FlattenError> {
        let limits = &self.opts.limits;
        self.shapes += 1;
        if self.shapes > limits.max_shapes {
            return Err(limit("shapes", limits.max_shapes));
        }
        if let FlatGeometry::Polygon(p) = &geometry {
            self.points += p.points.len() as u64;
            if self.points > limits.max_points {
                return Err(limit("points", limits.max_points));
            }
        }
        (self.visit)(FlatShape {
            key,
            source,
            cell_path: &self.path,
            transform: *m,
            geometry,
        });
        Ok(())
    }

    fn polygon(
        &mut self,
        key: LayerKey,
        source: &Shape,
        m: &Affine,
        poly: Polygon,
    ) -> Result<(), FlattenError> {
        let poly = match (&self.opts.clip, self.mode) {
            (Some(c), ClipMode::Clip) => match clip_polygon(&poly, c) {
                Some(p) => p,
                None => return Ok(()),
            },
            (Some(c), ClipMode::Overlap) => {
                if !keeps_area_inside(&poly, c) {
                    return Ok(());
                }
                poly
            }
            (None, _) => poly,
        };
        self.emit(key, source, m, FlatGeometry::Polygon(poly))
    }

    fn shape(&mut self, key: LayerKey, shape: &Shape, m: &Affine) -> Result<(), FlattenError> {
        match shape {
            Shape::Polygon(p) => {
                // Count before allocating the transformed copy.
                if self.points + p.points.len() as u64 > self.opts.limits.max_points {
                    return Err(limit("points", self.opts.limits.max_points));
                }
                let pts = m.apply_all(p.points.iter().copied())?;
                self.polygon(key, shape, m, Polygon::new(pts))
            }
            Shape::Box(b) => {
                let corners = [
                    Point::new(b.left, b.bottom),
                    Point::new(b.right, b.bottom),
                    Point::new(b.right, b.top),
                    Point::new(b.left, b.top),
                ];
                let pts = m.apply_all(corners.into_iter())?;
                self.polygon(key, shape, m, Polygon::new(pts))
            }
            // Like KLayout, the outline is rounded to the grid in the cell's own
            // coordinates, then transformed (exact for Manhattan placements).
            Shape::Path(p) => match p.to_polygon() {
                Some(outline) => {
                    let pts = m.apply_all(outline.points.into_iter())?;
                    self.polygon(key, shape, m, Polygon::new(pts))
                }
                None => Ok(()),
            },
            Shape::Text(t) => {
                let pos = m.apply(t.position)?;
                let inside = self.opts.clip.as_ref().is_none_or(|c| {
                    pos.x >= c.left && pos.x <= c.right && pos.y >= c.bottom && pos.y <= c.top
                });
                if inside {
                    self.emit(key, shape, m, FlatGeometry::Text(pos))?;
                }
                Ok(())
            }
        }
    }

    /// Emits the kept shapes a cell holds directly, placed by `m`, in stored order per
    /// layer; with an index and a clip, only those whose box may meet the clip are looked at.
    fn own_shapes(&mut self, ci: usize, m: &Affine) -> Result<(), FlattenError> {
        let lib = self.lib;
        let opts = self.opts;
        for (key, shapes) in &lib.cells[ci].shapes {
            if !keeps_layer(opts, key) {
                continue;
            }
            let hits = match (self.index, &opts.clip) {
                (Some(index), Some(clip)) => index.shape_candidates(ci, key, m, clip),
                _ => None,
            };
            match hits {
                Some(hits) => {
                    for shape in hits.into_iter().filter_map(|i| shapes.get(i)) {
                        if keeps(opts, key, shape) {
                            self.shape(*key, shape, m)?;
                        }
                    }
                }
                None => {
                    for shape in shapes.iter().filter(|s| keeps(opts, key, s)) {
                        self.shape(*key, shape, m)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The limits of [`FlattenOptions`] checked as the walk goes; each placement entered
/// emits its cell's own shapes.
impl PlacementVisitor for Walker<'_, '_> {
    type Error = FlattenError;

    fn instance(&mut self, depth: u32, copies: u64) -> Result<(), FlattenError> {
        let limits = &self.opts.limits;
        if depth > limits.max_depth {
            return Err(limit("hierarchy depth", u64::from(limits.max_depth)));
        }
        if copies > limits.max_array {
            return Err(limit("array size", limits.max_array));
        }
        Ok(())
    }

    fn placement(&mut self) -> Result<(), FlattenError> {
        self.placements += 1;
        if self.placements > self.opts.limits.max_placements {
            return Err(limit("placements", self.opts.limits.max_placements));
        }
        Ok(())
    }

    fn enter(&mut self, placement: &Placement) -> Result<(), FlattenError> {
        self.path.push(placement.cell);
        self.own_shapes(placement.cell, &placement.transform)
    }

    fn leave(&mut self) {
        self.path.pop();
    }
}
