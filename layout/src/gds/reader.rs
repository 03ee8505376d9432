//! GDSII stream reader: a record-level state machine building a [`Library`].

use std::collections::HashMap;

use super::GdsError;
use super::record::{Record, dt, next_record, record_name, rt};
use crate::geom::{BBox, Point, Polygon};
use crate::limits::Limits;
use crate::model::{
    Cell, Instance, LayerKey, Library, Path, PathEnds, Repetition, Shape, Text, Transform,
};

/// Reads a GDSII stream into a [`Library`].
///
/// Structures may be referenced before they are defined; references are resolved at
/// ENDLIB, and the hierarchy is checked for cycles. Bytes after ENDLIB are ignored.
///
/// # Errors
/// [`GdsError`] with the byte offset of the first problem.
pub fn read_gds(bytes: &[u8], limits: &Limits) -> Result<Library, GdsError> {
    if bytes.len() as u64 > limits.max_input_bytes {
        return Err(GdsError::InputTooLarge {
            len: bytes.len() as u64,
            limit: limits.max_input_bytes,
        });
    }
    Reader {
        bytes,
        pos: 0,
        limits,
        stored_shapes: 0,
        stored_points: 0,
    }
    .library()
}

/// A reference waiting for its structure name to be resolved.
struct PendingRef {
    cell: usize,
    instance: usize,
    name: String,
    offset: usize,
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    limits: &'a Limits,
    stored_shapes: u64,
    stored_points: u64,
}

/// Records that may appear anywhere in their context and carry nothing we keep.
const fn ignorable_in_lib(t: u8) -> bool {
    matches!(
        t,
        rt::LIBDIRSIZE
            | rt::SRFNAME
            | rt::LIBSECUR
            | rt::REFLIBS
            | rt::FONTS
            | rt::ATTRTABLE
            | rt::GENERATIONS
            | rt::FORMAT
            | rt::MASK
            | rt::ENDMASKS
    )
}

