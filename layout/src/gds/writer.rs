//! GDSII stream writer, so tests can round-trip and tools can emit fixtures.

use super::record::{dt, real8_encode, rt};
use crate::geom::Point;
use crate::model::{Instance, LayerKey, Library, PathEnds, Repetition, Shape};

/// Why a library cannot be written as GDSII.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GdsWriteError {
    /// A coordinate does not fit GDSII's 32-bit integers.
    #[error("coordinate {value} in cell {cell:?} does not fit in 32 bits")]
    CoordinateRange {
        /// The cell.
        cell: String,
        /// The value.
        value: i64,
    },
    /// A layer or datatype above 65535.
    #[error("layer/datatype {layer}/{datatype} in cell {cell:?} does not fit in 16 bits")]
    LayerRange {
        /// The cell.
        cell: String,
        /// Layer.
        layer: u32,
        /// Datatype.
        datatype: u32,
    },
    /// A polygon or path with more vertices than one XY record holds.
    #[error("shape with {points} points in cell {cell:?} exceeds 8190 points")]
    TooManyPoints {
        /// The cell.
        cell: String,
        /// Number of points.
        points: usize,
    },
    /// A string longer than one record holds.
    #[error("string of {len} bytes in cell {cell:?} is too long for a record")]
    StringTooLong {
        /// The cell.
        cell: String,
        /// Its length.
        len: usize,
    },
    /// An array with no rows or columns, or more than 32767.
    #[error("array {cols}x{rows} in cell {cell:?} is outside GDSII's 1..=32767 range")]
    ArrayTooLarge {
        /// The cell.
        cell: String,
        /// Columns.
        cols: u32,
        /// Rows.
        rows: u32,
    },
    /// A real (units, magnification, angle) the 8-byte format cannot hold.
    #[error("real value {0} cannot be encoded")]
    Real(String),
}

/// Most XY points per record: (65535 − 4) / 8, with one spare for closing a boundary.
const MAX_XY_POINTS: usize = 8190;

/// Writes `lib` as a GDSII stream (version 600, fixed timestamps for byte-stable output).
///
/// Boxes are written as BOX elements, explicit (OASIS-style) repetitions as one SREF per
/// copy, and paths with [`PathEnds::Variable`] as pathtype 4.
///
/// # Errors
/// [`GdsWriteError`] when a value does not fit the format.
pub fn write_gds(lib: &Library) -> Result<Vec<u8>, GdsWriteError> {
    let mut w = GdsWriter {
        out: Vec::new(),
        cell: String::new(),
    };
    w.i16s(rt::HEADER, &[600]);
    let stamp = [2000, 1, 1, 0, 0, 0];
    w.i16s(rt::BGNLIB, &[stamp, stamp].concat());
    w.string(rt::LIBNAME, &lib.name)?;
    w.reals(rt::UNITS, &[lib.dbu_in_user_units, lib.dbu_in_meters])?;
    for cell in &lib.cells {
        w.cell.clone_from(&cell.name);
        w.i16s(rt::BGNSTR, &[stamp, stamp].concat());
        w.string(rt::STRNAME, &cell.name)?;
        for (key, shapes) in &cell.shapes {
            for shape in shapes {
                w.shape(*key, shape)?;
            }
        }
        for inst in &cell.instances {
            let name = lib.cells.get(inst.cell).map_or("", |c| c.name.as_str());
            w.instance(inst, name)?;
        }
        w.empty(rt::ENDSTR);
    }
    w.empty(rt::ENDLIB);
    Ok(w.out)
}

struct GdsWriter {
    out: Vec<u8>,
    cell: String,
}

impl GdsWriter {
    fn header(&mut self, t: u8, d: u8, payload: usize) {
        // Callers keep payloads below 65532 bytes.
        let len = (payload + 4) as u16;
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.push(t);
        self.out.push(d);
    }

    fn empty(&mut self, t: u8) {
        self.header(t, dt::NONE, 0);
    }

    fn i16s(&mut self, t: u8, v: &[i16]) {
        self.header(t, dt::I16, 2 * v.len());
        for x in v {
            self.out.extend_from_slice(&x.to_be_bytes());
        }
    }

    fn i32_one(&mut self, t: u8, v: i64) -> Result<(), GdsWriteError> {
        let v = self.coord(v)?;
        self.header(t, dt::I32, 4);
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }

    fn reals(&mut self, t: u8, v: &[f64]) -> Result<(), GdsWriteError> {
        self.header(t, dt::REAL8, 8 * v.len());
        for x in v {
            let b = real8_encode(*x).ok_or_else(|| GdsWriteError::Real(x.to_string()))?;
            self.out.extend_from_slice(&b);
        }
        Ok(())
    }

    fn string(&mut self, t: u8, s: &str) -> Result<(), GdsWriteError> {
        let padded = s.len() + s.len() % 2;
        if padded > 65530 {
            return Err(GdsWriteError::StringTooLong {
                cell: self.cell.clone(),
                len: s.len(),
            });
        }
        self.header(t, dt::ASCII, padded);
        self.out.extend_from_slice(s.as_bytes());
        if s.len() % 2 == 1 {
            self.out.push(0);
        }
        Ok(())
    }

    fn coord(&self, v: i64) -> Result<i32, GdsWriteError> {
        i32::try_from(v).map_err(|_| GdsWriteError::CoordinateRange {
            cell: self.cell.clone(),
            value: v,
        })
    }

