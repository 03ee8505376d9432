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

/// One halo of [`tiling_bench`]: the tile plan and its largest deviation.
#[derive(Debug, Clone, Serialize)]
pub struct TilingPoint {
    /// Tile window side (pixels).
    pub window: usize,
    /// Halo (pixels) discarded on each side of a tile.
    pub halo: usize,
    /// Halo in nm.
    pub halo_nm: f64,
    /// Largest |tiled − untiled| over the canvas, as a fraction of the open-frame intensity.
    pub max_error: f64,
    /// Wall time of the tiled image, seconds.
    pub seconds: f64,
}

/// What [`tiling_bench`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct TilingBenchReport {
    /// Canvas side (pixels) and pixel size (nm).
    pub canvas: usize,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// Zero border around the canvas in the two untiled references (pixels).
    pub reference_pads: [usize; 2],
    /// Largest difference between the two references (fraction of the open frame): how
    /// well "the untiled image" of a finite canvas is defined at all with this pupil.
    pub reference_spread: f64,
    /// Tiled against the wider reference, one point per halo.
    pub points: Vec<TilingPoint>,
}

/// Tiled against untiled imaging with a hard-edged 193 nm annular pupil (NA 0.75,
/// σ 0.5–0.8, every SOCS kernel kept) on a dense pseudo-random Manhattan canvas of
/// `canvas` pixels of 16 nm: the error in the tile cores for growing halos, and the
/// spread between two untiled references that differ only in their zero border.
pub fn tiling_bench(canvas: usize) -> Result<TilingBenchReport, BenchError> {
    use crate::Grid;
    use crate::optics::{Optics, Source};
    use crate::socs::{self, SocsParams};
    use crate::tiling::{TilePlan, aerial_tiled};

    const PIXEL_NM: f64 = 16.0;
    let kernels_for = |window: usize| -> Result<std::sync::Arc<crate::KernelSet>, BenchError> {
        let params = SocsParams {
            optics: Optics {
                wavelength_nm: 193.0,
                na: 0.75,
                immersion_index: 1.0,
                source: Source::Annular {
                    sigma_in: 0.5,
                    sigma_out: 0.8,
                },
                source_step: 0.08,
            },
            defocus_nm: 0.0,
            period_nm: window as f64 * PIXEL_NM,
            kernel_size: None,
            max_kernels: 4096,
            energy: 1.0,
        };
        Ok(socs::kernels(&params)
            .map_err(|e| crate::ImagingError::Invalid(e.to_string()))?
            .set)
    };
    let mask = manhattan_canvas(canvas, 5);
    let backend = CpuBackend::new();
    let cancel = CancelToken::new();
    // The widest border the SOCS factorization accepts at this NA (period ≈ 11 µm).
    let pads = [200usize, 280];
    let mut references = Vec::new();
    let mut open = 1.0;
    for pad in pads {
        let big = canvas + 2 * pad;
        let mut padded = Grid::filled(big, big, 0.0f32);
        for y in 0..canvas {
            padded.data[(y + pad) * big + pad..(y + pad) * big + pad + canvas]
                .copy_from_slice(&mask.data[y * canvas..(y + 1) * canvas]);
        }
        let kernels = kernels_for(big)?;
        open = kernels.open_frame();
        let image = backend.aerial(&padded, &kernels, 1.0, &cancel)?;
        references.push(
            (0..canvas * canvas)
                .map(|i| *image.at(i % canvas + pad, i / canvas + pad))
                .collect::<Vec<f32>>(),
        );
    }
    let spread = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from((x - y).abs()))
            .fold(0.0, f64::max)
            / open
    };
    let mut points = Vec::new();
    for (window, halo) in [(128, 32), (256, 64), (384, 128), (512, 192)] {
        let kernels = kernels_for(window)?;
        let t = Instant::now();
        let tiled = aerial_tiled(
            &backend,
            &mask,
            &kernels,
            1.0,
            TilePlan { window, halo },
            &cancel,
            &|_| {},
        )?;
        points.push(TilingPoint {
            window,
            halo,
            halo_nm: halo as f64 * PIXEL_NM,
            max_error: spread(&tiled.data, &references[1]),
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    Ok(TilingBenchReport {
        canvas,
        pixel_nm: PIXEL_NM,
        reference_pads: pads,
        reference_spread: spread(&references[0], &references[1]),
        points,
    })
}

/// A dense Manhattan canvas: `n/3` wires (2 px wide, 2–16 px long) at pseudo-random
/// places, reproducible from `seed` (SplitMix64).
fn manhattan_canvas(n: usize, seed: u64) -> crate::Grid<f32> {
    let mut state = seed;
    let mut unit = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut grid = crate::Grid::filled(n, n, 0.0f32);
    for _ in 0..n / 3 {
        let (x, y) = ((unit() * n as f64) as usize, (unit() * n as f64) as usize);
        let long = 2 + (unit() * 15.0) as usize;
        let (w, h) = if unit() < 0.5 { (long, 2) } else { (2, long) };
        for yy in y..(y + h).min(n) {
            for xx in x..(x + w).min(n) {
                *grid.at_mut(xx, yy) = 1.0;
            }
        }
    }
    grid
}
