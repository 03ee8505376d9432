//! Band-limited SOCS imaging: the fast CPU path.
//!
//! A kernel of side `s = 2c+1` passes only spatial frequencies `|u|, |v| <= c`, so
//! each coherent field is band-limited to `c` and the intensity `Σ w|field|²` to `2c`.
//! Hence:
//! 1. only the `(2c+1)²` band of the mask spectrum is needed: a real-row FFT pass
//!    (two rows per complex FFT) and column FFTs for the `2c+1` band columns only;
//! 2. each field is evaluated on the smallest fast grid `m >= 4c+1` (alias-free for
//!    the intensity), and `Σ w|field|²` is summed there;
//! 3. the coarse intensity's spectrum (exact: `m > 4c`) is zero-padded to `n` and
//!    inverse transformed, again pruned to the `4c+1` non-zero columns and pairing two
//!    real rows per complex FFT.
//!
//! The result equals the naive full-size method up to rounding (see the tests).

use num_complex::Complex64;
use rayon::prelude::*;

use crate::fft::{self, Direction};
use crate::{CancelToken, Cancelled, Grid, KernelSet, scratch};

/// The centred `(2·half+1)²` band of a mask spectrum, `[v][u]`, `u, v ∈ [-half, half]`.
#[derive(Debug, Clone)]
pub struct MaskBand {
    /// Mask side (pixels).
    pub n: usize,
    /// Half-width of the band (frequency bins).
    pub half: usize,
    /// `(2·half+1)²` unnormalized DFT coefficients, row `v + half`, column `u + half`.
    pub data: Vec<Complex64>,
}

impl MaskBand {
    fn side(&self) -> usize {
        2 * self.half + 1
    }

    /// Coefficient at signed frequency `(u, v)`, `|u|, |v| <= half`.
    #[must_use]
    pub fn at(&self, u: isize, v: isize) -> Complex64 {
        let h = self.half as isize;
        self.data[((v + h) as usize) * self.side() + (u + h) as usize]
    }
}

/// Computes the band `|u|, |v| <= half` of the DFT of a square real mask (`half` is
/// capped at the Nyquist bin).
pub fn mask_band(
    mask: &Grid<f32>,
    half: usize,
    cancel: &CancelToken,
) -> Result<MaskBand, Cancelled> {
    let n = mask.width;
    let half = half.min((n - 1) / 2);
    let data = real_band(&mask.data, n, half, cancel)?;
    Ok(MaskBand { n, half, data })
}

/// The band `|u|, |v| <= half` of the unnormalized forward DFT of a real `n × n` image
/// (row-major), as `(2·half+1)²` coefficients, row `v + half`, column `u + half`. Two
/// real rows share one complex row FFT; only the band's columns are transformed. A
/// `half` past the Nyquist bin reads aliased bins (the DFT is periodic); [`mask_band`]
/// caps it, the ILT's exact transposes rely on it not being capped.
pub fn real_band<T: bytemuck::Pod + Into<f64> + Sync>(
    image: &[T],
    n: usize,
    half: usize,
    cancel: &CancelToken,
) -> Result<Vec<Complex64>, Cancelled> {
    real_band_of(image, n, half, Repeats::Copied, cancel)
}

/// Whether [`real_band_of`] copies the transform of a pair of rows equal to the pair
/// before (D239) or transforms every pair (the reference the tests compare with).
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeats {
    /// A pair equal to the pair before takes its transform.
    Copied,
    /// Every pair is transformed.
    Transformed,
}

