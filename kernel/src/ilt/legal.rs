//! ILT whose output passes the deck's mask rules: the optimisation of [`super`], then
//! the projection and repair of [`crate::mrc`] (in the curvilinear style, of the block
//! mask with squares, and only where that cannot be made legal of the smooth boundary
//! with disks, docs/DECISIONS.md D110, D112), then assist features that earn their
//! place, then the metrics of the polygons as written (rasterised with exact area
//! coverage, the mask that a re-read of the written file images).

use reticle_layout::Polygon;

use crate::imaging::{ImagingError, LithoOutput};
use crate::mrc::{self, LegalMask, LegalizeRequest, MaskStyle, PixelBox, morph};
use crate::raster::{PixelFrame, rasterize_in};
use crate::rules::Rule;
use crate::{CancelToken, Grid, ModelKernels, Progress};

use super::checkpoints::{epe_violated_px, raster_checkpoints};
use super::{
    IltMetrics, IltOutcome, IltParams, corners, evaluate_with, grid_f32, image_printed, metrics_of,
    nominal_print, optimize_latent,
};
use crate::metrics::Checkpoint;

/// How the optimized mask must be drawn and checked.
#[derive(Debug, Clone, Copy)]
pub struct MaskPlan<'a> {
    /// The deck's rules (only `applies_to: mask` rules on the optimized layer are used).
    pub rules: &'a [Rule],
    /// Curvilinear or Manhattan.
    pub style: MaskStyle,
    /// Manhattan grid in pixels (shortest segment and jog).
    pub grid_px: usize,
    /// Whether separate assist features may be kept.
    pub assist_features: bool,
    /// Drawn polygons outside the window (dbu), part of the checked mask.
    pub context: &'a [Polygon],
    /// Left and bottom edge of pixel `(0, 0)` (dbu).
    pub origin_dbu: (f64, f64),
    /// Pixel side (dbu).
    pub pixel_dbu: f64,
    /// One dbu (nm).
    pub dbu_nm: f64,
    /// The mask outside the window as pixels when it is not the target (a tiled
    /// optimize's finished neighbours, D170): what the optimizer images around its window
    /// and the "before" mask; `None`: the target. `context` must be the same mask.
    pub frozen: Option<&'a Grid<u8>>,
    /// The pixels the optimizer may move, when wider than the window (a region's tile
    /// optimizes across its seams and keeps its own box, D248); `None`: the window. Past
    /// the window the optimizer starts from the mask there and its steps fall linearly
    /// to 0 at the edge of this box (a block straddling the window's edge moves as far
    /// as its centre says); only the window's pixels are kept and legalized: outside it
    /// the mask is `frozen`'s.
    pub blend: Option<PixelBox>,
    /// Where the legal mask prints a new EPE violation, put the "before" mask back
    /// around it (D249); `None`: never.
    pub epe_revert: Option<EpeRevert>,
}

/// How [`optimize_legal`] undoes the mask's new EPE violations (D249): at the ILT's
/// raster checkpoints inside the window where the legal mask's nominal print breaks the
/// tolerance and the "before" mask's does not, the window's pixels within `radius_nm`
/// of each take the "before" mask's values; the result is kept when it is as legal as
/// the mask it replaces and has fewer such checkpoints. Up to [`EPE_REVERT_ROUNDS`]
/// rounds, the `k`-th with `k` times the radius.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpeRevert {
    /// The EPE tolerance (nm): the deck's.
    pub tolerance_nm: f64,
    /// Half the side of the square put back around a checkpoint in the first round (nm).
    pub radius_nm: f64,
}

/// Rounds of [`EpeRevert`] at most.
pub const EPE_REVERT_ROUNDS: u32 = 3;

/// The assist features of a mask: polygons that touch no drawn shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AssistSummary {
    /// Assist polygons kept.
    pub polygons: usize,
    /// Their area in pixels.
    pub area_px: usize,
    /// Removed because they printed at a corner.
    pub removed_printing: usize,
    /// Removed because the mask without them had a better L2 + PVB.
    pub removed_unhelpful: usize,
}

/// What [`optimize_legal`] returns.
#[derive(Debug, Clone)]
pub struct LegalOutcome {
    /// The optimisation: `mask` is the written polygons' coverage thresholded at ½,
    /// `after` the metrics of the coverage itself.
    pub ilt: IltOutcome,
    /// The legal mask: pixels, polygons (dbu) and remaining violations.
    pub legal: LegalMask,
    /// Exact area coverage of the written polygons and the context: the mask imaged.
    pub coverage: Grid<f32>,
    /// Assist features.
    pub assists: AssistSummary,
}

