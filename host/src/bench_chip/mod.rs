//! `reticle bench chip`: whole-layout evaluation throughput (issue 18 item 8).
//!
//! The bench runs the host's real path, the one `reticle eval` and the `evaluate` tool
//! take: a supervisor of workers, a [`Dispatcher`] over [`LocalPool`], and [`FanOut`]
//! (`evaluate.plan`, `evaluate.tile` × N, `evaluate.merge`) under a command-line
//! [`Scope`]. On one layer of a real layout (default `gds/gcd_45nm.gds` under
//! `RETICLE_DATA_DIR`, layer 11/0, deck `nangate45_m1v1`) it measures
//! - throughput in µm² per second at 1 nm and at 4 nm pixels, each region evaluated by one
//!   worker on one core (one compute thread), by one worker on every core, and by the
//!   whole pool (each worker on its share of the cores, D222), with the parallel
//!   efficiency t₁ / t_N / N against the one-core run (D198); the runs must give the same
//!   report (the JSON without `artifacts`, and the artifacts' hashes), a cheap determinism
//!   check that fails the bench;
//! - tiled against untiled imaging on one window of exactly one model period (2.048 µm)
//!   at 4 nm: `tiling: window` (one periodic window, the layout outside ignored) against
//!   `tiling: tiles` (halos of real layout context), their time ratio and metrics.
//!
//! Workers are started, and warmed by one untimed tiled run of the window at each pixel
//! size, before the clock starts; a run's time is its plan, tiles and merge.
//! Every figure is printed with its ratio against a reference run in the same process.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use serde_json::{Map, Value, json};

use crate::eval_cli::{cli_runtime, start_workers_on};
use reticle_dispatch::{Dispatcher, FanOut, LocalPool, Scope, Unit};
use reticle_tools::evaluate::OP;

mod split;
mod text;
use text::text;

/// The deck the bench evaluates with.
const DECK: &str = "nangate45_m1v1";
/// The evaluated layer (metal 1 of the 45 nm layouts).
pub(crate) const LAYER: &str = "11/0";
/// The default layout, under the reference data folder.
const LAYOUT_FILE: &str = "gds/gcd_45nm.gds";
/// The default model's period (µm): the side of the untiled window.
const PERIOD_UM: f64 = 2.048;

