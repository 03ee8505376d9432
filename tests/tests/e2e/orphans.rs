//! Nothing left behind (issue 30 item 7, D135): the session directory of a host that was
//! killed is deleted by the next host on the same artifact root once its TTL has passed,
//! and a running host's sessions are left alone.

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reticle_tests::{Host, fixtures_dir, repo_root};
use serde_json::{Value, json};

fn start(artifact_root: &std::path::Path) -> Host {
    let allowed = repo_root();
    Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", allowed.to_str().unwrap()),
        ("RETICLE_BACKEND", "cpu"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifact_root.to_str().unwrap()),
        ("KLAYOUT_MCP_SESSION_TTL_SECONDS", "1"),
    ])
}

/// Opens the observer demo layout and returns its session directory.
fn open_session(host: &mut Host, id: &str) -> PathBuf {
    let path = fixtures_dir().join("layouts/observer_demo.gds");
    let result = host.call_tool(id, "open_layout", json!({"path": path, "render": "json"}));
    assert_eq!(result["isError"], false, "{result}");
    let opened: &Value = &result["structuredContent"];
    PathBuf::from(opened["artifact_root"].as_str().unwrap())
}

#[test]
fn a_killed_hosts_session_directory_is_collected_by_the_next_host_after_its_ttl() {
    let artifacts = tempfile::tempdir().unwrap();
    let root = artifacts.path().join("root");

    let mut killed = start(&root);
    let orphan = open_session(&mut killed, "o");
    assert!(orphan.join("host.pid").is_file(), "{}", orphan.display());
    kill(Pid::from_raw(killed.child.id() as i32), Signal::SIGKILL).unwrap();
    killed.child.wait().unwrap();
    assert!(orphan.is_dir(), "a killed host deletes nothing");

    // A running host's session, older than the TTL by its files, stays.
    let mut running = start(&root);
    let kept = open_session(&mut running, "k");

    std::thread::sleep(Duration::from_millis(1_500));
    let mut next = start(&root);
    let health = next.call_tool("h", "health", json!({"render": "json"}));
    assert_eq!(health["isError"], false, "{health}");
    assert!(
        !orphan.exists(),
        "the killed host's session directory {} is still there",
        orphan.display()
    );
    assert!(
        kept.is_dir(),
        "the running host's session {} was deleted",
        kept.display()
    );

    for host in [&mut running, &mut next] {
        let (status, _) = host.close_and_wait();
        assert!(status.success(), "{status:?}");
    }
}
