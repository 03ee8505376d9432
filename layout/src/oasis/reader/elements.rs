//! The element records that draw: TEXT, RECTANGLE, POLYGON, PATH, the TRAPEZOIDs,
//! CTRAPEZOID and CIRCLE, each stored with its repetition through [`State::store`].

use super::{NameRef, State, Which, add, flag};
use crate::geom::{BBox, Point, Polygon};
use crate::model::{LayerKey, Path, PathEnds, Shape, Text};
use crate::oasis::OasisError;
use crate::oasis::cursor::{Cursor, Delta};
use crate::oasis::geometry::{ctrapezoid, trapezoid};

/// Vertices relative to (x, y) made absolute, with repeated vertices dropped.
fn absolute(cur: &Cursor<'_>, rel: &[Delta], x: i64, y: i64) -> Result<Vec<Point>, OasisError> {
    let mut out: Vec<Point> = Vec::with_capacity(rel.len());
    for &(dx, dy) in rel {
        let p = Point::new(add(cur, x, dx)?, add(cur, y, dy)?);
        if out.last() != Some(&p) {
            out.push(p);
        }
    }
    while out.len() > 1 && out.first() == out.last() {
        out.pop();
    }
    Ok(out)
}

impl State {
    /// The start of a geometry record (`record`): the current cell, the info byte, and the
    /// layer and datatype it sets or reuses.
    fn element_head(
        &mut self,
        cur: &mut Cursor<'_>,
        record: &'static str,
    ) -> Result<(usize, u8, LayerKey), OasisError> {
        let cell = self.cell(cur, record)?;
        let info = cur.byte()?;
        let key = self.layer_datatype(cur, info)?;
        Ok((cell, info, key))
    }

    /// The modal width (info bit 0x40) and height (0x20) a record sets.
    fn read_size(&mut self, cur: &mut Cursor<'_>, info: u8) -> Result<(), OasisError> {
        if flag(info, 0x40) {
            self.modal.geometry_w = Some(cur.uint_i64("width")?);
        }
        if flag(info, 0x20) {
            self.modal.geometry_h = Some(cur.uint_i64("height")?);
        }
        Ok(())
    }

    pub(super) fn text(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let cell = self.cell(cur, "TEXT")?;
        let info = cur.byte()?;
        if flag(info, 0x40) {
            self.modal.text_string = Some(Self::name_ref(cur, flag(info, 0x20))?);
        }
        let string = Self::required(cur, self.modal.text_string.clone(), "text-string")?;
        if flag(info, 0x01) {
            self.modal.textlayer = Some(cur.uint32("textlayer")?);
        }
        if flag(info, 0x02) {
            self.modal.texttype = Some(cur.uint32("texttype")?);
        }
        let key = LayerKey::new(
            Self::required(cur, self.modal.textlayer, "textlayer")?,
            Self::required(cur, self.modal.texttype, "texttype")?,
        );
        let (x, y) = self.xy(cur, info, Which::Text)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        let (text, refnum) = match string {
            NameRef::Name(s) => (s, None),
            NameRef::Num(n) => (String::new(), Some(n)),
        };
        let shape = Shape::Text(Text {
            string: text,
            position: Point::new(x, y),
        });
        let before = self.lib.cells[cell].shapes.get(&key).map_or(0, Vec::len);
        self.store(cur, cell, key, shape, rep)?;
        if let Some(n) = refnum {
            let after = self.lib.cells[cell].shapes.get(&key).map_or(0, Vec::len);
            for i in before..after {
                self.pending_texts.push((cell, key, i, n));
            }
        }
        Ok(())
    }

