//! Helpers for end-to-end tests: find the built binaries, start a host with a
//! private ready file and log directory, talk NDJSON to it, and check that
//! every line it writes is a JSON-RPC 2.0 message.
//!
//! The binaries are the ones `cargo build --workspace --bins` put next to the
//! test executable's `deps/` folder; the README's test command builds them
//! before running the tests.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The fields seed 000 §2 requires on every violation record.
pub const SEED000_RECORD_FIELDS: [&str; 11] = [
    "violation_id",
    "violation_group_id",
    "rule_id",
    "rule_deck",
    "severity",
    "coordinate_frame",
    "location_nm",
    "transforms",
    "context",
    "dedup_strategy",
    "dedup_provenance",
];

/// `target/<profile>/<name>`, next to the running test executable.
///
/// # Panics
/// When the binary was not built (the message says how to build it).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not found: run `cargo build --workspace --bins` before the end-to-end tests",
        path.display()
    );
    path
}

/// `target/release/<name>`: the optimized build of a binary, for tests that must see what a
/// release build does (the README's main command and `run-tests` build it).
///
/// # Panics
/// When the binary was not built: the message names the command that builds it (a test
/// that needs a release binary fails rather than skipping silently).
pub fn release_binary(name: &str) -> PathBuf {
    let path = repo_root().join("target/release").join(name);
    assert!(
        path.exists(),
        "{} not found: run `cargo build --release --locked --bins` before this test",
        path.display()
    );
    path
}

/// The repository root, canonical (tests pass it, or paths under it, as allowed roots).
///
/// # Panics
/// When the crate is not inside its repository.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

/// `fixtures/` of the repository, canonical.
pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures")
}

/// The tool of [`long_job`].
pub const LONG_JOB_TOOL: &str = "optimize";

/// The arguments of a [`LONG_JOB_TOOL`] call that runs for seconds on any machine, for
/// tests that cancel it, kill its worker, or hand it over across a reexec while it runs:
/// 10 ILT iterations of `lines_and_pad.glp` with the ICCAD-2013 deck (about 2.5 s on two
/// idle cores, sandbox-2c, 2026-12-02; under 300 MB). The 4096² simulation these tests
/// ran before takes 0.4 s now, so it could end before the test acted on it.
pub fn long_job() -> Value {
    serde_json::json!({
        "layout": fixtures_dir().join("layouts/lines_and_pad.glp"),
        "deck": "iccad13_m1",
        "iterations": 10,
        "refine_iterations": 0,
    })
}

/// [`long_job`] with each `(key, value)` of `pairs` set (`wait`, `render`).
pub fn long_job_with(pairs: &[(&str, Value)]) -> Value {
    let mut args = long_job();
    for (key, value) in pairs {
        args[*key] = value.clone();
    }
    args
}

/// The public reference data (`RETICLE_DATA_DIR`, default `../shared/data` beside the
/// repository): ICCAD-2013 kernels and clips, the 45 nm GDS.
pub fn data_dir() -> PathBuf {
    std::env::var_os("RETICLE_DATA_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
        PathBuf::from,
    )
}

/// A running `reticle serve` with piped stdio.
#[derive(Debug)]
pub struct Host {
    /// The child process.
    pub child: Child,
    /// Its stdin (drop it to send EOF).
    pub stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Private directory holding the ready file, logs and stderr.
    pub dir: tempfile::TempDir,
}

impl Host {
    /// Starts the host and waits for its ready file.
    ///
    /// # Panics
    /// When it does not become ready within 20 s.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts the host with extra environment variables and completes the 2025-11-25
    /// `initialize` handshake (request plus `notifications/initialized`).
    ///
    /// # Panics
    /// When it does not become ready within 20 s or does not answer `initialize`.
    pub fn start_initialized(env: &[(&str, &str)]) -> Self {
        let mut host = Self::start_with(env);
        host.request(
            serde_json::json!("init"),
            "initialize",
            serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
        );
        host.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        host
    }