/// `reticle bench chip` options.
#[derive(Debug, Parser)]
#[command(
    name = "reticle bench chip",
    about = "Whole-layout evaluation throughput (µm²/s at 1 nm and 4 nm, one worker against \
             the pool) and tiled against untiled imaging on one window"
)]
struct ChipArgs {
    /// The layout (GDSII or OASIS); default `$RETICLE_DATA_DIR/gds/gcd_45nm.gds`
    /// (`RETICLE_DATA_DIR` defaults to `../shared/data` beside the workspace).
    #[arg(long)]
    layout: Option<PathBuf>,
    /// Workers of the "whole pool" runs (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: Option<u16>,
    /// Region of the 1 nm runs, `l,b,r,t` in µm (default: a square of --side-1nm at the
    /// centre of the layout's bounding box).
    #[arg(long, value_parser = parse_box, allow_hyphen_values = true)]
    box_1nm: Option<[f64; 4]>,
    /// Side in µm of the default 1 nm region.
    #[arg(long, default_value_t = 20.0)]
    side_1nm: f64,
    /// Region of the 4 nm runs, `l,b,r,t` in µm (default: the whole layer).
    #[arg(long, value_parser = parse_box, allow_hyphen_values = true)]
    box_4nm: Option<[f64; 4]>,
    /// Lower-left corner `x,y` in µm of the 2.048 µm window of the tiled/untiled
    /// comparison (default: the window at the centre of the layout's bounding box).
    #[arg(long, value_parser = parse_point, allow_hyphen_values = true)]
    window_at: Option<[f64; 2]>,
    /// Timed runs of each imaging mode on the window (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeats: u32,
    /// A smoke run in seconds: 1 nm on a 3 µm square, 4 nm on an 8 µm square (both at
    /// the centre unless given), one run of each imaging mode on the window.
    #[arg(long)]
    quick: bool,
    /// Directory for the runs' files (one folder per run, kept); default a temporary
    /// folder, removed at the end.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_numbers<const N: usize>(text: &str) -> Result<[f64; N], String> {
    let values: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>().map_err(|e| format!("{v:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let values: [f64; N] = values
        .try_into()
        .map_err(|_| format!("expected {N} comma-separated numbers"))?;
    if values.iter().all(|v| v.is_finite()) {
        Ok(values)
    } else {
        Err("numbers must be finite".to_owned())
    }
}

pub(crate) fn parse_box(text: &str) -> Result<[f64; 4], String> {
    let b = parse_numbers::<4>(text)?;
    if b[0] < b[2] && b[1] < b[3] {
        Ok(b)
    } else {
        Err("a box is left,bottom,right,top with left < right and bottom < top".to_owned())
    }
}

fn parse_point(text: &str) -> Result<[f64; 2], String> {
    parse_numbers::<2>(text)
}

/// A failure: the exit code and what to say on stderr.
pub(crate) type Failure = (u8, String);

/// Rounds to 1 nm (µm with 3 decimals), the precision boxes are given with.
fn um3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub(crate) fn round_to(v: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (v * scale).round() / scale
}

/// The square of side `side` centred on `centre`, clipped to `bounds`.
fn centred_square(centre: [f64; 2], side: f64, bounds: [f64; 4]) -> [f64; 4] {
    let h = side / 2.0;
    [
        um3((centre[0] - h).max(bounds[0])),
        um3((centre[1] - h).max(bounds[1])),
        um3((centre[0] + h).min(bounds[2])),
        um3((centre[1] + h).min(bounds[3])),
    ]
}

/// The 1-minute load average, where the system says it.
pub(crate) fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The default layout: `$RETICLE_DATA_DIR/gds/gcd_45nm.gds` (`data_dir`, from the
/// config), the data folder defaulting to `../shared/data` beside the workspace (as the
/// engine's benchmarks find it).
pub(crate) fn default_layout(data_dir: Option<&Path>) -> PathBuf {
    data_dir
        .map_or_else(
            || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data")),
            Path::to_path_buf,
        )
        .join(LAYOUT_FILE)
}

/// `layout.open`'s format name for a path, from its extension.
pub(crate) fn layout_format(path: &Path) -> Option<&'static str> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "gds" | "gds2" | "gdsii" => Some("gds"),
        "oas" | "oasis" => Some("oasis"),
        _ => None,
    }
}

/// `reticle bench chip [options]`: exit 0 with the figures, 1 when a run fails or the
/// determinism check does, 2 on a usage error, missing data or no worker, 130 on Ctrl-C.
pub fn chip(args: &[String], config: &reticle_config::Config) -> ExitCode {
    let opts: ChipArgs = match parse_bench_args("reticle bench chip", args) {
        Ok(opts) => opts,
        Err(code) => return code,
    };
    if !(opts.side_1nm > 0.0 && opts.side_1nm.is_finite()) {
        eprintln!("reticle bench chip: --side-1nm must be a positive number of µm");
        return ExitCode::from(2);
    }
    run_bench_to_report(
        "bench chip",
        bench(&opts, config),
        opts.json,
        text,
        "one worker and the pool gave different reports (see same_report)",
    )
}

/// A `reticle bench …` command's arguments (`command`: its words, for usage and help):
/// help and version go to stdout with exit 0, a usage error to stderr with exit 2.
pub(crate) fn parse_bench_args<A: Parser>(command: &str, args: &[String]) -> Result<A, ExitCode> {
    A::try_parse_from(std::iter::once(command.to_owned()).chain(args.iter().cloned())).map_err(
        |e| {
            let _ = e.print();
            if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        },
    )
}

/// Runs a bench that compares one worker with the pool (`bench chip`, `bench repair`) to
/// its end: Ctrl-C drops the bench, whose supervisors kill their workers (D12), and exits
/// 130; a failure prints its message and exits with its code; otherwise the report goes
/// to stdout (JSON or `text`), and exit 1 says the two runs differed (`differ`).
pub(crate) fn run_bench_to_report(
    command: &str,
    bench: impl Future<Output = Result<Value, Failure>>,
    json: bool,
    text: fn(&Value) -> String,
    differ: &str,
) -> ExitCode {
    let runtime = match cli_runtime(command) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = bench => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    let report = match outcome {
        None => {
            eprintln!("\nreticle {command}: interrupted; workers stopped");
            return ExitCode::from(130);
        }
        Some(Err((code, message))) => {
            eprintln!("reticle {command}: {message}");
            return ExitCode::from(code);
        }
        Some(Ok(report)) => report,
    };
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        writeln!(stdout, "{report}")
    } else {
        write!(stdout, "{}", text(&report))
    };
    if written.is_err() {
        return ExitCode::FAILURE;
    }
    if report["deterministic"] == json!(true) {
        ExitCode::SUCCESS
    } else {
        eprintln!("reticle {command}: {differ}");
        ExitCode::from(1)
    }
}

