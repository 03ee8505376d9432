//! Polygon rasterization with exact area coverage.
//!
//! Every pixel gets the exact fraction of its area covered by the polygons (signed
//! area accumulation per edge, the method of font rasterizers), at any pixel size.
//! Polygons are normalized to counter-clockwise so each contributes positive area;
//! the sum is clamped to `[0, 1]`, which is exact for polygons that do not overlap
//! (touching is fine: shared edges cancel exactly) and for overlaps that cover whole
//! pixels; a pixel partially covered by two overlapping polygons is over-estimated
//! before the clamp.

use reticle_layout::{BBox, Polygon};

use crate::Grid;

/// How a pixel grid sits in the layout frame (nm): pixel `(x, y)` covers
/// `[left + x·p, left + (x+1)·p) × [bottom + y·p, bottom + (y+1)·p)`, row 0 at the bottom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelFrame {
    /// Left edge of column 0 (nm).
    pub left_nm: f64,
    /// Bottom edge of row 0 (nm).
    pub bottom_nm: f64,
    /// Pixel side (nm).
    pub pixel_nm: f64,
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

/// A rasterization request that cannot be honoured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RasterError {
    /// Pixel size not finite and positive.
    #[error("pixel size must be finite and > 0, got {0}")]
    BadPixel(f64),
    /// The window holds no pixel, or too many.
    #[error("window of {width}×{height} pixels is empty or too large")]
    BadWindow {
        /// Columns asked for.
        width: u64,
        /// Rows asked for.
        height: u64,
    },
}

/// Largest raster side accepted (pixels); 2^15 keeps one grid under 4 GiB of f32.
pub const MAX_SIDE: u64 = 1 << 15;

impl PixelFrame {
    /// The grid covering `window` at `pixel_nm` (sides rounded up to whole pixels).
    pub fn for_window(window: BBox, pixel_nm: f64) -> Result<Self, RasterError> {
        if !(pixel_nm.is_finite() && pixel_nm > 0.0) {
            return Err(RasterError::BadPixel(pixel_nm));
        }
        let w = (window.width() as f64 / pixel_nm).ceil();
        let h = (window.height() as f64 / pixel_nm).ceil();
        if !(w >= 1.0 && h >= 1.0 && w <= MAX_SIDE as f64 && h <= MAX_SIDE as f64) {
            return Err(RasterError::BadWindow {
                width: w.max(0.0) as u64,
                height: h.max(0.0) as u64,
            });
        }
        Ok(Self {
            left_nm: window.left as f64,
            bottom_nm: window.bottom as f64,
            pixel_nm,
            width: w as usize,
            height: h as usize,
        })
    }

    /// Layout x (nm) of the centre of column `x`.
    #[must_use]
    pub fn center_x(&self, x: f64) -> f64 {
        self.left_nm + (x + 0.5) * self.pixel_nm
    }

    /// Layout y (nm) of the centre of row `y`.
    #[must_use]
    pub fn center_y(&self, y: f64) -> f64 {
        self.bottom_nm + (y + 0.5) * self.pixel_nm
    }
}

/// Rasterizes `polygons` into the window at `pixel_nm` with exact area coverage.
pub fn rasterize(
    polygons: &[Polygon],
    window: BBox,
    pixel_nm: f64,
) -> Result<(Grid<f32>, PixelFrame), RasterError> {
    let frame = PixelFrame::for_window(window, pixel_nm)?;
    Ok((rasterize_in(polygons, &frame), frame))
}

/// Rasterizes into an existing frame.
#[must_use]
pub fn rasterize_in(polygons: &[Polygon], frame: &PixelFrame) -> Grid<f32> {
    rasterize_into(polygons, frame, Vec::new())
}

/// [`rasterize_in`] writing into `reuse`'s buffer (resized to the frame; every pixel
/// is written, so its old content does not matter): a whole-layout worker rasterizes
/// each tile's window into the last tile's buffer instead of fresh pages (D195).
#[must_use]
pub fn rasterize_into(polygons: &[Polygon], frame: &PixelFrame, reuse: Vec<f32>) -> Grid<f32> {
    scan(polygons, frame, reuse, None).0
}

/// [`rasterize_into`], and the pixels at least half covered (`coverage >= 0.5`, 0/1) in
/// `target`'s buffer: the target image of a window, in the same pass.
#[must_use]
pub fn rasterize_with_target(
    polygons: &[Polygon],
    frame: &PixelFrame,
    reuse: Vec<f32>,
    target: Vec<u8>,
) -> (Grid<f32>, Grid<u8>) {
    let (coverage, target) = scan(polygons, frame, reuse, Some(target));
    let target = target.unwrap_or_else(|| Grid::filled(coverage.width, coverage.height, 0));
    (coverage, target)
}

