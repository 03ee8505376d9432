//! `reticle serve --http` (issue 21) from a raw HTTP/1.1 client: authorization, isolation
//! of two tokens' clients, the Origin/body guards, DELETE, `Last-Event-ID` resumption,
//! and a dropped connection that cancels its `optimize` and kills its worker within 2 s
//! in both protocol eras. The Python SDK and the official conformance suite test the
//! same server from real clients (tests/python/test_http_transport.py,
//! tests/python/test_conformance.py).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reticle_tests::{LONG_JOB_TOOL, alive, binary, fixtures_dir, long_job_with};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-9876543210";

/// A running `reticle serve --http 127.0.0.1:0`.
struct HttpHost {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    authority: String,
}

impl HttpHost {
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("mcp.ready");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
        let mut cmd = Command::new(binary("reticle"));
        cmd.args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
            .env("MCP_READY_FILE", &ready)
            .env("RETICLE_LOG_DIR", dir.path().join("logs"))
            .env("RETICLE_ALLOWED_ROOTS", fixtures_dir())
            .env("RETICLE_BACKEND", "cpu")
            .env("KLAYOUT_MCP_ARTIFACT_ROOT", dir.path().join("artifacts"))
            .env("RETICLE_HTTP_TOKENS", format!("alice={ALICE},bob={BOB}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = cmd.spawn().expect("spawn reticle serve --http");
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = loop {
            let text = std::fs::read_to_string(&ready).unwrap_or_default();
            if let Some(url) = text.lines().nth(1) {
                break url.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "no endpoint URL in the ready file"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let authority = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Self {
            child,
            dir,
            authority,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// Sends one request and returns the open connection with the status line and
    /// headers read.
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let mut stream = TcpStream::connect(&self.authority).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.authority,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        // A server may answer (413) before reading a large body: a failed write is fine.
        let _ = stream.write_all(body);
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        Response {
            status,
            headers,
            reader,
        }
    }

    /// POSTs a JSON-RPC message with `token` (and `session`, for the legacy era).
    fn post(&self, token: Option<&str>, session: Option<&str>, message: &Value) -> Response {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        let modern = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let name = message["params"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(version) = modern {
            headers.push(("MCP-Protocol-Version", version));
            headers.push(("Mcp-Method", &method));
            if !name.is_empty() {
                headers.push(("Mcp-Name", &name));
            }
        }
        self.send("POST", "/mcp", &headers, message.to_string().as_bytes())
    }

    /// `initialize` as `token`; returns the session id.
    fn initialize(&self, token: &str) -> String {
        let response = self.post(
            Some(token),
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        );
        assert_eq!(response.status, 200);
        let session = response.headers["mcp-session-id"].clone();
        let notified = self.post(
            Some(token),
            Some(&session),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(notified.status, 202);
        session
    }

    /// A tool call's final JSON-RPC response (JSON or the last SSE message).
    fn call(&self, token: &str, session: Option<&str>, id: u64, tool: &str, args: Value) -> Value {
        let mut params = json!({"name": tool, "arguments": args});
        if session.is_none() {
            params["_meta"] = modern_meta();
        }
        let response = self.post(
            Some(token),
            session,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
        );
        assert_eq!(response.status, 200, "{tool}");
        response.last_message()
    }

    /// The pid of a busy worker, once one is (read from `health` as `token`).
    fn busy_worker(&self, token: &str) -> u32 {
        for id in 1000.. {
            let health = self.call(token, None, id, "health", json!({"render": "json"}));
            let workers = &health["result"]["structuredContent"]["workers"]["workers"];
            if let Some(busy) = workers
                .as_array()
                .into_iter()
                .flatten()
                .find(|w| w["state"] == "busy")
            {
                return u32::try_from(busy["pid"].as_u64().unwrap()).unwrap();
            }
            assert!(id < 1600, "no worker became busy");
            std::thread::sleep(Duration::from_millis(10));
        }
        unreachable!()
    }
}

impl Drop for HttpHost {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap()),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

struct Response {
    status: u16,
    headers: HashMap<String, String>,
    reader: BufReader<TcpStream>,
}

impl Response {
    fn body(mut self) -> String {
        let mut body = String::new();
        let _ = self.reader.read_to_string(&mut body);
        body
    }

    fn json(self) -> Value {
        let body = self.body();
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// The next SSE event (`id`, `data`), skipping comments.
    fn next_event(&mut self) -> Option<(Option<String>, String)> {
        let (mut id, mut data) = (None, None::<String>);
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if id.is_some() || data.is_some() {
                    return Some((id, data.unwrap_or_default()));
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data = Some(v.trim().to_owned());
            }
        }
    }

    /// The last JSON-RPC message of the body (SSE or JSON).
    fn last_message(mut self) -> Value {
        if !self.headers["content-type"].starts_with("text/event-stream") {
            return self.json();
        }
        let mut last = None;
        while let Some((_, data)) = self.next_event() {
            if !data.is_empty() {
                last = Some(serde_json::from_str(&data).unwrap());
            }
        }
        last.expect("an SSE stream without a message")
    }
}

#[test]
fn a_request_without_a_valid_token_gets_401_and_the_metadata_names_the_resource() {
    let host = HttpHost::start(&[]);
    let ping =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": modern_meta()}});
    let missing = host.post(None, None, &ping);
    assert_eq!(missing.status, 401);
    let challenge = missing.headers["www-authenticate"].clone();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        host.authority
    );
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let wrong = host.post(Some("not-a-token"), None, &ping);
    assert_eq!(wrong.status, 401);
    assert!(wrong.headers["www-authenticate"].contains("error=\"invalid_token\""));
    assert_eq!(
        host.post(Some(ALICE), None, &ping).json()["result"],
        json!({"resultType": "complete"})
    );
    let metadata = host
        .send("GET", "/.well-known/oauth-protected-resource/mcp", &[], b"")
        .json();
    assert_eq!(
        metadata["resource"],
        format!("http://{}/mcp", host.authority)
    );
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
}

#[test]
fn another_clients_job_and_layout_session_are_not_found() {
    let host = HttpHost::start(&[]);
    let alice = host.initialize(ALICE);
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let started = host.call(
        ALICE,
        Some(&alice),
        1,
        "simulate",
        json!({"layout": layout, "wait": false}),
    );
    let job_id = started["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let gds = fixtures_dir().join("layouts/observer_demo.gds");
    let opened = host.call(ALICE, Some(&alice), 2, "open_layout", json!({"path": gds}));
    let session_id = opened["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{opened}"))
        .to_owned();
    // Bob, stateless (2026-07-28) and in a legacy session of his own.
    let bob = host.initialize(BOB);
    for session in [None, Some(bob.as_str())] {
        let polled = host.call(BOB, session, 3, "poll", json!({"job_id": job_id}));
        assert_eq!(polled["result"]["isError"], true, "{polled}");
        assert_eq!(
            polled["result"]["structuredContent"]["error"]["code"],
            "JOB_NOT_FOUND"
        );
        let listed = host.call(
            BOB,
            session,
            4,
            "list_cells",
            json!({"session_id": session_id}),
        );
        assert_eq!(
            listed["result"]["structuredContent"]["error"]["code"], "SESSION_NOT_FOUND",
            "{listed}"
        );
    }
    // Alice's own session and job are there; Bob cannot borrow her session id.
    let polled = host.call(ALICE, Some(&alice), 5, "poll", json!({"job_id": job_id}));
    assert_eq!(
        polled["result"]["structuredContent"]["job_id"],
        job_id.as_str(),
        "{polled}"
    );
    let borrowed = host.post(
        Some(BOB),
        Some(&alice),
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    );
    assert_eq!(borrowed.status, 404);
    // Alice's stateless client is not her legacy session either.
    let stateless = host.call(ALICE, None, 7, "poll", json!({"job_id": job_id}));
    assert_eq!(
        stateless["result"]["structuredContent"]["error"]["code"],
        "JOB_NOT_FOUND"
    );
}

#[test]
fn bad_origin_big_body_malformed_json_and_delete() {
    let host = HttpHost::start(&[]);
    let auth = format!("Bearer {ALICE}");
    let base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", auth.as_str()),
    ];
    let ping =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": modern_meta()}})
            .to_string();
    let mut evil = base.to_vec();
    evil.push(("Origin", "http://evil.example.com"));
    assert_eq!(
        host.send("POST", "/mcp", &evil, ping.as_bytes()).status,
        403
    );
    let big = vec![b' '; 2 << 20];
    assert_eq!(host.send("POST", "/mcp", &base, &big).status, 413);
    let malformed = host.send("POST", "/mcp", &base, b"{\"jsonrpc\": \"2.0\", \"id\": 1, ");
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.json()["error"]["code"], -32700);
    let session = host.initialize(ALICE);
    let mut with_session = base.to_vec();
    with_session.push(("Mcp-Session-Id", session.as_str()));
    assert_eq!(host.send("DELETE", "/mcp", &with_session, b"").status, 200);
    let after = host.post(
        Some(ALICE),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    );
    assert_eq!(after.status, 404);
    // The host is still up for everyone else.
    let mut modern = base.to_vec();
    modern.extend([
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "ping"),
    ]);
    assert_eq!(
        host.send("POST", "/mcp", &modern, ping.as_bytes()).status,
        200
    );
}

#[test]
fn a_dropped_stream_resumes_with_last_event_id() {
    let host = HttpHost::start(&["--resume-grace-ms", "5000"]);
    let session = host.initialize(ALICE);
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let mut first = host.post(
        Some(ALICE),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "simulate", "arguments": {"layout": layout, "pixel_nm": 1, "wait": true}}}),
    );
    let (priming, data) = first.next_event().expect("the priming event");
    assert_eq!(data, "");
    let priming = priming.expect("the priming event has an id");
    drop(first);
    let auth = format!("Bearer {ALICE}");
    let resumed = host.send(
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Authorization", &auth),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", &priming),
        ],
        b"",
    );
    assert_eq!(resumed.status, 200);
    let answer = resumed.last_message();
    assert_eq!(answer["id"], 1);
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "completed",
        "{answer}"
    );
}

