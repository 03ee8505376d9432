//! The repair loop's logic (`optimize`, seed 000 §2c/§5, D44–D46) around the pixel ILT:
//!
//! 1. the clip is evaluated ([`crate::report::report`], detailed, no limit), so the ids
//!    of this re-evaluation are the ids `evaluate` handed out;
//! 2. [`target`]: the `violation_id` is checked against the layout and deck it was made
//!    with and resolved among the records (`scope: group` resolves a shadow to its
//!    group's canonical record and covers every member, `record_only` the record alone),
//!    or a box, or the whole clip; the window is that plus the halo, clamped to the clip;
//! 3. [`run_ilt`] optimizes the pixels of the window; pixels outside keep the drawn mask;
//! 4. [`mask`]: the optimized mask (drawn polygons outside, ILT pixels inside) as pixels
//!    to image again ([`reimage`]) and as polygons to evaluate and write;
//! 5. [`compare`]: metrics before and after, the groups the window touched and whether
//!    each is resolved, the targeted group's members; [`payload`] assembles the result.

pub mod compare;
pub mod mask;
pub mod region;
pub mod target;

use std::sync::Arc;

use reticle_kernel::ilt::{
    EdgeWeight, EpeRevert, IltParams, LegalOutcome, MaskPlan, optimize_legal,
};
use reticle_kernel::mrc::MaskStyle;
use reticle_kernel::rules::{DeckLayer, Rule};
use reticle_kernel::{
    CancelToken, Grid, ImagingBackend, KeepImages, LithoJob, LithoOutput, ModelKernels, Progress,
};
use reticle_layout::Polygon;
use serde_json::{Value, json};

use crate::error::EvalError;
use crate::payload::{RuleLine, ViolationReport};
use crate::r3;
use crate::window::ImagedWindow;
use compare::{Comparison, metrics_of};
use mask::{MaskPolygons, PixelWindow};
use target::Target;

/// How the optimized mask is drawn (`optimize`'s `mask_style` and `assist_features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskOptions {
    /// Curvilinear or Manhattan.
    pub style: MaskStyle,
    /// Whether assist features may be kept.
    pub assist_features: bool,
}

/// The Manhattan grid (nm): the shortest segment and jog of a Manhattan mask.
pub const MANHATTAN_GRID_NM: f64 = 4.0;

/// Optimizes the pixels `px` of `imaged`'s target with the window's own kernels (focus
/// from the nominal corner, defocus from the min corner) and resist, and legalizes the
/// result by `rules` (the deck's rules on the optimized layer; its mask rules shape the
/// mask) with `context`, the drawn polygons outside the window
/// ([`mask::context_pieces`]); `progress` gets the ILT's iterations.
///
/// # Errors
/// [`EvalError::Cancelled`], or the engine's error as a tool error.
#[allow(clippy::too_many_arguments)]
pub fn run_ilt(
    imaged: &ImagedWindow,
    px: PixelWindow,
    iterations: u32,
    refine_iterations: u32,
    rules: &[Rule],
    context: &[Polygon],
    options: MaskOptions,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<LegalOutcome, EvalError> {
    let ilt = IltRun {
        px,
        iterations,
        refine_iterations,
        rules,
        context,
        frozen: None,
        blend: None,
        edge: None,
        epe_revert: None,
        options,
    };
    run_ilt_with(imaged, &ilt, cancel, progress)
}

/// What one ILT run of a window takes besides the window ([`run_ilt_with`]).
#[derive(Debug, Clone, Copy)]
pub struct IltRun<'a> {
    /// The pixels optimized.
    pub px: PixelWindow,
    /// Main-stage iterations.
    pub iterations: u32,
    /// Refinement iterations.
    pub refine_iterations: u32,
    /// The deck's rules on the optimized layer.
    pub rules: &'a [Rule],
    /// The mask outside the window as polygons (dbu).
    pub context: &'a [Polygon],
    /// The same mask as pixels when it is not the drawn target (a tiled optimize's
    /// finished neighbours, D170); `None`: the target.
    pub frozen: Option<&'a Grid<u8>>,
    /// The pixels the optimizer may move, when wider than `px` (only `px` is kept,
    /// D248); `None`: `px`.
    pub blend: Option<PixelWindow>,
    /// A heavier L2 term near the target's edges (D249); `None`: none.
    pub edge: Option<EdgeWeight>,
    /// The mask put back where it prints a new EPE violation (D249); `None`: never.
    pub epe_revert: Option<EpeRevert>,
    /// How the mask is drawn.
    pub options: MaskOptions,
}

