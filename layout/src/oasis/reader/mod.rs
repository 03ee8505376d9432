//! The OASIS record state machine: modal variables, name tables, cells and elements.

use std::collections::HashMap;
use std::io::Read;

mod elements;

use super::cursor::{Cursor, Delta, Rep};
use super::{MAGIC, OasisError};
use crate::geom::{BBox, Point, Polygon};
use crate::limits::Limits;
use crate::model::{
    Cell, Instance, LayerKey, LayerName, Library, Path, Repetition, Shape, Text, Transform,
};

/// Reads an OASIS file into a [`Library`].
///
/// # Errors
/// [`OasisError`] for malformed input, undefined references, cycles and exceeded limits.
pub fn read_oasis(bytes: &[u8], limits: &Limits) -> Result<Library, OasisError> {
    if bytes.len() as u64 > limits.max_input_bytes {
        return Err(OasisError::InputTooLarge {
            len: bytes.len() as u64,
            limit: limits.max_input_bytes,
        });
    }
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(OasisError::BadMagic)?;
    let mut cur = Cursor::new(body, false);
    let base = MAGIC.len() as u64;
    cur.record_offset = base;
    if cur.uint()? != 1 {
        return Err(OasisError::UnexpectedRecord {
            offset: base,
            record: "non-START",
            context: "at the start of the file",
        });
    }
    let _version = cur.string()?;
    let unit = cur.real()?;
    if unit <= 0.0 {
        return Err(cur.invalid("unit", unit));
    }
    if cur.uint()? == 0 {
        for _ in 0..12 {
            cur.uint()?;
        }
    }
    let mut st = State::new(limits, unit);
    st.records(&mut cur, base)?;
    if !st.ended {
        return Err(OasisError::MissingEnd);
    }
    st.finish()
}

/// A cell named directly or through the CELLNAME table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum NameRef {
    Num(u64),
    Name(String),
}

/// Modal variables (OASIS §10), reset at every CELL.
#[derive(Default)]
struct Modal {
    repetition: Option<Rep>,
    placement_x: i64,
    placement_y: i64,
    placement_cell: Option<NameRef>,
    layer: Option<u32>,
    datatype: Option<u32>,
    textlayer: Option<u32>,
    texttype: Option<u32>,
    text_x: i64,
    text_y: i64,
    text_string: Option<NameRef>,
    geometry_x: i64,
    geometry_y: i64,
    relative: bool,
    geometry_w: Option<i64>,
    geometry_h: Option<i64>,
    polygon_points: Option<Vec<Delta>>,
    path_halfwidth: Option<i64>,
    path_points: Option<Vec<Delta>>,
    path_start_ext: Option<i64>,
    path_end_ext: Option<i64>,
    ctrapezoid_type: Option<u64>,
    circle_radius: Option<i64>,
}

/// Allocation budget: every stored shape, point and displacement is charged first.
struct Budget {
    shapes: u64,
    points: u64,
    inflated: u64,
    limits: Limits,
}

impl Budget {
    fn shapes(&mut self, n: u64) -> Result<(), OasisError> {
        charge(
            &mut self.shapes,
            n,
            self.limits.max_stored_shapes,
            "stored shapes",
        )
    }

    fn points(&mut self, n: u64) -> Result<(), OasisError> {
        charge(
            &mut self.points,
            n,
            self.limits.max_stored_points,
            "stored points",
        )
    }
}

/// Adds `n` to `count`; `LimitExceeded` (`what`) once it is over `limit`.
fn charge(count: &mut u64, n: u64, limit: u64, what: &'static str) -> Result<(), OasisError> {
    *count = count.saturating_add(n);
    if *count > limit {
        return Err(OasisError::LimitExceeded { what, limit });
    }
    Ok(())
}

struct State {
    lib: Library,
    budget: Budget,
    modal: Modal,
    current: Option<usize>,
    cell_ids: Vec<NameRef>,
    cell_index: HashMap<NameRef, usize>,
    cellnames: HashMap<u64, String>,
    cellname_next: u64,
    textstrings: HashMap<u64, String>,
    textstring_next: u64,
    /// (cell, instance, referenced cell)
    pending_places: Vec<(usize, usize, NameRef)>,
    /// (cell, layer, shape index, TEXTSTRING refnum)
    pending_texts: Vec<(usize, LayerKey, usize, u64)>,
    ended: bool,
}

const fn flag(info: u8, bit: u8) -> bool {
    info & bit != 0
}

