//! `query_region`: shapes, instances and texts meeting a box, in three hierarchy modes, with
//! limits whose truncation metadata is always present; content-derived shape ids, and
//! [`ShapeLocator`]s that resolve an id back to its shape for measurements.
//!
//! Modes (seed 003 names them; their meaning is ours):
//! - `top`: only what the cell holds directly; `instances` are its instance records whose
//!   placement box meets the query box.
//! - `recursive`: shapes at every level, each with the cell holding it and the instance path
//!   from the query cell (`CELL`, then `CHILD#i` or `CHILD#i[col,row]` per level);
//!   `instances` as in `top` (the entry points into the hierarchy).
//! - `flattened`: the same shapes as `recursive`, reported as if merged into the query cell
//!   (`cell` is the query cell, `instance_path` is `[cell]`); no instances.
//!
//! Boxes of shapes are their full, unclipped boxes in the query cell's coordinates; a shape
//! is a hit when its box meets the query box (edges included). Shape ids hash the query
//! cell, the placement path, the layer, the shape's index and its content with BLAKE2b, so
//! the same query on a restarted worker gives the same ids, and a shape has one id in every
//! mode.

use std::collections::{BTreeMap, BTreeSet};

use blake2::digest::{Update, VariableOutput};
use serde::{Deserialize, Serialize};

use super::cells::{ArrayInfo, TransformInfo, instance_name, transform_info};
use super::error::ObserveError;
use super::units::{DbuBox, DbuPoint, LayerRef, MicronBox, MicronPoint, dbu_to_um, layer_filter};
use crate::geom::{BBox, Point, Polygon};
use crate::hierarchy::{Placement, PlacementVisitor, child_transform, walk_placements};
use crate::model::{LayerKey, Library, PathEnds, Repetition, Shape};
use crate::transform::Affine;

/// Default `max_shapes` when the request has none.
pub const DEFAULT_MAX_SHAPES: u64 = 200;
/// Default `max_instances` when the request has none.
pub const DEFAULT_MAX_INSTANCES: u64 = 100;
/// Hard maximum of `max_shapes`, `max_instances` and `max_texts`
/// (larger asks get `TOOL_LIMIT_EXCEEDED`).
pub const HARD_MAX_ITEMS: u64 = 10_000;

/// How much of the layout one query may visit before it fails with `QUERY_TOO_LARGE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryBudget {
    /// Shapes examined (hits or not).
    pub max_visited_shapes: u64,
    /// Cell placements entered.
    pub max_placements: u64,
    /// Deepest nesting below the query cell.
    pub max_depth: u32,
}

impl Default for QueryBudget {
    fn default() -> Self {
        Self {
            max_visited_shapes: 5_000_000,
            max_placements: 1_000_000,
            max_depth: 256,
        }
    }
}

/// `hierarchy_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HierarchyMode {
    /// The cell's own content only.
    Top,
    /// Every level, with provenance.
    #[default]
    Recursive,
    /// Every level, merged into the query cell.
    Flattened,
}

/// The `query_region` request. Unknown fields (e.g. `session_id`) are ignored here; the
/// host's input schema is the strict gate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RegionRequest {
    /// Query box (µm).
    #[serde(rename = "box")]
    pub box_um: MicronBox,
    /// Cell to query; `None` means the session's selected cell (the host fills it).
    #[serde(default)]
    pub cell: Option<String>,
    /// Layer filter; absent or empty means all layers.
    #[serde(default)]
    pub layers: Option<Vec<LayerRef>>,
    /// Hierarchy mode (default `recursive`).
    #[serde(default)]
    pub hierarchy_mode: HierarchyMode,
    /// Most shapes listed (default [`DEFAULT_MAX_SHAPES`]).
    #[serde(default)]
    pub max_shapes: Option<u64>,
    /// Most instances listed (default [`DEFAULT_MAX_INSTANCES`]).
    #[serde(default)]
    pub max_instances: Option<u64>,
    /// Most texts listed (default: `max_shapes`).
    #[serde(default)]
    pub max_texts: Option<u64>,
}

/// One hop of a placement path: instance `instance` of the current cell, copy `copy` of its
/// repetition (0 for a single placement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Step {
    /// Instance index in the parent cell.
    pub instance: usize,
    /// Copy index in the repetition (row-major: `row * cols + col`).
    pub copy: u64,
}

/// Where a shape lives: enough to find it again without searching (the host keeps one per
/// id it handed out, so measurements can resolve "previously queried" ids).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ShapeLocator {
    /// Query cell name.
    pub root: String,
    /// Placement path from the query cell to the cell holding the shape.
    pub steps: Vec<Step>,
    /// Layer number.
    pub layer: u32,
    /// Datatype.
    pub datatype: u32,
    /// Index of the shape in its cell's list for that layer.
    pub index: usize,
}

