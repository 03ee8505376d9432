//! `reticle eval`: the `evaluate` worker op from the command line (seed 000 G3).
//!
//! The host does not link the engine, so the command starts a one-worker supervisor,
//! runs the same `evaluate` op with the same arguments the MCP tool would send (validated
//! against the same input schema, paths confined the same way: `RETICLE_ALLOWED_ROOTS`,
//! else the working directory), and prints, for `--format=json`, the payload exactly as
//! the MCP server puts it in `structuredContent` (a failed call prints the same
//! `{"error": …}` object and exits 1). Progress goes to stderr; Ctrl-C kills the worker
//! and exits 130.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use reticle_protocol::ToolError;
use serde_json::{Map, Value, json};

use reticle_dispatch::supervisor::{Supervisor, SupervisorConfig, WorkerStderr};
use reticle_dispatch::{FanOut, Unit};

use crate::cli_run::{Pool, RunFlags, root_list, run_on_pool};
use reticle_protocol::args::EvaluateArgs;
use reticle_tools::confine::AllowedRoots;
use reticle_tools::evaluate::{OP, prepare, table};
use reticle_tools::imaging::Imaging;
use reticle_tools::worker_job::object_of;

/// Output format of `reticle eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalFormat {
    /// The report JSON, byte-identical to the MCP tool's `structuredContent`.
    Json,
    /// A table for people.
    Table,
}

/// `reticle eval` options.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// The layout, region, sizes and workers (shared with `reticle optimize`).
    #[command(flatten)]
    pub run: RunFlags,
    /// Rule deck: a shipped name (iccad13_m1, nangate45_m1v1, nangate45_m1_litho) or a deck JSON path.
    #[arg(long, default_value = "iccad13_m1")]
    pub deck: String,
    /// layer/datatype of a mask to image instead of `--layer` (post-OPC verification,
    /// e.g. the mask layer `optimize` writes): the print is checked against `--layer`,
    /// the deck's mask rules apply to the mask layer.
    #[arg(long)]
    pub mask_layer: Option<String>,
    /// How the region is imaged: auto (one window for a .glp clip or a box of exactly
    /// one model period, tiles otherwise), tiles, or window.
    #[arg(long, default_value = "auto", value_parser = ["auto", "tiles", "window"])]
    pub tiling: String,
    /// Directory for a tiled evaluation's results (`report.json`, `violations.jsonl`,
    /// `heatmap.png`; the tiles' intermediates are removed once merged); created, reused
    /// by later runs.
    #[arg(long, default_value = "reticle-eval")]
    pub out: std::path::PathBuf,
    /// aggregate (metrics and counts) or detailed (also violations[]).
    #[arg(long, default_value = "aggregate", value_parser = ["aggregate", "detailed"])]
    pub report_level: String,
    /// Most violation records returned.
    #[arg(long)]
    pub max_violations: Option<u64>,
    /// Past --max-violations: truncate or degrade_to_aggregate.
    #[arg(long, value_parser = ["truncate", "degrade_to_aggregate"])]
    pub on_exceeded: Option<String>,
    /// json or table.
    #[arg(long, value_enum, default_value = "json")]
    pub format: EvalFormat,
}

impl EvalArgs {
    /// The tool arguments the MCP client would send for the same request.
    fn tool_arguments(&self) -> Map<String, Value> {
        let run = &self.run;
        let mut args = Map::new();
        args.insert("layout".into(), json!(run.layout));
        args.insert("deck".into(), json!(self.deck));
        if let Some(layer) = &run.layer {
            args.insert("layer".into(), json!(layer));
        }
        if let Some(mask_layer) = &self.mask_layer {
            args.insert("mask_layer".into(), json!(mask_layer));
        }
        if let Some(cell) = &run.cell {
            args.insert("cell".into(), json!(cell));
        }
        if let Some(b) = &run.box_um {
            args.insert("box_um".into(), json!(b));
        }
        if self.tiling != "auto" {
            args.insert("tiling".into(), json!(self.tiling));
        }
        if let Some(p) = run.pixel_nm {
            args.insert("pixel_nm".into(), json!(p));
        }
        if let Some(t) = run.tile_nm {
            args.insert("tile_nm".into(), json!(t));
        }
        args.insert("report_level".into(), json!(self.report_level));
        let mut limits = Map::new();
        if let Some(m) = self.max_violations {
            limits.insert("max_violations".into(), json!(m));
        }
        if let Some(o) = &self.on_exceeded {
            limits.insert("on_exceeded".into(), json!(o));
        }
        if !limits.is_empty() {
            args.insert("limits".into(), Value::Object(limits));
        }
        args
    }
}

