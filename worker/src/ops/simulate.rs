//! `simulate`: one square window of a layout imaged at the ICCAD-2013 corners
//! (nominal focus @1.00, max focus @1.02, min defocus @0.98), with L2 against
//! the drawn pattern, the PV band, and ICCAD EPE.
//!
//! The window side must equal the model's period (the SOCS kernels are sampled
//! on that period). Geometry stays in the layout's database units end to end;
//! only reported lengths are converted to nm.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use reticle_eval::gauges::iccad_epe_config;
use reticle_eval::{ImagedWindow, LayoutWindow};
use reticle_kernel::metrics::epe;
use reticle_kernel::model::{ModelSpec, default_model};
use reticle_kernel::resist::{CORNER_NAMES, iccad_corners};
use reticle_kernel::{Grid, KeepImages, LithoJob, Resist, raster};
use reticle_layout::{
    BBox, FlattenOptions, LayerKey, Point, Polygon, flatten, glp, read_layout, resolve_cell,
    sha256_hex,
};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Op, artifacts, cancelled, parse_args};
use crate::job::JobCtx;

/// The window and model of one simulation (`simulate`'s arguments; `evaluate` builds one).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    pub(crate) layout: PathBuf,
    #[serde(default)]
    pub(crate) layer: Option<String>,
    #[serde(default)]
    pub(crate) cell: Option<String>,
    #[serde(default)]
    pub(crate) box_um: Option<[f64; 4]>,
    #[serde(default)]
    pub(crate) pixel_nm: Option<f64>,
    #[serde(default)]
    pub(crate) model: Option<ModelSpec>,
    /// Layers read with `layer`, clipped to the same window but not imaged: the second
    /// layer of a rule such as enclosure (`evaluate` fills it; not a tool argument).
    #[serde(default, skip)]
    pub(crate) context_layers: Vec<String>,
}

/// The default window side (and Hopkins period) when neither the caller nor the model says.
pub(crate) const DEFAULT_SIDE_NM: f64 = 2048.0;

/// The `simulate` op.
pub struct Simulate;

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

pub(crate) fn parse_layer(text: &str) -> Result<LayerKey, ToolError> {
    let parsed = text.split_once('/').and_then(|(l, d)| {
        Some(LayerKey {
            layer: l.parse().ok()?,
            datatype: d.parse().ok()?,
        })
    });
    parsed.ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidLayer,
            format!("layer must be \"layer/datatype\", got {text:?}"),
        )
        .with_details(json!({"layer": text}))
    })
}

fn square_around(center_x: f64, center_y: f64, side: f64) -> BBox {
    // Round the corner once and add the side: rounding both corners of a centre at .5
    // gave a window one dbu wider than high (not a square, INVALID_BOX).
    let side = side.round() as i64;
    let left = (center_x - side as f64 / 2.0).round() as i64;
    let bottom = (center_y - side as f64 / 2.0).round() as i64;
    BBox::from_corners(
        Point::new(left, bottom),
        Point::new(left + side, bottom + side),
    )
}