/// [`run_ilt`] with a frozen mask around the window that may differ from the target.
///
/// # Errors
/// As [`run_ilt`].
pub fn run_ilt_with(
    imaged: &ImagedWindow,
    run: &IltRun<'_>,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<LegalOutcome, EvalError> {
    let IltRun {
        px,
        iterations,
        refine_iterations,
        rules,
        context,
        frozen,
        blend,
        edge,
        epe_revert,
        options,
    } = *run;
    let model = ModelKernels {
        focus: Arc::clone(&imaged.corners[0].kernels),
        defocus: Some(Arc::clone(&imaged.corners[2].kernels)),
    };
    let params = IltParams {
        iterations,
        refine_iterations,
        pixel_nm: imaged.pixel_nm,
        resist: imaged.resist,
        edge,
        ..IltParams::default()
    };
    let frame = &imaged.frame;
    let plan = MaskPlan {
        rules,
        style: options.style,
        grid_px: (MANHATTAN_GRID_NM / imaged.pixel_nm).round().max(1.0) as usize,
        assist_features: options.assist_features,
        context,
        origin_dbu: (frame.left_nm, frame.bottom_nm),
        pixel_dbu: frame.pixel_nm,
        dbu_nm: imaged.layout.dbu_nm,
        frozen,
        blend,
        epe_revert,
    };
    Ok(optimize_legal(
        &imaged.target,
        Some(px),
        &model,
        &params,
        &plan,
        cancel,
        progress,
    )?)
}

/// Images `mask` on `imaged`'s frame at its three corners on `backend` (aerial images and
/// prints kept, for the after-report).
///
/// # Errors
/// [`EvalError::Cancelled`], or the backend's error as a tool error.
pub fn reimage(
    backend: &dyn ImagingBackend,
    imaged: &ImagedWindow,
    mask: &Grid<f32>,
    cancel: &CancelToken,
) -> Result<LithoOutput, EvalError> {
    let job = LithoJob {
        mask,
        target: Some(&imaged.target),
        corners: &imaged.corners,
        resist: imaged.resist,
        keep: KeepImages {
            aerial: true,
            resist: false,
            printed: true,
        },
    };
    Ok(backend.litho(&job, cancel, &|_| {})?)
}

/// The `state_after.polygons` summary of the optimized mask written on `layer` of cell
/// `cell`: counts, layer, cell, dbu and the bbox (nm) of the written polygons.
#[must_use]
pub fn polygon_summary(mask: &MaskPolygons, layer: DeckLayer, cell: &str, dbu_nm: f64) -> Value {
    let bbox = mask
        .written
        .iter()
        .filter_map(Polygon::bbox)
        .reduce(|a, b| a.union(&b));
    let to_nm = |v: i64| r3(v as f64 * dbu_nm);
    let mut polygons = mask.summary.clone();
    polygons["layer"] = json!(layer.to_string());
    polygons["cell"] = json!(cell);
    polygons["dbu_nm"] = json!(dbu_nm);
    polygons["bbox_nm"] = match bbox {
        Some(b) => json!([to_nm(b.left), to_nm(b.bottom), to_nm(b.right), to_nm(b.top)]),
        None => Value::Null,
    };
    polygons
}

/// The `counts.by_rule` entries of a report's mask rules (`applies_to: mask`).
fn mask_rule_entries(report: &ViolationReport) -> impl Iterator<Item = &RuleLine> {
    report
        .head
        .counts
        .by_rule
        .iter()
        .filter(|r| r.applies_to == "mask")
}

/// Mask-rule records of an evaluation payload (from `counts.by_rule`, so a truncated
/// record list still counts).
#[must_use]
pub fn mask_rule_records(report: &ViolationReport) -> u64 {
    mask_rule_entries(report).map(|r| r.records as u64).sum()
}

