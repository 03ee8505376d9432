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
