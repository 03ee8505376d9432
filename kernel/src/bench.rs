//! `litho_bench`: one ICCAD-2013 3-corner simulation, fast path against naive path.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::iccad;
use crate::imaging::{ImagingBackend, KeepImages, LithoJob, Resist};
use crate::{CancelToken, CpuBackend, naive};

/// Timings and results of one benchmark run.
#[derive(Debug, Clone, Serialize)]
pub struct LithoBenchReport {
    /// Clip simulated.
    pub clip: String,
    /// Grid side (pixels).
    pub grid: usize,
    /// Corners simulated.
    pub corners: usize,
    /// Kernels per set (focus, defocus).
    pub kernels: [usize; 2],
    /// Threads in the pool both paths ran on.
    pub threads: usize,
    /// Fastest of `repeats` fast-path runs, seconds (after one warm-up run).
    pub fast_s: f64,
    /// All fast-path run times, seconds.
    pub fast_runs_s: Vec<f64>,
    /// One naive run, seconds.
    pub naive_s: f64,
    /// `naive_s / fast_s`.
    pub speedup: f64,
    /// L2 and PVB from the fast path.
    pub fast_l2_pvb: [u64; 2],
    /// L2 and PVB from the naive path.
    pub naive_l2_pvb: [u64; 2],
    /// Loading kernels and rasterizing the clip, seconds (not in the timings above).
    pub setup_s: f64,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Kernels could not be loaded.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// The clip could not be loaded.
    #[error(transparent)]
    Clip(#[from] iccad::ClipError),
    /// Imaging failed.
    #[error(transparent)]
    Imaging(#[from] crate::ImagingError),
}

/// Runs `clip` (a `.glp` path; default `M1_test1`) of the ICCAD-2013 folder `iccad_dir`
/// on a pool of `threads` threads (default: all), fast path `repeats` times (≥ 1) and
/// the naive path once.
pub fn litho_bench(
    iccad_dir: &Path,
    clip: Option<&Path>,
    threads: Option<usize>,
    repeats: usize,
) -> Result<LithoBenchReport, BenchError> {
    let t0 = Instant::now();
    let (focus, defocus, corners) = iccad::corners(iccad_dir)?;
    let default_clip = iccad::clip_paths(iccad_dir).swap_remove(0);
    let clip = iccad::load_clip(clip.unwrap_or(&default_clip))?;
    let setup_s = t0.elapsed().as_secs_f64();
    let backend = match threads {
        Some(t) => CpuBackend::with_threads(t)?,
        None => CpuBackend::new(),
    };
    let threads = backend.threads();
    let job = LithoJob {
        mask: &clip.mask,
        target: Some(&clip.target),
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    };
    let cancel = CancelToken::new();
    let noop = |_| {};
    backend.litho(&job, &cancel, &noop)?;
    let mut fast_runs_s = Vec::new();
    let mut fast = None;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        fast = Some(backend.litho(&job, &cancel, &noop)?);
        fast_runs_s.push(t.elapsed().as_secs_f64());
    }
    let fast = fast.unwrap_or_default();
    let t = Instant::now();
    let slow = backend.install(|| naive::litho(&job, &cancel))?;
    let naive_s = t.elapsed().as_secs_f64();
    let fast_s = fast_runs_s.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(LithoBenchReport {
        clip: clip.name,
        grid: clip.mask.width,
        corners: corners.len(),
        kernels: [focus.count(), defocus.count()],
        threads,
        fast_s,
        fast_runs_s,
        naive_s,
        speedup: naive_s / fast_s,
        fast_l2_pvb: [fast.l2.unwrap_or(0), fast.pvb.unwrap_or(0)],
        naive_l2_pvb: [slow.l2.unwrap_or(0), slow.pvb.unwrap_or(0)],
        setup_s,
    })
}