fn add(cur: &Cursor<'_>, a: i64, b: i64) -> Result<i64, OasisError> {
    a.checked_add(b)
        .ok_or_else(|| cur.invalid("coordinate", "overflow"))
}

fn interval(cur: &mut Cursor<'_>) -> Result<(u32, u32), OasisError> {
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(match cur.uint()? {
        0 => (0, u32::MAX),
        1 => (0, clamp(cur.uint()?)),
        2 => (clamp(cur.uint()?), u32::MAX),
        3 => {
            let a = clamp(cur.uint()?);
            (a, a)
        }
        4 => (clamp(cur.uint()?), clamp(cur.uint()?)),
        other => return Err(cur.invalid("interval type", other)),
    })
}

fn translate(cur: &Cursor<'_>, shape: &Shape, dx: i64, dy: i64) -> Result<Shape, OasisError> {
    let p = |q: &Point| -> Result<Point, OasisError> {
        Ok(Point::new(add(cur, q.x, dx)?, add(cur, q.y, dy)?))
    };
    Ok(match shape {
        Shape::Polygon(poly) => Shape::Polygon(Polygon::new(
            poly.points.iter().map(p).collect::<Result<_, _>>()?,
        )),
        Shape::Box(b) => Shape::Box(BBox {
            left: add(cur, b.left, dx)?,
            bottom: add(cur, b.bottom, dy)?,
            right: add(cur, b.right, dx)?,
            top: add(cur, b.top, dy)?,
        }),
        Shape::Path(path) => Shape::Path(Path {
            spine: path.spine.iter().map(p).collect::<Result<_, _>>()?,
            width: path.width,
            ends: path.ends,
        }),
        Shape::Text(t) => Shape::Text(Text {
            string: t.string.clone(),
            position: p(&t.position)?,
        }),
    })
}

fn shape_points(shape: &Shape) -> u64 {
    match shape {
        Shape::Polygon(p) => p.points.len() as u64,
        Shape::Path(p) => p.spine.len() as u64,
        Shape::Box(_) | Shape::Text(_) => 1,
    }
}

impl State {
    fn new(limits: &Limits, unit: f64) -> Self {
        let mut lib = Library::new("OASIS", 1e-6 / unit);
        lib.dbu_in_user_units = 1.0 / unit;
        Self {
            lib,
            budget: Budget {
                shapes: 0,
                points: 0,
                inflated: 0,
                limits: *limits,
            },
            modal: Modal::default(),
            current: None,
            cell_ids: Vec::new(),
            cell_index: HashMap::new(),
            cellnames: HashMap::new(),
            cellname_next: 0,
            textstrings: HashMap::new(),
            textstring_next: 0,
            pending_places: Vec::new(),
            pending_texts: Vec::new(),
            ended: false,
        }
    }

    fn missing(cur: &Cursor<'_>, what: &'static str) -> OasisError {
        OasisError::MissingModal {
            offset: cur.record_offset,
            what,
        }
    }

    /// A modal variable's value (`what`), or [`OasisError::MissingModal`] when it is unset.
    fn required<T>(
        cur: &Cursor<'_>,
        value: Option<T>,
        what: &'static str,
    ) -> Result<T, OasisError> {
        value.ok_or_else(|| Self::missing(cur, what))
    }

    /// A name given by reference number (`by_number`) or as a string.
    fn name_ref(cur: &mut Cursor<'_>, by_number: bool) -> Result<NameRef, OasisError> {
        Ok(if by_number {
            NameRef::Num(cur.uint()?)
        } else {
            NameRef::Name(cur.string()?)
        })
    }

    /// The repetition of a record whose `info` byte has `bit` set, else none.
    fn repetition_if(
        &mut self,
        cur: &mut Cursor<'_>,
        info: u8,
        bit: u8,
    ) -> Result<Option<Rep>, OasisError> {
        if flag(info, bit) {
            self.repetition(cur).map(Some)
        } else {
            Ok(None)
        }
    }

    fn cell(&self, cur: &Cursor<'_>, record: &'static str) -> Result<usize, OasisError> {
        self.current.ok_or(OasisError::UnexpectedRecord {
            offset: cur.record_offset,
            record,
            context: "outside a CELL",
        })
    }

