//! OASIS primitive decoding: integers, reals, strings, deltas, point lists, repetitions.

use super::OasisError;

/// A position in a byte buffer (the file, or an inflated CBLOCK).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// File offset of the record being decoded (for errors).
    pub record_offset: u64,
    /// Whether `bytes` is an inflated CBLOCK.
    pub in_cblock: bool,
}

/// Displacement (dx, dy) in dbu.
pub type Delta = (i64, i64);

/// A decoded repetition, before it is turned into copies or a model repetition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rep {
    /// Lattice of `nx` × `ny` copies along two vectors.
    Lattice {
        /// Copies along `col`.
        nx: u64,
        /// Copies along `row`.
        ny: u64,
        /// First lattice vector.
        col: Delta,
        /// Second lattice vector.
        row: Delta,
    },
    /// Explicit displacements (first is (0,0)).
    List(Vec<Delta>),
}

impl Rep {
    /// Number of copies (saturating).
    pub fn count(&self) -> u64 {
        match self {
            Self::Lattice { nx, ny, .. } => nx.saturating_mul(*ny),
            Self::List(v) => v.len() as u64,
        }
    }
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub const fn new(bytes: &'a [u8], in_cblock: bool) -> Self {
        Self {
            bytes,
            pos: 0,
            record_offset: 0,
            in_cblock,
        }
    }

    /// Current position within the buffer.
    pub const fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub const fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Whether everything was consumed.
    pub const fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn truncated(&self) -> OasisError {
        OasisError::Truncated {
            offset: self.record_offset,
            in_cblock: self.in_cblock,
        }
    }

    /// An `InvalidValue` error at the current record.
    pub fn invalid(&self, what: &'static str, value: impl ToString) -> OasisError {
        OasisError::InvalidValue {
            offset: self.record_offset,
            what,
            value: value.to_string(),
        }
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8, OasisError> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    /// `n` raw bytes.
    pub fn take(&mut self, n: u64) -> Result<&'a [u8], OasisError> {
        let n = usize::try_from(n).map_err(|_| self.truncated())?;
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(s)
    }

