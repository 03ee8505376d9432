//! `litho_bench`: one ICCAD-2013 3-corner simulation, fast path against naive path.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::iccad;
use crate::imaging::{ImagingBackend, Resist};
use crate::model::ModelSpec;
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
    let job = clip.job(&corners);
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

/// One halo of [`halo_bench`]: the error of the tile cores against a reference.
#[derive(Debug, Clone, Serialize)]
pub struct HaloPoint {
    /// Halo (nm) discarded on each side of a tile.
    pub halo_nm: f64,
    /// Core side (nm) kept per tile.
    pub core_nm: f64,
    /// Tiles imaged.
    pub tiles: usize,
    /// Largest |tiled − reference| over the canvas, as a fraction of the open frame.
    pub max_error: f64,
    /// Root mean square of tiled − reference over the canvas (same unit).
    pub rms_error: f64,
    /// Pixels printed (`Resist::ICCAD2013`, dose 1) in one image and not in the other.
    pub flips: usize,
    /// Wall time of the tiled image, seconds.
    pub seconds: f64,
}

/// What [`halo_bench`] measured: the whole-layout tiling design (window = the model's
/// period, cores on a global grid, halo filled with the layout) with the default model.
#[derive(Debug, Clone, Serialize)]
pub struct HaloBenchReport {
    /// The model (the worker's default, `model::default_model`).
    pub model: String,
    /// Tile window side = the model's period (nm).
    pub period_nm: f64,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// Focus kernels kept.
    pub kernels: usize,
    /// Open-frame intensity (the unit of the errors).
    pub open_frame: f64,
    /// Why the dense canvas has no untiled reference: what the SOCS factorization says
    /// for a period of three windows.
    pub untiled_reference: String,
    /// Side of the dense canvas (nm).
    pub dense_canvas_nm: f64,
    /// Pixels printed in the dense reference.
    pub dense_printed: usize,
    /// Printed pixels of the dense reference with an unprinted 4-neighbour (its edges):
    /// `flips / dense_edge_pixels` is the fraction of edge pixels that move.
    pub dense_edge_pixels: usize,
    /// Median |∇I| over those edge pixels (open frame per nm): an intensity error `e`
    /// moves a typical edge by `e / slope` nm.
    pub dense_edge_slope: f64,
    /// Halo of the dense reference tiling (nm): the largest of the sweep's grid that
    /// leaves a core.
    pub dense_reference_halo_nm: f64,
    /// Dense canvas, tiled with each halo against the reference tiling.
    pub dense: Vec<HaloPoint>,
    /// The same at the rule's halo.
    pub dense_at_rule: HaloPoint,
    /// Side of the pattern centred in one window, zeros elsewhere (nm).
    pub single_pattern_nm: f64,
    /// Pixels printed in the untiled image of that window.
    pub single_printed: usize,
    /// The single window, tiled with each halo against its untiled (periodic) image.
    pub single: Vec<HaloPoint>,
    /// The same at the rule's halo.
    pub single_at_rule: HaloPoint,
    /// The rule's halo for this model and pixel ([`crate::tiling::tile_halo_nm`]).
    pub rule_halo_nm: f64,
    /// The rule's core ([`crate::tiling::tile_core_nm`]).
    pub rule_core_nm: f64,
}

/// Halos of the sweep (nm), and the reference halo of the dense canvas.
pub const HALO_SWEEP_NM: [f64; 6] = [128.0, 256.0, 384.0, 512.0, 640.0, 768.0];
/// The dense canvas's reference halo (nm): a 256 nm core in a 2048 nm window.
pub const HALO_REFERENCE_NM: f64 = 896.0;

