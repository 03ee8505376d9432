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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::geom::Polygon;
    use crate::model::{Cell, Path, PathEnds, Text, Transform};

    fn place(cell: usize, x: i64, y: i64, rot: f64) -> Instance {
        Instance {
            cell,
            transform: Transform {
                offset: Point::new(x, y),
                rotation_deg: rot,
                mirror_x: false,
                magnification: 1.0,
            },
            repetition: None,
        }
    }

    /// LEAF: box 1/0 (0,0)-(1000,500), text 10/0 "P" at (100,100), path 2/0 along x.
    /// TOP: LEAF at (0,0); LEAF rotated 90° at (5000,0); 2x3 array of LEAF at (0,10000)
    /// steps (2000,0),(0,1000); own box 1/0 (-500,-500)-(0,0). Z_EXTRA: unplaced, box 3/0.
    /// dbu 1 nm (0.001 µm).
    pub(crate) fn sample() -> Library {
        let mut lib = Library::new("T", 1e-9);
        let mut leaf = Cell::new("LEAF");
        leaf.push_shape(
            LayerKey::new(1, 0),
            Shape::Box(BBox::from_corners(Point::new(0, 0), Point::new(1000, 500))),
        );
        leaf.push_shape(
            LayerKey::new(10, 0),
            Shape::Text(Text {
                string: "P".into(),
                position: Point::new(100, 100),
            }),
        );
        leaf.push_shape(
            LayerKey::new(2, 0),
            Shape::Path(Path {
                spine: vec![Point::new(0, 250), Point::new(1000, 250)],
                width: 100,
                ends: PathEnds::Flush,
            }),
        );
        lib.cells.push(leaf);
        let mut top = Cell::new("TOP");
        top.instances.push(place(0, 0, 0, 0.0));
        top.instances.push(place(0, 5000, 0, 90.0));
        let mut arr = place(0, 0, 10_000, 0.0);
        arr.repetition = Some(Repetition::Array {
            cols: 2,
            rows: 3,
            col_step: Point::new(2000, 0),
            row_step: Point::new(0, 1000),
        });
        top.instances.push(arr);
        top.push_shape(
            LayerKey::new(1, 0),
            Shape::Polygon(Polygon::rect(BBox::from_corners(
                Point::new(-500, -500),
                Point::new(0, 0),
            ))),
        );
        lib.cells.push(top);
        let mut extra = Cell::new("Z_EXTRA");
        extra.push_shape(
            LayerKey::new(3, 0),
            Shape::Box(BBox::from_corners(Point::new(0, 0), Point::new(10, 10))),
        );
        lib.cells.push(extra);
        lib
    }

    #[test]
    fn top_cell_rule() {
        let lib = sample();
        let sel = select_top_cell(&lib, None).expect("top");
        assert_eq!(sel.selected_top_cell, "TOP");
        assert_eq!(sel.top_cells, ["TOP", "Z_EXTRA"]);
        let sel = select_top_cell(&lib, Some("Z_EXTRA")).expect("named");
        assert_eq!(sel.index, 2);
        let e = select_top_cell(&lib, Some("NOPE")).expect_err("missing");
        assert_eq!(e.code(), "TOP_CELL_NOT_FOUND");
        let empty = Library::new("E", 1e-9);
        assert_eq!(
            select_top_cell(&empty, None).expect_err("empty").code(),
            "TOP_CELL_NOT_FOUND"
        );
        let s = layout_summary(&lib, None).expect("summary");
        // TOP box: own (-500,-500); LEAF r90 at 5000 spans x 4500..5000, y 0..1000;
        // array reaches (2000+1000, 10000+2000+500).
        assert_eq!(
            s.bbox_dbu,
            Some(DbuBox {
                left: -500,
                bottom: -500,
                right: 5000,
                top: 12_500
            })
        );
        assert_eq!(s.layer_count, 4);
        assert_eq!(s.dbu, 0.001);
        let v = serde_json::to_value(&s).expect("json");
        assert_eq!(v["bbox_um"]["top"], 12.5);
        assert_eq!(v["bbox_um"]["left"], -0.5);
    }

    #[test]
    fn list_cells_sorted_with_counts() {
        let lib = sample();
        let cells = list_cells(&lib, 1, None).expect("cells");
        let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["LEAF", "TOP", "Z_EXTRA"]);
        assert!(!cells[0].is_top && cells[1].is_top && cells[2].is_top);
        assert_eq!(cells[1].child_instance_count, 3);
        assert_eq!(cells[1].shape_count, 1);
        assert_eq!(cells[0].shape_count, 3);
        assert_eq!(cells[0].depth, Some(1));
        assert_eq!(cells[2].depth, None);
        assert_eq!(
            cells[0].bbox_um,
            Some(MicronBox {
                left: 0.0,
                bottom: 0.0,
                right: 1.0,
                top: 0.5
            })
        );
        let shallow = list_cells(&lib, 1, Some(0)).expect("cells");
        assert_eq!(shallow.len(), 1);
        assert_eq!(shallow[0].name, "TOP");
        assert_eq!(list_cells(&lib, 1, Some(1)).expect("cells").len(), 2);
    }

    #[test]
    fn describe_top() {
        let lib = sample();
        let d = describe_cell(&lib, "TOP", None).expect("describe");
        assert_eq!(d.depth_used, 1);
        assert_eq!(d.instances.len(), 3);
        let names: Vec<&str> = d.instances.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["LEAF#0", "LEAF#1", "LEAF#2"]);
        // Rotated copy: (0,0)-(1000,500) rotated 90° → x -500..0, y 0..1000, then +5000.
        assert_eq!(
            d.instances[1].bbox_dbu,
            Some(DbuBox {
                left: 4500,
                bottom: 0,
                right: 5000,
                top: 1000
            })
        );
        assert_eq!(d.instances[1].transform.rotation_deg, 90.0);
        assert_eq!(
            d.instances[2].bbox_dbu,
            Some(DbuBox {
                left: 0,
                bottom: 10_000,
                right: 3000,
                top: 12_500
            })
        );
        let v = serde_json::to_value(&d.instances[2]).expect("json");
        assert_eq!(v["array"]["kind"], "regular");
        assert_eq!(v["array"]["columns"], 2);
        assert_eq!(v["array"]["row_step_um"]["y"], 1.0);
        assert!(d.instances[0].array.is_none());
        assert!(d.labels.is_empty());
        let counts: Vec<(u32, u64, u64)> = d
            .shape_counts_by_layer
            .iter()
            .map(|c| (c.layer, c.shape_count, c.flat_shape_count))
            .collect();
        // LEAF is placed 1 + 1 + 6 = 8 times.
        assert_eq!(counts, [(1, 1, 9), (2, 0, 8), (10, 0, 8)]);
        let leaf = describe_cell(&lib, "LEAF", Some(99)).expect("leaf");
        assert_eq!(leaf.depth_used, MAX_DESCRIBE_DEPTH);
        assert_eq!(leaf.labels.len(), 1);
        assert_eq!(leaf.labels[0].text, "P");
        assert_eq!(leaf.labels[0].position_um, MicronPoint { x: 0.1, y: 0.1 });
        assert_eq!(
            describe_cell(&lib, "NOPE", None)
                .expect_err("missing")
                .code(),
            "TOP_CELL_NOT_FOUND"
        );
        // Depth 2 lists LEAF's (none) as well; a two-level chain lists both levels once.
        let mut chain = sample();
        let mut wrap = crate::model::Cell::new("WRAP");
        wrap.instances.push(place(1, 0, 0, 0.0));
        wrap.instances.push(place(1, 100_000, 0, 0.0));
        chain.cells.push(wrap);
        let d2 = describe_cell(&chain, "WRAP", Some(2)).expect("depth 2");
        let got: Vec<(u32, &str, &str)> = d2
            .instances
            .iter()
            .map(|i| (i.level, i.parent_cell.as_str(), i.name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "WRAP", "TOP#0"),
                (1, "WRAP", "TOP#1"),
                (2, "TOP", "LEAF#0"),
                (2, "TOP", "LEAF#1"),
                (2, "TOP", "LEAF#2"),
            ]
        );
        assert_eq!(d2.depth_used, 2);
        let v = serde_json::to_value(&d).expect("json");
        for f in [
            "cell",
            "bbox_um",
            "bbox_dbu",
            "instances",
            "labels",
            "shape_counts_by_layer",
            "depth_used",
        ] {
            assert!(v.get(f).is_some(), "missing {f}");
        }
        for f in ["name", "child_cell", "array", "transform", "bbox_um"] {
            assert!(v["instances"][0].get(f).is_some(), "instance missing {f}");
        }
    }
}