/// A shape hit (seed 003 `ShapeRef` plus `point_count` and `path_width_um`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeEntry {
    /// Content-derived id, `shp_` + 16 hex digits.
    pub id: String,
    /// `box`, `polygon` or `path`.
    pub kind: &'static str,
    /// Cell holding the shape (the query cell in `flattened` mode).
    pub cell: String,
    /// Query cell, then one `CHILD#i[col,row]` per level.
    pub instance_path: Vec<String>,
    /// Layer.
    pub layer: LayerRef,
    /// Box in the query cell's coordinates (µm).
    pub bbox_um: MicronBox,
    /// The same box (dbu).
    pub bbox_dbu: DbuBox,
    /// Vertices of the stored shape (a path's spine vertices, 4 for a box).
    pub point_count: usize,
    /// Full path width after placement (µm); paths only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_width_um: Option<f64>,
    /// The same width (dbu); paths only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_width_dbu: Option<i64>,
}

/// An instance hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceHit {
    /// `CHILD#i`.
    pub name: String,
    /// The placed cell.
    pub child_cell: String,
    /// `[query cell, name]`.
    pub instance_path: Vec<String>,
    /// Array facts; null for a single placement.
    pub array: Option<ArrayInfo>,
    /// Placement transform.
    pub transform: TransformInfo,
    /// Box of all copies (µm).
    pub bbox_um: MicronBox,
    /// The same box (dbu).
    pub bbox_dbu: DbuBox,
}

/// A text hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextHit {
    /// Content-derived id, `txt_` + 16 hex digits (usable as a measurement target).
    pub id: String,
    /// The string.
    pub text: String,
    /// Cell holding the text (the query cell in `flattened` mode).
    pub cell: String,
    /// As for shapes.
    pub instance_path: Vec<String>,
    /// Layer (text type as datatype).
    pub layer: LayerRef,
    /// Anchor (µm).
    pub position_um: MicronPoint,
    /// Anchor (dbu).
    pub position_dbu: DbuPoint,
}

/// Counts of everything that met the box (listed or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RegionSummary {
    /// Shapes (texts excluded).
    pub shape_count: u64,
    /// Instances.
    pub instance_count: u64,
    /// Texts.
    pub text_count: u64,
}

/// What the limits left out; always present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RegionTruncation {
    /// Shapes not listed.
    pub shapes_dropped: u64,
    /// Instances not listed.
    pub instances_dropped: u64,
    /// Texts not listed.
    pub texts_dropped: u64,
    /// `max_shapes` applied.
    pub max_shapes: u64,
    /// `max_instances` applied.
    pub max_instances: u64,
    /// `max_texts` applied.
    pub max_texts: u64,
}

/// The `query_region` payload (the host adds `session_id`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionPayload {
    /// The query box as given, rounded (µm).
    pub box_um: MicronBox,
    /// The query box on the grid (dbu).
    pub box_dbu: DbuBox,
    /// Database unit (µm).
    pub dbu: f64,
    /// Query cell.
    pub cell: String,
    /// Mode used.
    pub hierarchy_mode: HierarchyMode,
    /// Totals.
    pub summary: RegionSummary,
    /// Shapes sorted by layer, datatype, kind, bbox (left, bottom, right, top), id.
    pub shapes: Vec<ShapeEntry>,
    /// Instances sorted by child cell, bbox, name.
    pub instances: Vec<InstanceHit>,
    /// Texts sorted by layer, datatype, position, string, id.
    pub texts: Vec<TextHit>,
    /// Always present.
    pub truncation: RegionTruncation,
}

/// The payload plus a locator for every listed shape and text id.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionOutcome {
    /// What goes on the wire.
    pub payload: RegionPayload,
    /// id → locator, for the ids listed in the payload.
    pub locators: BTreeMap<String, ShapeLocator>,
}

/// A shape located by a walk or by [`resolve`], with its geometry in the query cell's
/// coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedShape {
    /// Content-derived id.
    pub id: String,
    /// Where it lives.
    pub locator: ShapeLocator,
    /// Cell holding it.
    pub cell: String,
    /// Query cell then `CHILD#i[..]` per level.
    pub instance_path: Vec<String>,
    /// Layer.
    pub key: LayerKey,
    /// The stored shape.
    pub shape: Shape,
    /// Map from the holding cell to the query cell.
    pub transform: Affine,
    /// Geometry in the query cell's coordinates.
    pub geometry: PlacedGeometry,
}

