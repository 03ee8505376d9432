//! OASIS (SEMI P39) writer: the inverse of [`super::read_oasis`] for every [`Library`] our
//! model holds, so a repaired layout can be handed back in the input's format.
//!
//! What is written, and why these forms:
//! - `%SEMI-OASIS\r\n`, START (version `1.0`, unit = grid steps per micron, i.e.
//!   1e-6 / [`Library::dbu_in_meters`], an integer real when it is one, else an IEEE
//!   double; table offsets in END), then one LAYERNAME per [`crate::LayerName`].
//! - Cells as CELL records with their name string (record 14) and placements naming their
//!   cell by string: no CELLNAME/TEXTSTRING tables, so END's table offsets are all zero
//!   ("no table") and nothing refers forward to a number.
//! - Every element record states every field it uses (layer, datatype, size, point list,
//!   absolute x and y): nothing relies on modal variables, so records can be read in any
//!   context and the output is byte-stable.
//! - Boxes as RECTANGLE; polygons as POLYGON with point-list type 4 (g-deltas, closed
//!   implicitly), exact for any vertex, Manhattan or not; paths as PATH with their
//!   half-width and extension scheme (flush, half-width, or explicit); texts as TEXT.
//!   Paths OASIS cannot hold — round ends, an odd width, a single vertex — are written as
//!   the polygon [`Path::to_polygon`] gives, which is what flattening draws for them.
//! - Placements as PLACEMENT 17 (Manhattan angle, magnification 1) or 18 (real
//!   magnification and angle as IEEE doubles, so they read back bit for bit); arrays as
//!   repetition type 8 (n × m along two arbitrary vectors) or 9 (one dimension of 1),
//!   explicit repetitions as type 10 (arbitrary g-delta list). A 1 × 1 array or a
//!   one-entry list is a plain placement.
//! - END padded to 256 bytes with validation scheme 0 (none). No CBLOCK compression.
//!
//! Names and strings are checked against the spec's character sets (n-strings: printable
//! ASCII 0x21–0x7E, not empty; a-strings: 0x20–0x7E), and coordinates, sizes and deltas
//! against ±(2^31 − 1), what KLayout reads (it rejects a larger delta with "Coordinate
//! value overflow" and −2^31 itself with "Unsigned integer value overflow": its signed
//! integers are 32-bit magnitudes with a sign bit): the writer returns an
//! [`OasisWriteError`] instead of bytes another reader would reject.

use std::collections::HashSet;

use super::MAGIC;
use crate::geom::Point;
use crate::model::{
    HierarchyError, Instance, LayerKey, LayerName, Library, Path, PathEnds, Repetition, Shape,
};

/// Why a library cannot be written as OASIS.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OasisWriteError {
    /// The database unit is not a positive finite size.
    #[error("database unit {0} m cannot be written as an OASIS unit")]
    Unit(f64),
    /// A name or string with characters its OASIS string type does not allow.
    #[error("{what} {name:?} in cell {cell:?} is not a valid OASIS {kind}")]
    BadString {
        /// The cell (empty for library-level names).
        cell: String,
        /// What the string names: `cell name`, `text string` or `layer name`.
        what: &'static str,
        /// `n-string` (printable ASCII without space, not empty) or `a-string`
        /// (printable ASCII).
        kind: &'static str,
        /// The offending string.
        name: String,
    },
    /// Two cells with the same name.
    #[error("duplicate cell name {0:?}")]
    DuplicateCell(String),
    /// A dangling instance or a recursive hierarchy.
    #[error(transparent)]
    Hierarchy(#[from] HierarchyError),
    /// A coordinate with a magnitude above `i32::MAX` (KLayout's limit; `i32::MIN` too).
    #[error("coordinate {value} in cell {cell:?} is outside ±(2^31 - 1)")]
    CoordinateRange {
        /// The cell.
        cell: String,
        /// The value.
        value: i64,
    },
    /// A width, height or displacement between vertices or copies with a magnitude above
    /// `i32::MAX`: OASIS itself has no limit, but KLayout holds every delta and size in
    /// 32 bits and rejects the file ("Coordinate value overflow").
    #[error("size or displacement {value} in cell {cell:?} is outside ±(2^31 - 1)")]
    DisplacementRange {
        /// The cell.
        cell: String,
        /// The value.
        value: i64,
    },
    /// A box with negative width or height.
    #[error("inverted box in cell {cell:?}")]
    InvertedBox {
        /// The cell.
        cell: String,
    },
    /// A negative path width.
    #[error("negative path width {width} in cell {cell:?}")]
    PathWidth {
        /// The cell.
        cell: String,
        /// The width.
        width: i64,
    },
    /// A magnification that is not positive and finite, or a non-finite angle.
    #[error("placement {what} {value} in cell {cell:?} cannot be written")]
    Transform {
        /// The cell.
        cell: String,
        /// `magnification` or `angle`.
        what: &'static str,
        /// The value.
        value: f64,
    },
    /// An array or displacement list with no copies.
    #[error("repetition with no copies in cell {cell:?}")]
    EmptyRepetition {
        /// The cell.
        cell: String,
    },
}

