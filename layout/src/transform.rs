//! Affine maps used to place cells, with an exact integer fast path.
//!
//! A placement is stored in `f64`, but integer-valued maps (Manhattan rotations, mirrors,
//! integer magnifications, integer translations) compose exactly in `f64` as long as the
//! values stay below 2^53, and are then applied in `i128`, so Manhattan layouts flatten
//! without any rounding. Other maps (arbitrary angles, fractional magnification) round each
//! transformed vertex to the nearest dbu.

use crate::geom::{Point, Polygon};

/// Largest coordinate magnitude (dbu) a transformed vertex may have. Leaves head room so
/// that sums and products of coordinates elsewhere stay inside `i64`/`i128`.
pub const COORD_LIMIT: i64 = 1 << 62;

/// A transformed coordinate fell outside ±[`COORD_LIMIT`] or was not finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transformed coordinate out of range (limit ±2^62 dbu)")]
pub struct CoordinateOverflow;

/// `x' = xx·x + xy·y + dx`, `y' = yx·x + yy·y + dy`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    /// Row 0, column 0.
    pub xx: f64,
    /// Row 0, column 1.
    pub xy: f64,
    /// Row 1, column 0.
    pub yx: f64,
    /// Row 1, column 1.
    pub yy: f64,
    /// Translation x.
    pub dx: f64,
    /// Translation y.
    pub dy: f64,
}

/// Cosine and sine of an angle in degrees, exact for multiples of 90°.
#[must_use]
pub fn cos_sin_deg(angle_deg: f64) -> (f64, f64) {
    let a = angle_deg.rem_euclid(360.0);
    if a == 0.0 {
        (1.0, 0.0)
    } else if a == 90.0 {
        (0.0, 1.0)
    } else if a == 180.0 {
        (-1.0, 0.0)
    } else if a == 270.0 {
        (0.0, -1.0)
    } else {
        let r = a.to_radians();
        (r.cos(), r.sin())
    }
}

impl Affine {
    /// The identity map.
    pub const IDENTITY: Self = Self {
        xx: 1.0,
        xy: 0.0,
        yx: 0.0,
        yy: 1.0,
        dx: 0.0,
        dy: 0.0,
    };

    /// GDSII placement: mirror about x (optional), magnify, rotate CCW, translate.
    #[must_use]
    pub fn from_placement(offset: Point, rotation_deg: f64, mirror_x: bool, mag: f64) -> Self {
        let (c, s) = cos_sin_deg(rotation_deg);
        let m = if mirror_x { -1.0 } else { 1.0 };
        // Multiplying by exactly 1.0 keeps Manhattan entries exact.
        Self {
            xx: mag * c,
            xy: -mag * s * m,
            yx: mag * s,
            yy: mag * c * m,
            dx: offset.x as f64,
            dy: offset.y as f64,
        }
    }

    /// A translation.
    #[must_use]
    pub const fn translation(dx: f64, dy: f64) -> Self {
        Self {
            xx: 1.0,
            xy: 0.0,
            yx: 0.0,
            yy: 1.0,
            dx,
            dy,
        }
    }

    /// `self ∘ inner`: apply `inner` first, then `self`.
    #[must_use]
    pub fn then_inner(&self, inner: &Self) -> Self {
        Self {
            xx: self.xx * inner.xx + self.xy * inner.yx,
            xy: self.xx * inner.xy + self.xy * inner.yy,
            yx: self.yx * inner.xx + self.yy * inner.yx,
            yy: self.yx * inner.xy + self.yy * inner.yy,
            dx: self.xx * inner.dx + self.xy * inner.dy + self.dx,
            dy: self.yx * inner.dx + self.yy * inner.dy + self.dy,
        }
    }

    /// The inverse map; `None` when singular or not finite.
    #[must_use]
    pub fn inverse(&self) -> Option<Self> {
        let det = self.xx * self.yy - self.xy * self.yx;
        if det == 0.0 || !det.is_finite() {
            return None;
        }
        let (xx, xy, yx, yy) = (self.yy / det, -self.xy / det, -self.yx / det, self.xx / det);
        let inv = Self {
            xx,
            xy,
            yx,
            yy,
            dx: -(xx * self.dx + xy * self.dy),
            dy: -(yx * self.dx + yy * self.dy),
        };
        [inv.xx, inv.xy, inv.yx, inv.yy, inv.dx, inv.dy]
            .iter()
            .all(|v| v.is_finite())
            .then_some(inv)
    }

