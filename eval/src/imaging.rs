//! Imaging one layout window at the three ICCAD-2013 corners (nominal focus @1.00, max
//! focus @1.02, min defocus @0.98) on an imaging backend: the code `simulate`,
//! `evaluate`, `optimize` and every whole-layout tile share.
//!
//! The window side must equal the model's period (the SOCS kernels are sampled on that
//! period). Geometry stays in the layout's database units end to end; only reported
//! lengths are converted to nm. The caller reads the layout ([`crate::source`]) and
//! chooses the backend; progress goes through `step`.

use std::sync::Arc;
use std::time::Instant;

use reticle_kernel::model::{ModelSpec, default_model};
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::resist::iccad_corners;
use reticle_kernel::{
    BackendInfo, BatchJob, CancelToken, FramePart, ImagingBackend, KeepImages, LithoJob,
    LithoOutput, Resist, raster,
};
use reticle_layout::BBox;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::{EvalError, ImagedWindow, LayoutWindow};

/// The default window side (and Hopkins period) when neither the caller nor the model says.
pub const DEFAULT_SIDE_NM: f64 = 2048.0;

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

/// The side of the window to read: the model's period, else the box's width, else
/// [`DEFAULT_SIDE_NM`].
#[must_use]
pub fn window_side_nm(model: Option<&ModelSpec>, box_um: Option<[f64; 4]>) -> f64 {
    match (model, box_um) {
        (Some(model), _) => model.period_nm(),
        (None, Some([l, _, r, _])) => (r - l) * 1000.0,
        (None, None) => DEFAULT_SIDE_NM,
    }
}

/// The model and pixel of a window read with [`crate::source::load_window`], checked: the
/// window is a non-empty square of the model's period (the default model's when `model`
/// is `None`), `pixel_nm` (default 1) within the model's limit and the raster limit.
///
/// # Errors
/// `INVALID_BOX`, `INVALID_INPUT` (the pixel), `QUERY_TOO_LARGE` (the raster).
pub fn check_window(
    layout: &LayoutWindow,
    model: Option<ModelSpec>,
    pixel_nm: Option<f64>,
    box_um: Option<[f64; 4]>,
    max_raster_pixels: u64,
) -> Result<(ModelSpec, f64), ToolError> {
    let window_nm = layout.window.width() as f64 * layout.dbu_nm;
    if (layout.window.width() != layout.window.height()) || window_nm <= 0.0 {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            "the window must be a non-empty square",
        )
        .with_details(json!({"box_um": box_um})));
    }
    let model = model.unwrap_or_else(|| default_model(window_nm));
    let period = model.period_nm();
    if (period - window_nm).abs() > 1e-6 * period.max(1.0) {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            format!("the window side ({window_nm} nm) must equal the model period ({period} nm)"),
        )
        .with_details(json!({"window_nm": window_nm, "period_nm": period})));
    }
    let pixel_nm = pixel_nm.unwrap_or(1.0);
    check_pixel(&model, pixel_nm)?;
    let grid_side = (window_nm / pixel_nm).round();
    let pixels = grid_side * grid_side;
    if pixels > max_raster_pixels as f64 || (grid_side * pixel_nm - window_nm).abs() > 1e-6 {
        return Err(ToolError::new(
            ErrorCode::QueryTooLarge,
            "window / pixel_nm must be a whole number of pixels within the raster limit",
        )
        .with_details(
            json!({"pixels": pixels, "limit": max_raster_pixels, "pixel_nm": pixel_nm}),
        ));
    }
    Ok((model, pixel_nm))
}

/// One window imaged: the window, how long imaging took (ms) and on which backend.
pub struct Imaged {
    /// The window and its corner images.
    pub window: ImagedWindow,
    /// Imaging time (ms).
    pub imaging_ms: f64,
    /// The backend that imaged.
    pub backend: BackendInfo,
}