fn load(
    args: &Args,
    bytes: &[u8],
    side_nm: f64,
    ctx: &JobCtx<'_>,
) -> Result<LayoutWindow, ToolError> {
    let sha256 = sha256_hex(bytes);
    let is_glp = args
        .layout
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("glp"));
    let um_box = |dbu_nm: f64| {
        args.box_um.map(|[l, b, r, t]| {
            let to = |um: f64| (um * 1000.0 / dbu_nm).round() as i64;
            BBox::from_corners(Point::new(to(l), to(b)), Point::new(to(r), to(t)))
        })
    };
    if is_glp {
        let layout = glp::parse(bytes).map_err(|e| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("not a valid .glp file: {e}"),
            )
        })?;
        let polygons = layout.polygons(args.layer.as_deref());
        let window = um_box(1.0).unwrap_or_else(reticle_kernel::iccad::window);
        let context = args
            .context_layers
            .iter()
            .map(|name| (name.clone(), layout.polygons(Some(name))))
            .collect();
        return Ok(LayoutWindow {
            format: "glp",
            sha256,
            dbu_nm: 1.0,
            polygons,
            window,
            context,
        });
    }
    let limits = crate::job::layout_limits(&ctx.context.limits);
    let format = reticle_layout::Format::sniff(bytes).map_or("gds or oasis", |f| f.name());
    let library = read_layout(bytes, None, &limits)
        .map_err(|e| crate::job::read_error(&e, &args.layout.to_string_lossy(), format))?;
    let dbu_nm = library.dbu_in_meters * 1e9;
    let cell = resolve_cell(&library, args.cell.as_deref()).map_err(|e| {
        ToolError::new(ErrorCode::TopCellNotFound, e.to_string())
            .with_details(json!({"cell": args.cell}))
    })?;
    let layer = match &args.layer {
        Some(text) => Some(parse_layer(text)?),
        None => None,
    };
    let mut options = FlattenOptions {
        clip: None,
        layers: layer.map(|l| [l].into_iter().collect()),
        include_texts: false,
        limits,
    };
    // Without a box, centre the window on the layer's extent.
    let window = match um_box(dbu_nm) {
        Some(window) => window,
        None => {
            let all = flatten(&library, cell, &options).map_err(crate::job::flatten_error)?;
            let bbox = all
                .polygons
                .values()
                .flatten()
                .filter_map(Polygon::bbox)
                .reduce(|a, b| a.union(&b))
                .ok_or_else(|| {
                    ToolError::new(ErrorCode::InvalidLayer, "the layer has no shapes")
                        .with_details(json!({"layer": args.layer}))
                })?;
            square_around(
                (bbox.left + bbox.right) as f64 / 2.0,
                (bbox.bottom + bbox.top) as f64 / 2.0,
                side_nm / dbu_nm,
            )
        }
    };
    options.clip = Some(window);
    let context_keys = match layer {
        Some(_) => args
            .context_layers
            .iter()
            .map(|text| Ok((text.clone(), parse_layer(text)?)))
            .collect::<Result<Vec<_>, ToolError>>()?,
        None => Vec::new(),
    };
    if let Some(layers) = options.layers.as_mut() {
        layers.extend(context_keys.iter().map(|(_, key)| *key));
    }
    let mut flat = flatten(&library, cell, &options).map_err(crate::job::flatten_error)?;
    let context = context_keys
        .iter()
        .map(|(text, key)| {
            (
                text.clone(),
                flat.polygons.get(key).cloned().unwrap_or_default(),
            )
        })
        .collect();
    if let Some(layer) = layer {
        flat.polygons.retain(|key, _| *key == layer);
    }
    let mut layers = flat.polygons.into_iter();
    let polygons = match (layer, layers.len()) {
        (Some(_), _) | (None, 0 | 1) => layers.next().map(|(_, p)| p).unwrap_or_default(),
        (None, n) => {
            return Err(ToolError::new(
                ErrorCode::InvalidLayer,
                format!("the window has {n} layers; name one with `layer`"),
            )
            .with_details(json!({"layers": n})));
        }
    };
    Ok(LayoutWindow {
        format: "gds/oasis",
        sha256,
        dbu_nm,
        polygons,
        window,
        context,
    })
}

/// How a window was imaged: what the evaluation does not read (where the file is, how
/// long imaging took, on which backend).
pub(crate) struct ImagingRun {
    /// The canonical path of the layout file.
    pub(crate) path: PathBuf,
    /// Imaging time.
    pub(crate) imaging_ms: f64,
    /// The backend that imaged.
    pub(crate) backend: reticle_kernel::BackendInfo,
}

/// Reads the layout window of `args` (confined to the job's roots), images it at the
/// three ICCAD corners on the worker's backend. Reports progress steps 1..=3 of `total`.
pub(crate) fn image(
    ctx: &JobCtx<'_>,
    mut args: Args,
    total: u64,
) -> Result<(ImagedWindow, ImagingRun), ToolError> {
    args.layout = ctx.readable(&args.layout)?;
    crate::job::check_file_size(
        &args.layout,
        ctx.context.limits.max_layout_bytes,
        "layout file",
    )?;
    let bytes = std::fs::read(&args.layout).map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read {}: {e}", args.layout.display()),
        )
    })?;
    let side_nm = match (&args.model, args.box_um) {
        (Some(model), _) => model.period_nm(),
        (None, Some([l, _, r, _])) => (r - l) * 1000.0,
        (None, None) => DEFAULT_SIDE_NM,
    };
    let layout = load(&args, &bytes, side_nm, ctx)?;
    ctx.progress.report(1, total, "layout read");
    if ctx.cancel.is_cancelled() {
        return Err(cancelled(ctx.job_id));
    }
    let window_nm = layout.window.width() as f64 * layout.dbu_nm;
    if (layout.window.width() != layout.window.height()) || window_nm <= 0.0 {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            "the window must be a non-empty square",
        )
        .with_details(json!({"box_um": args.box_um})));
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| default_model(window_nm));
    let period = model.period_nm();
    if (period - window_nm).abs() > 1e-6 * period.max(1.0) {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            format!("the window side ({window_nm} nm) must equal the model period ({period} nm)"),
        )
        .with_details(json!({"window_nm": window_nm, "period_nm": period})));
    }
    let pixel_nm = args.pixel_nm.unwrap_or(1.0);
    check_pixel(&model, pixel_nm)?;
    let grid_side = (window_nm / pixel_nm).round();
    let pixels = grid_side * grid_side;
    if pixels > ctx.context.limits.max_raster_pixels as f64
        || (grid_side * pixel_nm - window_nm).abs() > 1e-6
    {
        return Err(ToolError::new(ErrorCode::QueryTooLarge, "window / pixel_nm must be a whole number of pixels within the raster limit")
                .with_details(json!({"pixels": pixels, "limit": ctx.context.limits.max_raster_pixels, "pixel_nm": pixel_nm})));
    }
    let (imaged, imaging_ms, info) = image_window(ctx, layout, model, pixel_nm, |step| {
        ctx.progress.report(
            step,
            total,
            if step == 2 {
                "kernels ready"
            } else {
                "imaging"
            },
        );
    })?;
    let run = ImagingRun {
        path: args.layout,
        imaging_ms,
        backend: info,
    };
    Ok((imaged, run))
}

