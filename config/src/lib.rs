//! Every setting of the host, read once from the environment when the process starts.
//!
//! [`Config::from_lookup`] reads each variable the host knows (`RETICLE_*`, seed 003's
//! `KLAYOUT_*`, seed 001's `MCP_READY_FILE`, and the process basics the host needs:
//! `HOME`, `PATH`, `XDG_STATE_HOME`, `XDG_RUNTIME_DIR`) into typed fields, with the
//! unit in the variable's name (`_MS`, `_S`, `_MB`, `_BYTES`). [`init`] does it once, in
//! `main`; every part is handed the settings it needs (no global). No other module of the host reads the
//! environment: the worker environment is passed through an allow-list at spawn time
//! (D33), and the reexec handover variable is libmcp's.
//!
//! A value that does not parse is handled as it always was for that setting: the
//! resource limits and the serve timings stop the command (exit 2), the pool settings
//! fail the worker pool's start (tools answer `WORKER_FAULT` naming the variable), the
//! event-log and session-TTL settings fall back to their default with a warning. Each
//! setting also records where its value came from, for `reticle config` and `reticle ctl
//! config` ([`Config::settings`]).

pub mod limits;
pub mod names;
mod settings;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use limits::HostLimits;

pub use settings::{
    DEBUG_TOOLS_ENV, DEFAULT_ASSETS_PATH, DRC_TIMEOUT_ENV, DRC_TIMEOUT_OLD_ENV, Setting,
    SettingSource, table,
};

/// How a malformed value is handled: which commands it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSeverity {
    /// Every command stops at start (exit 2): a limit the host could not honour.
    Fatal,
    /// `reticle serve` stops at start (exit 2); other commands do not read it.
    Serve,
    /// The worker pool does not start; tools answer `WORKER_FAULT` naming the variable
    /// (`reticle eval`/`demo`/`bench` stop with exit 2).
    Workers,
}

/// A value that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub name: &'static str,
    /// What is wrong, naming the variable and its value.
    pub message: String,
    /// Which commands it stops.
    pub severity: ConfigSeverity,
}

/// Settings of `reticle serve` (each can also be given as a command-line flag).
#[derive(Debug, Clone)]
pub struct ServeSettings {
    /// `MCP_READY_FILE`: written as `<pid> <ISO8601>` while the server loop runs.
    pub ready_file: PathBuf,
    /// `RETICLE_LOG_DIR`: directory of `reticle.jsonl` and `events.jsonl` (`None`: not
    /// set, [`Self::default_log_dir`]).
    pub log_dir: Option<PathBuf>,
    /// `$XDG_STATE_HOME/reticle`, else `~/.local/state/reticle`.
    pub default_log_dir: PathBuf,
    /// `RETICLE_LOG`: the `tracing` filter.
    pub log_filter: String,
    /// `RETICLE_DRAIN_MS`: after SIGTERM/SIGINT, how long in-flight requests may run.
    pub drain: Duration,
    /// `RETICLE_EOF_GRACE_MS`: after stdin closes, grace before cancelling (max 900 ms).
    pub eof_grace: Duration,
    /// `RETICLE_SCHEMAS_DIR`: extra published schemas.
    pub schemas_dir: Option<PathBuf>,
    /// `RETICLE_EXAMPLES_DIR`: extra example documents.
    pub examples_dir: Option<PathBuf>,
    /// `RETICLE_LAZY_WORKERS`: start workers on the first job.
    pub lazy_workers: bool,
    /// `RETICLE_JOB_TTL_MS`: how long a finished job stays pollable.
    pub job_ttl: Duration,
    /// `RETICLE_EVENTS_MAX_BYTES`: size at which `events.jsonl` rotates (≥ 4096).
    pub events_max_bytes: u64,
    /// `RETICLE_EVENTS_KEEP`: rotated event files kept (≤ 100).
    pub events_keep: u32,
    /// `RETICLE_DEBUG_TOOLS`: list the debug tools (fault tests; never in production).
    pub debug_tools: bool,
    /// `RETICLE_DEBUG_ANSWER_DELAY` (`<tool>:<ms>`, honoured only with `debug_tools`):
    /// hold that tool's answer for that long after its effect (fault tests).
    pub debug_answer_delay: Option<(String, Duration)>,
    /// `reticle serve --http` (docs/HTTP.md).
    pub http: HttpSettings,
}

