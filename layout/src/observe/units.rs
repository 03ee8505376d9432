//! Seed 003 shared types and unit conversions: microns rounded to 6 decimals, integer dbu.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::error::ObserveError;
use crate::geom::{BBox, Point};
use crate::model::{LayerKey, Library};
use crate::transform::COORD_LIMIT;

/// Rounds a micron value to 6 decimals (seed 003 "Determinism Rules").
#[must_use]
pub fn round_um(v: f64) -> f64 {
    let r = (v * 1e6).round() / 1e6;
    if r == 0.0 { 0.0 } else { r } // no "-0.0" on the wire
}

/// A dbu length in microns, rounded.
#[must_use]
pub fn dbu_to_um(v: f64, dbu_um: f64) -> f64 {
    round_um(v * dbu_um)
}

/// Seed 003 `MicronBox`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MicronBox {
    /// Minimum x (µm).
    pub left: f64,
    /// Minimum y (µm).
    pub bottom: f64,
    /// Maximum x (µm).
    pub right: f64,
    /// Maximum y (µm).
    pub top: f64,
}

impl MicronBox {
    /// The box of `b` in microns, rounded.
    #[must_use]
    pub fn from_dbu(b: &BBox, dbu_um: f64) -> Self {
        Self {
            left: dbu_to_um(b.left as f64, dbu_um),
            bottom: dbu_to_um(b.bottom as f64, dbu_um),
            right: dbu_to_um(b.right as f64, dbu_um),
            top: dbu_to_um(b.top as f64, dbu_um),
        }
    }

    /// Validates a caller's box and converts it to dbu (each edge rounded to the nearest dbu).
    ///
    /// # Errors
    /// [`ObserveError::InvalidBox`] when an edge is not finite or out of range, or the box is
    /// inverted or empty (after rounding to the grid).
    pub fn to_dbu(&self, dbu_um: f64) -> Result<BBox, ObserveError> {
        let bad = |reason: &str| ObserveError::InvalidBox {
            reason: reason.to_owned(),
        };
        let edges = [self.left, self.bottom, self.right, self.top];
        if edges.iter().any(|v| !v.is_finite()) {
            return Err(bad("edges must be finite numbers"));
        }
        if self.left >= self.right || self.bottom >= self.top {
            return Err(bad("need left < right and bottom < top"));
        }
        if !(dbu_um.is_finite() && dbu_um > 0.0) {
            return Err(bad("layout has no valid database unit"));
        }
        let mut out = [0i64; 4];
        for (o, v) in out.iter_mut().zip(edges) {
            let d = (v / dbu_um).round();
            if d.abs() > COORD_LIMIT as f64 {
                return Err(bad("edge outside the coordinate range"));
            }
            *o = d as i64;
        }
        let b = BBox {
            left: out[0],
            bottom: out[1],
            right: out[2],
            top: out[3],
        };
        if b.left >= b.right || b.bottom >= b.top {
            return Err(bad("box is smaller than one database unit"));
        }
        Ok(b)
    }
}

/// A box in integer dbu (seed 003 `bbox_dbu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbuBox {
    /// Minimum x (dbu).
    pub left: i64,
    /// Minimum y (dbu).
    pub bottom: i64,
    /// Maximum x (dbu).
    pub right: i64,
    /// Maximum y (dbu).
    pub top: i64,
}

impl From<BBox> for DbuBox {
    fn from(b: BBox) -> Self {
        Self {
            left: b.left,
            bottom: b.bottom,
            right: b.right,
            top: b.top,
        }
    }
}

/// A point in microns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MicronPoint {
    /// X (µm).
    pub x: f64,
    /// Y (µm).
    pub y: f64,
}

impl MicronPoint {
    /// A real dbu point in microns, rounded.
    #[must_use]
    pub fn from_dbu(x: f64, y: f64, dbu_um: f64) -> Self {
        Self {
            x: dbu_to_um(x, dbu_um),
            y: dbu_to_um(y, dbu_um),
        }
    }
}

/// A point in integer dbu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbuPoint {
    /// X (dbu).
    pub x: i64,
    /// Y (dbu).
    pub y: i64,
}

impl From<Point> for DbuPoint {
    fn from(p: Point) -> Self {
        Self { x: p.x, y: p.y }
    }
}

/// Seed 003's `LayerRef` (a layer as the observer names it): `name` optional on input and output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedLayer {
    /// Layer number.
    pub layer: u32,
    /// Datatype.
    pub datatype: u32,
    /// Layer name, when the layout names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ObservedLayer {
    /// The reference for `key`, named from the library's layer names.
    #[must_use]
    pub fn named(lib: &Library, key: LayerKey) -> Self {
        Self {
            layer: key.layer,
            datatype: key.datatype,
            name: layer_name(lib, key),
        }
    }

    /// The (layer, datatype) key.
    #[must_use]
    pub const fn key(&self) -> LayerKey {
        LayerKey::new(self.layer, self.datatype)
    }
}

/// The name the layout gives `key` (OASIS LAYERNAME; geometry names win over text names).
#[must_use]
pub fn layer_name(lib: &Library, key: LayerKey) -> Option<String> {
    let covers = |n: &&crate::model::LayerName| {
        (n.layers.0..=n.layers.1).contains(&key.layer)
            && (n.datatypes.0..=n.datatypes.1).contains(&key.datatype)
    };
    lib.layer_names
        .iter()
        .filter(covers)
        .find(|n| !n.text)
        .or_else(|| lib.layer_names.iter().find(|n| covers(n)))
        .map(|n| n.name.clone())
}

/// Validates a caller's layer filter against the layers the layout has. `None` or an empty
/// list means all layers.
///
/// # Errors
/// [`ObserveError::InvalidLayer`] for the first reference the layout lacks.
pub fn layer_filter(
    lib: &Library,
    layers: Option<&[ObservedLayer]>,
) -> Result<Option<BTreeSet<LayerKey>>, ObserveError> {
    let Some(layers) = layers.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let known: BTreeSet<LayerKey> = lib.layers().into_iter().collect();
    let mut out = BTreeSet::new();
    for l in layers {
        if !known.contains(&l.key()) {
            return Err(ObserveError::InvalidLayer {
                layer: l.layer,
                datatype: l.datatype,
            });
        }
        out.insert(l.key());
    }
    Ok(Some(out))
}