/// Images one window of the model's period (`layout.window`) at the three ICCAD corners on
/// the worker's backend, `pixel_nm` pixels; `step(2)` once the kernels are ready and
/// `step(3)` when imaging starts. Returns the imaged window, the imaging time (ms) and the
/// backend.
pub(crate) fn image_window(
    ctx: &JobCtx<'_>,
    layout: LayoutWindow,
    model: ModelSpec,
    pixel_nm: f64,
    step: impl Fn(u64),
) -> Result<(ImagedWindow, f64, reticle_kernel::BackendInfo), ToolError> {
    let period = model.period_nm();
    let kernels = model
        .kernels()
        .map_err(|e| invalid(format!("model: {e}"), json!({})))?;
    step(2);
    let pixel_dbu = pixel_nm / layout.dbu_nm;
    let (mask, frame) = raster::rasterize(&layout.polygons, layout.window, pixel_dbu)
        .map_err(|e| invalid(e.to_string(), json!({})))?;
    let target = Grid {
        width: mask.width,
        height: mask.height,
        data: mask.data.iter().map(|&v| u8::from(v >= 0.5)).collect(),
    };
    let defocus = kernels
        .defocus
        .clone()
        .unwrap_or_else(|| Arc::clone(&kernels.focus));
    let corners = iccad_corners(&kernels.focus, &defocus);
    let resist = Resist::ICCAD2013;
    let job = LithoJob {
        mask: &mask,
        target: Some(&target),
        corners: &corners,
        resist,
        keep: KeepImages {
            aerial: true,
            resist: false,
            printed: true,
        },
    };
    let backend = ctx.state.backend.engine()?;
    step(3);
    let imaging_started = Instant::now();
    let report = |_p: reticle_kernel::Progress| {};
    let output = backend
        .litho(&job, ctx.cancel, &report)
        .map_err(|e| super::eval_error(e.into(), ctx.job_id))?;
    let imaging_ms = imaging_started.elapsed().as_secs_f64() * 1e3;
    let info = backend.info();
    let imaged = ImagedWindow {
        layout,
        frame,
        pixel_nm,
        model,
        period,
        focus_kernels: kernels.focus.scales.len(),
        resist,
        output,
        mask,
        target,
        corners,
    };
    Ok((imaged, imaging_ms, info))
}

/// `INVALID_INPUT` when `pixel_nm` is larger than the largest pixel the model allows
/// ([`ModelSpec::pixel_limit`]: Nyquist sampling of the intensity).
pub(crate) fn check_pixel(model: &ModelSpec, pixel_nm: f64) -> Result<(), ToolError> {
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

/// Min, max and mean of `data`.
fn min_max_mean(data: &[f32]) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    let (mut lo, mut hi, mut sum) = (f32::INFINITY, f32::NEG_INFINITY, 0.0f64);
    for &v in data {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += f64::from(v);
    }
    let r6 = |v: f64| (v * 1e6).round() / 1e6;
    json!({"min": r6(f64::from(lo)), "max": r6(f64::from(hi)), "mean": r6(sum / data.len() as f64)})
}