/// The acceptance of issue 21: a client that drops its connection in the middle of an
/// `optimize` leaves no worker running within 2 s — a 2026-07-28 request (whose stream's
/// end is its cancellation) and a legacy one (after the resume grace, 750 ms).
#[test]
fn a_dropped_connection_cancels_its_optimize_and_kills_its_worker_within_2_s() {
    let host = HttpHost::start(&[]);
    let legacy = host.initialize(ALICE);
    let arguments = json!({
        "layout": fixtures_dir().join("layouts/lines_and_pad.glp"),
        "deck": fixtures_dir().join("decks/acceptance_width.json"),
        "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 1,
        "iterations": 1000, "refine_iterations": 0, "wait": true,
    });
    for (id, session) in [(1, None), (2, Some(legacy.as_str()))] {
        let mut params = json!({"name": "optimize", "arguments": arguments});
        if session.is_none() {
            params["_meta"] = modern_meta();
        }
        let call = host.post(
            Some(ALICE),
            session,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
        );
        assert_eq!(call.status, 200);
        let pid = host.busy_worker(BOB);
        let dropped = Instant::now();
        drop(call);
        while alive(pid) && dropped.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let took = dropped.elapsed();
        assert!(
            !alive(pid),
            "worker {pid} still running {took:?} after the drop"
        );
        assert!(
            took < Duration::from_secs(2),
            "worker {pid} ran {took:?} after the drop"
        );
        eprintln!("era {id}: worker {pid} gone {took:?} after the client dropped its connection");
    }
    let stderr = host.stderr();
    assert!(
        stderr.contains("request cancelled: its connection closed"),
        "{stderr}"
    );
}

