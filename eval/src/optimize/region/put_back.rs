//! The seam pass of a region optimize (D252): once every tile is done and the written
//! layout is re-evaluated, the drawn mask goes back in a square around each new group it
//! found (those near a seam first), and the layout is evaluated again.
//!
//! Why it holds: a group is new when the drawn layout printed no group of its rule
//! there, and a mask equal to the drawn one over the optical reach around a place prints
//! there what the drawn layout printed. The host's loop (`reticle_tools::optimize_region`)
//! chooses the squares, growing them round by round so the print at the group comes nearer
//! the drawn one, and keeps a round only when the re-evaluation shows fewer new groups near
//! seams or fewer new groups, neither more, and no more mask-rule records. No I/O here.

use reticle_kernel::rules::{AppliesTo, Region, Rule, RuleKind, check_rule};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Point, Polygon};
use serde::Serialize;

use crate::optimize::mask::boxes_around;
use crate::tiles::{grow, intersection};

/// How far (nm) past a square its mask rules are checked: more than any mask rule of
/// the shipped decks (30 nm), as the tiles' `MASK_RULE_REACH_NM`.
pub const CHECK_REACH_NM: f64 = 100.0;

/// How far (nm) past the checked area the local mask is taken, so that the window's cut
/// edges pair with nothing checked.
const WINDOW_MARGIN_NM: f64 = 200.0;

/// How far (nm) a square's side moves out when a mask-rule violation lies near it, and
/// how many moves a square gets before it is dropped.
const SETTLE_STEP_NM: f64 = 16.0;
const SETTLE_MOVES: u32 = 6;

/// What became of one square of a [`put_back_legal`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SquareOutcome {
    /// The square put back (dbu), after its sides moved; `None`: dropped.
    pub square: Option<BBox>,
    /// How often its sides moved out.
    pub moves: u32,
}

/// A box in nm as dbu (`dbu_nm` nanometres per database unit), grown outward to whole
/// pixels of `pixel_dbu` from the origin, so the mask stays on the ILT's pixel lattice.
#[must_use]
pub fn to_dbu(b_nm: [f64; 4], dbu_nm: f64, pixel_dbu: f64) -> BBox {
    let px = pixel_dbu.max(1.0);
    let down = |v: f64| ((v / dbu_nm / px).floor() * px).round() as i64;
    let up = |v: f64| ((v / dbu_nm / px).ceil() * px).round() as i64;
    BBox::from_corners(
        Point::new(down(b_nm[0]), down(b_nm[1])),
        Point::new(up(b_nm[2]), up(b_nm[3])),
    )
}

/// `mask` with `drawn` put back in `squares`: inside each square (clipped to `region`,
/// the part of the layout the optimize owns) the drawn polygons, elsewhere the mask's.
/// Overlapping squares put each drawn piece back once. All boxes in dbu.
#[must_use]
pub fn put_back(
    mask: &[Polygon],
    drawn: &[Polygon],
    squares: &[BBox],
    region: BBox,
) -> Vec<Polygon> {
    let squares: Vec<BBox> = squares
        .iter()
        .filter_map(|s| intersection(s, &region))
        .filter(|s| s.width() > 0 && s.height() > 0)
        .collect();
    let mut out = mask.to_vec();
    for s in &squares {
        out = out.iter().flat_map(|p| minus(p, s)).collect();
    }
    for (i, s) in squares.iter().enumerate() {
        let mut pieces: Vec<Polygon> = drawn.iter().filter_map(|p| clip_polygon(p, s)).collect();
        for earlier in &squares[..i] {
            pieces = pieces.iter().flat_map(|p| minus(p, earlier)).collect();
        }
        out.extend(pieces);
    }
    out
}

/// `p` without the box `s`: `p` clipped to the (up to four) strips of its bounding box
/// around `s`.
fn minus(p: &Polygon, s: &BBox) -> Vec<Polygon> {
    let Some(bb) = p.bbox() else {
        return Vec::new();
    };
    match intersection(&bb, s).filter(|h| h.width() > 0 && h.height() > 0) {
        None => vec![p.clone()],
        Some(hole) => boxes_around(bb, hole)
            .iter()
            .filter_map(|b| clip_polygon(p, b))
            .collect(),
    }
}

