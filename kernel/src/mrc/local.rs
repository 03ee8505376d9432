//! Local repair of a Manhattan mask (D112): at each mask-rule record, the cheapest edit of
//! the grid cells around it that leaves no new record on a crop around the spot, before
//! whole components are replaced.

use super::*;

/// Sets the pixels of `bx` (clamped to `window`) that are set in `target`.
pub(super) fn paste_or(mask: &mut Grid<u8>, target: &Grid<u8>, bx: PixelBox, window: PixelBox) {
    for y in bx.1.max(window.1)..bx.3.min(window.3) {
        for x in bx.0.max(window.0)..bx.2.min(window.2) {
            if *target.at(x, y) != 0 {
                *mask.at_mut(x, y) = 1;
            }
        }
    }
}

/// The pixels of `crop` of `grid` as a grid of their own.
fn crop_of(grid: &Grid<u8>, crop: PixelBox) -> Grid<u8> {
    let (cx0, cy0, cx1, cy1) = crop;
    let (cw, ch) = (cx1 - cx0, cy1 - cy0);
    let mut g = Grid::filled(cw, ch, 0u8);
    for y in 0..ch {
        let row = (cy0 + y) * grid.width;
        g.data[y * cw..(y + 1) * cw].copy_from_slice(&grid.data[row + cx0..row + cx1]);
    }
    g
}

/// The boxes (pixels of the crop) of the mask rules' records on `local`, a crop of the
/// mask at `offset` traced as its own window (what lies outside counts as unset),
/// without those that touch the crop's border (the cut makes edges there that the mask
/// does not have).
fn local_violations(
    req: &LegalizeRequest<'_>,
    local: &Grid<u8>,
    offset: (usize, usize),
) -> Vec<PixelBox> {
    let (cw, ch) = (local.width, local.height);
    let sub = LegalizeRequest {
        proposal: local,
        target: local,
        outside: None,
        window: (0, 0, cw, ch),
        context: &[],
        origin_dbu: (
            req.origin_dbu.0 + offset.0 as f64 * req.pixel_dbu,
            req.origin_dbu.1 + offset.1 as f64 * req.pixel_dbu,
        ),
        ..*req
    };
    let (polygons, _) = polygons_of(&sub, local);
    check(&sub, &polygons)
        .iter()
        .map(|v| violation_box(&sub, v, 0.0, cw, ch))
        .filter(|b| b.0 > 1 && b.1 > 1 && b.2 + 1 < cw && b.3 + 1 < ch)
        .collect()
}

/// Copies `local` into `grid` at `offset`.
fn paste_at(grid: &mut Grid<u8>, local: &Grid<u8>, offset: (usize, usize)) {
    for y in 0..local.height {
        let row = (offset.1 + y) * grid.width + offset.0;
        grid.data[row..row + local.width]
            .copy_from_slice(&local.data[y * local.width..(y + 1) * local.width]);
    }
}

