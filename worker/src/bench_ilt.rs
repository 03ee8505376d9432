//! `reticle bench ilt`: whole-clip ILT on the ten ICCAD-2013 clips with the shipped deck
//! `iccad13_m1`, in each mask style, against published averages (OpenILT, curvyILT).
//!
//! Every mask is measured again, apart from the optimiser: its written polygons are
//! rasterised with exact area coverage and imaged at the three corners; the bench fails
//! when that disagrees with the L2/PVB the optimiser reported. (The test
//! `optimize_legal` re-measures through the naive full-size path as well.) Mask-rule records
//! come from the rules engine on the merged polygons (the check `evaluate` runs), and
//! Manhattan masks are checked for axis-parallel edges and the minimum segment.

use std::path::PathBuf;

use reticle_eval::optimize::MANHATTAN_GRID_NM;
use reticle_kernel::ilt::{IltParams, MaskPlan, optimize_legal, optimize_mask};
use reticle_kernel::metrics::{self, EpeConfig};
use reticle_kernel::mrc::{self, LegalizeRequest, MaskStyle};
use reticle_kernel::raster::rasterize_in;
use reticle_kernel::rules::{Region, Rule, check_rule};
use reticle_kernel::{
    CancelToken, Grid, ImagingBackend, KeepImages, LithoJob, ModelKernels, Resist, iccad,
};
use reticle_layout::Polygon;
use serde::Serialize;

/// Published averages over the ten clips: (name, L2, PVB).
const ILT_REFERENCES: &[(&str, f64, f64)] = &[
    ("OpenILT", 33_850.0, 44_713.0),
    ("curvyILT", 26_017.0, 38_611.0),
];

/// What `bench ilt` is asked to run.
#[derive(Debug, Clone)]
pub struct IltBench {
    /// ICCAD-2013 folder.
    pub iccad_dir: Option<PathBuf>,
    /// Clips (in order).
    pub clips: usize,
    /// Optimiser settings.
    pub params: IltParams,
    /// Styles: `None` is the unconstrained optimiser (no mask rules), the reference.
    pub styles: Vec<Option<MaskStyle>>,
    /// Whether assist features may be kept.
    pub assist_features: bool,
    /// CPU threads.
    pub threads: Option<usize>,
}

/// Everything `bench ilt` measured.
#[derive(Debug, Serialize)]
pub struct IltReport {
    threads: usize,
    iterations: u32,
    refine_iterations: u32,
    step_size: f64,
    downsample: u32,
    weight_pvb: f64,
    weight_band: f64,
    assist_features: bool,
    deck: String,
    clips: Vec<IltClip>,
    /// Averages per style.
    averages: Vec<IltAverages>,
    /// Averages of the unoptimised masks (mask = target), the in-process reference.
    target_average: IltAverages,
}

/// One clip in one style.
#[derive(Debug, Serialize)]
struct IltClip {
    clip: String,
    style: String,
    before: ClipMetrics,
    after: ClipMetrics,
    /// Mask-rule records of the written polygons (must be 0 for a style).
    mask_rule_records: usize,
    polygons: usize,
    vertices: usize,
    assist_polygons: usize,
    assist_area_nm2: f64,
    /// Optimiser iterations run (both stages).
    iterations: u32,
    /// Wall time of the optimisation, legalization and measurement (seconds).
    seconds: f64,
}

#[derive(Debug, Serialize, Clone, Copy)]
struct ClipMetrics {
    l2: u64,
    pvb: u64,
    epe: u64,
}

#[derive(Debug, Serialize)]
struct IltAverages {
    style: String,
    l2: f64,
    pvb: f64,
    epe: f64,
    seconds: f64,
    mask_rule_records: f64,
    polygons: f64,
    vertices: f64,
    assist_polygons: f64,
    /// `average / reference` per published reference (< 1: better than it).
    ratios: Vec<(String, f64, f64)>,
}

