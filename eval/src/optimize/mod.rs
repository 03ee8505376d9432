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
pub mod target;

use std::sync::Arc;

use reticle_kernel::ilt::{IltOutcome, IltParams, optimize_window};
use reticle_kernel::rules::LayerRef;
use reticle_kernel::{
    CancelToken, Grid, ImagingBackend, KeepImages, LithoJob, LithoOutput, ModelKernels, Progress,
};
use reticle_layout::Polygon;
use serde_json::{Value, json};

use crate::error::EvalError;
use crate::r3;
use crate::window::ImagedWindow;
use compare::{Comparison, metrics_of};
use mask::{MaskPolygons, PixelWindow, window_grid};
use target::Target;

/// Optimizes the pixels `px` of `imaged`'s target with the window's own kernels (focus
/// from the nominal corner, defocus from the min corner) and resist; `progress` gets the
/// ILT's iterations.
///
/// # Errors
/// [`EvalError::Cancelled`], or the engine's error as a tool error.
pub fn run_ilt(
    imaged: &ImagedWindow,
    px: PixelWindow,
    iterations: u32,
    refine_iterations: u32,
    cancel: &CancelToken,
    progress: &mut dyn FnMut(Progress),
) -> Result<IltOutcome, EvalError> {
    let window = window_grid(imaged.target.width, imaged.target.height, px);
    let model = ModelKernels {
        focus: Arc::clone(&imaged.corners[0].kernels),
        defocus: Some(Arc::clone(&imaged.corners[2].kernels)),
    };
    let params = IltParams {
        iterations,
        refine_iterations,
        pixel_nm: imaged.pixel_nm,
        resist: imaged.resist,
        ..IltParams::default()
    };
    Ok(optimize_window(
        &imaged.target,
        Some(&window),
        &model,
        &params,
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
pub fn polygon_summary(mask: &MaskPolygons, layer: LayerRef, cell: &str, dbu_nm: f64) -> Value {
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
    /// Margin around the marker(s), nm.
    pub halo_nm: f64,
    /// ILT iterations asked for (main stage, refinement).
    pub iterations: (u32, u32),
    /// What the ILT did.
    pub ilt: &'a IltOutcome,
    /// The evaluation of the drawn clip.
    pub before: &'a Value,
    /// The evaluation of the optimized mask.
    pub after: &'a Value,
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
        ilt,
        ..
    } = *outcome;
    let clip = imaged.layout.window;
    let dbu_nm = imaged.layout.dbu_nm;
    let to_nm = |v: i64| r3(v as f64 * dbu_nm);
    let pixel_dbu = |i: usize| (i as f64 * imaged.frame.pixel_nm).round() as i64;
    json!({
        "schema_version": reticle_protocol::SCHEMA_VERSION,
        "target": target.json,
        "layout": before["layout"],
        "deck": before["deck"],
        "clip_nm": before["window_nm"],
        "window_nm": {
            "left": to_nm(clip.left + pixel_dbu(px.0)),
            "bottom": to_nm(clip.bottom + pixel_dbu(px.1)),
            "right": to_nm(clip.left + pixel_dbu(px.2)),
            "top": to_nm(clip.bottom + pixel_dbu(px.3)),
        },
        "halo_nm": outcome.halo_nm,
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
        },
        "metrics": {"before": metrics_of(before), "after": metrics_of(after)},
        "groups_in_window": comparison.groups_in_window,
        "violations_resolved": comparison.resolved,
        "group_members": comparison.group_members,
        "violations_after": {
            "records": after["counts"]["records"],
            "groups": after["counts"]["groups"],
            "new_in_window": comparison.new_in_window,
            "by_rule": after["counts"]["by_rule"],
        },
        "state_after": state_after,
    })
}
