//! Integer geometry shared by every layout format and by the engine.

use serde::{Deserialize, Serialize};

/// A point in database units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Point {
    /// X coordinate (dbu).
    pub x: i64,
    /// Y coordinate (dbu).
    pub y: i64,
}

impl Point {
    /// Builds a point.
    #[must_use]
    pub const fn new(x: i64, y: i64) -> Self {
        Self { x, y }
    }
}

/// An axis-aligned box in database units; `left <= right`, `bottom <= top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BBox {
    /// Minimum x.
    pub left: i64,
    /// Minimum y.
    pub bottom: i64,
    /// Maximum x.
    pub right: i64,
    /// Maximum y.
    pub top: i64,
}

impl BBox {
    /// Builds a box from two corners in any order.
    #[must_use]
    pub fn from_corners(a: Point, b: Point) -> Self {
        Self {
            left: a.x.min(b.x),
            bottom: a.y.min(b.y),
            right: a.x.max(b.x),
            top: a.y.max(b.y),
        }
    }

    /// Width (dbu).
    #[must_use]
    pub const fn width(&self) -> i64 {
        self.right - self.left
    }

    /// Height (dbu).
    #[must_use]
    pub const fn height(&self) -> i64 {
        self.top - self.bottom
    }

    /// Smallest box holding both.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self {
            left: self.left.min(other.left),
            bottom: self.bottom.min(other.bottom),
            right: self.right.max(other.right),
            top: self.top.max(other.top),
        }
    }

    /// Whether the two boxes share interior area.
    #[must_use]
    pub const fn overlaps(&self, other: &Self) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.bottom < other.top
            && other.bottom < self.top
    }
}

/// A simple polygon (hull only, no holes) in database units.
///
/// Vertices are stored without repeating the first point at the end. Orientation is
/// not normalized by readers; use [`Polygon::signed_area2`] where it matters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Polygon {
    /// The vertices, open (first point not repeated).
    pub points: Vec<Point>,
}

impl Polygon {
    /// Builds a polygon from its vertices.
    #[must_use]
    pub const fn new(points: Vec<Point>) -> Self {
        Self { points }
    }

    /// An axis-aligned rectangle, counter-clockwise from the lower-left corner.
    #[must_use]
    pub fn rect(b: BBox) -> Self {
        Self::new(vec![
            Point::new(b.left, b.bottom),
            Point::new(b.right, b.bottom),
            Point::new(b.right, b.top),
            Point::new(b.left, b.top),
        ])
    }

    /// Twice the signed area (positive for counter-clockwise), exact in i128.
    #[must_use]
    pub fn signed_area2(&self) -> i128 {
        let n = self.points.len();
        let mut acc: i128 = 0;
        for i in 0..n {
            let a = self.points[i];
            let b = self.points[(i + 1) % n];
            // Each product fits i128; the running sum may not for hostile coordinates, so
            // it wraps (the result is exact whenever the true area fits).
            acc = acc.wrapping_add(
                i128::from(a.x) * i128::from(b.y) - i128::from(b.x) * i128::from(a.y),
            );
        }
        acc
    }

    /// Bounding box; `None` for an empty polygon.
    #[must_use]
    pub fn bbox(&self) -> Option<BBox> {
        let first = *self.points.first()?;
        Some(
            self.points
                .iter()
                .fold(BBox::from_corners(first, first), |b, p| {
                    b.union(&BBox::from_corners(*p, *p))
                }),
        )
    }
}