fn style_name(s: Option<MaskStyle>) -> &'static str {
    match s {
        None => "unconstrained",
        Some(MaskStyle::Curvilinear) => "curvilinear",
        Some(MaskStyle::Manhattan) => "manhattan",
    }
}

fn clip_metrics(
    mask: &Grid<f32>,
    clip: &iccad::Clip,
    corners: &[reticle_kernel::Corner],
) -> Result<ClipMetrics, String> {
    let job = LithoJob {
        mask,
        target: Some(&clip.target),
        corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages {
            printed: true,
            ..KeepImages::default()
        },
    };
    let out = reticle_kernel::CpuBackend::new()
        .litho(&job, &CancelToken::new(), &|_| {})
        .map_err(|e| e.to_string())?;
    let nominal = out
        .corners
        .first()
        .and_then(|c| c.printed.as_ref())
        .ok_or("no nominal print")?;
    let epe = metrics::epe_violations(&clip.polygons, nominal, &clip.frame, &EpeConfig::ICCAD2013);
    Ok(ClipMetrics {
        l2: out.l2.unwrap_or(0),
        pvb: out.pvb.unwrap_or(0),
        epe: epe as u64,
    })
}

/// Mask-rule records of `polygons` with every mask rule of `rules`.
fn mask_rule_records(polygons: &[Polygon], rules: &[Rule]) -> usize {
    let region = Region::from_polygons(polygons);
    rules
        .iter()
        .filter(|r| r.applies_to == reticle_kernel::rules::AppliesTo::Mask)
        .map(|r| check_rule(r, &region, None, 1.0).map_or(0, |v| v.len()))
        .sum()
}

/// The Manhattan contract: every edge axis-parallel and at least `min_segment` long.
fn manhattan_ok(polygons: &[Polygon], min_segment: i64) -> Result<(), String> {
    for p in polygons {
        let n = p.points.len();
        for i in 0..n {
            let (a, b) = (p.points[i], p.points[(i + 1) % n]);
            if a.x != b.x && a.y != b.y {
                return Err(format!("edge {a:?}–{b:?} is not axis-parallel"));
            }
            let len = (a.x - b.x).abs() + (a.y - b.y).abs();
            // A cut line to a hole may be shorter: it has zero width.
            if len > 0 && len < min_segment {
                let back = p.points.iter().filter(|q| **q == a || **q == b).count() > 2;
                if !back {
                    return Err(format!("edge {a:?}–{b:?} is {len} nm, under {min_segment}"));
                }
            }
        }
    }
    Ok(())
}