    pub(super) fn rectangle(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "RECTANGLE")?;
        self.read_size(cur, info)?;
        let w = Self::required(cur, self.modal.geometry_w, "geometry-w")?;
        let h = if flag(info, 0x80) {
            self.modal.geometry_h = Some(w);
            w
        } else {
            Self::required(cur, self.modal.geometry_h, "geometry-h")?
        };
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        let b = BBox {
            left: x,
            bottom: y,
            right: add(cur, x, w)?,
            top: add(cur, y, h)?,
        };
        self.store(cur, cell, key, Shape::Box(b), rep)
    }

    pub(super) fn polygon(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "POLYGON")?;
        if flag(info, 0x20) {
            let budget = &mut self.budget;
            self.modal.polygon_points = Some(cur.point_list(true, &mut |n| budget.points(n))?);
        }
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        let rel = Self::required(
            cur,
            self.modal.polygon_points.as_ref(),
            "polygon-point-list",
        )?;
        let pts = absolute(cur, rel, x, y)?;
        self.store(cur, cell, key, Shape::Polygon(Polygon::new(pts)), rep)
    }

    pub(super) fn path(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "PATH")?;
        if flag(info, 0x40) {
            self.modal.path_halfwidth = Some(cur.uint_i64("half-width")?);
        }
        let hw = Self::required(cur, self.modal.path_halfwidth, "path-halfwidth")?;
        if flag(info, 0x80) {
            let scheme = cur.uint()?;
            for (shift, slot) in [(2, 0), (0, 1)] {
                let v = match (scheme >> shift) & 3 {
                    0 => None,
                    1 => Some(0),
                    2 => Some(hw),
                    _ => Some(cur.sint()?),
                };
                if let Some(v) = v {
                    if slot == 0 {
                        self.modal.path_start_ext = Some(v);
                    } else {
                        self.modal.path_end_ext = Some(v);
                    }
                }
            }
        }
        if flag(info, 0x20) {
            let budget = &mut self.budget;
            self.modal.path_points = Some(cur.point_list(false, &mut |n| budget.points(n))?);
        }
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        let begin = Self::required(cur, self.modal.path_start_ext, "path-start-extension")?;
        let end = Self::required(cur, self.modal.path_end_ext, "path-end-extension")?;
        let rel = Self::required(cur, self.modal.path_points.as_ref(), "path-point-list")?;
        let mut spine = Vec::with_capacity(rel.len());
        for &(dx, dy) in rel {
            spine.push(Point::new(add(cur, x, dx)?, add(cur, y, dy)?));
        }
        let ends = match (begin, end) {
            (0, 0) => PathEnds::Flush,
            (b, e) if b == hw && e == hw => PathEnds::HalfWidth,
            (b, e) => PathEnds::Variable { begin: b, end: e },
        };
        let width = hw
            .checked_mul(2)
            .ok_or_else(|| cur.invalid("half-width", hw))?;
        self.store(
            cur,
            cell,
            key,
            Shape::Path(Path { spine, width, ends }),
            rep,
        )
    }

    pub(super) fn trapezoid(&mut self, cur: &mut Cursor<'_>, id: u64) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "TRAPEZOID")?;
        self.read_size(cur, info)?;
        let w = Self::required(cur, self.modal.geometry_w, "geometry-w")?;
        let h = Self::required(cur, self.modal.geometry_h, "geometry-h")?;
        let da = if id == 25 { 0 } else { cur.sint()? };
        let db = if id == 24 { 0 } else { cur.sint()? };
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        // Keep vertex arithmetic in range: |w|,|h|,|da|,|db| < 2^62 is far beyond any layout.
        let lim = 1i64 << 60;
        if [w, h, da.abs(), db.abs()].iter().any(|&v| v > lim) {
            return Err(cur.invalid("trapezoid size", format!("{w} {h} {da} {db}")));
        }
        let rel = trapezoid(flag(info, 0x80), w, h, da, db);
        let pts = absolute(cur, &rel, x, y)?;
        self.store(cur, cell, key, Shape::Polygon(Polygon::new(pts)), rep)
    }

    pub(super) fn ctrapezoid(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "CTRAPEZOID")?;
        if flag(info, 0x80) {
            self.modal.ctrapezoid_type = Some(cur.uint()?);
        }
        self.read_size(cur, info)?;
        let kind = Self::required(cur, self.modal.ctrapezoid_type, "ctrapezoid-type")?;
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        // Types 20 and 21 are sized by the height, all others need the width.
        let w = if matches!(kind, 20 | 21) {
            0
        } else {
            Self::required(cur, self.modal.geometry_w, "geometry-w")?
        };
        let h = if matches!(kind, 16..=19 | 22 | 23 | 25) {
            0
        } else {
            Self::required(cur, self.modal.geometry_h, "geometry-h")?
        };
        let lim = 1i64 << 60;
        if w > lim || h > lim {
            return Err(cur.invalid("ctrapezoid size", format!("{w} {h}")));
        }
        let rel = ctrapezoid(kind, w, h).ok_or_else(|| cur.invalid("ctrapezoid-type", kind))?;
        let pts = absolute(cur, &rel, x, y)?;
        self.store(cur, cell, key, Shape::Polygon(Polygon::new(pts)), rep)
    }

    pub(super) fn circle(&mut self, cur: &mut Cursor<'_>) -> Result<(), OasisError> {
        let (cell, info, key) = self.element_head(cur, "CIRCLE")?;
        if flag(info, 0x20) {
            self.modal.circle_radius = Some(cur.uint_i64("radius")?);
        }
        let r = Self::required(cur, self.modal.circle_radius, "circle-radius")?;
        let (x, y) = self.xy(cur, info, Which::Geometry)?;
        let rep = self.repetition_if(cur, info, 0x04)?;
        if r > 1 << 60 {
            return Err(cur.invalid("radius", r));
        }
        // The same 32-gon KLayout uses for a dot with round ends.
        let dot = Path {
            spine: vec![Point::new(x, y)],
            width: 2 * r,
            ends: PathEnds::Round,
        };
        match dot.to_polygon() {
            Some(poly) => self.store(cur, cell, key, Shape::Polygon(poly), rep),
            None => Ok(()), // radius 0: nothing to draw
        }
    }
}