/// The ids of an evaluation payload's mask rules.
#[must_use]
pub fn mask_rule_ids(report: &ViolationReport) -> Vec<String> {
    mask_rule_entries(report)
        .map(|r| r.rule_id.clone())
        .collect()
}

/// Pixels where `after` differs from `before`.
#[must_use]
pub fn changed_pixels(before: &Grid<u8>, after: &Grid<u8>) -> usize {
    after
        .data
        .iter()
        .zip(&before.data)
        .filter(|(a, b)| a != b)
        .count()
}

/// Everything an optimize result reports, besides its artifacts.
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// The clip as imaged.
    pub imaged: &'a ImagedWindow,
    /// What was targeted, and the window.
    pub target: &'a Target<'a>,
    /// The pixels optimized.
    pub px: PixelWindow,
    /// ILT iterations asked for (main stage, refinement).
    pub iterations: (u32, u32),
    /// What the ILT did, and the legal mask.
    pub ilt: &'a LegalOutcome,
    /// How the mask was drawn.
    pub options: MaskOptions,
    /// The evaluation of the drawn clip.
    pub before: &'a ViolationReport,
    /// The evaluation of the optimized mask.
    pub after: &'a ViolationReport,
    /// What changed.
    pub comparison: &'a Comparison,
}

/// The `optimize` payload of `outcome`, with `state_after` (the artifacts) as given.
#[must_use]
pub fn payload(outcome: &Outcome<'_>, state_after: Value) -> Value {
    let Outcome {
        imaged,
        target,
        px,
        before,
        after,
        comparison,
        ilt: legal,
        ..
    } = *outcome;
    let ilt = &legal.ilt;
    let clip = imaged.layout.window;
    let dbu_nm = imaged.layout.dbu_nm;
    let to_nm = |v: i64| r3(v as f64 * dbu_nm);
    let pixel_dbu = |i: usize| (i as f64 * imaged.frame.pixel_nm).round() as i64;
    json!({
        "schema_version": reticle_protocol::SCHEMA_VERSION,
        "target": target.json,
        "layout": before.head.layout,
        "deck": before.head.deck,
        "clip_nm": before.head.window_nm,
        "window_nm": {
            "left": to_nm(clip.left + pixel_dbu(px.0)),
            "bottom": to_nm(clip.bottom + pixel_dbu(px.1)),
            "right": to_nm(clip.left + pixel_dbu(px.2)),
            "top": to_nm(clip.bottom + pixel_dbu(px.3)),
        },
        "halo_nm": target.halo_nm,
        "pixel_nm": imaged.pixel_nm,
        "ilt": {
            "iterations": outcome.iterations.0,
            "refine_iterations": outcome.iterations.1,
            "iterations_run": ilt.iterations_run,
            "downsample": ilt.downsample,
            "window_pixels": (px.2 - px.0) * (px.3 - px.1),
            "before": ilt.before,
            "after": ilt.after,
            "final_loss": ilt.loss.last(),
            "mask_measured": "written_polygons",
        },
        "mask_style": outcome.options.style,
        "assist_features": {
            "enabled": outcome.options.assist_features,
            "polygons": legal.assists.polygons,
            "area_nm2": r3(legal.assists.area_px as f64 * imaged.pixel_nm * imaged.pixel_nm),
            "removed_printing": legal.assists.removed_printing,
            "removed_unhelpful": legal.assists.removed_unhelpful,
        },
        "mask_rules": {
            "rules": mask_rule_ids(after),
            "records": mask_rule_records(after),
            "repair_rounds": legal.legal.repair_rounds,
        },
        "metrics": {
            "before": metrics_of(before),
            "after": metrics_of(after),
            "after_mask": "the written polygons (state_after.mask_gds), rasterised with exact area coverage and imaged at the three corners",
        },
        "groups_in_window": comparison.groups_in_window,
        "violations_resolved": comparison.resolved,
        "group_members": comparison.group_members,
        "violations_after": {
            "records": after.head.counts.records,
            "groups": after.head.counts.groups,
            "new_in_window": comparison.new_in_window,
            "by_rule": after.head.counts.by_rule,
        },
        "state_after": state_after,
    })
}
