//! EPE checkpoints on a 0/1 raster and the ICCAD EPE count at them.

use crate::Grid;
use crate::metrics::Checkpoint;

/// EPE checkpoints along the edges of a 0/1 raster, in pixel units (pixel `(x, y)` covers
/// `[x, x+1) × [y, y+1)`): every maximal straight run of boundary between a set pixel and
/// an unset one (outside the grid counts as unset) is an edge, with checkpoints at the
/// centres of `max(1, ⌊len / spacing⌋)` equal sub-segments, as [`crate::metrics::checkpoints`]
/// places them on polygon edges. Normals point out of the pattern.
#[must_use]
pub fn raster_checkpoints(target: &Grid<u8>, spacing_px: f64) -> Vec<Checkpoint> {
    let (w, h) = (target.width, target.height);
    let set = |x: isize, y: isize| -> bool {
        x >= 0
            && y >= 0
            && (x as usize) < w
            && (y as usize) < h
            && *target.at(x as usize, y as usize) != 0
    };
    let mut out = Vec::new();
    let mut emit = |start: usize, end: usize, fixed: f64, horizontal: bool, sign: f64| {
        let len = (end - start) as f64;
        let count = ((len / spacing_px).floor() as usize).max(1);
        for j in 0..count {
            let t = start as f64 + (j as f64 + 0.5) / count as f64 * len;
            out.push(if horizontal {
                Checkpoint {
                    x: t,
                    y: fixed,
                    nx: 0.0,
                    ny: sign,
                }
            } else {
                Checkpoint {
                    x: fixed,
                    y: t,
                    nx: sign,
                    ny: 0.0,
                }
            });
        }
    };
    // Horizontal boundary lines y = Y between rows Y−1 and Y; state −1 (inside above,
    // normal −y), +1 (inside below, normal +y), 0 (no edge).
    for yy in 0..=h as isize {
        let mut run: Option<(usize, i8)> = None;
        for x in 0..=w {
            let state = if x < w {
                let (above, below) = (set(x as isize, yy), set(x as isize, yy - 1));
                match (above, below) {
                    (true, false) => -1i8,
                    (false, true) => 1,
                    _ => 0,
                }
            } else {
                0
            };
            if run.is_some_and(|(_, s)| s != state)
                && let Some((start, s)) = run.take()
            {
                emit(start, x, yy as f64, true, f64::from(s));
            }
            if state != 0 && run.is_none() {
                run = Some((x, state));
            }
        }
    }
    for xx in 0..=w as isize {
        let mut run: Option<(usize, i8)> = None;
        for y in 0..=h {
            let state = if y < h {
                let (right, left) = (set(xx, y as isize), set(xx - 1, y as isize));
                match (right, left) {
                    (true, false) => -1i8,
                    (false, true) => 1,
                    _ => 0,
                }
            } else {
                0
            };
            if run.is_some_and(|(_, s)| s != state)
                && let Some((start, s)) = run.take()
            {
                emit(start, y, xx as f64, false, f64::from(s));
            }
            if state != 0 && run.is_none() {
                run = Some((y, state));
            }
        }
    }
    out
}

/// ICCAD EPE violations at pixel-unit checkpoints: violated unless the print is set at
/// `tolerance` inward and unset at `tolerance` outward (the rule of
/// [`crate::metrics::epe_violations`]).
pub(super) fn epe_violations_px(cps: &[Checkpoint], printed: &Grid<u8>, tolerance: f64) -> u64 {
    epe_violated_px(cps, printed, tolerance)
        .into_iter()
        .filter(|&v| v)
        .count() as u64
}

/// Per checkpoint, whether [`epe_violations_px`] counts it.
pub(super) fn epe_violated_px(cps: &[Checkpoint], printed: &Grid<u8>, tolerance: f64) -> Vec<bool> {
    let at = |x: f64, y: f64| -> bool {
        let (px, py) = (x.floor(), y.floor());
        if px < 0.0 || py < 0.0 || px >= printed.width as f64 || py >= printed.height as f64 {
            return false;
        }
        *printed.at(px as usize, py as usize) != 0
    };
    cps.iter()
        .map(|c| {
            let inside = at(c.x - tolerance * c.nx, c.y - tolerance * c.ny);
            let outside = at(c.x + tolerance * c.nx, c.y + tolerance * c.ny);
            !inside || outside
        })
        .collect()
}
