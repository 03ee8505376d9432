//! The workers' private runtime directories (`src/supervisor/runtime_dir.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use reticle_dispatch::supervisor::{RuntimeDir, SupervisorError};

#[test]
fn directory_is_private_unique_and_removed_on_drop() {
    let base = std::env::temp_dir();
    let a = RuntimeDir::create(Some(&base), 0).unwrap();
    let b = RuntimeDir::create(Some(&base), 0).unwrap();
    assert_ne!(a.path(), b.path());
    let mode = std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert!(a.socket_path(3).ends_with("w3.sock"));
    let path = a.path().to_path_buf();
    std::fs::write(path.join("leftover"), b"x").unwrap();
    drop(a);
    assert!(!path.exists());
}

#[test]
fn overlong_base_is_refused() {
    let long = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
    assert!(matches!(
        RuntimeDir::create(Some(&long), 0),
        Err(SupervisorError::RuntimeDir { .. })
    ));
}