    /// Whether all six entries are integers small enough to be exact in `f64`.
    #[must_use]
    pub fn is_integral(&self) -> bool {
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        [self.xx, self.xy, self.yx, self.yy, self.dx, self.dy]
            .iter()
            .all(|v| v.fract() == 0.0 && v.abs() < EXACT)
    }

    /// Whether the map keeps axis-aligned rectangles axis-aligned.
    #[must_use]
    pub fn is_manhattan(&self) -> bool {
        (self.xy == 0.0 && self.yx == 0.0) || (self.xx == 0.0 && self.yy == 0.0)
    }

    /// Applies the map to a real point.
    #[must_use]
    pub fn apply_f64(&self, x: f64, y: f64) -> (f64, f64) {
        (
            self.xx * x + self.xy * y + self.dx,
            self.yx * x + self.yy * y + self.dy,
        )
    }

    /// Applies the map to an integer point: exact when [`Affine::is_integral`], else
    /// rounded to the nearest dbu (half away from zero).
    ///
    /// # Errors
    /// [`CoordinateOverflow`] when the result leaves ±[`COORD_LIMIT`].
    pub fn apply(&self, p: Point) -> Result<Point, CoordinateOverflow> {
        if self.is_integral() {
            // The entries are exact integers below 2^53, so the i128 products are exact.
            let (x, y) = (i128::from(p.x), i128::from(p.y));
            let nx = self.xx as i128 * x + self.xy as i128 * y + self.dx as i128;
            let ny = self.yx as i128 * x + self.yy as i128 * y + self.dy as i128;
            Ok(Point::new(to_coord_i128(nx)?, to_coord_i128(ny)?))
        } else {
            let (x, y) = self.apply_f64(p.x as f64, p.y as f64);
            Ok(Point::new(to_coord_f64(x)?, to_coord_f64(y)?))
        }
    }

    /// Applies the map to many points, checking [`Affine::is_integral`] once.
    ///
    /// # Errors
    /// [`CoordinateOverflow`] when a result leaves ±[`COORD_LIMIT`].
    pub fn apply_all(
        &self,
        pts: impl ExactSizeIterator<Item = Point>,
    ) -> Result<Vec<Point>, CoordinateOverflow> {
        let mut out = Vec::with_capacity(pts.len());
        if self.is_integral() {
            let m = [self.xx, self.xy, self.yx, self.yy, self.dx, self.dy].map(|v| v as i128);
            for p in pts {
                let (x, y) = (i128::from(p.x), i128::from(p.y));
                out.push(Point::new(
                    to_coord_i128(m[0] * x + m[1] * y + m[4])?,
                    to_coord_i128(m[2] * x + m[3] * y + m[5])?,
                ));
            }
        } else {
            for p in pts {
                let (x, y) = self.apply_f64(p.x as f64, p.y as f64);
                out.push(Point::new(to_coord_f64(x)?, to_coord_f64(y)?));
            }
        }
        Ok(out)
    }

    /// Transforms and rounds a list of real points into a polygon.
    ///
    /// # Errors
    /// [`CoordinateOverflow`] when a vertex leaves ±[`COORD_LIMIT`].
    pub fn apply_points_f64(&self, pts: &[(f64, f64)]) -> Result<Polygon, CoordinateOverflow> {
        let mut out = Vec::with_capacity(pts.len());
        for &(x, y) in pts {
            let (tx, ty) = self.apply_f64(x, y);
            out.push(Point::new(to_coord_f64(tx)?, to_coord_f64(ty)?));
        }
        Ok(Polygon::new(out))
    }
}

/// Rounds a real coordinate to the nearest dbu, checking the range.
///
/// # Errors
/// [`CoordinateOverflow`] for non-finite or out-of-range values.
pub fn to_coord_f64(v: f64) -> Result<i64, CoordinateOverflow> {
    let r = v.round();
    if r.is_finite() && r.abs() <= COORD_LIMIT as f64 {
        Ok(r as i64)
    } else {
        Err(CoordinateOverflow)
    }
}

/// Checks an exact coordinate's range.
///
/// # Errors
/// [`CoordinateOverflow`] outside ±[`COORD_LIMIT`].
pub fn to_coord_i128(v: i128) -> Result<i64, CoordinateOverflow> {
    if v.abs() <= i128::from(COORD_LIMIT) {
        Ok(v as i64)
    } else {
        Err(CoordinateOverflow)
    }
}