/// Where the runs write: a folder per run under `root`.
struct Runs {
    layout: PathBuf,
    roots: Vec<String>,
    root: PathBuf,
    tty: bool,
}

/// One timed run: its wall time and the report.
struct Timed {
    seconds: f64,
    report: Value,
}

impl Runs {
    /// The `evaluate` arguments for `box_um` (None: the whole layer) at `pixel_nm`.
    fn args(&self, pixel_nm: f64, box_um: Option<[f64; 4]>) -> Map<String, Value> {
        let mut args = Map::new();
        args.insert("layout".into(), json!(self.layout));
        args.insert("deck".into(), json!(DECK));
        args.insert("layer".into(), json!(LAYER));
        if let Some(b) = box_um {
            args.insert("box_um".into(), json!(b));
        }
        args.insert("pixel_nm".into(), json!(pixel_nm));
        args.insert("report_level".into(), json!("aggregate"));
        args
    }

    fn scope(&self, label: &str) -> Scope {
        let tty = self.tty;
        let label_owned = label.to_owned();
        Scope::cli(
            format!("bench-chip-{}-{label}", std::process::id()),
            self.roots.clone(),
            move |p| {
                if tty && p.total > 0 {
                    eprint!(
                        "\r  {label_owned}: {}/{} {:<40}",
                        p.done, p.total, p.message
                    );
                }
            },
        )
    }

