//! The format-independent layout model: a library of cells holding shapes and
//! placements of other cells.
//!
//! GDSII and OASIS readers both produce a [`Library`]; [`crate::flatten()`] turns a cell of
//! it into polygons. Coordinates are integer database units (dbu).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::geom::{BBox, Point, Polygon};
use crate::path::path_outline;
use crate::transform::Affine;

/// A (layer, datatype) pair. Texts use their text type as the datatype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LayerKey {
    /// Layer number.
    pub layer: u32,
    /// Datatype (or text type for texts).
    pub datatype: u32,
}

impl LayerKey {
    /// Builds a key.
    #[must_use]
    pub const fn new(layer: u32, datatype: u32) -> Self {
        Self { layer, datatype }
    }
}

/// How the ends of a path are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathEnds {
    /// GDS pathtype 0: the outline ends flush with the first and last vertex.
    Flush,
    /// GDS pathtype 1: half-circle caps of radius width/2 (approximated by a polygon).
    Round,
    /// GDS pathtype 2: square caps extending width/2 past the end vertices.
    HalfWidth,
    /// GDS pathtype 4 and OASIS explicit extensions: the outline extends `begin` dbu before
    /// the first vertex and `end` dbu after the last (negative values shorten).
    Variable {
        /// Extension at the first vertex (dbu).
        begin: i64,
        /// Extension at the last vertex (dbu).
        end: i64,
    },
}

impl PathEnds {
    /// Begin and end extensions in dbu for a path of `width`; `None` for round ends.
    #[must_use]
    pub const fn extensions(&self, width: i64) -> Option<(i64, i64)> {
        match *self {
            Self::Flush => Some((0, 0)),
            Self::Round => None,
            Self::HalfWidth => Some((width / 2, width / 2)),
            Self::Variable { begin, end } => Some((begin, end)),
        }
    }
}

/// A wire: a spine of vertices drawn with a constant width.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Path {
    /// The centre line, at least one vertex.
    pub spine: Vec<Point>,
    /// Full width (dbu), non-negative.
    pub width: i64,
    /// End style.
    pub ends: PathEnds,
}

impl Path {
    /// The outline of the path as a polygon (mitred joins, ends per [`PathEnds`]),
    /// rounded to the nearest dbu. `None` for a zero-width or degenerate path.
    #[must_use]
    pub fn to_polygon(&self) -> Option<Polygon> {
        let outline = path_outline(self)?;
        Affine::IDENTITY.apply_points_f64(&outline).ok()
    }
}

/// A text label: kept for queries, never rasterized.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Text {
    /// The label string.
    pub string: String,
    /// Anchor position (dbu).
    pub position: Point,
}

/// One geometric element of a cell.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    /// A simple polygon.
    Polygon(Polygon),
    /// An axis-aligned box.
    Box(BBox),
    /// A path (wire).
    Path(Path),
    /// A text label.
    Text(Text),
}

impl Shape {
    /// Short kind name: `polygon`, `box`, `path` or `text`.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Polygon(_) => "polygon",
            Self::Box(_) => "box",
            Self::Path(_) => "path",
            Self::Text(_) => "text",
        }
    }

    /// Bounding box in the cell's coordinates (a text's is its anchor point).
    #[must_use]
    pub fn bbox(&self) -> Option<BBox> {
        match self {
            Self::Polygon(p) => p.bbox(),
            Self::Box(b) => Some(*b),
            Self::Path(p) => p.to_polygon().and_then(|q| q.bbox()),
            Self::Text(t) => Some(BBox::from_corners(t.position, t.position)),
        }
    }
}

/// Placement transform, applied in GDSII order: mirror about the x axis (if set), then
/// magnify, then rotate counter-clockwise, then translate by `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Transform {
    /// Translation (dbu).
    pub offset: Point,
    /// Counter-clockwise rotation in degrees (any angle).
    pub rotation_deg: f64,
    /// Mirror about the x axis before rotating.
    pub mirror_x: bool,
    /// Magnification (positive).
    pub magnification: f64,
}

impl Default for Transform {
    fn default() -> Self {
        Self::translation(Point::new(0, 0))
    }
}

