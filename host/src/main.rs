//! `reticle`: the MCP stdio server and its command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use reticle_config::ConfigSeverity;
use reticle_mcp::serve::{ServeOptions, serve};
use reticle_mcp::server::ShutdownPolicy;

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
        /// Extra schemas directory [setting: RETICLE_SCHEMAS_DIR].
        #[arg(long)]
        schemas_dir: Option<PathBuf>,
    },
    /// Evaluate a layout against a rule deck (the `evaluate` tool from the command line):
    /// `reticle eval --report-level=detailed --format=json --deck iccad13_m1 LAYOUT`.
    /// JSON output is byte-identical to the tool's `structuredContent`; progress on stderr.
    Eval(reticle_host::eval_cli::EvalArgs),
    /// Optimize the mask (the `optimize` tool from the command line): a region
    /// `reticle optimize --deck nangate45_m1_litho --layer 11/0 --box 5 5 11 11 LAYOUT`
    /// (tiled, written back into `--out`), or `--violation-id ID`. JSON output is the
    /// tool's `structuredContent`; progress on stderr; Ctrl-C cancels.
    Optimize(reticle_host::optimize_cli::OptimizeFlags),
    /// Operate a running host over its control socket: `health`, `telemetry`,
    /// `events --since 10m`, `rollout --worker-bin PATH`, `rollback`, `reexec [--bin PATH]`.
    Ctl(reticle_host::ctl::CtlArgs),
    /// Evaluate a shipped layout end to end and write a PNG with the violations drawn on
    /// it: `reticle demo [--out DIR]`. Prints the report table and the picture's path.
    Demo(reticle_host::demo_cli::DemoArgs),
    /// Print the effective settings: every variable the host reads, its value and where
    /// it came from (default, env, an old name); `reticle ctl config` asks a running host.
    Config {
        /// Print JSON (`[{name, value, source, read_by, meaning}]`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks: `reticle bench litho [--gpu] [--json]` (run by the worker binary) times
    /// one 2048×2048 3-corner ICCAD-2013 simulation and its ratio to the naive path;
    /// `reticle bench output-schema` (in the host) times the output-schema check of a
    /// result against serializing it; `reticle bench chip` (in the host) measures
    /// whole-layout evaluation throughput. `reticle bench --help` lists the options.
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for the benchmark (see `reticle bench --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Options of `reticle serve`; each one not given takes its setting (`reticle config`
/// lists them: the variable named below, else the default).
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Ready file written while the server loop runs (`<pid> <ISO8601>`)
    /// [setting: MCP_READY_FILE, default /tmp/mcp.ready].
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Directory of the JSONL log (`reticle.jsonl`) and event log (`events.jsonl`)
    /// [setting: RETICLE_LOG_DIR, default $XDG_STATE_HOME/reticle].
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Log to stderr only.
    #[arg(long)]
    no_log_file: bool,
    /// Log filter (`tracing` syntax), e.g. `info` or `reticle_mcp=debug`
    /// [setting: RETICLE_LOG, default info].
    #[arg(long)]
    log: Option<String>,
    /// After SIGTERM/SIGINT, how long in-flight requests may run, in ms
    /// [setting: RETICLE_DRAIN_MS, default 30000].
    #[arg(long)]
    drain_ms: Option<u64>,
    /// After stdin closes, how long in-flight requests may run before cancellation, in
    /// ms, at most 900 [setting: RETICLE_EOF_GRACE_MS, default 500].
    #[arg(long)]
    eof_grace_ms: Option<u64>,
    /// Directory of extra published schemas (`*.json`), read once at start
    /// [setting: RETICLE_SCHEMAS_DIR].
    #[arg(long)]
    schemas_dir: Option<PathBuf>,
    /// Directory of extra example documents (`*.json` with a `$schema` member)
    /// [setting: RETICLE_EXAMPLES_DIR].
    #[arg(long)]
    examples_dir: Option<PathBuf>,
    /// Start workers on the first job instead of at start-up
    /// [setting: RETICLE_LAZY_WORKERS].
    #[arg(long)]
    lazy_workers: bool,
    /// How long finished jobs stay pollable, in ms [setting: RETICLE_JOB_TTL_MS,
    /// default 600000].
    #[arg(long)]
    job_ttl_ms: Option<u64>,
    /// Serve MCP over Streamable HTTP on ADDR instead of stdio; `--http` alone listens
    /// on 127.0.0.1:8080 (loopback). Port 0 picks one, written to the ready file's second
    /// line. docs/HTTP.md.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
    http: Option<std::net::SocketAddr>,
    /// Bearer tokens, JSON `{"tokens": [{"name", "token", "allowed_roots"?}]}`
    /// [setting: RETICLE_HTTP_TOKENS_FILE; or RETICLE_HTTP_TOKENS=name=token,…].
    #[arg(long, requires = "http")]
    tokens_file: Option<PathBuf>,
    /// Serve loopback clients without a token (refused on other addresses).
    #[arg(long, requires = "http")]
    anonymous: bool,
    /// The endpoint's URL as clients reach it (behind a TLS proxy), default
    /// http://ADDR/mcp [setting: RETICLE_HTTP_PUBLIC_URL].
    #[arg(long, requires = "http")]
    public_url: Option<String>,
    /// An Origin allowed besides loopback ones (repeatable).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "http")]
    allowed_origins: Vec<String>,
    /// An authorization server that issues the tokens, named in the RFC 9728
    /// metadata (repeatable).
    #[arg(long = "authorization-server", value_name = "URL", requires = "http")]
    authorization_servers: Vec<String>,
    /// Client sessions at once [setting: RETICLE_HTTP_MAX_SESSIONS, default 64].
    #[arg(long, requires = "http")]
    max_sessions: Option<usize>,
    /// A client with nothing in flight expires after this many seconds
    /// [setting: RETICLE_HTTP_IDLE_S, default 1800].
    #[arg(long, requires = "http")]
    idle_seconds: Option<u64>,
    /// How long a dropped legacy stream may be resumed (`Last-Event-ID`) before its
    /// request is cancelled, in ms [setting: RETICLE_HTTP_RESUME_GRACE_MS, default 750].
    #[arg(long, requires = "http")]
    resume_grace_ms: Option<u64>,
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(reticle_host::eval_cli::spread_box_args(std::env::args_os()));
    // Every setting is read once, before anything can start a job (docs/SECURITY.md):
    // a limit that does not parse stops every command.
    let config = match reticle_config::init() {
        Ok(config) => std::sync::Arc::new(config),
        Err(e) => {
            eprintln!("reticle: {e}");
            return ExitCode::from(2);
        }
    };
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        Some(Command::Validate {
            path,
            schema,
            schemas_dir,
        }) => {
            let schemas_dir = schemas_dir.or_else(|| config.serve.schemas_dir.clone());
            return reticle_host::cli::validate(&path, schema.as_deref(), schemas_dir.as_deref());
        }
        Some(Command::Bench { args }) => return reticle_host::cli::bench(&args, &config),
        Some(Command::Eval(args)) => return reticle_host::eval_cli::eval(&args, &config),
        Some(Command::Optimize(args)) => {
            return reticle_host::optimize_cli::optimize(&args, &config);
        }
        Some(Command::Ctl(args)) => return reticle_host::ctl::ctl(&args, &config),
        Some(Command::Demo(args)) => return reticle_host::demo_cli::demo(&args, &config),
        Some(Command::Config { json }) => return reticle_host::cli::print_config(&config, json),
        None => cli.serve,
    };
    if let Some(e) = config.errors_of(ConfigSeverity::Serve).next() {
        eprintln!("reticle: {}", e.message);
        return ExitCode::from(2);
    }
    let settings = &config.serve;
    let options = ServeOptions {
        ready_file: args
            .ready_file
            .unwrap_or_else(|| settings.ready_file.clone()),
        log_dir: if args.no_log_file {
            None
        } else {
            Some(
                args.log_dir
                    .or_else(|| settings.log_dir.clone())
                    .unwrap_or_else(|| settings.default_log_dir.clone()),
            )
        },
        log_filter: args.log.unwrap_or_else(|| settings.log_filter.clone()),
        policy: ShutdownPolicy {
            drain: args.drain_ms.map_or(settings.drain, Duration::from_millis),
            eof_grace: args
                .eof_grace_ms
                .map_or(settings.eof_grace, |ms| Duration::from_millis(ms.min(900))),
        },
        job_ttl: args
            .job_ttl_ms
            .map_or(settings.job_ttl, Duration::from_millis),
        schemas_dir: args.schemas_dir.or_else(|| settings.schemas_dir.clone()),
        examples_dir: args.examples_dir.or_else(|| settings.examples_dir.clone()),
        start_workers: !(args.lazy_workers || settings.lazy_workers),
    };
    if let Some(addr) = args.http {
        let set = &settings.http;
        let http = reticle_mcp::http::HttpOptions {
            addr,
            tokens_file: args.tokens_file.or_else(|| set.tokens_file.clone()),
            tokens_env: set.tokens.clone(),
            anonymous: args.anonymous,
            public_url: args.public_url.or_else(|| set.public_url.clone()),
            allowed_origins: args.allowed_origins,
            authorization_servers: args.authorization_servers,
            limits: reticle_mcp::http::HttpLimits {
                max_body: reticle_transport::frame::MAX_FRAME_BYTES,
                max_clients: args.max_sessions.unwrap_or(set.max_sessions).max(1),
                idle: args
                    .idle_seconds
                    .map_or(set.idle, |s| Duration::from_secs(s.max(1))),
                resume_grace: args
                    .resume_grace_ms
                    .map_or(set.resume_grace, |ms| Duration::from_millis(ms.min(60_000))),
            },
        };
        return match reticle_mcp::http::serve_http(options, http, std::sync::Arc::clone(&config)) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("reticle: {e:#}");
                tracing::error!(error = %e, "reticle serve --http failed");
                ExitCode::from(2)
            }
        };
    }
    match serve(options, config) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "reticle serve failed");
            ExitCode::FAILURE
        }
    }
}
