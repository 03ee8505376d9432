//! `reticle`: the MCP stdio server and its command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use reticle_host::mcp::server::ShutdownPolicy;
use reticle_host::readiness::DEFAULT_READY_FILE;
use reticle_host::serve::{ServeOptions, serve};

/// reticle: photomask verification for AI agents, over MCP.
#[derive(Debug, Parser)]
#[command(
    name = "reticle",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Options of `serve` when no command is given.
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default when no command is given).
    Serve(ServeArgs),
    /// Validate a JSON file against a published schema; prints the result as
    /// JSON. Exit 0 valid, 1 invalid, 2 I/O or parse error.
    Validate {
        /// The JSON file.
        path: PathBuf,
        /// Schema name (see `list_schemas`); defaults to the file's `$schema` member.
        #[arg(long)]
        schema: Option<String>,
        /// Extra schemas directory.
        #[arg(long, env = "RETICLE_SCHEMAS_DIR")]
        schemas_dir: Option<PathBuf>,
    },
    /// Evaluate a layout against a rule deck (the `evaluate` tool from the command line):
    /// `reticle eval --report-level=detailed --format=json --deck iccad13_m1 LAYOUT`.
    /// JSON output is byte-identical to the tool's `structuredContent`; progress on stderr.
    Eval(reticle_host::eval_cli::EvalArgs),
    /// Operate a running host over its control socket: `health`, `telemetry`,
    /// `events --since 10m`, `rollout --worker-bin PATH`, `rollback`, `reexec [--bin PATH]`.
    Ctl(reticle_host::control::CtlArgs),
    /// Evaluate a shipped layout end to end and write a PNG with the violations drawn on
    /// it: `reticle demo [--out DIR]`. Prints the report table and the picture's path.
    Demo(reticle_host::demo_cli::DemoArgs),
    /// Engine benchmarks, run by the worker binary: `reticle bench litho [--gpu] [--json]`
    /// times one 2048×2048 3-corner ICCAD-2013 simulation and its ratio to the naive path.
    /// `reticle bench --help` lists the options.
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for the benchmark (see `reticle bench --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Ready file written while the server loop runs (`<pid> <ISO8601>`).
    #[arg(long, env = "MCP_READY_FILE", default_value = DEFAULT_READY_FILE)]
    ready_file: PathBuf,
    /// Directory of the JSONL log (`reticle.jsonl`) and event log (`events.jsonl`)
    /// [default: $XDG_STATE_HOME/reticle].
    #[arg(long, env = "RETICLE_LOG_DIR")]
    log_dir: Option<PathBuf>,
    /// Log to stderr only.
    #[arg(long)]
    no_log_file: bool,
    /// Log filter (`tracing` syntax), e.g. `info` or `reticle_host=debug`.
    #[arg(long, env = "RETICLE_LOG", default_value = "info")]
    log: String,
    /// After SIGTERM/SIGINT, how long in-flight requests may run, in ms.
    #[arg(long, env = "RETICLE_DRAIN_MS", default_value_t = 30_000)]
    drain_ms: u64,
    /// After stdin closes, how long in-flight requests may run before cancellation, in ms.
    #[arg(long, env = "RETICLE_EOF_GRACE_MS", default_value_t = 500)]
    eof_grace_ms: u64,
    /// Directory of extra published schemas (`*.json`), read once at start.
    #[arg(long, env = "RETICLE_SCHEMAS_DIR")]
    schemas_dir: Option<PathBuf>,
    /// Directory of extra example documents (`*.json` with a `$schema` member).
    #[arg(long, env = "RETICLE_EXAMPLES_DIR")]
    examples_dir: Option<PathBuf>,
    /// Start workers on the first job instead of at start-up.
    #[arg(long, env = "RETICLE_LAZY_WORKERS")]
    lazy_workers: bool,
    /// How long finished jobs stay pollable, in ms.
    #[arg(long, env = "RETICLE_JOB_TTL_MS", default_value_t = 600_000)]
    job_ttl_ms: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Limits are read once, before any job can start (docs/SECURITY.md).
    if let Err(e) = reticle_host::limits::init_from_env() {
        eprintln!("reticle: {e}");
        return ExitCode::from(2);
    }
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        Some(Command::Validate {
            path,
            schema,
            schemas_dir,
        }) => return reticle_host::cli::validate(&path, schema.as_deref(), schemas_dir.as_deref()),
        Some(Command::Bench { args }) => return reticle_host::cli::bench(&args),
        Some(Command::Eval(args)) => return reticle_host::eval_cli::eval(&args),
        Some(Command::Ctl(args)) => return reticle_host::control::ctl(&args),
        Some(Command::Demo(args)) => return reticle_host::demo_cli::demo(&args),
        None => cli.serve,
    };
    let options = ServeOptions {
        ready_file: args.ready_file,
        log_dir: if args.no_log_file {
            None
        } else {
            Some(
                args.log_dir
                    .unwrap_or_else(reticle_host::logging::default_log_dir),
            )
        },
        log_filter: args.log,
        policy: ShutdownPolicy {
            drain: Duration::from_millis(args.drain_ms),
            eof_grace: Duration::from_millis(args.eof_grace_ms.min(900)),
        },
        job_ttl: Duration::from_millis(args.job_ttl_ms),
        schemas_dir: args.schemas_dir,
        examples_dir: args.examples_dir,
        start_workers: !args.lazy_workers,
    };
    match serve(options) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "reticle serve failed");
            ExitCode::FAILURE
        }
    }
}
