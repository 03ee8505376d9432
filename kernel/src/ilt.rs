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
//! the third penalises the band directly.

use num_complex::Complex64;
use rayon::prelude::*;

use crate::bandlimited::{real_band, small_2d};
use crate::fft::{self, Direction};
use crate::imaging::{Corner, ImagingBackend, ImagingError, KeepImages, LithoJob, Resist};
use crate::metrics::{Checkpoint, EpeConfig};
use crate::{CancelToken, Cancelled, CpuBackend, Grid, KernelSet, ModelKernels, Progress};

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
            resist: Resist::ICCAD2013,
            doses: crate::resist::ICCAD2013_DOSES,
            pixel_nm: 1.0,
            epe: EpeConfig::ICCAD2013,
        }
    }
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
    let mut problem = Problem::new(target, window, model, params, cancel)?;
    let corners = corners(model, params);
    let before = evaluate_with(&grid_f32(target), target, &corners, params, cancel)?;
    let refine = if problem.ds % 2 == 0 {
        params.refine_iterations
    } else {
        0
    };
    let total = u64::from(params.iterations) + u64::from(refine);
    let mut loss = Vec::with_capacity(total as usize);
    let mut p = problem.initial_latent();
    let mut done = 0u32;
    run_stage(
        &problem,
        &mut p,
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
        let fine = Problem::new(target, window, model, &fine_params, cancel)?;
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
                &problem, &mut p, refine, params, &mut done, total, &mut loss, cancel, progress,
            )?;
        }
    }
    cancel.check()?;
    let mask = problem.binarised(&p, target);
    let after = evaluate_with(&grid_f32(&mask), target, &corners, params, cancel)?;
    Ok(IltOutcome {
        mask,
        before,
        after,
        iterations_run: done,
        downsample: problem.ds as u32,
        loss,
    })
}