/// Placed geometry.
#[derive(Debug, Clone, PartialEq)]
pub enum PlacedGeometry {
    /// Outline of a box, polygon or path (rounded to the grid).
    Polygon(Polygon),
    /// A path whose outline is empty (zero width or degenerate spine).
    EmptyPath,
    /// A text anchor.
    Text(Point),
}

impl PlacedShape {
    /// Box of the placed geometry (a text's anchor; `None` for an empty path).
    #[must_use]
    pub fn bbox(&self) -> Option<BBox> {
        match &self.geometry {
            PlacedGeometry::Polygon(p) => p.bbox(),
            PlacedGeometry::EmptyPath => None,
            PlacedGeometry::Text(p) => Some(BBox::from_corners(*p, *p)),
        }
    }

    /// The placement's linear scale (magnification).
    #[must_use]
    pub fn scale(&self) -> f64 {
        let m = &self.transform;
        (m.xx * m.yy - m.xy * m.yx).abs().sqrt()
    }

    /// A path's spine in the query cell's coordinates (real, not rounded).
    #[must_use]
    pub fn spine(&self) -> Option<Vec<(f64, f64)>> {
        match &self.shape {
            Shape::Path(p) => Some(
                p.spine
                    .iter()
                    .map(|q| self.transform.apply_f64(q.x as f64, q.y as f64))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// A path's full width after placement (dbu).
    #[must_use]
    pub fn path_width(&self) -> Option<f64> {
        match &self.shape {
            Shape::Path(p) => Some(p.width.abs() as f64 * self.scale()),
            _ => None,
        }
    }
}

fn place_geometry(shape: &Shape, m: &Affine) -> Result<PlacedGeometry, ObserveError> {
    let corners = |b: &BBox| {
        [
            Point::new(b.left, b.bottom),
            Point::new(b.right, b.bottom),
            Point::new(b.right, b.top),
            Point::new(b.left, b.top),
        ]
    };
    Ok(match shape {
        Shape::Box(b) => {
            PlacedGeometry::Polygon(Polygon::new(m.apply_all(corners(b).into_iter())?))
        }
        Shape::Polygon(p) => {
            PlacedGeometry::Polygon(Polygon::new(m.apply_all(p.points.iter().copied())?))
        }
        Shape::Path(p) => match p.to_polygon() {
            Some(o) => PlacedGeometry::Polygon(Polygon::new(m.apply_all(o.points.into_iter())?)),
            None => PlacedGeometry::EmptyPath,
        },
        Shape::Text(t) => PlacedGeometry::Text(m.apply(t.position)?),
    })
}

fn step_name(lib: &Library, parent: usize, step: Step) -> String {
    let inst = &lib.cells[parent].instances[step.instance];
    let base = instance_name(&lib.cells[inst.cell].name, step.instance);
    match &inst.repetition {
        Some(Repetition::Array { cols, .. }) => {
            let c = u64::from((*cols).max(1));
            format!("{base}[{},{}]", step.copy % c, step.copy / c)
        }
        Some(Repetition::Explicit(_)) => format!("{base}[{}]", step.copy),
        None => base,
    }
}

/// The content-derived id of a shape: BLAKE2b-64 over the query cell, the placement path
/// (instance index, child name, copy), the layer, the index and the shape's content.
#[must_use]
pub fn shape_id(lib: &Library, loc: &ShapeLocator, shape: &Shape) -> String {
    let Ok(mut h) = blake2::Blake2bVar::new(8) else {
        return String::new(); // 8 is a valid output size
    };
    let mut put = |b: &[u8]| {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(b"reticle.shape.v1");
    put(loc.root.as_bytes());
    let mut cell = lib.cell_index(&loc.root);
    for s in &loc.steps {
        put(&(s.instance as u64).to_le_bytes());
        put(&s.copy.to_le_bytes());
        let child = cell.and_then(|c| lib.cells[c].instances.get(s.instance).map(|i| i.cell));
        put(child.map_or(&b""[..], |c| lib.cells[c].name.as_bytes()));
        cell = child;
    }
    put(&loc.layer.to_le_bytes());
    put(&loc.datatype.to_le_bytes());
    put(&(loc.index as u64).to_le_bytes());
    let pts = |ps: &mut dyn Iterator<Item = Point>| {
        let mut v = Vec::new();
        for p in ps {
            v.extend_from_slice(&p.x.to_le_bytes());
            v.extend_from_slice(&p.y.to_le_bytes());
        }
        v
    };
    match shape {
        Shape::Box(b) => {
            put(b"box");
            put(&pts(&mut [
                Point::new(b.left, b.bottom),
                Point::new(b.right, b.top),
            ]
            .into_iter()));
        }
        Shape::Polygon(p) => {
            put(b"polygon");
            put(&pts(&mut p.points.iter().copied()));
        }
        Shape::Path(p) => {
            put(b"path");
            put(&pts(&mut p.spine.iter().copied()));
            put(&p.width.to_le_bytes());
            let ends: [i64; 3] = match p.ends {
                PathEnds::Flush => [0, 0, 0],
                PathEnds::Round => [1, 0, 0],
                PathEnds::HalfWidth => [2, 0, 0],
                PathEnds::Variable { begin, end } => [4, begin, end],
            };
            for e in ends {
                put(&e.to_le_bytes());
            }
        }
        Shape::Text(t) => {
            put(b"text");
            put(t.string.as_bytes());
            put(&pts(&mut std::iter::once(t.position)));
        }
    }
    let mut out = [0u8; 8];
    if h.finalize_variable(&mut out).is_err() {
        return String::new();
    }
    let prefix = if matches!(shape, Shape::Text(_)) {
        "txt_"
    } else {
        "shp_"
    };
    let mut s = String::from(prefix);
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Resolves a locator to its shape, recomputing its placement and id.
///
/// # Errors
/// [`ObserveError::InvalidTarget`] when the locator does not fit the layout;
/// [`ObserveError::QueryTooLarge`] on a coordinate overflow.
pub fn resolve(lib: &Library, loc: &ShapeLocator) -> Result<PlacedShape, ObserveError> {
    let bad = |reason: &str| ObserveError::InvalidTarget {
        id: String::new(),
        reason: reason.to_owned(),
    };
    let mut cell = lib
        .cell_index(&loc.root)
        .ok_or_else(|| bad("unknown cell"))?;
    let mut m = Affine::IDENTITY;
    let mut path = vec![loc.root.clone()];
    for s in &loc.steps {
        let inst = lib.cells[cell]
            .instances
            .get(s.instance)
            .ok_or_else(|| bad("unknown instance"))?;
        if s.copy >= inst.placement_count() {
            return Err(bad("unknown array copy"));
        }
        path.push(step_name(lib, cell, *s));
        m = child_transform(&m, inst, s.copy);
        cell = inst.cell;
    }
    let key = LayerKey::new(loc.layer, loc.datatype);
    let shape = lib.cells[cell]
        .shapes
        .get(&key)
        .and_then(|v| v.get(loc.index))
        .ok_or_else(|| bad("unknown shape"))?;
    Ok(PlacedShape {
        id: shape_id(lib, loc, shape),
        locator: loc.clone(),
        cell: lib.cells[cell].name.clone(),
        instance_path: path,
        key,
        shape: shape.clone(),
        transform: m,
        geometry: place_geometry(shape, &m)?,
    })
}

/// Resolves measurement targets by id through the locators a session recorded.
///
/// # Errors
/// [`ObserveError::InvalidTarget`] for an id with no locator, or one whose shape changed.
pub fn resolve_ids(
    lib: &Library,
    ids: &[String],
    locators: &BTreeMap<String, ShapeLocator>,
) -> Result<Vec<PlacedShape>, ObserveError> {
    ids.iter()
        .map(|id| {
            let loc = locators
                .get(id)
                .ok_or_else(|| ObserveError::InvalidTarget {
                    id: id.clone(),
                    reason: "unknown id: query it with query_region first".into(),
                })?;
            let s = resolve(lib, loc).map_err(|e| match e {
                ObserveError::InvalidTarget { reason, .. } => ObserveError::InvalidTarget {
                    id: id.clone(),
                    reason,
                },
                other => other,
            })?;
            if &s.id != id {
                return Err(ObserveError::InvalidTarget {
                    id: id.clone(),
                    reason: "the shape behind this id changed".into(),
                });
            }
            Ok(s)
        })
        .collect()
}

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

/// Sort key of listed shapes: layer, kind, bbox (texts: position, then string), id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    layer: LayerKey,
    kind: &'static str,
    coords: [i64; 4],
    text: String,
    id: String,
}

/// The `max` smallest entries by key, and how many were offered.
struct TopN {
    max: usize,
    seen: u64,
    heap: std::collections::BinaryHeap<(SortKey, HeapItem)>,
}

/// A shape in the heap; ordering is by the key alone.
struct HeapItem(PlacedShape);

impl PartialEq for HeapItem {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for HeapItem {}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapItem {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl TopN {
    fn new(max: u64) -> Self {
        Self {
            max: usize::try_from(max).unwrap_or(usize::MAX),
            seen: 0,
            heap: std::collections::BinaryHeap::new(),
        }
    }

    fn push(&mut self, key: SortKey, s: PlacedShape) {
        self.seen += 1;
        if self.max == 0 {
            return;
        }
        if self.heap.len() < self.max {
            self.heap.push((key, HeapItem(s)));
        } else if self.heap.peek().is_some_and(|(top, _)| key < *top) {
            self.heap.pop();
            self.heap.push((key, HeapItem(s)));
        }
    }

    fn into_sorted(self) -> Vec<PlacedShape> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|(_, s)| s.0)
            .collect()
    }
}

fn limit(what: &'static str, v: Option<u64>, default: u64) -> Result<u64, ObserveError> {
    let v = v.unwrap_or(default);
    if v > HARD_MAX_ITEMS {
        return Err(ObserveError::ToolLimitExceeded {
            what,
            requested: v,
            max: HARD_MAX_ITEMS,
        });
    }
    Ok(v)
}

/// `query_region` on the cell `req.cell` (the host fills in the session's cell when the
/// caller omits it).
///
/// # Errors
/// `TOP_CELL_NOT_FOUND`, `INVALID_BOX`, `INVALID_LAYER`, `TOOL_LIMIT_EXCEEDED` (limits above
/// [`HARD_MAX_ITEMS`]), `QUERY_TOO_LARGE` (budget).
pub fn query_region(
    lib: &Library,
    req: &RegionRequest,
    budget: &QueryBudget,
) -> Result<RegionOutcome, ObserveError> {
    let cell_name = match &req.cell {
        Some(c) => c.clone(),
        None => super::cells::select_top_cell(lib, None)?.selected_top_cell,
    };
    let root = super::cells::cell_by_name(lib, &cell_name)?;
    let dbu = lib.dbu_um();
    let clip = req.box_um.to_dbu(dbu)?;
    let layers = layer_filter(lib, req.layers.as_deref())?;
    let max_shapes = limit("max_shapes", req.max_shapes, DEFAULT_MAX_SHAPES)?;
    let max_instances = limit("max_instances", req.max_instances, DEFAULT_MAX_INSTANCES)?;
    let max_texts = limit("max_texts", req.max_texts, max_shapes)?;
    let mode = req.hierarchy_mode;

    // Keep only the first `max` of each list in sort order (bounded heaps), counting all.
    let mut shapes = TopN::new(max_shapes);
    let mut texts = TopN::new(max_texts);
    visit_shapes(
        lib,
        root,
        Some(clip),
        layers.as_ref(),
        mode != HierarchyMode::Top,
        budget,
        &mut |s| {
            let b = s
                .bbox()
                .map_or([0; 4], |b| [b.left, b.bottom, b.right, b.top]);
            if let Shape::Text(t) = &s.shape {
                let key = SortKey {
                    layer: s.key,
                    kind: "",
                    coords: [b[0], b[1], 0, 0],
                    text: t.string.clone(),
                    id: s.id.clone(),
                };
                texts.push(key, s);
            } else {
                let key = SortKey {
                    layer: s.key,
                    kind: s.shape.kind(),
                    coords: b,
                    text: String::new(),
                    id: s.id.clone(),
                };
                shapes.push(key, s);
            }
        },
    )?;
    let (shape_total, text_total) = (shapes.seen, texts.seen);
    let (shapes, texts) = (shapes.into_sorted(), texts.into_sorted());

    let flat = mode == HierarchyMode::Flattened;
    let provenance = |s: &PlacedShape| -> (String, Vec<String>) {
        if flat {
            (cell_name.clone(), vec![cell_name.clone()])
        } else {
            (s.cell.clone(), s.instance_path.clone())
        }
    };
    let mut locators = BTreeMap::new();
    let mut shape_entries = Vec::new();
    for s in shapes {
        let Some(bb) = s.bbox() else { continue };
        let (cell, instance_path) = provenance(&s);
        let width = s.path_width();
        let point_count = match &s.shape {
            Shape::Box(_) => 4,
            Shape::Polygon(p) => p.points.len(),
            Shape::Path(p) => p.spine.len(),
            Shape::Text(_) => 1,
        };
        shape_entries.push(ShapeEntry {
            id: s.id.clone(),
            kind: s.shape.kind(),
            cell,
            instance_path,
            layer: LayerRef::named(lib, s.key),
            bbox_um: MicronBox::from_dbu(&bb, dbu),
            bbox_dbu: bb.into(),
            point_count,
            path_width_um: width.map(|w| dbu_to_um(w, dbu)),
            path_width_dbu: width.map(|w| w.round() as i64),
        });
        locators.insert(s.id, s.locator);
    }
    let mut text_entries = Vec::new();
    for s in texts {
        let (PlacedGeometry::Text(p), Shape::Text(t)) = (&s.geometry, &s.shape) else {
            continue;
        };
        let (cell, instance_path) = provenance(&s);
        text_entries.push(TextHit {
            id: s.id.clone(),
            text: t.string.clone(),
            cell,
            instance_path,
            layer: LayerRef::named(lib, s.key),
            position_um: MicronPoint::from_dbu(p.x as f64, p.y as f64, dbu),
            position_dbu: (*p).into(),
        });
        locators.insert(s.id, s.locator);
    }

    let mut instances = Vec::new();
    if !flat {
        let boxes = super::boxes::CellBoxes::new(lib)?;
        for (idx, inst) in lib.cells[root].instances.iter().enumerate() {
            let Some(bb) = boxes.instance(inst)? else {
                continue;
            };
            if !(bb.left <= clip.right
                && clip.left <= bb.right
                && bb.bottom <= clip.top
                && clip.bottom <= bb.top)
            {
                continue;
            }
            let name = instance_name(&lib.cells[inst.cell].name, idx);
            let (transform, array) = transform_info(inst, dbu);
            instances.push(InstanceHit {
                instance_path: vec![cell_name.clone(), name.clone()],
                name,
                child_cell: lib.cells[inst.cell].name.clone(),
                array,
                transform,
                bbox_um: MicronBox::from_dbu(&bb, dbu),
                bbox_dbu: bb.into(),
            });
        }
        instances.sort_by(|a, b| {
            let k = |h: &InstanceHit| {
                (
                    h.child_cell.clone(),
                    [
                        h.bbox_dbu.left,
                        h.bbox_dbu.bottom,
                        h.bbox_dbu.right,
                        h.bbox_dbu.top,
                    ],
                )
            };
            k(a).cmp(&k(b)).then_with(|| a.name.cmp(&b.name))
        });
    }
    let instance_total = instances.len() as u64;
    instances.truncate(usize::try_from(max_instances).unwrap_or(usize::MAX));

    let payload = RegionPayload {
        box_um: MicronBox::from_dbu(&clip, dbu),
        box_dbu: clip.into(),
        dbu,
        cell: cell_name,
        hierarchy_mode: mode,
        summary: RegionSummary {
            shape_count: shape_total,
            instance_count: instance_total,
            text_count: text_total,
        },
        truncation: RegionTruncation {
            shapes_dropped: shape_total - shape_entries.len() as u64,
            instances_dropped: instance_total - instances.len() as u64,
            texts_dropped: text_total - text_entries.len() as u64,
            max_shapes,
            max_instances,
            max_texts,
        },
        shapes: shape_entries,
        instances,
        texts: text_entries,
    };
    Ok(RegionOutcome { payload, locators })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::cells::tests::sample;

    fn req(l: f64, b: f64, r: f64, t: f64, mode: HierarchyMode) -> RegionRequest {
        RegionRequest {
            box_um: MicronBox {
                left: l,
                bottom: b,
                right: r,
                top: t,
            },
            cell: Some("TOP".into()),
            layers: None,
            hierarchy_mode: mode,
            max_shapes: None,
            max_instances: None,
            max_texts: None,
        }
    }

    fn run(r: &RegionRequest) -> RegionOutcome {
        query_region(&sample(), r, &QueryBudget::default()).expect("query")
    }

    #[test]
    fn recursive_lower_left() {
        let out = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive));
        let p = &out.payload;
        let got: Vec<(u32, &str, [i64; 4], &str)> = p
            .shapes
            .iter()
            .map(|s| {
                let b = s.bbox_dbu;
                (
                    s.layer.layer,
                    s.kind,
                    [b.left, b.bottom, b.right, b.top],
                    s.cell.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, "box", [0, 0, 1000, 500], "LEAF"),
                (1, "polygon", [-500, -500, 0, 0], "TOP"),
                (2, "path", [0, 200, 1000, 300], "LEAF"),
            ]
        );
        assert_eq!(p.shapes[0].instance_path, ["TOP", "LEAF#0"]);
        assert_eq!(p.shapes[1].instance_path, ["TOP"]);
        assert_eq!(p.shapes[2].path_width_um, Some(0.1));
        assert_eq!(p.shapes[2].path_width_dbu, Some(100));
        assert_eq!(p.shapes[2].point_count, 2);
        assert_eq!(
            p.shapes[0].bbox_um,
            MicronBox {
                left: 0.0,
                bottom: 0.0,
                right: 1.0,
                top: 0.5
            }
        );
        assert_eq!(
            p.summary,
            RegionSummary {
                shape_count: 3,
                instance_count: 1,
                text_count: 1
            }
        );
        assert_eq!(p.instances.len(), 1);
        assert_eq!(p.instances[0].name, "LEAF#0");
        assert_eq!(p.texts[0].text, "P");
        assert_eq!(p.texts[0].position_um, MicronPoint { x: 0.1, y: 0.1 });
        assert_eq!(p.truncation.shapes_dropped, 0);
        for s in &p.shapes {
            assert!(s.id.starts_with("shp_") && s.id.len() == 20, "{}", s.id);
            assert_eq!(out.locators[&s.id].root, "TOP");
        }
        assert!(p.texts[0].id.starts_with("txt_"));
        let v = serde_json::to_value(p).expect("json");
        for f in [
            "box_um",
            "cell",
            "hierarchy_mode",
            "summary",
            "shapes",
            "instances",
            "texts",
        ] {
            assert!(v.get(f).is_some(), "missing {f}");
        }
        assert_eq!(v["hierarchy_mode"], "recursive");
        assert_eq!(v["truncation"]["shapes_dropped"], 0);
        assert_eq!(v["truncation"]["instances_dropped"], 0);
        assert_eq!(v["truncation"]["texts_dropped"], 0);
        assert!(v["shapes"][0].get("path_width_um").is_none());
        assert_eq!(v["shapes"][2]["path_width_um"], 0.1);
    }

    #[test]
    fn modes_top_and_flattened() {
        let rec = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive)).payload;
        let top = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Top)).payload;
        assert_eq!(top.shapes.len(), 1);
        assert_eq!(top.shapes[0].kind, "polygon");
        assert_eq!(top.instances.len(), 1);
        assert!(top.texts.is_empty());
        let flat = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Flattened)).payload;
        assert!(flat.instances.is_empty());
        assert_eq!(flat.summary.instance_count, 0);
        let ids = |p: &RegionPayload| p.shapes.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&flat), ids(&rec), "one id per shape in every mode");
        assert!(
            flat.shapes
                .iter()
                .all(|s| s.cell == "TOP" && s.instance_path == ["TOP"])
        );
        assert_eq!(top.shapes[0].id, rec.shapes[1].id);
    }

    #[test]
    fn array_copy_and_rotation() {
        let out = run(&req(2.1, 12.05, 2.2, 12.15, HierarchyMode::Recursive)).payload;
        assert_eq!(out.shapes.len(), 1);
        assert_eq!(out.shapes[0].instance_path, ["TOP", "LEAF#2[1,2]"]);
        assert_eq!(
            out.shapes[0].bbox_dbu,
            DbuBox {
                left: 2000,
                bottom: 12_000,
                right: 3000,
                top: 12_500
            }
        );
        assert_eq!(out.texts.len(), 1);
        assert_eq!(out.texts[0].position_dbu, DbuPoint { x: 2100, y: 12_100 });
        // Rotated copy: path spine (0,250)-(1000,250) → x = 4750, y 0..1000.
        let rot = run(&req(4.6, 0.0, 4.85, 1.0, HierarchyMode::Recursive)).payload;
        let path = rot.shapes.iter().find(|s| s.kind == "path").expect("path");
        assert_eq!(
            path.bbox_dbu,
            DbuBox {
                left: 4700,
                bottom: 0,
                right: 4800,
                top: 1000
            }
        );
        assert_eq!(path.instance_path, ["TOP", "LEAF#1"]);
    }

    #[test]
    fn truncation_and_filters() {
        let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
        r.max_shapes = Some(1);
        r.max_instances = Some(0);
        let p = run(&r).payload;
        assert_eq!(p.shapes.len(), 1);
        assert_eq!(p.summary.shape_count, 3);
        assert_eq!(p.truncation.shapes_dropped, 2);
        assert_eq!(p.truncation.instances_dropped, 1);
        assert_eq!(p.texts.len(), 1, "max_texts defaults to max_shapes");
        let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
        r.layers = Some(vec![LayerRef {
            layer: 2,
            datatype: 0,
            name: None,
        }]);
        let p = run(&r).payload;
        assert_eq!(p.shapes.len(), 1);
        assert_eq!(p.shapes[0].kind, "path");
        assert!(p.texts.is_empty());
    }

    #[test]
    fn huge_array_window_is_cheap_and_full_walk_is_refused() {
        // 100 000 × 100 000 copies of LEAF (10^10 placements); a small window visits a few.
        let mut lib = sample();
        lib.cells[1].instances[2].repetition = Some(Repetition::Array {
            cols: 100_000,
            rows: 100_000,
            col_step: Point::new(2000, 0),
            row_step: Point::new(0, 1000),
        });
        let budget = QueryBudget::default();
        // Copy (col 5000, row 79990) sits at (0, 10_000) + (5000·2000, 79990·1000) =
        // (10_000_000, 80_000_000) dbu.
        let r = req(
            10_000.1,
            80_000.05,
            10_000.2,
            80_000.15,
            HierarchyMode::Recursive,
        );
        let p = query_region(&lib, &r, &budget).expect("window").payload;
        assert_eq!(p.shapes.len(), 1);
        assert_eq!(p.shapes[0].instance_path, ["TOP", "LEAF#2[5000,79990]"]);
        assert_eq!(p.summary.instance_count, 1, "the array meets the box");
        let id = p.shapes[0].id.clone();
        let small = QueryBudget {
            max_placements: 20_000,
            ..budget
        };
        let e = find_by_id(&lib, 1, &id, &small).expect_err("too large");
        assert_eq!(e.code(), "QUERY_TOO_LARGE");
        let v = serde_json::to_value(&p.instances[0]).expect("json");
        assert_eq!(v["array"]["count"], 10_000_000_000u64);
    }

    #[test]
    fn truncation_keeps_the_first_in_order() {
        let all = run(&req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive)).payload;
        for n in [1u64, 4, 9, 16] {
            let mut r = req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive);
            r.max_shapes = Some(n);
            r.max_texts = Some(2);
            let p = run(&r).payload;
            assert_eq!(p.shapes[..], all.shapes[..n as usize]);
            assert_eq!(p.texts[..], all.texts[..2]);
            assert_eq!(p.truncation.shapes_dropped, 17 - n);
            assert_eq!(p.truncation.texts_dropped, 6);
        }
    }

    #[test]
    fn error_codes() {
        let lib = sample();
        let b = QueryBudget::default();
        let code = |r: &RegionRequest, b: &QueryBudget| {
            query_region(&lib, r, b).expect_err("error").code()
        };
        let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
        r.layers = Some(vec![LayerRef {
            layer: 7,
            datatype: 0,
            name: None,
        }]);
        assert_eq!(code(&r, &b), "INVALID_LAYER");
        assert_eq!(
            code(&req(1.0, 0.0, 0.0, 1.0, HierarchyMode::Top), &b),
            "INVALID_BOX"
        );
        let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
        r.max_shapes = Some(HARD_MAX_ITEMS + 1);
        assert_eq!(code(&r, &b), "TOOL_LIMIT_EXCEEDED");
        let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
        r.cell = Some("NOPE".into());
        assert_eq!(code(&r, &b), "TOP_CELL_NOT_FOUND");
        let tiny = QueryBudget {
            max_visited_shapes: 2,
            ..QueryBudget::default()
        };
        assert_eq!(
            code(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive), &tiny),
            "QUERY_TOO_LARGE"
        );
        let few = QueryBudget {
            max_placements: 3,
            ..QueryBudget::default()
        };
        assert_eq!(
            code(
                &req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive),
                &few
            ),
            "QUERY_TOO_LARGE"
        );
    }

    #[test]
    fn ids_resolve_and_are_deterministic() {
        let lib = sample();
        let r = req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive);
        let a = query_region(&lib, &r, &QueryBudget::default()).expect("a");
        let b = query_region(&lib.clone(), &r, &QueryBudget::default()).expect("b");
        assert_eq!(
            serde_json::to_string(&a.payload).expect("json"),
            serde_json::to_string(&b.payload).expect("json")
        );
        // 9 boxes/polygons + 8 paths, 8 texts, all distinct ids.
        assert_eq!(a.payload.summary.shape_count, 17);
        assert_eq!(a.locators.len(), 25);
        let ids: Vec<String> = a.locators.keys().cloned().collect();
        let resolved = resolve_ids(&lib, &ids, &a.locators).expect("resolve");
        for (id, s) in ids.iter().zip(&resolved) {
            assert_eq!(&s.id, id);
            let listed = a.payload.shapes.iter().find(|e| &e.id == id);
            if let Some(e) = listed {
                assert_eq!(s.bbox().map(DbuBox::from), Some(e.bbox_dbu));
            }
            let found = find_by_id(&lib, 1, id, &QueryBudget::default()).expect("walk");
            assert_eq!(found.map(|f| f.locator), Some(s.locator.clone()));
        }
        let e =
            resolve_ids(&lib, &["shp_0000000000000000".into()], &a.locators).expect_err("unknown");
        assert_eq!(e.code(), "INVALID_TARGET");
        // A locator whose shape changed no longer resolves to the id.
        let mut changed = lib.clone();
        if let Some(Shape::Box(b)) = changed.cells[0]
            .shapes
            .get_mut(&LayerKey::new(1, 0))
            .and_then(|v| v.first_mut())
        {
            b.right += 1;
        }
        let box_id = a.payload.shapes[0].id.clone();
        assert_eq!(
            resolve_ids(&changed, &[box_id], &a.locators)
                .expect_err("changed")
                .code(),
            "INVALID_TARGET"
        );
    }
}