/// Runs the bench.
///
/// # Errors
/// A message when the data is missing or a re-measurement disagrees.
pub fn run(bench: &IltBench) -> Result<IltReport, String> {
    let dir = bench.iccad_dir.clone().ok_or(
        "the ICCAD-2013 data was not found: pass --iccad-dir or set RETICLE_DATA_DIR \
             to the folder that holds iccad13/",
    )?;
    let (focus, defocus, corners) = iccad::corners(&dir).map_err(|e| e.to_string())?;
    let model = ModelKernels {
        focus,
        defocus: Some(defocus),
    };
    let (deck, _) = reticle_eval::deck::load("iccad13_m1", |_| {
        unreachable!("a shipped deck name is never read from a file")
    })
    .map_err(|e| e.to_string())?;
    let rules: Vec<Rule> = deck.rules.clone();
    let backend = match bench.threads {
        Some(t) => reticle_kernel::CpuBackend::with_threads(t).map_err(|e| e.to_string())?,
        None => reticle_kernel::CpuBackend::new(),
    };
    let params = &bench.params;
    let mut rows = Vec::new();
    let mut before_rows = Vec::new();
    for path in iccad::clip_paths(&dir).iter().take(bench.clips) {
        let clip = iccad::load_clip(path).map_err(|e| e.to_string())?;
        let before = backend.install(|| clip_metrics(&clip.mask, &clip, &corners))?;
        before_rows.push(before);
        for &style in &bench.styles {
            eprintln!("bench ilt: {} {}…", clip.name, style_name(style));
            let start = std::time::Instant::now();
            let cancel = CancelToken::new();
            let (reported, polygons, assists, iterations) =
                backend.install(|| -> Result<_, String> {
                    match style {
                        None => {
                            let o =
                                optimize_mask(&clip.target, &model, params, &cancel, &mut |_| {})
                                    .map_err(|e| e.to_string())?;
                            let polys = pixel_polygons(&o.mask, &clip.frame);
                            Ok((o.after, polys, (0, 0.0), o.iterations_run))
                        }
                        Some(style) => {
                            let plan = MaskPlan {
                                rules: &rules,
                                style,
                                grid_px: MANHATTAN_GRID_NM as usize,
                                assist_features: bench.assist_features,
                                context: &[],
                                origin_dbu: (clip.frame.left_nm, clip.frame.bottom_nm),
                                pixel_dbu: clip.frame.pixel_nm,
                                dbu_nm: 1.0,
                                frozen: None,
                                blend: None,
                                epe_revert: None,
                            };
                            let o = optimize_legal(
                                &clip.target,
                                None,
                                &model,
                                params,
                                &plan,
                                &cancel,
                                &mut |_| {},
                            )
                            .map_err(|e| e.to_string())?;
                            Ok((
                                o.ilt.after,
                                o.legal.polygons,
                                (o.assists.polygons, o.assists.area_px as f64),
                                o.ilt.iterations_run,
                            ))
                        }
                    }
                })?;
            let seconds = start.elapsed().as_secs_f64();
            // Independent re-measurement of the written polygons.
            let coverage = rasterize_in(&polygons, &clip.frame);
            let after = backend.install(|| clip_metrics(&coverage, &clip, &corners))?;
            if (after.l2, after.pvb) != (reported.l2, reported.pvb) {
                return Err(format!(
                    "{} {}: the optimiser reported L2 {} PVB {}, the re-simulation of its polygons {} and {}",
                    clip.name,
                    style_name(style),
                    reported.l2,
                    reported.pvb,
                    after.l2,
                    after.pvb
                ));
            }
            if style == Some(MaskStyle::Manhattan)
                && let Err(e) = manhattan_ok(&polygons, MANHATTAN_GRID_NM as i64)
            {
                eprintln!("bench ilt: {} manhattan: {e}", clip.name);
            }
            rows.push(IltClip {
                clip: clip.name.clone(),
                style: style_name(style).into(),
                before,
                after,
                mask_rule_records: mask_rule_records(&polygons, &rules),
                polygons: polygons.len(),
                vertices: polygons.iter().map(|p| p.points.len()).sum(),
                assist_polygons: assists.0,
                assist_area_nm2: assists.1,
                iterations,
                seconds,
            });
        }
    }
    let averages = bench
        .styles
        .iter()
        .map(|&s| {
            averages(
                style_name(s),
                rows.iter().filter(|r| r.style == style_name(s)),
            )
        })
        .collect();
    let k = before_rows.len().max(1) as f64;
    let target_average = IltAverages {
        style: "target".into(),
        l2: before_rows.iter().map(|c| c.l2 as f64).sum::<f64>() / k,
        pvb: before_rows.iter().map(|c| c.pvb as f64).sum::<f64>() / k,
        epe: before_rows.iter().map(|c| c.epe as f64).sum::<f64>() / k,
        seconds: 0.0,
        mask_rule_records: 0.0,
        polygons: 0.0,
        vertices: 0.0,
        assist_polygons: 0.0,
        ratios: Vec::new(),
    };
    Ok(IltReport {
        threads: backend.threads(),
        iterations: params.iterations,
        refine_iterations: params.refine_iterations,
        step_size: params.step_size,
        downsample: params.downsample,
        weight_pvb: params.weight_pvb,
        weight_band: params.weight_band,
        assist_features: bench.assist_features,
        deck: "iccad13_m1".into(),
        clips: rows,
        averages,
        target_average,
    })
}