/// Summary statistics of the nominal corner's aerial, resist and printed images (always),
/// and, when the host gave the job an artifact directory (`images: true`, D48), the images
/// themselves: `.npy` for numbers, PNG to look at (row 0 of the clip at the bottom).
fn region_images(
    ctx: &JobCtx<'_>,
    output: &reticle_kernel::LithoOutput,
    target: &Grid<u8>,
    resist: Resist,
    pixel_nm: f64,
) -> Result<(Value, Value), ToolError> {
    let nominal = &output.corners[0];
    let Some(aerial) = nominal.aerial.as_ref() else {
        return Ok((Value::Null, Value::Null));
    };
    let response = Grid {
        width: aerial.width,
        height: aerial.height,
        data: aerial
            .data
            .iter()
            .map(|&i| 1.0 / (1.0 + (-resist.steepness * (i - resist.threshold)).exp()))
            .collect(),
    };
    // The backend's print where it kept one (the same rule, R > 0.5).
    let printed = nominal.printed.clone().unwrap_or_else(|| Grid {
        width: aerial.width,
        height: aerial.height,
        data: response.data.iter().map(|&r| u8::from(r > 0.5)).collect(),
    });
    let px_area = pixel_nm * pixel_nm;
    let target_px = target.data.iter().filter(|&&v| v != 0).count();
    let corners: Vec<Value> = output
        .corners
        .iter()
        .zip(CORNER_NAMES)
        .map(|(c, name)| json!({"corner": name, "printed_px": c.printed_pixels, "printed_area_nm2": c.printed_pixels as f64 * px_area}))
        .collect();
    let statistics = json!({
        "corner": "nominal",
        "aerial_intensity": min_max_mean(&aerial.data),
        "resist_response": min_max_mean(&response.data),
        "resist": {"steepness": resist.steepness, "threshold": resist.threshold},
        "printed_px": nominal.printed_pixels,
        "printed_area_nm2": nominal.printed_pixels as f64 * px_area,
        "target_px": target_px,
        "target_area_nm2": target_px as f64 * px_area,
        "pixel_area_nm2": px_area,
        "corners": corners,
    });
    if ctx.context.artifact_dir.is_none() {
        return Ok((statistics, Value::Null));
    }
    let dir = artifacts::dir(ctx)?;
    let images = image_files(&dir, aerial, &response, &printed, target)?;
    Ok((statistics, images))
}

/// The nominal corner's aerial image, resist response and print as `.npy` (numbers) and
/// PNG (to look at) in `dir` (row 0 of the grids is the bottom of the picture): what
/// `images: true` writes, for one window or a stitched region.
pub(crate) fn image_files(
    dir: &std::path::Path,
    aerial: &Grid<f32>,
    response: &Grid<f32>,
    printed: &Grid<u8>,
    target: &Grid<u8>,
) -> Result<Value, ToolError> {
    // Intensities map to grey with the open-frame scale clipped at the image's maximum;
    // the resist threshold is where the picture's contrast sits.
    let hi = aerial
        .data
        .iter()
        .copied()
        .fold(f32::MIN_POSITIVE, f32::max);
    let grey = |v: f32| -> [u8; 4] {
        let g = (v.clamp(0.0, 1.0) * 255.0).round() as u8;
        [g, g, g, 255]
    };
    let aerial_png = artifacts::png_rgba(
        aerial.width,
        aerial.height,
        &artifacts::rgba_of(aerial, |_, _, &v| grey(v / hi)),
    )?;
    let resist_png = artifacts::png_rgba(
        response.width,
        response.height,
        &artifacts::rgba_of(response, |_, _, &v| grey(v)),
    )?;
    let printed_png = artifacts::png_rgba(
        printed.width,
        printed.height,
        &artifacts::rgba_of(printed, |x, y, &v| match (v != 0, *target.at(x, y) != 0) {
            (true, true) => [235, 235, 235, 255],
            (true, false) => [60, 200, 90, 255],
            (false, true) => [220, 60, 60, 255],
            (false, false) => [16, 16, 24, 255],
        }),
    )?;
    let images = json!({
        "corner": "nominal",
        "orientation": "row 0 of the .npy and the bottom row of the PNG are the bottom of the window",
        "aerial": {
            "npy": artifacts::write(dir, "aerial_nominal.npy", &artifacts::npy_f32(aerial))?,
            "png": artifacts::write(dir, "aerial_nominal.png", &aerial_png)?,
            "png_scale": "grey = intensity / max intensity",
        },
        "resist": {
            "npy": artifacts::write(dir, "resist_nominal.npy", &artifacts::npy_f32(response))?,
            "png": artifacts::write(dir, "resist_nominal.png", &resist_png)?,
            "png_scale": "grey = resist response 0..1",
        },
        "printed": {
            "npy": artifacts::write(dir, "printed_nominal.npy", &artifacts::npy_u8(printed))?,
            "png": artifacts::write(dir, "printed_nominal.png", &printed_png)?,
            "png_scale": "white printed and drawn, green printed only, red drawn only",
        },
    });
    Ok(images)
}