fn window_grid(n: usize, b: PixelBox) -> Grid<u8> {
    let mut g = Grid::filled(n, n, 0u8);
    for y in b.1..b.3 {
        for x in b.0..b.2 {
            *g.at_mut(x, y) = 1;
        }
    }
    g
}

/// Per component label: whether it overlaps no pixel of `target` (an assist feature).
fn assist_labels(target: &Grid<u8>, labels: &[u32], count: usize) -> Vec<bool> {
    let mut touches = vec![false; count];
    for (i, &l) in labels.iter().enumerate() {
        if l != 0 && target.data[i] != 0 {
            touches[l as usize] = true;
        }
    }
    touches.iter().map(|t| !t).collect()
}

/// Whole-clip or windowed ILT with a legal result (see the module docs). `window` is the
/// box of pixels that may change (`None`: all). With `assist_features: false` the
/// optimiser may only change pixels within two blocks of the target, and every separate
/// polygon is removed.
///
/// # Errors
/// [`ImagingError`] (its `Cancelled` variant on cancel).
pub fn optimize_legal(
    target: &Grid<u8>,
    window: Option<PixelBox>,
    model: &ModelKernels,
    params: &IltParams,
    plan: &MaskPlan<'_>,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<LegalOutcome, ImagingError> {
    let n = target.width;
    let bx = window.unwrap_or((0, 0, n, n));
    // A blend box that is the window itself blends nothing.
    let blend = plan.blend.filter(|&b| b != bx);
    let mut allowed = window_grid(n, blend.unwrap_or(bx));
    if !plan.assist_features {
        let near = morph::dilate_disk(target, 2.0 * f64::from(params.downsample.max(1)));
        for (a, b) in allowed.data.iter_mut().zip(&near.data) {
            *a &= *b;
        }
    }
    let corners = corners(model, params);
    // The mask before: the frozen mask outside the window, the target inside.
    let outside = plan.frozen.unwrap_or(target);
    let before_mask = match plan.frozen {
        Some(frozen) => {
            let mut m = frozen.clone();
            for y in bx.1..bx.3 {
                for x in bx.0..bx.2 {
                    *m.at_mut(x, y) = *target.at(x, y);
                }
            }
            m
        }
        None => target.clone(),
    };
    let before_print = image_printed(&grid_f32(&before_mask), target, &corners, params, cancel)?;
    let before = metrics_of(&before_print, target, params)?;
    // Past the box, the optimizer starts from the mask that is there (D248).
    let start = blend.is_some().then_some(&before_mask);
    let run = optimize_latent(
        target,
        Some(&allowed),
        plan.frozen,
        start,
        blend.map(|b| {
            let w = [
                bx.0.saturating_sub(b.0),
                bx.1.saturating_sub(b.1),
                b.2.saturating_sub(bx.2),
                b.3.saturating_sub(bx.3),
            ];
            (bx, w.into_iter().max().unwrap_or(0) as f64)
        }),
        model,
        params,
        cancel,
        progress,
    )?;
    cancel.check()?;
    let mut proposal = match plan.style {
        MaskStyle::Curvilinear => run.problem.binarised_smooth(&run.latent, outside),
        MaskStyle::Manhattan => run.problem.binarised(&run.latent, outside),
    };
    if blend.is_some() {
        // Optimized across the window's edge, kept inside it only.
        for y in 0..n {
            for x in 0..n {
                if !(bx.0..bx.2).contains(&x) || !(bx.1..bx.3).contains(&y) {
                    *proposal.at_mut(x, y) = *outside.at(x, y);
                }
            }
        }
    }
    let curvy_req = LegalizeRequest {
        proposal: &proposal,
        target,
        outside: plan.frozen,
        window: bx,
        context: plan.context,
        origin_dbu: plan.origin_dbu,
        pixel_dbu: plan.pixel_dbu,
        dbu_nm: plan.dbu_nm,
        rules: plan.rules,
        style: plan.style,
        grid_px: plan.grid_px,
    };
    let frame = PixelFrame {
        left_nm: plan.origin_dbu.0,
        bottom_nm: plan.origin_dbu.1,
        pixel_nm: plan.pixel_dbu,
        width: n,
        height: n,
    };
    let coverage_of = |l: &LegalMask| {
        let mut all = plan.context.to_vec();
        all.extend_from_slice(&l.polygons);
        rasterize_in(&all, &frame)
    };
    // The curvilinear style legalizes its smooth boundary as a Manhattan candidate first
    // (the square elements lose less under a Euclidean width rule, D100, and its few
    // records are repaired locally, D112): rectilinear polygons are curvilinear polygons
    // too (D110). Only when that fails is the smooth boundary legalized with disks. The
    // smooth boundary snapped to the Manhattan grid, not the block staircase: on
    // gcd_45nm it keeps far more of the optimizer's gain (D177).
    let square_req = (plan.style == MaskStyle::Curvilinear
        && !mrc::MrcLimits::of(plan.rules).is_empty())
    .then_some(LegalizeRequest {
        style: MaskStyle::Manhattan,
        ..curvy_req
    });
    let square = square_req
        .as_ref()
        .map(|r| mrc::legalize(r, cancel))
        .transpose()?;
    let image = |l: &LegalMask| -> Result<(Grid<f32>, LithoOutput), ImagingError> {
        let cov = coverage_of(l);
        let out = image_printed(&cov, target, &corners, params, cancel)?;
        Ok((cov, out))
    };

    // The square candidate is kept when no record is left within reach of the window:
    // records farther away are the context's (drawn shapes cut by the frame's edge), the
    // same for every candidate (D176).
    // Assist features: those that print at any corner go; then all of them go unless
    // the mask scores better (L2 + PVB) with them. The legal mask is imaged once for both
    // the print test and its metrics; again only when something was removed.
    let (mut legal, req, (mut coverage, mut out)) = match (square, square_req) {
        (Some(square), Some(square_req))
            if !square
                .violations
                .iter()
                .any(|v| mrc::within_reach(&square_req, v)) =>
        {
            let imaged = image(&square)?;
            (square, square_req, imaged)
        }
        _ => {
            let curvy = mrc::legalize(&curvy_req, cancel)?;
            let imaged = image(&curvy)?;
            (curvy, curvy_req, imaged)
        }
    };
    let (labels, sizes) = morph::components(&legal.pixels);
    let is_assist = assist_labels(target, &labels, sizes.len());
    let mut assists = AssistSummary::default();
    let mut drop = vec![false; sizes.len()];
    if plan.assist_features {
        let printed = printed_anywhere(&out);
        for (i, &l) in labels.iter().enumerate() {
            if l != 0 && is_assist[l as usize] && printed[i] && !drop[l as usize] {
                drop[l as usize] = true;
                assists.removed_printing += 1;
            }
        }
    } else {
        drop[1..].copy_from_slice(&is_assist[1..]);
    }
    let legal_pixels = legal.pixels.clone();
    let without = |drop: &[bool]| {
        let mut m = legal_pixels.clone();
        for (v, &l) in m.data.iter_mut().zip(&labels) {
            if l != 0 && drop[l as usize] {
                *v = 0;
            }
        }
        m
    };
    if drop.iter().any(|&d| d) {
        legal = mrc::rebuild(&req, without(&drop), legal.repair_rounds);
        (coverage, out) = image(&legal)?;
    }
    let mut after = metrics_of(&out, target, params)?;
    let kept: Vec<usize> = (1..sizes.len())
        .filter(|&l| is_assist[l] && !drop[l])
        .collect();
    if !kept.is_empty() {
        let mut all = drop.clone();
        for &l in &kept {
            all[l] = true;
        }
        let bare = mrc::rebuild(&req, without(&all), legal.repair_rounds);
        let bare_cov = coverage_of(&bare);
        let bare_print = image_printed(&bare_cov, target, &corners, params, cancel)?;
        let bare_after = metrics_of(&bare_print, target, params)?;
        if bare_after.l2 + bare_after.pvb <= after.l2 + after.pvb {
            assists.removed_unhelpful = kept.len();
            legal = bare;
            coverage = bare_cov;
            after = bare_after;
            out = bare_print;
        } else {
            assists.polygons = kept.len();
            assists.area_px = kept.iter().map(|&l| sizes[l]).sum();
        }
    }
    // `out` is the print of `legal` here: the revert starts from what the mask prints.
    if let Some(revert) = plan.epe_revert {
        let new_epe = NewEpe::of(target, &before_print, bx, params, revert.tolerance_nm)?;
        let mut missed = new_epe.at(&out)?;
        for round in 1..=EPE_REVERT_ROUNDS {
            if missed.is_empty() {
                break;
            }
            let radius = revert.radius_nm * f64::from(round) / params.pixel_nm;
            let pixels = new_epe.put_back(&legal.pixels, &before_mask, &missed, radius);
            let candidate = mrc::rebuild(&req, pixels, legal.repair_rounds);
            if candidate.violations.len() > legal.violations.len()
                || candidate
                    .violations
                    .iter()
                    .any(|v| mrc::within_reach(&req, v))
            {
                break;
            }
            let (cov, print) = image(&candidate)?;
            let still = new_epe.at(&print)?;
            if still.len() >= missed.len() {
                break;
            }
            after = metrics_of(&print, target, params)?;
            (legal, coverage, missed) = (candidate, cov, still);
        }
    }
    let mask = Grid {
        width: n,
        height: n,
        data: coverage.data.iter().map(|&v| u8::from(v >= 0.5)).collect(),
    };
    Ok(LegalOutcome {
        ilt: IltOutcome {
            mask,
            before,
            after,
            iterations_run: run.iterations_run,
            downsample: run.problem.ds as u32,
            loss: run.loss,
        },
        legal,
        coverage,
        assists,
    })
}

