//! Binary morphology with disk and square structuring elements, on exact Euclidean
//! distance transforms (Felzenszwalb–Huttenlocher, linear time per row and column).
//!
//! Distances are between pixel centres. What lies beyond the grid is unknown (the clip
//! cuts the layout), so no operation here erodes from the border or grows from it: a
//! shape that touches the border keeps its pixels there.

use rayon::prelude::*;

use crate::Grid;

// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub const FAR: f64 = 1e18;

/// The lower envelope of parabolas: squared distance along one line (in place).
fn edt_1d(f: &mut [f64], v: &mut [usize], z: &mut [f64], out: &mut [f64]) {
    let n = f.len();
    let mut k = 0usize;
    v[0] = 0;
    z[0] = -FAR;
    z[1] = FAR;
    for q in 1..n {
        loop {
            let p = v[k];
            let s = ((f[q] + (q * q) as f64) - (f[p] + (p * p) as f64)) / (2.0 * (q - p) as f64);
            if s <= z[k] && k > 0 {
                k -= 1;
            } else {
                k += 1;
                v[k] = q;
                z[k] = s;
                z[k + 1] = FAR;
                break;
            }
        }
    }
    k = 0;
    for (q, o) in out.iter_mut().enumerate() {
        while z[k + 1] < q as f64 {
            k += 1;
        }
        let d = q as f64 - v[k] as f64;
        *o = d * d + f[v[k]];
    }
    f.copy_from_slice(out);
}

/// Squared distance from every pixel centre to the nearest pixel where `source` holds
/// (`FAR` and more where none does).
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn sq_distance(grid: &Grid<u8>, source: u8) -> Vec<f64> {
    let (w, h) = (grid.width, grid.height);
    // Columns first (stored transposed so that both passes walk contiguous rows).
    let mut cols = vec![0.0f64; w * h];
    cols.par_chunks_mut(h).enumerate().for_each(|(x, col)| {
        let (mut v, mut z, mut out) = (vec![0usize; h], vec![0.0f64; h + 1], vec![0.0f64; h]);
        for (y, c) in col.iter_mut().enumerate() {
            *c = if (*grid.at(x, y) != 0) == (source != 0) {
                0.0
            } else {
                FAR
            };
        }
        edt_1d(col, &mut v, &mut z, &mut out);
    });
    let mut d = vec![0.0f64; w * h];
    d.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
        let (mut v, mut z, mut out) = (vec![0usize; w], vec![0.0f64; w + 1], vec![0.0f64; w]);
        for (x, r) in row.iter_mut().enumerate() {
            *r = cols[x * h + y];
        }
        edt_1d(row, &mut v, &mut z, &mut out);
    });
    d
}

fn map(grid: &Grid<u8>, f: impl Fn(usize) -> bool + Sync) -> Grid<u8> {
    Grid {
        width: grid.width,
        height: grid.height,
        data: (0..grid.data.len())
            .into_par_iter()
            .map(|i| u8::from(f(i)))
            .collect(),
    }
}

/// Erosion by a disk of radius `r` pixels: a pixel stays when no background pixel lies
/// within `r` of it.
#[must_use]
pub fn erode_disk(grid: &Grid<u8>, r: f64) -> Grid<u8> {
    let d = sq_distance(grid, 0);
    map(grid, |i| grid.data[i] != 0 && d[i] > r * r)
}

/// Dilation by a disk of radius `r` pixels: a pixel is set when a set pixel lies within
/// `r` of it.
#[must_use]
pub fn dilate_disk(grid: &Grid<u8>, r: f64) -> Grid<u8> {
    let d = sq_distance(grid, 1);
    map(grid, |i| d[i] <= r * r)
}

/// Opening by a disk: removes every part that a disk of radius `r` cannot sweep.
#[must_use]
pub fn open_disk(grid: &Grid<u8>, r: f64) -> Grid<u8> {
    dilate_disk(&erode_disk(grid, r), r)
}

/// Closing by a disk: fills every gap that a disk of radius `r` cannot pass.
#[must_use]
pub fn close_disk(grid: &Grid<u8>, r: f64) -> Grid<u8> {
    erode_disk(&dilate_disk(grid, r), r)
}

