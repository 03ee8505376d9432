//! Shapes placed in the query cell: their geometry, their content-derived ids, and
//! locators resolved back to them.

use std::collections::BTreeMap;

use blake2::digest::{Update, VariableOutput};

use super::{ShapeLocator, Step};
use crate::geom::{BBox, Point, Polygon};
use crate::hierarchy::child_transform;
use crate::model::{LayerKey, Library, PathEnds, Repetition, Shape};
use crate::observe::cells::instance_name;
use crate::observe::error::ObserveError;
use crate::transform::Affine;

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

pub(super) fn place_geometry(shape: &Shape, m: &Affine) -> Result<PlacedGeometry, ObserveError> {
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

pub(super) fn step_name(lib: &Library, parent: usize, step: Step) -> String {
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