/// The largest magnitude of a coordinate, size or delta: KLayout reads a signed integer
/// as a 32-bit unsigned one (magnitude << 1 | sign), so `i32::MIN` itself is out of range.
const LIMIT: u64 = i32::MAX as u64;

/// Bytes in the END record: record id, table offsets, padding string, validation scheme.
pub const END_RECORD_BYTES: usize = 256;

/// Writes `lib` as an OASIS file (see the module documentation for the forms used).
///
/// The library name is not written: OASIS has none, and [`super::read_oasis`] names every
/// library `OASIS`. The unit is one number, dbu per micron, so
/// [`Library::dbu_in_user_units`] reads back as the dbu in microns.
///
/// # Errors
/// [`OasisWriteError`] when a name, coordinate or transform does not fit the format or
/// the hierarchy is broken.
pub fn write_oasis(lib: &Library) -> Result<Vec<u8>, OasisWriteError> {
    lib.check_hierarchy()?;
    let mut seen = HashSet::new();
    for cell in &lib.cells {
        n_string("cell name", &cell.name, &cell.name)?;
        if !seen.insert(cell.name.as_str()) {
            return Err(OasisWriteError::DuplicateCell(cell.name.clone()));
        }
    }
    let mut w = OasisWriter {
        out: MAGIC.to_vec(),
        cell: String::new(),
    };
    w.uint(1); // START
    w.string("1.0");
    w.unit(lib.dbu_in_meters)?;
    w.uint(1); // offset-flag: table offsets are in END
    for name in &lib.layer_names {
        w.layer_name(name)?;
    }
    for cell in &lib.cells {
        w.cell.clone_from(&cell.name);
        w.uint(14); // CELL by name string
        w.string(&cell.name);
        for (key, shapes) in &cell.shapes {
            for shape in shapes {
                w.shape(*key, shape)?;
            }
        }
        for inst in &cell.instances {
            w.placement(inst, &lib.cells[inst.cell].name)?;
        }
    }
    w.end();
    Ok(w.out)
}

/// Checks an n-string: at least one printable ASCII character, no spaces.
fn n_string(what: &'static str, cell: &str, s: &str) -> Result<(), OasisWriteError> {
    if s.is_empty() || !s.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(OasisWriteError::BadString {
            cell: cell.to_owned(),
            what,
            kind: "n-string",
            name: s.to_owned(),
        });
    }
    Ok(())
}

/// Checks an a-string: printable ASCII characters and spaces (may be empty).
fn a_string(what: &'static str, cell: &str, s: &str) -> Result<(), OasisWriteError> {
    if !s.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(OasisWriteError::BadString {
            cell: cell.to_owned(),
            what,
            kind: "a-string",
            name: s.to_owned(),
        });
    }
    Ok(())
}

/// Encodes an unsigned integer: 7 bits per byte, least significant first.
pub fn push_uint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Encodes a signed integer: magnitude shifted left by one, sign in the lowest bit.
pub fn push_sint(out: &mut Vec<u8>, v: i64) {
    push_uint(out, (v.unsigned_abs() << 1) | u64::from(v < 0));
}

/// Encodes a g-delta: form 1 (octangular) when the displacement is along an axis or a
/// diagonal, else form 2 (x then y).
pub fn push_gdelta(out: &mut Vec<u8>, (dx, dy): (i64, i64)) {
    let (ax, ay) = (dx.unsigned_abs(), dy.unsigned_abs());
    let dir = match (dx.signum(), dy.signum()) {
        (_, 0) if dx >= 0 => Some((0, ax)),
        (0, 1) => Some((1, ay)),
        (-1, 0) => Some((2, ax)),
        (0, -1) => Some((3, ay)),
        (1, 1) if ax == ay => Some((4, ax)),
        (-1, 1) if ax == ay => Some((5, ax)),
        (-1, -1) if ax == ay => Some((6, ax)),
        (1, -1) if ax == ay => Some((7, ax)),
        _ => None,
    };
    match dir {
        Some((d, m)) => push_uint(out, (m << 4) | (d << 1)),
        None => {
            push_uint(out, (ax << 2) | (u64::from(dx < 0) << 1) | 1);
            push_sint(out, dy);
        }
    }
}

