//! FFT plumbing shared by the imaging paths: cached plans, parallel 2D transforms.
//!
//! All transforms are unnormalized (rustfft convention); callers apply `1/n²` where
//! the physics needs numpy's `ifft2` normalization.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use num_complex::Complex64;
use rayon::prelude::*;
use rustfft::{Fft, FftDirection, FftPlanner};

/// Direction of a transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `X[k] = Σ x[j] e^{-2πi jk/n}`.
    Forward,
    /// `x[j] = Σ X[k] e^{+2πi jk/n}` (unnormalized).
    Inverse,
}

type PlanCache = Mutex<HashMap<(usize, Direction), Arc<dyn Fft<f64>>>>;

/// A cached 1D plan of length `n`; plans are immutable and shared by all threads.
#[must_use]
pub fn plan(n: usize, direction: Direction) -> Arc<dyn Fft<f64>> {
    static CACHE: OnceLock<PlanCache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    // A poisoned lock only means another thread panicked while planning; the map is
    // still a valid cache, so keep using it.
    let mut map = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    map.entry((n, direction))
        .or_insert_with(|| {
            let dir = match direction {
                Direction::Forward => FftDirection::Forward,
                Direction::Inverse => FftDirection::Inverse,
            };
            FftPlanner::new().plan_fft(n, dir)
        })
        .clone()
}

/// The smallest `m >= min` whose only prime factors are 2, 3 and 5 (fast for rustfft).
#[must_use]
pub fn fast_size(min: usize) -> usize {
    let mut m = min.max(1);
    loop {
        let mut r = m;
        for p in [2, 3, 5] {
            while r.is_multiple_of(p) {
                r /= p;
            }
        }
        if r == 1 {
            return m;
        }
        m += 1;
    }
}

/// Transforms every row of a row-major `width`-wide buffer in place, in parallel.
pub fn rows(data: &mut [Complex64], width: usize, direction: Direction) {
    let fft = plan(width, direction);
    let rows_per_task = (16384 / width.max(1)).max(1);
    data.par_chunks_mut(width * rows_per_task)
        .for_each(|chunk| {
            let mut scratch = vec![Complex64::default(); fft.get_inplace_scratch_len()];
            fft.process_with_scratch(chunk, &mut scratch);
        });
}

/// Out-of-place transpose of a `width × height` row-major buffer into `height × width`.
pub fn transpose(src: &[Complex64], width: usize, height: usize, dst: &mut [Complex64]) {
    const BLOCK: usize = 32;
    // Each task owns BLOCK destination rows (= BLOCK source columns).
    dst.par_chunks_mut(height * BLOCK)
        .enumerate()
        .for_each(|(bi, out)| {
            let x0 = bi * BLOCK;
            let xs = out.len() / height;
            for y0 in (0..height).step_by(BLOCK) {
                let y1 = (y0 + BLOCK).min(height);
                for dx in 0..xs {
                    let x = x0 + dx;
                    for y in y0..y1 {
                        out[dx * height + y] = src[y * width + x];
                    }
                }
            }
        });
}

/// Full 2D transform of a square `n × n` row-major buffer, in place (rows, transpose,
/// rows, transpose).
pub fn full_2d(data: &mut [Complex64], n: usize, direction: Direction, tmp: &mut Vec<Complex64>) {
    tmp.resize(n * n, Complex64::default());
    rows(data, n, direction);
    transpose(data, n, n, tmp);
    rows(tmp, n, direction);
    transpose(tmp, n, n, data);
}

/// `(k mod n)` for a signed frequency index.
#[must_use]
pub fn wrap(k: isize, n: usize) -> usize {
    k.rem_euclid(n as isize) as usize
}
