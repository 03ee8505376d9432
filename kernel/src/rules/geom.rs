//! Small exact-integer helpers for edges.

use reticle_layout::{BBox, Point};
use serde::{Deserialize, Serialize};

/// A directed segment in dbu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Edge {
    /// Start.
    pub p1: Point,
    /// End.
    pub p2: Point,
}

impl Edge {
    /// Builds an edge.
    #[must_use]
    pub const fn new(p1: Point, p2: Point) -> Self {
        Self { p1, p2 }
    }

    /// Bounding box.
    #[must_use]
    pub fn bbox(&self) -> BBox {
        BBox::from_corners(self.p1, self.p2)
    }

    /// The same edge, reversed.
    #[must_use]
    pub const fn reversed(&self) -> Self {
        Self::new(self.p2, self.p1)
    }
}

/// `a - b`, widened.
pub(crate) fn sub(a: Point, b: Point) -> (i128, i128) {
    (
        i128::from(a.x) - i128::from(b.x),
        i128::from(a.y) - i128::from(b.y),
    )
}

/// z of the cross product.
pub(crate) const fn cross(a: (i128, i128), b: (i128, i128)) -> i128 {
    a.0 * b.1 - a.1 * b.0
}

/// Dot product.
pub(crate) const fn dot(a: (i128, i128), b: (i128, i128)) -> i128 {
    a.0 * b.0 + a.1 * b.1
}