    fn xy(&mut self, pts: &[Point]) -> Result<(), GdsWriteError> {
        if pts.len() > MAX_XY_POINTS + 1 {
            return Err(GdsWriteError::TooManyPoints {
                cell: self.cell.clone(),
                points: pts.len(),
            });
        }
        let mut data = Vec::with_capacity(8 * pts.len());
        for p in pts {
            data.extend_from_slice(&self.coord(p.x)?.to_be_bytes());
            data.extend_from_slice(&self.coord(p.y)?.to_be_bytes());
        }
        self.header(rt::XY, dt::I32, data.len());
        self.out.extend_from_slice(&data);
        Ok(())
    }

    fn layer(&mut self, key: LayerKey, type_record: u8) -> Result<(), GdsWriteError> {
        let (Ok(l), Ok(d)) = (u16::try_from(key.layer), u16::try_from(key.datatype)) else {
            return Err(GdsWriteError::LayerRange {
                cell: self.cell.clone(),
                layer: key.layer,
                datatype: key.datatype,
            });
        };
        self.i16s(rt::LAYER, &[l as i16]);
        self.i16s(type_record, &[d as i16]);
        Ok(())
    }

    fn shape(&mut self, key: LayerKey, shape: &Shape) -> Result<(), GdsWriteError> {
        match shape {
            Shape::Polygon(p) => {
                if p.points.len() > MAX_XY_POINTS {
                    return Err(GdsWriteError::TooManyPoints {
                        cell: self.cell.clone(),
                        points: p.points.len(),
                    });
                }
                self.empty(rt::BOUNDARY);
                self.layer(key, rt::DATATYPE)?;
                let mut pts = p.points.clone();
                if let Some(&first) = pts.first() {
                    pts.push(first);
                }
                self.xy(&pts)?;
            }
            Shape::Box(b) => {
                self.empty(rt::BOX);
                self.layer(key, rt::BOXTYPE)?;
                let corners = [
                    Point::new(b.left, b.bottom),
                    Point::new(b.right, b.bottom),
                    Point::new(b.right, b.top),
                    Point::new(b.left, b.top),
                    Point::new(b.left, b.bottom),
                ];
                self.xy(&corners)?;
            }
            Shape::Path(p) => {
                self.empty(rt::PATH);
                self.layer(key, rt::DATATYPE)?;
                let pathtype = match p.ends {
                    PathEnds::Flush => 0,
                    PathEnds::Round => 1,
                    PathEnds::HalfWidth => 2,
                    PathEnds::Variable { .. } => 4,
                };
                self.i16s(rt::PATHTYPE, &[pathtype]);
                self.i32_one(rt::WIDTH, p.width)?;
                if let PathEnds::Variable { begin, end } = p.ends {
                    self.i32_one(rt::BGNEXTN, begin)?;
                    self.i32_one(rt::ENDEXTN, end)?;
                }
                self.xy(&p.spine)?;
            }
            Shape::Text(t) => {
                self.empty(rt::TEXT);
                self.layer(key, rt::TEXTTYPE)?;
                self.xy(&[t.position])?;
                self.string(rt::STRING, &t.string)?;
            }
        }
        self.empty(rt::ENDEL);
        Ok(())
    }

    fn strans(&mut self, inst: &Instance) -> Result<(), GdsWriteError> {
        let t = &inst.transform;
        if t.mirror_x || t.magnification != 1.0 || t.rotation_deg != 0.0 {
            self.header(rt::STRANS, dt::BITS, 2);
            let bits: u16 = if t.mirror_x { 0x8000 } else { 0 };
            self.out.extend_from_slice(&bits.to_be_bytes());
            if t.magnification != 1.0 {
                self.reals(rt::MAG, &[t.magnification])?;
            }
            if t.rotation_deg != 0.0 {
                self.reals(rt::ANGLE, &[t.rotation_deg])?;
            }
        }
        Ok(())
    }

    fn instance(&mut self, inst: &Instance, name: &str) -> Result<(), GdsWriteError> {
        let o = inst.transform.offset;
        match &inst.repetition {
            None => {
                self.empty(rt::SREF);
                self.string(rt::SNAME, name)?;
                self.strans(inst)?;
                self.xy(&[o])?;
                self.empty(rt::ENDEL);
            }
            Some(Repetition::Array {
                cols,
                rows,
                col_step,
                row_step,
            }) => {
                let (Ok(c @ 1..), Ok(r @ 1..)) = (i16::try_from(*cols), i16::try_from(*rows))
                else {
                    return Err(GdsWriteError::ArrayTooLarge {
                        cell: self.cell.clone(),
                        cols: *cols,
                        rows: *rows,
                    });
                };
                self.empty(rt::AREF);
                self.string(rt::SNAME, name)?;
                self.strans(inst)?;
                self.i16s(rt::COLROW, &[c, r]);
                let (c, r) = (i64::from(c), i64::from(r));
                let pc = Point::new(o.x + c * col_step.x, o.y + c * col_step.y);
                let pr = Point::new(o.x + r * row_step.x, o.y + r * row_step.y);
                self.xy(&[o, pc, pr])?;
                self.empty(rt::ENDEL);
            }
            Some(Repetition::Explicit(offsets)) => {
                for d in offsets {
                    self.empty(rt::SREF);
                    self.string(rt::SNAME, name)?;
                    self.strans(inst)?;
                    self.xy(&[Point::new(o.x + d.x, o.y + d.y)])?;
                    self.empty(rt::ENDEL);
                }
            }
        }
        Ok(())
    }
}
