//! What the worker-backed CLI commands share (`reticle eval`, `reticle optimize`; seed 000
//! G3): the arguments checked against the tool's own input schema, a worker pool started for
//! the command (local workers, or a Slurm job array for a whole layout's tiles), progress on
//! stderr, Ctrl-C stopping the workers (exit 130), and the result printed as the tool's
//! `structuredContent` bytes (a failed call prints the same `{"error": …}` object, exit 1).

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use reticle_dispatch::{Dispatcher, Executor, LocalPool, Scope, SlurmExecutor, SlurmSettings};
use reticle_protocol::{ErrorCode, ToolError, schemas};
use serde_json::{Map, Value, json};

use reticle_tools::confine::AllowedRoots;
use reticle_tools::schema_errors;

use crate::eval_cli::{cli_runtime, start_workers};

/// `INVALID_INPUT` unless `args` pass `tool`'s published input schema (what the MCP
/// server checks before the tool runs).
///
/// # Errors
/// `INVALID_INPUT` with the schema's errors; `INTERNAL_ERROR` without the schema.
pub(crate) fn validate(tool: &str, args: &Map<String, Value>) -> Result<(), ToolError> {
    let files = schemas::tool_schemas(tool).ok_or_else(|| {
        ToolError::new(
            ErrorCode::InternalError,
            format!("no {tool} schema compiled in"),
        )
    })?;
    let schema: Value = serde_json::from_str(files.input)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, e.to_string()))?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, e.to_string()))?;
    let errors = schema_errors(&validator, &Value::Object(args.clone()));
    if errors.is_empty() {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::InvalidInput,
        format!("arguments do not match the {tool} input schema"),
    )
    .with_details(json!({"errors": errors})))
}

/// The flags `reticle eval` and `reticle optimize` share (each flattens them): what is
/// read, at what pixel and report-tile size, and where a region's tiles run.
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// The layout (.glp, .gds, .oas; `reticle optimize` reads a .glp as one window).
    pub layout: String,
    /// layer/datatype to evaluate or optimize (default: the deck's only layer).
    #[arg(long)]
    pub layer: Option<String>,
    /// The region `left bottom right top` in µm, any size (`--box 1 1 31 31` or
    /// `--box 1,1,31,31`). `reticle eval`: default the whole evaluated layer (GDSII/OASIS),
    /// the ICCAD window (.glp); `reticle optimize`: optimized in tiles and written back.
    #[arg(long = "box", num_args = 4, allow_hyphen_values = true)]
    pub box_um: Option<Vec<f64>>,
    /// Cell to flatten (default: the top cell).
    #[arg(long)]
    pub cell: Option<String>,
    /// Pixel size in nm.
    #[arg(long)]
    pub pixel_nm: Option<f64>,
    /// Report tile side in nm.
    #[arg(long)]
    pub tile_nm: Option<f64>,
    /// Workers for a region's tiles (default: `RETICLE_WORKERS`, else one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Where a region's tiles run: local (worker processes on this host) or slurm (a job
    /// array; plan and merge stay local; `reticle optimize` runs its tiles' waves there too,
    /// D253). Default: `RETICLE_EXECUTOR`.
    #[arg(long, value_parser = ["local", "slurm"])]
    pub executor: Option<String>,
}

impl RunFlags {
    /// Whether `--executor` (else the configured executor) sends tiles to Slurm.
    pub(crate) fn wants_slurm(&self, config: &reticle_config::Config) -> bool {
        let kind = match self.executor.as_deref() {
            Some(raw) => reticle_config::ExecutorKind::parse(raw)
                .unwrap_or(reticle_config::ExecutorKind::Local),
            None => config.executor.kind,
        };
        kind == reticle_config::ExecutorKind::Slurm
    }

    /// Workers for a region's tiles: `--workers`, else `RETICLE_WORKERS`, else one per
    /// core.
    pub(crate) fn tile_workers(&self, config: &reticle_config::Config) -> usize {
        self.workers
            .or_else(|| config.workers_explicit())
            .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
            .unwrap_or(1)
    }

    /// The box as four numbers (clap takes exactly four).
    pub(crate) fn box4(&self) -> Option<[f64; 4]> {
        four(self.box_um.as_ref())
    }
}

/// A box of four numbers.
pub(crate) fn four(v: Option<&Vec<f64>>) -> Option<[f64; 4]> {
    v.and_then(|b| <[f64; 4]>::try_from(b.as_slice()).ok())
}

/// The allowed roots as a command's scope lists them.
pub(crate) fn root_list(roots: &AllowedRoots) -> Vec<String> {
    roots
        .snapshot()
        .0
        .iter()
        .map(|p| p.display().to_string())
        .collect()
}

/// Where a command's units run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool {
    /// Local workers to start (plan and merge only with `slurm`).
    pub workers: usize,
    /// Tiles as a Slurm job array.
    pub slurm: bool,
}

/// Runs `work` on a worker pool started for `command` (progress on stderr as
/// `<command>: [####      ] done/total message`), then stops the pool. `Err` is the exit
/// code when the pool cannot start (2) or Ctrl-C interrupted the work (130; dropping the
/// work kills the workers' process groups, D12).
pub(crate) fn run_on_pool<F, Fut>(
    command: &'static str,
    pool: Pool,
    config: &reticle_config::Config,
    allowed: Vec<String>,
    work: F,
) -> Result<Result<Value, ToolError>, ExitCode>
where
    F: FnOnce(Arc<Dispatcher>, Scope) -> Fut,
    Fut: Future<Output = Result<Value, ToolError>>,
{
    let runtime = cli_runtime(command)?;
    runtime.block_on(async move {
        let supervisor = start_workers(command, pool.workers.max(1), config).await?;
        let tty = std::io::stderr().is_terminal();
        let scope = Scope::cli(
            format!("{command}-{}", std::process::id()),
            allowed,
            move |p| {
                let filled = (p.done * 20).checked_div(p.total).unwrap_or(0) as usize;
                let bar = format!("{}{}", "#".repeat(filled), " ".repeat(20 - filled.min(20)));
                if tty {
                    eprint!("\r[{bar}] {}/{} {:<32}", p.done, p.total, p.message);
                    if p.total > 0 && p.done >= p.total {
                        eprintln!();
                    }
                } else {
                    eprintln!("{command}: [{bar}] {}/{} {}", p.done, p.total, p.message);
                }
            },
        );
        let local: Arc<dyn Executor> =
            Arc::new(LocalPool::with_supervisor(Arc::clone(&supervisor)));
        let dispatcher = if pool.slurm {
            // The command line never reexecs: its handover flag is never set.
            Dispatcher::new(
                Arc::new(SlurmExecutor::new(
                    local,
                    SlurmSettings::from_config(config),
                    None,
                    reticle_dispatch::handover::Handover::new(),
                )),
                config.limits.job.clone(),
            )
        } else {
            Dispatcher::new(local, config.limits.job.clone())
        };
        let result = tokio::select! {
            result = work(dispatcher, scope) => result,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("\nreticle {command}: interrupted; workers stopped");
                supervisor.shutdown().await;
                return Err(ExitCode::from(130));
            }
        };
        supervisor.shutdown().await;
        Ok(result)
    })
}

/// Prints `result` as the tool's `structuredContent` (one JSON line); exit 0, or 1 for a
/// tool error.
pub(crate) fn emit_json(result: &Result<Value, ToolError>) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match result {
        Ok(payload) => {
            let _ = writeln!(stdout, "{payload}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let _ = writeln!(stdout, "{}", error.to_structured());
            ExitCode::from(1)
        }
    }
}