/// The command line with `--box l,b,r,t` (or `--box=l,b,r,t`) spread into four
/// arguments, the form `--box l b r t` takes: both spellings work, and a layout path after
/// the box is never read as a coordinate.
pub fn spread_box_args(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    let mut after_box = false;
    for arg in args {
        let text = arg.to_str().map(str::to_owned);
        match text.as_deref() {
            Some(t) if after_box && t.contains(',') => {
                out.extend(t.split(',').map(std::ffi::OsString::from));
            }
            Some(t) if t.starts_with("--box=") && t.contains(',') => {
                out.push("--box".into());
                out.extend(t["--box=".len()..].split(',').map(std::ffi::OsString::from));
            }
            _ => out.push(arg),
        }
        after_box = text.as_deref() == Some("--box");
    }
    out
}

/// Validates the arguments against the tool's input schema, then parses and resolves
/// them with the tool's own [`prepare`]: the same `EvaluateArgs` and imaging decision the
/// MCP tool makes (D156).
fn parse(
    args: Map<String, Value>,
    roots: &AllowedRoots,
) -> Result<(EvaluateArgs, Imaging), ToolError> {
    crate::cli_run::validate("evaluate", &args)?;
    prepare(args, roots)
}

fn emit(format: EvalFormat, result: &Result<Value, ToolError>) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match (format, result) {
        (EvalFormat::Json, _) => crate::cli_run::emit_json(result),
        (EvalFormat::Table, Ok(payload)) => {
            let _ = write!(stdout, "{}", table(payload));
            ExitCode::SUCCESS
        }
        (EvalFormat::Table, Err(error)) => {
            eprintln!("reticle eval: {}: {}", error.code, error.message);
            ExitCode::from(1)
        }
    }
}