/// Images one window of the model's period (`layout.window`) at the three ICCAD corners on
/// `engine`, `pixel_nm` pixels; `step(2)` once the kernels are ready and `step(3)` when
/// imaging starts.
///
/// # Errors
/// `INVALID_INPUT` (the model, the raster), [`EvalError::Cancelled`], a backend failure.
pub fn image_window(
    engine: &dyn ImagingBackend,
    layout: LayoutWindow,
    model: ModelSpec,
    pixel_nm: f64,
    cancel: &CancelToken,
    step: impl Fn(u64),
) -> Result<Imaged, EvalError> {
    image_window_reading(engine, layout, model, pixel_nm, None, cancel, step)
}

/// What a caller of [`image_window_reading`] reads of the images, and the buffers they may go in.
pub struct Reads {
    /// The pixels read: those whose centres lie in this box (dbu).
    pub pixels: BBox,
    /// How many corners, from the nominal one, whose aerial image is read
    /// ([`reticle_kernel::FramePart::aerial_corners`], D228).
    pub aerial_corners: usize,
    /// An earlier window's buffers the new images may go into (D194, D195);
    /// `Buffers::default()` for none.
    pub reuse: Buffers,
}

/// The buffers of an imaged window that the next window of a worker reuses: its corner
/// images (D194), its mask raster and its target (D195).
#[derive(Debug, Default)]
pub struct Buffers {
    /// The corner images.
    pub output: LithoOutput,
    /// The mask raster's pixels.
    pub mask: Vec<f32>,
    /// The target's pixels.
    pub target: Vec<u8>,
}

impl From<ImagedWindow> for Buffers {
    fn from(w: ImagedWindow) -> Self {
        Self {
            output: w.output,
            mask: w.mask.data,
            target: w.target.data,
        }
    }
}

/// [`image_window`] for a caller that reads the corner images only at pixels whose
/// centres lie in `reads.pixels` (all of them when `None`) and reads none of the whole-frame
/// counts (`output.l2`, `pvb`, `printed_pixels`): a whole-layout tile, which counts its own
/// core. Inside that box (and two pixels around it) the images equal [`image_window`]'s
/// bit for bit; the engine computes no more than that ([`ImagingBackend::litho_part`], D193),
/// into `reads.reuse`'s buffers where it can (D194).
///
/// # Errors
/// As [`image_window`].
pub fn image_window_reading(
    engine: &dyn ImagingBackend,
    layout: LayoutWindow,
    model: ModelSpec,
    pixel_nm: f64,
    reads: Option<Reads>,
    cancel: &CancelToken,
    step: impl Fn(u64),
) -> Result<Imaged, EvalError> {
    image_windows_reading(
        engine,
        vec![(layout, reads)],
        &model,
        pixel_nm,
        cancel,
        step,
    )?
    .pop()
    .ok_or_else(|| EvalError::Tool(invalid("no window was imaged", json!({}))))
}

