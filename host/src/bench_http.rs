//! `reticle bench http`: the Streamable HTTP transport under load (issue 21). It starts
//! `reticle serve --http 127.0.0.1:0` (loopback only, a fresh bearer token), opens one
//! legacy session per client, gives each a small finished job, and then has every
//! client call `ping`, `health` and `poll` in turn on its own keep-alive connection for
//! the given time. It prints p50/p99 latency per method and the errors, first for one
//! client alone (the reference, in the same run) and then for all of them, with the
//! ratio of the loaded to the unloaded p99.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The methods each client calls in turn.
const METHODS: [&str; 3] = ["ping", "health", "poll"];

struct Options {
    clients: usize,
    seconds: f64,
    /// Each client starts a call this often (0: back to back, a closed loop that
    /// measures saturation rather than latency).
    interval: Duration,
    json: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        clients: 100,
        seconds: 30.0,
        interval: Duration::from_millis(50),
        json: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--clients" => {
                options.clients = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("--clients needs a number from 1 to 1000")?;
            }
            "--seconds" => {
                options.seconds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|s: &f64| *s > 0.0 && *s <= 600.0)
                    .ok_or("--seconds needs a number of seconds up to 600")?;
            }
            "--interval-ms" => {
                options.interval = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|ms| *ms <= 60_000)
                    .map(Duration::from_millis)
                    .ok_or("--interval-ms needs a number of ms up to 60000")?;
            }
            "--json" => options.json = true,
            "--help" | "-h" => {
                return Err(
                    "usage: reticle bench http [--clients 100] [--seconds 30] [--interval-ms 50] [--json]"
                        .into(),
                );
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// The server under test; stopped (SIGTERM) on drop.
struct BenchServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }
}

fn start_server(token: &str, clients: usize) -> Result<(BenchServer, std::path::PathBuf), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (data, layout) = crate::demo_cli::prepare(&dir.path().join("data"))
        .map_err(|e| format!("cannot write the layout: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let ready = dir.path().join("ready");
    let child = Command::new(exe)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-log-file",
            "--log",
            "warn",
        ])
        .args(["--max-sessions", &(clients + 8).to_string()])
        .env("RETICLE_HTTP_TOKENS", format!("bench={token}"))
        .env("MCP_READY_FILE", &ready)
        .env("RETICLE_ALLOWED_ROOTS", &data)
        .env("KLAYOUT_MCP_ARTIFACT_ROOT", dir.path().join("artifacts"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start reticle serve --http: {e}"))?;
    let mut server = BenchServer {
        child,
        url: String::new(),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.url.is_empty() {
        if let Some(url) = std::fs::read_to_string(&ready)
            .ok()
            .and_then(|t| t.lines().nth(1).map(str::to_owned))
        {
            server.url = url;
        } else if Instant::now() > deadline {
            return Err("the server wrote no endpoint URL within 30 s".into());
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok((server, layout))
}

/// One client: a keep-alive connection, a legacy session, a finished job to poll.
struct BenchClient {
    agent: ureq::Agent,
    url: String,
    auth: String,
    session: String,
    job_id: String,
    next_id: u64,
}

impl BenchClient {
    fn connect(url: &str, token: &str) -> Result<Self, String> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        let mut client = Self {
            agent: ureq::Agent::new_with_config(config),
            url: url.to_owned(),
            auth: format!("Bearer {token}"),
            session: String::new(),
            job_id: String::new(),
            next_id: 0,
        };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "reticle-bench", "version": env!("CARGO_PKG_VERSION")}});
        client.rpc("initialize", init)?;
        client.notify("notifications/initialized")?;
        Ok(client)
    }

    fn post(&mut self, body: &Value) -> Result<(u16, String), String> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Authorization", &self.auth)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if !self.session.is_empty() {
            request = request
                .header("Mcp-Session-Id", &self.session)
                .header("MCP-Protocol-Version", "2025-11-25");
        }
        let mut response = request
            .send(body.to_string())
            .map_err(|e| format!("HTTP: {e}"))?;
        if let Some(session) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session = session.to_owned();
        }
        let status = response.status().as_u16();
        let mut text = String::new();
        response
            .body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading the body: {e}"))?;
        Ok((status, text))
    }

    fn notify(&mut self, method: &str) -> Result<(), String> {
        let (status, _) = self.post(&json!({"jsonrpc": "2.0", "method": method}))?;
        (status == 202)
            .then_some(())
            .ok_or_else(|| format!("{method}: HTTP {status}"))
    }

    /// One request; its result (the last message of an SSE body, or the JSON body).
    fn rpc(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let (status, text) = self.post(&body)?;
        if status != 200 {
            return Err(format!("{method}: HTTP {status}"));
        }
        let message = if text.starts_with('{') {
            text
        } else {
            text.lines()
                .rev()
                .filter_map(|l| l.strip_prefix("data: "))
                .find(|d| !d.is_empty())
                .unwrap_or_default()
                .to_owned()
        };
        let value: Value =
            serde_json::from_str(&message).map_err(|e| format!("{method}: {e}: {message}"))?;
        if let Some(error) = value.get("error") {
            return Err(format!("{method}: {error}"));
        }
        let result = value["result"].clone();
        if result.get("isError") == Some(&Value::Bool(true)) {
            return Err(format!(
                "{method}: {}",
                result["structuredContent"]["error"]
            ));
        }
        Ok(result)
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        self.rpc("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    fn one(&mut self, method: &str) -> Result<(), String> {
        match method {
            "ping" => self.rpc("ping", json!({})).map(drop),
            "health" => self.call("health", json!({})).map(drop),
            _ => {
                let job_id = self.job_id.clone();
                self.call("poll", json!({"job_id": job_id})).map(drop)
            }
        }
    }
}