/// [`real_band`], with repeated pairs of rows handled as `repeats` says.
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn real_band_of<T: bytemuck::Pod + Into<f64> + Sync>(
    image: &[T],
    n: usize,
    half: usize,
    repeats: Repeats,
    cancel: &CancelToken,
) -> Result<Vec<Complex64>, Cancelled> {
    let side = 2 * half + 1;
    let row_fft = fft::plan(n, Direction::Forward);
    // Each band column's bins `u` and `-u` of a row transform, computed once (D207).
    let bins: Vec<(usize, usize)> = (0..side)
        .map(|j| {
            let u = j as isize - half as isize;
            (fft::wrap(u, n), fft::wrap(-u, n))
        })
        .collect();
    // Row pass: rowspec[y][j] = Σ_x m[y][x] e^{-2πi u x/n}, u = j - half.
    // Every element of both buffers is written before it is read (D195).
    let mut rowspec = scratch::take::<Complex64>(n * side);
    let pairs_per_task = 8usize;
    rowspec
        .par_chunks_mut(2 * side * pairs_per_task)
        .enumerate()
        .try_for_each(|(ti, out)| {
            cancel.check()?;
            let mut buf = vec![Complex64::default(); n];
            let mut scratch = vec![Complex64::default(); row_fft.get_inplace_scratch_len()];
            let row = |y: usize| -> &[T] {
                if y < n {
                    &image[y * n..(y + 1) * n]
                } else {
                    &[]
                }
            };
            let (width, len) = (2 * side, out.len());
            for pi in 0..len.div_ceil(width) {
                let y0 = (ti * pairs_per_task + pi) * 2;
                let (a, b) = (row(y0), row(y0 + 1));
                // A layout's raster repeats its rows between horizontal edges: a pair whose
                // rows have the same bits as the pair before has that pair's transform,
                // copied instead of computed (D239; the same bits, since the FFT is
                // deterministic).
                if repeats == Repeats::Copied
                    && pi > 0
                    && same_bits(a, row(y0 - 2))
                    && same_bits(b, row(y0 - 1))
                {
                    let at = pi * width;
                    let end = (at + width).min(len);
                    out.copy_within(at - width..end - width, at);
                    continue;
                }
                let pair = &mut out[pi * width..((pi + 1) * width).min(len)];
                if a.len() == n && b.len() == n {
                    // Both rows exist: one plain loop (D196).
                    for ((z, &x), &y) in buf.iter_mut().zip(a).zip(b) {
                        *z = Complex64::new(x.into(), y.into());
                    }
                } else {
                    for (x, z) in buf.iter_mut().enumerate() {
                        *z = Complex64::new(
                            a.get(x).map_or(0.0, |&v| v.into()),
                            b.get(x).map_or(0.0, |&v| v.into()),
                        );
                    }
                }
                row_fft.process_with_scratch(&mut buf, &mut scratch);
                for (j, &(plus, minus)) in bins.iter().enumerate() {
                    let zp = buf[plus];
                    let zm = buf[minus].conj();
                    pair[j] = (zp + zm) * 0.5;
                    if pair.len() > side {
                        // (zp - zm) / 2i
                        let d = (zp - zm) * 0.5;
                        pair[side + j] = Complex64::new(d.im, -d.re);
                    }
                }
            }
            Ok(())
        })?;
    // Column pass on the band columns only.
    let col_fft = fft::plan(n, Direction::Forward);
    let mut cols = scratch::take::<Complex64>(side * n);
    for y in 0..n {
        for j in 0..side {
            cols[j * n + y] = rowspec[y * side + j];
        }
    }
    scratch::give(rowspec);
    cols.par_chunks_mut(n).for_each(|col| {
        let mut scratch = vec![Complex64::default(); col_fft.get_inplace_scratch_len()];
        col_fft.process_with_scratch(col, &mut scratch);
    });
    let mut data = vec![Complex64::default(); side * side];
    for jv in 0..side {
        let v = jv as isize - half as isize;
        for ju in 0..side {
            data[jv * side + ju] = cols[ju * n + fft::wrap(v, n)];
        }
    }
    scratch::give(cols);
    Ok(data)
}

/// Whether two rows hold the same values bit for bit (a `-0.0` differs from a `0.0`: its
/// transform may have other bits); one `memcmp`.
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn same_bits<T: bytemuck::Pod>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

