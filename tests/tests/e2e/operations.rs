//! Operator surface end to end: the control socket and `reticle ctl`, self-reexec with
//! bytes in flight, the event log's rotation. The SDK-level acceptance (rollout and
//! reexec under a steady stream, recounting telemetry from the log) is in
//! `tests/python/test_operations.py`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reticle_tests::{
    Host, LONG_JOB_TOOL, binary, check_jsonrpc_value, fixtures_dir, long_job, long_job_with,
};
use serde_json::{Value, json};

/// `reticle ctl ARGS` against `host`; returns (exit code, stdout, stderr).
fn ctl(host: &Host, runtime: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary("reticle"))
        .arg("ctl")
        .args(args)
        .env("MCP_READY_FILE", host.ready_file())
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .expect("run reticle ctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn start(runtime: &Path, extra: &[(&str, &str)]) -> Host {
    let runtime = runtime.to_str().expect("utf-8 path");
    let fixtures = fixtures_dir();
    let mut env = vec![
        ("XDG_RUNTIME_DIR", runtime),
        ("RETICLE_BACKEND", "cpu"),
        (
            "RETICLE_ALLOWED_ROOTS",
            fixtures.to_str().expect("utf-8 path"),
        ),
    ];
    env.extend_from_slice(extra);
    Host::start_initialized(&env)
}

fn health(host: &mut Host, id: &str) -> Value {
    let response = host.request(
        json!(id),
        "tools/call",
        json!({"name": "health", "arguments": {"render": "json"}}),
    );
    response["result"]["structuredContent"].clone()
}