/// Tiled imaging as whole-layout evaluation will do it, measured with the default model
/// (193 nm, NA 1.35, annular 0.6–0.9, P = 2048 nm, 24 kernels) at `pixel_nm` (it must
/// divide 2048 and be at most the model's largest pixel; 4 nm runs in seconds):
///
/// - a dense pseudo-random Manhattan canvas of `canvas_nm` (64–96 nm wires, 96–640 nm
///   long, about a quarter of the area drawn), tiled with each halo of
///   [`HALO_SWEEP_NM`] against the same tiling with [`HALO_REFERENCE_NM`] (no untiled
///   image of several windows can be built at NA 1.35: the factorization's frequency
///   samples outgrow its limit, see `untiled_reference`);
/// - a pattern of the same kind filling the central 1024 nm of one window (zeros
///   elsewhere), tiled with each halo against the untiled, periodic image of the window.
///
/// Errors are the largest |difference| over the canvas as a fraction of the open frame,
/// and the number of pixels whose print (`Resist::ICCAD2013`) differs.
pub fn halo_bench(canvas_nm: f64, pixel_nm: f64) -> Result<HaloBenchReport, BenchError> {
    use crate::model::default_model;
    use crate::socs::{self, SocsParams};
    use crate::tiling::{TilePlan, aerial_tiled, tile_core_nm, tile_halo_nm};

    let invalid = |m: String| BenchError::Imaging(crate::ImagingError::Invalid(m));
    let period = 2048.0;
    let model = default_model(period);
    let window = (period / pixel_nm).round() as usize;
    let max_pixel = model.max_pixel_nm()?;
    if !(pixel_nm > 0.0 && pixel_nm <= max_pixel)
        || (window as f64 * pixel_nm - period).abs() > 1e-9
    {
        return Err(invalid(format!(
            "pixel {pixel_nm} nm must divide {period} nm and be at most {max_pixel:.2} nm"
        )));
    }
    let px = |nm: f64| (nm / pixel_nm).round() as usize;
    let rule_halo_nm = tile_halo_nm(&model, pixel_nm)?;
    let rule_core_nm = tile_core_nm(&model, pixel_nm)?;
    let kernels = model.kernels()?.focus;
    let open = kernels.open_frame();
    let resist = Resist::ICCAD2013;
    let backend = CpuBackend::new();
    let cancel = CancelToken::new();
    let compare = |a: &crate::Grid<f32>, b: &crate::Grid<f32>| {
        let err = a
            .data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| f64::from((x - y).abs()))
            .fold(0.0, f64::max)
            / open;
        let rms = (a
            .data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| f64::from(x - y).powi(2))
            .sum::<f64>()
            / a.data.len().max(1) as f64)
            .sqrt()
            / open;
        let flips = a
            .data
            .iter()
            .zip(&b.data)
            .filter(|(x, y)| resist.prints(**x) != resist.prints(**y))
            .count();
        (err, rms, flips)
    };
    let printed = |g: &crate::Grid<f32>| g.data.iter().filter(|&&i| resist.prints(i)).count();
    let tiled = |mask: &crate::Grid<f32>, halo_nm: f64| {
        let plan = TilePlan {
            window,
            halo: px(halo_nm),
        };
        let t = Instant::now();
        let image = aerial_tiled(&backend, mask, &kernels, 1.0, plan, &cancel, &|_| {})?;
        Ok::<_, BenchError>((
            image,
            plan.tiles(mask.width, mask.height),
            t.elapsed().as_secs_f64(),
        ))
    };
    let point = |halo_nm: f64, tiles, err: (f64, f64, usize), seconds| HaloPoint {
        halo_nm,
        core_nm: period - 2.0 * halo_nm,
        tiles,
        max_error: err.0,
        rms_error: err.1,
        flips: err.2,
        seconds,
    };

    // No untiled reference for the dense canvas: ask the factorization for 3 windows.
    let ModelSpec::Hopkins(h) = &model else {
        return Err(invalid("the default model is a Hopkins model".into()));
    };
    let untiled_reference = match socs::build(&SocsParams {
        optics: h.optics.clone(),
        defocus_nm: 0.0,
        period_nm: 3.0 * period,
        kernel_size: None,
        max_kernels: h.max_kernels,
        energy: h.energy,
    }) {
        Ok(_) => format!("a period of {} nm factorizes", 3.0 * period),
        Err(e) => format!("period {} nm: {e}", 3.0 * period),
    };

    // Dense canvas, against the widest-halo tiling.
    let n = px(canvas_nm);
    let dense = wire_canvas(n, pixel_nm, 11);
    let (reference, _, _) = tiled(&dense, HALO_REFERENCE_NM)?;
    let mut dense_points = Vec::new();
    for halo_nm in HALO_SWEEP_NM.iter().copied().chain([rule_halo_nm]) {
        let (image, tiles, seconds) = tiled(&dense, halo_nm)?;
        dense_points.push(point(halo_nm, tiles, compare(&image, &reference), seconds));
    }
    let edges = edge_pixels(&reference, resist);
    let dense_at_rule = dense_points
        .pop()
        .ok_or_else(|| invalid("no rule point".into()))?;

    // One window holding a pattern in its central 1024 nm, against its untiled image.
    let single_pattern_nm = 1024.0;
    let (side, off) = (
        px(single_pattern_nm),
        px((period - single_pattern_nm) / 2.0),
    );
    let pattern = wire_canvas(side, pixel_nm, 12);
    let mut single = crate::Grid::filled(window, window, 0.0f32);
    for y in 0..side {
        single.data[(y + off) * window + off..(y + off) * window + off + side]
            .copy_from_slice(&pattern.data[y * side..(y + 1) * side]);
    }
    let untiled = backend.aerial(&single, &kernels, 1.0, &cancel)?;
    let mut single_points = Vec::new();
    for halo_nm in HALO_SWEEP_NM
        .iter()
        .copied()
        .chain([HALO_REFERENCE_NM, rule_halo_nm])
    {
        let (image, tiles, seconds) = tiled(&single, halo_nm)?;
        single_points.push(point(halo_nm, tiles, compare(&image, &untiled), seconds));
    }
    let single_at_rule = single_points
        .pop()
        .ok_or_else(|| invalid("no rule point".into()))?;

    Ok(HaloBenchReport {
        model: "default: 193 nm, NA 1.35, n 1.44, annular σ 0.6–0.9, best focus".into(),
        period_nm: period,
        pixel_nm,
        kernels: kernels.count(),
        open_frame: open,
        untiled_reference,
        dense_canvas_nm: n as f64 * pixel_nm,
        dense_printed: printed(&reference),
        dense_edge_pixels: edges.len(),
        dense_edge_slope: median_slope(&reference, &edges, pixel_nm) / open,
        dense_reference_halo_nm: HALO_REFERENCE_NM,
        dense: dense_points,
        dense_at_rule,
        single_pattern_nm,
        single_printed: printed(&untiled),
        single: single_points,
        single_at_rule,
        rule_halo_nm,
        rule_core_nm,
    })
}