impl Reader<'_> {
    fn next(&mut self) -> Result<Record<'_>, GdsError> {
        let rec = next_record(self.bytes, &mut self.pos)?.ok_or(GdsError::MissingEndLib {
            offset: self.bytes.len(),
        })?;
        if rec.rtype > rt::LAST {
            return Err(GdsError::UnknownRecord {
                offset: rec.offset,
                record_type: rec.rtype,
            });
        }
        Ok(rec)
    }

    fn library(mut self) -> Result<Library, GdsError> {
        let first = self.next()?;
        if first.rtype != rt::HEADER {
            return Err(unexpected(&first, "stream start (HEADER expected)"));
        }
        let mut lib = Library::new("", 1e-9);
        lib.dbu_in_user_units = 1e-3;
        let mut pending: Vec<PendingRef> = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        loop {
            let rec = self.next()?;
            match rec.rtype {
                rt::BGNLIB => {}
                rt::LIBNAME => lib.name = rec.string()?,
                rt::UNITS => {
                    let units = rec.reals()?;
                    let [user, meters] = units.as_slice() else {
                        return Err(GdsError::BadPayload {
                            offset: rec.offset,
                            record: "UNITS",
                            len: rec.data.len(),
                        });
                    };
                    if !(meters.is_finite() && *meters > 0.0 && user.is_finite() && *user > 0.0) {
                        return Err(GdsError::InvalidValue {
                            offset: rec.offset,
                            what: "UNITS",
                            value: format!("{user} {meters}"),
                        });
                    }
                    lib.dbu_in_user_units = *user;
                    lib.dbu_in_meters = *meters;
                }
                rt::BGNSTR => {
                    let offset = rec.offset;
                    let cell = self.structure(lib.cells.len(), &mut pending)?;
                    if names.insert(cell.name.clone(), lib.cells.len()).is_some() {
                        return Err(GdsError::DuplicateCell {
                            name: cell.name,
                            offset,
                        });
                    }
                    lib.cells.push(cell);
                }
                rt::ENDLIB => break,
                t if ignorable_in_lib(t) => {}
                _ => return Err(unexpected(&rec, "library")),
            }
        }
        for p in pending {
            let Some(&idx) = names.get(&p.name) else {
                return Err(GdsError::UndefinedCell {
                    name: p.name,
                    offset: p.offset,
                });
            };
            lib.cells[p.cell].instances[p.instance].cell = idx;
        }
        lib.check_hierarchy()?;
        Ok(lib)
    }

    fn structure(&mut self, index: usize, pending: &mut Vec<PendingRef>) -> Result<Cell, GdsError> {
        let mut cell = Cell::new("");
        let mut named = false;
        loop {
            let rec = self.next()?;
            match rec.rtype {
                rt::STRNAME if !named => {
                    cell.name = rec.string()?;
                    named = true;
                }
                rt::STRCLASS | rt::STRTYPE => {}
                rt::ENDSTR if named => return Ok(cell),
                rt::BOUNDARY | rt::PATH | rt::SREF | rt::AREF | rt::TEXT | rt::NODE | rt::BOX
                    if named =>
                {
                    let start = rec.offset;
                    let kind = rec.rtype;
                    let el = self.element(kind)?;
                    self.store(&mut cell, index, el, kind, start, pending)?;
                }
                _ => return Err(unexpected(&rec, "structure")),
            }
        }
    }

    /// Collects the records of one element up to ENDEL.
    fn element(&mut self, kind: u8) -> Result<Element, GdsError> {
        let mut el = Element::default();
        let context = record_name(kind);
        loop {
            let rec = self.next()?;
            let t = rec.rtype;
            if !allowed_in(kind, t) {
                return Err(unexpected(&rec, context));
            }
            match t {
                rt::ENDEL => return Ok(el),
                rt::LAYER => el.layer = Some(u32::from(rec.i16_one()? as u16)),
                rt::DATATYPE | rt::TEXTTYPE | rt::BOXTYPE | rt::NODETYPE => {
                    el.datatype = Some(u32::from(rec.i16_one()? as u16));
                }
                rt::WIDTH => el.width = rec.i32_one()?,
                rt::PATHTYPE => el.pathtype = rec.i16_one()?,
                rt::BGNEXTN => el.bgnextn = rec.i32_one()?,
                rt::ENDEXTN => el.endextn = rec.i32_one()?,
                rt::XY => {
                    if !rec.data.len().is_multiple_of(8) {
                        return Err(GdsError::BadPayload {
                            offset: rec.offset,
                            record: "XY",
                            len: rec.data.len(),
                        });
                    }
                    let v: Vec<i32> = rec.i32s()?.collect();
                    el.xy = v
                        .chunks_exact(2)
                        .map(|c| Point::new(i64::from(c[0]), i64::from(c[1])))
                        .collect();
                }
                rt::SNAME => el.sname = Some(rec.string()?),
                rt::COLROW => {
                    let v = rec.i16s()?;
                    let [c, r] = v.as_slice() else {
                        return Err(GdsError::BadPayload {
                            offset: rec.offset,
                            record: "COLROW",
                            len: rec.data.len(),
                        });
                    };
                    el.colrow = Some((*c, *r, rec.offset));
                }
                rt::STRANS => {
                    if rec.dtype != dt::BITS && rec.dtype != dt::I16 {
                        return Err(GdsError::BadDataType {
                            offset: rec.offset,
                            record: "STRANS",
                            expected: dt::BITS,
                            found: rec.dtype,
                        });
                    }
                    el.mirror = rec.i16_one()? as u16 & 0x8000 != 0;
                }
                rt::MAG => el.mag = finite(&rec, "MAG", rec.real_one()?)?,
                rt::ANGLE => el.angle = finite(&rec, "ANGLE", rec.real_one()?)?,
                rt::STRING => el.string = Some(rec.string()?),
                // ELFLAGS, PLEX, PROPATTR, PROPVALUE, PRESENTATION: nothing to keep.
                _ => {}
            }
        }
    }

    /// Charges one stored shape with `points` vertices to the read budget.
    fn count_shape(&mut self, points: usize) -> Result<(), GdsError> {
        self.stored_shapes += 1;
        if self.stored_shapes > self.limits.max_stored_shapes {
            return Err(GdsError::LimitExceeded {
                what: "stored shapes",
                limit: self.limits.max_stored_shapes,
            });
        }
        self.stored_points = self.stored_points.saturating_add(points as u64);
        if self.stored_points > self.limits.max_stored_points {
            return Err(GdsError::LimitExceeded {
                what: "stored points",
                limit: self.limits.max_stored_points,
            });
        }
        Ok(())
    }

    fn store(
        &mut self,
        cell: &mut Cell,
        index: usize,
        el: Element,
        kind: u8,
        offset: usize,
        pending: &mut Vec<PendingRef>,
    ) -> Result<(), GdsError> {
        let element = record_name(kind);
        let need = |v: Option<u32>, record: &'static str| {
            v.ok_or(GdsError::MissingRecord {
                offset,
                element,
                record,
            })
        };
        let xy_count = |want: &dyn Fn(usize) -> bool| {
            if want(el.xy.len()) {
                Ok(())
            } else {
                Err(GdsError::BadXyCount {
                    offset,
                    element,
                    count: el.xy.len(),
                })
            }
        };
        match kind {
            rt::BOUNDARY => {
                let key = LayerKey::new(need(el.layer, "LAYER")?, el.datatype.unwrap_or(0));
                xy_count(&|n| n >= 1)?;
                let mut pts = el.xy;
                if pts.len() > 1 && pts.first() == pts.last() {
                    pts.pop();
                }
                self.count_shape(pts.len())?;
                cell.push_shape(key, Shape::Polygon(Polygon::new(pts)));
            }
            rt::BOX => {
                let key = LayerKey::new(need(el.layer, "LAYER")?, el.datatype.unwrap_or(0));
                xy_count(&|n| n >= 2)?;
                let b = el
                    .xy
                    .iter()
                    .fold(BBox::from_corners(el.xy[0], el.xy[0]), |b, p| {
                        b.union(&BBox::from_corners(*p, *p))
                    });
                self.count_shape(1)?;
                cell.push_shape(key, Shape::Box(b));
            }
            rt::PATH => {
                let key = LayerKey::new(need(el.layer, "LAYER")?, el.datatype.unwrap_or(0));
                xy_count(&|n| n >= 1)?;
                let ends = match el.pathtype {
                    0 => PathEnds::Flush,
                    1 => PathEnds::Round,
                    2 => PathEnds::HalfWidth,
                    4 => PathEnds::Variable {
                        begin: i64::from(el.bgnextn),
                        end: i64::from(el.endextn),
                    },
                    other => {
                        return Err(GdsError::InvalidValue {
                            offset,
                            what: "PATHTYPE",
                            value: other.to_string(),
                        });
                    }
                };
                self.count_shape(el.xy.len())?;
                cell.push_shape(
                    key,
                    Shape::Path(Path {
                        spine: el.xy,
                        // A negative width is "absolute" (not magnified); we keep its size.
                        width: i64::from(el.width).abs(),
                        ends,
                    }),
                );
            }
            rt::TEXT => {
                let key = LayerKey::new(need(el.layer, "LAYER")?, el.datatype.unwrap_or(0));
                xy_count(&|n| n == 1)?;
                let string = el.string.ok_or(GdsError::MissingRecord {
                    offset,
                    element,
                    record: "STRING",
                })?;
                self.count_shape(1)?;
                cell.push_shape(
                    key,
                    Shape::Text(Text {
                        string,
                        position: el.xy[0],
                    }),
                );
            }
            rt::SREF | rt::AREF => {
                let name = el.sname.ok_or(GdsError::MissingRecord {
                    offset,
                    element,
                    record: "SNAME",
                })?;
                if el.mag <= 0.0 {
                    return Err(GdsError::InvalidValue {
                        offset,
                        what: "MAG",
                        value: el.mag.to_string(),
                    });
                }
                let repetition = if kind == rt::AREF {
                    xy_count(&|n| n == 3)?;
                    let (cols, rows, at) = el.colrow.ok_or(GdsError::MissingRecord {
                        offset,
                        element,
                        record: "COLROW",
                    })?;
                    if cols <= 0 || rows <= 0 {
                        return Err(GdsError::InvalidValue {
                            offset: at,
                            what: "COLROW",
                            value: format!("{cols} {rows}"),
                        });
                    }
                    let (c, r) = (i64::from(cols), i64::from(rows));
                    let [o, pc, pr] = [el.xy[0], el.xy[1], el.xy[2]];
                    Some(Repetition::Array {
                        cols: cols as u32,
                        rows: rows as u32,
                        col_step: Point::new(div_round(pc.x - o.x, c), div_round(pc.y - o.y, c)),
                        row_step: Point::new(div_round(pr.x - o.x, r), div_round(pr.y - o.y, r)),
                    })
                } else {
                    xy_count(&|n| n == 1)?;
                    None
                };
                self.count_shape(1)?;
                pending.push(PendingRef {
                    cell: index,
                    instance: cell.instances.len(),
                    name,
                    offset,
                });
                cell.instances.push(Instance {
                    cell: usize::MAX, // resolved at ENDLIB
                    transform: Transform {
                        offset: el.xy[0],
                        rotation_deg: el.angle,
                        mirror_x: el.mirror,
                        magnification: el.mag,
                    },
                    repetition,
                });
            }
            // NODE: electrical connectivity, no geometry.
            _ => {}
        }
        Ok(())
    }
}

