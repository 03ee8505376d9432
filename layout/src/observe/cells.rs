//! Cells: the top-cell rule, `list_cells`, `describe_cell`, and the layout summary that
//! `open_layout` returns.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::error::ObserveError;
use super::units::{DbuBox, DbuPoint, MicronBox, MicronPoint, ObservedLayer, dbu_to_um, round_um};
use crate::geom::{BBox, Point};
use crate::model::{Instance, LayerKey, Library, Repetition, Shape};
use crate::stats::flat_shape_counts;

/// The deepest `describe_cell` will look, whatever the caller asks.
pub const MAX_DESCRIBE_DEPTH: u32 = 16;
/// Most instances `describe_cell` lists (the rest are counted in its truncation).
pub const MAX_DESCRIBE_INSTANCES: usize = 1000;
/// Most labels `describe_cell` lists.
pub const MAX_DESCRIBE_LABELS: usize = 1000;

/// The cell a session works on, per seed 003's `open_layout` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopCellSelection {
    /// Index of the selected cell in `lib.cells` (not serialized).
    #[serde(skip)]
    pub index: usize,
    /// `selected_top_cell`.
    pub selected_top_cell: String,
    /// `top_cells`: every cell no other cell places, sorted by name.
    pub top_cells: Vec<String>,
}

/// Applies seed 003's top-cell rule: the requested cell when given (any cell of the layout
/// may be chosen), else the alphabetically first top cell.
///
/// # Errors
/// [`ObserveError::CellNotFound`] (`TOP_CELL_NOT_FOUND`) when the requested cell is missing
/// or the layout has no cells.
pub fn select_top_cell(
    lib: &Library,
    requested: Option<&str>,
) -> Result<TopCellSelection, ObserveError> {
    let top_cells: Vec<String> = lib
        .top_cells()
        .iter()
        .map(|&i| lib.cells[i].name.clone())
        .collect();
    let index = match requested {
        Some(name) => lib.cell_index(name),
        None => lib.top_cells().first().copied(),
    }
    .ok_or_else(|| ObserveError::CellNotFound {
        cell: requested.unwrap_or_default().to_owned(),
    })?;
    Ok(TopCellSelection {
        index,
        selected_top_cell: lib.cells[index].name.clone(),
        top_cells,
    })
}

/// Index of a cell named by a request, or the session's selected cell when `None`.
///
/// # Errors
/// [`ObserveError::CellNotFound`].
pub fn cell_by_name(lib: &Library, name: &str) -> Result<usize, ObserveError> {
    lib.cell_index(name)
        .ok_or_else(|| ObserveError::CellNotFound {
            cell: name.to_owned(),
        })
}

/// The layout facts of seed 003's `open_layout` response (the host adds `session_id`,
/// `source` and `artifact_root`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutSummary {
    /// The selected top cell.
    pub selected_top_cell: String,
    /// All top cells, sorted.
    pub top_cells: Vec<String>,
    /// Database unit in microns.
    pub dbu: f64,
    /// Box of the selected cell (null for an empty cell).
    pub bbox_um: Option<MicronBox>,
    /// Box of the selected cell in dbu (null for an empty cell).
    pub bbox_dbu: Option<DbuBox>,
    /// Number of distinct (layer, datatype) pairs in the layout.
    pub layer_count: usize,
}

/// Builds the `open_layout` summary.
///
/// # Errors
/// [`ObserveError::CellNotFound`] per [`select_top_cell`].
pub fn layout_summary(
    lib: &Library,
    requested_top: Option<&str>,
) -> Result<LayoutSummary, ObserveError> {
    let sel = select_top_cell(lib, requested_top)?;
    let bb = super::boxes::CellBoxes::new(lib)?.cell(sel.index);
    Ok(LayoutSummary {
        selected_top_cell: sel.selected_top_cell,
        top_cells: sel.top_cells,
        dbu: lib.dbu_um(),
        bbox_um: bb.map(|b| MicronBox::from_dbu(&b, lib.dbu_um())),
        bbox_dbu: bb.map(DbuBox::from),
        layer_count: lib.layers().len(),
    })
}

/// One entry of `list_cells`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellEntry {
    /// Cell name.
    pub name: String,
    /// Whether no other cell places it.
    pub is_top: bool,
    /// Hierarchical box (KLayout semantics); null for an empty cell.
    pub bbox_um: Option<MicronBox>,
    /// The same box in dbu.
    pub bbox_dbu: Option<DbuBox>,
    /// Instance records held directly (an array counts once, as KLayout counts them).
    pub child_instance_count: usize,
    /// Shapes (texts included) held directly.
    pub shape_count: usize,
    /// Hierarchy depth below the session's cell (0 for it); absent for cells it does not
    /// reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
}