/// [`put_back`] one square after the other, each only where it makes no new mask-rule
/// violation: a square whose put-back mask has more violations of the deck's mask
/// `rules` within [`CHECK_REACH_NM`] than the mask had there moves its sides near them out
/// by 16 nm (a cut through a feature near its edge leaves a sliver) and is tried again, up
/// to six times, then dropped. `drawn` is the target around the region too: outside
/// `region` the mask is the drawn layout. All boxes in dbu, `dbu_nm` nm each.
#[must_use]
pub fn put_back_legal(
    mask: &[Polygon],
    drawn: &[Polygon],
    squares: &[BBox],
    region: BBox,
    rules: &[&Rule],
    dbu_nm: f64,
) -> (Vec<Polygon>, Vec<SquareOutcome>) {
    let dbu = |nm: f64| (nm / dbu_nm).round() as i64;
    let rules: Vec<&Rule> = rules
        .iter()
        .copied()
        .filter(|r| r.applies_to == AppliesTo::Mask && r.kind != RuleKind::Enclosure)
        .collect();
    let mut current = mask.to_vec();
    let mut outcomes = Vec::new();
    for s in squares {
        let mut square = *s;
        let mut outcome = SquareOutcome {
            square: None,
            moves: 0,
        };
        loop {
            let checked = grow(square, dbu(CHECK_REACH_NM));
            let window = grow(checked, dbu(WINDOW_MARGIN_NM));
            let local = local_mask(&current, drawn, region, window);
            let trial = put_back(&local, drawn, &[square], region);
            let before = violations(&rules, &local, checked, dbu_nm);
            let after = violations(&rules, &trial, checked, dbu_nm);
            if after.len() <= before.len() {
                current = put_back(&current, drawn, &[square], region);
                outcome.square = Some(square);
                break;
            }
            if outcome.moves == SETTLE_MOVES {
                break;
            }
            square = moved_out(
                square,
                &after,
                dbu(SETTLE_STEP_NM),
                dbu(CHECK_REACH_NM / 2.0),
            );
            outcome.moves += 1;
        }
        outcomes.push(outcome);
    }
    (current, outcomes)
}

/// The mask in `window`: `mask` inside `region`, the `drawn` layout outside it.
fn local_mask(mask: &[Polygon], drawn: &[Polygon], region: BBox, window: BBox) -> Vec<Polygon> {
    let mut out: Vec<Polygon> = mask
        .iter()
        .filter_map(|p| clip_polygon(p, &window))
        .collect();
    let outside = match intersection(&window, &region) {
        Some(inside) => boxes_around(window, inside),
        None => vec![window],
    };
    for b in &outside {
        out.extend(drawn.iter().filter_map(|p| clip_polygon(p, b)));
    }
    out
}

/// The boxes of the mask-rule violations of `polygons` that meet `area`.
fn violations(rules: &[&Rule], polygons: &[Polygon], area: BBox, dbu_nm: f64) -> Vec<BBox> {
    let region = Region::from_polygons(polygons);
    rules
        .iter()
        .filter_map(|r| check_rule(r, &region, None, dbu_nm).ok())
        .flatten()
        .map(|v| v.bbox)
        .filter(|b| intersection(b, &area).is_some())
        .collect()
}

/// `square` with each side that lies within `near` of one of `violations` moved out by
/// `step`; every side when none does.
fn moved_out(square: BBox, violations: &[BBox], step: i64, near: i64) -> BBox {
    let close = |d: i64| d.abs() <= near;
    let mut out = square;
    let mut moved = false;
    for v in violations {
        let spans_y = v.top >= square.bottom - near && v.bottom <= square.top + near;
        let spans_x = v.right >= square.left - near && v.left <= square.right + near;
        if spans_y && (close(v.left - square.left) || close(v.right - square.left)) {
            out.left = square.left - step;
            moved = true;
        }
        if spans_y && (close(v.left - square.right) || close(v.right - square.right)) {
            out.right = square.right + step;
            moved = true;
        }
        if spans_x && (close(v.bottom - square.bottom) || close(v.top - square.bottom)) {
            out.bottom = square.bottom - step;
            moved = true;
        }
        if spans_x && (close(v.bottom - square.top) || close(v.top - square.top)) {
            out.top = square.top + step;
            moved = true;
        }
    }
    if moved { out } else { grow(square, step) }
}