/// Latencies (µs) and errors of one method.
#[derive(Default, Clone)]
struct Samples {
    micros: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Runs every client for `seconds`; samples per method.
fn run_phase(
    clients: Vec<BenchClient>,
    seconds: f64,
    interval: Duration,
) -> (Vec<Samples>, Vec<BenchClient>) {
    let stop = Arc::new(AtomicBool::new(false));
    let count = clients.len();
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(n, mut client)| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut samples = vec![Samples::default(); METHODS.len()];
                let mut turn = n;
                // Clients start spread over one interval, then keep their own pace.
                let spread = interval.mul_f64(n as f64 / count as f64);
                let mut next = Instant::now() + spread;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += interval;
                    let which = turn % METHODS.len();
                    turn += 1;
                    let started = Instant::now();
                    let outcome = client.one(METHODS[which]);
                    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    let s = &mut samples[which];
                    match outcome {
                        Ok(()) => s.micros.push(micros),
                        Err(e) => {
                            s.errors += 1;
                            s.first_error.get_or_insert(e);
                        }
                    }
                }
                (samples, client)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut merged = vec![Samples::default(); METHODS.len()];
    let mut back = Vec::new();
    for handle in handles {
        let Ok((samples, client)) = handle.join() else {
            continue;
        };
        for (m, s) in merged.iter_mut().zip(samples) {
            m.micros.extend(s.micros);
            m.errors += s.errors;
            if m.first_error.is_none() {
                m.first_error = s.first_error;
            }
        }
        back.push(client);
    }
    for m in &mut merged {
        m.micros.sort_unstable();
    }
    (merged, back)
}

fn summary(samples: &[Samples], seconds: f64) -> Value {
    let methods: serde_json::Map<String, Value> = METHODS
        .iter()
        .zip(samples)
        .map(|(name, s)| {
            (
                (*name).to_owned(),
                json!({"calls": s.micros.len(), "errors": s.errors,
                       "p50_ms": percentile(&s.micros, 50.0), "p99_ms": percentile(&s.micros, 99.0),
                       "max_ms": percentile(&s.micros, 100.0), "first_error": s.first_error}),
            )
        })
        .collect();
    let calls: usize = samples.iter().map(|s| s.micros.len()).sum();
    json!({"seconds": seconds, "calls_per_second": calls as f64 / seconds, "methods": methods})
}