/// Settings of `reticle serve --http` (a flag wins over its setting).
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `RETICLE_HTTP_TOKENS_FILE`: the JSON tokens file.
    pub tokens_file: Option<PathBuf>,
    /// `RETICLE_HTTP_TOKENS`: `name=token,…` (printed as hidden by `reticle config`).
    pub tokens: Option<String>,
    /// `RETICLE_HTTP_PUBLIC_URL`: the endpoint as clients reach it.
    pub public_url: Option<String>,
    /// `RETICLE_HTTP_MAX_SESSIONS`: clients at once.
    pub max_sessions: usize,
    /// `RETICLE_HTTP_IDLE_S`: a client idle this long is ended.
    pub idle: Duration,
    /// `RETICLE_HTTP_RESUME_GRACE_MS`: how long a dropped legacy stream may be resumed.
    pub resume_grace: Duration,
}

/// Settings of the worker pool.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `RETICLE_WORKERS`: worker processes in the pool.
    pub workers: usize,
    /// `RETICLE_WORKER_BIN`: the worker binary (default: next to `reticle`).
    pub worker_bin: Option<PathBuf>,
    /// `RETICLE_JOB_TIMEOUT_S`: wall time of one attempt (`None`: no limit).
    pub job_timeout: Option<Duration>,
    /// `RETICLE_WORKER_MEMORY_MB`: resident memory of a busy worker, in bytes (`None`: no limit).
    pub memory_limit_bytes: Option<u64>,
}

/// Settings of the tools.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    /// `RETICLE_ALLOWED_ROOTS`: `:`-separated roots (`None`: the client's, else the cwd).
    pub allowed_roots: Option<OsString>,
    /// `KLAYOUT_MCP_ARTIFACT_ROOT`: where sessions and jobs keep artifacts (absolute).
    pub artifact_root: PathBuf,
    /// `KLAYOUT_MCP_SESSION_TTL_SECONDS`: idle lifetime of a session and of a finished
    /// job's artifacts.
    pub session_ttl: Duration,
    /// `KLAYOUT_BIN`: the KLayout binary (a bare name is looked up on `PATH`).
    pub klayout_bin: String,
    /// `RETICLE_DRC_TIMEOUT_S` (old name `RETICLE_DRC_TIMEOUT_SECONDS`): one KLayout run.
    pub drc_timeout: Duration,
    /// `RETICLE_BACKEND_URL`: where `populate_backend` posts (`None`: not configured).
    pub backend_url: Option<String>,
    /// `RETICLE_BACKEND_ASSETS_PATH`: the path appended to the backend URL.
    pub backend_assets_path: String,
}

/// Which executor runs the tiles of whole-layout jobs (D60).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorKind {
    /// This host's worker pool.
    Local,
    /// A Slurm cluster: one job array per tiled job.
    Slurm,
}

impl ExecutorKind {
    /// `local` or `slurm`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Slurm => "slurm",
        }
    }

    /// Parses `local` or `slurm` (any case).
    ///
    /// # Errors
    /// Any other text, with what is accepted.
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(Self::Local),
            "slurm" => Ok(Self::Slurm),
            other => Err(format!("{other:?} is not an executor (local or slurm)")),
        }
    }
}

/// Settings of the executor (`RETICLE_EXECUTOR`, `RETICLE_SLURM_*`).
#[derive(Debug, Clone)]
pub struct ExecutorSettings {
    /// `RETICLE_EXECUTOR`: `local` (default) or `slurm`.
    pub kind: ExecutorKind,
    /// `RETICLE_SLURM_PARTITION`: the partition arrays are submitted to (`None`: the
    /// cluster's default).
    pub partition: Option<String>,
    /// `RETICLE_SLURM_ACCOUNT`: the account charged (`None`: the user's default).
    pub account: Option<String>,
    /// `RETICLE_SLURM_TIME_LIMIT`: `--time` of each array element (Slurm's syntax:
    /// minutes, `H:MM:SS`, `D-HH`), `None`: the partition's.
    pub time_limit: Option<String>,
    /// `RETICLE_SLURM_TILES_PER_TASK`: tiles each array element runs.
    pub tiles_per_task: u64,
    /// `RETICLE_SLURM_SHARED_DIR`: the directory on the file system the host and the
    /// nodes share; each job gets a private (0700) directory under it.
    pub shared_dir: PathBuf,
}