    /// Unsigned integer: 7 bits per byte, least significant first, high bit continues.
    pub fn uint(&mut self) -> Result<u64, OasisError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift >= 64 || (shift > 57 && bits >> (64 - shift) != 0) {
                if bits != 0 {
                    return Err(OasisError::IntegerOverflow {
                        offset: self.record_offset,
                    });
                }
            } else {
                v |= bits << shift;
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift = shift.saturating_add(7);
        }
    }

    /// Signed integer: an unsigned integer whose lowest bit is the sign.
    pub fn sint(&mut self) -> Result<i64, OasisError> {
        let u = self.uint()?;
        let mag = (u >> 1) as i64; // < 2^63, fits
        Ok(if u & 1 == 1 { -mag } else { mag })
    }

    /// An unsigned integer that must fit in u32 (layers, datatypes, counts of 32 bits).
    pub fn uint32(&mut self, what: &'static str) -> Result<u32, OasisError> {
        let v = self.uint()?;
        u32::try_from(v).map_err(|_| self.invalid(what, v))
    }

    /// An unsigned integer used as a length or coordinate, which must fit in i64.
    pub fn uint_i64(&mut self, what: &'static str) -> Result<i64, OasisError> {
        let v = self.uint()?;
        i64::try_from(v).map_err(|_| self.invalid(what, v))
    }

    /// A real in one of the eight OASIS forms.
    pub fn real(&mut self) -> Result<f64, OasisError> {
        let kind = self.uint()?;
        self.real_of_kind(kind)
    }

    /// The body of a real whose type number was already read.
    pub fn real_of_kind(&mut self, kind: u64) -> Result<f64, OasisError> {
        let v = match kind {
            0 => self.uint()? as f64,
            1 => -(self.uint()? as f64),
            2 => 1.0 / self.uint()? as f64,
            3 => -1.0 / self.uint()? as f64,
            4 | 5 => {
                let (n, d) = (self.uint()? as f64, self.uint()? as f64);
                if kind == 4 { n / d } else { -n / d }
            }
            6 => {
                let b = self.take(4)?;
                f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            7 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                f64::from_le_bytes(a)
            }
            other => return Err(self.invalid("real type", other)),
        };
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.invalid("real value", v))
        }
    }

    /// A length-prefixed string (invalid UTF-8 is replaced).
    pub fn string(&mut self) -> Result<String, OasisError> {
        let n = self.uint()?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    /// A g-delta (general displacement).
    pub fn gdelta(&mut self) -> Result<Delta, OasisError> {
        let u = self.uint()?;
        if u & 1 == 0 {
            let dir = (u >> 1) & 7;
            let m = (u >> 4) as i64;
            Ok(octangular(dir, m))
        } else {
            let m = (u >> 2) as i64;
            let x = if u & 2 != 0 { -m } else { m };
            Ok((x, self.sint()?))
        }
    }

    /// A point list, as vertices relative to the element position (first is (0,0)).
    /// For polygons (`polygon = true`), types 0 and 1 get their implicit closing vertex.
    pub fn point_list(
        &mut self,
        polygon: bool,
        budget: &mut dyn FnMut(u64) -> Result<(), OasisError>,
    ) -> Result<Vec<Delta>, OasisError> {
        let kind = self.uint()?;
        let count = self.uint()?;
        budget(count.saturating_add(2))?;
        // Each delta takes at least one byte, so `remaining` bounds a sane count.
        let cap = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(self.remaining())
            + 2;
        let mut pts: Vec<Delta> = Vec::with_capacity(cap);
        pts.push((0, 0));
        let (mut x, mut y) = (0i64, 0i64);
        let add = |c: &Self, a: i64, b: i64| {
            a.checked_add(b)
                .ok_or_else(|| c.invalid("coordinate", "overflow"))
        };
        match kind {
            0 | 1 => {
                let mut horizontal = kind == 0;
                for _ in 0..count {
                    let d = self.sint()?;
                    if horizontal {
                        x = add(self, x, d)?;
                    } else {
                        y = add(self, y, d)?;
                    }
                    pts.push((x, y));
                    horizontal = !horizontal;
                }
                if polygon {
                    // Close with one more Manhattan vertex in the next direction.
                    pts.push(if horizontal { (0, y) } else { (x, 0) });
                }
            }
            2 | 3 => {
                for _ in 0..count {
                    let u = self.uint()?;
                    let (dx, dy) = if kind == 2 {
                        octangular(u & 3, (u >> 2) as i64)
                    } else {
                        octangular(u & 7, (u >> 3) as i64)
                    };
                    x = add(self, x, dx)?;
                    y = add(self, y, dy)?;
                    pts.push((x, y));
                }
            }
            4 | 5 => {
                let (mut ddx, mut ddy) = (0i64, 0i64);
                for _ in 0..count {
                    let (dx, dy) = self.gdelta()?;
                    let (sx, sy) = if kind == 5 {
                        ddx = add(self, ddx, dx)?;
                        ddy = add(self, ddy, dy)?;
                        (ddx, ddy)
                    } else {
                        (dx, dy)
                    };
                    x = add(self, x, sx)?;
                    y = add(self, y, sy)?;
                    pts.push((x, y));
                }
            }
            other => return Err(self.invalid("point-list type", other)),
        }
        Ok(pts)
    }

    /// A repetition body (type 0, "reuse", is handled by the caller). `budget` is charged
    /// with the number of explicit displacements before they are stored.
    /// The grid of a repetition type that has one (`with_grid`), else 1.
    fn grid(&mut self, with_grid: bool) -> Result<i64, OasisError> {
        if with_grid {
            self.uint_i64("grid")
        } else {
            Ok(1)
        }
    }

    /// An empty displacement list for `n` entries, its capacity bounded by the bytes left
    /// (each entry takes at least one).
    fn displacements(&self, n: u64) -> Vec<Delta> {
        let cap = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(self.remaining() + 1);
        Vec::with_capacity(cap)
    }

    pub fn repetition(
        &mut self,
        kind: u64,
        budget: &mut dyn FnMut(u64) -> Result<(), OasisError>,
    ) -> Result<Rep, OasisError> {
        let dim = |c: &mut Self| -> Result<u64, OasisError> {
            let v = c.uint()?;
            v.checked_add(2)
                .ok_or_else(|| c.invalid("repetition dimension", v))
        };
        Ok(match kind {
            1 => {
                let (nx, ny) = (dim(self)?, dim(self)?);
                let (sx, sy) = (self.uint_i64("x-space")?, self.uint_i64("y-space")?);
                Rep::Lattice {
                    nx,
                    ny,
                    col: (sx, 0),
                    row: (0, sy),
                }
            }
            2 => {
                let nx = dim(self)?;
                Rep::Lattice {
                    nx,
                    ny: 1,
                    col: (self.uint_i64("x-space")?, 0),
                    row: (0, 0),
                }
            }
            3 => {
                let ny = dim(self)?;
                Rep::Lattice {
                    nx: 1,
                    ny,
                    col: (0, 0),
                    row: (0, self.uint_i64("y-space")?),
                }
            }
            4..=7 => {
                let n = dim(self)?; // dimension + 2 copies: first at 0, then n-1 spaces
                let grid = self.grid(kind == 5 || kind == 7)?;
                budget(n)?;
                let mut v = self.displacements(n);
                let mut at = 0i64;
                v.push((0, 0));
                for _ in 1..n {
                    let s = self.uint_i64("space")?;
                    let step = s
                        .checked_mul(grid)
                        .ok_or_else(|| self.invalid("space", s))?;
                    at = at
                        .checked_add(step)
                        .ok_or_else(|| self.invalid("space", s))?;
                    v.push(if kind <= 5 { (at, 0) } else { (0, at) });
                }
                Rep::List(v)
            }
            8 => {
                let (nx, ny) = (dim(self)?, dim(self)?);
                let (col, row) = (self.gdelta()?, self.gdelta()?);
                Rep::Lattice { nx, ny, col, row }
            }
            9 => {
                let nx = dim(self)?;
                Rep::Lattice {
                    nx,
                    ny: 1,
                    col: self.gdelta()?,
                    row: (0, 0),
                }
            }
            10 | 11 => {
                let n = dim(self)?;
                let grid = self.grid(kind == 11)?;
                budget(n)?;
                let mut v = self.displacements(n);
                let (mut x, mut y) = (0i64, 0i64);
                v.push((0, 0));
                for _ in 1..n {
                    let (dx, dy) = self.gdelta()?;
                    let (gx, gy) = (dx.checked_mul(grid), dy.checked_mul(grid));
                    let (Some(gx), Some(gy)) = (gx, gy) else {
                        return Err(self.invalid("displacement", "overflow"));
                    };
                    x = x
                        .checked_add(gx)
                        .ok_or_else(|| self.invalid("displacement", "overflow"))?;
                    y = y
                        .checked_add(gy)
                        .ok_or_else(|| self.invalid("displacement", "overflow"))?;
                    v.push((x, y));
                }
                Rep::List(v)
            }
            other => return Err(self.invalid("repetition type", other)),
        })
    }
}

/// Octangular direction codes: 0 E, 1 N, 2 W, 3 S, 4 NE, 5 NW, 6 SW, 7 SE.
const fn octangular(dir: u64, m: i64) -> Delta {
    match dir {
        0 => (m, 0),
        1 => (0, m),
        2 => (-m, 0),
        3 => (0, -m),
        4 => (m, m),
        5 => (-m, m),
        6 => (-m, -m),
        _ => (m, -m),
    }
}
