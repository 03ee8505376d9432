//! Vertex lists of OASIS TRAPEZOID and CTRAPEZOID elements, relative to their position.
//!
//! The CTRAPEZOID table was written from the shapes' definitions and checked vertex for
//! vertex against KLayout reading the same records (see `tests/oasis.rs`).

/// A horizontal (`vertical = false`) or vertical trapezoid in the box `w` × `h`.
/// For horizontal ones, `delta_a` = x(top-left) − x(bottom-left) and `delta_b` =
/// x(top-right) − x(bottom-right); for vertical ones the same along y on the bottom and top
/// edges: `delta_a` = y(bottom-left) − y(bottom-right), `delta_b` = y(top-left) − y(top-right).
#[must_use]
pub fn trapezoid(vertical: bool, w: i64, h: i64, da: i64, db: i64) -> [(i64, i64); 4] {
    if vertical {
        [
            (0, da.max(0)),
            (w, (-da).max(0)),
            (w, h - db.max(0)),
            (0, h + db.min(0)),
        ]
    } else {
        [
            ((-da).max(0), 0),
            (w - db.max(0), 0),
            (w + db.min(0), h),
            (da.max(0), h),
        ]
    }
}

/// The vertices of compact trapezoid `kind` (0..=25) of width `w` and height `h`, after the
/// implied sizes (types 16–19 and 25: h = w; 20–21: w = 2h; 22–23: h = 2w) have been applied
/// by the caller. `None` for an unknown type.
#[must_use]
pub fn ctrapezoid(kind: u64, w: i64, h: i64) -> Option<Vec<(i64, i64)>> {
    let v: Vec<(i64, i64)> = match kind {
        0 => vec![(0, 0), (0, h), (w - h, h), (w, 0)],
        1 => vec![(0, 0), (0, h), (w, h), (w - h, 0)],
        2 => vec![(0, 0), (h, h), (w, h), (w, 0)],
        3 => vec![(h, 0), (0, h), (w, h), (w, 0)],
        4 => vec![(0, 0), (h, h), (w - h, h), (w, 0)],
        5 => vec![(h, 0), (0, h), (w, h), (w - h, 0)],
        6 => vec![(0, 0), (h, h), (w, h), (w - h, 0)],
        7 => vec![(h, 0), (0, h), (w - h, h), (w, 0)],
        8 => vec![(0, 0), (0, h), (w, h - w), (w, 0)],
        9 => vec![(0, 0), (0, h - w), (w, h), (w, 0)],
        10 => vec![(0, 0), (0, h), (w, h), (w, w)],
        11 => vec![(0, w), (0, h), (w, h), (w, 0)],
        12 => vec![(0, 0), (0, h), (w, h - w), (w, w)],
        13 => vec![(0, w), (0, h - w), (w, h), (w, 0)],
        14 => vec![(0, 0), (0, h - w), (w, h), (w, w)],
        15 => vec![(0, w), (0, h), (w, h - w), (w, 0)],
        16 => vec![(0, 0), (0, w), (w, 0)],
        17 => vec![(0, 0), (0, w), (w, w)],
        18 => vec![(0, 0), (w, w), (w, 0)],
        19 => vec![(w, 0), (0, w), (w, w)],
        20 => vec![(0, 0), (h, h), (2 * h, 0)],
        21 => vec![(h, 0), (0, h), (2 * h, h)],
        22 => vec![(0, 0), (0, 2 * w), (w, w)],
        23 => vec![(w, 0), (0, w), (w, 2 * w)],
        24 => vec![(0, 0), (0, h), (w, h), (w, 0)],
        25 => vec![(0, 0), (0, w), (w, w), (w, 0)],
        _ => return None,
    };
    Some(v)
}