/// [`image_window_reading`] of several windows of one model and pixel at once, in order:
/// the engine takes them as one batch ([`ImagingBackend::litho_batch`]; the GPU path
/// images up to [`ImagingBackend::batch_windows`] in one submission, issue 29 item 5).
/// Each window's images equal what [`image_window_reading`] gives for it alone; its
/// `imaging_ms` is its share of the batch's time.
///
/// # Errors
/// As [`image_window`].
pub fn image_windows_reading(
    engine: &dyn ImagingBackend,
    windows: Vec<(LayoutWindow, Option<Reads>)>,
    model: &ModelSpec,
    pixel_nm: f64,
    cancel: &CancelToken,
    step: impl Fn(u64),
) -> Result<Vec<Imaged>, EvalError> {
    let period = model.period_nm();
    let kernels = model
        .kernels()
        .map_err(|e| invalid(format!("model: {e}"), json!({})))?;
    step(2);
    let mut rastered = Vec::with_capacity(windows.len());
    for (layout, reads) in windows {
        let pixel_dbu = pixel_nm / layout.dbu_nm;
        let frame = raster::PixelFrame::for_window(layout.window, pixel_dbu)
            .map_err(|e| invalid(e.to_string(), json!({})))?;
        let (part, reuse) = match reads {
            Some(Reads {
                pixels,
                aerial_corners,
                reuse,
            }) => (Some(frame_part(&frame, &pixels, aerial_corners)), reuse),
            None => (None, Buffers::default()),
        };
        // The target: the drawn layer's pixels at least half covered. With a mask layer
        // (post-OPC verification) the drawn layer is rasterized on the same frame; without,
        // the mask is the drawn layer (one pass gives both, D195).
        let (mask, target) = match layout.mask.as_ref() {
            None => {
                raster::rasterize_with_target(&layout.polygons, &frame, reuse.mask, reuse.target)
            }
            Some(mask) => {
                let mask = raster::rasterize_into(mask, &frame, reuse.mask);
                let (_, target) = raster::rasterize_with_target(
                    &layout.polygons,
                    &frame,
                    Vec::new(),
                    reuse.target,
                );
                (mask, target)
            }
        };
        rastered.push((layout, frame, mask, target, part, reuse.output));
    }
    let defocus = kernels
        .defocus
        .clone()
        .unwrap_or_else(|| Arc::clone(&kernels.focus));
    let corners = iccad_corners(&kernels.focus, &defocus);
    let resist = Resist::ICCAD2013;
    let mut jobs = Vec::with_capacity(rastered.len());
    for (_, _, mask, target, part, reuse) in &mut rastered {
        jobs.push(BatchJob {
            job: LithoJob {
                mask,
                target: Some(target),
                corners: &corners,
                resist,
                keep: KeepImages {
                    aerial: true,
                    resist: false,
                    printed: true,
                },
            },
            part: *part,
            reuse: std::mem::take(reuse),
        });
    }
    step(3);
    let imaging_started = Instant::now();
    let report = |_p: reticle_kernel::Progress| {};
    let outputs = engine.litho_batch(jobs, cancel, &report)?;
    let imaging_ms = imaging_started.elapsed().as_secs_f64() * 1e3 / rastered.len().max(1) as f64;
    let backend = engine.info();
    Ok(rastered
        .into_iter()
        .zip(outputs)
        .map(|((layout, frame, mask, target, _, _), output)| Imaged {
            window: ImagedWindow {
                layout,
                frame,
                pixel_nm,
                model: model.clone(),
                period,
                focus_kernels: kernels.focus.scales.len(),
                resist,
                output,
                mask,
                target,
                corners: corners.clone(),
            },
            imaging_ms,
            backend: backend.clone(),
        })
        .collect())
}

/// The pixels of `frame` meeting `b` (dbu), and two more on every side, clamped to the
/// frame; the aerial images of the first `aerial_corners` corners.
fn frame_part(frame: &PixelFrame, b: &BBox, aerial_corners: usize) -> FramePart {
    let span = |lo: i64, hi: i64, origin: f64, n: usize| {
        let at = |v: i64| (v as f64 - origin) / frame.pixel_nm;
        let first = (at(lo).floor() - 2.0).clamp(0.0, n as f64) as usize;
        let last = (at(hi).ceil() + 2.0).clamp(0.0, n as f64) as usize;
        (first, last.max(first))
    };
    let (x0, x1) = span(b.left, b.right, frame.left_nm, frame.width);
    let (y0, y1) = span(b.bottom, b.top, frame.bottom_nm, frame.height);
    FramePart {
        x0,
        x1,
        y0,
        y1,
        aerial_corners,
    }
}

/// `INVALID_INPUT` when `pixel_nm` is larger than the largest pixel the model allows
/// ([`ModelSpec::pixel_limit`]: Nyquist sampling of the intensity).
///
/// # Errors
/// `INVALID_INPUT`.
pub fn check_pixel(model: &ModelSpec, pixel_nm: f64) -> Result<(), ToolError> {
    let limit = model
        .pixel_limit()
        .map_err(|e| invalid(format!("model: {e}"), json!({})))?;
    if pixel_nm > limit.max_pixel_nm {
        return Err(invalid(
            format!(
                "pixel_nm {pixel_nm} is larger than the largest pixel this model allows, {:.1} nm ({})",
                limit.max_pixel_nm, limit.rule
            ),
            json!({"pixel_nm": pixel_nm, "max_pixel_nm": (limit.max_pixel_nm * 1e6).round() / 1e6, "rule": limit.rule}),
        ));
    }
    Ok(())
}