/// Printed pixels with an unprinted 4-neighbour, not on the canvas border.
fn edge_pixels(image: &crate::Grid<f32>, resist: Resist) -> Vec<usize> {
    let (w, h) = (image.width, image.height);
    let on = |x: usize, y: usize| resist.prints(*image.at(x, y));
    (0..w * h)
        .filter(|&i| {
            let (x, y) = (i % w, i / w);
            x > 0
                && y > 0
                && x + 1 < w
                && y + 1 < h
                && on(x, y)
                && (!on(x - 1, y) || !on(x + 1, y) || !on(x, y - 1) || !on(x, y + 1))
        })
        .collect()
}

/// Median of |∇I| (per nm, central differences) over the pixels `at` (not on the border).
fn median_slope(image: &crate::Grid<f32>, at: &[usize], pixel_nm: f64) -> f64 {
    let w = image.width;
    let mut slopes: Vec<f64> = at
        .iter()
        .map(|&i| {
            let d = |a: usize, b: usize| f64::from(image.data[a] - image.data[b]);
            let (gx, gy) = (d(i + 1, i - 1), d(i + w, i - w));
            gx.hypot(gy) / (2.0 * pixel_nm)
        })
        .collect();
    slopes.sort_by(f64::total_cmp);
    slopes.get(slopes.len() / 2).copied().unwrap_or(0.0)
}

/// A dense metal-like canvas of `n × n` pixels of `pixel_nm`: wires 64–96 nm wide and
/// 96–640 nm long, horizontal or vertical with equal odds, one per 0.1 µm² at
/// pseudo-random places (about a quarter of the area drawn), reproducible from `seed`.
/// The canvas of [`halo_bench`].
#[must_use]
pub fn wire_canvas(n: usize, pixel_nm: f64, seed: u64) -> crate::Grid<f32> {
    let px = |nm: f64| ((nm / pixel_nm).round() as usize).max(1);
    let count = ((n as f64 * pixel_nm).powi(2) / 1e5).round() as usize;
    manhattan_canvas_with(n, seed, count, [px(64.0), px(96.0)], [px(96.0), px(640.0)])
}

/// A dense Manhattan canvas: `n/3` wires (2 px wide, 2–16 px long) at pseudo-random
/// places, reproducible from `seed` (SplitMix64).
fn manhattan_canvas(n: usize, seed: u64) -> crate::Grid<f32> {
    manhattan_canvas_with(n, seed, n / 3, [2, 2], [2, 16])
}

/// `count` wires at pseudo-random places on an `n × n` canvas, each `width` pixels wide
/// and `length` pixels long (inclusive ranges), horizontal or vertical with equal odds,
/// reproducible from `seed` (SplitMix64).
fn manhattan_canvas_with(
    n: usize,
    seed: u64,
    count: usize,
    width: [usize; 2],
    length: [usize; 2],
) -> crate::Grid<f32> {
    let mut state = seed;
    let mut unit = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut grid = crate::Grid::filled(n, n, 0.0f32);
    let pick = |u: f64, [lo, hi]: [usize; 2]| lo + (u * (hi + 1 - lo) as f64) as usize;
    for _ in 0..count {
        let (x, y) = ((unit() * n as f64) as usize, (unit() * n as f64) as usize);
        let long = pick(unit(), length);
        let wide = if width[0] == width[1] {
            width[0]
        } else {
            pick(unit(), width)
        };
        let (w, h) = if unit() < 0.5 {
            (long, wide)
        } else {
            (wide, long)
        };
        for yy in y..(y + h).min(n) {
            for xx in x..(x + w).min(n) {
                *grid.at_mut(xx, yy) = 1.0;
            }
        }
    }
    grid
}
