//! The worker's side of imaging one window: read the window's layout file (confined to the
//! job's roots, within the size limit), hand its bytes to [`reticle_eval::source`], image
//! it with [`reticle_eval::imaging`] on the worker's backend, and report progress. What
//! `simulate`, `evaluate`, `optimize` and `demo.render` image.

use std::path::PathBuf;

use reticle_eval::ImagedWindow;
use reticle_eval::imaging::{Imaged, check_window, image_window, window_side_nm};
use reticle_eval::source::{WindowSpec, layout_limits, load_window};
use reticle_kernel::model::ModelSpec;
use reticle_protocol::error::ToolError;

use crate::attempt::AttemptCtx;
use crate::op::{cancelled, eval_error};

/// The window and model of one imaging run.
pub struct Window {
    /// The layout file (checked against the job's roots here).
    pub layout: PathBuf,
    /// `layer/datatype`; `None` for a `.glp` clip or a layout of one layer.
    pub layer: Option<String>,
    /// Cell to flatten; `None`: the top cell.
    pub cell: Option<String>,
    /// The window (µm); `None`: around the layer's extent.
    pub box_um: Option<[f64; 4]>,
    /// Pixel size (nm); default 1.
    pub pixel_nm: Option<f64>,
    /// The model; default: the default model of the window's side.
    pub model: Option<ModelSpec>,
    /// Layers read with `layer`, clipped to the same window but not imaged: the second
    /// layer of a rule such as enclosure.
    pub context_layers: Vec<String>,
    /// A mask layer imaged instead of `layer` (post-OPC verification, D180).
    pub mask_layer: Option<String>,
}

/// How a window was imaged: what the evaluation does not read (where the file is, how
/// long imaging took, on which backend).
pub struct ImagingRun {
    /// The canonical path of the layout file.
    pub path: PathBuf,
    /// Imaging time (ms).
    pub imaging_ms: f64,
    /// The backend that imaged.
    pub backend: reticle_kernel::BackendInfo,
}

/// Reads the layout window (confined to the job's roots) and images it at the three ICCAD
/// corners on the worker's backend. Reports progress steps 1..=3 of `total`.
///
/// # Errors
/// The read's, the window's and the imaging's tool errors; `CANCELLED`.
pub fn image(
    ctx: &AttemptCtx<'_>,
    window: Window,
    total: u64,
) -> Result<(ImagedWindow, ImagingRun), ToolError> {
    let path = ctx.readable(&window.layout)?;
    let bytes = crate::layouts::read_file(ctx, &path)?;
    let spec = WindowSpec {
        path: &path,
        layer: window.layer.as_deref(),
        cell: window.cell.as_deref(),
        box_um: window.box_um,
        context_layers: &window.context_layers,
        mask_layer: window.mask_layer.as_deref(),
    };
    let side_nm = window_side_nm(window.model.as_ref(), window.box_um);
    let layout = load_window(&spec, &bytes, side_nm, layout_limits(&ctx.context.limits))?;
    ctx.progress.report(1, total, "layout read");
    if ctx.cancel.is_cancelled() {
        return Err(cancelled(ctx.job_id));
    }
    let (model, pixel_nm) = check_window(
        &layout,
        window.model,
        window.pixel_nm,
        window.box_um,
        ctx.context.limits.max_raster_pixels,
    )?;
    let engine = ctx.state.backend.engine()?;
    let step = |step| {
        let message = if step == 2 {
            "kernels ready"
        } else {
            "imaging"
        };
        ctx.progress.report(step, total, message);
    };
    let Imaged {
        window: imaged,
        imaging_ms,
        backend,
    } = image_window(engine, layout, model, pixel_nm, ctx.cancel, step)
        .map_err(|e| eval_error(e, ctx.job_id))?;
    let run = ImagingRun {
        path,
        imaging_ms,
        backend,
    };
    Ok((imaged, run))
}