/// `list_cells`: every cell, sorted by name; with `max_depth`, only cells the session's cell
/// `root` reaches within that many levels (the root is level 0).
///
/// # Errors
/// [`ObserveError::Internal`] for a broken hierarchy (readers reject those).
pub fn list_cells(
    lib: &Library,
    root: usize,
    max_depth: Option<u32>,
) -> Result<Vec<CellEntry>, ObserveError> {
    let boxes = super::boxes::CellBoxes::new(lib)?;
    let depths = min_depths(lib, root);
    let tops: BTreeSet<usize> = lib.top_cells().into_iter().collect();
    let mut out: Vec<CellEntry> = lib
        .cells
        .iter()
        .enumerate()
        .filter(|(i, _)| max_depth.is_none_or(|m| depths.get(i).is_some_and(|d| *d <= m)))
        .map(|(i, c)| CellEntry {
            name: c.name.clone(),
            is_top: tops.contains(&i),
            bbox_um: boxes.cell(i).map(|b| MicronBox::from_dbu(&b, lib.dbu_um())),
            bbox_dbu: boxes.cell(i).map(DbuBox::from),
            child_instance_count: c.instances.len(),
            shape_count: c.shape_count(),
            depth: depths.get(&i).copied(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Shortest placement depth of every cell reachable from `root` (breadth-first).
fn min_depths(lib: &Library, root: usize) -> BTreeMap<usize, u32> {
    let mut depths = BTreeMap::from([(root, 0u32)]);
    let mut frontier = vec![root];
    let mut d = 0;
    while !frontier.is_empty() {
        d += 1;
        let mut next = Vec::new();
        for c in frontier {
            for inst in &lib.cells[c].instances {
                if inst.cell < lib.cells.len() && !depths.contains_key(&inst.cell) {
                    depths.insert(inst.cell, d);
                    next.push(inst.cell);
                }
            }
        }
        frontier = next;
    }
    depths
}

/// Placement transform as seed 003 reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransformInfo {
    /// Translation x (µm).
    pub x_um: f64,
    /// Translation y (µm).
    pub y_um: f64,
    /// Translation (dbu).
    pub offset_dbu: DbuPoint,
    /// Counter-clockwise rotation (degrees).
    pub rotation_deg: f64,
    /// Mirrored about the x axis before rotating.
    pub mirror_x: bool,
    /// Magnification.
    pub magnification: f64,
}

/// Array (repetition) facts of an instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArrayInfo {
    /// A regular lattice.
    Regular {
        /// Columns.
        columns: u32,
        /// Rows.
        rows: u32,
        /// Column displacement (µm).
        column_step_um: MicronPoint,
        /// Row displacement (µm).
        row_step_um: MicronPoint,
        /// Column displacement (dbu).
        column_step_dbu: DbuPoint,
        /// Row displacement (dbu).
        row_step_dbu: DbuPoint,
        /// Total copies.
        count: u64,
    },
    /// Arbitrary displacements (OASIS).
    Explicit {
        /// Total copies.
        count: u64,
    },
}

/// The transform and array facts of an instance.
pub(crate) fn transform_info(inst: &Instance, dbu_um: f64) -> (TransformInfo, Option<ArrayInfo>) {
    let t = &inst.transform;
    let info = TransformInfo {
        x_um: dbu_to_um(t.offset.x as f64, dbu_um),
        y_um: dbu_to_um(t.offset.y as f64, dbu_um),
        offset_dbu: t.offset.into(),
        rotation_deg: round_um(t.rotation_deg),
        mirror_x: t.mirror_x,
        magnification: t.magnification,
    };
    let array = inst.repetition.as_ref().map(|r| match r {
        Repetition::Array {
            cols,
            rows,
            col_step,
            row_step,
        } => ArrayInfo::Regular {
            columns: *cols,
            rows: *rows,
            column_step_um: MicronPoint::from_dbu(col_step.x as f64, col_step.y as f64, dbu_um),
            row_step_um: MicronPoint::from_dbu(row_step.x as f64, row_step.y as f64, dbu_um),
            column_step_dbu: (*col_step).into(),
            row_step_dbu: (*row_step).into(),
            count: r.count(),
        },
        Repetition::Explicit(_) => ArrayInfo::Explicit { count: r.count() },
    });
    (info, array)
}

/// The name of instance `idx` of a cell placing `child`: `CHILD#idx` (GDSII instances have
/// no names; the index makes it unique within the parent and stable for a given file).
#[must_use]
pub fn instance_name(child: &str, idx: usize) -> String {
    format!("{child}#{idx}")
}

/// One instance in `describe_cell`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceEntry {
    /// `CHILD#index` (see [`instance_name`]).
    pub name: String,
    /// The placed cell.
    pub child_cell: String,
    /// The cell holding the instance (the described cell at level 1).
    pub parent_cell: String,
    /// Hierarchy level below the described cell (1 = direct child).
    pub level: u32,
    /// Array facts; null for a single placement.
    pub array: Option<ArrayInfo>,
    /// Placement transform (in the parent's coordinates).
    pub transform: TransformInfo,
    /// Box of all copies in the parent's coordinates; null when the child is empty.
    pub bbox_um: Option<MicronBox>,
    /// The same box in dbu.
    pub bbox_dbu: Option<DbuBox>,
}

/// A text label held by the described cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelEntry {
    /// The string.
    pub text: String,
    /// Its layer (text type as datatype).
    pub layer: ObservedLayer,
    /// Anchor (µm).
    pub position_um: MicronPoint,
    /// Anchor (dbu).
    pub position_dbu: DbuPoint,
}