/// Side of the coarse grid used for kernels of side `s` on an `n` grid: the smallest
/// fast size that holds the intensity band `4c+1`, or `n` itself when that is not larger.
#[must_use]
pub fn coarse_side(n: usize, s: usize) -> usize {
    let c = s / 2;
    let m = fft::fast_size(4 * c + 1);
    if m >= n { n } else { m }
}

/// `Σ_k w_k |field_k|²` sampled on the `m × m` coarse grid, normalized so that it
/// equals the true intensity at those sample points (dose 1).
///
/// Each field's spectrum has `s` non-zero rows of `m`: only those rows are transformed
/// (a zero row transforms to zeros), and the column transforms go straight into the sum
/// (D195); the same sums as transforming the whole `m × m` field.
pub fn coarse_intensity(
    band: &MaskBand,
    kernels: &KernelSet,
    m: usize,
    cancel: &CancelToken,
) -> Result<Vec<f64>, Cancelled> {
    let n = band.n;
    let s = kernels.size;
    let c = (s / 2) as isize;
    let inv_n2 = 1.0 / (n * n) as f64;
    let plan = fft::plan(m, Direction::Inverse);
    // The rows of the field's spectrum that hold the band, by band row.
    let band_rows: Vec<usize> = (0..s).map(|r| fft::wrap(r as isize - c, m)).collect();
    let distinct_rows = {
        let mut r = band_rows.clone();
        r.sort_unstable();
        r.dedup();
        r.len() == s
    };
    // The band's layout: `band.at(u, v)` is `data[(v + h)·side + u + h]`, and the kernels'
    // frequencies start `offset` rows and columns into it. `band_rows` doubles as the
    // columns `wrap(u, m)` of the field's rows (the same map), computed once (D207).
    let band_side = band.side();
    let offset = band.half - s / 2;
    // Kernels are independent: two halves in parallel, their sums added in one order
    // whatever the thread count (D238).
    let zero = || vec![0.0f64; m * m];
    let start = || (zero(), vec![Complex64::default(); s * m]);
    let (acc, _) = crate::fold::in_halves(
        kernels.count(),
        start,
        |(mut acc, mut rows), k| {
            cancel.check()?;
            let ker = kernels.kernel(k);
            let w = f64::from(kernels.scales[k]) * inv_n2 * inv_n2;
            if !distinct_rows {
                // A band wider than the grid folds onto itself: the whole transform.
                let mut field = vec![Complex64::default(); m * m];
                for r in 0..s {
                    let v = r as isize - c;
                    let row = fft::wrap(v, m) * m;
                    for col in 0..s {
                        let u = col as isize - c;
                        let kv = ker[r * s + col];
                        field[row + fft::wrap(u, m)] +=
                            band.at(u, v) * Complex64::new(f64::from(kv.re), f64::from(kv.im));
                    }
                }
                small_2d(&mut field, m, &plan);
                for (a, f) in acc.iter_mut().zip(&field) {
                    *a += w * f.norm_sqr();
                }
                return Ok((acc, rows));
            }
            rows.fill(Complex64::default());
            let mut scratch = vec![Complex64::default(); plan.get_inplace_scratch_len()];
            for r in 0..s {
                // band.at(u, v) for u = -c..=c: a run of the band's row v = r - c.
                let start = (r + offset) * band_side + offset;
                let band_row = &band.data[start..start + s];
                let row = &mut rows[r * m..(r + 1) * m];
                for ((&j, &b), kv) in band_rows.iter().zip(band_row).zip(&ker[r * s..(r + 1) * s]) {
                    row[j] += b * Complex64::new(f64::from(kv.re), f64::from(kv.im));
                }
                plan.process_with_scratch(row, &mut scratch);
            }
            let mut col = vec![Complex64::default(); m];
            for x in 0..m {
                col.fill(Complex64::default());
                for (r, &y) in band_rows.iter().enumerate() {
                    col[y] = rows[r * m + x];
                }
                plan.process_with_scratch(&mut col, &mut scratch);
                for (y, f) in col.iter().enumerate() {
                    acc[y * m + x] += w * f.norm_sqr();
                }
            }
            Ok((acc, rows))
        },
        |(mut a, rows), (b, _)| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            (a, rows)
        },
    )?;
    Ok(acc)
}