/// Process basics the host uses (not settings of its own).
#[derive(Debug, Clone, Default)]
pub struct ProcessEnv {
    /// The whole environment as it was when [`Config::from_env`] read it (empty from
    /// [`Config::from_lookup`]): the one snapshot. Its allow-listed part reaches each
    /// worker and `sbatch` (D33); nothing else of the host reads the environment.
    pub vars: Vec<(OsString, OsString)>,
    /// `RETICLE_DATA_DIR`: the reference data (benchmarks; `None`: not set, each user
    /// falls back to `../shared/data` beside the workspace).
    pub data_dir: Option<PathBuf>,
    /// `HOME`: `~` in path arguments, the default log directory.
    pub home: Option<OsString>,
    /// `PATH`: where a bare `KLAYOUT_BIN` is looked up.
    pub path: Option<OsString>,
    /// `XDG_STATE_HOME`: the default log directory.
    pub xdg_state_home: Option<OsString>,
    /// `XDG_RUNTIME_DIR`: the control socket and the workers' runtime directories.
    pub xdg_runtime_dir: Option<OsString>,
}

/// Every setting of the host.
#[derive(Debug, Clone)]
pub struct Config {
    /// `reticle serve`.
    pub serve: ServeSettings,
    /// The worker pool.
    pub workers: WorkerSettings,
    /// The resource limits (D34).
    pub limits: HostLimits,
    /// The tools.
    pub tools: ToolSettings,
    /// The executor of whole-layout tiles.
    pub executor: ExecutorSettings,
    /// Process basics.
    pub process: ProcessEnv,
    /// What was read, with its source, for printing.
    settings: Vec<Setting>,
    /// Values that did not parse.
    errors: Vec<ConfigError>,
    /// Fallbacks to report once logging is up.
    warnings: Vec<String>,
}

/// Reads the process environment once: what `main`, the one composition root, does
/// first, before handing the value (or its parts) to every command and part.
///
/// # Errors
/// A [`ConfigSeverity::Fatal`] setting that does not parse (the message names it).
pub fn init() -> Result<Config, String> {
    let config = Config::from_env();
    if let Some(error) = config.errors_of(ConfigSeverity::Fatal).next() {
        return Err(error.message.clone());
    }
    Ok(config)
}

impl Config {
    /// The settings of this process's environment, read once (the snapshot is kept in
    /// [`ProcessEnv::vars`]).
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_vars(std::env::vars_os().collect())
    }

    /// The settings of the environment `vars`, which is kept as [`ProcessEnv::vars`].
    #[must_use]
    pub fn from_vars(vars: Vec<(OsString, OsString)>) -> Self {
        let by_name: std::collections::BTreeMap<&OsString, &OsString> =
            vars.iter().map(|(k, v)| (k, v)).collect();
        let mut config =
            Self::from_lookup(|name| by_name.get(&OsString::from(name)).map(|v| (*v).clone()));
        config.process.vars = vars;
        config
    }

    /// The settings `lookup` (an environment) gives.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Self {
        settings::read(&lookup)
    }

    /// Every setting with its effective value and where it came from, in a fixed order.
    #[must_use]
    pub fn settings(&self) -> &[Setting] {
        &self.settings
    }

    /// Values that did not parse and stop what `severity` names.
    pub fn errors_of(&self, severity: ConfigSeverity) -> impl Iterator<Item = &ConfigError> {
        self.errors.iter().filter(move |e| e.severity == severity)
    }

    /// The first pool setting that did not parse, as the pool's start error.
    ///
    /// # Errors
    /// Its message (it names the variable).
    pub fn worker_settings(&self) -> Result<&WorkerSettings, String> {
        match self.errors_of(ConfigSeverity::Workers).next() {
            Some(error) => Err(error.message.clone()),
            None => Ok(&self.workers),
        }
    }

    /// `RETICLE_WORKERS` when it was set (and parsed), else `None`: a command that would
    /// pick its own worker count (`reticle eval` on a tiled region) defers to it.
    #[must_use]
    pub fn workers_explicit(&self) -> Option<usize> {
        let set = self.settings.iter().any(|s| {
            s.name == names::WORKERS_ENV
                && matches!(s.source, SettingSource::Env | SettingSource::OldName(_))
        });
        set.then_some(self.workers.workers)
    }

    /// Logs the settings that fell back to their default; call once logging is up.
    pub fn log_warnings(&self) {
        for warning in &self.warnings {
            tracing::warn!("{warning}");
        }
    }

    /// The settings as JSON: `[{name, value, source, unit, meaning}]`.
    #[must_use]
    pub fn settings_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).unwrap_or_default()
    }

    /// The settings as an aligned table, one per line (`reticle config`).
    #[must_use]
    pub fn settings_table(&self) -> String {
        table(&self.settings_json())
    }
}

#[cfg(test)]
mod tests;