/// Shape counts of one layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerCount {
    /// Layer number.
    pub layer: u32,
    /// Datatype.
    pub datatype: u32,
    /// Layer name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Shapes held directly by the cell.
    pub shape_count: u64,
    /// Shapes of the flattened cell (every placement counted; saturating).
    pub flat_shape_count: u64,
}

/// Truncation of `describe_cell`'s lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DescribeTruncation {
    /// Instances not listed.
    pub instances_dropped: u64,
    /// Labels not listed.
    pub labels_dropped: u64,
}

/// `describe_cell` payload (the host adds `session_id`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellDescription {
    /// Cell name.
    pub cell: String,
    /// Hierarchical box; null for an empty cell.
    pub bbox_um: Option<MicronBox>,
    /// Same in dbu.
    pub bbox_dbu: Option<DbuBox>,
    /// Instance records down to `depth_used` levels, each cell's records listed once.
    pub instances: Vec<InstanceEntry>,
    /// Texts held directly, sorted by layer, position, string.
    pub labels: Vec<LabelEntry>,
    /// Per layer, sorted by (layer, datatype).
    pub shape_counts_by_layer: Vec<LayerCount>,
    /// The depth actually used (the request clamped to [1, `MAX_DESCRIBE_DEPTH`]).
    pub depth_used: u32,
    /// Always present.
    pub truncation: DescribeTruncation,
}

/// `describe_cell` for the cell named `name` (default depth 1).
///
/// # Errors
/// [`ObserveError::CellNotFound`]; [`ObserveError::Internal`] for a broken hierarchy.
pub fn describe_cell(
    lib: &Library,
    name: &str,
    depth: Option<u32>,
) -> Result<CellDescription, ObserveError> {
    let ci = cell_by_name(lib, name)?;
    let dbu = lib.dbu_um();
    let boxes = super::boxes::CellBoxes::new(lib)?;
    let depth_used = depth.unwrap_or(1).clamp(1, MAX_DESCRIBE_DEPTH);

    let mut instances = Vec::new();
    let mut instances_dropped = 0u64;
    let mut seen = BTreeSet::from([ci]);
    let mut frontier = vec![ci];
    for level in 1..=depth_used {
        let mut next = Vec::new();
        for parent in frontier {
            for (idx, inst) in lib.cells[parent].instances.iter().enumerate() {
                if instances.len() >= MAX_DESCRIBE_INSTANCES {
                    instances_dropped += 1;
                } else {
                    let child = &lib.cells[inst.cell].name;
                    let (transform, array) = transform_info(inst, dbu);
                    let bb = boxes.instance(inst)?;
                    instances.push(InstanceEntry {
                        name: instance_name(child, idx),
                        child_cell: child.clone(),
                        parent_cell: lib.cells[parent].name.clone(),
                        level,
                        array,
                        transform,
                        bbox_um: bb.map(|b| MicronBox::from_dbu(&b, dbu)),
                        bbox_dbu: bb.map(DbuBox::from),
                    });
                }
                if seen.insert(inst.cell) {
                    next.push(inst.cell);
                }
            }
        }
        frontier = next;
    }

    let cell = &lib.cells[ci];
    let mut labels: Vec<(LayerKey, Point, &str)> = cell
        .shapes
        .iter()
        .flat_map(|(k, v)| {
            v.iter().filter_map(move |s| match s {
                Shape::Text(t) => Some((*k, t.position, t.string.as_str())),
                _ => None,
            })
        })
        .collect();
    labels.sort();
    let labels_dropped = labels.len().saturating_sub(MAX_DESCRIBE_LABELS) as u64;
    let labels = labels
        .into_iter()
        .take(MAX_DESCRIBE_LABELS)
        .map(|(k, p, s)| LabelEntry {
            text: s.to_owned(),
            layer: ObservedLayer::named(lib, k),
            position_um: MicronPoint::from_dbu(p.x as f64, p.y as f64, dbu),
            position_dbu: p.into(),
        })
        .collect();

    let flat = flat_shape_counts(lib, ci)?;
    let keys: BTreeSet<LayerKey> = cell.shapes.keys().chain(flat.keys()).copied().collect();
    let shape_counts_by_layer = keys
        .into_iter()
        .map(|k| LayerCount {
            layer: k.layer,
            datatype: k.datatype,
            name: super::units::layer_name(lib, k),
            shape_count: cell.shapes.get(&k).map_or(0, |v| v.len() as u64),
            flat_shape_count: flat.get(&k).copied().unwrap_or(0),
        })
        .filter(|c| c.shape_count > 0 || c.flat_shape_count > 0)
        .collect();

    let bb: Option<BBox> = boxes.cell(ci);
    Ok(CellDescription {
        cell: cell.name.clone(),
        bbox_um: bb.map(|b| MicronBox::from_dbu(&b, dbu)),
        bbox_dbu: bb.map(DbuBox::from),
        instances,
        labels,
        shape_counts_by_layer,
        depth_used,
        truncation: DescribeTruncation {
            instances_dropped,
            labels_dropped,
        },
    })
}
