//! `reticle ctl`: the operator's client of a running host's control socket
//! (`reticle_mcp::control`).
//!
//! `reticle ctl <verb>` finds the host by `--socket`, else by the pid in its ready
//! file (`MCP_READY_FILE`), and prints the answer. `ctl events` reads the event log
//! files directly, so it also works after the host is gone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use reticle_dispatch::events::{self, Since};
use reticle_mcp::control::{request, socket_path};
use serde_json::{Value, json};

/// Writes one line to stdout (a `ctl` command's output is its own; the host's stdout
/// rule does not apply to this separate process).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `reticle ctl` arguments.
#[derive(Debug, clap::Args)]
pub struct CtlArgs {
    /// The host's control socket (default: found through the ready file).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    /// The host's ready file (its first field is the host pid) [setting: MCP_READY_FILE,
    /// default /tmp/mcp.ready].
    #[arg(long, global = true)]
    ready_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    verb: CtlVerb,
}

/// `reticle ctl` verbs.
#[derive(Debug, clap::Subcommand)]
enum CtlVerb {
    /// Lifecycle, generation, restarts, rollout state, last fault, workers, queue.
    Health {
        /// Print the JSON payload instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Counts, per-method latencies, last error, last restart fault.
    Telemetry {
        /// Print the JSON payload instead of text.
        #[arg(long)]
        json: bool,
        /// When no host answers (it exited, e.g. after its client disconnected), print
        /// the telemetry it recorded when it stopped, from the event log in this
        /// directory [setting: RETICLE_LOG_DIR].
        #[arg(long)]
        log_dir: Option<PathBuf>,
    },
    /// The event log, one JSON record per line, oldest first.
    Events {
        /// `seq:N`, an RFC 3339 time, or a duration back from now (`10m`, `2h`).
        #[arg(long, default_value = "all")]
        since: String,
        /// Read this directory instead of asking the host where its log is
        /// [setting: RETICLE_LOG_DIR].
        #[arg(long)]
        log_dir: Option<PathBuf>,
    },
    /// The running host's effective settings (what `reticle config` prints for this
    /// shell's environment, as the host read its own at start).
    Config {
        /// Print the JSON list instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Blue/green rollout of a new worker binary.
    Rollout {
        /// The new `reticle-worker`.
        #[arg(long)]
        worker_bin: PathBuf,
    },
    /// Roll back to the worker binary before the last rollout.
    Rollback,
    /// Replace the host binary in place (same pid, same client session).
    Reexec {
        /// The new `reticle` binary (default: the one running).
        #[arg(long)]
        bin: Option<PathBuf>,
        /// How long to wait for the new image to answer, in ms.
        #[arg(long, default_value_t = 60_000)]
        wait_ms: u64,
    },
}

/// Runs `reticle ctl`. Exit 0 done, 1 the host refused or the operation failed,
/// 2 the host could not be reached or the arguments are wrong.
#[must_use]
pub fn ctl(args: &CtlArgs, config: &reticle_config::Config) -> ExitCode {
    match run_ctl(args, config) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("reticle ctl: {message}");
            ExitCode::from(2)
        }
    }
}

