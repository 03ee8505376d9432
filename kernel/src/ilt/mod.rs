//! Pixel inverse lithography (ILT) with the analytic adjoint of the SOCS model.
//!
//! The mask is a sigmoid of a latent pixel field, `M = sigmoid(β·P)` (OpenILT style),
//! optimised with Adam on a grid `downsample` times coarser than the target (each
//! coarse pixel is a `downsample × downsample` block of the full-resolution mask), then
//! refined on blocks half as wide (`refine_iterations`), then binarised (`M > 0.5`), expanded to full resolution and measured there with the
//! ordinary band-limited imaging path and [`crate::metrics`] definitions.
//!
//! ## The model on the coarse grid (exact for block masks)
//! With `n` fine pixels, `N = n / d` coarse pixels and kernels of half-width `c`:
//! 1. the band `|u|, |v| <= c` of the fine mask spectrum is `FFT_N(M)(u, v) · D(u) D(v)`,
//!    where `D(u) = Σ_{j<d} e^{-2πi u (j − (d−1)/2)/n}` (real) is the block's transfer
//!    function, shifted so that coarse sample `x` sits at the block centre;
//! 2. every coherent field `IFFT(band · Φ_k)` is evaluated on a small `m × m` grid
//!    (`m >= 4c+1`, alias-free for the intensity), `Ic = Σ w_k |field_k|²`;
//! 3. the intensity (band-limited to `2c`) is interpolated exactly to the `N × N` grid.
//!
//! Each step is linear or a pointwise map, so the gradient is the chain of the exact
//! transposes (conjugate kernels, forward/inverse transforms swapped), the *analytic
//! adjoint*; `gradient_matches_finite_differences` checks it.
//!
//! ## Loss
//! With resist images `Z_c = sigmoid(α (dose_c² I − threshold))` for the corners
//! nominal (focus), max (focus) and min (defocus) and the coarse target `T` (block
//! average of the target):
//! `L = w_l2 · Σ (Z_nom − T)² + w_pvb · Σ [(Z_max − T)² + (Z_min − T)²] + w_band · Σ (Z_max − Z_min)²`.
//!
//! The second term pulls both outer corners onto the target, which shrinks the PV band;
//! the third penalises the band directly. With [`IltParams::edge`], the first term's
//! weight is `w_l2 · (1 + extra)` on the coarse pixels near the target's edges (D249).

mod checkpoints;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod legal;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod problem;

use crate::imaging::{
    Corner, ImagingBackend, ImagingError, KeepImages, LithoJob, LithoOutput, Resist,
};
use crate::metrics::EpeConfig;
use crate::mrc::PixelBox;
use crate::{CancelToken, CpuBackend, Grid, ModelKernels, Progress};

use checkpoints::epe_violations_px;
pub use checkpoints::raster_checkpoints;
use problem::{Adam, Problem};

pub use legal::{
    AssistSummary, EpeRevert, LegalOutcome, MaskPlan, evaluate_coverage, optimize_legal,
};

/// Settings of one ILT run. `Default` is the configuration tuned on the ten ICCAD-2013
/// clips (`reticle bench ilt`, see `docs/PERFORMANCE.md`): 100 Adam steps of 0.2 on an
/// 8 nm grid then 50 on a 4 nm grid, PV-band weights 0.5 (corners to target) and 3 (max
/// vs min).
#[derive(Debug, Clone, PartialEq)]
pub struct IltParams {
    /// Optimiser iterations (each is one forward and one adjoint simulation).
    pub iterations: u32,
    /// Adam step size on the latent field.
    pub step_size: f64,
    /// Full-resolution pixels per coarse pixel side (the optimisation grid is this many
    /// times coarser); reduced automatically when the grid does not divide or would be too
    /// small for the kernels' band.
    pub downsample: u32,
    /// Extra iterations on blocks half as wide after the main ones (0: none; only when
    /// the block side is even).
    pub refine_iterations: u32,
    /// Mask sigmoid steepness `β` at the first iteration: `M = sigmoid(β·P)`.
    pub mask_steepness: f64,
    /// Mask sigmoid steepness at the last iteration (geometric ramp from
    /// `mask_steepness`; equal values disable the ramp).
    pub mask_steepness_final: f64,
    /// Weight of the nominal-corner L2 term.
    pub weight_l2: f64,
    /// Weight of the outer-corner (PV band) term `Σ (Z_max − T)² + (Z_min − T)²`.
    pub weight_pvb: f64,
    /// Weight of the direct band term `Σ (Z_max − Z_min)²`.
    pub weight_band: f64,
    /// A heavier nominal L2 term near the target's edges (`None`: the same weight
    /// everywhere; a region's tiles, D249).
    pub edge: Option<EdgeWeight>,
    /// Resist model (ICCAD-2013 by default).
    pub resist: Resist,
    /// Doses of the corners nominal, max and min (ICCAD-2013: 1.00, 1.02, 0.98).
    pub doses: [f32; 3],
    /// Size of a full-resolution pixel (nm), for the EPE checkpoints.
    pub pixel_nm: f64,
    /// EPE checkpoint spacing and tolerance (nm).
    pub epe: EpeConfig,
}