/// Sequential 2D transform of a small square buffer (rows, then columns).
pub(crate) fn small_2d(
    data: &mut [Complex64],
    m: usize,
    plan: &std::sync::Arc<dyn rustfft::Fft<f64>>,
) {
    let mut scratch = vec![Complex64::default(); plan.get_inplace_scratch_len()];
    plan.process_with_scratch(data, &mut scratch);
    let mut col = vec![Complex64::default(); m];
    for x in 0..m {
        for y in 0..m {
            col[y] = data[y * m + x];
        }
        plan.process_with_scratch(&mut col, &mut scratch);
        for y in 0..m {
            data[y * m + x] = col[y];
        }
    }
}

/// Band-limited interpolation of an `m × m` periodic sampling (whose spectrum lies in
/// `|u|, |v| <= half`, `2·half < m`) to `n × n`, multiplied by `scale`.
pub fn upsample(
    coarse: &[f64],
    m: usize,
    half: usize,
    n: usize,
    scale: f64,
    cancel: &CancelToken,
) -> Result<Grid<f32>, Cancelled> {
    upsample_rows(coarse, m, half, n, scale, 0..n, cancel)
}

/// [`upsample`] computing only the rows in `rows` (clamped to `0..n`; widened to whole
/// pairs, since two rows share one complex FFT): those rows equal [`upsample`]'s bit for
/// bit, the other rows are 0. A whole-layout tile reads only its core and half its halo
/// (D193).
pub fn upsample_rows(
    coarse: &[f64],
    m: usize,
    half: usize,
    n: usize,
    scale: f64,
    rows: std::ops::Range<usize>,
    cancel: &CancelToken,
) -> Result<Grid<f32>, Cancelled> {
    upsample_rows_into(coarse, m, half, n, scale, rows, vec![0.0; n * n], cancel)
}

/// [`upsample_rows`] writing into `out` (resized to `n²`): the rows computed are
/// [`upsample_rows`]'s bits, the others keep `out`'s old values (D195).
#[allow(clippy::too_many_arguments)]
pub fn upsample_rows_into(
    coarse: &[f64],
    m: usize,
    half: usize,
    n: usize,
    scale: f64,
    rows: std::ops::Range<usize>,
    mut out: Vec<f32>,
    cancel: &CancelToken,
) -> Result<Grid<f32>, Cancelled> {
    let pairs = row_pairs(&rows, n);
    out.resize(n * n, 0.0);
    let items: Vec<&mut [f32]> = out
        .chunks_mut(2 * n)
        .skip(pairs.start)
        .take(pairs.len())
        .collect();
    upsample_pairs(
        coarse,
        (m, half, n, scale),
        pairs.start,
        items,
        cancel,
        |rows, _, buf| {
            let (a, b) = rows.split_at_mut(n.min(rows.len()));
            for (v, z) in a.iter_mut().zip(buf) {
                *v = z.re as f32;
            }
            for (v, z) in b.iter_mut().zip(buf) {
                *v = z.im as f32;
            }
        },
    )?;
    Ok(Grid {
        width: n,
        height: n,
        data: out,
    })
}

/// The pairs of rows `(2p, 2p+1)` that meet `rows` (clamped to `0..n`): two real rows share
/// one complex FFT, always the whole frame's pairs, so each row's rounding is the same
/// whichever rows are asked for (D193).
#[must_use]
pub fn row_pairs(rows: &std::ops::Range<usize>, n: usize) -> std::ops::Range<usize> {
    let first = rows.start.min(n) / 2;
    let last = rows.end.min(n).div_ceil(2);
    first..last.max(first)
}