/// Runs `iterations` Adam steps of `problem` from `p` (a fresh optimiser state).
#[allow(clippy::too_many_arguments)]
fn run_stage(
    problem: &Problem,
    p: &mut [f64],
    iterations: u32,
    params: &IltParams,
    done: &mut u32,
    total: u64,
    loss: &mut Vec<f64>,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), ImagingError> {
    let mut adam = Adam::new(p.len());
    let mut grad = vec![0.0; p.len()];
    let iters = iterations.max(1);
    for it in 0..iterations {
        cancel.check()?;
        let beta = steepness_at(params, it, iters);
        let l = problem.loss_grad(p, beta, Some(&mut grad), cancel)?;
        loss.push(l);
        adam.step(p, &grad, params.step_size);
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

fn grid_f32(g: &Grid<u8>) -> Grid<f32> {
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

fn corners(model: &ModelKernels, params: &IltParams) -> Vec<Corner> {
    let defocus = model.defocus.as_ref().unwrap_or(&model.focus);
    crate::resist::corners_at(&model.focus, defocus, params.doses)
}

fn evaluate_with(
    mask: &Grid<f32>,
    target: &Grid<u8>,
    corners: &[Corner],
    params: &IltParams,
    cancel: &CancelToken,
) -> Result<IltMetrics, ImagingError> {
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
    let out = CpuBackend::new().litho(&job, cancel, &|_| {})?;
    let nominal = out
        .corners
        .first()
        .and_then(|c| c.printed.as_ref())
        .ok_or_else(|| ImagingError::Backend("no nominal print".into()))?;
    let px = params.pixel_nm.max(f64::MIN_POSITIVE);
    let cps = raster_checkpoints(target, params.epe.spacing_nm / px);
    Ok(IltMetrics {
        l2: out.l2.unwrap_or(0),
        pvb: out.pvb.unwrap_or(0),
        epe_violations: epe_violations_px(&cps, nominal, params.epe.tolerance_nm / px),
    })
}

/// EPE checkpoints along the edges of a 0/1 raster, in pixel units (pixel `(x, y)` covers
/// `[x, x+1) × [y, y+1)`): every maximal straight run of boundary between a set pixel and
/// an unset one (outside the grid counts as unset) is an edge, with checkpoints at the
/// centres of `max(1, ⌊len / spacing⌋)` equal sub-segments, as [`crate::metrics::checkpoints`]
/// places them on polygon edges. Normals point out of the pattern.
#[must_use]
pub fn raster_checkpoints(target: &Grid<u8>, spacing_px: f64) -> Vec<Checkpoint> {
    let (w, h) = (target.width, target.height);
    let set = |x: isize, y: isize| -> bool {
        x >= 0
            && y >= 0
            && (x as usize) < w
            && (y as usize) < h
            && *target.at(x as usize, y as usize) != 0
    };
    let mut out = Vec::new();
    let mut emit = |start: usize, end: usize, fixed: f64, horizontal: bool, sign: f64| {
        let len = (end - start) as f64;
        let count = ((len / spacing_px).floor() as usize).max(1);
        for j in 0..count {
            let t = start as f64 + (j as f64 + 0.5) / count as f64 * len;
            out.push(if horizontal {
                Checkpoint {
                    x: t,
                    y: fixed,
                    nx: 0.0,
                    ny: sign,
                }
            } else {
                Checkpoint {
                    x: fixed,
                    y: t,
                    nx: sign,
                    ny: 0.0,
                }
            });
        }
    };
    // Horizontal boundary lines y = Y between rows Y−1 and Y; state −1 (inside above,
    // normal −y), +1 (inside below, normal +y), 0 (no edge).
    for yy in 0..=h as isize {
        let mut run: Option<(usize, i8)> = None;
        for x in 0..=w {
            let state = if x < w {
                let (above, below) = (set(x as isize, yy), set(x as isize, yy - 1));
                match (above, below) {
                    (true, false) => -1i8,
                    (false, true) => 1,
                    _ => 0,
                }
            } else {
                0
            };
            if run.is_some_and(|(_, s)| s != state)
                && let Some((start, s)) = run.take()
            {
                emit(start, x, yy as f64, true, f64::from(s));
            }
            if state != 0 && run.is_none() {
                run = Some((x, state));
            }
        }
    }
    for xx in 0..=w as isize {
        let mut run: Option<(usize, i8)> = None;
        for y in 0..=h {
            let state = if y < h {
                let (right, left) = (set(xx, y as isize), set(xx - 1, y as isize));
                match (right, left) {
                    (true, false) => -1i8,
                    (false, true) => 1,
                    _ => 0,
                }
            } else {
                0
            };
            if run.is_some_and(|(_, s)| s != state)
                && let Some((start, s)) = run.take()
            {
                emit(start, y, xx as f64, false, f64::from(s));
            }
            if state != 0 && run.is_none() {
                run = Some((y, state));
            }
        }
    }
    out
}

/// ICCAD EPE violations at pixel-unit checkpoints: violated unless the print is set at
/// `tolerance` inward and unset at `tolerance` outward (the rule of
/// [`crate::metrics::epe_violations`]).
fn epe_violations_px(cps: &[Checkpoint], printed: &Grid<u8>, tolerance: f64) -> u64 {
    let at = |x: f64, y: f64| -> bool {
        let (px, py) = (x.floor(), y.floor());
        if px < 0.0 || py < 0.0 || px >= printed.width as f64 || py >= printed.height as f64 {
            return false;
        }
        *printed.at(px as usize, py as usize) != 0
    };
    cps.iter()
        .filter(|c| {
            let inside = at(c.x - tolerance * c.nx, c.y - tolerance * c.ny);
            let outside = at(c.x + tolerance * c.nx, c.y + tolerance * c.ny);
            !inside || outside
        })
        .count() as u64
}

/// Adam on a flat parameter vector.
struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    fn new(len: usize) -> Self {
        Self {
            m: vec![0.0; len],
            v: vec![0.0; len],
            t: 0,
        }
    }

    fn step(&mut self, p: &mut [f64], g: &[f64], lr: f64) {
        const B1: f64 = 0.9;
        const B2: f64 = 0.999;
        self.t += 1;
        let c1 = 1.0 - B1.powi(self.t);
        let c2 = 1.0 - B2.powi(self.t);
        p.par_iter_mut()
            .zip(self.m.par_iter_mut())
            .zip(self.v.par_iter_mut())
            .zip(g.par_iter())
            .for_each(|(((p, m), v), &g)| {
                *m = B1 * *m + (1.0 - B1) * g;
                *v = B2 * *v + (1.0 - B2) * g * g;
                *p -= lr * (*m / c1) / ((*v / c2).sqrt() + 1e-12);
            });
    }
}

/// One kernel set prepared for the coarse model.
struct SetData {
    /// Side of each kernel.
    size: usize,
    /// Kernels as f64, `size²` each.
    kernels: Vec<Vec<Complex64>>,
    /// `w_k / n⁴`: the weight with both unnormalized-transform factors.
    weights: Vec<f64>,
}

impl SetData {
    fn new(k: &KernelSet, n: usize) -> Self {
        let n4 = (n as f64).powi(4);
        Self {
            size: k.size,
            kernels: (0..k.count())
                .map(|i| {
                    k.kernel(i)
                        .iter()
                        .map(|c| Complex64::new(f64::from(c.re), f64::from(c.im)))
                        .collect()
                })
                .collect(),
            weights: k.scales.iter().map(|&w| f64::from(w) / n4).collect(),
        }
    }
}

/// The coarse-grid optimisation problem.
struct Problem {
    /// Fine side.
    n: usize,
    /// Downsampling factor.
    ds: usize,
    /// Coarse side.
    nc: usize,
    /// Side of the field grid.
    m: usize,
    /// Mask band half-width (largest kernel half-width).
    c: usize,
    /// Focus and defocus sets.
    sets: [SetData; 2],
    /// `D(u)` for `u ∈ [-c, c]`.
    dfac: Vec<f64>,
    /// Band (half `c`, shifted like the coarse samples) of the frozen part of the mask.
    fixed_band: Option<Vec<Complex64>>,
    /// Coarse pixels that may change.
    active: Vec<bool>,
    /// Block averages of the target.
    target: Vec<f64>,
    /// Squared corner doses.
    dose2: [f64; 3],
    alpha: f64,
    threshold: f64,
    w_l2: f64,
    w_pvb: f64,
    w_band: f64,
}

impl Problem {
    fn new(
        target: &Grid<u8>,
        window: Option<&Grid<u8>>,
        model: &ModelKernels,
        params: &IltParams,
        cancel: &CancelToken,
    ) -> Result<Self, ImagingError> {
        let n = target.width;
        let defocus = model.defocus.as_ref().unwrap_or(&model.focus);
        for k in [&model.focus, defocus] {
            check_target(target, k)?;
        }
        if let Some(w) = window
            && (w.width != n || w.height != n || w.data.len() != n * n)
        {
            return Err(ImagingError::Invalid(
                "window and target sizes differ".into(),
            ));
        }
        let c = model.focus.size.max(defocus.size) / 2;
        let mut ds = (params.downsample.max(1) as usize).min(n);
        while ds > 1 && (!n.is_multiple_of(ds) || n / ds < 4 * c + 2) {
            ds -= 1;
        }
        let nc = n / ds;
        if nc < 4 * c + 2 {
            return Err(ImagingError::Invalid(format!(
                "grid side {n} is too small for kernels of side {}",
                2 * c + 1
            )));
        }
        let m = fft::fast_size(4 * c + 1);
        let shift = (ds as f64 - 1.0) / 2.0;
        let dfac: Vec<f64> = (-(c as isize)..=c as isize)
            .map(|u| {
                (0..ds)
                    .map(|j| {
                        let ph =
                            -2.0 * std::f64::consts::PI * u as f64 * (j as f64 - shift) / n as f64;
                        ph.cos()
                    })
                    .sum()
            })
            .collect();
        let mut active = vec![true; nc * nc];
        let mut fixed_band = None;
        if let Some(w) = window {
            for (i, a) in active.iter_mut().enumerate() {
                let (bx, by) = (i % nc, i / nc);
                *a = (0..ds).all(|dy| (0..ds).all(|dx| *w.at(bx * ds + dx, by * ds + dy) != 0));
            }
            // Frozen fine pixels: everything not in an active block, at the target's value.
            let mut frozen = grid_f32(target);
            for (i, v) in frozen.data.iter_mut().enumerate() {
                let (x, y) = (i % n, i / n);
                if active[(y / ds) * nc + x / ds] {
                    *v = 0.0;
                }
            }
            let band = crate::bandlimited::mask_band(&frozen, c, cancel)?;
            let side = 2 * c + 1;
            let mut data = vec![Complex64::default(); side * side];
            for v in -(c as isize)..=c as isize {
                for u in -(c as isize)..=c as isize {
                    let ph = 2.0 * std::f64::consts::PI * (u + v) as f64 * shift / n as f64;
                    data[(v + c as isize) as usize * side + (u + c as isize) as usize] =
                        band.at(u, v) * Complex64::from_polar(1.0, ph);
                }
            }
            fixed_band = Some(data);
        }
        let inv = 1.0 / (ds * ds) as f64;
        let target_c: Vec<f64> = (0..nc * nc)
            .into_par_iter()
            .map(|i| {
                let (bx, by) = (i % nc, i / nc);
                let mut s = 0usize;
                for dy in 0..ds {
                    for dx in 0..ds {
                        s += usize::from(*target.at(bx * ds + dx, by * ds + dy) != 0);
                    }
                }
                s as f64 * inv
            })
            .collect();
        let d = params.doses.map(|d| f64::from(d) * f64::from(d));
        Ok(Self {
            n,
            ds,
            nc,
            m,
            c,
            sets: [SetData::new(&model.focus, n), SetData::new(defocus, n)],
            dfac,
            fixed_band,
            active,
            target: target_c,
            dose2: d,
            alpha: f64::from(params.resist.steepness),
            threshold: f64::from(params.resist.threshold),
            w_l2: params.weight_l2,
            w_pvb: params.weight_pvb,
            w_band: params.weight_band,
        })
    }

    /// The latent field of the target: `±1` around the block average.
    fn initial_latent(&self) -> Vec<f64> {
        self.target.iter().map(|&t| 2.0 * t - 1.0).collect()
    }

    /// The 0/1 full-resolution mask of a latent field: `P > 0` in active blocks, the
    /// target elsewhere.
    fn binarised(&self, p: &[f64], target: &Grid<u8>) -> Grid<u8> {
        let (n, ds, nc) = (self.n, self.ds, self.nc);
        let data = (0..n * n)
            .into_par_iter()
            .map(|i| {
                let (x, y) = (i % n, i / n);
                let b = (y / ds) * nc + x / ds;
                if self.active[b] {
                    u8::from(p[b] > 0.0)
                } else {
                    u8::from(target.data[i] != 0)
                }
            })
            .collect();
        Grid {
            width: n,
            height: n,
            data,
        }
    }

    /// The coarse mask `sigmoid(β P)` on active pixels, 0 elsewhere.
    fn mask(&self, p: &[f64], beta: f64) -> Vec<f64> {
        p.par_iter()
            .zip(self.active.par_iter())
            .map(|(&p, &a)| if a { sigmoid(beta * p) } else { 0.0 })
            .collect()
    }

    /// The mask band (half `c`) of a coarse mask, frozen part included.
    fn band(&self, mc: &[f64], cancel: &CancelToken) -> Result<Vec<Complex64>, Cancelled> {
        let c = self.c;
        let side = 2 * c + 1;
        let mut b = real_band(mc, self.nc, c, cancel)?;
        for (i, z) in b.iter_mut().enumerate() {
            *z *= self.dfac[i / side] * self.dfac[i % side];
        }
        if let Some(f) = &self.fixed_band {
            for (z, f) in b.iter_mut().zip(f) {
                *z += f;
            }
        }
        Ok(b)
    }

    /// Fields (unnormalized, on the `m` grid) and the `N × N` intensity of one set.
    fn image(
        &self,
        set: &SetData,
        band: &[Complex64],
        cancel: &CancelToken,
    ) -> Result<(Vec<Vec<Complex64>>, Vec<f64>), Cancelled> {
        let m = self.m;
        let c = self.c as isize;
        let side = 2 * self.c + 1;
        let plan = fft::plan(m, Direction::Inverse);
        let fields: Vec<Vec<Complex64>> = set
            .kernels
            .par_iter()
            .map(|ker| {
                cancel.check()?;
                let s = set.size;
                let h = (s / 2) as isize;
                let mut field = vec![Complex64::default(); m * m];
                for r in 0..s {
                    let v = r as isize - h;
                    for col in 0..s {
                        let u = col as isize - h;
                        let b = band[(v + c) as usize * side + (u + c) as usize];
                        field[fft::wrap(v, m) * m + fft::wrap(u, m)] += b * ker[r * s + col];
                    }
                }
                small_2d(&mut field, m, &plan);
                Ok(field)
            })
            .collect::<Result<_, Cancelled>>()?;
        let mut ic = vec![0.0; m * m];
        for (f, &w) in fields.iter().zip(&set.weights) {
            for (a, z) in ic.iter_mut().zip(f) {
                *a += w * z.norm_sqr();
            }
        }
        let half = 2 * self.c;
        let scale = 1.0 / (m * m) as f64;
        let mut spec = real_band(&ic, m, half, cancel)?;
        for z in &mut spec {
            *z *= scale;
        }
        Ok((fields, real_from_band(&spec, half, self.nc)))
    }

    /// Loss at latent `p` with mask steepness `beta`; writes `dL/dp` into `grad` when given.
    fn loss_grad(
        &self,
        p: &[f64],
        beta: f64,
        grad: Option<&mut [f64]>,
        cancel: &CancelToken,
    ) -> Result<f64, Cancelled> {
        let mc = self.mask(p, beta);
        let band = self.band(&mc, cancel)?;
        let (f_fields, f_int) = self.image(&self.sets[0], &band, cancel)?;
        cancel.check()?;
        let (d_fields, d_int) = self.image(&self.sets[1], &band, cancel)?;
        cancel.check()?;
        let (a, th, d2) = (self.alpha, self.threshold, self.dose2);
        let (wl, wp, wb) = (self.w_l2, self.w_pvb, self.w_band);
        // Per pixel: loss, dL/dI_focus, dL/dI_defocus.
        let per: Vec<(f64, f64, f64)> = (0..self.nc * self.nc)
            .into_par_iter()
            .map(|i| {
                let t = self.target[i];
                let (fi, di) = (f_int[i], d_int[i]);
                let z0 = sigmoid(a * (d2[0] * fi - th));
                let z1 = sigmoid(a * (d2[1] * fi - th));
                let z2 = sigmoid(a * (d2[2] * di - th));
                let l = wl * (z0 - t).powi(2)
                    + wp * ((z1 - t).powi(2) + (z2 - t).powi(2))
                    + wb * (z1 - z2).powi(2);
                let g0 = 2.0 * wl * (z0 - t) * a * z0 * (1.0 - z0) * d2[0];
                let g1 = 2.0 * (wp * (z1 - t) + wb * (z1 - z2)) * a * z1 * (1.0 - z1) * d2[1];
                let g2 = 2.0 * (wp * (z2 - t) - wb * (z1 - z2)) * a * z2 * (1.0 - z2) * d2[2];
                (l, g0 + g1, g2)
            })
            .collect();
        let loss = per.iter().map(|x| x.0).sum::<f64>();
        let Some(grad) = grad else {
            return Ok(loss);
        };
        let side = 2 * self.c + 1;
        let mut gband = vec![Complex64::default(); side * side];
        for (si, fields) in [(0usize, &f_fields), (1, &d_fields)] {
            let g: Vec<f64> = per
                .iter()
                .map(|x| if si == 0 { x.1 } else { x.2 })
                .collect();
            let gb = self.adjoint_set(&self.sets[si], fields, &g, cancel)?;
            for (a, b) in gband.iter_mut().zip(&gb) {
                *a += b;
            }
        }
        for (i, z) in gband.iter_mut().enumerate() {
            *z *= self.dfac[i / side] * self.dfac[i % side];
        }
        let gm = real_from_band(&gband, self.c, self.nc);
        grad.par_iter_mut()
            .zip(gm.par_iter())
            .zip(mc.par_iter())
            .zip(self.active.par_iter())
            .for_each(|(((g, &gm), &m), &act)| {
                *g = if act { gm * beta * m * (1.0 - m) } else { 0.0 };
            });
        Ok(loss)
    }

    /// Gradient with respect to the mask band (half `c`) of one set, given `dL/dI` on
    /// the `N × N` grid.
    fn adjoint_set(
        &self,
        set: &SetData,
        fields: &[Vec<Complex64>],
        g: &[f64],
        cancel: &CancelToken,
    ) -> Result<Vec<Complex64>, Cancelled> {
        let m = self.m;
        let half = 2 * self.c;
        let gs = real_band(g, self.nc, half, cancel)?;
        let gc: Vec<f64> = real_from_band(&gs, half, m)
            .into_iter()
            .map(|v| v / (m * m) as f64)
            .collect();
        let c = self.c as isize;
        let side = 2 * self.c + 1;
        let plan = fft::plan(m, Direction::Forward);
        let zero = || vec![Complex64::default(); side * side];
        set.kernels
            .par_iter()
            .zip(fields.par_iter())
            .zip(set.weights.par_iter())
            .try_fold(zero, |mut acc, ((ker, field), &w)| {
                cancel.check()?;
                let mut hk: Vec<Complex64> = field
                    .iter()
                    .zip(&gc)
                    .map(|(f, &gv)| f * (2.0 * w * gv))
                    .collect();
                small_2d(&mut hk, m, &plan);
                let s = set.size;
                let h = (s / 2) as isize;
                for r in 0..s {
                    let v = r as isize - h;
                    for col in 0..s {
                        let u = col as isize - h;
                        acc[(v + c) as usize * side + (u + c) as usize] +=
                            ker[r * s + col].conj() * hk[fft::wrap(v, m) * m + fft::wrap(u, m)];
                    }
                }
                Ok(acc)
            })
            .try_reduce(zero, |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x += y;
                }
                Ok(a)
            })
    }
}

