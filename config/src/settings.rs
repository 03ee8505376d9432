//! The list of settings: names, old names, units, defaults, how each value parses, and
//! the record of where each effective value came from.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::limits::{self, HostLimits};
use super::names::{
    ARTIFACT_ROOT_ENV, DEFAULT_EVENTS_KEEP, DEFAULT_EVENTS_MAX_BYTES, DEFAULT_READY_FILE,
    DEFAULT_SESSION_TTL_SECONDS, EVENTS_KEEP_ENV, EVENTS_MAX_BYTES_ENV, JOB_TIMEOUT_ENV,
    SESSION_TTL_ENV, WORKER_BIN_ENV, WORKER_MEMORY_ENV, WORKERS_ENV, default_worker_exe,
};
use super::{
    Config, ConfigError, ConfigSeverity, ExecutorKind, ExecutorSettings, ProcessEnv, ServeSettings,
    ToolSettings, WorkerSettings,
};

mod http;

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingSource {
    /// Not set: the default.
    Default,
    /// The variable of that name.
    Env,
    /// A variable's old name, still accepted (README, docs/DECISIONS.md D53).
    OldName(&'static str),
    /// Set but not usable: the default is in force (a warning was logged), or the
    /// command that needs it stops.
    Invalid,
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Env => f.write_str("env"),
            Self::OldName(old) => write!(f, "env (old name {old})"),
            Self::Invalid => f.write_str("env (invalid)"),
        }
    }
}

impl Serialize for SettingSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One setting as `reticle config` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The variable.
    pub name: &'static str,
    /// The effective value, as text (empty: none).
    pub value: String,
    /// Where it came from.
    pub source: SettingSource,
    /// Which process reads it: `host` or `workers` (passed through, D33).
    pub read_by: &'static str,
    /// What it sets.
    pub meaning: &'static str,
}

/// A variable's name and the old names still accepted for it.
struct Spec {
    name: &'static str,
    old: &'static [&'static str],
    meaning: &'static str,
}

const fn spec(name: &'static str, meaning: &'static str) -> Spec {
    Spec {
        name,
        old: &[],
        meaning,
    }
}

/// Setting: the KLayout DRC time limit, seconds (renamed for the `_S` suffix).
pub const DRC_TIMEOUT_ENV: &str = "RETICLE_DRC_TIMEOUT_S";
/// The old name of [`DRC_TIMEOUT_ENV`], still accepted.
pub const DRC_TIMEOUT_OLD_ENV: &str = "RETICLE_DRC_TIMEOUT_SECONDS";
/// Default of `RETICLE_BACKEND_ASSETS_PATH`.
pub const DEFAULT_ASSETS_PATH: &str = "/reticle-assets/";
/// Setting: list the debug tools.
pub const DEBUG_TOOLS_ENV: &str = "RETICLE_DEBUG_TOOLS";
/// Setting (fault tests, with the debug tools only): `<tool>:<ms>` holds that tool's answer
/// after its effect, so a test can interrupt a call whose effect already happened.
pub const DEBUG_ANSWER_DELAY_ENV: &str = "RETICLE_DEBUG_ANSWER_DELAY";

/// Reads variables through a lookup and records what it read.
struct SettingsReader<'a> {
    lookup: &'a dyn Fn(&str) -> Option<OsString>,
    settings: Vec<Setting>,
    errors: Vec<ConfigError>,
    warnings: Vec<String>,
}