/// Runs `reticle eval`. Exit 0 with a report, 1 on a tool error, 2 when the worker
/// cannot start, 130 after Ctrl-C.
pub fn eval(opts: &EvalArgs, config: &reticle_config::Config) -> ExitCode {
    let roots = AllowedRoots::configured(config);
    let (call, imaging) = match parse(opts.tool_arguments(), &roots) {
        Ok(parsed) => parsed,
        Err(error) => return emit(opts.format, &Err(error)),
    };
    let allowed = root_list(&roots);
    let format = opts.format;
    let tiled = imaging == Imaging::Tiles;
    // The unit's arguments: the typed arguments serialized once, as the tool's unit.
    let args = object_of(&call);
    let job_dir = if tiled {
        match prepare_out(&opts.out) {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!("reticle eval: cannot prepare {}: {e}", opts.out.display());
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let slurm = tiled && opts.run.wants_slurm(config);
    // Plan and merge only with Slurm: the tiles run on the cluster.
    let workers = if tiled && !slurm {
        opts.run.tile_workers(config)
    } else {
        1
    };
    let pool = Pool { workers, slurm };
    let out_dir = job_dir.as_ref().map(|d| d.display().to_string());
    let result = run_on_pool(
        "eval",
        pool,
        config,
        allowed,
        |dispatcher, scope| async move {
            match out_dir {
                Some(dir) => {
                    let fan_out = FanOut {
                        prefix: OP,
                        artifact_dir: &dir,
                    };
                    fan_out.run(&dispatcher, &scope, args).await
                }
                None => {
                    let unit = Unit::new(OP, &Value::Object(args));
                    dispatcher.run(&scope, unit).await
                }
            }
        },
    );
    let result = match result {
        Ok(result) => result,
        Err(code) => return code,
    };
    if let (Some(dir), Ok(payload)) = (&job_dir, &result)
        && let Err(e) = std::fs::write(dir.join(REPORT_FILE), format!("{payload}\n"))
    {
        eprintln!(
            "reticle eval: cannot write {REPORT_FILE} in {}: {e}",
            dir.display()
        );
    }
    emit(format, &result)
}

/// The report of a tiled evaluation, as JSON, beside `violations.jsonl` and `heatmap.png`
/// in `--out` (the same bytes as the JSON on stdout; D190).
pub const REPORT_FILE: &str = "report.json";

/// The directory a tiled evaluation writes to: created, canonical, the tiles folder an
/// interrupted run left removed (a new run must not read an old run's tiles; D190), and
/// so are the loose tile outputs runs before D190 wrote beside the results.
fn prepare_out(out: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(out)?;
    let dir = out.canonicalize()?;
    match std::fs::remove_dir_all(dir.join(reticle_protocol::wire::TILES_DIR)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("tile_") && name.ends_with(".json") && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(dir)
}

/// The runtime of a one-shot CLI command (`reticle eval`, `reticle demo`); a failure is
/// reported on stderr as `reticle <command>: …` and becomes exit code 2.
pub(crate) fn cli_runtime(command: &str) -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("reticle {command}: cannot start the runtime: {e}");
            ExitCode::from(2)
        })
}

/// A one-worker supervisor for a CLI command (configured from the environment, worker
/// stderr discarded); a failure is reported on stderr and becomes exit code 2.
pub(crate) async fn one_worker(
    command: &str,
    config: &reticle_config::Config,
) -> Result<Arc<Supervisor>, ExitCode> {
    start_workers(command, 1, config).await
}

/// A supervisor of `workers` workers for a CLI command, as [`one_worker`].
pub(crate) async fn start_workers(
    command: &str,
    workers: usize,
    host: &reticle_config::Config,
) -> Result<Arc<Supervisor>, ExitCode> {
    start_workers_on(command, workers, None, host).await
}

/// [`start_workers`] on `cores` cores (their share each, D222; default: the machine's):
/// `reticle bench chip` runs one worker on one core as its scaling reference (D198).
pub(crate) async fn start_workers_on(
    command: &str,
    workers: usize,
    cores: Option<usize>,
    host: &reticle_config::Config,
) -> Result<Arc<Supervisor>, ExitCode> {
    let mut config = SupervisorConfig::configured(host).map_err(|e| {
        eprintln!("reticle {command}: {e}");
        ExitCode::from(2)
    })?;
    config.workers = workers.clamp(1, reticle_dispatch::supervisor::MAX_WORKERS);
    if let Some(cores) = cores {
        config.cores = cores.max(1);
    }
    config.worker_stderr = WorkerStderr::Null;
    Supervisor::start(config).await.map(Arc::new).map_err(|e| {
        eprintln!("reticle {command}: cannot start a worker: {e}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::spread_box_args;

    fn spread(args: &[&str]) -> Vec<String> {
        spread_box_args(args.iter().map(std::ffi::OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn both_box_spellings_become_four_arguments() {
        let four = ["reticle", "eval", "--box", "1", "-1.5", "31", "31", "a.gds"];
        assert_eq!(spread(&four), four);
        assert_eq!(
            spread(&["reticle", "eval", "--box", "1,-1.5,31,31", "a.gds"]),
            four
        );
        assert_eq!(
            spread(&["reticle", "eval", "--box=1,-1.5,31,31", "a.gds"]),
            four
        );
        // Only the value right after --box is spread.
        assert_eq!(
            spread(&["reticle", "eval", "--deck", "x,y.json", "a.gds"]),
            ["reticle", "eval", "--deck", "x,y.json", "a.gds"]
        );
    }
}