/// Encodes a real: type 0/1 for integers (exact, and what other writers use for units
/// and magnifications), else type 7 (IEEE double, little endian), exact for any value.
pub fn push_real(out: &mut Vec<u8>, v: f64) {
    // |v| < 2^53: the integer is exact, and the u64 cast cannot saturate.
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 && !(v == 0.0 && v.is_sign_negative())
    {
        push_uint(out, u64::from(v < 0.0));
        push_uint(out, v.abs() as u64);
    } else {
        push_uint(out, 7);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// The writer of one file: the bytes written so far and the cell being written (for
/// errors).
pub struct OasisWriter {
    /// The bytes written so far.
    pub out: Vec<u8>,
    /// The name of the cell being written, for errors.
    pub cell: String,
}

impl OasisWriter {
    fn uint(&mut self, v: u64) {
        push_uint(&mut self.out, v);
    }

    fn sint(&mut self, v: i64) {
        push_sint(&mut self.out, v);
    }

    /// A length-prefixed string, already checked by the caller.
    fn string(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
    }

    fn unit(&mut self, dbu_in_meters: f64) -> Result<(), OasisWriteError> {
        let unit = 1e-6 / dbu_in_meters;
        if !(unit.is_finite() && unit > 0.0 && dbu_in_meters.is_finite()) {
            return Err(OasisWriteError::Unit(dbu_in_meters));
        }
        // 1e-6 / 1e-9 is 999.9999999999999: a unit within rounding of an integer is one.
        let nearest = unit.round();
        let unit = if nearest >= 1.0 && (unit - nearest).abs() <= nearest * 1e-12 {
            nearest
        } else {
            unit
        };
        push_real(&mut self.out, unit);
        Ok(())
    }

    fn coord(&self, v: i64) -> Result<i64, OasisWriteError> {
        if v.unsigned_abs() <= LIMIT {
            Ok(v)
        } else {
            Err(OasisWriteError::CoordinateRange {
                cell: self.cell.clone(),
                value: v,
            })
        }
    }

    fn delta(&self, v: i64) -> Result<i64, OasisWriteError> {
        if v.unsigned_abs() <= LIMIT {
            Ok(v)
        } else {
            Err(OasisWriteError::DisplacementRange {
                cell: self.cell.clone(),
                value: v,
            })
        }
    }

    fn layer_name(&mut self, name: &LayerName) -> Result<(), OasisWriteError> {
        n_string("layer name", "", &name.name)?;
        self.uint(if name.text { 12 } else { 11 });
        self.string(&name.name);
        for (a, b) in [name.layers, name.datatypes] {
            match (a, b) {
                (0, u32::MAX) => self.uint(0),
                (0, b) => {
                    self.uint(1);
                    self.uint(u64::from(b));
                }
                (a, u32::MAX) => {
                    self.uint(2);
                    self.uint(u64::from(a));
                }
                (a, b) if a == b => {
                    self.uint(3);
                    self.uint(u64::from(a));
                }
                (a, b) => {
                    self.uint(4);
                    self.uint(u64::from(a));
                    self.uint(u64::from(b));
                }
            }
        }
        Ok(())
    }

    /// Layer and datatype (L and D bits set by the caller).
    fn layer(&mut self, key: LayerKey) {
        self.uint(u64::from(key.layer));
        self.uint(u64::from(key.datatype));
    }

    /// Absolute x and y (X and Y bits set by the caller; xy-mode is absolute in a CELL).
    fn xy(&mut self, p: Point) -> Result<(), OasisWriteError> {
        let (x, y) = (self.coord(p.x)?, self.coord(p.y)?);
        self.sint(x);
        self.sint(y);
        Ok(())
    }

    /// Point-list type 4 relative to `pts[0]`: one g-delta per following vertex.
    fn point_list(&mut self, pts: &[Point]) -> Result<(), OasisWriteError> {
        let mut body = Vec::with_capacity(pts.len() * 3);
        let mut prev = Point::new(self.coord(pts[0].x)?, self.coord(pts[0].y)?);
        for p in &pts[1..] {
            let q = Point::new(self.coord(p.x)?, self.coord(p.y)?);
            // Both ends are 32-bit, so the delta fits in 33 bits; readers want 32.
            let d = (self.delta(q.x - prev.x)?, self.delta(q.y - prev.y)?);
            push_gdelta(&mut body, d);
            prev = q;
        }
        self.uint(4);
        self.uint(pts.len() as u64 - 1);
        self.out.extend_from_slice(&body);
        Ok(())
    }

    fn shape(&mut self, key: LayerKey, shape: &Shape) -> Result<(), OasisWriteError> {
        match shape {
            Shape::Box(b) => {
                let (l, bo, r, t) = (
                    self.coord(b.left)?,
                    self.coord(b.bottom)?,
                    self.coord(b.right)?,
                    self.coord(b.top)?,
                );
                if r < l || t < bo {
                    return Err(OasisWriteError::InvertedBox {
                        cell: self.cell.clone(),
                    });
                }
                self.uint(20);
                self.out.push(0x7b); // 0WHXY0DL
                self.layer(key);
                let (w, h) = (self.delta(r - l)?, self.delta(t - bo)?);
                self.uint(w as u64);
                self.uint(h as u64);
                self.xy(Point::new(l, bo))?;
            }
            Shape::Polygon(p) => self.polygon(key, &p.points)?,
            Shape::Path(p) => self.path(key, p)?,
            Shape::Text(t) => {
                a_string("text string", &self.cell, &t.string)?;
                self.uint(19);
                self.out.push(0x5b); // 0CNXYRTL with C, X, Y, T, L
                self.string(&t.string);
                self.layer(key);
                self.xy(t.position)?;
            }
        }
        Ok(())
    }

    fn polygon(&mut self, key: LayerKey, pts: &[Point]) -> Result<(), OasisWriteError> {
        let Some(&first) = pts.first() else {
            return Ok(()); // no vertex: nothing to draw, nothing to write
        };
        self.uint(21);
        self.out.push(0x3b); // 00PXYRDL with P, X, Y, D, L
        self.layer(key);
        self.point_list(pts)?;
        self.xy(first)
    }

    fn path(&mut self, key: LayerKey, p: &Path) -> Result<(), OasisWriteError> {
        if p.width < 0 {
            return Err(OasisWriteError::PathWidth {
                cell: self.cell.clone(),
                width: p.width,
            });
        }
        let scheme = match p.ends {
            PathEnds::Flush => Some((1, 1, None)),
            PathEnds::HalfWidth => Some((2, 2, None)),
            PathEnds::Variable { begin, end } => Some((3, 3, Some((begin, end)))),
            PathEnds::Round => None,
        };
        let (Some((s, e, ext)), [first, _, ..]) = (scheme, p.spine.as_slice()) else {
            return self.path_as_polygon(key, p);
        };
        self.coord(p.width)?;
        if p.width % 2 != 0 {
            return self.path_as_polygon(key, p);
        }
        self.uint(22);
        self.out.push(0xfb); // EWPXYRDL with E, W, P, X, Y, D, L
        self.layer(key);
        self.uint((p.width / 2) as u64);
        self.uint((s << 2) | e);
        if let Some((b, e)) = ext {
            let (b, e) = (self.coord(b)?, self.coord(e)?);
            self.sint(b);
            self.sint(e);
        }
        self.point_list(&p.spine)?;
        self.xy(*first)
    }

    /// A path OASIS cannot express, written as the outline flattening draws.
    fn path_as_polygon(&mut self, key: LayerKey, p: &Path) -> Result<(), OasisWriteError> {
        for q in &p.spine {
            self.coord(q.x)?;
            self.coord(q.y)?;
        }
        match p.to_polygon() {
            Some(outline) => self.polygon(key, &outline.points),
            None => Ok(()), // zero width or degenerate: flattening draws nothing either
        }
    }

    fn placement(&mut self, inst: &Instance, name: &str) -> Result<(), OasisWriteError> {
        let t = &inst.transform;
        if !(t.magnification.is_finite() && t.magnification > 0.0) {
            return Err(self.transform_error("magnification", t.magnification));
        }
        if !t.rotation_deg.is_finite() {
            return Err(self.transform_error("angle", t.rotation_deg));
        }
        let (mut offset, rep) = self.repetition(inst)?;
        offset = Point::new(self.coord(offset.x)?, self.coord(offset.y)?);
        let quarter = [0.0, 90.0, 180.0, 270.0]
            .iter()
            .position(|&a| a == t.rotation_deg && !(a == 0.0 && t.rotation_deg.is_sign_negative()));
        let simple = t.magnification == 1.0 && quarter.is_some();
        // C (name string follows), X, Y, R; F in bit 0.
        let mut info: u8 = 0x80 | 0x20 | 0x10 | u8::from(t.mirror_x);
        if rep.is_some() {
            info |= 0x08;
        }
        if let (true, Some(q)) = (simple, quarter) {
            self.uint(17);
            self.out.push(info | ((q as u8) << 1));
            self.string(name);
        } else {
            self.uint(18);
            self.out.push(info | 0x04 | 0x02); // M and A
            self.string(name);
            push_real(&mut self.out, t.magnification);
            push_real(&mut self.out, t.rotation_deg);
        }
        self.xy(offset)?;
        if let Some(rep) = rep {
            self.out.extend_from_slice(&rep);
        }
        Ok(())
    }

    fn transform_error(&self, what: &'static str, value: f64) -> OasisWriteError {
        OasisWriteError::Transform {
            cell: self.cell.clone(),
            what,
            value,
        }
    }

    /// The placement's position and its encoded repetition, if it needs one.
    fn repetition(&self, inst: &Instance) -> Result<(Point, Option<Vec<u8>>), OasisWriteError> {
        let o = inst.transform.offset;
        let mut rep = Vec::new();
        match &inst.repetition {
            None => Ok((o, None)),
            Some(Repetition::Array {
                cols,
                rows,
                col_step,
                row_step,
            }) => {
                let (c, r) = (u64::from(*cols), u64::from(*rows));
                if c == 0 || r == 0 {
                    return Err(self.empty_repetition());
                }
                let v = |p: &Point| -> Result<(i64, i64), OasisWriteError> {
                    Ok((self.coord(p.x)?, self.coord(p.y)?))
                };
                match (c, r) {
                    (1, 1) => return Ok((o, None)),
                    (_, 1) | (1, _) => {
                        let (n, step) = if r == 1 { (c, col_step) } else { (r, row_step) };
                        push_uint(&mut rep, 9);
                        push_uint(&mut rep, n - 2);
                        push_gdelta(&mut rep, v(step)?);
                    }
                    _ => {
                        push_uint(&mut rep, 8);
                        push_uint(&mut rep, c - 2);
                        push_uint(&mut rep, r - 2);
                        push_gdelta(&mut rep, v(col_step)?);
                        push_gdelta(&mut rep, v(row_step)?);
                    }
                }
                Ok((o, Some(rep)))
            }
            Some(Repetition::Explicit(list)) => {
                let Some(&d0) = list.first() else {
                    return Err(self.empty_repetition());
                };
                // The first copy is the placement itself; the others follow as deltas.
                let start = self.shifted(o, d0)?;
                if list.len() == 1 {
                    return Ok((start, None));
                }
                push_uint(&mut rep, 10);
                push_uint(&mut rep, list.len() as u64 - 2);
                let mut prev = start;
                for d in &list[1..] {
                    let p = self.shifted(o, *d)?;
                    let d = (self.delta(p.x - prev.x)?, self.delta(p.y - prev.y)?);
                    push_gdelta(&mut rep, d);
                    prev = p;
                }
                Ok((start, Some(rep)))
            }
        }
    }

    /// `o + d`, which must be a 32-bit point.
    fn shifted(&self, o: Point, d: Point) -> Result<Point, OasisWriteError> {
        let f = |a: i64, b: i64| {
            let s = a.saturating_add(b);
            self.coord(s)
        };
        Ok(Point::new(f(o.x, d.x)?, f(o.y, d.y)?))
    }

    fn empty_repetition(&self) -> OasisWriteError {
        OasisWriteError::EmptyRepetition {
            cell: self.cell.clone(),
        }
    }

    /// END: table offsets (all "no table"), a padding b-string bringing the record to 256
    /// bytes, and validation scheme 0.
    pub fn end(&mut self) {
        let mut rec = vec![2u8];
        rec.extend(std::iter::repeat_n(0u8, 12)); // six (flag, offset) pairs
        let fixed = rec.len() + 1; // + validation scheme
        // The padding's length prefix takes 2 bytes for lengths of 128..16383.
        let pad = END_RECORD_BYTES - fixed - 2;
        push_uint(&mut rec, pad as u64);
        rec.extend(std::iter::repeat_n(0u8, pad));
        rec.push(0); // validation scheme 0
        debug_assert_eq!(rec.len(), END_RECORD_BYTES);
        self.out.extend_from_slice(&rec);
    }
}