impl SettingsReader<'_> {
    /// The raw value of `spec` (its name first, then its old names); empty is unset.
    fn raw(&self, spec: &Spec) -> Option<(OsString, SettingSource)> {
        std::iter::once((spec.name, SettingSource::Env))
            .chain(
                spec.old
                    .iter()
                    .map(|old| (*old, SettingSource::OldName(old))),
            )
            .find_map(|(name, source)| {
                (self.lookup)(name)
                    .filter(|v| !v.is_empty())
                    .map(|v| (v, source))
            })
    }

    fn record(&mut self, spec: &Spec, value: String, source: SettingSource, read_by: &'static str) {
        self.settings.push(Setting {
            name: spec.name,
            value,
            source,
            read_by,
            meaning: spec.meaning,
        });
    }

    /// A string setting (`None` when unset).
    fn text(&mut self, spec: &Spec) -> Option<String> {
        let raw = self.raw(spec);
        let value = raw.as_ref().map(|(v, _)| v.to_string_lossy().into_owned());
        let source = raw.map_or(SettingSource::Default, |(_, s)| s);
        self.record(spec, value.clone().unwrap_or_default(), source, "host");
        value
    }

    /// A string setting with a default.
    fn text_or(&mut self, spec: &Spec, default: &str) -> String {
        let raw = self.raw(spec);
        let (value, source) = match raw {
            Some((v, source)) => (v.to_string_lossy().into_owned(), source),
            None => (default.to_owned(), SettingSource::Default),
        };
        self.record(spec, value.clone(), source, "host");
        value
    }

    /// A path setting (`None` when unset).
    fn path(&mut self, spec: &Spec) -> Option<PathBuf> {
        let raw = self.raw(spec);
        let source = raw.as_ref().map_or(SettingSource::Default, |(_, s)| *s);
        let value = raw.map(|(v, _)| PathBuf::from(v));
        let shown = value
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        self.record(spec, shown, source, "host");
        value
    }

    /// A path setting with a default: the effective value is what is shown.
    fn path_or(&mut self, spec: &Spec, default: PathBuf) -> (PathBuf, SettingSource) {
        let (value, source) = match self.raw(spec) {
            Some((v, source)) => (PathBuf::from(v), source),
            None => (default, SettingSource::Default),
        };
        self.record(spec, value.display().to_string(), source, "host");
        (value, source)
    }

    /// A non-negative integer; a malformed value is reported per `on_error` and the
    /// default is in force.
    fn integer(&mut self, spec: &Spec, default: u64, unit: &str, on_error: OnError) -> u64 {
        let Some((raw, source)) = self.raw(spec) else {
            self.record(spec, default.to_string(), SettingSource::Default, "host");
            return default;
        };
        let raw = raw.to_string_lossy().into_owned();
        match raw.trim().parse::<u64>() {
            Ok(value) => {
                self.record(spec, value.to_string(), source, "host");
                value
            }
            Err(_) => {
                let used = match source {
                    SettingSource::OldName(old) => old,
                    _ => spec.name,
                };
                match on_error {
                    OnError::Stop(severity, what) => self.errors.push(ConfigError {
                        name: spec.name,
                        message: format!("{used}={raw:?} is not {what}"),
                        severity,
                    }),
                    OnError::Warn => self.warnings.push(format!(
                        "{used}={raw:?} is not a number of {unit}; using {default}"
                    )),
                }
                self.record(spec, default.to_string(), SettingSource::Invalid, "host");
                default
            }
        }
    }

    /// A switch: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off` (any case).
    fn switch(&mut self, spec: &Spec) -> bool {
        let Some((raw, source)) = self.raw(spec) else {
            self.record(spec, "false".into(), SettingSource::Default, "host");
            return false;
        };
        let raw = raw.to_string_lossy().into_owned();
        let value = match raw.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" => Some(false),
            _ => None,
        };
        match value {
            Some(value) => {
                self.record(spec, value.to_string(), source, "host");
                value
            }
            None => {
                self.errors.push(ConfigError {
                    name: spec.name,
                    message: format!("{}={raw:?} is not true or false", spec.name),
                    severity: ConfigSeverity::Serve,
                });
                self.record(spec, "false".into(), SettingSource::Invalid, "host");
                false
            }
        }
    }

    /// A variable the workers read (passed through by the allow-list, D33): shown, not used.
    fn passed_to_workers(&mut self, spec: &Spec, default: &str) {
        let (value, source) = match self.raw(spec) {
            Some((v, s)) => (v.to_string_lossy().into_owned(), s),
            None => (default.to_owned(), SettingSource::Default),
        };
        self.record(spec, value, source, "workers");
    }
}

