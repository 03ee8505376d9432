//! `reticle bench repair`: a region repaired in tiles, end to end (issue 28 item 8;
//! docs/DECISIONS.md D213).
//!
//! The bench runs the tool's own work ([`reticle_tools::optimize_run::run_in`], what the
//! `optimize` tool's job and `reticle optimize` run): the tiles in four waves, the layout
//! written back, the region plus one halo evaluated before and after, the groups compared.
//! On a box of a real layout (default: the 10 µm × 10 µm box `[5, 5, 15, 15]` of
//! `gds/gcd_45nm.gds` under `RETICLE_DATA_DIR`, metal 1, the shipped litho deck, 2 nm
//! pixels) it runs the region on the whole pool, then on one worker, in the same process,
//! and reports
//! - wall time and µm²/s of each run, the speedup and the parallel efficiency;
//! - groups before and after per rule, resolved, remaining and new, mask-rule records
//!   after, new groups near seams, tiles that kept their ILT mask;
//! - whether both runs wrote the same layout and the same comparison (a determinism check
//!   that fails the bench);
//! - the per-tile cost (one worker's wall time over the region's tiles, everything
//!   included) and from it a projection for the whole layout and for 1 mm² on a Slurm
//!   cluster of `--cluster-cpus` CPUs: four waves, each `ceil(tiles / 4 / cpus)` tiles
//!   deep, plus `--batch-latency-s` per batch (the four waves and the two re-evaluations,
//!   which run at once).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use reticle_dispatch::{Dispatcher, Scope};
use reticle_protocol::args::OptimizeArgs;
use serde_json::{Value, json};

use crate::bench_chip::{
    Failure, LAYER, default_layout, layout_bbox, layout_format, load_average, parse_bench_args,
    parse_box, pool, round_to, run_bench_to_report,
};

/// The shipped litho deck of metal 1 (printed width and space, EPE, PV band, mask rules).
const DECK: &str = "nangate45_m1_litho";
/// The default box (µm): issue 28's 10 µm × 10 µm region of gcd_45nm.
const BOX: [f64; 4] = [5.0, 5.0, 15.0, 15.0];
/// `--quick`: a 2 × 2-tile box.
const QUICK_BOX: [f64; 4] = [6.0, 6.5, 7.8, 7.8];
/// `--quick`'s pixel (nm).
const QUICK_PIXEL_NM: f64 = 4.0;

