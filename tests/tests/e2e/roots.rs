//! Allowed roots: the client's MCP roots when it declares them (legacy
//! `roots/list`), else `RETICLE_ALLOWED_ROOTS`, else the working directory.

use std::time::Duration;

use reticle_tests::Host;
use serde_json::{Value, json};

fn health_roots(host: &mut Host, id: &str) -> Value {
    let health = host.request(
        json!(id),
        "tools/call",
        json!({"name": "health", "arguments": {"render": "json"}}),
    );
    health["result"]["structuredContent"]["allowed_roots"].clone()
}

#[test]
fn client_roots_are_requested_and_adopted() {
    let root = tempfile::tempdir().unwrap();
    let mut host = Host::start();
    host.request(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": true}}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let request = host.recv();
    assert_eq!(request["method"], "roots/list", "{request}");
    let id = request["id"].clone();
    assert!(id.is_string());
    host.send(&json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": format!("file://{}", root.path().display()), "name": "work"}]}}));
    // The response has no answer of its own; poll health until the roots are in.
    let canonical = root.path().canonicalize().unwrap();
    let mut roots = Value::Null;
    for attempt in 0..50 {
        roots = health_roots(&mut host, &format!("h{attempt}"));
        if roots["source"] == "client" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(roots["source"], "client", "{roots}");
    assert_eq!(roots["roots"], json!([canonical]));
    // A change notification triggers a new request.
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let again = host.recv();
    assert_eq!(again["method"], "roots/list");
    assert_ne!(again["id"], request["id"], "a fresh id per request");
}

#[test]
fn environment_roots_without_client_roots() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let list = format!("{}:{}", a.path().display(), b.path().display());
    let mut host = Host::start_with(&[("RETICLE_ALLOWED_ROOTS", &list)]);
    // A legacy client without the roots capability: no roots/list request.
    host.request(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let roots = health_roots(&mut host, "h");
    assert_eq!(roots["source"], "environment", "{roots}");
    let mut want = vec![
        a.path().canonicalize().unwrap(),
        b.path().canonicalize().unwrap(),
    ];
    want.sort();
    assert_eq!(roots["roots"], json!(want));
}

/// Neither client roots nor `RETICLE_ALLOWED_ROOTS`: the working directory is the only
/// root, and a file outside it is `PATH_NOT_ALLOWED` naming that root.
#[test]
fn the_working_directory_is_the_root_without_client_or_environment_roots() {
    use std::io::{BufRead, Write};
    let cwd = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(reticle_tests::binary("reticle"))
        .arg("serve")
        .current_dir(cwd.path())
        .env_remove("RETICLE_ALLOWED_ROOTS")
        .env("MCP_READY_FILE", dir.path().join("ready"))
        .env("RETICLE_LOG_DIR", dir.path().join("logs"))
        .env("RETICLE_LAZY_WORKERS", "true")
        .env("KLAYOUT_MCP_ARTIFACT_ROOT", dir.path().join("artifacts"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let outside = reticle_tests::fixtures_dir().join("layouts/observer_demo.gds");
    {
        let mut stdin = child.stdin.take().unwrap();
        for message in [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "health", "arguments": {"render": "json"}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "open_layout", "arguments": {"path": outside}}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        // Dropping stdin is EOF: the host answers what it has and exits.
    }
    let answers: Vec<Value> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {answers:?}"))
    };
    let canonical = cwd.path().canonicalize().unwrap();
    let roots = &by_id(1)["result"]["structuredContent"]["allowed_roots"];
    assert_eq!(roots["source"], "working_directory", "{roots}");
    assert_eq!(roots["roots"], json!([canonical]), "{roots}");
    let error = &by_id(2)["result"]["structuredContent"]["error"];
    assert_eq!(error["code"], "PATH_NOT_ALLOWED", "{error}");
    assert_eq!(
        error["details"]["allowed_roots"],
        json!([canonical]),
        "{error}"
    );
}