/// Running "all set" (or "any set") over windows of `side` pixels along rows, then
/// columns: erosion (dilation) by a `side × side` square anchored at its lower-left
/// pixel (`lo = side / 2` pixels before the centre).
fn square(grid: &Grid<u8>, side: usize, all: bool) -> Grid<u8> {
    let (w, h) = (grid.width, grid.height);
    let lo = side / 2;
    let hi = side - 1 - lo;
    // The outside counts for nothing: an erosion asks that every pixel of the window on
    // the grid be set, a dilation that one be.
    let pass = |get: &dyn Fn(isize) -> bool, n: usize, out: &mut [u8]| {
        // Prefix counts of set pixels.
        let mut pre = vec![0usize; n + 1];
        for i in 0..n {
            pre[i + 1] = pre[i] + usize::from(get(i as isize));
        }
        for (i, o) in out.iter_mut().enumerate() {
            let a = i as isize - lo as isize;
            let b = i as isize + hi as isize;
            let (ca, cb) = (a.max(0) as usize, (b.min(n as isize - 1) + 1) as usize);
            let count = if cb > ca { pre[cb] - pre[ca] } else { 0 };
            *o = u8::from(if all {
                cb > ca && count == cb - ca
            } else {
                count > 0
            });
        }
    };
    let mut rows = vec![0u8; w * h];
    rows.par_chunks_mut(w).enumerate().for_each(|(y, out)| {
        pass(&|x| *grid.at(x as usize, y) != 0, w, out);
    });
    let mut cols = vec![0u8; w * h];
    cols.par_chunks_mut(h).enumerate().for_each(|(x, out)| {
        pass(&|y| rows[y as usize * w + x] != 0, h, out);
    });
    let mut data = vec![0u8; w * h];
    data.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
        for (x, v) in row.iter_mut().enumerate() {
            *v = cols[x * h + y];
        }
    });
    Grid {
        width: w,
        height: h,
        data,
    }
}

/// Opening by a `side × side` square (for Manhattan masks): what squares of that side
/// can cover. Erosion and dilation use mirrored anchors, so the opening is exact.
#[must_use]
pub fn open_square(grid: &Grid<u8>, side: usize) -> Grid<u8> {
    if side <= 1 {
        return grid.clone();
    }
    let eroded = square(grid, side, true);
    dilate_square_mirrored(&eroded, side)
}

/// Closing by a `side × side` square: the complement's opening.
#[must_use]
pub fn close_square(grid: &Grid<u8>, side: usize) -> Grid<u8> {
    let inverted = map(grid, |i| grid.data[i] == 0);
    let opened = open_square(&inverted, side);
    map(grid, |i| opened.data[i] == 0)
}

/// Dilation by the square mirrored with respect to [`square`]'s anchor.
fn dilate_square_mirrored(grid: &Grid<u8>, side: usize) -> Grid<u8> {
    // Mirror: flip, dilate with the same anchor, flip back.
    let flipped = flip(grid);
    flip(&square(&flipped, side, false))
}

fn flip(grid: &Grid<u8>) -> Grid<u8> {
    let (w, h) = (grid.width, grid.height);
    Grid {
        width: w,
        height: h,
        data: (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                *grid.at(w - 1 - x, h - 1 - y)
            })
            .collect(),
    }
}

/// Connected components (4-connected) of the set pixels: a label per pixel (0 = unset)
/// and the pixel count of each label (index 0 unused).
#[must_use]
pub fn components(grid: &Grid<u8>) -> (Vec<u32>, Vec<usize>) {
    let (w, h) = (grid.width, grid.height);
    let mut label = vec![0u32; w * h];
    let mut sizes = vec![0usize];
    let mut stack = Vec::new();
    for start in 0..w * h {
        if grid.data[start] == 0 || label[start] != 0 {
            continue;
        }
        let id = sizes.len() as u32;
        sizes.push(0);
        label[start] = id;
        stack.push(start);
        while let Some(i) = stack.pop() {
            sizes[id as usize] += 1;
            let (x, y) = (i % w, i / w);
            let mut visit = |j: usize| {
                if grid.data[j] != 0 && label[j] == 0 {
                    label[j] = id;
                    stack.push(j);
                }
            };
            if x > 0 {
                visit(i - 1);
            }
            if x + 1 < w {
                visit(i + 1);
            }
            if y > 0 {
                visit(i - w);
            }
            if y + 1 < h {
                visit(i + w);
            }
        }
    }
    (label, sizes)
}
