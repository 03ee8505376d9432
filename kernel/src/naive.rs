//! The straightforward reference path: one full-size inverse FFT per kernel.
//!
//! `I = Σ_k w_k |ifft2(fft2(dose·M) · pad(Φ_k))|²` with the kernel zero-padded around
//! the centre of the centred spectrum, exactly as the ICCAD-2013 reference code does.
//! It does no band limiting, works in `f64`, and exists so the
//! fast path can be checked against it in tests and timed against it in the bench.

use num_complex::Complex64;
use rayon::prelude::*;

use crate::fft::{self, Direction};
use crate::imaging::{CornerOutput, ImagingError, LithoJob, LithoOutput};
use crate::{CancelToken, Grid, KernelSet};

/// Checks that a square mask of side `n` can be imaged with `kernels`.
pub(crate) fn check_shapes(mask: &Grid<f32>, kernels: &KernelSet) -> Result<usize, ImagingError> {
    let n = mask.width;
    if mask.height != n || mask.data.len() != n * n {
        return Err(ImagingError::Invalid(format!(
            "mask must be square, got {}×{}",
            mask.width, mask.height
        )));
    }
    if kernels.size.is_multiple_of(2) || kernels.size == 0 {
        return Err(ImagingError::Invalid(format!(
            "kernel side must be odd, got {}",
            kernels.size
        )));
    }
    if kernels.kernels.len() != kernels.count() * kernels.size * kernels.size {
        return Err(ImagingError::Invalid("kernel data length mismatch".into()));
    }
    if n < kernels.size {
        return Err(ImagingError::Invalid(format!(
            "mask side {n} is smaller than the kernel side {}",
            kernels.size
        )));
    }
    Ok(n)
}

/// Aerial image of `dose · mask`, one full-size FFT per kernel.
pub fn aerial(
    mask: &Grid<f32>,
    kernels: &KernelSet,
    dose: f32,
    cancel: &CancelToken,
) -> Result<Grid<f32>, ImagingError> {
    let n = check_shapes(mask, kernels)?;
    let d = f64::from(dose);
    let mut spectrum: Vec<Complex64> = mask
        .data
        .iter()
        .map(|&v| Complex64::new(d * f64::from(v), 0.0))
        .collect();
    // Forward 2D FFT left transposed (`[u][v]`), and each inverse starts from that
    // layout and ends in `[y][x]`: one transpose per 2D transform instead of two.
    let mut tmp = vec![Complex64::default(); n * n];
    fft::rows(&mut spectrum, n, Direction::Forward);
    fft::transpose(&spectrum, n, n, &mut tmp);
    fft::rows(&mut tmp, n, Direction::Forward);
    std::mem::swap(&mut spectrum, &mut tmp);

    let s = kernels.size;
    let c = (s / 2) as isize;
    let norm = 1.0 / (n * n) as f64;
    let mut intensity = vec![0.0f64; n * n];
    let mut field = vec![Complex64::default(); n * n];
    for k in 0..kernels.count() {
        cancel.check()?;
        field.fill(Complex64::default());
        let ker = kernels.kernel(k);
        for r in 0..s {
            let fy = fft::wrap(r as isize - c, n);
            for col in 0..s {
                let fx = fft::wrap(col as isize - c, n);
                let kv = ker[r * s + col];
                field[fx * n + fy] =
                    spectrum[fx * n + fy] * Complex64::new(f64::from(kv.re), f64::from(kv.im));
            }
        }
        fft::rows(&mut field, n, Direction::Inverse);
        fft::transpose(&field, n, n, &mut tmp);
        fft::rows(&mut tmp, n, Direction::Inverse);
        let w = f64::from(kernels.scales[k]);
        intensity
            .par_iter_mut()
            .zip(tmp.par_iter())
            .for_each(|(i, f)| *i += w * (f * norm).norm_sqr());
    }
    Ok(Grid {
        width: n,
        height: n,
        data: intensity.into_iter().map(|v| v as f32).collect(),
    })
}

/// Logistic resist response.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// A whole job the slow way: every corner imaged on its own (dose applied to the
/// mask), resist by the sigmoid, print where the response exceeds 0.5.
pub fn litho(job: &LithoJob<'_>, cancel: &CancelToken) -> Result<LithoOutput, ImagingError> {
    let mut prints: Vec<Vec<u8>> = Vec::with_capacity(job.corners.len());
    let mut corners = Vec::with_capacity(job.corners.len());
    for corner in job.corners {
        cancel.check()?;
        let img = aerial(job.mask, &corner.kernels, corner.dose, cancel)?;
        let resist: Vec<f32> = img
            .data
            .iter()
            .map(|&i| sigmoid(job.resist.steepness * (i - job.resist.threshold)))
            .collect();
        let printed: Vec<u8> = resist.iter().map(|&r| u8::from(r > 0.5)).collect();
        let count = printed.iter().map(|&p| u64::from(p)).sum();
        let (w, h) = (img.width, img.height);
        corners.push(CornerOutput {
            aerial: job.keep.aerial.then(|| img.clone()),
            resist: job.keep.resist.then(|| Grid {
                width: w,
                height: h,
                data: resist.clone(),
            }),
            printed: job.keep.printed.then(|| Grid {
                width: w,
                height: h,
                data: printed.clone(),
            }),
            printed_pixels: count,
        });
        prints.push(printed);
    }
    let l2 = match (job.target, prints.first()) {
        (Some(t), Some(p)) => Some(count_diff(&t.data, p)),
        _ => None,
    };
    let pvb = (prints.len() >= 3).then(|| count_diff(&prints[1], &prints[2]));
    Ok(LithoOutput { corners, l2, pvb })
}

fn count_diff(a: &[u8], b: &[u8]) -> u64 {
    a.iter()
        .zip(b)
        .filter(|(x, y)| (**x != 0) != (**y != 0))
        .count() as u64
}