/// The band-limited interpolation of [`upsample_rows`], handed over pair of rows by pair of
/// rows: `f(item, y, row)` for the `i`-th item of `items`, the pair `first_pair + i`, whose
/// rows `y` and `y + 1` are `row`'s real and imaginary parts (an `n`-long buffer); `(m, half,
/// n, scale)` as for [`upsample_rows`]. [`upsample_rows_into`] stores the rows; the CPU
/// backend's tile path turns them into the corners' images while they are in cache (D228).
/// Each row's values are the same bits whatever `f` does with them.
///
/// # Errors
/// [`Cancelled`].
pub fn upsample_pairs<T: Send>(
    coarse: &[f64],
    (m, half, n, scale): (usize, usize, usize, f64),
    first_pair: usize,
    items: Vec<T>,
    cancel: &CancelToken,
    f: impl Fn(T, usize, &[Complex64]) + Sync,
) -> Result<(), Cancelled> {
    if m == n {
        // Nothing to interpolate: each pair's rows are the samples (times `scale`).
        items.into_par_iter().enumerate().for_each(|(i, item)| {
            let y = 2 * (first_pair + i);
            let at = |y: usize, x: usize| coarse.get(y * n + x).map_or(0.0, |&v| v * scale);
            let row: Vec<Complex64> = (0..n)
                .map(|x| Complex64::new(at(y, x), if y + 1 < n { at(y + 1, x) } else { 0.0 }))
                .collect();
            f(item, y, &row);
        });
        return Ok(());
    }
    let half = half.min((m - 1) / 2);
    let side = 2 * half + 1;
    // Exact coefficients of the band: a[v][u] = FFT_m(coarse)[v][u] / m².
    let mut spec = scratch::take::<Complex64>(m * m);
    for (z, &v) in spec.iter_mut().zip(coarse) {
        *z = Complex64::new(v, 0.0);
    }
    let fwd = fft::plan(m, Direction::Forward);
    small_2d(&mut spec, m, &fwd);
    let k = scale / (m * m) as f64;
    // Column pass: cols[j][y] = Σ_v a[v][u_j] e^{2πi v y/n}.
    let inv = fft::plan(n, Direction::Inverse);
    let mut cols = scratch::take::<Complex64>(side * n);
    cols.par_chunks_mut(n).enumerate().for_each(|(j, col)| {
        col.fill(Complex64::default());
        let u = j as isize - half as isize;
        for vi in 0..side {
            let v = vi as isize - half as isize;
            col[fft::wrap(v, n)] = spec[fft::wrap(v, m) * m + fft::wrap(u, m)] * k;
        }
        let mut scratch = vec![Complex64::default(); inv.get_inplace_scratch_len()];
        inv.process_with_scratch(col, &mut scratch);
    });
    scratch::give(spec);
    cancel.check()?;
    // Row pass, two real rows per complex FFT: Z = G_a + i·G_b → I_a + i·I_b.
    let bins: Vec<usize> = (0..side)
        .map(|j| fft::wrap(j as isize - half as isize, n))
        .collect();
    // A row buffer and the FFT's scratch per rayon task, not per pair: the row is cleared
    // for each pair (its bins outside the band must be 0), the scratch never needs to be.
    let buffers = || {
        (
            vec![Complex64::default(); n],
            vec![Complex64::default(); inv.get_inplace_scratch_len()],
        )
    };
    let done = items.into_par_iter().enumerate().try_for_each_init(
        buffers,
        |(buf, scratch), (i, item)| {
            let pi = first_pair + i;
            if pi.is_multiple_of(64) {
                cancel.check()?;
            }
            let y0 = 2 * pi;
            buf.fill(Complex64::default());
            for (j, &bin) in bins.iter().enumerate() {
                let ga = cols[j * n + y0];
                let gb = if y0 + 1 < n {
                    cols[j * n + y0 + 1]
                } else {
                    Complex64::default()
                };
                buf[bin] = ga + Complex64::new(-gb.im, gb.re);
            }
            inv.process_with_scratch(buf, scratch);
            f(item, y0, buf);
            Ok(())
        },
    );
    scratch::give(cols);
    done
}