/// One clipped edge piece as the scanline visits it: the state `accumulate` keeps for
/// it from row to row.
#[derive(Debug, Clone, Copy)]
struct EdgePiece {
    /// Signed area direction (`±1`).
    dir: f64,
    /// x (pixels) where the piece enters its current row.
    x: f64,
    /// dx per unit of y.
    dxdy: f64,
    /// First and last y (pixels) of the piece inside the frame.
    y_start: f64,
    y_end: f64,
    /// First row it touches.
    first_row: usize,
}

/// The scanline rasterizer: every clipped edge piece of every polygon, in polygon and
/// edge order, becomes a [`EdgePiece`]; rows are then filled one at a time in one row
/// buffer, each row receiving the pieces that cross it in that same order, so every
/// pixel's sum is the same sequence of additions as accumulating edge after edge into a
/// whole-frame buffer would make (bit for bit), without that buffer.
fn scan(
    polygons: &[Polygon],
    frame: &PixelFrame,
    mut out: Vec<f32>,
    target: Option<Vec<u8>>,
) -> (Grid<f32>, Option<Grid<u8>>) {
    let (w, h) = (frame.width, frame.height);
    let mut pieces = Vec::new();
    for poly in polygons {
        let n = poly.points.len();
        if n < 3 {
            continue;
        }
        let sign = if poly.signed_area2() < 0 { -1.0 } else { 1.0 };
        let to_px = |i: usize| {
            let p = poly.points[i % n];
            (
                (p.x as f64 - frame.left_nm) / frame.pixel_nm,
                (p.y as f64 - frame.bottom_nm) / frame.pixel_nm,
            )
        };
        for i in 0..n {
            clipped_edge(&mut pieces, w, h, to_px(i), to_px(i + 1), sign);
        }
    }
    // Pieces by first row, then by their order (a stable sort keeps the order).
    let mut order: Vec<u32> = (0..pieces.len() as u32).collect();
    order.sort_by_key(|&i| pieces[i as usize].first_row);
    // Every pixel is written below: no clearing (D195).
    out.resize(w * h, 0.0);
    let mut target = target.map(|mut t| {
        t.resize(w * h, 0);
        t
    });
    // One spare column so a segment on the right border has somewhere to write.
    let stride = w + 2;
    let mut row = vec![0.0f64; stride];
    let mut active: Vec<u32> = Vec::new();
    let mut starting: Vec<u32> = Vec::new();
    let mut touched: Vec<(usize, usize)> = Vec::new();
    let mut next = 0;
    for y in 0..h {
        starting.clear();
        while next < order.len() && pieces[order[next] as usize].first_row == y {
            starting.push(order[next]);
            next += 1;
        }
        if !starting.is_empty() {
            starting.sort_unstable();
            active = merge_sorted(&active, &starting);
        }
        touched.clear();
        active.retain(|&i| {
            let p = &mut pieces[i as usize];
            touched.push(accumulate_row(&mut row, y, p));
            ((y + 1) as f64) < p.y_end
        });
        let dst = &mut out[y * w..(y + 1) * w];
        running_sums(&mut row, &mut touched, dst);
        if let Some(t) = target.as_mut() {
            for (t, &v) in t[y * w..(y + 1) * w].iter_mut().zip(dst.iter()) {
                *t = u8::from(v >= 0.5);
            }
        }
    }
    let grid = Grid {
        width: w,
        height: h,
        data: out,
    };
    let target = target.map(|data| Grid {
        width: w,
        height: h,
        data,
    });
    (grid, target)
}

/// The coverage of one row: the running sum of `row`'s cells, `|sum|` clamped to 1, into
/// `dst`; `row` is left all zeros. Only the cells in `touched` (inclusive column ranges,
/// any order) are non-zero: between them the sum is constant and written as a run, the
/// same values adding each zero cell would give (D195).
fn running_sums(row: &mut [f64], touched: &mut [(usize, usize)], dst: &mut [f32]) {
    let w = dst.len();
    touched.sort_unstable();
    let mut run = 0.0f64;
    let mut x = 0;
    for &(lo, hi) in touched.iter() {
        let lo = lo.min(w);
        if lo > x {
            dst[x..lo].fill(run.abs().min(1.0) as f32);
            x = lo;
        }
        let end = (hi + 1).min(w);
        while x < end {
            run += row[x];
            row[x] = 0.0;
            dst[x] = run.abs().min(1.0) as f32;
            x += 1;
        }
    }
    dst[x..].fill(run.abs().min(1.0) as f32);
    for &(lo, hi) in touched.iter() {
        row[lo..=hi].fill(0.0);
    }
}