fn check_target(target: &Grid<u8>, k: &KernelSet) -> Result<(), ImagingError> {
    let n = target.width;
    if target.height != n || target.data.len() != n * n {
        return Err(ImagingError::Invalid(format!(
            "target must be square, got {}×{}",
            target.width, target.height
        )));
    }
    if k.size == 0 || k.size.is_multiple_of(2) || n < k.size {
        return Err(ImagingError::Invalid(format!(
            "kernel side {} does not fit a {n}-pixel grid",
            k.size
        )));
    }
    Ok(())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `Re Σ_{|u|,|v| <= half} b[v][u] e^{+2πi (u x + v y)/n}` on the `n × n` grid: the
/// transpose of [`real_band`] under the real inner product.
fn real_from_band(b: &[Complex64], half: usize, n: usize) -> Vec<f64> {
    let side = 2 * half + 1;
    // Hermitian part: the real part of the transform equals the transform of it.
    let herm: Vec<Complex64> = (0..side * side)
        .map(|i| (b[i] + b[side * side - 1 - i].conj()) * 0.5)
        .collect();
    let inv = fft::plan(n, Direction::Inverse);
    let cols: Vec<Vec<Complex64>> = (0..side)
        .into_par_iter()
        .map(|j| {
            let mut col = vec![Complex64::default(); n];
            for vi in 0..side {
                let v = vi as isize - half as isize;
                col[fft::wrap(v, n)] += herm[vi * side + j];
            }
            let mut scratch = vec![Complex64::default(); inv.get_inplace_scratch_len()];
            inv.process_with_scratch(&mut col, &mut scratch);
            col
        })
        .collect();
    let mut out = vec![0.0f64; n * n];
    out.par_chunks_mut(2 * n)
        .enumerate()
        .for_each(|(pi, rows)| {
            let y0 = 2 * pi;
            let mut buf = vec![Complex64::default(); n];
            for (j, col) in cols.iter().enumerate() {
                let u = j as isize - half as isize;
                let ga = col[y0];
                let gb = if y0 + 1 < n {
                    col[y0 + 1]
                } else {
                    Complex64::default()
                };
                buf[fft::wrap(u, n)] += ga + Complex64::new(-gb.im, gb.re);
            }
            let mut scratch = vec![Complex64::default(); inv.get_inplace_scratch_len()];
            inv.process_with_scratch(&mut buf, &mut scratch);
            let (a, b) = rows.split_at_mut(n.min(rows.len()));
            for (x, v) in a.iter_mut().enumerate() {
                *v = buf[x].re;
            }
            for (x, v) in b.iter_mut().enumerate() {
                *v = buf[x].im;
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use num_complex::Complex32;

    use super::*;

    /// A small deterministic generator (SplitMix64).
    struct Rng(u64);

    impl Rng {
        fn unit(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Random low-pass kernels of side 5 whose open-frame intensity is 1.
    fn kernels(count: usize, seed: u64, n: usize) -> Arc<KernelSet> {
        let size = 5;
        let mut rng = Rng(seed);
        let mut ks = Vec::new();
        for _ in 0..count {
            for r in 0..size {
                for c in 0..size {
                    let d = ((r as f64 - 2.0).powi(2) + (c as f64 - 2.0).powi(2)).sqrt();
                    let amp = (1.0 - d / 3.2).max(0.0);
                    ks.push(Complex32::new(
                        (amp * (rng.unit() + 0.3)) as f32,
                        (amp * (rng.unit() - 0.5)) as f32,
                    ));
                }
            }
        }
        let mut scales: Vec<f32> = (0..count).map(|k| 1.0 / (k as f32 + 1.0)).collect();
        let open: f32 = (0..count)
            .map(|k| scales[k] * ks[k * 25 + 12].norm_sqr())
            .sum();
        for s in &mut scales {
            *s /= open;
        }
        Arc::new(KernelSet::new(size, ks, scales, n as f64).expect("valid kernels"))
    }

    fn model(n: usize) -> ModelKernels {
        ModelKernels {
            focus: kernels(3, 1, n),
            defocus: Some(kernels(3, 2, n)),
        }
    }

    /// Two bars and a square on an `n × n` grid.
    fn target(n: usize) -> Grid<u8> {
        let mut t = Grid::filled(n, n, 0u8);
        let s = n / 16;
        for y in 0..n {
            for x in 0..n {
                let bar = (3 * s..5 * s).contains(&x) && (2 * s..13 * s).contains(&y);
                let bar2 = (7 * s..9 * s).contains(&x) && (2 * s..13 * s).contains(&y);
                let sq = (11 * s..14 * s).contains(&x) && (5 * s..9 * s).contains(&y);
                *t.at_mut(x, y) = u8::from(bar || bar2 || sq);
            }
        }
        t
    }

    fn grad_check(n: usize, ds: u32, window: Option<&Grid<u8>>) {
        let t = target(n);
        let params = IltParams {
            downsample: ds,
            weight_pvb: 0.7,
            weight_band: 0.4,
            ..IltParams::default()
        };
        let cancel = CancelToken::new();
        let pb = Problem::new(&t, window, &model(n), &params, &cancel).expect("problem");
        assert_eq!(pb.ds, ds as usize);
        let mut rng = Rng(7);
        let p: Vec<f64> = pb
            .initial_latent()
            .iter()
            .map(|v| 0.4 * v + 0.6 * (rng.unit() - 0.5))
            .collect();
        let beta = 3.0;
        let mut g = vec![0.0; p.len()];
        let l0 = pb.loss_grad(&p, beta, Some(&mut g), &cancel).expect("loss");
        assert!(l0 > 0.0);
        let gmax = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(gmax > 0.0);
        let eps = 1e-5;
        let mut checked = 0;
        for i in (0..p.len()).step_by(p.len() / 40 + 1) {
            let mut q = p.clone();
            q[i] += eps;
            let lp = pb.loss_grad(&q, beta, None, &cancel).expect("loss");
            q[i] -= 2.0 * eps;
            let lm = pb.loss_grad(&q, beta, None, &cancel).expect("loss");
            let fd = (lp - lm) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() <= 1e-6 * gmax + 1e-6 * fd.abs(),
                "pixel {i}: adjoint {} vs finite difference {fd} (max |g| {gmax})",
                g[i]
            );
            if !pb.active[i] {
                assert_eq!(g[i], 0.0);
            }
            checked += 1;
        }
        assert!(checked >= 30);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        grad_check(32, 2, None);
        grad_check(48, 3, None);
        grad_check(24, 1, None);
    }

    #[test]
    fn gradient_matches_finite_differences_in_a_window() {
        let n = 32;
        let mut w = Grid::filled(n, n, 0u8);
        for y in 5..27 {
            for x in 3..20 {
                *w.at_mut(x, y) = 1;
            }
        }
        grad_check(n, 2, Some(&w));
    }

    #[test]
    fn coarse_model_equals_full_resolution_imaging_at_block_centres() {
        // Odd block side: the block centre is a full-resolution pixel.
        let (n, ds) = (48, 3);
        let t = target(n);
        let m = model(n);
        let params = IltParams {
            downsample: ds,
            ..IltParams::default()
        };
        let cancel = CancelToken::new();
        let pb = Problem::new(&t, None, &m, &params, &cancel).expect("problem");
        let mut rng = Rng(3);
        let p: Vec<f64> = (0..pb.nc * pb.nc).map(|_| rng.unit() - 0.5).collect();
        let mc = pb.mask(&p, 4.0);
        let fine = Grid {
            width: n,
            height: n,
            data: (0..n * n)
                .map(|i| mc[(i / n / ds as usize) * pb.nc + (i % n) / ds as usize] as f32)
                .collect(),
        };
        for (set, ks) in [(0, &m.focus), (1, m.defocus.as_ref().expect("defocus"))] {
            let (_, coarse) = pb
                .image(
                    &pb.sets[set],
                    &pb.band(&mc, &cancel).expect("band"),
                    &cancel,
                )
                .expect("image");
            let full = crate::bandlimited::aerial(&fine, ks, 1.0, &cancel).expect("aerial");
            let mut worst = 0.0f64;
            for y in 0..pb.nc {
                for x in 0..pb.nc {
                    let f = f64::from(*full.at(x * 3 + 1, y * 3 + 1));
                    worst = worst.max((f - coarse[y * pb.nc + x]).abs());
                }
            }
            assert!(worst < 1e-5, "set {set}: max difference {worst}");
        }
    }

    #[test]
    fn optimisation_lowers_the_loss_and_reports_progress() {
        let n = 64;
        let t = target(n);
        // Pinned settings (not the defaults tuned for the ICCAD-2013 model).
        let params = IltParams {
            iterations: 25,
            downsample: 2,
            step_size: 0.1,
            weight_pvb: 1.0,
            weight_band: 0.0,
            refine_iterations: 0,
            ..IltParams::default()
        };
        let mut reports = Vec::new();
        let out = optimize_mask(&t, &model(n), &params, &CancelToken::new(), &mut |p| {
            reports.push(p);
        })
        .expect("optimize");
        assert_eq!(out.iterations_run, 25);
        assert_eq!(out.loss.len(), 25);
        let (first, last) = (out.loss[0], out.loss[24]);
        assert!(last < 0.75 * first, "loss {first} -> {last}");
        assert_eq!(reports.len(), 25);
        assert_eq!(reports[24].done, 25);
        assert_eq!(reports[24].stage, "ilt_iteration");
        assert!(out.mask.data.iter().all(|&v| v <= 1));
        assert!(
            out.after.l2 < out.before.l2,
            "{:?} -> {:?}",
            out.before,
            out.after
        );
    }

    #[test]
    fn cancellation_stops_the_loop() {
        let n = 32;
        let cancel = CancelToken::new();
        let params = IltParams {
            iterations: 50,
            downsample: 2,
            ..IltParams::default()
        };
        let mut seen = 0;
        let c2 = cancel.clone();
        let r = optimize_mask(&target(n), &model(n), &params, &cancel, &mut |p| {
            seen = p.done;
            if p.done == 3 {
                c2.cancel();
            }
        });
        assert!(matches!(r, Err(ImagingError::Cancelled)), "{r:?}");
        assert_eq!(seen, 3);
    }

    #[test]
    fn pixels_outside_the_window_keep_the_target() {
        let n = 64;
        let t = target(n);
        let mut w = Grid::filled(n, n, 0u8);
        // A window that does not align with the 4-pixel blocks.
        for y in 10..51 {
            for x in 2..31 {
                *w.at_mut(x, y) = 1;
            }
        }
        let params = IltParams {
            iterations: 20,
            downsample: 4,
            refine_iterations: 10,
            ..IltParams::default()
        };
        let out = optimize_window(
            &t,
            Some(&w),
            &model(n),
            &params,
            &CancelToken::new(),
            &mut |_| {},
        )
        .expect("optimize");
        let mut changed_inside = 0;
        for i in 0..n * n {
            if w.data[i] == 0 {
                assert_eq!(
                    out.mask.data[i], t.data[i],
                    "pixel {i} outside the window changed"
                );
            } else if out.mask.data[i] != t.data[i] {
                changed_inside += 1;
            }
        }
        assert!(changed_inside > 0, "the window was optimised");
        assert!(out.loss[19] < out.loss[0]);
        // The refinement ran on 2-pixel blocks.
        assert_eq!(
            (out.iterations_run, out.downsample, out.loss.len()),
            (30, 2, 30)
        );
        assert!(out.loss[29] < out.loss[20]);
    }

    #[test]
    fn raster_checkpoints_match_polygon_checkpoints() {
        use reticle_layout::{BBox, Point, Polygon};
        let mut t = Grid::filled(200, 200, 0u8);
        for y in 40..80 {
            for x in 30..150 {
                *t.at_mut(x, y) = 1;
            }
        }
        let poly = Polygon::rect(BBox::from_corners(Point::new(30, 40), Point::new(150, 80)));
        let key = |c: &Checkpoint| {
            (
                (c.x * 8.0) as i64,
                (c.y * 8.0) as i64,
                c.nx as i64,
                c.ny as i64,
            )
        };
        let mut a: Vec<_> = raster_checkpoints(&t, 40.0).iter().map(key).collect();
        let mut b: Vec<_> = crate::metrics::checkpoints(&[poly], 40.0)
            .iter()
            .map(key)
            .collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a.len(), 8);
        assert_eq!(a, b);
    }
}