impl Default for IltParams {
    fn default() -> Self {
        Self {
            iterations: 100,
            step_size: 0.2,
            downsample: 8,
            refine_iterations: 50,
            mask_steepness: 4.0,
            mask_steepness_final: 4.0,
            weight_l2: 1.0,
            weight_pvb: 0.5,
            weight_band: 3.0,
            edge: None,
            resist: Resist::ICCAD2013,
            doses: crate::resist::ICCAD2013_DOSES,
            pixel_nm: 1.0,
            epe: EpeConfig::ICCAD2013,
        }
    }
}

/// A heavier nominal L2 term on the coarse pixels near the target's edges, where the
/// print decides EPE (D249): the ILT's L2 + PV band objective otherwise trades a few
/// nanometres of edge placement for pixels elsewhere, and those are new EPE records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdgeWeight {
    /// Added to the weight (1) of those pixels.
    pub extra: f64,
    /// How far from an edge a coarse pixel counts as near it (nm), rounded to whole
    /// blocks, at least one.
    pub band_nm: f64,
}

/// Print quality of a mask, measured at full resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct IltMetrics {
    /// Pixels where the nominal print differs from the target.
    pub l2: u64,
    /// Pixels where the max-corner print differs from the min-corner print.
    pub pvb: u64,
    /// ICCAD-2013 EPE checkpoint violations of the nominal print (checkpoints every
    /// `epe.spacing_nm` along the target's raster edges).
    pub epe_violations: u64,
}

/// Result of [`optimize_mask`].
#[derive(Debug, Clone, PartialEq)]
pub struct IltOutcome {
    /// The binarised mask (0/1), the target's size; pixels outside the window equal the target.
    pub mask: Grid<u8>,
    /// Metrics of the target used as the mask (what was drawn).
    pub before: IltMetrics,
    /// Metrics of [`IltOutcome::mask`].
    pub after: IltMetrics,
    /// Iterations actually run (refinement included).
    pub iterations_run: u32,
    /// Optimisation-grid pixels per full-resolution pixel side of the last stage.
    pub downsample: u32,
    /// Loss at each iteration (continuous mask, on that stage's grid: the values of the
    /// refinement stage are on a grid with four times as many pixels).
    pub loss: Vec<f64>,
}