/// The union of two sorted lists of distinct indices, sorted.
fn merge_sorted(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Splits an edge where it crosses `x = 0` and `x = w`, clamps the pieces into
/// `[0, w]` (exact: left of the window an edge covers every pixel to its right, right
/// of it none) and adds each piece that crosses a row of the frame to `pieces`.
fn clipped_edge(
    pieces: &mut Vec<EdgePiece>,
    w: usize,
    h: usize,
    a: (f64, f64),
    b: (f64, f64),
    sign: f64,
) {
    let wf = w as f64;
    let mut ts = [0.0, 1.0, 0.0, 0.0];
    let mut count = 2;
    for xb in [0.0, wf] {
        if (a.0 - xb) * (b.0 - xb) < 0.0 {
            ts[count] = (xb - a.0) / (b.0 - a.0);
            count += 1;
        }
    }
    let ts = &mut ts[..count];
    ts.sort_by(f64::total_cmp);
    let at = |t: f64| (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
    for pair in ts.windows(2) {
        let (p, q) = (at(pair[0]), at(pair[1]));
        let p = (p.0.clamp(0.0, wf), p.1);
        let q = (q.0.clamp(0.0, wf), q.1);
        if let Some(piece) = piece(h, p, q, sign) {
            pieces.push(piece);
        }
    }
}

/// The piece of segment `p → q` inside the rows `0..h`, oriented upwards; `None` when it
/// is horizontal or misses the rows.
fn piece(h: usize, p: (f64, f64), q: (f64, f64), sign: f64) -> Option<EdgePiece> {
    if p.1 == q.1 {
        return None;
    }
    // Upward edges of a counter-clockwise polygon are on its right side.
    let (dir, p0, p1) = if p.1 < q.1 {
        (-sign, p, q)
    } else {
        (sign, q, p)
    };
    let dxdy = (p1.0 - p0.0) / (p1.1 - p0.1);
    let y_start = p0.1.max(0.0);
    let y_end = p1.1.min(h as f64);
    if y_start >= y_end {
        return None;
    }
    Some(EdgePiece {
        dir,
        x: p0.0 + (y_start - p0.1) * dxdy,
        dxdy,
        y_start,
        y_end,
        first_row: y_start.floor() as usize,
    })
}

/// Adds the signed area to the right of the piece within each pixel of row `y` (font-rs
/// accumulation; the running row sum then yields the coverage) and moves the piece to the
/// next row. Returns the columns it wrote (inclusive).
fn accumulate_row(row: &mut [f64], y: usize, piece: &mut EdgePiece) -> (usize, usize) {
    let EdgePiece {
        dir,
        x,
        dxdy,
        y_start,
        y_end,
        ..
    } = *piece;
    let ya = (y as f64).max(y_start);
    let yb = ((y + 1) as f64).min(y_end);
    let dy = yb - ya;
    let xnext = x + dxdy * dy;
    let d = dy * dir;
    let (x0, x1) = if x < xnext { (x, xnext) } else { (xnext, x) };
    let x0f = x0.floor();
    let x0i = x0f as usize;
    let x1c = x1.ceil();
    let x1i = (x1c as usize).max(x0i + 1);
    if x1i <= x0i + 1 {
        // The segment stays within one column.
        let xm = 0.5 * (x + xnext) - x0f;
        row[x0i] += d - d * xm;
        row[x0i + 1] += d * xm;
    } else {
        let s = 1.0 / (x1 - x0);
        let x0r = x0 - x0f;
        let a0 = 0.5 * s * (1.0 - x0r) * (1.0 - x0r);
        let x1r = x1 - x1c + 1.0;
        let am = 0.5 * s * x1r * x1r;
        row[x0i] += d * a0;
        if x1i == x0i + 2 {
            row[x0i + 1] += d * (1.0 - a0 - am);
        } else {
            let a1 = s * (1.5 - x0r);
            row[x0i + 1] += d * (a1 - a0);
            for cell in &mut row[x0i + 2..x1i - 1] {
                *cell += d * s;
            }
            let a2 = a1 + (x1i - x0i - 3) as f64 * s;
            row[x1i - 1] += d * (1.0 - a2 - am);
        }
        row[x1i] += d * am;
    }
    piece.x = xnext;
    (x0i, x1i.max(x0i + 1))
}