/// Aerial image of `dose · mask` under `kernels` by the band-limited method.
pub fn aerial(
    mask: &Grid<f32>,
    kernels: &KernelSet,
    dose: f32,
    cancel: &CancelToken,
) -> Result<Grid<f32>, crate::ImagingError> {
    let n = crate::naive::check_shapes(mask, kernels)?;
    let band = mask_band(mask, kernels.size / 2, cancel)?;
    aerial_from_band(&band, kernels, f64::from(dose) * f64::from(dose), n, cancel)
}

/// Aerial image (times `dose²`) from a precomputed mask band.
pub fn aerial_from_band(
    band: &MaskBand,
    kernels: &KernelSet,
    dose2: f64,
    n: usize,
    cancel: &CancelToken,
) -> Result<Grid<f32>, crate::ImagingError> {
    aerial_rows_from_band(band, kernels, dose2, n, 0..n, cancel)
}

/// [`aerial_from_band`] on the rows `rows` only (the others 0; see [`upsample_rows`]).
pub fn aerial_rows_from_band(
    band: &MaskBand,
    kernels: &KernelSet,
    dose2: f64,
    n: usize,
    rows: std::ops::Range<usize>,
    cancel: &CancelToken,
) -> Result<Grid<f32>, crate::ImagingError> {
    aerial_rows_into(band, kernels, dose2, n, rows, vec![0.0; n * n], cancel)
}

/// The coarse intensity of the mask whose band is `band` under `kernels` on an `n` grid,
/// with its side and the upsampling's half-width: what [`aerial_rows_into`] and
/// [`aerial_pairs`] interpolate.
fn coarse_for(
    band: &MaskBand,
    kernels: &KernelSet,
    n: usize,
    cancel: &CancelToken,
) -> Result<(Vec<f64>, usize, usize), crate::ImagingError> {
    if band.half < kernels.size / 2 {
        return Err(crate::ImagingError::Invalid(
            "mask band narrower than the kernels".into(),
        ));
    }
    let m = coarse_side(n, kernels.size);
    let coarse = coarse_intensity(band, kernels, m, cancel)?;
    Ok((coarse, m, 2 * (kernels.size / 2)))
}

/// [`aerial_rows_from_band`] writing into `out` (the rows outside `rows` keep its old
/// values; see [`upsample_rows_into`]).
pub fn aerial_rows_into(
    band: &MaskBand,
    kernels: &KernelSet,
    dose2: f64,
    n: usize,
    rows: std::ops::Range<usize>,
    out: Vec<f32>,
    cancel: &CancelToken,
) -> Result<Grid<f32>, crate::ImagingError> {
    let (coarse, m, half) = coarse_for(band, kernels, n, cancel)?;
    Ok(upsample_rows_into(
        &coarse, m, half, n, dose2, rows, out, cancel,
    )?)
}

/// The aerial image at dose 1 of the mask whose band is `band` under `kernels` (`n × n`),
/// handed over pair of rows by pair of rows as [`upsample_pairs`] does: the same bits as
/// [`aerial_rows_into`]'s rows (D228).
///
/// # Errors
/// A band narrower than the kernels; [`Cancelled`].
pub fn aerial_pairs<T: Send>(
    band: &MaskBand,
    kernels: &KernelSet,
    n: usize,
    first_pair: usize,
    items: Vec<T>,
    cancel: &CancelToken,
    f: impl Fn(T, usize, &[Complex64]) + Sync,
) -> Result<(), crate::ImagingError> {
    let (coarse, m, half) = coarse_for(band, kernels, n, cancel)?;
    Ok(upsample_pairs(
        &coarse,
        (m, half, n, 1.0),
        first_pair,
        items,
        cancel,
        f,
    )?)
}
