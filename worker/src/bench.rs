//! `reticle-worker bench ...`: engine benchmarks, run in a worker process so they see
//! the same engine build as real jobs. The host's `reticle bench` execs this.
//!
//! `bench litho` times one 2048×2048, 3-corner ICCAD-2013 simulation on the CPU
//! band-limited path and, in the same process, the naive full-size path, and prints
//! the ratio; `--gpu` also times the wgpu path on the same job. `bench tiling` measures
//! how far tiled imaging is from untiled imaging as the halo grows, then the halo rule of
//! whole-layout tiling with the default model. `bench ilt` runs
//! whole-clip pixel ILT on the ICCAD-2013 clips and compares the averages with published
//! figures. The report goes to
//! stdout (this is a command-line mode; in worker mode stdout is never written).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use reticle_kernel::bench::{
    HaloBenchReport, HaloPoint, LithoBenchReport, TilingBenchReport, halo_bench, litho_bench,
    tiling_bench,
};
use reticle_kernel::gpu::{AdapterPolicy, GpuBackend, GpuBenchReport, gpu_bench};
use reticle_kernel::ilt::IltParams;
use reticle_kernel::mrc::MaskStyle;
use reticle_kernel::{ImagingBackend, iccad};
use serde::Serialize;

/// Engine benchmarks.
#[derive(Debug, Parser)]
#[command(
    name = "reticle bench",
    about = "Engine benchmarks (ratios against a reference run in the same process)"
)]
struct BenchCli {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// One ICCAD-2013 clip, 3 corners, 2048×2048 at 1 nm: band-limited CPU path against
    /// the naive full-size path (and the GPU path with `--gpu`).
    Litho {
        /// ICCAD-2013 folder (`kernels/`, `layouts/`); default `$RETICLE_DATA_DIR/iccad13`.
        #[arg(long)]
        iccad_dir: Option<PathBuf>,
        /// The clip (`.glp`); default the first (`M1_test1`).
        #[arg(long)]
        clip: Option<PathBuf>,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Timed runs of the fast path (the best is reported).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
        repeats: u32,
        /// Also time the wgpu path on any adapter (lavapipe included); the same as
        /// `--backend gpu`.
        #[arg(long)]
        gpu: bool,
        /// `cpu` (default) times the CPU paths only; `gpu` also times the wgpu path, its
        /// throughput on a batch of clips, and its ratio to the CPU path.
        #[arg(long, value_parser = ["cpu", "gpu"], default_value = "cpu")]
        backend: String,
        /// Clips in the GPU throughput batch (the ICCAD-2013 clips, in order).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10))]
        batch: u32,
        /// Print the report as JSON instead of a summary line.
        #[arg(long)]
        json: bool,
    },
    /// Whole-clip pixel ILT on the ICCAD-2013 clips: per clip L2, PVB, EPE violations and
    /// runtime of the optimised mask, the unoptimised target as a reference, the averages
    /// and their ratios to published figures (OpenILT, curvyILT).
    Ilt {
        /// ICCAD-2013 folder (`kernels/`, `layouts/`); default `$RETICLE_DATA_DIR/iccad13`.
        #[arg(long)]
        iccad_dir: Option<PathBuf>,
        /// Clips to run (`M1_test1` … in order).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10))]
        clips: u32,
        /// Optimiser iterations per clip (default: the engine's default).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        iterations: Option<u32>,
        /// Refinement iterations on blocks half as wide (default: the engine's default).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=10_000))]
        refine_iterations: Option<u32>,
        /// Adam step size (default: the engine's default).
        #[arg(long)]
        step_size: Option<f64>,
        /// Optimisation-grid downsampling (default: the engine's default).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
        downsample: Option<u32>,
        /// Weight of the PV-band term (default: the engine's default).
        #[arg(long)]
        pvb_weight: Option<f64>,
        /// Weight of the direct band term (default: the engine's default).
        #[arg(long)]
        band_weight: Option<f64>,
        /// Final mask steepness of the ramp (default: the engine's default).
        #[arg(long)]
        steepness_final: Option<f64>,
        /// Mask styles: `both` (curvilinear and manhattan, legal by the deck's mask
        /// rules), one of them, `unconstrained` (no mask rules: the optimiser alone), or
        /// `all`.
        #[arg(long, value_parser = ["both", "curvilinear", "manhattan", "unconstrained", "all"], default_value = "both")]
        style: String,
        /// Remove every assist feature (optimize's `assist_features: false`).
        #[arg(long)]
        no_assist_features: bool,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Tiled against untiled imaging with a hard-edged pupil: the error in the tile
    /// cores for halos of 0.5–3 µm, and how much two untiled references disagree. Then
    /// the whole-layout design with the default model (window = period 2048 nm, cores on
    /// a global grid): error and printed-pixel flips against the halo, on a dense canvas
    /// and on a pattern that fits one window, and the halo rule's figures.
    Tiling {
        /// Canvas side in 16 nm pixels.
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(16..=256))]
        canvas: u32,
        /// Side of the dense canvas of the halo measurement (nm).
        #[arg(long, default_value_t = 6000, value_parser = clap::value_parser!(u32).range(2048..=20000))]
        halo_canvas_nm: u32,
        /// Pixel of the halo measurement (nm): 1, 2, 4, 8 or 16.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=16))]
        halo_pixel_nm: u32,
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Everything `bench litho` measured.
#[derive(Debug, Serialize)]
struct LithoReport {
    cpu: LithoBenchReport,
    gpu: Option<GpuFigures>,
}

/// The GPU path on the same job, with its ratio to the CPU path's best run.
#[derive(Debug, Serialize)]
struct GpuFigures {
    report: GpuBenchReport,
    /// Throughput on a batch of different clips, one after another.
    batch: BatchFigures,
    /// GPU median time / CPU best time (< 1: the GPU is faster).
    gpu_over_cpu: f64,
    l2_pvb: [u64; 2],
}

/// The GPU path on several clips in a row: what a queue of jobs sees.
#[derive(Debug, Serialize)]
struct BatchFigures {
    clips: usize,
    /// One `litho` call per clip, back to back.
    seconds: f64,
    clips_per_s: f64,
    /// L2 per clip, in order (so a wrong clip shows).
    l2: Vec<u64>,
    /// Windows `litho_batch` takes in one submission at the clips' size (D257).
    batch_windows: usize,
    /// The same clips through one `litho_batch` call.
    batched_seconds: f64,
    batched_clips_per_s: f64,
    /// Batched throughput over back-to-back throughput (> 1: batching gains).
    batched_over_serial: f64,
}

/// Entry point of the `bench` subcommand; `args` are the arguments after `bench`.
pub fn main(args: &[String], settings: &crate::settings::Settings) -> ExitCode {
    let iccad13 = || reticle_kernel::data::iccad13_dir(settings.data_dir.as_deref());
    let cli = match BenchCli::try_parse_from(
        std::iter::once("reticle bench".to_owned()).chain(args.iter().cloned()),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to stderr with 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        BenchCommand::Litho {
            iccad_dir,
            clip,
            threads,
            repeats,
            gpu,
            backend,
            batch,
            json,
        } => finish(
            "litho",
            litho(
                iccad_dir.or_else(iccad13),
                clip,
                threads,
                repeats as usize,
                (gpu || backend == "gpu").then_some(batch as usize),
            ),
            |report| print_report(&report, json),
        ),
        BenchCommand::Ilt {
            iccad_dir,
            clips,
            iterations,
            refine_iterations,
            step_size,
            downsample,
            pvb_weight,
            band_weight,
            steepness_final,
            style,
            no_assist_features,
            threads,
            json,
        } => {
            let defaults = IltParams::default();
            let params = IltParams {
                iterations: iterations.unwrap_or(defaults.iterations),
                refine_iterations: refine_iterations.unwrap_or(defaults.refine_iterations),
                step_size: step_size.unwrap_or(defaults.step_size),
                downsample: downsample.unwrap_or(defaults.downsample),
                weight_pvb: pvb_weight.unwrap_or(defaults.weight_pvb),
                weight_band: band_weight.unwrap_or(defaults.weight_band),
                mask_steepness_final: steepness_final.unwrap_or(defaults.mask_steepness_final),
                ..defaults
            };
            let (c, m) = (Some(MaskStyle::Curvilinear), Some(MaskStyle::Manhattan));
            let styles = match style.as_str() {
                "curvilinear" => vec![c],
                "manhattan" => vec![m],
                "unconstrained" => vec![None],
                "all" => vec![None, c, m],
                _ => vec![c, m],
            };
            let bench = crate::bench_ilt::IltBench {
                iccad_dir: iccad_dir.or_else(iccad13),
                clips: clips as usize,
                params,
                styles,
                assist_features: !no_assist_features,
                threads,
            };
            finish("ilt", crate::bench_ilt::run(&bench), |report| {
                write_stdout(&crate::bench_ilt::render(&report, json))
            })
        }
        BenchCommand::Tiling {
            canvas,
            halo_canvas_nm,
            halo_pixel_nm,
            json,
        } => {
            let report = tiling_bench(canvas as usize).and_then(|window_sweep| {
                let halo = halo_bench(f64::from(halo_canvas_nm), f64::from(halo_pixel_nm))?;
                Ok(TilingReport { window_sweep, halo })
            });
            finish("tiling", report, |report| print_tiling(&report, json))
        }
    }
}

fn litho(
    iccad_dir: Option<PathBuf>,
    clip: Option<PathBuf>,
    threads: Option<usize>,
    repeats: usize,
    gpu_batch: Option<usize>,
) -> Result<LithoReport, String> {
    let dir = iccad_dir.ok_or(
        "the ICCAD-2013 data was not found: pass --iccad-dir or set RETICLE_DATA_DIR \
         to the folder that holds iccad13/",
    )?;
    eprintln!(
        "bench litho: CPU band-limited ×{repeats} and naive ×1 (the naive run takes a while)…"
    );
    let cpu = litho_bench(&dir, clip.as_deref(), threads, repeats).map_err(|e| e.to_string())?;
    let gpu = match gpu_batch {
        Some(batch) => Some(gpu_figures(&dir, clip, batch, &cpu)?),
        None => None,
    };
    Ok(LithoReport { cpu, gpu })
}

fn gpu_figures(
    dir: &std::path::Path,
    clip: Option<PathBuf>,
    batch: usize,
    cpu: &LithoBenchReport,
) -> Result<GpuFigures, String> {
    eprintln!("bench litho: GPU path…");
    let backend =
        GpuBackend::with_policy(AdapterPolicy::Any).map_err(|e| format!("no GPU adapter: {e}"))?;
    let (_, _, corners) = iccad::corners(dir).map_err(|e| e.to_string())?;
    let clip_path = clip.unwrap_or_else(|| iccad::clip_paths(dir).swap_remove(0));
    let clip = iccad::load_clip(&clip_path).map_err(|e| e.to_string())?;
    let job = clip.job(&corners);
    let report = gpu_bench(&backend, &job, 1, 5).map_err(|e| e.to_string())?;
    let out = backend
        .litho(&job, &reticle_kernel::CancelToken::new(), &|_| {})
        .map_err(|e| e.to_string())?;
    let batch = gpu_batch_throughput(&backend, dir, &corners, batch)?;
    Ok(GpuFigures {
        batch,
        gpu_over_cpu: report.ms_per_sim_median / (cpu.fast_s * 1e3),
        l2_pvb: [out.l2.unwrap_or(0), out.pvb.unwrap_or(0)],
        report,
    })
}

/// Loads `batch` clips, then times their 3-corner simulations back to back on `backend`
/// (pipelines and kernels are already on the device from the single-clip runs).
fn gpu_batch_throughput(
    backend: &GpuBackend,
    dir: &std::path::Path,
    corners: &[reticle_kernel::Corner],
    batch: usize,
) -> Result<BatchFigures, String> {
    let clips = iccad::clip_paths(dir)
        .iter()
        .take(batch)
        .map(|p| iccad::load_clip(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let cancel = reticle_kernel::CancelToken::new();
    let t = std::time::Instant::now();
    let mut l2 = Vec::with_capacity(clips.len());
    for clip in &clips {
        let out = backend
            .litho(&clip.job(corners), &cancel, &|_| {})
            .map_err(|e| e.to_string())?;
        l2.push(out.l2.unwrap_or(0));
    }
    let seconds = t.elapsed().as_secs_f64();
    let side = clips
        .first()
        .map_or(0, |c| c.frame.width.max(c.frame.height));
    let jobs = clips
        .iter()
        .map(|clip| reticle_kernel::BatchJob {
            job: clip.job(corners),
            part: None,
            reuse: reticle_kernel::LithoOutput::default(),
        })
        .collect();
    let t = std::time::Instant::now();
    let batched = backend
        .litho_batch(jobs, &cancel, &|_| {})
        .map_err(|e| e.to_string())?;
    let batched_seconds = t.elapsed().as_secs_f64();
    let batched_l2: Vec<u64> = batched.iter().map(|o| o.l2.unwrap_or(0)).collect();
    if batched_l2 != l2 {
        return Err(format!(
            "the batched clips' L2 {batched_l2:?} differ from one by one {l2:?}"
        ));
    }
    Ok(BatchFigures {
        clips: clips.len(),
        seconds,
        clips_per_s: clips.len() as f64 / seconds,
        l2,
        batch_windows: backend.batch_windows(side),
        batched_seconds,
        batched_clips_per_s: clips.len() as f64 / batched_seconds,
        batched_over_serial: seconds / batched_seconds,
    })
}

/// Everything `bench tiling` measured: the window sweep's fields at the top level (as
/// before), the halo measurement under `halo`.
#[derive(Debug, Serialize)]
struct TilingReport {
    #[serde(flatten)]
    window_sweep: TilingBenchReport,
    halo: HaloBenchReport,
}

fn print_tiling(report: &TilingReport, json: bool) -> ExitCode {
    let text = report_text(report, json, |report| {
        let h = &report.halo;
        let report = &report.window_sweep;
        let mut text = format!(
            "tiling {}×{} px of {} nm; untiled references with borders of {} and {} px differ by {:.2e} of the open frame",
            report.canvas,
            report.canvas,
            report.pixel_nm,
            report.reference_pads[0],
            report.reference_pads[1],
            report.reference_spread,
        );
        for p in &report.points {
            text.push_str(&format!(
                "\nwindow {:4} px, halo {:3} px ({:.2} µm): max error {:.2e} of the open frame ({:.2} s)",
                p.window,
                p.halo,
                p.halo_nm / 1e3,
                p.max_error,
                p.seconds,
            ));
        }
        text.push_str(&format!(
            "\nhalo rule, {}: window = period {} nm, {} nm pixels, {} kernels; errors of the open frame ({:.4}), flips at the ICCAD resist threshold\n\
             dense {:.0} nm canvas ({} px printed, {} edge px, median edge slope {:.4}/nm) against the same tiling with a {:.0} nm halo \
             (no untiled reference: {})",
            h.model,
            h.period_nm,
            h.pixel_nm,
            h.kernels,
            h.open_frame,
            h.dense_canvas_nm,
            h.dense_printed,
            h.dense_edge_pixels,
            h.dense_edge_slope,
            h.dense_reference_halo_nm,
            h.untiled_reference,
        ));
        let line = |p: &HaloPoint, tag: &str| {
            format!(
                "\n  halo {:4.0} nm, core {:4.0} nm, {:4} tiles: max error {:.2e}, rms {:.2e}, {:5} px flip ({:.2} s){tag}",
                p.halo_nm, p.core_nm, p.tiles, p.max_error, p.rms_error, p.flips, p.seconds
            )
        };
        for p in &h.dense {
            text.push_str(&line(p, ""));
        }
        text.push_str(&line(&h.dense_at_rule, "  <- rule"));
        text.push_str(&format!(
            "\none window, a {:.0} nm pattern at its centre ({} px printed), against the untiled (periodic) window",
            h.single_pattern_nm, h.single_printed
        ));
        for p in &h.single {
            text.push_str(&line(p, ""));
        }
        text.push_str(&line(&h.single_at_rule, "  <- rule"));
        text.push_str(&format!(
            "\nrule: halo {:.0} nm, core {:.0} nm (tiling::tile_halo_nm / tile_core_nm)",
            h.rule_halo_nm, h.rule_core_nm
        ));
        text
    });
    write_stdout(&text)
}

/// A bench's report: pretty JSON with `json`, else the table `table` writes.
pub(crate) fn report_text<T: Serialize>(
    report: &T,
    json: bool,
    table: impl FnOnce(&T) -> String,
) -> String {
    if json {
        serde_json::to_string_pretty(report).unwrap_or_default()
    } else {
        table(report)
    }
}

/// A bench's exit: its report printed, or its error on stderr (exit 2).
fn finish<T, E: std::fmt::Display>(
    bench: &str,
    result: Result<T, E>,
    print: impl FnOnce(T) -> ExitCode,
) -> ExitCode {
    match result {
        Ok(report) => print(report),
        Err(e) => {
            eprintln!("reticle bench {bench}: {e}");
            ExitCode::from(2)
        }
    }
}

fn write_stdout(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{text}").is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn print_report(report: &LithoReport, json: bool) -> ExitCode {
    let text = report_text(report, json, |report| {
        let c = &report.cpu;
        let mut text = format!(
            "litho {} {}×{} px, {} corners, {}+{} kernels, {} threads: band-limited {:.3} s (best of {}), naive {:.2} s → {:.1}× faster; L2 {} (naive {}), PVB {} (naive {})",
            c.clip,
            c.grid,
            c.grid,
            c.corners,
            c.kernels[0],
            c.kernels[1],
            c.threads,
            c.fast_s,
            c.fast_runs_s.len(),
            c.naive_s,
            c.speedup,
            c.fast_l2_pvb[0],
            c.naive_l2_pvb[0],
            c.fast_l2_pvb[1],
            c.naive_l2_pvb[1],
        );
        if let Some(g) = &report.gpu {
            text.push_str(&format!(
                "\nlitho GPU ({}): {:.2} ms median, {:.2} ms min (first call {:.0} ms) → {:.3}× the CPU time; L2 {}, PVB {}; batch of {} clips in {:.2} s = {:.2} clips/s one by one, {:.2} s = {:.2} clips/s in batches of {} ({:.2}× one by one)",
                g.report.adapter,
                g.report.ms_per_sim_median,
                g.report.ms_per_sim_min,
                g.report.first_call_ms,
                g.gpu_over_cpu,
                g.l2_pvb[0],
                g.l2_pvb[1],
                g.batch.clips,
                g.batch.seconds,
                g.batch.clips_per_s,
                g.batch.batched_seconds,
                g.batch.batched_clips_per_s,
                g.batch.batch_windows,
                g.batch.batched_over_serial,
            ));
        }
        text
    });
    write_stdout(&text)
}