/// `reticle bench repair` options.
#[derive(Debug, Parser)]
#[command(
    name = "reticle bench repair",
    about = "A region repaired in tiles end to end (the optimize tool's work): wall time, \
             µm²/s, groups before and after per rule, mask-rule records, one worker against \
             the pool, and a Slurm projection from the per-tile cost"
)]
struct RepairArgs {
    /// The layout (GDSII or OASIS); default `$RETICLE_DATA_DIR/gds/gcd_45nm.gds`.
    #[arg(long)]
    layout: Option<PathBuf>,
    /// The region `l,b,r,t` in µm (default 5,5,15,15).
    #[arg(long = "box", value_parser = parse_box, allow_hyphen_values = true)]
    box_um: Option<[f64; 4]>,
    /// Pixel size in nm (default 2).
    #[arg(long)]
    pixel_nm: Option<f64>,
    /// Workers of the pool run (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: Option<u16>,
    /// CPUs of the projected Slurm cluster (one tile per CPU at a time).
    #[arg(long, default_value_t = 1000)]
    cluster_cpus: u32,
    /// Seconds a Slurm batch waits to start (per wave and per re-evaluation).
    #[arg(long, default_value_t = 30.0)]
    batch_latency_s: f64,
    /// A smoke run: a 2 × 2-tile box (6,6.5,7.8,7.8) at 4 nm unless given.
    #[arg(long)]
    quick: bool,
    /// Directory for the runs' files (kept); default a temporary folder, removed.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `reticle bench repair [options]`: exit 0 with the figures, 1 when a run fails or the
/// two runs differ, 2 on a usage error, missing data or no worker, 130 on Ctrl-C.
pub fn repair(args: &[String], config: &reticle_config::Config) -> ExitCode {
    let opts: RepairArgs = match parse_bench_args("reticle bench repair", args) {
        Ok(opts) => opts,
        Err(code) => return code,
    };
    run_bench_to_report(
        "bench repair",
        bench(&opts, config),
        opts.json,
        text,
        "one worker and the pool wrote different results",
    )
}

/// One run: its wall time and the region result.
struct RepairRun {
    seconds: f64,
    result: Value,
}

/// Runs `call` on `workers` fresh workers with its files in `root/label`.
async fn run(
    call: &OptimizeArgs,
    workers: usize,
    root: &Path,
    roots: &[String],
    label: &str,
    config: &reticle_config::Config,
) -> Result<RepairRun, Failure> {
    let dir = root.join(label);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| (2, format!("cannot clear {}: {e}", dir.display())))?;
    }
    let dir = std::fs::create_dir_all(&dir)
        .and_then(|()| dir.canonicalize())
        .map_err(|e| (2, format!("cannot create {}: {e}", dir.display())))?;
    let (supervisor, dispatcher) = pool(workers, config).await?;
    let mut allowed = roots.to_vec();
    allowed.push(dir.display().to_string());
    let scope = progress_scope(label, allowed);
    let started = Instant::now();
    let result = reticle_tools::optimize_run::run_in(&dispatcher, &scope, call.clone(), &dir).await;
    let seconds = started.elapsed().as_secs_f64();
    supervisor.shutdown().await;
    let result = result.map_err(|e| (1, format!("{label}: {}: {}", e.code, e.message)))?;
    eprintln!("  {label}: {seconds:.1} s");
    Ok(RepairRun { seconds, result })
}

/// A command-line scope printing progress on a terminal.
fn progress_scope(label: &str, allowed: Vec<String>) -> Scope {
    let tty = std::io::stderr().is_terminal();
    let owned = label.to_owned();
    Scope::cli(
        format!("bench-repair-{}-{label}", std::process::id()),
        allowed,
        move |p| {
            if tty && p.total > 0 {
                eprint!("\r  {owned}: {}/{} {:<40}", p.done, p.total, p.message);
            }
        },
    )
}

/// What two runs must agree on: the written layout's bytes, the comparison, the ILT sums.
fn fingerprint(result: &Value) -> Value {
    json!([
        result["layout_out"]["sha256"],
        result["changes"]["by_rule"],
        result["ilt"],
    ])
}

/// Tiles of a `w × h` µm area on cores of `core_um`.
fn tiles_of(w: f64, h: f64, core_um: f64) -> f64 {
    (w / core_um).ceil().max(1.0) * (h / core_um).ceil().max(1.0)
}

/// The projected wall time (s) of `tiles` tiles at `per_tile_s` each on `cpus` CPUs of a
/// cluster: four waves, each `ceil(tiles / 4 / cpus)` tiles deep, plus five batch starts
/// (four waves, the two re-evaluations at once).
fn projected_s(tiles: f64, per_tile_s: f64, cpus: u32, latency_s: f64) -> f64 {
    let depth = (tiles / 4.0 / f64::from(cpus.max(1))).ceil().max(1.0);
    4.0 * depth * per_tile_s + 5.0 * latency_s
}

