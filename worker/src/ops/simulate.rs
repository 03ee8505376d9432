//! `simulate`: one square window of a layout imaged at the ICCAD-2013 corners
//! (nominal focus @1.00, max focus @1.02, min defocus @0.98), with L2 against
//! the drawn pattern, the PV band, and ICCAD EPE.
//!
//! The adapter: parse the arguments, image the window ([`crate::imaging::image`], over
//! [`reticle_eval::imaging`]), measure, and write the images when asked.

use std::path::PathBuf;
use std::time::Instant;

use reticle_eval::ImagedWindow;
use reticle_eval::gauges::iccad_epe_config;
use reticle_eval::payload::{
    BackendSummary, CornerPrint, GridSize, ImageFiles, MinMaxMean, ModelSummary, ResistSummary,
    SimulatedEpe, SimulatedLayout, SimulationMetrics, SimulationResult, SimulationTiming,
    Statistics, WindowEpe, WindowNm,
};
use reticle_eval::report::model_kind;
use reticle_kernel::metrics::epe;
use reticle_kernel::model::ModelSpec;
use reticle_kernel::resist::CORNER_NAMES;
use reticle_kernel::{Grid, Resist};
use reticle_protocol::args::SimulateArgs;
use reticle_protocol::error::ToolError;

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::imaging::{ImagingRun, Window, image};
use crate::op::{Op, OpResult, parse_args, payload};

/// The `simulate` op.
pub struct Simulate;

/// Min, max and mean of `data`.
fn min_max_mean(data: &[f32]) -> Option<MinMaxMean> {
    if data.is_empty() {
        return None;
    }
    let (mut lo, mut hi, mut sum) = (f32::INFINITY, f32::NEG_INFINITY, 0.0f64);
    for &v in data {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += f64::from(v);
    }
    let r6 = |v: f64| (v * 1e6).round() / 1e6;
    Some(MinMaxMean {
        min: r6(f64::from(lo)),
        max: r6(f64::from(hi)),
        mean: r6(sum / data.len() as f64),
    })
}

/// Summary statistics of the nominal corner's aerial, resist and printed images (always),
/// and, when the host gave the job an artifact directory (`images: true`, D48), the images
/// themselves: `.npy` for numbers, PNG to look at (row 0 of the clip at the bottom).
fn region_images(
    ctx: &AttemptCtx<'_>,
    output: &reticle_kernel::LithoOutput,
    target: &Grid<u8>,
    resist: Resist,
    pixel_nm: f64,
) -> Result<(Option<Statistics>, Option<ImageFiles>), ToolError> {
    let nominal = &output.corners[0];
    let Some(aerial) = nominal.aerial.as_ref() else {
        return Ok((None, None));
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
    let target_px = target.data.iter().filter(|&&v| v != 0).count() as u64;
    let corners = output
        .corners
        .iter()
        .zip(CORNER_NAMES)
        .map(|(c, name)| CornerPrint {
            corner: name.to_owned(),
            printed_px: c.printed_pixels,
            printed_area_nm2: c.printed_pixels as f64 * px_area,
        })
        .collect();
    let statistics = Statistics {
        corner: "nominal".to_owned(),
        aerial_intensity: min_max_mean(&aerial.data),
        resist_response: min_max_mean(&response.data),
        resist: ResistSummary {
            steepness: f64::from(resist.steepness),
            threshold: f64::from(resist.threshold),
        },
        printed_px: nominal.printed_pixels,
        printed_area_nm2: nominal.printed_pixels as f64 * px_area,
        target_px,
        target_area_nm2: target_px as f64 * px_area,
        pixel_area_nm2: px_area,
        corners,
    };
    if ctx.context.artifact_dir.is_none() {
        return Ok((Some(statistics), None));
    }
    let dir = artifacts::dir(ctx)?;
    let images = artifacts::image_files(&dir, aerial, &response, &printed, target)?;
    Ok((Some(statistics), Some(images)))
}

impl Op for Simulate {
    fn name(&self) -> &'static str {
        "simulate"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let started = Instant::now();
        let args: SimulateArgs<ModelSpec> = parse_args(self.name(), args_json)?;
        let window = Window {
            layout: PathBuf::from(args.layout),
            layer: args.layer,
            cell: args.cell,
            box_um: args.box_um,
            pixel_nm: args.pixel_nm,
            model: args.model,
            context_layers: Vec::new(),
            mask_layer: args.mask_layer,
        };
        let (imaged, run) = image(ctx, window, 5)?;
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
                Some(SimulatedEpe::Window(WindowEpe {
                    checkpoints: r.checkpoints,
                    violations: r.violations,
                    max_abs_nm: max_abs.map(|v| (v * 1000.0).round() / 1000.0),
                }))
            }
            _ => None,
        };
        let to_nm = |v: i64| v as f64 * layout.dbu_nm;
        let (statistics, images) = region_images(ctx, &output, &target, resist, pixel_nm)?;
        ctx.progress.report(5, 5, "done");
        let result = SimulationResult {
            statistics,
            images,
            schema_version: reticle_protocol::SCHEMA_VERSION.to_owned(),
            layout: SimulatedLayout {
                path: path.display().to_string(),
                sha256: layout.sha256,
                format: layout.format.to_owned(),
                polygons_in_window: layout.polygons.len() as u64,
            },
            window_nm: WindowNm {
                left: to_nm(layout.window.left),
                bottom: to_nm(layout.window.bottom),
                right: to_nm(layout.window.right),
                top: to_nm(layout.window.top),
            },
            pixel_nm,
            grid: GridSize {
                width: grid.0,
                height: grid.1,
            },
            model: ModelSummary {
                kind: model_kind(&model).to_owned(),
                period_nm: period,
                focus_kernels,
            },
            backend: BackendSummary {
                kind: info.kind,
                adapter: info.adapter,
            },
            metrics: SimulationMetrics {
                l2_px: output.l2,
                pvb_px: output.pvb,
                epe: epe_report,
            },
            timing_ms: SimulationTiming {
                imaging: Some((imaging_ms * 10.0).round() / 10.0),
                total: Some((started.elapsed().as_secs_f64() * 1e4).round() / 10.0),
                merge: None,
            },
            region: None,
            imaging: None,
        };
        payload(result)
    }
}
