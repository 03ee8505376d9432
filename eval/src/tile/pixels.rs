//! A tile's pixel counts: L2 and PV band (and, for `simulate`, the print and aerial
//! statistics) over the core pixels whose centre is in the region, for an imaged tile and
//! for one with nothing to image.

use reticle_kernel::Grid;
use reticle_kernel::raster::PixelFrame;
use reticle_layout::BBox;

use super::{TileJob, TileMetrics};
use crate::tiles::intersection;
use crate::window::ImagedWindow;

/// The window pixels (columns `x0..x1`, rows `y0..y1`) whose centres lie in `b` (dbu).
pub fn pixels_in(frame: &PixelFrame, p: f64, b: &BBox) -> (usize, usize, usize, usize) {
    // Pixel k of the frame has its centre at left + (k + 0.5) p: inside [lo, hi) for
    // k from ceil((lo - left)/p - 0.5) up to (not including) ceil((hi - left)/p - 0.5).
    let span = |origin: f64, lo: i64, hi: i64, n: usize| {
        let first = |v: i64| (((v as f64 - origin) / p - 0.5).ceil().max(0.0) as usize).min(n);
        (first(lo), first(hi))
    };
    let (x0, x1) = span(frame.left_nm, b.left, b.right, frame.width);
    let (y0, y1) = span(frame.bottom_nm, b.bottom, b.top, frame.height);
    (x0, x1.max(x0), y0, y1.max(y0))
}

/// L2, PV band and, with [`TileJob::statistics`], the print and aerial statistics over the
/// core pixels whose centre is in the region.
pub(super) fn count_pixels(job: &TileJob<'_>, imaged: &ImagedWindow, m: &mut TileMetrics) {
    let Some(owned) = intersection(&job.grid.core(job.tile), &job.region) else {
        return;
    };
    let frame = &imaged.frame;
    let (x0, x1, y0, y1) = pixels_in(frame, job.grid.pixel_dbu, &owned);
    let corners = &imaged.output.corners;
    let w = frame.width;
    // A corner without a print reads as all dark; rows are plain slices so the counting
    // loop vectorizes (D196).
    let dark = vec![0u8; x1 - x0];
    fn row<'a>(g: Option<&'a Grid<u8>>, dark: &'a [u8], y: usize, w: usize, x0: usize) -> &'a [u8] {
        g.map_or(dark, |g| &g.data[y * w + x0..y * w + x0 + dark.len()])
    }
    let aerial = corners[0].aerial.as_ref();
    let r = imaged.resist;
    let (mut lo, mut hi, mut sum, mut resist) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64, 0.0f64);
    for y in y0..y1 {
        let target = &imaged.target.data[y * w + x0..y * w + x1];
        let nominal = row(corners[0].printed.as_ref(), &dark, y, w, x0);
        let max = row(
            corners.get(1).and_then(|c| c.printed.as_ref()),
            &dark,
            y,
            w,
            x0,
        );
        let min = row(
            corners.get(2).and_then(|c| c.printed.as_ref()),
            &dark,
            y,
            w,
            x0,
        );
        let c = if job.statistics {
            count_row::<true>(target, nominal, max, min)
        } else {
            count_row::<false>(target, nominal, max, min)
        };
        m.target_px += u64::from(c[0]);
        m.l2_px += u64::from(c[1]);
        m.pvb_px += u64::from(c[2]);
        for (p, k) in m.printed_px.iter_mut().zip(&c[3..]) {
            *p += u64::from(*k);
        }
        if let Some(a) = aerial.filter(|_| job.statistics) {
            for &i in &a.data[y * w + x0..y * w + x1] {
                let v = f64::from(i);
                lo = lo.min(v);
                hi = hi.max(v);
                sum += v;
                if job.statistics {
                    resist += f64::from(1.0 / (1.0 + (-r.steepness * (i - r.threshold)).exp()));
                }
            }
        }
    }
    m.pixels = ((x1 - x0) * (y1 - y0)) as u64;
    if m.pixels > 0 && aerial.is_some() && job.statistics {
        m.aerial_min = lo;
        m.aerial_max = hi;
        m.aerial_sum = sum;
        m.resist_sum = resist;
    }
}

/// One row's counts: target, L2 (nominal print ≠ target), PV band (max ≠ min print), and
/// the printed pixels of the three corners; with `ALL` false only L2 and PV band (the
/// others 0), what an evaluation reads (D197).
fn count_row<const ALL: bool>(target: &[u8], nominal: &[u8], max: &[u8], min: &[u8]) -> [u32; 6] {
    let mut c = [0u32; 6];
    for (((&t, &n), &hi_dose), &lo_dose) in target.iter().zip(nominal).zip(max).zip(min) {
        let (t, n) = (u32::from(t != 0), u32::from(n != 0));
        let (hi_dose, lo_dose) = (u32::from(hi_dose != 0), u32::from(lo_dose != 0));
        c[1] += n ^ t;
        c[2] += hi_dose ^ lo_dose;
        if ALL {
            c[0] += t;
            c[3] += n;
            c[4] += hi_dose;
            c[5] += lo_dose;
        }
    }
    c
}

/// The counted pixels of a tile whose window holds nothing: all dark, nothing printed.
pub(super) fn count_empty_pixels(job: &TileJob<'_>, m: &mut TileMetrics) {
    let Some(owned) = intersection(&job.grid.core(job.tile), &job.region) else {
        return;
    };
    let p = job.grid.pixel_dbu;
    let core = job.grid.core(job.tile);
    let count = |lo: i64, hi: i64, o_lo: i64, o_hi: i64| {
        // Pixels of the core along one axis whose centre lies in [o_lo, o_hi).
        let n = ((hi - lo) as f64 / p).round() as i64;
        (0..n)
            .filter(|k| {
                let c = lo as f64 + (*k as f64 + 0.5) * p;
                c >= o_lo as f64 && c < o_hi as f64
            })
            .count() as u64
    };
    m.pixels = count(core.left, core.right, owned.left, owned.right)
        * count(core.bottom, core.top, owned.bottom, owned.top);
    m.aerial_min = 0.0;
    m.aerial_max = 0.0;
    if job.statistics {
        // The resist every tile is imaged with, at zero intensity.
        let r = reticle_kernel::Resist::ICCAD2013;
        let dark = f64::from(1.0 / (1.0 + (-r.steepness * (0.0 - r.threshold)).exp()));
        m.resist_sum = dark * m.pixels as f64;
    }
}