#[test]
fn idle_sessions_expire_and_the_session_limit_holds() {
    let host = HttpHost::start(&["--idle-seconds", "1", "--max-sessions", "2"]);
    let first = host.initialize(ALICE);
    let _second = host.initialize(BOB);
    let refused = host.post(
        Some(ALICE),
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(refused.status, 503, "a third session over --max-sessions 2");
    // Idle for over a second (nothing in flight, no stream open): the session is gone.
    std::thread::sleep(Duration::from_millis(2500));
    let expired = host.post(
        Some(ALICE),
        Some(&first),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );
    assert_eq!(expired.status, 404);
    // And its place is free again.
    let _third = host.initialize(ALICE);
}

/// Progress and tasks reach an HTTP client as they reach a stdio one: a call's
/// `notifications/progress` on its own stream before its answer; a 2025-11-25
/// task-augmented call answered with its task, its result from `tasks/result`.
#[test]
fn progress_on_the_calls_stream_and_tasks_over_http() {
    let host = HttpHost::start(&[]);
    let session = host.initialize(ALICE);
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let mut call = host.post(
        Some(ALICE),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "simulate", "arguments": {"layout": layout, "pixel_nm": 1},
                           "_meta": {"progressToken": "p-1"}}}),
    );
    let mut progress = 0;
    let mut answer = None;
    while let Some((_, data)) = call.next_event() {
        if data.is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&data).unwrap();
        if message["method"] == "notifications/progress" {
            assert!(answer.is_none(), "progress after the answer");
            assert_eq!(message["params"]["progressToken"], "p-1");
            progress += 1;
        } else {
            answer = Some(message);
        }
    }
    let answer = answer.expect("the answer");
    assert_eq!(answer["id"], 1);
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "completed",
        "{answer}"
    );
    assert!(
        progress > 0,
        "no progress notification on the call's stream"
    );

    let created = host.post(
        Some(ALICE),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "simulate", "arguments": {"layout": layout}, "task": {}}}),
    );
    let created = created.last_message();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let result = host
        .post(
            Some(ALICE),
            Some(&session),
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task_id}}),
        )
        .last_message();
    assert_eq!(result["id"], 3);
    assert_eq!(
        result["result"]["structuredContent"]["status"], "completed",
        "{result}"
    );
}