fn overlaps(a: PixelBox, b: PixelBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// `b` grown by `by` pixels towards the sides whose flag is set (left, bottom, right,
/// top), clamped to `clamp`.
fn grow_sides(b: PixelBox, by: usize, sides: [bool; 4], clamp: PixelBox) -> PixelBox {
    let g = |s: bool| if s { by } else { 0 };
    (
        b.0.saturating_sub(g(sides[0])).max(clamp.0),
        b.1.saturating_sub(g(sides[1])).max(clamp.1),
        (b.2 + g(sides[2])).min(clamp.2),
        (b.3 + g(sides[3])).min(clamp.3),
    )
}

fn grow_box(b: PixelBox, by: usize, clamp: PixelBox) -> PixelBox {
    grow_sides(b, by, [true; 4], clamp)
}

/// Local repair: at each record, the cheapest edit (fewest pixels changed) among
/// filling, clearing or restoring the drawn target on the cells of the window-anchored
/// grid around the record's box, grown by up to `d` towards all sides, one side or one
/// corner, after which the rules find no record near the edit that was not there before
/// ([`local_violations`] on a crop around it). Returns how many edits were made.
pub(super) fn repair_locally<'v>(
    req: &LegalizeRequest<'_>,
    mask: &mut Grid<u8>,
    limits: &MrcLimits,
    violations: impl Iterator<Item = &'v Violation>,
) -> usize {
    const SIDES: [[bool; 4]; 9] = [
        [true, true, true, true],
        [true, false, false, false],
        [false, true, false, false],
        [false, false, true, false],
        [false, false, false, true],
        [true, true, false, false],
        [false, true, true, false],
        [false, false, true, true],
        [true, false, false, true],
    ];
    let (w, h) = (mask.width, mask.height);
    let g = req.grid_px.max(1);
    let d = req
        .px(limits.width_nm.max(limits.space_nm).max(limits.notch_nm))
        .ceil()
        .max(1.0) as usize;
    let (wx0, wy0, wx1, wy1) = req.window;
    let snap = |b: PixelBox| -> PixelBox {
        let down = |v: usize, o: usize| o + (v.max(o) - o) / g * g;
        let up = |v: usize, o: usize| o + (v.max(o) - o).div_ceil(g) * g;
        (
            down(b.0, wx0).min(wx1),
            down(b.1, wy0).min(wy1),
            up(b.2, wx0).min(wx1),
            up(b.3, wy0).min(wy1),
        )
    };
    // Toward the window's grid line at or inside `b` (within the frame).
    let aligned = |b: PixelBox| -> PixelBox {
        let on =
            |v: usize, o: usize| (o as i64 + (v as i64 - o as i64) / g as i64 * g as i64) as usize;
        (on(b.0, wx0), on(b.1, wy0), on(b.2, wx0), on(b.3, wy0))
    };
    let mut edits = 0;
    // A record outside the window (a sliver of the frozen mask at its edge) is edited
    // from the window's side: its box grown by a rule's reach.
    let boxes: Vec<PixelBox> = violations
        .map(|v| {
            let b = violation_box(req, v, 1.0, w, h);
            let s = snap(b);
            if s.0 < s.2 && s.1 < s.3 {
                b
            } else {
                violation_box(req, v, d as f64, w, h)
            }
        })
        .collect();
    let kmax = d.div_ceil(g);
    let target = snap_to_grid(req.target, req.window, g);
    for vb in boxes {
        let vb = snap(vb);
        if vb.0 >= vb.2 || vb.1 >= vb.3 {
            continue;
        }
        // One crop for every candidate (on the window's grid): the largest edit box, the
        // projection's reach and the reach of a rule. It reaches beyond the window into
        // the mask outside it (read only: edits and projections stay in the window), so a
        // record at the window's edge is judged against the mask actually there (D174).
        let reach = (kmax + 2) * g + 4 * d;
        let crop = aligned(grow_box(vb, reach, (0, 0, w, h)));
        let inner = (
            wx0.max(crop.0) - crop.0,
            wy0.max(crop.1) - crop.1,
            wx1.min(crop.2) - crop.0,
            wy1.min(crop.3) - crop.1,
        );
        let offset = (crop.0, crop.1);
        let shift = |b: PixelBox| (b.0 - crop.0, b.1 - crop.1, b.2 - crop.0, b.3 - crop.1);
        let local = crop_of(mask, crop);
        let local_target = crop_of(&target, crop);
        let before = local_violations(req, &local, offset);
        let own = shift(grow_box(vb, 1, (0, 0, w, h)));
        if !before.iter().any(|&v| overlaps(v, own)) {
            continue;
        }
        // Accepted when every record left was there before and none is this one's.
        let keep: Vec<PixelBox> = before
            .iter()
            .copied()
            .filter(|&v| !overlaps(v, own))
            .collect();
        let square = LegalizeRequest {
            proposal: &local,
            target: &local,
            outside: None,
            window: (0, 0, local.width, local.height),
            style: MaskStyle::Manhattan,
            grid_px: g,
            ..*req
        };
        // An edit: the box set to a value (1: fill, 0: clear, 2: the drawn target on the
        // grid), then the square projection of the crop, kept within `d + g` of the box.
        let edit = |b: PixelBox, value: u8| -> Grid<u8> {
            let mut trial = local.clone();
            for y in b.1..b.3 {
                for x in b.0..b.2 {
                    *trial.at_mut(x, y) = if value == 2 {
                        *local_target.at(x, y)
                    } else {
                        value
                    };
                }
            }
            let projected = project(&square, &trial, limits, 0.0);
            let r = grow_box(b, d + g, (0, 0, local.width, local.height));
            paste(&mut trial, &projected, r, inner);
            trial
        };
        // Tried in the order of the pixels the box itself changes (cheapest first); the
        // first edit after which no new record is left near it is kept.
        let mut candidates: Vec<(usize, PixelBox, u8)> = Vec::new();
        for k in 0..=kmax {
            for sides in if k == 0 { &SIDES[..1] } else { &SIDES[..] } {
                let b = shift(snap(grow_sides(vb, k * g, *sides, req.window)));
                for value in [1u8, 0, 2] {
                    let mut cost = 0;
                    for y in b.1..b.3 {
                        for x in b.0..b.2 {
                            let new = if value == 2 {
                                *local_target.at(x, y)
                            } else {
                                value
                            };
                            cost += usize::from(*local.at(x, y) != new);
                        }
                    }
                    if cost > 0 && !candidates.iter().any(|c| c.1 == b && c.2 == value) {
                        candidates.push((cost, b, value));
                    }
                }
            }
        }
        candidates.sort_by_key(|c| c.0);
        for &(_, b, value) in candidates.iter().take(MAX_LOCAL_TRIES) {
            let trial = edit(b, value);
            if trial.data == local.data {
                continue;
            }
            let after = local_violations(req, &trial, offset);
            if after.iter().all(|v| keep.contains(v)) {
                paste_at(mask, &trial, offset);
                edits += 1;
                break;
            }
        }
    }
    edits
}