impl Transform {
    /// A pure translation.
    #[must_use]
    pub const fn translation(offset: Point) -> Self {
        Self {
            offset,
            rotation_deg: 0.0,
            mirror_x: false,
            magnification: 1.0,
        }
    }

    /// The equivalent affine map.
    #[must_use]
    pub fn to_affine(&self) -> Affine {
        Affine::from_placement(
            self.offset,
            self.rotation_deg,
            self.mirror_x,
            self.magnification,
        )
    }
}

/// How an instance is repeated. Offsets are in the parent's coordinates and are added to
/// the instance's own translation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Repetition {
    /// A lattice: copies at `i * col_step + j * row_step` for `i < cols`, `j < rows`.
    Array {
        /// Number of columns (>= 1).
        cols: u32,
        /// Number of rows (>= 1).
        rows: u32,
        /// Displacement between columns (dbu).
        col_step: Point,
        /// Displacement between rows (dbu).
        row_step: Point,
    },
    /// Arbitrary displacements (OASIS irregular repetitions); the first is usually (0,0).
    Explicit(Vec<Point>),
}

impl Repetition {
    /// Number of copies, saturating at `u64::MAX`.
    #[must_use]
    pub fn count(&self) -> u64 {
        match self {
            Self::Array { cols, rows, .. } => u64::from(*cols) * u64::from(*rows),
            Self::Explicit(v) => v.len() as u64,
        }
    }

    /// The displacement of copy `k` (`k < count()`), in i128 so huge lattices cannot wrap.
    #[must_use]
    pub fn displacement(&self, k: u64) -> (i128, i128) {
        match self {
            Self::Array {
                cols,
                col_step,
                row_step,
                ..
            } => {
                let cols = u64::from((*cols).max(1));
                let (i, j) = (i128::from(k % cols), i128::from(k / cols));
                (
                    i * i128::from(col_step.x) + j * i128::from(row_step.x),
                    i * i128::from(col_step.y) + j * i128::from(row_step.y),
                )
            }
            Self::Explicit(v) => v
                .get(usize::try_from(k).unwrap_or(usize::MAX))
                .map_or((0, 0), |p| (i128::from(p.x), i128::from(p.y))),
        }
    }
}

/// A placement of another cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Index of the placed cell in [`Library::cells`].
    pub cell: usize,
    /// Placement transform.
    pub transform: Transform,
    /// Optional repetition (GDS AREF, OASIS repetitions).
    pub repetition: Option<Repetition>,
}

impl Instance {
    /// Number of placements this instance stands for.
    #[must_use]
    pub fn placement_count(&self) -> u64 {
        self.repetition.as_ref().map_or(1, Repetition::count)
    }
}

/// A named cell (GDS structure).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Cell {
    /// Cell name, unique in the library.
    pub name: String,
    /// Shapes grouped by (layer, datatype).
    pub shapes: BTreeMap<LayerKey, Vec<Shape>>,
    /// Placements of other cells.
    pub instances: Vec<Instance>,
}

impl Cell {
    /// An empty cell.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds a shape on a layer.
    pub fn push_shape(&mut self, key: LayerKey, shape: Shape) {
        self.shapes.entry(key).or_default().push(shape);
    }

    /// Number of shapes (texts included) held directly by this cell.
    #[must_use]
    pub fn shape_count(&self) -> usize {
        self.shapes.values().map(Vec::len).sum()
    }
}

/// A named layer (OASIS LAYERNAME), covering inclusive layer and datatype ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerName {
    /// The name.
    pub name: String,
    /// Inclusive layer range.
    pub layers: (u32, u32),
    /// Inclusive datatype range.
    pub datatypes: (u32, u32),
    /// Whether this names text layers (OASIS record 12) rather than geometry layers.
    pub text: bool,
}

/// A layout library: cells plus units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Library {
    /// Library name (GDS LIBNAME; OASIS has none, readers use "OASIS").
    pub name: String,
    /// Size of one database unit in meters (1e-9 for a 1 nm grid).
    pub dbu_in_meters: f64,
    /// Size of one database unit in user units (GDS UNITS first value, often 1e-3 µm).
    pub dbu_in_user_units: f64,
    /// Cells; instances refer to them by index.
    pub cells: Vec<Cell>,
    /// Layer names, when the format has them.
    pub layer_names: Vec<LayerName>,
}