/// Integer division rounded to nearest (AREF lattice vectors that do not divide evenly).
fn div_round(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if 2 * a.rem_euclid(b) >= b { q + 1 } else { q }
}

fn finite(rec: &Record<'_>, what: &'static str, v: f64) -> Result<f64, GdsError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(GdsError::InvalidValue {
            offset: rec.offset,
            what,
            value: v.to_string(),
        })
    }
}

fn unexpected(rec: &Record<'_>, context: &'static str) -> GdsError {
    GdsError::UnexpectedRecord {
        offset: rec.offset,
        record: record_name(rec.rtype),
        context,
    }
}

/// The GDSII element grammar: which records an element of `kind` may contain.
const fn allowed_in(kind: u8, t: u8) -> bool {
    let common = matches!(
        t,
        rt::ENDEL | rt::XY | rt::ELFLAGS | rt::PLEX | rt::PROPATTR | rt::PROPVALUE
    );
    let specific = match kind {
        rt::BOUNDARY => matches!(t, rt::LAYER | rt::DATATYPE),
        rt::PATH => matches!(
            t,
            rt::LAYER | rt::DATATYPE | rt::PATHTYPE | rt::WIDTH | rt::BGNEXTN | rt::ENDEXTN
        ),
        rt::SREF => matches!(t, rt::SNAME | rt::STRANS | rt::MAG | rt::ANGLE),
        rt::AREF => matches!(t, rt::SNAME | rt::STRANS | rt::MAG | rt::ANGLE | rt::COLROW),
        rt::TEXT => matches!(
            t,
            rt::LAYER
                | rt::TEXTTYPE
                | rt::PRESENTATION
                | rt::PATHTYPE
                | rt::WIDTH
                | rt::STRANS
                | rt::MAG
                | rt::ANGLE
                | rt::STRING
        ),
        rt::NODE => matches!(t, rt::LAYER | rt::NODETYPE),
        rt::BOX => matches!(t, rt::LAYER | rt::BOXTYPE),
        _ => false,
    };
    common || specific
}

/// The fields an element may carry, filled in as its records arrive.
struct Element {
    layer: Option<u32>,
    datatype: Option<u32>,
    xy: Vec<Point>,
    width: i32,
    pathtype: i16,
    bgnextn: i32,
    endextn: i32,
    sname: Option<String>,
    colrow: Option<(i16, i16, usize)>,
    mirror: bool,
    mag: f64,
    angle: f64,
    string: Option<String>,
}

impl Default for Element {
    fn default() -> Self {
        Self {
            layer: None,
            datatype: None,
            xy: Vec::new(),
            width: 0,
            pathtype: 0,
            bgnextn: 0,
            endextn: 0,
            sname: None,
            colrow: None,
            mirror: false,
            mag: 1.0,
            angle: 0.0,
            string: None,
        }
    }
}