/// The ILT's raster checkpoints inside a window and which of them the "before" mask
/// prints within the tolerance: what [`EpeRevert`] compares a mask's print with.
pub struct NewEpe {
    pub checkpoints: Vec<Checkpoint>,
    held_before: Vec<bool>,
    tolerance_px: f64,
    window: PixelBox,
}

impl NewEpe {
    pub fn of(
        target: &Grid<u8>,
        before: &LithoOutput,
        window: PixelBox,
        params: &IltParams,
        tolerance_nm: f64,
    ) -> Result<Self, ImagingError> {
        let px = params.pixel_nm.max(f64::MIN_POSITIVE);
        let (x0, y0, x1, y1) = window;
        let checkpoints: Vec<Checkpoint> = raster_checkpoints(target, params.epe.spacing_nm / px)
            .into_iter()
            .filter(|c| {
                (x0 as f64..=x1 as f64).contains(&c.x) && (y0 as f64..=y1 as f64).contains(&c.y)
            })
            .collect();
        let tolerance_px = tolerance_nm / px;
        let held_before = epe_violated_px(&checkpoints, nominal_print(before)?, tolerance_px)
            .into_iter()
            .map(|v| !v)
            .collect();
        Ok(Self {
            checkpoints,
            held_before,
            tolerance_px,
            window,
        })
    }

