//! MCP tasks end to end through real worker processes, in both eras, over the job
//! table: 2025-11-25 task-augmented `tools/call` with `tasks/get`, `tasks/result`,
//! `tasks/list`, `tasks/cancel`; the 2026-07-28 tasks extension (`resultType: "task"`,
//! `tasks/get` with the result inlined, ack-only `tasks/cancel`/`tasks/update`).
//! Cancelling a task SIGKILLs its worker like the `cancel` tool does.

use std::time::{Duration, Instant};

use reticle_tests::{Host, LONG_JOB_TOOL, alive, check_jsonrpc_value, fixtures_dir, long_job};
use serde_json::{Value, json};

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

fn spawn_host() -> Host {
    let roots = fixtures_dir();
    Host::start_with(&[
        ("RETICLE_ALLOWED_ROOTS", roots.to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
    ])
}

fn start_legacy() -> (Host, Value) {
    let mut host = spawn_host();
    let init = host.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (host, init["result"].clone())
}

fn layout() -> String {
    fixtures_dir()
        .join("layouts/lines_and_pad.glp")
        .display()
        .to_string()
}

/// `_meta` of a 2026-07-28 request, with or without the tasks extension.
fn modern_meta(with_tasks: bool) -> Value {
    let caps = if with_tasks {
        json!({"extensions": {TASKS_EXTENSION: {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": caps})
}

/// Sends a request and returns its response and the notifications seen before it.
fn request_collecting(
    host: &mut Host,
    id: &str,
    method: &str,
    params: Value,
) -> (Value, Vec<Value>) {
    host.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let mut notes = Vec::new();
    loop {
        let message = host.recv();
        check_jsonrpc_value(&message).unwrap_or_else(|e| panic!("{e}: {message}"));
        if message["id"] == id {
            return (message, notes);
        }
        if message.get("method").is_some() {
            notes.push(message);
        }
    }
}

/// Polls `tasks/get` until the task is terminal; returns the last result and all
/// notifications seen meanwhile.
fn get_until_terminal(host: &mut Host, task_id: &str, meta: Option<Value>) -> (Value, Vec<Value>) {
    let started = Instant::now();
    let mut notes = Vec::new();
    for n in 0.. {
        let mut params = json!({"taskId": task_id});
        if let Some(meta) = &meta {
            params["_meta"] = meta.clone();
        }
        let (response, seen) = request_collecting(host, &format!("get-{n}"), "tasks/get", params);
        notes.extend(seen);
        let task = response["result"].clone();
        assert_eq!(task["taskId"], task_id, "{response}");
        let status = task["status"].as_str().unwrap_or("?").to_owned();
        if matches!(status.as_str(), "completed" | "failed" | "cancelled") {
            return (task, notes);
        }
        assert_eq!(status, "working", "{task}");
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "task {task_id} still {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

fn busy_worker_pid(host: &mut Host, meta: Option<&Value>) -> Option<u32> {
    let mut params = json!({"name": "health", "arguments": {"render": "json"}});
    if let Some(meta) = meta {
        params["_meta"] = meta.clone();
    }
    let health = host.request(json!("health-pid"), "tools/call", params);
    health["result"]["structuredContent"]["workers"]["workers"]
        .as_array()?
        .iter()
        .find(|w| w["state"] == "busy")
        .and_then(|w| w["pid"].as_u64())
        .map(|pid| pid as u32)
}

fn wait_for_busy_worker(host: &mut Host, meta: Option<&Value>) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = busy_worker_pid(host, meta) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no busy worker");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `pid` to disappear and returns how long it took.
fn gone_after(pid: u32) -> Duration {
    let since = Instant::now();
    while alive(pid) {
        assert!(
            since.elapsed() < Duration::from_secs(2),
            "worker {pid} still alive after tasks/cancel"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    since.elapsed()
}

fn plain_wait_call(host: &mut Host, id: &str, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "simulate", "arguments": {"layout": layout(), "wait": true}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let response = host.request(json!(id), "tools/call", params);
    let result = response["result"].clone();
    assert_eq!(result["isError"], false, "{result}");
    result
}

/// The parts of a simulate payload that must match between two runs of the same
/// request (a worker is a pure function; timings and job ids differ).
fn stable_part(payload: &Value) -> Value {
    json!({"metrics": payload["metrics"], "grid": payload["grid"],
           "pixel_nm": payload["pixel_nm"], "backend": payload["backend"]["kind"]})
}

#[test]
fn capabilities_and_tool_task_support_follow_the_era() {
    let (mut host, init) = start_legacy();
    assert_eq!(
        init["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );
    let tools = host.request(json!("list"), "tools/list", json!({}));
    let tools = tools["result"]["tools"].as_array().unwrap().clone();
    // The job tools may run as tasks; every other tool answers inline.
    let job_tools = ["simulate", "evaluate", "optimize"];
    for name in job_tools {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(tool["execution"]["taskSupport"], "optional", "{tool}");
    }
    for tool in tools
        .iter()
        .filter(|t| !job_tools.contains(&t["name"].as_str().unwrap_or("")))
    {
        assert!(tool.get("execution").is_none(), "{tool}");
    }
    // A task-augmented call to a tool that forbids tasks: -32601, as the spec says.
    let refused = host.request(
        json!("health-task"),
        "tools/call",
        json!({"name": "health", "arguments": {}, "task": {"ttl": 1000}}),
    );
    assert_eq!(refused["error"]["code"], -32601, "{refused}");

    // A task whose call fails before any worker sees it is created failed.
    let outside = host.request(
        json!("outside"),
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": "/etc/passwd"}, "task": {}}),
    );
    let task_id = outside["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (task, _) = get_until_terminal(&mut host, &task_id, None);
    assert_eq!(task["status"], "failed", "{task}");
    assert!(
        task["statusMessage"]
            .as_str()
            .unwrap()
            .contains("PATH_NOT_ALLOWED"),
        "{task}"
    );
    let result = host.request(json!("r"), "tasks/result", json!({"taskId": task_id}));
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(
        result["result"]["structuredContent"]["error"]["code"],
        "PATH_NOT_ALLOWED"
    );
    let missing = host.request(json!("m"), "tasks/get", json!({"taskId": "job_nope"}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");

    // The 2026-07-28 era: the extension replaces the capability and taskSupport.
    let discover = host.request(
        json!("discover"),
        "server/discover",
        json!({"_meta": modern_meta(false)}),
    );
    let caps = &discover["result"]["capabilities"];
    assert_eq!(caps["extensions"][TASKS_EXTENSION], json!({}), "{caps}");
    assert!(caps.get("tasks").is_none(), "{caps}");
    let modern_tools = host.request(
        json!("list-modern"),
        "tools/list",
        json!({"_meta": modern_meta(true)}),
    );
    for tool in modern_tools["result"]["tools"].as_array().unwrap() {
        assert!(tool.get("execution").is_none(), "{tool}");
    }
    for method in ["tasks/result", "tasks/list"] {
        let gone = host.request(
            json!(method),
            method,
            json!({"taskId": task_id, "_meta": modern_meta(true)}),
        );
        assert_eq!(gone["error"]["code"], -32601, "{method}: {gone}");
    }
}

#[test]
fn legacy_task_runs_to_the_same_result_as_a_plain_call() {
    let (mut host, _) = start_legacy();
    let plain = plain_wait_call(&mut host, "plain", None);
    let (created, _) = request_collecting(
        &mut host,
        "task",
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": layout()},
               "task": {"ttl": 60000}, "_meta": {"progressToken": "tok"}}),
    );
    let created = &created["result"];
    let task = &created["task"];
    let task_id = task["taskId"].as_str().expect("taskId").to_owned();
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert!(task["pollInterval"].as_u64().unwrap() > 0);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(created["_meta"][RELATED_TASK]["taskId"], task_id.as_str());

    let (done, notes) = get_until_terminal(&mut host, &task_id, None);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done.get("result").is_none(),
        "2025-11-25 tasks/get carries no result"
    );
    let result = host.request(json!("result"), "tasks/result", json!({"taskId": task_id}));
    let result = &result["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["_meta"][RELATED_TASK]["taskId"], task_id.as_str());
    assert_eq!(result["structuredContent"]["job_id"], task_id.as_str());
    assert_eq!(result["structuredContent"]["status"], "completed");
    assert_eq!(
        stable_part(&result["structuredContent"]),
        stable_part(&plain["structuredContent"])
    );
    // The progress token stays valid for the task's lifetime; progress notes name
    // the task, and a status notification reports completion.
    let progress: Vec<f64> = notes
        .iter()
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == "tok"
        })
        .map(|n| {
            assert_eq!(
                n["params"]["_meta"][RELATED_TASK]["taskId"],
                task_id.as_str()
            );
            n["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    let statuses: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/tasks/status")
        .collect();
    assert!(
        statuses
            .iter()
            .any(|n| n["params"]["status"] == "completed"),
        "{notes:?}"
    );

    let listed = host.request(json!("list"), "tasks/list", json!({}));
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    let mine = tasks
        .iter()
        .find(|t| t["taskId"] == task_id.as_str())
        .expect("listed");
    assert_eq!(mine["status"], "completed");
    // The plain call's job is in the same table, so it is a task too.
    assert!(tasks.len() >= 2, "{listed}");
    assert!(listed["result"].get("nextCursor").is_none());
    let bad = host.request(json!("bad"), "tasks/list", json!({"cursor": "garbage"}));
    assert_eq!(bad["error"]["code"], -32602);
    let late = host.request(json!("late"), "tasks/cancel", json!({"taskId": task_id}));
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'completed'"),
        "{late}"
    );
    // The same job through the `poll` tool: one table.
    let polled = host.request(
        json!("poll"),
        "tools/call",
        json!({"name": "poll", "arguments": {"job_id": task_id, "render": "json"}}),
    );
    assert_eq!(polled["result"]["structuredContent"]["status"], "completed");

    let telemetry = host.request(
        json!("telemetry"),
        "tools/call",
        json!({"name": "telemetry", "arguments": {"render": "json"}}),
    );
    let journal = &telemetry["result"]["structuredContent"]["journal"];
    assert!(journal["journaled"].as_u64().unwrap() >= 10, "{journal}");
    assert!(
        journal["by_contract"]["convergent"].as_u64().unwrap() >= 10,
        "{journal}"
    );
    assert!(
        journal["closed_by_knowledge"]["completed"]
            .as_u64()
            .unwrap()
            >= 2,
        "{journal}"
    );
    assert_eq!(
        journal["open_by_knowledge"]["outcome_unknown"], 0,
        "{journal}"
    );
}

#[test]
fn legacy_tasks_cancel_kills_the_worker_and_the_next_task_succeeds() {
    let (mut host, _) = start_legacy();
    let created = host.request(
        json!("task"),
        "tools/call",
        json!({"name": LONG_JOB_TOOL, "arguments": long_job(), "task": {}}),
    );
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let pid = wait_for_busy_worker(&mut host, None);
    let cancelled = host.request(json!("cancel"), "tasks/cancel", json!({"taskId": task_id}));
    let took = gone_after(pid);
    eprintln!("worker {pid} gone {took:?} after tasks/cancel (2025-11-25)");
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["result"]["taskId"], task_id.as_str());
    assert!(
        took < Duration::from_millis(200),
        "worker took {took:?} to die"
    );
    let task = host.request(json!("get"), "tasks/get", json!({"taskId": task_id}));
    assert_eq!(task["result"]["status"], "cancelled");
    let result = host.request(json!("result"), "tasks/result", json!({"taskId": task_id}));
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(
        result["result"]["structuredContent"]["error"]["code"],
        "CANCELLED"
    );
    let again = host.request(json!("again"), "tasks/cancel", json!({"taskId": task_id}));
    assert_eq!(again["error"]["code"], -32602, "{again}");
    let next = host.request(
        json!("next"),
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": layout()}, "task": {}}),
    );
    let next_id = next["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (done, _) = get_until_terminal(&mut host, &next_id, None);
    assert_eq!(done["status"], "completed", "{done}");
}

#[test]
fn modern_extension_elects_a_task_and_inlines_the_result() {
    let mut host = spawn_host();
    let meta = modern_meta(true);
    let plain = plain_wait_call(&mut host, "plain", Some(modern_meta(true)));
    // Without the extension a job tool answers the usual job handle.
    let handle = host.request(
        json!("handle"),
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": layout(), "render": "json"},
               "_meta": modern_meta(false)}),
    );
    assert_eq!(handle["result"]["resultType"], "complete", "{handle}");
    assert!(handle["result"]["structuredContent"]["job_id"].is_string());

    let created = host.request(
        json!("task"),
        "tools/call",
        // `task` is a 2025-11-25 parameter: ignored under the extension.
        json!({"name": "simulate", "arguments": {"layout": layout()}, "task": {"ttl": 5},
               "_meta": meta}),
    );
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert!(created.get("result").is_none());
    assert!(created["ttlSeconds"].as_u64().unwrap() > 5, "{created}");
    assert!(created["pollIntervalMilliseconds"].as_u64().unwrap() > 0);
    let task_id = created["taskId"].as_str().unwrap().to_owned();
    let (done, _) = get_until_terminal(&mut host, &task_id, Some(meta.clone()));
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        stable_part(&result["structuredContent"]),
        stable_part(&plain["structuredContent"])
    );
    let update = host.request(
        json!("update"),
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {}, "_meta": meta}),
    );
    assert_eq!(
        update["result"],
        json!({"resultType": "complete"}),
        "{update}"
    );
    let ack = host.request(
        json!("ack"),
        "tasks/cancel",
        json!({"taskId": "job_unknown", "_meta": meta}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    // A tool error completes the task with the isError result (the extension keeps
    // `failed` for JSON-RPC errors).
    let bad = host.request(
        json!("bad"),
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": "/etc/passwd"}, "_meta": meta}),
    );
    let bad_id = bad["result"]["taskId"].as_str().unwrap().to_owned();
    let (bad_done, _) = get_until_terminal(&mut host, &bad_id, Some(meta.clone()));
    assert_eq!(bad_done["status"], "completed", "{bad_done}");
    assert_eq!(bad_done["result"]["isError"], true);
    assert_eq!(
        bad_done["result"]["structuredContent"]["error"]["code"],
        "PATH_NOT_ALLOWED"
    );
}

#[test]
fn modern_tasks_cancel_kills_the_worker_and_the_next_task_succeeds() {
    let mut host = spawn_host();
    let meta = modern_meta(true);
    let created = host.request(
        json!("task"),
        "tools/call",
        json!({"name": LONG_JOB_TOOL, "arguments": long_job(), "_meta": meta}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let pid = wait_for_busy_worker(&mut host, Some(&meta));
    let ack = host.request(
        json!("cancel"),
        "tasks/cancel",
        json!({"taskId": task_id, "_meta": meta}),
    );
    let took = gone_after(pid);
    eprintln!("worker {pid} gone {took:?} after tasks/cancel (2026-07-28)");
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert!(
        took < Duration::from_millis(200),
        "worker took {took:?} to die"
    );
    let task = host.request(
        json!("get"),
        "tasks/get",
        json!({"taskId": task_id, "_meta": meta}),
    );
    assert_eq!(task["result"]["status"], "cancelled", "{task}");
    assert!(task["result"].get("result").is_none());
    let next = host.request(
        json!("next"),
        "tools/call",
        json!({"name": "simulate", "arguments": {"layout": layout()}, "_meta": meta}),
    );
    let next_id = next["result"]["taskId"].as_str().unwrap().to_owned();
    let (done, _) = get_until_terminal(&mut host, &next_id, Some(meta.clone()));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false);
}