    fn records(&mut self, cur: &mut Cursor<'_>, base: u64) -> Result<(), OasisError> {
        while !cur.at_end() {
            if !cur.in_cblock {
                cur.record_offset = base + cur.pos() as u64;
            }
            let id = cur.uint()?;
            match id {
                0 => {}
                1 => {
                    return Err(OasisError::UnexpectedRecord {
                        offset: cur.record_offset,
                        record: "START",
                        context: "after the start",
                    });
                }
                2 => {
                    if cur.in_cblock {
                        return Err(OasisError::UnexpectedRecord {
                            offset: cur.record_offset,
                            record: "END",
                            context: "inside a CBLOCK",
                        });
                    }
                    self.ended = true;
                    return Ok(());
                }
                3 | 4 => {
                    let name = cur.string()?;
                    let n = if id == 3 {
                        self.cellname_next += 1;
                        self.cellname_next - 1
                    } else {
                        cur.uint()?
                    };
                    self.cellnames.insert(n, name);
                }
                5 | 6 => {
                    let s = cur.string()?;
                    let n = if id == 5 {
                        self.textstring_next += 1;
                        self.textstring_next - 1
                    } else {
                        cur.uint()?
                    };
                    self.textstrings.insert(n, s);
                }
                7..=10 => {
                    cur.string()?;
                    if id % 2 == 0 {
                        cur.uint()?;
                    }
                }
                11 | 12 => {
                    let name = cur.string()?;
                    let layers = interval(cur)?;
                    let datatypes = interval(cur)?;
                    self.lib.layer_names.push(LayerName {
                        name,
                        layers,
                        datatypes,
                        text: id == 12,
                    });
                }
                13 | 14 => self.begin_cell(cur, id)?,
                15 => self.modal.relative = false,
                16 => self.modal.relative = true,
                17 | 18 => self.placement(cur, id)?,
                19 => self.text(cur)?,
                20 => self.rectangle(cur)?,
                21 => self.polygon(cur)?,
                22 => self.path(cur)?,
                23..=25 => self.trapezoid(cur, id)?,
                26 => self.ctrapezoid(cur)?,
                27 => self.circle(cur)?,
                28 => Self::property(cur)?,
                29 => {}
                30 => {
                    cur.uint()?;
                    cur.string()?;
                }
                31 => {
                    cur.uint()?;
                    cur.string()?;
                    cur.uint()?;
                }
                32 => {
                    cur.uint()?;
                    cur.string()?;
                }
                33 => self.xgeometry(cur)?,
                34 => self.cblock(cur)?,
                other => {
                    return Err(OasisError::UnknownRecord {
                        offset: cur.record_offset,
                        id: other,
                    });
                }
            }
        }
        Ok(())
    }

    fn begin_cell(&mut self, cur: &mut Cursor<'_>, id: u64) -> Result<(), OasisError> {
        let r = if id == 13 {
            NameRef::Num(cur.uint()?)
        } else {
            NameRef::Name(cur.string()?)
        };
        if let Some(&existing) = self.cell_index.get(&r) {
            let name = match &r {
                NameRef::Num(n) => format!("#{n}"),
                NameRef::Name(s) => s.clone(),
            };
            let _ = existing;
            return Err(OasisError::DuplicateCell { name });
        }
        let idx = self.lib.cells.len();
        let name = match &r {
            NameRef::Name(s) => s.clone(),
            NameRef::Num(_) => String::new(),
        };
        self.lib.cells.push(Cell::new(name));
        self.cell_ids.push(r.clone());
        self.cell_index.insert(r, idx);
        self.current = Some(idx);
        self.modal = Modal::default();
        Ok(())
    }

    /// Reads an optional repetition (R bit set): type 0 reuses the modal one.
    fn repetition(&mut self, cur: &mut Cursor<'_>) -> Result<Rep, OasisError> {
        let kind = cur.uint()?;
        if kind == 0 {
            let rep = Self::required(cur, self.modal.repetition.clone(), "repetition")?;
            if let Rep::List(v) = &rep {
                self.budget.points(v.len() as u64)?;
            }
            return Ok(rep);
        }
        let budget = &mut self.budget;
        let rep = cur.repetition(kind, &mut |n| budget.points(n))?;
        self.modal.repetition = Some(rep.clone());
        Ok(rep)
    }

    fn xy(
        &mut self,
        cur: &mut Cursor<'_>,
        info: u8,
        which: Which,
    ) -> Result<(i64, i64), OasisError> {
        let relative = self.modal.relative;
        let (mx, my) = match which {
            Which::Geometry => (&mut self.modal.geometry_x, &mut self.modal.geometry_y),
            Which::Text => (&mut self.modal.text_x, &mut self.modal.text_y),
            Which::Placement => (&mut self.modal.placement_x, &mut self.modal.placement_y),
        };
        let (xbit, ybit) = match which {
            Which::Placement => (0x20, 0x10),
            _ => (0x10, 0x08),
        };
        if flag(info, xbit) {
            let v = cur.sint()?;
            *mx = if relative { add(cur, *mx, v)? } else { v };
        }
        if flag(info, ybit) {
            let v = cur.sint()?;
            *my = if relative { add(cur, *my, v)? } else { v };
        }
        Ok((*mx, *my))
    }