/// The whole bench; the report as JSON.
async fn bench(opts: &RepairArgs, config: &reticle_config::Config) -> Result<Value, Failure> {
    let layout = opts
        .layout
        .clone()
        .unwrap_or_else(|| default_layout(config.process.data_dir.as_deref()));
    let layout = layout.canonicalize().map_err(|e| {
        (
            2,
            format!(
                "the layout {} was not found ({e}): pass --layout or set RETICLE_DATA_DIR",
                layout.display()
            ),
        )
    })?;
    let format = layout_format(&layout).ok_or_else(|| {
        (
            2,
            format!("{} is not a GDSII or OASIS file", layout.display()),
        )
    })?;
    let (root, temporary) = match &opts.out {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("reticle-bench-repair-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&root)
        .map_err(|e| (2, format!("cannot create {}: {e}", root.display())))?;
    let result = measure(opts, &layout, format, &root, config).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

async fn measure(
    opts: &RepairArgs,
    layout: &Path,
    format: &str,
    root: &Path,
    config: &reticle_config::Config,
) -> Result<Value, Failure> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let workers = opts.workers.map_or(cores, usize::from);
    let box_um = opts
        .box_um
        .unwrap_or(if opts.quick { QUICK_BOX } else { BOX });
    let pixel_nm = opts
        .pixel_nm
        .unwrap_or(if opts.quick { QUICK_PIXEL_NM } else { 2.0 });
    let roots = vec![
        layout
            .parent()
            .unwrap_or(Path::new("/"))
            .display()
            .to_string(),
    ];
    let call = OptimizeArgs {
        layout: Some(layout.display().to_string()),
        deck: Some(DECK.to_owned()),
        layer: Some(LAYER.to_owned()),
        box_um: Some(box_um),
        pixel_nm: Some(pixel_nm),
        ..OptimizeArgs::default()
    };
    let load_start = load_average();
    let bbox = {
        let (supervisor, dispatcher): (_, Arc<Dispatcher>) = pool(1, config).await?;
        let scope = progress_scope("open", roots.clone());
        let b = layout_bbox(layout, &scope, &dispatcher, format).await;
        supervisor.shutdown().await;
        b?
    };
    eprintln!(
        "reticle bench repair: {} box {box_um:?} µm at {pixel_nm} nm, {workers} workers then 1",
        layout.display()
    );
    let all = run(&call, workers, root, &roots, "pool", config).await?;
    let one = run(&call, 1, root, &roots, "one-worker", config).await?;
    let load_end = load_average();

    let r = &all.result;
    let region: Vec<f64> = serde_json::from_value(r["region_nm"].clone()).unwrap_or_default();
    let area = match region.as_slice() {
        [l, b, rr, t] => (rr - l) * (t - b) / 1e6,
        _ => 0.0,
    };
    let tiles = r["tiles"]["total"].as_f64().unwrap_or(0.0);
    let core_um = r["tiles"]["core_nm"].as_f64().unwrap_or(0.0) / 1000.0;
    let speedup = one.seconds / all.seconds.max(1e-9);
    let per_tile_s = one.seconds / tiles.max(1.0);
    let run_entry = |t: &RepairRun, n: usize| {
        json!({
            "workers": n,
            "seconds": round_to(t.seconds, 3),
            "um2_per_s": round_to(area / t.seconds.max(1e-9), 4),
        })
    };
    let projection = |w: f64, h: f64| {
        let n = tiles_of(w, h, core_um.max(1e-3));
        json!({
            "area_um2": round_to(w * h, 1),
            "tiles": n,
            "one_worker_s": round_to(n * per_tile_s, 0),
            "slurm_s": round_to(
                projected_s(n, per_tile_s, opts.cluster_cpus, opts.batch_latency_s), 0),
        })
    };
    let changes = &r["changes"];
    Ok(json!({
        "layout": layout,
        "deck": DECK,
        "layer": LAYER,
        "box_um": box_um,
        "pixel_nm": pixel_nm,
        "region_nm": r["region_nm"],
        "area_um2": round_to(area, 3),
        "tiles": r["tiles"],
        "runs": [run_entry(&all, workers), run_entry(&one, 1)],
        "speedup": round_to(speedup, 3),
        "parallel_efficiency": round_to(speedup / workers as f64, 3),
        "deterministic": fingerprint(&all.result) == fingerprint(&one.result),
        "groups": {
            "by_rule": changes["by_rule"],
            "totals": changes["totals"],
            "printed_groups": changes["printed_groups"],
        },
        "mask_rule_records_after": changes["mask_rule_records_after"],
        "new_mask_rule_groups": changes["new_mask_rule_groups"],
        "new_near_seams": changes["totals"]["new_near_seams"],
        "per_tile_s": round_to(per_tile_s, 3),
        "projection": {
            "model": "one worker's wall time over the region's tiles (ILT, merge and both re-evaluations included) per tile; four waves of ceil(tiles / 4 / cpus) tiles each, plus a batch start per wave and one for the two re-evaluations",
            "cluster_cpus": opts.cluster_cpus,
            "batch_latency_s": opts.batch_latency_s,
            "whole_layout": projection(bbox[2] - bbox[0], bbox[3] - bbox[1]),
            "one_mm2": projection(1000.0, 1000.0),
        },
        "load_average": {"start": load_start, "end": load_end},
        "cores": cores,
    }))
}

/// The report for people.
fn text(report: &Value) -> String {
    let runs = report["runs"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "reticle bench repair: {} {} box {} µm at {} nm ({} µm², {} tiles, core {} nm)\n",
        report["layout"].as_str().unwrap_or("?"),
        report["layer"].as_str().unwrap_or("?"),
        report["box_um"],
        report["pixel_nm"],
        report["area_um2"],
        report["tiles"]["total"],
        report["tiles"]["core_nm"],
    );
    for r in &runs {
        out.push_str(&format!(
            "  {} worker(s): {} s, {} µm²/s\n",
            r["workers"], r["seconds"], r["um2_per_s"]
        ));
    }
    let tiles = &report["tiles"];
    out.push_str(&format!(
        "  tiles: {} with the ILT, {} kept their ILT mask, kept the drawn target {}\n",
        tiles["optimized"],
        tiles["ilt_mask_kept"].as_array().map_or(0, Vec::len),
        tiles["kept_drawn"],
    ));
    let t = &report["groups"]["totals"];
    out.push_str(&format!(
        "  speedup {} (efficiency {}), same result: {}\n  groups {} → {} (resolved {}, remaining {}, new {}, near seams {}); mask-rule records after {}\n",
        report["speedup"],
        report["parallel_efficiency"],
        report["deterministic"],
        t["before"],
        t["after"],
        t["resolved"],
        t["remaining"],
        t["new"],
        t["new_near_seams"],
        report["mask_rule_records_after"],
    ));
    if let Some(rules) = report["groups"]["by_rule"].as_object() {
        for (rule, c) in rules {
            out.push_str(&format!(
                "    {rule}: {} → {} (resolved {}, new {})\n",
                c["before"], c["after"], c["resolved"], c["new"]
            ));
        }
    }
    let p = &report["projection"];
    for key in ["whole_layout", "one_mm2"] {
        out.push_str(&format!(
            "  {key}: {} µm², {} tiles: one worker {} s, Slurm ({} CPUs) {} s\n",
            p[key]["area_um2"],
            p[key]["tiles"],
            p[key]["one_worker_s"],
            p["cluster_cpus"],
            p[key]["slurm_s"],
        ));
    }
    out.push_str(&format!(
        "  per tile {} s; load {} → {}\n",
        report["per_tile_s"], report["load_average"]["start"], report["load_average"]["end"]
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projection_counts_four_waves_and_five_batches() {
        // 100 tiles on 10 CPUs: waves of 25 tiles, 3 deep each.
        assert_eq!(projected_s(100.0, 2.0, 10, 1.0), 4.0 * 3.0 * 2.0 + 5.0);
        // Plenty of CPUs: one tile deep per wave.
        assert_eq!(projected_s(100.0, 2.0, 1000, 0.0), 8.0);
        assert_eq!(tiles_of(10.0, 10.0, 1.188), 81.0);
    }
}