/// The set pixels of an unconstrained mask as traced polygons on the clip's frame.
fn pixel_polygons(mask: &Grid<u8>, frame: &reticle_kernel::raster::PixelFrame) -> Vec<Polygon> {
    let req = LegalizeRequest {
        proposal: mask,
        target: mask,
        outside: None,
        window: (0, 0, mask.width, mask.height),
        context: &[],
        origin_dbu: (frame.left_nm, frame.bottom_nm),
        pixel_dbu: frame.pixel_nm,
        dbu_nm: 1.0,
        rules: &[],
        style: MaskStyle::Manhattan,
        grid_px: 1,
    };
    mrc::rebuild(&req, mask.clone(), 0).polygons
}

fn averages<'a>(style: &str, rows: impl Iterator<Item = &'a IltClip>) -> IltAverages {
    let rows: Vec<&IltClip> = rows.collect();
    let k = rows.len().max(1) as f64;
    let avg = |f: &dyn Fn(&IltClip) -> f64| rows.iter().map(|r| f(r)).sum::<f64>() / k;
    let (l2, pvb) = (avg(&|r| r.after.l2 as f64), avg(&|r| r.after.pvb as f64));
    IltAverages {
        style: style.into(),
        l2,
        pvb,
        epe: avg(&|r| r.after.epe as f64),
        seconds: avg(&|r| r.seconds),
        mask_rule_records: avg(&|r| r.mask_rule_records as f64),
        polygons: avg(&|r| r.polygons as f64),
        vertices: avg(&|r| r.vertices as f64),
        assist_polygons: avg(&|r| r.assist_polygons as f64),
        ratios: ILT_REFERENCES
            .iter()
            .map(|&(name, rl2, rpvb)| (name.to_owned(), l2 / rl2, pvb / rpvb))
            .collect(),
    }
}

/// The report as a table (or JSON).
#[must_use]
pub fn render(report: &IltReport, json: bool) -> String {
    crate::bench::report_text(report, json, table)
}

/// The table of `bench ilt`.
fn table(report: &IltReport) -> String {
    let mut text = format!(
        "ilt: {} clip runs, {}+{} iterations, step {}, downsample {}, PVB weight {}, band weight {}, deck {}, assist features {}, {} threads\n\
         clip       style            L2 target →  ILT   PVB target →  ILT  EPE   MRC  polygons vertices assists  runtime",
        report.clips.len(),
        report.iterations,
        report.refine_iterations,
        report.step_size,
        report.downsample,
        report.weight_pvb,
        report.weight_band,
        report.deck,
        report.assist_features,
        report.threads,
    );
    for c in &report.clips {
        text.push_str(&format!(
            "\n{:<10} {:<13} {:>9} → {:>6}  {:>10} → {:>6} {:>4} {:>5} {:>9} {:>8} {:>7} {:>6.2} s",
            c.clip,
            c.style,
            c.before.l2,
            c.after.l2,
            c.before.pvb,
            c.after.pvb,
            c.after.epe,
            c.mask_rule_records,
            c.polygons,
            c.vertices,
            c.assist_polygons,
            c.seconds,
        ));
    }
    let t = &report.target_average;
    for a in &report.averages {
        text.push_str(&format!(
            "\naverage    {:<13} {:>9.0} → {:>6.0}  {:>10.0} → {:>6.0} {:>4.1} {:>5.1} {:>9.1} {:>8.0} {:>7.1} {:>6.2} s",
            a.style,
            t.l2,
            a.l2,
            t.pvb,
            a.pvb,
            a.epe,
            a.mask_rule_records,
            a.polygons,
            a.vertices,
            a.assist_polygons,
            a.seconds,
        ));
        for (name, l2, pvb) in &a.ratios {
            text.push_str(&format!(
                "\n  {} vs {name}: L2 {l2:.3}×, PVB {pvb:.3}× (< 1: better)",
                a.style
            ));
        }
    }
    text
}