/// What a malformed integer does.
#[derive(Clone, Copy)]
enum OnError {
    /// Stops the commands `ConfigSeverity` names; the text says what the value should be.
    Stop(ConfigSeverity, &'static str),
    /// The default is used, with a warning once logging is up.
    Warn,
}

const NON_NEGATIVE: &str = "a non-negative integer";

/// Reads every setting through `lookup`.
pub(super) fn read(lookup: &dyn Fn(&str) -> Option<OsString>) -> Config {
    let process = ProcessEnv {
        home: lookup("HOME"),
        path: lookup("PATH"),
        xdg_state_home: lookup("XDG_STATE_HOME"),
        xdg_runtime_dir: lookup("XDG_RUNTIME_DIR"),
        data_dir: lookup("RETICLE_DATA_DIR").map(PathBuf::from),
        vars: Vec::new(),
    };
    let mut r = SettingsReader {
        lookup,
        settings: Vec::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let serve = read_serve(&mut r, &process);
    let workers = read_workers(&mut r);
    let limits = read_limits(&mut r);
    let tools = read_tools(&mut r);
    let executor = read_executor(&mut r, &tools);
    for (name, default, meaning) in [
        (
            "RETICLE_BACKEND",
            "auto",
            "imaging backend in workers: auto, gpu or cpu",
        ),
        (
            "RETICLE_KERNEL_CACHE_DIR",
            "~/.cache/reticle/kernels",
            "where workers keep built SOCS kernels (off: memory only)",
        ),
        (
            "RETICLE_DATA_DIR",
            "../shared/data",
            "reference data for benchmarks",
        ),
    ] {
        r.passed_to_workers(
            &Spec {
                name,
                old: &[],
                meaning,
            },
            default,
        );
    }
    if lookup("RETICLE_CHECK_OUTPUT").is_some() {
        r.settings.push(Setting {
            name: "RETICLE_CHECK_OUTPUT",
            value: "ignored".into(),
            source: SettingSource::Env,
            read_by: "host",
            meaning: "no effect: every result is checked against its output schema (D52)",
        });
    }
    Config {
        serve,
        workers,
        limits,
        tools,
        executor,
        process,
        settings: r.settings,
        errors: r.errors,
        warnings: r.warnings,
    }
}

fn read_serve(r: &mut SettingsReader<'_>, process: &ProcessEnv) -> ServeSettings {
    let stop = OnError::Stop(ConfigSeverity::Serve, NON_NEGATIVE);
    ServeSettings {
        ready_file: r
            .path_or(
                &spec(
                    "MCP_READY_FILE",
                    "ready file, written as `<pid> <ISO8601>` while the server loop runs",
                ),
                PathBuf::from(DEFAULT_READY_FILE),
            )
            .0,
        log_dir: {
            let (dir, source) = r.path_or(
                &spec(
                    "RETICLE_LOG_DIR",
                    "directory of reticle.jsonl and events.jsonl (default: $XDG_STATE_HOME/reticle)",
                ),
                default_log_dir(process),
            );
            (source != SettingSource::Default).then_some(dir)
        },
        default_log_dir: default_log_dir(process),
        log_filter: r.text_or(&spec("RETICLE_LOG", "log filter (tracing syntax)"), "info"),
        drain: Duration::from_millis(r.integer(
            &spec(
                "RETICLE_DRAIN_MS",
                "after SIGTERM/SIGINT, how long in-flight requests may finish",
            ),
            30_000,
            "milliseconds",
            stop,
        )),
        eof_grace: Duration::from_millis(
            r.integer(
                &spec(
                    "RETICLE_EOF_GRACE_MS",
                    "after stdin closes, grace before in-flight requests are cancelled (max 900)",
                ),
                500,
                "milliseconds",
                stop,
            )
            .min(900),
        ),
        schemas_dir: r.path(&spec(
            "RETICLE_SCHEMAS_DIR",
            "directory of extra published schemas",
        )),
        examples_dir: r.path(&spec(
            "RETICLE_EXAMPLES_DIR",
            "directory of extra example documents",
        )),
        lazy_workers: r.switch(&spec(
            "RETICLE_LAZY_WORKERS",
            "start workers on the first job instead of at start-up",
        )),
        job_ttl: Duration::from_millis(r.integer(
            &spec(
                "RETICLE_JOB_TTL_MS",
                "how long a finished job stays pollable",
            ),
            600_000,
            "milliseconds",
            stop,
        )),
        events_max_bytes: r
            .integer(
                &spec(
                    EVENTS_MAX_BYTES_ENV,
                    "size at which events.jsonl is rotated (at least 4096)",
                ),
                DEFAULT_EVENTS_MAX_BYTES,
                "bytes",
                OnError::Warn,
            )
            // A cap below one record would rotate on every write; 4 KiB is the floor.
            .max(4096),
        events_keep: u32::try_from(r.integer(
            &spec(
                EVENTS_KEEP_ENV,
                "rotated event files kept (at most 100)",
            ),
            u64::from(DEFAULT_EVENTS_KEEP),
            "files",
            OnError::Warn,
        ))
        .unwrap_or(u32::MAX)
        .min(100),
        debug_tools: r.switch(&spec(
            DEBUG_TOOLS_ENV,
            "list the debug tools (fault tests only)",
        )),
        debug_answer_delay: r
            .text(&spec(
                DEBUG_ANSWER_DELAY_ENV,
                "`<tool>:<ms>`: hold that tool's answer after its effect (fault tests, only with RETICLE_DEBUG_TOOLS)",
            ))
            .and_then(|text| parse_answer_delay(&text)),
        http: http::read_http(r),
    }
}

/// `<tool>:<ms>` → `(tool, delay)`; `None` (ignored) for anything else.
fn parse_answer_delay(text: &str) -> Option<(String, Duration)> {
    let (tool, ms) = text.split_once(':')?;
    let ms: u64 = ms.trim().parse().ok()?;
    (!tool.is_empty()).then(|| (tool.to_owned(), Duration::from_millis(ms.min(60_000))))
}

fn read_workers(r: &mut SettingsReader<'_>) -> WorkerSettings {
    let stop = OnError::Stop(ConfigSeverity::Workers, NON_NEGATIVE);
    let workers = r.integer(
        &spec(WORKERS_ENV, "worker processes in the pool"),
        1,
        "workers",
        OnError::Stop(ConfigSeverity::Workers, "a number"),
    );
    let (worker_bin, source) = r.path_or(
        &spec(
            WORKER_BIN_ENV,
            "the worker binary (default: reticle-worker next to reticle)",
        ),
        default_worker_exe(),
    );
    let worker_bin = (source != SettingSource::Default).then_some(worker_bin);
    let timeout_s = r.integer(
        &spec(
            JOB_TIMEOUT_ENV,
            "wall time of one attempt on a worker (0: no limit)",
        ),
        600,
        "seconds",
        stop,
    );
    let memory_mb = r.integer(
        &spec(
            WORKER_MEMORY_ENV,
            "resident memory of a busy worker; RLIMIT_DATA is twice this (0: no limit)",
        ),
        8192,
        "MiB",
        stop,
    );
    WorkerSettings {
        workers: usize::try_from(workers).unwrap_or(usize::MAX),
        worker_bin,
        job_timeout: (timeout_s > 0).then(|| Duration::from_secs(timeout_s)),
        memory_limit_bytes: (memory_mb > 0).then(|| memory_mb.saturating_mul(1 << 20)),
    }
}

fn read_executor(r: &mut SettingsReader<'_>, tools: &ToolSettings) -> ExecutorSettings {
    let raw = r.text_or(
        &spec(
            "RETICLE_EXECUTOR",
            "where whole-layout tiles run: local (the worker pool) or slurm (a job array)",
        ),
        "local",
    );
    let kind = ExecutorKind::parse(&raw).unwrap_or_else(|message| {
        r.errors.push(ConfigError {
            name: "RETICLE_EXECUTOR",
            message: format!("RETICLE_EXECUTOR: {message}"),
            severity: ConfigSeverity::Fatal,
        });
        ExecutorKind::Local
    });
    let partition = r.text(&spec(
        "RETICLE_SLURM_PARTITION",
        "slurm: partition of the job arrays (unset: the cluster's default)",
    ));
    let account = r.text(&spec(
        "RETICLE_SLURM_ACCOUNT",
        "slurm: account charged (unset: the user's default)",
    ));
    let time_limit = r.text(&spec(
        "RETICLE_SLURM_TIME_LIMIT",
        "slurm: --time of each array element (unset: the partition's)",
    ));
    let tiles_per_task = r
        .integer(
            &spec(
                "RETICLE_SLURM_TILES_PER_TASK",
                "slurm: tiles each array element runs",
            ),
            8,
            "tiles",
            OnError::Stop(ConfigSeverity::Fatal, "a positive integer"),
        )
        .max(1);
    let (shared_dir, _) = r.path_or(
        &spec(
            "RETICLE_SLURM_SHARED_DIR",
            "slurm: directory shared by the host and the nodes (job directories, 0700)",
        ),
        tools.artifact_root.join("slurm"),
    );
    ExecutorSettings {
        kind,
        partition,
        account,
        time_limit,
        tiles_per_task,
        shared_dir,
    }
}

fn read_limits(r: &mut SettingsReader<'_>) -> HostLimits {
    let look = r.lookup;
    let parsed = HostLimits::from_lookup(|name| look(name).and_then(|v| v.into_string().ok()));
    let limits = parsed.clone().unwrap_or_default();
    if let Err(message) = parsed {
        let name = limits::SETTINGS
            .iter()
            .map(|(name, _)| *name)
            .find(|name| message.starts_with(name))
            .unwrap_or("RETICLE_MAX_*");
        r.errors.push(ConfigError {
            name,
            message,
            severity: ConfigSeverity::Fatal,
        });
    }
    for (name, meaning) in limits::SETTINGS {
        let source = if look(name).is_some() {
            SettingSource::Env
        } else {
            SettingSource::Default
        };
        r.settings.push(Setting {
            name,
            value: limits
                .value_of(name)
                .map(|v| v.to_string())
                .unwrap_or_default(),
            source,
            read_by: "host",
            meaning,
        });
    }
    limits
}

fn read_tools(r: &mut SettingsReader<'_>) -> ToolSettings {
    let allowed_roots = r.raw(&spec("RETICLE_ALLOWED_ROOTS", ""));
    r.record(
        &spec(
            "RETICLE_ALLOWED_ROOTS",
            "`:`-separated directories tools may read (else the client's roots, else the cwd)",
        ),
        allowed_roots
            .as_ref()
            .map(|(v, _)| v.to_string_lossy().into_owned())
            .unwrap_or_default(),
        allowed_roots
            .as_ref()
            .map_or(SettingSource::Default, |(_, s)| *s),
        "host",
    );
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let artifact_root = {
        let configured = r.raw(&spec(ARTIFACT_ROOT_ENV, ""));
        let root = cwd.join(
            configured
                .as_ref()
                .map_or_else(|| PathBuf::from(".artifacts"), |(v, _)| PathBuf::from(v)),
        );
        r.record(
            &spec(
                ARTIFACT_ROOT_ENV,
                "where layout sessions and jobs keep their artifacts",
            ),
            root.display().to_string(),
            configured.map_or(SettingSource::Default, |(_, s)| s),
            "host",
        );
        root
    };
    let session_ttl_s = r.integer(
        &spec(
            SESSION_TTL_ENV,
            "idle lifetime of a layout session and of a finished job's artifacts",
        ),
        DEFAULT_SESSION_TTL_SECONDS,
        "seconds",
        OnError::Warn,
    );
    let klayout_bin = r.text_or(
        &spec(
            "KLAYOUT_BIN",
            "KLayout binary for run_drc_script (a bare name is looked up on PATH)",
        ),
        "klayout",
    );
    let drc_timeout_s = r.integer(
        &Spec {
            name: DRC_TIMEOUT_ENV,
            old: &[DRC_TIMEOUT_OLD_ENV],
            meaning: "wall-time limit of one KLayout DRC run",
        },
        600,
        "seconds",
        OnError::Warn,
    );
    let backend_url = r.text(&spec(
        "RETICLE_BACKEND_URL",
        "where populate_backend posts documents",
    ));
    // Set but empty is a value here (the path is appended as given).
    let assets_spec = spec(
        "RETICLE_BACKEND_ASSETS_PATH",
        "path appended to RETICLE_BACKEND_URL",
    );
    let backend_assets_path = match (r.lookup)(assets_spec.name) {
        Some(v) => {
            let v = v.to_string_lossy().into_owned();
            r.record(&assets_spec, v.clone(), SettingSource::Env, "host");
            v
        }
        None => {
            let v = DEFAULT_ASSETS_PATH.to_owned();
            r.record(&assets_spec, v.clone(), SettingSource::Default, "host");
            v
        }
    };
    ToolSettings {
        allowed_roots: allowed_roots.map(|(v, _)| v),
        artifact_root,
        session_ttl: Duration::from_secs(session_ttl_s),
        klayout_bin,
        drc_timeout: Duration::from_secs(drc_timeout_s),
        backend_url,
        backend_assets_path,
    }
}

/// `$XDG_STATE_HOME/reticle`, else `~/.local/state/reticle`, else under the temp dir.
fn default_log_dir(process: &ProcessEnv) -> PathBuf {
    process
        .xdg_state_home
        .as_ref()
        .map(PathBuf::from)
        .or_else(|| {
            process
                .home
                .as_ref()
                .map(|h| PathBuf::from(h).join(".local/state"))
        })
        .unwrap_or_else(std::env::temp_dir)
        .join("reticle")
}

/// Settings as `reticle config` prints them: one aligned line each (name, value,
/// source, meaning), from their JSON form (a running host's answers in that form too).
#[must_use]
pub fn table(settings: &serde_json::Value) -> String {
    let field = |s: &serde_json::Value, key: &str| s[key].as_str().unwrap_or("").to_owned();
    let rows: Vec<[String; 4]> = settings
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let value = field(s, "value");
            let mut source = field(s, "source");
            if s["read_by"] == "workers" {
                source.push_str(", read by workers");
            }
            [
                field(s, "name"),
                if value.is_empty() { "-".into() } else { value },
                source,
                field(s, "meaning"),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (name, value, source) = (width(0), width(1).min(48), width(2));
    rows.iter()
        .map(|[n, v, s, m]| format!("{n:<name$}  {v:<value$}  {s:<source$}  {m}\n"))
        .collect()
}
