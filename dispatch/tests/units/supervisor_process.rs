//! Starting one worker process (`src/supervisor/process.rs`): the refused-allocation
//! line, the worker's environment allow-list, a real spawn.

use std::ffi::OsString;
use std::time::Duration;

use reticle_dispatch::supervisor::{
    LiveGroups, RuntimeDir, Spawner, SupervisorConfig, WorkerStderr, refused_allocation_size,
    start_worker, worker_env_allowed, worker_environment,
};
use reticle_protocol::wire::{WORKER_PARENT_PID_ENV, WORKER_SOCKET_ENV, WORKER_THREADS_ENV};

fn pairs(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    list.iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

#[test]
fn the_runtime_s_refused_allocation_line_is_recognised() {
    assert_eq!(
        refused_allocation_size("memory allocation of 1073741824 bytes failed"),
        Some(1 << 30)
    );
    assert_eq!(
        refused_allocation_size("memory allocation of 12 bytes failed\r"),
        Some(12)
    );
    assert_eq!(
        refused_allocation_size("INFO memory allocation of 12 bytes"),
        None
    );
    assert_eq!(
        refused_allocation_size("memory allocation of many bytes failed"),
        None
    );
}

#[test]
fn only_allowed_host_variables_reach_a_worker() {
    let host = pairs(&[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("LC_ALL", "C.UTF-8"),
        ("VK_ICD_FILENAMES", "/icd.json"),
        ("MESA_LOADER_DRIVER_OVERRIDE", "zink"),
        ("__GLX_VENDOR_LIBRARY_NAME", "nvidia"),
        ("RETICLE_BACKEND", "cpu"),
        ("KLAYOUT_HOME", "/k"),
        ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
        ("LD_PRELOAD", "/evil.so"),
        ("RETICLE_BACKEND_URL", "http://x"),
        ("SSH_AUTH_SOCK", "/tmp/agent"),
    ]);
    let extra = pairs(&[("RETICLE_BACKEND", "gpu")]);
    let env = worker_environment(host, &extra);
    let names: Vec<&str> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "HOME",
            "KLAYOUT_HOME",
            "LC_ALL",
            "MESA_LOADER_DRIVER_OVERRIDE",
            "PATH",
            "RETICLE_BACKEND",
            "VK_ICD_FILENAMES",
            "__GLX_VENDOR_LIBRARY_NAME"
        ]
    );
    // The configured extra wins over the inherited value.
    assert!(env.contains(&("RETICLE_BACKEND".into(), "gpu".into())));
}

/// Spawns a real "worker" (a shell that dumps its environment and exits before the
/// hello) through `start_worker` and checks what reached it.
#[tokio::test]
async fn a_spawned_worker_sees_only_the_explicit_environment() {
    // The host's environment as the config snapshot holds it: a secret, an ordinary
    // allowed variable, and one the configured extras override.
    let secret = "AWS_SECRET_ACCESS_KEY";
    assert!(!worker_env_allowed(secret));
    let host_env = pairs(&[
        (secret, "s3cr3t"),
        ("PATH", "/usr/bin:/bin"),
        ("RETICLE_BACKEND", "gpu"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("env.txt");
    let config = SupervisorConfig {
        worker_exe: "/bin/sh".into(),
        worker_args: vec!["-c".into(), format!("env > '{}'", dump.display()).into()],
        host_env,
        worker_env: vec![("RETICLE_BACKEND".into(), "cpu".into())],
        runtime_dir_base: Some(dir.path().to_path_buf()),
        worker_stderr: WorkerStderr::Null,
        handshake_timeout: Duration::from_secs(10),
        workers: 2,
        cores: 5,
        ..SupervisorConfig::default()
    };
    let spawner = Spawner::start().unwrap();
    let groups = LiveGroups::default();
    let runtime = RuntimeDir::create(config.runtime_dir_base.as_deref(), 0).unwrap();
    let result = start_worker(
        &config,
        &config.worker_exe,
        &spawner,
        &groups,
        &runtime,
        0,
        1,
    )
    .await;
    assert!(result.is_err(), "a shell never says hello");
    let text = std::fs::read_to_string(&dump).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(
        !names.contains(&secret),
        "{secret} leaked into the worker: {names:?}"
    );
    assert!(text.lines().any(|l| l == "RETICLE_BACKEND=cpu"), "{text}");
    assert!(
        text.lines().any(|l| l == format!("{WORKER_THREADS_ENV}=2")),
        "two workers on five cores get two threads each: {text}"
    );
    for expected in [
        "PATH",
        "RETICLE_BACKEND",
        WORKER_SOCKET_ENV,
        WORKER_PARENT_PID_ENV,
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    for name in &names {
        assert!(
            worker_env_allowed(name)
                || [
                    WORKER_SOCKET_ENV,
                    WORKER_PARENT_PID_ENV,
                    WORKER_THREADS_ENV,
                    "PWD",
                    "SHLVL",
                    "_"
                ]
                .contains(name),
            "{name} is not on the allow-list"
        );
    }
}