#[test]
fn the_control_socket_is_private_and_answers_typed_errors() {
    let runtime = tempfile::tempdir().unwrap();
    let mut host = start(runtime.path(), &[]);
    let pid = host.child.id();
    let socket = runtime
        .path()
        .join("reticle")
        .join(format!("host-{pid}.sock"));
    let mode = std::fs::metadata(&socket)
        .expect("socket exists")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    let dir_mode = std::fs::metadata(socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700, "directory mode {dir_mode:o}");

    let (code, out, err) = ctl(&host, runtime.path(), &["health", "--json"]);
    assert_eq!(code, 0, "{err}");
    let payload: Value = serde_json::from_str(&out).expect("health JSON");
    assert_eq!(payload["server"]["pid"], pid);

    // Garbage and unknown verbs get typed answers; the host keeps serving.
    for request in [b"not json\n".as_slice(), b"{\"verb\":\"explode\"}\n"] {
        use std::io::{BufRead, BufReader, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream.write_all(request).unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["ok"], false, "{answer}");
        assert!(answer["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    // A rollout to something that is not a file, and a reexec to a binary that is not
    // a reticle host, are refused before anything is touched.
    let (code, _, err) = ctl(
        &host,
        runtime.path(),
        &["rollout", "--worker-bin", "/nonexistent/worker"],
    );
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = ctl(&host, runtime.path(), &["reexec", "--bin", "/bin/true"]);
    assert_eq!(code, 1);
    assert!(err.contains("does not look like a reticle host"), "{err}");
    let after = health(&mut host, "h");
    assert_eq!(after["server"]["reexecs"], 0);
    assert_eq!(after["server"]["pid"], pid);
    // Without a host, ctl says so with exit code 2.
    let (code, _, err) = ctl(
        &host,
        Path::new("/nonexistent-runtime"),
        &["--socket", "/nonexistent.sock", "health"],
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn reexec_carries_a_request_split_across_the_handover() {
    let runtime = tempfile::tempdir().unwrap();
    let mut host = start(runtime.path(), &[]);
    let pid = host.child.id();
    // Half a request before the handover, the rest after it: the bytes the old image
    // read must reach the new one, or this request is never answered.
    let line =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": "split", "method": "ping"})).unwrap();
    let (head, tail) = line.split_at(line.len() / 2);
    host.write_raw(head);
    std::thread::sleep(Duration::from_millis(100));
    let (code, out, err) = ctl(&host, runtime.path(), &["reexec"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("pid {pid}")), "{out}");
    host.write_raw(tail);
    host.write_raw(b"\n");
    let answer = host.recv();
    check_jsonrpc_value(&answer).unwrap();
    assert_eq!(answer["id"], "split", "{answer}");
    assert_eq!(answer["result"], json!({}));
    // The session continues without a new initialize: tools/list and a tool call work.
    let tools = host.request(json!("list"), "tools/list", json!({}));
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 5)
    );
    let after = health(&mut host, "h2");
    assert_eq!(after["server"]["pid"], pid);
    assert_eq!(after["server"]["reexecs"], 1);
    assert_eq!(host.child.id(), pid);
    assert!(
        host.child.try_wait().unwrap().is_none(),
        "the host process is the same"
    );
    // A second reexec while a call waits on a job of seconds: the next image re-runs the job
    // under its id and answers the waiting call once, successfully.
    host.send(&json!({"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {
        "name": LONG_JOB_TOOL, "arguments": long_job_with(&[("wait", json!(true)), ("render", json!("json"))])}}));
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = ctl(&host, runtime.path(), &["reexec"]);
    assert_eq!(code, 0, "{out}{err}");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let long = loop {
        let line = host.recv_line(Duration::from_secs(1)).unwrap_or_default();
        if let Ok(message) = serde_json::from_str::<Value>(&line)
            && message["id"] == "long"
        {
            break message;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no answer to the waiting call"
        );
    };
    check_jsonrpc_value(&long).unwrap();
    assert_eq!(long["result"]["isError"], false, "{long}");
    assert_eq!(long["result"]["structuredContent"]["status"], "completed");
    let (_, events, _) = ctl(&host, runtime.path(), &["events", "--since", "seq:0"]);
    let execs: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "reexec" && r["step"] == "exec")
        .collect();
    assert_eq!(execs.len(), 2, "{execs:?}");
    assert_eq!(
        execs[1]["pending_requests"], 1,
        "the waiting call was handed over: {}",
        execs[1]
    );
    let again = health(&mut host, "h3");
    assert_eq!(
        (
            again["server"]["pid"].as_u64(),
            again["server"]["reexecs"].as_u64()
        ),
        (Some(u64::from(pid)), Some(2))
    );
    // Every line the client saw was JSON-RPC (the new image's set-up wrote nothing else),
    // and the waiting call was answered once.
    for line in host.drain_lines(Duration::from_millis(200)) {
        assert!(!line.contains("\"id\":\"long\""), "answered twice: {line}");
        let message: Value = serde_json::from_str(&line).unwrap();
        check_jsonrpc_value(&message).unwrap();
    }
    let (status, _) = host.close_and_wait();
    assert!(status.success());
}

/// A 2025-11-25 client following a task keeps getting its `notifications/tasks/status`
/// after a reexec: the next image re-runs the task's job under its id and follows it on,
/// so the client hears it complete without polling.
#[test]
fn a_task_s_status_notifications_continue_across_a_reexec() {
    let runtime = tempfile::tempdir().unwrap();
    let mut host = start(runtime.path(), &[]);
    let created = host.request(
        json!("task"),
        "tools/call",
        json!({"name": LONG_JOB_TOOL, "arguments": long_job(),
               "task": {"ttl": 600000}, "_meta": {"progressToken": "tok"}}),
    );
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_owned();
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = ctl(&host, runtime.path(), &["reexec"]);
    assert_eq!(code, 0, "{out}{err}");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut progress_after_reexec = 0;
    let status = loop {
        let line = host.recv_line(Duration::from_secs(1)).unwrap_or_default();
        if let Ok(message) = serde_json::from_str::<Value>(&line) {
            check_jsonrpc_value(&message).unwrap();
            let params = &message["params"];
            if message["method"] == "notifications/progress" && params["progressToken"] == "tok" {
                progress_after_reexec += 1;
            }
            if message["method"] == "notifications/tasks/status"
                && params["taskId"] == task_id.as_str()
                && params["status"] != "working"
            {
                break params["status"].clone();
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no status notification for {task_id} after the reexec"
        );
    };
    assert_eq!(status, "completed");
    assert!(
        progress_after_reexec > 0,
        "the progress token is followed on too"
    );
    let got = host.request(json!("get"), "tasks/get", json!({"taskId": task_id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(health(&mut host, "h")["server"]["reexecs"], 1);
}

#[test]
fn the_event_log_rotates_under_its_cap_and_reads_back_in_order() {
    let runtime = tempfile::tempdir().unwrap();
    let mut host = start(
        runtime.path(),
        &[
            ("RETICLE_EVENTS_MAX_BYTES", "4096"),
            ("RETICLE_EVENTS_KEEP", "2"),
        ],
    );
    for i in 0..200 {
        host.request(json!(i), "ping", json!({}));
    }
    // A line that is not JSON is not a request, but it is an event.
    host.write_raw(b"{not json\n");
    let rejected = host.recv();
    assert_eq!(rejected["error"]["code"], -32700, "{rejected}");
    let logs = host.dir.path().join("logs");
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("events.jsonl"))
        .collect();
    files.sort();
    assert_eq!(files, ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]);
    for f in &files {
        assert!(
            std::fs::metadata(logs.join(f)).unwrap().len() <= 4096,
            "{f} over its cap"
        );
    }
    let (code, out, err) = ctl(&host, runtime.path(), &["events", "--since", "seq:0"]);
    assert_eq!(code, 0, "{err}");
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "contiguous");
    let requests: Vec<&Value> = records.iter().filter(|r| r["event"] == "request").collect();
    assert_eq!(requests.last().unwrap()["id"], 199);
    let rejected: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "frame.rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["reason"], "parse_error");
    assert!(records.len() < 200, "older records were rotated away");
    // --since by seq returns only what came after.
    let last = *seqs.last().unwrap();
    let (_, out, _) = ctl(
        &host,
        runtime.path(),
        &["events", "--since", &format!("seq:{}", last - 3)],
    );
    let after: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(after.iter().all(|r| r["seq"].as_u64() > Some(last - 3)));
    assert!(after.len() >= 3, "{after:?}");
}