    /// An empty artifact folder `label` under the root (what an earlier run left removed).
    fn fresh_dir(&self, label: &str) -> Result<String, Failure> {
        let dir = self.root.join(label);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| (2, format!("cannot clear {}: {e}", dir.display())))?;
        }
        let dir = std::fs::create_dir_all(&dir)
            .and_then(|()| dir.canonicalize())
            .map_err(|e| (2, format!("cannot create {}: {e}", dir.display())))?;
        Ok(dir.display().to_string())
    }

    /// Runs `args` tiled (`FanOut`, a fresh artifact folder `label`) or as one window
    /// (the `evaluate` op), and times it.
    async fn run(
        &self,
        dispatcher: &Arc<Dispatcher>,
        label: &str,
        args: Map<String, Value>,
        tiled: bool,
    ) -> Result<Timed, Failure> {
        let scope = self.scope(label);
        let dir = if tiled {
            Some(self.fresh_dir(label)?)
        } else {
            None
        };
        let started = Instant::now();
        let result = match &dir {
            Some(dir) => {
                let fan_out = FanOut {
                    prefix: OP,
                    artifact_dir: dir,
                };
                fan_out.run(dispatcher, &scope, args).await
            }
            None => {
                dispatcher
                    .run(&scope, Unit::new(OP, &Value::Object(args)))
                    .await
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        if self.tty {
            eprint!("\r{:<70}\r", "");
        }
        let report = result.map_err(|e| (1, format!("{label}: {}: {}", e.code, e.message)))?;
        eprintln!("  {label}: {seconds:.2} s");
        Ok(Timed { seconds, report })
    }

    /// One untimed tiled run of `window_box` at each pixel size (six tiles or so, spread
    /// over the pool's workers), so the timed runs find the workers' caches (layout,
    /// kernels) warm.
    async fn warm_up(
        &self,
        dispatcher: &Arc<Dispatcher>,
        window_box: [f64; 4],
    ) -> Result<(), Failure> {
        for pixel_nm in [1.0, 4.0] {
            self.run(
                dispatcher,
                &format!("warm-up-{pixel_nm}nm"),
                self.args(pixel_nm, Some(window_box)),
                true,
            )
            .await?;
        }
        Ok(())
    }
}

/// The supervisor and dispatcher of a pool.
pub(crate) type Pool = (
    Arc<reticle_dispatch::supervisor::Supervisor>,
    Arc<Dispatcher>,
);

/// A dispatcher over a fresh supervisor of `workers` workers.
pub(crate) async fn pool(workers: usize, config: &reticle_config::Config) -> Result<Pool, Failure> {
    pool_on(workers, None, config).await
}

/// [`pool`] on `cores` cores (default: the machine's), each worker computing on its share
/// (D222).
async fn pool_on(
    workers: usize,
    cores: Option<usize>,
    config: &reticle_config::Config,
) -> Result<Pool, Failure> {
    let supervisor = start_workers_on("bench chip", workers, cores, config)
        .await
        .map_err(|_| (2, format!("could not start {workers} worker(s)")))?;
    let dispatcher = Dispatcher::new(
        Arc::new(LocalPool::with_supervisor(Arc::clone(&supervisor))),
        config.limits.job.clone(),
    );
    Ok((supervisor, dispatcher))
}

/// The layout's bounding box `[l, b, r, t]` in µm (the `layout.open` op of `open_layout`).
async fn bounding_box(
    runs: &Runs,
    dispatcher: &Arc<Dispatcher>,
    format: &str,
) -> Result<[f64; 4], Failure> {
    layout_bbox(&runs.layout, &runs.scope("open"), dispatcher, format).await
}

/// The bounding box `[l, b, r, t]` in µm of `layout` (the `layout.open` op of
/// `open_layout`), run in `scope`.
pub(crate) async fn layout_bbox(
    layout: &Path,
    scope: &Scope,
    dispatcher: &Arc<Dispatcher>,
    format: &str,
) -> Result<[f64; 4], Failure> {
    let args = json!({"layout": {"path": layout, "format": format}});
    let summary = dispatcher
        .run(scope, Unit::new("layout.open", &args))
        .await
        .map_err(|e| (1, format!("layout.open: {}: {}", e.code, e.message)))?;
    let b = &summary["bbox_um"];
    match ["left", "bottom", "right", "top"].map(|k| b[k].as_f64()) {
        [Some(l), Some(b), Some(r), Some(t)] if l < r && b < t => Ok([l, b, r, t]),
        _ => Err((1, format!("{} has an empty top cell", layout.display()))),
    }
}

/// The report of a run without `artifacts` (whose paths differ by run), and the hashes of
/// the artifacts (which must not).
fn comparable(report: &Value) -> (String, Value) {
    let mut stripped = report.clone();
    let artifacts = stripped
        .as_object_mut()
        .and_then(|m| m.remove("artifacts"))
        .unwrap_or(Value::Null);
    let hashes = json!([
        artifacts["violations"]["sha256"],
        artifacts["heatmap"]["png"]["sha256"],
    ]);
    (stripped.to_string(), hashes)
}

/// Area in µm² of the report's region (`region.box_nm`).
fn area_um2(report: &Value) -> f64 {
    let b: Vec<f64> = report["region"]["box_nm"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if b.len() == 4 {
        (b[2] - b[0]) * (b[3] - b[1]) / 1e6
    } else {
        0.0
    }
}

/// The runs of one region at one pixel size: one worker on one core (the scaling
/// reference), one worker on every core (its threads), and the pool (a worker per share).
struct Scaling<'a> {
    one_core: &'a Timed,
    one_worker: &'a Timed,
    pool: &'a Timed,
    cores: usize,
    workers: usize,
}

/// One throughput entry: the same region at `pixel_nm` by one worker on one core, by one
/// worker on every core and by the pool; the speed-up and the parallel efficiency are the
/// pool's against one worker on one core (D198).
fn throughput_entry(pixel_nm: f64, s: &Scaling<'_>) -> Value {
    let (one, all) = (s.one_core, s.pool);
    let area = area_um2(&one.report);
    let imaging = &one.report["imaging"];
    let run = |t: &Timed, n: usize, threads: usize| {
        json!({
            "workers": n,
            "threads_per_worker": threads,
            "seconds": round_to(t.seconds, 6),
            "um2_per_s": round_to(area / t.seconds.max(1e-9), 2),
        })
    };
    let workers = s.workers;
    let speedup = one.seconds / all.seconds.max(1e-9);
    let (a, a_hashes) = comparable(&one.report);
    let (b, b_hashes) = comparable(&all.report);
    let (c, c_hashes) = comparable(&s.one_worker.report);
    let pool_threads = (s.cores / workers.max(1)).max(1);
    json!({
        "pixel_nm": pixel_nm,
        "region_um": one.report["region"]["box_nm"]
            .as_array()
            .map(|b| b.iter().filter_map(Value::as_f64).map(|v| um3(v / 1000.0)).collect::<Vec<_>>()),
        "region_source": one.report["region"]["source"],
        "area_um2": round_to(area, 3),
        "tiles": imaging["tiles"],
        "halo_nm": imaging["halo_nm"],
        "core_nm": imaging["core_nm"],
        "runs": [
            run(one, 1, 1),
            run(s.one_worker, 1, s.cores),
            run(all, workers, pool_threads),
        ],
        "speedup": round_to(speedup, 3),
        "parallel_efficiency": round_to(speedup / workers as f64, 3),
        "threads_speedup": round_to(one.seconds / s.one_worker.seconds.max(1e-9), 3),
        "same_report": a == b && a == c,
        "same_artifacts": a_hashes == b_hashes && a_hashes == c_hashes,
        "l2_px": one.report["metrics"]["l2_px"],
        "pvb_px": one.report["metrics"]["pvb_px"],
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The whole bench; the report as JSON.
async fn bench(opts: &ChipArgs, config: &reticle_config::Config) -> Result<Value, Failure> {
    let layout = opts
        .layout
        .clone()
        .unwrap_or_else(|| default_layout(config.process.data_dir.as_deref()));
    let layout = layout.canonicalize().map_err(|e| {
        (
            2,
            format!(
                "the layout {} was not found ({e}): pass --layout or set RETICLE_DATA_DIR \
                 to the folder that holds {LAYOUT_FILE}",
                layout.display()
            ),
        )
    })?;
    let format = layout_format(&layout).ok_or_else(|| {
        (
            2,
            format!(
                "{} is not a GDSII or OASIS file (.gds, .oas)",
                layout.display()
            ),
        )
    })?;
    let parent = layout.parent().unwrap_or(Path::new("/")).to_path_buf();
    let (root, temporary) = match &opts.out {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("reticle-bench-chip-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&root)
        .map_err(|e| (2, format!("cannot create {}: {e}", root.display())))?;
    let runs = Runs {
        layout,
        roots: vec![parent.display().to_string()],
        root: root.clone(),
        tty: std::io::stderr().is_terminal(),
    };
    let result = measure(opts, &runs, format, config).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

async fn measure(
    opts: &ChipArgs,
    runs: &Runs,
    format: &str,
    config: &reticle_config::Config,
) -> Result<Value, Failure> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let workers = opts.workers.map_or(cores, usize::from);
    let load_start = load_average();

    // The scaling reference (D198): one worker computing on one thread.
    eprintln!("bench chip: one worker on one core");
    let (first, dispatcher) = pool_on(1, Some(1), config).await?;
    let bbox = bounding_box(runs, &dispatcher, format).await?;
    let centre = [(bbox[0] + bbox[2]) / 2.0, (bbox[1] + bbox[3]) / 2.0];
    let box_1nm = opts.box_1nm.unwrap_or_else(|| {
        centred_square(centre, if opts.quick { 3.0 } else { opts.side_1nm }, bbox)
    });
    let box_4nm = opts
        .box_4nm
        .or_else(|| opts.quick.then(|| centred_square(centre, 8.0, bbox)));
    let window_at = opts.window_at.unwrap_or([
        um3(centre[0] - PERIOD_UM / 2.0),
        um3(centre[1] - PERIOD_UM / 2.0),
    ]);
    let window_box = [
        window_at[0],
        window_at[1],
        um3(window_at[0] + PERIOD_UM),
        um3(window_at[1] + PERIOD_UM),
    ];
    let repeats = if opts.quick && opts.repeats == 5 {
        1
    } else {
        opts.repeats
    };

    runs.warm_up(&dispatcher, window_box).await?;
    let core_1 = runs
        .run(&dispatcher, "1nm-1w1c", runs.args(1.0, Some(box_1nm)), true)
        .await?;
    let core_4 = runs
        .run(&dispatcher, "4nm-1w1c", runs.args(4.0, box_4nm), true)
        .await?;
    first.shutdown().await;
    drop(dispatcher);
    eprintln!("bench chip: one worker on {cores} cores");
    let (one, dispatcher) = pool_on(1, None, config).await?;
    runs.warm_up(&dispatcher, window_box).await?;
    let one_1 = runs
        .run(&dispatcher, "1nm-1w", runs.args(1.0, Some(box_1nm)), true)
        .await?;
    let one_4 = runs
        .run(&dispatcher, "4nm-1w", runs.args(4.0, box_4nm), true)
        .await?;
    // Where the time goes: the same regions unit by unit, each tile's timing read.
    let mut splits = Vec::new();
    for (pixel_nm, b, fanned) in [(1.0, Some(box_1nm), &one_1), (4.0, box_4nm, &one_4)] {
        let label = format!("{pixel_nm}nm-split");
        let (mut entry, report) =
            split::split(runs, &dispatcher, &label, runs.args(pixel_nm, b)).await?;
        entry["pixel_nm"] = json!(pixel_nm);
        entry["same_report"] = json!(comparable(&report) == comparable(&fanned.report));
        splits.push(entry);
    }
    let (mut window_s, mut tiles_s) = (Vec::new(), Vec::new());
    let (mut window, mut tiles) = (None, None);
    for _ in 0..repeats {
        let w = runs
            .run(
                &dispatcher,
                "window",
                runs.args(4.0, Some(window_box)),
                false,
            )
            .await?;
        let t = runs
            .run(&dispatcher, "tiles", runs.args(4.0, Some(window_box)), true)
            .await?;
        window_s.push(w.seconds);
        tiles_s.push(t.seconds);
        window = Some(w.report);
        tiles = Some(t.report);
    }
    one.shutdown().await;
    drop(dispatcher);

    eprintln!("bench chip: pool of {workers} workers");
    let (all, dispatcher) = pool(workers, config).await?;
    runs.warm_up(&dispatcher, window_box).await?;
    let all_1 = runs
        .run(&dispatcher, "1nm-pool", runs.args(1.0, Some(box_1nm)), true)
        .await?;
    let all_4 = runs
        .run(&dispatcher, "4nm-pool", runs.args(4.0, box_4nm), true)
        .await?;
    all.shutdown().await;

    let scaling = |one_core, one_worker, pool| Scaling {
        one_core,
        one_worker,
        pool,
        cores,
        workers,
    };
    let throughput = vec![
        throughput_entry(1.0, &scaling(&core_1, &one_1, &all_1)),
        throughput_entry(4.0, &scaling(&core_4, &one_4, &all_4)),
    ];
    let deterministic = throughput
        .iter()
        .all(|t| t["same_report"] == json!(true) && t["same_artifacts"] == json!(true))
        && splits.iter().all(|s| s["same_report"] == json!(true));
    let (window, tiles) = (window.unwrap_or_default(), tiles.unwrap_or_default());
    let (window_s, tiles_s) = (median(window_s), median(tiles_s));
    let metric = |r: &Value, k: &str| r["metrics"][k].as_f64().unwrap_or(0.0);
    let relative = |k: &str| {
        let w = metric(&window, k);
        (w > 0.0).then(|| round_to((metric(&tiles, k) - w) / w, 4))
    };
    Ok(json!({
        "layout": runs.layout,
        "layer": LAYER,
        "deck": DECK,
        "cores": cores,
        "workers": workers,
        "load_average": {"start": load_start, "end": load_average()},
        "layout_bbox_um": bbox,
        "throughput": throughput,
        "split": splits,
        "window": {
            "box_um": window_box,
            "pixel_nm": 4.0,
            "repeats": repeats,
            "runs": [
                {"tiling": "window", "units": 1, "seconds": round_to(window_s, 6),
                 "l2_px": window["metrics"]["l2_px"], "pvb_px": window["metrics"]["pvb_px"]},
                {"tiling": "tiles", "units": tiles["imaging"]["tiles"],
                 "halo_nm": tiles["imaging"]["halo_nm"], "core_nm": tiles["imaging"]["core_nm"],
                 "seconds": round_to(tiles_s, 6),
                 "l2_px": tiles["metrics"]["l2_px"], "pvb_px": tiles["metrics"]["pvb_px"]},
            ],
            "tiles_over_window": round_to(tiles_s / window_s.max(1e-9), 3),
            "l2_relative_difference": relative("l2_px"),
            "pvb_relative_difference": relative("pvb_px"),
            "note": "the metrics differ by the halo's error and by the context: the tiled run \
                     images the layout around the box through its halos, the window images \
                     the box alone, repeated periodically",
        },
        "deterministic": deterministic,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_and_points_parse_and_squares_clip_to_the_layout() {
        assert_eq!(parse_box("1,-2,3,4"), Ok([1.0, -2.0, 3.0, 4.0]));
        assert!(parse_box("3,0,1,4").is_err());
        assert!(parse_box("1,2,3").is_err());
        assert_eq!(parse_point("1.5, 2"), Ok([1.5, 2.0]));
        assert_eq!(
            centred_square([5.0, 5.0], 4.0, [0.0, 0.0, 6.0, 10.0]),
            [3.0, 3.0, 6.0, 7.0]
        );
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn comparable_reports_ignore_artifact_paths_only() {
        let a = json!({"metrics": {"l2_px": 1}, "artifacts": {"dir": "/a", "violations": {"path": "/a/v", "sha256": "x"}, "heatmap": {"png": {"path": "/a/h", "sha256": "y"}}}});
        let mut b = a.clone();
        b["artifacts"]["dir"] = json!("/b");
        assert_eq!(comparable(&a), comparable(&b));
        b["artifacts"]["heatmap"]["png"]["sha256"] = json!("z");
        assert_ne!(comparable(&a).1, comparable(&b).1);
        b["metrics"]["l2_px"] = json!(2);
        assert_ne!(comparable(&a).0, comparable(&b).0);
    }
}