impl Op for Simulate {
    fn name(&self) -> &'static str {
        "simulate"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let started = Instant::now();
        let args: Args = parse_args(self.name(), args_json)?;
        let (imaged, run) = image(ctx, args, 5)?;
        let ImagedWindow {
            layout,
            frame,
            pixel_nm,
            model,
            period,
            focus_kernels,
            resist,
            output,
            target,
            ..
        } = imaged;
        let ImagingRun {
            path,
            imaging_ms,
            backend: info,
        } = run;
        let grid = (target.width, target.height);
        ctx.progress.report(4, 5, "metrics");
        let nominal = &output.corners[0];
        let epe_report = match (&nominal.aerial, &nominal.printed) {
            (Some(aerial), Some(printed)) => {
                let scale = layout.dbu_nm;
                let cfg = iccad_epe_config(scale);
                let r = epe(
                    &layout.polygons,
                    printed,
                    aerial,
                    f64::from(resist.threshold),
                    &frame,
                    &cfg,
                );
                let max_abs = r
                    .epe_nm
                    .iter()
                    .flatten()
                    .map(|e| e.abs() * scale)
                    .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
                json!({"checkpoints": r.checkpoints, "violations": r.violations, "max_abs_nm": max_abs.map(|v| (v * 1000.0).round() / 1000.0)})
            }
            _ => Value::Null,
        };
        let to_nm = |v: i64| v as f64 * layout.dbu_nm;
        let (statistics, images) = region_images(ctx, &output, &target, resist, pixel_nm)?;
        ctx.progress.report(5, 5, "done");
        Ok(json!({
            "statistics": statistics,
            "images": images,
            "schema_version": reticle_protocol::SCHEMA_VERSION,
            "layout": {"path": path, "sha256": layout.sha256, "format": layout.format, "polygons_in_window": layout.polygons.len()},
            "window_nm": {"left": to_nm(layout.window.left), "bottom": to_nm(layout.window.bottom), "right": to_nm(layout.window.right), "top": to_nm(layout.window.top)},
            "pixel_nm": pixel_nm,
            "grid": {"width": grid.0, "height": grid.1},
            "model": {"kind": match model { ModelSpec::Hopkins(_) => "hopkins", ModelSpec::Kernels(_) => "kernels" }, "period_nm": period, "focus_kernels": focus_kernels},
            "backend": {"kind": info.kind, "adapter": info.adapter},
            "metrics": {"l2_px": output.l2, "pvb_px": output.pvb, "epe": epe_report},
            "timing_ms": {"imaging": (imaging_ms * 10.0).round() / 10.0, "total": (started.elapsed().as_secs_f64() * 1e4).round() / 10.0},
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::{check_pixel, square_around};
    use reticle_kernel::model::default_model;
    use reticle_protocol::error::ErrorCode;

    #[test]
    fn the_default_model_refuses_pixels_past_nyquist() {
        let model = default_model(2048.0);
        for ok in [1.0, 4.0, 16.0, 18.8] {
            assert!(check_pixel(&model, ok).is_ok(), "{ok}");
        }
        let e = check_pixel(&model, 32.0).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(
            e.message,
            "pixel_nm 32 is larger than the largest pixel this model allows, 18.8 nm \
             (λ/(4·NA·(1+σ_out)), Nyquist sampling of the intensity)"
        );
        let d = &e.details;
        assert_eq!(d["pixel_nm"], 32.0);
        assert_eq!(d["max_pixel_nm"], 18.810916);
        assert!(
            d["rule"]
                .as_str()
                .unwrap()
                .starts_with("λ/(4·NA·(1+σ_out))")
        );
    }

    #[test]
    fn a_window_around_a_half_dbu_centre_is_square() {
        for (cx, cy) in [(248.5, 95.0), (0.5, 0.5), (-3.5, 7.25), (100.0, 100.0)] {
            let w = square_around(cx, cy, 2048.0);
            assert_eq!(w.right - w.left, 2048, "{cx},{cy}: {w:?}");
            assert_eq!(w.top - w.bottom, 2048, "{cx},{cy}: {w:?}");
            assert!((w.left as f64 + 1024.0 - cx).abs() <= 0.5);
        }
    }
}