    /// Starts the host with extra environment variables.
    ///
    /// # Panics
    /// When it does not become ready within 20 s.
    pub fn start_with(env: &[(&str, &str)]) -> Self {
        Self::start_exe(&binary("reticle"), env)
    }

    /// Starts `reticle serve` from the binary `exe` (e.g. [`release_binary`]) with extra
    /// environment variables; its workers are the `reticle-worker` next to it.
    ///
    /// # Panics
    /// When it does not become ready within 20 s.
    pub fn start_exe(exe: &Path, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr file");
        let mut cmd = Command::new(exe);
        cmd.arg("serve")
            .env("MCP_READY_FILE", dir.path().join("mcp.ready"))
            .env("RETICLE_LOG_DIR", dir.path().join("logs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn reticle");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let lines = spawn_line_reader(stdout);
        let host = Self {
            child,
            stdin,
            lines,
            dir,
        };
        host.wait_ready(Duration::from_secs(20));
        host
    }

    /// Path of the ready file.
    pub fn ready_file(&self) -> PathBuf {
        self.dir.path().join("mcp.ready")
    }

    /// What the host wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if std::fs::read_to_string(self.ready_file()).is_ok_and(|s| s.ends_with('\n')) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "host not ready after {timeout:?}; stderr:\n{}",
            self.stderr()
        );
    }

    /// Writes raw bytes to stdin.
    ///
    /// # Panics
    /// When stdin is closed.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Sends one JSON message as a line.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("json");
        line.push(b'\n');
        self.write_raw(&line);
    }

    /// The next stdout line, if one arrives within `timeout`.
    pub fn recv_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next stdout line parsed as JSON.
    ///
    /// # Panics
    /// On timeout (10 s) or a line that is not JSON.
    pub fn recv(&self) -> Value {
        self.recv_within(Duration::from_secs(10))
    }

    /// The next stdout line parsed as JSON, waiting up to `quiet` for it.
    ///
    /// # Panics
    /// On timeout or a line that is not JSON.
    pub fn recv_within(&self, quiet: Duration) -> Value {
        let line = self
            .recv_line(quiet)
            .unwrap_or_else(|| panic!("no response within {quiet:?}; stderr:\n{}", self.stderr()));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Sends a request and returns the response with the same id, checking
    /// every line on the way with [`check_jsonrpc_line`].
    ///
    /// # Panics
    /// When no line comes for 10 s (see [`Self::request_within`]).
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.request_within(id, method, params, Duration::from_secs(10))
    }

    /// [`Self::request`] for a request that may be silent for up to `quiet` (a synchronous
    /// call that does minutes of work and sends no progress, e.g. `optimize` with `wait`).
    ///
    /// # Panics
    /// When no line comes for `quiet`, or a line is not a JSON-RPC message.
    pub fn request_within(
        &mut self,
        id: Value,
        method: &str,
        params: Value,
        quiet: Duration,
    ) -> Value {
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let message = self.recv_within(quiet);
            check_jsonrpc_value(&message).unwrap_or_else(|e| panic!("{e}: {message}"));
            if message.get("id") == Some(&id) {
                return message;
            }
        }
    }

    /// Calls tool `name` with `arguments` (request id `id`) and returns the
    /// `CallToolResult`.
    pub fn call_tool(&mut self, id: &str, name: &str, arguments: Value) -> Value {
        self.call_tool_within(id, name, arguments, Duration::from_secs(10))
    }

    /// [`Self::call_tool`] for a call that may be silent for up to `quiet`.
    pub fn call_tool_within(
        &mut self,
        id: &str,
        name: &str,
        arguments: Value,
        quiet: Duration,
    ) -> Value {
        let answer = self.request_within(
            serde_json::json!(id),
            "tools/call",
            serde_json::json!({"name": name, "arguments": arguments}),
            quiet,
        );
        answer["result"].clone()
    }

    /// Polls job `job_id` (`render: json`) until it ends, and returns its last view;
    /// `during` sees every view of the job still running.
    ///
    /// # Panics
    /// When a poll names no status, or the job has not ended after `timeout`.
    pub fn poll_until_done(
        &mut self,
        job_id: &str,
        timeout: Duration,
        mut during: impl FnMut(&Value),
    ) -> Value {
        let started = Instant::now();
        for n in 0.. {
            let polled = self.call_tool(
                &format!("poll-{job_id}-{n}"),
                "poll",
                serde_json::json!({"job_id": job_id, "render": "json"}),
            );
            let view = polled["structuredContent"].clone();
            match view["status"].as_str() {
                Some("completed" | "failed" | "cancelled") => return view,
                Some(_) => during(&view),
                None => panic!("poll of {job_id} names no status: {polled}"),
            }
            assert!(
                started.elapsed() < timeout,
                "job {job_id} did not end within {timeout:?}: {view}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        unreachable!("the loop returns or panics")
    }

    /// Closes stdin and waits for exit, returning the exit status and how long it took.
    ///
    /// # Panics
    /// When the host is still running after 10 s.
    pub fn close_and_wait(&mut self) -> (std::process::ExitStatus, Duration) {
        drop(self.stdin.take());
        let started = Instant::now();
        self.wait_exit(started, Duration::from_secs(10))
    }

    /// Waits for exit.
    ///
    /// # Panics
    /// When the host is still running after `timeout`.
    pub fn wait_exit(
        &mut self,
        started: Instant,
        timeout: Duration,
    ) -> (std::process::ExitStatus, Duration) {
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status, started.elapsed());
            }
            assert!(
                started.elapsed() < timeout,
                "host still running after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every stdout line still to come (until the host closes stdout).
    pub fn drain_lines(&self, timeout: Duration) -> Vec<String> {
        let mut out = Vec::new();
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(_) => break,
            }
        }
        out
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_line_reader(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    // Keep invalid UTF-8 visible to the checker instead of dropping it.
                    let line = String::from_utf8_lossy(&buf).into_owned();
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Checks that one stdout line is exactly one JSON-RPC 2.0 message ending in `\n`.
///
/// # Errors
/// A description of what is wrong.
pub fn check_jsonrpc_line(line: &str) -> Result<Value, String> {
    let body = line
        .strip_suffix('\n')
        .ok_or("line does not end with \\n")?;
    if body.contains('\n') || body.contains('\u{fffd}') {
        return Err("embedded newline or invalid UTF-8".into());
    }
    let value: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    check_jsonrpc_value(&value)?;
    Ok(value)
}

/// Checks the shape of a JSON-RPC 2.0 response or notification from a server.
///
/// # Errors
/// A description of what is wrong.
pub fn check_jsonrpc_value(value: &Value) -> Result<(), String> {
    let object = value.as_object().ok_or("not an object")?;
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err("jsonrpc is not \"2.0\"".into());
    }
    if let Some(method) = object.get("method") {
        // A notification, or the one request reticle sends a legacy client (`roots/list`).
        let request = object.contains_key("id");
        if !method.is_string() || (request && method != "roots/list") {
            return Err("server sent an unexpected request or a malformed notification".into());
        }
        if object.get("params").is_some_and(|p| !p.is_object()) {
            return Err("notification params must be an object".into());
        }
        return Ok(());
    }
    match object.get("id") {
        Some(Value::String(_) | Value::Number(_) | Value::Null) => {}
        _ => return Err("response id must be a string, a number or null".into()),
    }
    match (object.get("result"), object.get("error")) {
        (Some(result), None) if result.is_object() => Ok(()),
        (None, Some(error)) => {
            let code = error
                .get("code")
                .and_then(Value::as_i64)
                .ok_or("error.code must be an integer")?;
            let _ = code;
            error
                .get("message")
                .and_then(Value::as_str)
                .ok_or("error.message must be a string")?;
            Ok(())
        }
        _ => Err("a response has exactly one of result (an object) and error".into()),
    }
}

/// Processes whose parent is `pid` (from `/proc/*/stat`).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // Field 4 (ppid) follows the parenthesised command name.
                    let after = stat.rsplit_once(')')?.1;
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Whether a process exists (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}
