//! The operator's control socket and `reticle ctl`.
//!
//! A running host listens on a Unix socket, mode 0600, inside a 0700 directory owned by
//! its user (`$XDG_RUNTIME_DIR/reticle/`, else `/tmp/reticle-<uid>/`), named after its
//! pid: `host-<pid>.sock`. Only a peer with the host's uid is served (`SO_PEERCRED`).
//! One request line → one response line, JSON:
//! `{"verb": "health" | "telemetry" | "events" | "rollout" | "rollback" | "reexec", …}` →
//! `{"ok": true, …}` or `{"ok": false, "error": "…"}`.
//!
//! [`request`] is the client's side of one exchange; `reticle ctl` (in the `reticle`
//! binary) finds the socket with [`socket_path`] and prints the answer.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::mpsc;

use crate::server::{LoopCommand, Server};

/// Longest request line the control socket reads.
const MAX_REQUEST: u64 = 64 * 1024;
/// How long the control socket waits for a request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The directory of control sockets for this user, created 0700 and checked.
///
/// # Errors
/// When it cannot be created or is not a private directory of ours.
pub fn socket_dir(runtime_dir: Option<&std::ffi::OsStr>) -> std::io::Result<PathBuf> {
    let base = runtime_dir
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir());
    let uid = nix::unistd::geteuid().as_raw();
    let dir = match base {
        Some(base) => base.join("reticle"),
        None => PathBuf::from(format!("/tmp/reticle-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory of uid {uid}",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The control socket of the host with `pid`.
///
/// # Errors
/// As [`socket_dir`].
pub fn socket_path(pid: u32, runtime_dir: Option<&std::ffi::OsStr>) -> std::io::Result<PathBuf> {
    Ok(socket_dir(runtime_dir)?.join(format!("host-{pid}.sock")))
}

/// The bound control socket; removes its file when dropped.
#[derive(Debug)]
pub struct ControlSocket {
    listener: Option<UnixListener>,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `host-<own pid>.sock` under `runtime_dir` (`XDG_RUNTIME_DIR`; replacing a
    /// stale file of ours, e.g. the previous image's after a reexec) with mode 0600.
    ///
    /// # Errors
    /// When the directory is unsafe or the socket cannot be bound.
    pub fn bind(runtime_dir: Option<&std::ffi::OsStr>) -> std::io::Result<Self> {
        let path = socket_path(std::process::id(), runtime_dir)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(&path)?;
        // The directory is 0700 already; the mode is the second fence.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Self {
            listener: Some(listener),
            path,
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves operators until the task is dropped. Reexec requests go to the server
    /// loop through `commands`; `host_exe` is the binary a reexec without `--bin` runs.
    pub fn serve(
        mut self,
        server: Server,
        commands: mpsc::Sender<LoopCommand>,
        host_exe: PathBuf,
    ) -> ControlTask {
        let listener = self.listener.take();
        let task = tokio::spawn(async move {
            let Some(listener) = listener else { return };
            let host_exe = Arc::new(host_exe);
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let server = server.clone();
                let commands = commands.clone();
                let host_exe = Arc::clone(&host_exe);
                tokio::spawn(async move {
                    if let Err(e) = serve_one(stream, &server, &commands, &host_exe).await {
                        tracing::warn!(error = %e, "control connection failed");
                    }
                });
            }
        });
        ControlTask { task, socket: self }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The running control server; dropping it stops it and removes the socket file.
#[derive(Debug)]
pub struct ControlTask {
    task: tokio::task::JoinHandle<()>,
    socket: ControlSocket,
}

impl ControlTask {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.socket.path()
    }
}

impl Drop for ControlTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_one(
    mut stream: tokio::net::UnixStream,
    server: &Server,
    commands: &mpsc::Sender<LoopCommand>,
    host_exe: &Path,
) -> std::io::Result<()> {
    let cred = stream.peer_cred()?;
    let uid = nix::unistd::geteuid().as_raw();
    if cred.uid() != uid {
        tracing::warn!(
            peer_uid = cred.uid(),
            "control connection from another user refused"
        );
        return Ok(());
    }
    let mut line = String::new();
    {
        let (reader, _) = stream.split();
        let mut reader = tokio::io::BufReader::new(reader.take(MAX_REQUEST));
        // A peer that never finishes its line must not hold a task forever.
        tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line))
            .await
            .map_err(|_| std::io::Error::other("no request line within 10 s"))??;
    }
    let answer = match serde_json::from_str::<Value>(&line) {
        Ok(request) => handle(&request, server, commands, host_exe).await,
        Err(e) => json!({"ok": false, "error": format!("not a JSON request line: {e}")}),
    };
    server.state().events.record(
        "control",
        json!({"verb": serde_json::from_str::<Value>(&line).ok().and_then(|r| r["verb"].as_str().map(str::to_owned)),
               "peer_pid": cred.pid(), "ok": answer["ok"]}),
    );
    let mut bytes = answer.to_string().into_bytes();
    bytes.push(b'\n');
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

async fn handle(
    request: &Value,
    server: &Server,
    commands: &mpsc::Sender<LoopCommand>,
    host_exe: &Path,
) -> Value {
    let fail = |error: String| json!({"ok": false, "error": error});
    let path_arg = |key: &str| -> Result<Option<PathBuf>, String> {
        match request.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(p)) if Path::new(p).is_absolute() => Ok(Some(PathBuf::from(p))),
            Some(other) => Err(format!("{key} must be an absolute path, got {other}")),
        }
    };
    match request["verb"].as_str() {
        Some("health") => {
            json!({"ok": true, "health": reticle_tools::health_payload(server.state(), &server.scope().roots, server.workers(), server.jobs(), server.dispatcher())})
        }
        Some("telemetry") => {
            json!({"ok": true, "telemetry": reticle_tools::telemetry_payload(server.state(), server.workers(), server.jobs(), server.journal(), server.dispatcher())})
        }
        Some("config") => json!({
            "ok": true,
            "settings": server.state().config().settings_json(),
        }),
        Some("events") => json!({
            "ok": true,
            "path": server.state().events.path(),
            "seq": server.state().events.seq(),
        }),
        Some("rollout") => match path_arg("worker_bin") {
            Ok(Some(bin)) => match server.workers().rollout(&bin).await {
                Ok(record) => json!({"ok": true, "rollout": record}),
                Err(e) => fail(e),
            },
            Ok(None) => fail("rollout needs worker_bin".to_owned()),
            Err(e) => fail(e),
        },
        Some("rollback") => match server.workers().rollback().await {
            Ok(record) => json!({"ok": true, "rollout": record}),
            Err(e) => fail(e),
        },
        Some("reexec") => {
            let bin = match path_arg("bin") {
                Ok(bin) => bin.unwrap_or_else(|| host_exe.to_path_buf()),
                Err(e) => return fail(e),
            };
            let checked = {
                let bin = bin.clone();
                tokio::task::spawn_blocking(move || crate::reexec::check_binary(&bin)).await
            };
            match checked {
                Ok(Ok(version)) => {
                    let before = server.state().reexecs();
                    if commands
                        .send(LoopCommand::Reexec { bin: bin.clone() })
                        .await
                        .is_err()
                    {
                        return fail("the server loop is gone".to_owned());
                    }
                    json!({"ok": true, "accepted": true, "bin": bin, "version": version,
                           "pid": std::process::id(), "reexecs_before": before})
                }
                Ok(Err(e)) => fail(format!("refusing to reexec: {e}")),
                Err(e) => fail(format!("refusing to reexec: {e}")),
            }
        }
        Some(other) => fail(format!(
            "unknown verb {other:?}; use health, telemetry, config, events, rollout, rollback or reexec"
        )),
        None => fail("the request needs a string verb".to_owned()),
    }
}

/// Sends one request to a control socket and reads its answer.
///
/// # Errors
/// When the socket cannot be reached or the answer is not JSON.
pub fn request(socket: &Path, request: &Value) -> Result<Value, String> {
    let mut stream = UnixStream::connect(socket)
        .map_err(|e| format!("cannot reach the host at {} ({e})", socket.display()))?;
    // A rollout waits for blue to finish its jobs: allow for the job time limit.
    stream
        .set_read_timeout(Some(Duration::from_secs(900)))
        .map_err(|e| e.to_string())?;
    let mut line = request.to_string();
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(|e| format!("sending to {}: {e}", socket.display()))?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .map_err(|e| format!("reading from {}: {e}", socket.display()))?;
    serde_json::from_str(&answer)
        .map_err(|e| format!("the host's answer is not JSON ({e}): {answer:?}"))
}