impl Library {
    /// An empty library with the given dbu (meters) and user units of microns.
    #[must_use]
    pub fn new(name: impl Into<String>, dbu_in_meters: f64) -> Self {
        Self {
            name: name.into(),
            dbu_in_meters,
            dbu_in_user_units: dbu_in_meters * 1e6,
            cells: Vec::new(),
            layer_names: Vec::new(),
        }
    }

    /// Size of one dbu in microns, rounded to 1e-12 µm so that a unit stored as a ratio
    /// (OASIS: grid steps per micron) reads as the decimal it denotes (0.001, not
    /// 0.0009999999999999998).
    #[must_use]
    pub fn dbu_um(&self) -> f64 {
        (self.dbu_in_meters * 1e18).round() / 1e12
    }

    /// Index of the cell with this name.
    #[must_use]
    pub fn cell_index(&self, name: &str) -> Option<usize> {
        self.cells.iter().position(|c| c.name == name)
    }

    /// Indices of cells that no other cell places, sorted by name.
    #[must_use]
    pub fn top_cells(&self) -> Vec<usize> {
        let mut referenced = vec![false; self.cells.len()];
        for cell in &self.cells {
            for inst in &cell.instances {
                if let Some(r) = referenced.get_mut(inst.cell) {
                    *r = true;
                }
            }
        }
        let mut tops: Vec<usize> = (0..self.cells.len()).filter(|&i| !referenced[i]).collect();
        tops.sort_by(|&a, &b| self.cells[a].name.cmp(&self.cells[b].name));
        tops
    }

    /// All (layer, datatype) keys used by any cell, sorted.
    #[must_use]
    pub fn layers(&self) -> Vec<LayerKey> {
        let mut keys: Vec<LayerKey> = self
            .cells
            .iter()
            .flat_map(|c| c.shapes.keys().copied())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Checks that every instance refers to an existing cell and that the hierarchy has
    /// no cycle. Readers call this before returning a library.
    ///
    /// # Errors
    /// [`HierarchyError`] naming the offending cell.
    pub fn check_hierarchy(&self) -> Result<(), HierarchyError> {
        self.bottom_up_order().map(|_| ())
    }

    /// All cell indices ordered so that every cell comes after the cells it places
    /// (leaves first).
    ///
    /// # Errors
    /// [`HierarchyError`] for a dangling cell index or a cycle.
    pub fn bottom_up_order(&self) -> Result<Vec<usize>, HierarchyError> {
        let n = self.cells.len();
        for cell in &self.cells {
            if let Some(inst) = cell.instances.iter().find(|i| i.cell >= n) {
                return Err(HierarchyError::BadCellIndex {
                    parent: cell.name.clone(),
                    index: inst.cell,
                });
            }
        }
        // Iterative three-colour DFS: a hostile file cannot overflow the stack.
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let mut mark = vec![Mark::New; n];
        let mut order = Vec::with_capacity(n);
        for root in 0..n {
            if mark[root] != Mark::New {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            mark[root] = Mark::Open;
            while let Some(top) = stack.last_mut() {
                let (cell, next) = *top;
                if let Some(inst) = self.cells[cell].instances.get(next) {
                    top.1 += 1;
                    let child = inst.cell;
                    match mark[child] {
                        Mark::Open => {
                            return Err(HierarchyError::Recursive {
                                cell: self.cells[child].name.clone(),
                            });
                        }
                        Mark::New => {
                            mark[child] = Mark::Open;
                            stack.push((child, 0));
                        }
                        Mark::Done => {}
                    }
                } else {
                    mark[cell] = Mark::Done;
                    order.push(cell);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }
}

/// A structural problem of the cell hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HierarchyError {
    /// An instance refers to a cell index that does not exist.
    #[error("cell {parent:?} places cell index {index}, which does not exist")]
    BadCellIndex {
        /// The placing cell.
        parent: String,
        /// The bad index.
        index: usize,
    },
    /// A cell places itself, directly or through other cells.
    #[error("recursive hierarchy: cell {cell:?} places itself")]
    Recursive {
        /// A cell on the cycle.
        cell: String,
    },
}
