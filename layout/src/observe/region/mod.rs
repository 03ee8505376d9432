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
//!
//! Files: the request, payload and locator types and [`query_region`] here; placed shapes,
//! their ids and [`resolve`] in `placed`; the hierarchy walk ([`visit_shapes`],
//! [`find_by_id`]) in `walk`; the bounded sorted lists in `top_n`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cells::{ArrayInfo, TransformInfo, instance_name, transform_info};
use super::error::ObserveError;
use super::units::{
    DbuBox, DbuPoint, MicronBox, MicronPoint, ObservedLayer, dbu_to_um, layer_filter,
};
use crate::model::{Library, Shape};

mod placed;
mod top_n;
mod walk;

pub use placed::{PlacedGeometry, PlacedShape, resolve, resolve_ids, shape_id};
use top_n::{SortKey, TopN};
pub use walk::{find_by_id, visit_shapes};

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
    pub layers: Option<Vec<ObservedLayer>>,
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
    pub layer: ObservedLayer,
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
    pub layer: ObservedLayer,
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionOutcome {
    /// What goes on the wire.
    pub payload: RegionPayload,
    /// id → locator, for the ids listed in the payload.
    pub locators: BTreeMap<String, ShapeLocator>,
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
            layer: ObservedLayer::named(lib, s.key),
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
            layer: ObservedLayer::named(lib, s.key),
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