    /// The checkpoints `print` violates and the "before" mask did not.
    pub fn at(&self, print: &LithoOutput) -> Result<Vec<usize>, ImagingError> {
        let now = epe_violated_px(&self.checkpoints, nominal_print(print)?, self.tolerance_px);
        Ok((0..now.len())
            .filter(|&i| now[i] && self.held_before[i])
            .collect())
    }

    /// `mask` with the window's pixels within `radius` (pixels, a square) of each of
    /// the checkpoints `at` taken from `before`.
    pub fn put_back(
        &self,
        mask: &Grid<u8>,
        before: &Grid<u8>,
        at: &[usize],
        radius: f64,
    ) -> Grid<u8> {
        let mut out = mask.clone();
        let (x0, y0, x1, y1) = self.window;
        for c in at.iter().map(|&i| self.checkpoints[i]) {
            let span = |v: f64, lo: usize, hi: usize| {
                let a = (v - radius).floor().max(lo as f64) as usize;
                let b = ((v + radius).ceil().max(0.0) as usize).min(hi);
                a..b.max(a)
            };
            for y in span(c.y, y0, y1) {
                for x in span(c.x, x0, x1) {
                    *out.at_mut(x, y) = *before.at(x, y);
                }
            }
        }
        out
    }
}

/// Pixels printed at any corner of an imaging output.
fn printed_anywhere(out: &LithoOutput) -> Vec<bool> {
    let mut any = Vec::new();
    for p in out.corners.iter().filter_map(|c| c.printed.as_ref()) {
        any.resize(p.data.len(), false);
        for (a, &v) in any.iter_mut().zip(&p.data) {
            *a |= v != 0;
        }
    }
    any
}

/// Metrics of a 0/1 or coverage mask (for callers that re-measure a written mask).
///
/// # Errors
/// [`ImagingError`].
pub fn evaluate_coverage(
    coverage: &Grid<f32>,
    target: &Grid<u8>,
    model: &ModelKernels,
    params: &IltParams,
    cancel: &CancelToken,
) -> Result<IltMetrics, ImagingError> {
    evaluate_with(coverage, target, &corners(model, params), params, cancel)
}