    fn layer_datatype(&mut self, cur: &mut Cursor<'_>, info: u8) -> Result<LayerKey, OasisError> {
        if flag(info, 0x01) {
            self.modal.layer = Some(cur.uint32("layer")?);
        }
        if flag(info, 0x02) {
            self.modal.datatype = Some(cur.uint32("datatype")?);
        }
        Ok(LayerKey::new(
            Self::required(cur, self.modal.layer, "layer")?,
            Self::required(cur, self.modal.datatype, "datatype")?,
        ))
    }

    /// Stores `shape` (at its absolute position) and its repeated copies.
    fn store(
        &mut self,
        cur: &Cursor<'_>,
        cell: usize,
        key: LayerKey,
        shape: Shape,
        rep: Option<Rep>,
    ) -> Result<(), OasisError> {
        let copies = rep.as_ref().map_or(1, Rep::count);
        self.budget.shapes(copies)?;
        self.budget
            .points(copies.saturating_mul(shape_points(&shape)))?;
        let list = self.lib.cells[cell].shapes.entry(key).or_default();
        match rep {
            None => list.push(shape),
            Some(Rep::List(v)) => {
                for (dx, dy) in v {
                    list.push(translate(cur, &shape, dx, dy)?);
                }
            }
            Some(Rep::Lattice { nx, ny, col, row }) => {
                for j in 0..ny {
                    for i in 0..nx {
                        let d = |a: i64, b: i64| -> Result<i64, OasisError> {
                            let v = i128::from(a) * i128::from(i) + i128::from(b) * i128::from(j);
                            i64::try_from(v).map_err(|_| cur.invalid("repetition", "overflow"))
                        };
                        let (dx, dy) = (d(col.0, row.0)?, d(col.1, row.1)?);
                        list.push(translate(cur, &shape, dx, dy)?);
                    }
                }
            }
        }
        Ok(())
    }

    fn placement(&mut self, cur: &mut Cursor<'_>, id: u64) -> Result<(), OasisError> {
        let cell = self.cell(cur, "PLACEMENT")?;
        let info = cur.byte()?;
        if flag(info, 0x80) {
            self.modal.placement_cell = Some(Self::name_ref(cur, flag(info, 0x40))?);
        }
        let target = Self::required(cur, self.modal.placement_cell.clone(), "placement-cell")?;
        let (mag, angle) = if id == 17 {
            (1.0, f64::from((info >> 1) & 3) * 90.0)
        } else {
            let mag = if flag(info, 0x04) { cur.real()? } else { 1.0 };
            let angle = if flag(info, 0x02) { cur.real()? } else { 0.0 };
            (mag, angle)
        };
        if mag <= 0.0 {
            return Err(cur.invalid("magnification", mag));
        }
        let (x, y) = self.xy(cur, info, Which::Placement)?;
        let repetition = match self.repetition_if(cur, info, 0x08)? {
            None => None,
            Some(Rep::Lattice { nx, ny, col, row }) => {
                let limit = self.budget.limits.max_array;
                let (Ok(cols), Ok(rows)) = (u32::try_from(nx), u32::try_from(ny)) else {
                    return Err(OasisError::LimitExceeded {
                        what: "array size",
                        limit,
                    });
                };
                Some(Repetition::Array {
                    cols,
                    rows,
                    col_step: Point::new(col.0, col.1),
                    row_step: Point::new(row.0, row.1),
                })
            }
            Some(Rep::List(v)) => Some(Repetition::Explicit(
                v.into_iter().map(|(a, b)| Point::new(a, b)).collect(),
            )),
        };
        self.budget.shapes(1)?;
        let instances = &mut self.lib.cells[cell].instances;
        self.pending_places.push((cell, instances.len(), target));
        instances.push(Instance {
            cell: usize::MAX, // resolved at END
            transform: Transform {
                offset: Point::new(x, y),
                rotation_deg: angle,
                mirror_x: flag(info, 0x01),
                magnification: mag,
            },
            repetition,
        });
        Ok(())
    }