fn run_ctl(args: &CtlArgs, config: &reticle_config::Config) -> Result<ExitCode, String> {
    let ready_file = args
        .ready_file
        .clone()
        .unwrap_or_else(|| config.serve.ready_file.clone());
    let socket = || -> Result<PathBuf, String> {
        if let Some(socket) = &args.socket {
            return Ok(socket.clone());
        }
        let text = std::fs::read_to_string(&ready_file).map_err(|e| {
            format!(
                "cannot read the ready file {} ({e}); is the host running? (--socket or MCP_READY_FILE)",
                ready_file.display()
            )
        })?;
        let pid: u32 = text
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("{} does not start with a pid", ready_file.display()))?;
        socket_path(pid, config.process.xdg_runtime_dir.as_deref()).map_err(|e| e.to_string())
    };
    let absolute = |p: &Path| -> Result<PathBuf, String> {
        std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
    };
    match &args.verb {
        CtlVerb::Health { json } => {
            let answer = request(&socket()?, &json!({"verb": "health"}))?;
            print_answer(&answer, "health", *json, reticle_tools::health_porcelain)
        }
        CtlVerb::Telemetry { json, log_dir } => {
            let answer = match socket().and_then(|s| request(&s, &json!({"verb": "telemetry"}))) {
                Ok(answer) => answer,
                Err(live) => {
                    let Some(dir) = log_dir.as_ref().or(config.serve.log_dir.as_ref()) else {
                        return Err(live);
                    };
                    let telemetry = last_stop_telemetry(dir).ok_or(format!(
                        "{live}; and no stopped host's telemetry in {}",
                        dir.display()
                    ))?;
                    eprintln!(
                        "reticle ctl: no host answers ({live}); the telemetry host {} recorded when it stopped at {}",
                        telemetry.0["pid"], telemetry.0["ts"]
                    );
                    json!({"ok": true, "telemetry": telemetry.1})
                }
            };
            print_answer(
                &answer,
                "telemetry",
                *json,
                reticle_tools::telemetry_porcelain,
            )
        }
        CtlVerb::Events { since, log_dir } => {
            let since = Since::parse(since, events::unix_ms())?;
            let dir = match log_dir.as_ref().or(config.serve.log_dir.as_ref()) {
                Some(dir) => dir.clone(),
                None => {
                    let answer = request(&socket()?, &json!({"verb": "events"}))?;
                    answer["path"]
                        .as_str()
                        .and_then(|p| Path::new(p).parent().map(Path::to_path_buf))
                        .ok_or("the host keeps no event log file (started with --no-log-file?)")?
                }
            };
            let (records, skipped) = events::read_since(&dir, &since);
            let mut out = std::io::stdout().lock();
            for record in &records {
                writeln!(out, "{record}").map_err(|e| e.to_string())?;
            }
            if skipped > 0 {
                eprintln!("reticle ctl: skipped {skipped} unreadable line(s)");
            }
            Ok(ExitCode::SUCCESS)
        }
        CtlVerb::Config { json } => {
            let answer = request(&socket()?, &json!({"verb": "config"}))?;
            if answer["ok"] != true {
                return print_outcome(&answer);
            }
            if *json {
                say!("{}", answer["settings"]);
            } else {
                let mut out = std::io::stdout().lock();
                write!(out, "{}", reticle_config::table(&answer["settings"]))
                    .map_err(|e| e.to_string())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        CtlVerb::Rollout { worker_bin } => {
            let bin = absolute(worker_bin)?;
            let answer = request(&socket()?, &json!({"verb": "rollout", "worker_bin": bin}))?;
            print_outcome(&answer)
        }
        CtlVerb::Rollback => print_outcome(&request(&socket()?, &json!({"verb": "rollback"}))?),
        CtlVerb::Reexec { bin, wait_ms } => {
            let socket = socket()?;
            let bin = bin.as_deref().map(absolute).transpose()?;
            let answer = request(&socket, &json!({"verb": "reexec", "bin": bin}))?;
            if answer["ok"] != true {
                return print_outcome(&answer);
            }
            let before = answer["reexecs_before"].as_u64().unwrap_or(0);
            let deadline = Instant::now() + Duration::from_millis(*wait_ms);
            loop {
                std::thread::sleep(Duration::from_millis(50));
                if let Ok(health) = request(&socket, &json!({"verb": "health"}))
                    && health["health"]["server"]["reexecs"].as_u64() > Some(before)
                {
                    say!(
                        "reexec done: pid {} now runs {} ({} reexecs)",
                        health["health"]["server"]["pid"],
                        answer["version"].as_str().unwrap_or("?"),
                        health["health"]["server"]["reexecs"]
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                if Instant::now() >= deadline {
                    eprintln!("reticle ctl: the new image did not answer within {wait_ms} ms");
                    return Ok(ExitCode::from(1));
                }
            }
        }
    }
}

/// The last `host.stop` record in the event log under `dir` that carries telemetry:
/// (the record, its telemetry).
fn last_stop_telemetry(dir: &Path) -> Option<(Value, Value)> {
    let (records, _) = events::read_since(dir, &Since::All);
    records
        .into_iter()
        .rev()
        .find(|r| r["event"] == "host.stop" && r["telemetry"].is_object())
        .map(|mut r| {
            let telemetry = r["telemetry"].take();
            (r, telemetry)
        })
}

fn print_answer(
    answer: &Value,
    key: &str,
    json: bool,
    porcelain: fn(&Value, reticle_tools::Detail) -> String,
) -> Result<ExitCode, String> {
    if answer["ok"] != true {
        return print_outcome(answer);
    }
    if json {
        say!("{}", answer[key]);
    } else {
        say!("{}", porcelain(&answer[key], reticle_tools::Detail::Full));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_outcome(answer: &Value) -> Result<ExitCode, String> {
    if answer["ok"] == true {
        say!("{answer}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "reticle ctl: {}",
            answer["error"].as_str().unwrap_or("the host refused")
        );
        say!("{answer}");
        Ok(ExitCode::from(1))
    }
}