/// Runs the benchmark. Exit 0 when every call succeeded, 1 when any failed, 2 when the
/// server or the clients could not be set up.
pub fn http(args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("reticle bench http: {e}");
            return ExitCode::from(2);
        }
    };
    let token = uuid::Uuid::new_v4().simple().to_string();
    let (server, layout) = match start_server(&token, options.clients) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("reticle bench http: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "reticle bench http: {} clients on {}, {} s per phase",
        options.clients, server.url, options.seconds
    );
    let mut clients = Vec::with_capacity(options.clients);
    for _ in 0..options.clients {
        match BenchClient::connect(&server.url, &token) {
            Ok(c) => clients.push(c),
            Err(e) => {
                eprintln!("reticle bench http: a client could not connect: {e}");
                return ExitCode::from(2);
            }
        }
    }
    // Each session's job: a small simulation, finished before the clock starts.
    for client in &mut clients {
        let args = json!({"layout": layout, "pixel_nm": 16, "wait": true});
        match client.call("simulate", args) {
            Ok(done) => {
                client.job_id = done["structuredContent"]["job_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            }
            Err(e) => {
                eprintln!("reticle bench http: the setup job failed: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let reference_seconds = (options.seconds / 3.0).max(1.0);
    let mut rest = clients;
    let alone = vec![rest.remove(0)];
    let (reference, alone) = run_phase(alone, reference_seconds, options.interval);
    rest.extend(alone);
    let (loaded, _clients) = run_phase(rest, options.seconds, options.interval);
    let reference = summary(&reference, reference_seconds);
    let loaded = summary(&loaded, options.seconds);
    let errors: u64 = METHODS
        .iter()
        .map(|m| {
            loaded["methods"][m]["errors"].as_u64().unwrap_or(0)
                + reference["methods"][m]["errors"].as_u64().unwrap_or(0)
        })
        .sum();
    let report = json!({"clients": options.clients, "interval_ms": options.interval.as_millis(),
                        "reference_one_client": reference,
                        "loaded": loaded, "errors": errors});
    let text = if options.json {
        report.to_string()
    } else {
        table(&report)
    };
    // stdout-ok: the report is this CLI command's output (like `reticle bench chip`).
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{}", text.trim_end()).is_err() {
        return ExitCode::FAILURE;
    }
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The report as a table: a row per method (loaded), then the unloaded reference.
fn table(report: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>12}",
        "method", "calls", "errors", "p50 ms", "p99 ms", "max ms", "p99 / alone"
    );
    for method in METHODS {
        let loaded = &report["loaded"]["methods"][method];
        let alone = &report["reference_one_client"]["methods"][method];
        let ratio = loaded["p99_ms"].as_f64().unwrap_or(f64::NAN)
            / alone["p99_ms"].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "{:<8} {:>9} {:>8} {:>9.3} {:>9.3} {:>9.3} {:>11.1}x",
            method,
            loaded["calls"],
            loaded["errors"],
            loaded["p50_ms"].as_f64().unwrap_or(f64::NAN),
            loaded["p99_ms"].as_f64().unwrap_or(f64::NAN),
            loaded["max_ms"].as_f64().unwrap_or(f64::NAN),
            ratio
        );
        if let Some(e) = loaded["first_error"].as_str() {
            let _ = writeln!(out, "  first error: {e}");
        }
    }
    let _ = writeln!(
        out,
        "{} clients, one call each every {} ms, {:.0} calls/s; one client alone: ping p99 {:.3} ms, health p99 {:.3} ms, poll p99 {:.3} ms",
        report["clients"],
        report["interval_ms"],
        report["loaded"]["calls_per_second"].as_f64().unwrap_or(0.0),
        report["reference_one_client"]["methods"]["ping"]["p99_ms"]
            .as_f64()
            .unwrap_or(f64::NAN),
        report["reference_one_client"]["methods"]["health"]["p99_ms"]
            .as_f64()
            .unwrap_or(f64::NAN),
        report["reference_one_client"]["methods"]["poll"]["p99_ms"]
            .as_f64()
            .unwrap_or(f64::NAN),
    );
    out
}