    fn property(cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let info = cur.byte()?;
        if flag(info, 0x04) {
            if flag(info, 0x02) {
                cur.uint()?;
            } else {
                cur.string()?;
            }
        }
        if !flag(info, 0x08) {
            let count = match info >> 4 {
                15 => cur.uint()?,
                n => u64::from(n),
            };
            for _ in 0..count {
                match cur.uint()? {
                    k @ 0..=7 => {
                        cur.real_of_kind(k)?;
                    }
                    8 | 13..=15 => {
                        cur.uint()?;
                    }
                    9 => {
                        cur.sint()?;
                    }
                    10..=12 => {
                        cur.string()?;
                    }
                    other => return Err(cur.invalid("property value type", other)),
                }
            }
        }
        Ok(())
    }

    fn xgeometry(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        self.cell(cur, "XGEOMETRY")?;
        let info = cur.byte()?;
        cur.uint()?;
        self.layer_datatype(cur, info)?;
        cur.string()?;
        self.xy(cur, info, Which::Geometry)?;
        self.repetition_if(cur, info, 0x04)?;
        Ok(())
    }

    fn cblock(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let offset = cur.record_offset;
        if cur.in_cblock {
            return Err(OasisError::UnexpectedRecord {
                offset,
                record: "CBLOCK",
                context: "inside a CBLOCK",
            });
        }
        let comp_type = cur.uint()?;
        if comp_type != 0 {
            return Err(cur.invalid("compression type", comp_type));
        }
        let uncomp = cur.uint()?;
        let comp = cur.uint()?;
        let data = cur.take(comp)?;
        let limit = self.budget.limits.max_decompressed_bytes;
        self.budget.inflated = self.budget.inflated.saturating_add(uncomp);
        if self.budget.inflated > limit {
            return Err(OasisError::LimitExceeded {
                what: "decompressed bytes",
                limit,
            });
        }
        // Inflate at most one byte more than declared, so a lying header is detected
        // without ever holding more than the budget.
        let mut buf = Vec::new();
        flate2::read::DeflateDecoder::new(data)
            .take(uncomp.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(|e| OasisError::Compression {
                offset,
                message: e.to_string(),
            })?;
        if buf.len() as u64 != uncomp {
            return Err(OasisError::Compression {
                offset,
                message: format!("declared {uncomp} bytes, inflated to {}", buf.len()),
            });
        }
        let mut inner = Cursor::new(&buf, true);
        inner.record_offset = offset;
        self.records(&mut inner, offset)
    }

    fn finish(mut self) -> Result<Library, OasisError> {
        for (i, id) in self.cell_ids.iter().enumerate() {
            if let NameRef::Num(n) = id {
                let name = self.cellnames.get(n).ok_or(OasisError::UndefinedName {
                    table: "CELLNAME",
                    refnum: *n,
                })?;
                self.lib.cells[i].name.clone_from(name);
            }
        }
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, c) in self.lib.cells.iter().enumerate() {
            if by_name.insert(c.name.as_str(), i).is_some() {
                return Err(OasisError::DuplicateCell {
                    name: c.name.clone(),
                });
            }
        }
        let mut resolved = Vec::with_capacity(self.pending_places.len());
        for (cell, inst, target) in &self.pending_places {
            let name =
                match target {
                    NameRef::Name(s) => s.as_str(),
                    NameRef::Num(n) => self.cellnames.get(n).map(String::as_str).ok_or(
                        OasisError::UndefinedName {
                            table: "CELLNAME",
                            refnum: *n,
                        },
                    )?,
                };
            let idx = *by_name.get(name).ok_or_else(|| OasisError::UndefinedCell {
                name: name.to_owned(),
            })?;
            resolved.push((*cell, *inst, idx));
        }
        for (cell, inst, idx) in resolved {
            self.lib.cells[cell].instances[inst].cell = idx;
        }
        for (cell, key, i, n) in std::mem::take(&mut self.pending_texts) {
            let s = self.textstrings.get(&n).ok_or(OasisError::UndefinedName {
                table: "TEXTSTRING",
                refnum: n,
            })?;
            if let Some(Shape::Text(t)) = self.lib.cells[cell]
                .shapes
                .get_mut(&key)
                .and_then(|v| v.get_mut(i))
            {
                t.string.clone_from(s);
            }
        }
        self.lib.check_hierarchy()?;
        Ok(self.lib)
    }
}

#[derive(Clone, Copy)]
enum Which {
    Geometry,
    Text,
    Placement,
}