/// A 2026-07-28 call that asks for log messages (`_meta` log level) gets them on its own
/// stream, before its answer, and another client's concurrent stream gets none of them.
#[test]
fn log_messages_go_on_the_stream_of_the_call_that_asked() {
    let host = HttpHost::start(&[]);
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/logLevel"] = json!("debug");
    let mut asked = host.post(
        Some(ALICE),
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "health", "arguments": {}, "_meta": meta}}),
    );
    let quiet = host.post(
        Some(BOB),
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "health", "arguments": {}, "_meta": modern_meta()}}),
    );
    let mut logs = 0;
    let mut answered = false;
    while let Some((_, data)) = asked.next_event() {
        let message: Value = serde_json::from_str(&data).unwrap();
        if message["method"] == "notifications/message" {
            assert!(!answered, "a log message after the answer");
            assert_eq!(message["params"]["data"]["tool"], "health", "{message}");
            logs += 1;
        } else {
            assert_eq!(message["id"], 1);
            answered = true;
        }
    }
    assert!(
        answered && logs == 1,
        "answered {answered}, {logs} log messages"
    );
    let body = quiet.body();
    assert!(!body.contains("notifications/message"), "{body}");
}

/// SIGTERM drains: a call in flight when the host is told to stop still gets its answer
/// on its stream, then the host exits 0 (as over stdio).
#[test]
fn sigterm_answers_the_call_in_flight_then_exits_0() {
    let mut host = HttpHost::start(&[]);
    let session = host.initialize(ALICE);
    let mut call = host.post(
        Some(ALICE),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": LONG_JOB_TOOL, "arguments": long_job_with(&[("wait", json!(true))])}}),
    );
    let (_, priming) = call.next_event().expect("the priming event");
    assert_eq!(priming, "");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(host.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let answer = call.last_message();
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "completed",
        "{answer}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = host.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the host did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}: {}", host.stderr());
}