/// Whole-clip pixel ILT: optimises every pixel of the mask for `target` under `model`.
///
/// `target` is a square 0/1 grid whose side times the pixel size is the kernels' period
/// (as for [`crate::LithoJob`]). Corners: nominal = focus @ `doses[0]`, max = focus @
/// `doses[1]`, min = defocus (focus when the model has none) @ `doses[2]`. The loop checks
/// `cancel` every iteration and reports `Progress { stage: "ilt_iteration", .. }`.
pub fn optimize_mask(
    target: &Grid<u8>,
    model: &ModelKernels,
    params: &IltParams,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<IltOutcome, ImagingError> {
    optimize_window(target, None, model, params, cancel, progress)
}

/// Windowed pixel ILT: like [`optimize_mask`], but only pixels where `window` is non-zero
/// may change (`None`: the whole clip). The optimisation grid is made of
/// `downsample`-pixel blocks; a block that is not entirely inside the window is frozen,
/// so every pixel outside the window keeps the target's value exactly.
pub fn optimize_window(
    target: &Grid<u8>,
    window: Option<&Grid<u8>>,
    model: &ModelKernels,
    params: &IltParams,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<IltOutcome, ImagingError> {
    let corners = corners(model, params);
    let before = evaluate_with(&grid_f32(target), target, &corners, params, cancel)?;
    let run = optimize_latent(
        target, window, None, None, None, model, params, cancel, progress,
    )?;
    cancel.check()?;
    let mask = run.problem.binarised(&run.latent, target);
    let after = evaluate_with(&grid_f32(&mask), target, &corners, params, cancel)?;
    Ok(IltOutcome {
        mask,
        before,
        after,
        iterations_run: run.iterations_run,
        downsample: run.problem.ds as u32,
        loss: run.loss,
    })
}

/// The continuous result of the optimisation: the last stage's problem and latent.
struct LatentRun {
    problem: Problem,
    latent: Vec<f64>,
    iterations_run: u32,
    loss: Vec<f64>,
}

/// Both stages of the optimisation (coarse blocks, then blocks half as wide).
#[allow(clippy::too_many_arguments)]
fn optimize_latent(
    target: &Grid<u8>,
    window: Option<&Grid<u8>>,
    frozen: Option<&Grid<u8>>,
    start: Option<&Grid<u8>>,
    soft: Option<(PixelBox, f64)>,
    model: &ModelKernels,
    params: &IltParams,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<LatentRun, ImagingError> {
    let mut problem = Problem::with_frozen(target, window, frozen, model, params, cancel)?;
    let refine = if problem.ds % 2 == 0 {
        params.refine_iterations
    } else {
        0
    };
    let total = u64::from(params.iterations) + u64::from(refine);
    let mut loss = Vec::with_capacity(total as usize);
    let mut p = start.map_or_else(|| problem.initial_latent(), |m| problem.latent_of(m));
    let mut done = 0u32;
    run_stage(
        &problem,
        &mut p,
        soft,
        params.iterations,
        params,
        &mut done,
        total,
        &mut loss,
        cancel,
        progress,
    )?;
    if refine > 0 {
        // Refinement: the same problem on blocks half as wide, starting from the coarse
        // result (each coarse block's latent copied to its four sub-blocks).
        let fine_params = IltParams {
            downsample: (problem.ds / 2) as u32,
            ..params.clone()
        };
        let fine = Problem::with_frozen(target, window, frozen, model, &fine_params, cancel)?;
        if fine.ds * 2 == problem.ds {
            let init = fine.initial_latent();
            let q: Vec<f64> = (0..fine.nc * fine.nc)
                .map(|i| {
                    let (x, y) = (i % fine.nc, i / fine.nc);
                    let b = (y / 2) * problem.nc + x / 2;
                    if problem.active[b] { p[b] } else { init[i] }
                })
                .collect();
            p = q;
            problem = fine;
            run_stage(
                &problem, &mut p, soft, refine, params, &mut done, total, &mut loss, cancel,
                progress,
            )?;
        }
    }
    Ok(LatentRun {
        problem,
        latent: p,
        iterations_run: done,
        loss,
    })
}

/// How far each block of `problem` may move per step: 1 inside `core` (pixels), falling
/// linearly to 0 at `width` pixels outside it (D248).
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn mobility(problem: &Problem, core: PixelBox, width: f64) -> Vec<f64> {
    let ds = problem.ds as f64;
    (0..problem.nc * problem.nc)
        .map(|i| {
            let (bx, by) = ((i % problem.nc) as f64, (i / problem.nc) as f64);
            let (cx, cy) = ((bx + 0.5) * ds, (by + 0.5) * ds);
            let dx = (core.0 as f64 - cx).max(cx - core.2 as f64).max(0.0);
            let dy = (core.1 as f64 - cy).max(cy - core.3 as f64).max(0.0);
            (1.0 - dx.max(dy) / width.max(1.0)).clamp(0.0, 1.0)
        })
        .collect()
}

/// Runs `iterations` Adam steps of `problem` from `p` (a fresh optimiser state); with
/// `soft` (a box in pixels and a width), each block's step scaled by its [`mobility`].
#[allow(clippy::too_many_arguments)]
fn run_stage(
    problem: &Problem,
    p: &mut [f64],
    soft: Option<(PixelBox, f64)>,
    iterations: u32,
    params: &IltParams,
    done: &mut u32,
    total: u64,
    loss: &mut Vec<f64>,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), ImagingError> {
    let mob = soft.map(|(core, width)| mobility(problem, core, width));
    let mut adam = Adam::new(p.len());
    let mut grad = vec![0.0; p.len()];
    let iters = iterations.max(1);
    for it in 0..iterations {
        cancel.check()?;
        let beta = steepness_at(params, it, iters);
        let l = problem.loss_grad(p, beta, Some(&mut grad), cancel)?;
        loss.push(l);
        match &mob {
            None => adam.step(p, &grad, params.step_size),
            Some(mob) => {
                let old = p.to_vec();
                adam.step(p, &grad, params.step_size);
                for ((v, o), s) in p.iter_mut().zip(&old).zip(mob) {
                    *v = o + s * (*v - o);
                }
            }
        }
        *done += 1;
        progress(Progress {
            done: u64::from(*done),
            total,
            stage: "ilt_iteration",
        });
    }
    Ok(())
}

/// L2, PVB and EPE violations of a 0/1 `mask` against `target` at full resolution, with
/// the corners and resist of `params` (the measure [`optimize_mask`] reports).
pub fn evaluate_mask(
    mask: &Grid<u8>,
    target: &Grid<u8>,
    model: &ModelKernels,
    params: &IltParams,
    cancel: &CancelToken,
) -> Result<IltMetrics, ImagingError> {
    evaluate_with(
        &grid_f32(mask),
        target,
        &corners(model, params),
        params,
        cancel,
    )
}

fn steepness_at(params: &IltParams, it: u32, iters: u32) -> f64 {
    let (a, b) = (params.mask_steepness, params.mask_steepness_final);
    if iters <= 1 || a == b || a <= 0.0 || b <= 0.0 {
        return a;
    }
    a * (b / a).powf(f64::from(it) / f64::from(iters - 1))
}

pub(crate) fn grid_f32(g: &Grid<u8>) -> Grid<f32> {
    Grid {
        width: g.width,
        height: g.height,
        data: g
            .data
            .iter()
            .map(|&v| f32::from(u8::from(v != 0)))
            .collect(),
    }
}

pub(crate) fn corners(model: &ModelKernels, params: &IltParams) -> Vec<Corner> {
    let defocus = model.defocus.as_ref().unwrap_or(&model.focus);
    crate::resist::corners_at(&model.focus, defocus, params.doses)
}

/// L2, PVB and EPE violations of `mask` (imaged once, [`image_printed`]).
pub(crate) fn evaluate_with(
    mask: &Grid<f32>,
    target: &Grid<u8>,
    corners: &[Corner],
    params: &IltParams,
    cancel: &CancelToken,
) -> Result<IltMetrics, ImagingError> {
    let out = image_printed(mask, target, corners, params, cancel)?;
    metrics_of(&out, target, params)
}

/// `mask` imaged at `corners` on the CPU path with the prints kept.
pub(crate) fn image_printed(
    mask: &Grid<f32>,
    target: &Grid<u8>,
    corners: &[Corner],
    params: &IltParams,
    cancel: &CancelToken,
) -> Result<LithoOutput, ImagingError> {
    let job = LithoJob {
        mask,
        target: Some(target),
        corners,
        resist: params.resist,
        keep: KeepImages {
            printed: true,
            ..KeepImages::default()
        },
    };
    CpuBackend::new().litho(&job, cancel, &|_| {})
}

/// The nominal corner's print of an [`image_printed`] output.
pub(crate) fn nominal_print(out: &LithoOutput) -> Result<&Grid<u8>, ImagingError> {
    out.corners
        .first()
        .and_then(|c| c.printed.as_ref())
        .ok_or_else(|| ImagingError::Backend("no nominal print".into()))
}

/// The metrics of an [`image_printed`] output against `target`.
pub(crate) fn metrics_of(
    out: &LithoOutput,
    target: &Grid<u8>,
    params: &IltParams,
) -> Result<IltMetrics, ImagingError> {
    let nominal = nominal_print(out)?;
    let px = params.pixel_nm.max(f64::MIN_POSITIVE);
    let cps = raster_checkpoints(target, params.epe.spacing_nm / px);
    Ok(IltMetrics {
        l2: out.l2.unwrap_or(0),
        pvb: out.pvb.unwrap_or(0),
        epe_violations: epe_violations_px(&cps, nominal, params.epe.tolerance_nm / px),
    })
}
