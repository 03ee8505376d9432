//! Starting one worker process: socket, spawn in its own process group, handshake;
//! and killing it: SIGKILL to the whole group, then reap.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use reticle_protocol::sync::lock;
use reticle_protocol::wire::{
    WIRE_VERSION, WORKER_PARENT_PID_ENV, WORKER_SOCKET_ENV, WORKER_THREADS_ENV, WorkerHello,
    WorkerMessage,
};
use tokio::io::AsyncBufReadExt;
use tokio::net::UnixListener;
use tokio::net::unix::OwnedWriteHalf;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::config::{SupervisorConfig, WorkerStderr};
use super::runtime_dir::RuntimeDir;
use super::wire::{ConnEvent, spawn_reader};
use super::{DeathCause, SupervisorError};

/// Process groups of live workers by slot, so dropping the supervisor can kill them
/// all synchronously.
pub type LiveGroups = Arc<Mutex<HashMap<usize, u32>>>;

/// Kills every registered group (kill-on-drop of the whole supervisor).
pub fn kill_all(groups: &LiveGroups) {
    let groups = lock(groups);
    for &pid in groups.values() {
        kill_group(pid);
    }
}

fn kill_group(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if let Err(e) = killpg(Pid::from_raw(raw), Signal::SIGKILL) {
        // ESRCH: the group is already empty.
        tracing::debug!(pid, error = %e, "killpg");
    }
}

/// Spawns every worker from one long-lived thread.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
/// process. Tokio may retire the threads that poll our tasks (blocking-pool threads,
/// `block_in_place`), which would kill healthy workers; this thread lives exactly as
/// long as the supervisor, so its exit doubles as a last-resort kill switch.
pub struct Spawner {
    tx: std::sync::mpsc::Sender<SpawnRequest>,
}

struct SpawnRequest {
    command: Command,
    reply: oneshot::Sender<std::io::Result<Child>>,
}

impl Spawner {
    /// Starts the spawner thread inside the current Tokio runtime.
    pub fn start() -> Result<Self, SupervisorError> {
        let handle = tokio::runtime::Handle::current();
        let (tx, rx) = std::sync::mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("reticle-worker-spawner".to_owned())
            .spawn(move || {
                let _runtime = handle.enter();
                while let Ok(mut request) = rx.recv() {
                    let _ = request.reply.send(request.command.spawn());
                }
            })
            .map_err(|e| SupervisorError::Spawn {
                exe: "spawner thread".to_owned(),
                message: e.to_string(),
            })?;
        Ok(Self { tx })
    }

    async fn spawn(&self, command: Command) -> std::io::Result<Child> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(SpawnRequest { command, reply })
            .map_err(|_| std::io::Error::other("spawner thread is gone"))?;
        rx.await
            .map_err(|_| std::io::Error::other("spawner thread is gone"))?
    }
}

/// Owns the right to SIGKILL a worker's process group: armed from spawn until the
/// leader is reaped (after that the pid may be reused, so it must not be signalled).
struct GroupGuard {
    groups: LiveGroups,
    slot: usize,
    pid: u32,
    armed: bool,
}

impl GroupGuard {
    fn new(groups: &LiveGroups, slot: usize, pid: u32) -> Self {
        lock(groups).insert(slot, pid);
        Self {
            groups: Arc::clone(groups),
            slot,
            pid,
            armed: true,
        }
    }

    fn kill(&self) {
        if self.armed {
            kill_group(self.pid);
        }
    }

    fn disarm(&mut self) {
        if self.armed {
            self.armed = false;
            let mut groups = lock(&self.groups);
            if groups.get(&self.slot) == Some(&self.pid) {
                groups.remove(&self.slot);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        self.disarm();
    }
}

/// A worker process that completed the handshake.
pub struct LiveWorker {
    // Field order matters: the guard kills the group before `child` is dropped
    // (and handed to Tokio's orphan reaper).
    guard: GroupGuard,
    /// The process; wait on it through [`LiveWorker::reaped`].
    pub child: Child,
    /// Pid (and process group id).
    pub pid: u32,
    /// The hello it sent.
    pub hello: WorkerHello,
    /// When it was spawned.
    pub started_at: Instant,
    /// Frames from the worker.
    pub events: mpsc::Receiver<ConnEvent>,
    /// Frames to the worker.
    pub writer: OwnedWriteHalf,
    reader_task: JoinHandle<()>,
    /// Reads the worker's stderr until the last process holding it is gone.
    stderr_task: Option<JoinHandle<()>>,
    /// Size of the allocation the worker's stderr reported refused; 0 if none.
    refused_allocation: Arc<AtomicU64>,
    /// Set once the child was reaped.
    exit: Option<ExitStatus>,
}

impl LiveWorker {
    /// SIGKILLs the whole process group and reaps the leader.
    pub async fn kill_and_reap(&mut self) -> DeathCause {
        if let Some(status) = self.exit {
            return exit_cause(status);
        }
        self.guard.kill();
        let status = self.child.wait().await;
        self.reaped(status)
    }

    /// After the worker was reaped: the allocation the kernel refused it, if its stderr
    /// said so. Waits up to 250 ms for the stderr reader to reach the end, since the
    /// line is written just before the abort that ended the process.
    pub async fn refused_allocation(&mut self) -> Option<u64> {
        if let Some(task) = self.stderr_task.as_mut()
            && tokio::time::timeout(Duration::from_millis(250), task)
                .await
                .is_ok()
        {
            self.stderr_task = None;
        }
        match self.refused_allocation.load(Ordering::SeqCst) {
            0 => None,
            size => Some(size),
        }
    }

    /// Gives the process `grace` to exit by itself, then kills and reaps it.
    pub async fn reap_within(&mut self, grace: Duration) -> DeathCause {
        if let Some(status) = self.exit {
            return exit_cause(status);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => self.reaped(status),
            Err(_) => self.kill_and_reap().await,
        }
    }

    /// Records the result of `child.wait()`: the leader is reaped, its group must no
    /// longer be signalled.
    pub fn reaped(&mut self, status: std::io::Result<ExitStatus>) -> DeathCause {
        // Once `wait` returned, the leader is reaped (or was never ours to reap).
        self.guard.disarm();
        self.reader_task.abort();
        match status {
            Ok(status) => {
                self.exit = Some(status);
                exit_cause(status)
            }
            Err(e) => DeathCause::Protocol {
                message: format!("wait failed: {e}"),
            },
        }
    }
}

fn exit_cause(status: ExitStatus) -> DeathCause {
    DeathCause::Exited {
        code: status.code(),
        signal: status.signal(),
    }
}

/// The largest resident set, in bytes, that any child process this host has reaped
/// reached in its life (`getrusage(RUSAGE_CHILDREN).ru_maxrss`, the kernel's high-water
/// mark); the host's children are its workers. 0 when nothing was reaped or the call
/// failed. A child's figure includes the moment between fork and exec, when it was a copy
/// of the host.
#[must_use]
pub fn reaped_children_peak_rss_bytes() -> u64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .ok()
        .and_then(|usage| u64::try_from(usage.max_rss()).ok())
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// Variables a worker inherits from the host by exact name: the process basics, the
/// RETICLE_* settings workers read, and GPU driver selection.
const WORKER_ENV_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "TMPDIR",
    "TZ",
    "XDG_RUNTIME_DIR",
    "XDG_CACHE_HOME",
    "RETICLE_BACKEND",
    "RETICLE_KERNEL_CACHE_DIR",
    "RETICLE_DATA_DIR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "LD_LIBRARY_PATH",
    "VK_ICD_FILENAMES",
    "VK_DRIVER_FILES",
    "VK_ADD_DRIVER_FILES",
    "VK_LOADER_DEBUG",
    "VK_INSTANCE_LAYERS",
    "VK_LAYER_PATH",
    "CUDA_VISIBLE_DEVICES",
    "DRI_PRIME",
];

/// Variables a worker inherits from the host by prefix: locale, Mesa/GL/GLX/NVIDIA
/// driver knobs, wgpu's adapter selection and KLayout's settings.
const WORKER_ENV_PREFIXES: &[&str] = &[
    "LC_", "MESA_", "LIBGL_", "__GLX_", "__NV_", "NVIDIA_", "GALLIUM_", "LP_", "WGPU_", "KLAYOUT_",
];

/// Whether a host variable named `name` is passed to workers.
pub fn worker_env_allowed(name: &str) -> bool {
    WORKER_ENV_NAMES.contains(&name) || WORKER_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The complete environment of a worker: the allowed subset of `host` (see
/// [`worker_env_allowed`]), then `extra` (the supervisor's configured variables), sorted
/// by name so a spawn is reproducible. The socket variables are added by the caller.
pub fn worker_environment(
    host: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    extra: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: std::collections::BTreeMap<_, _> = host
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(worker_env_allowed))
        .collect();
    env.extend(extra.iter().cloned());
    env.into_iter().collect()
}

/// Spawns generation `generation` of slot `slot` and completes the handshake.
pub async fn start_worker(
    config: &SupervisorConfig,
    exe: &std::path::Path,
    spawner: &Spawner,
    groups: &LiveGroups,
    dir: &RuntimeDir,
    slot: usize,
    generation: u64,
) -> Result<LiveWorker, SupervisorError> {
    let started_at = Instant::now();
    let socket_path = dir.socket_path(generation);
    let _ = std::fs::remove_file(&socket_path);
    let listener = UnixListener::bind(&socket_path).map_err(|e| SupervisorError::RuntimeDir {
        path: socket_path.display().to_string(),
        message: format!("bind: {e}"),
    })?;

    let mut command = Command::new(exe);
    command
        .args(&config.worker_args)
        // An explicit environment (issue 10.3): nothing the host inherited reaches the
        // worker unless it is on the allow-list; the configured extras and the socket
        // variables come last and win.
        .env_clear()
        .env(WORKER_THREADS_ENV, config.threads_per_worker().to_string())
        .envs(worker_environment(
            config.host_env.iter().cloned(),
            &config.worker_env,
        ))
        .env(WORKER_SOCKET_ENV, &socket_path)
        .env(WORKER_PARENT_PID_ENV, std::process::id().to_string())
        .stdin(Stdio::null())
        // Never the host's stdout: that is the MCP stream.
        .stdout(Stdio::null())
        // Always read by the host, whatever `worker_stderr` says: it is where the Rust
        // runtime reports the allocation the kernel refused before it aborts.
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(bytes) = config.data_rlimit_bytes() {
        limit_data_segment(&mut command, bytes);
    }
    let mut child = spawner
        .spawn(command)
        .await
        .map_err(|e| SupervisorError::Spawn {
            exe: exe.display().to_string(),
            message: e.to_string(),
        })?;
    let Some(pid) = child.id() else {
        return Err(SupervisorError::Spawn {
            exe: exe.display().to_string(),
            message: "exited before it could be tracked".to_owned(),
        });
    };
    let guard = GroupGuard::new(groups, slot, pid);
    let refused_allocation = Arc::new(AtomicU64::new(0));
    let stderr_task = child.stderr.take().map(|stderr| {
        forward_stderr(
            stderr,
            pid,
            config.worker_stderr,
            Arc::clone(&refused_allocation),
        )
    });
    // From here on every failure path kills and reaps through `pending`.
    let mut pending = PendingWorker { guard, child, pid };
    match handshake(config, &listener, &mut pending, started_at).await {
        Ok((hello, events, writer, reader_task)) => {
            let _ = std::fs::remove_file(&socket_path);
            let PendingWorker { guard, child, pid } = pending;
            tracing::info!(slot, generation, pid, backend = %hello.backend.adapter, "worker ready");
            Ok(LiveWorker {
                guard,
                child,
                pid,
                hello,
                started_at,
                events,
                writer,
                reader_task,
                stderr_task,
                refused_allocation,
                exit: None,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&socket_path);
            pending.guard.kill();
            let _ = pending.child.wait().await;
            pending.guard.disarm();
            Err(e)
        }
    }
}

struct PendingWorker {
    guard: GroupGuard,
    child: Child,
    pid: u32,
}

type Handshaken = (
    WorkerHello,
    mpsc::Receiver<ConnEvent>,
    OwnedWriteHalf,
    JoinHandle<()>,
);

async fn handshake(
    config: &SupervisorConfig,
    listener: &UnixListener,
    pending: &mut PendingWorker,
    started_at: Instant,
) -> Result<Handshaken, SupervisorError> {
    let deadline = tokio::time::Instant::from_std(started_at + config.handshake_timeout);
    let timeout =
        || SupervisorError::Handshake(format!("no hello within {:?}", config.handshake_timeout));
    let early_exit = |status: std::io::Result<ExitStatus>| {
        SupervisorError::Handshake(match status {
            Ok(s) => format!("worker {} before its hello", exit_cause(s)),
            Err(e) => format!("wait failed: {e}"),
        })
    };
    let stream = tokio::select! {
        accepted = listener.accept() => accepted
            .map_err(|e| SupervisorError::Handshake(format!("accept: {e}")))?
            .0,
        status = pending.child.wait() => return Err(early_exit(status)),
        () = tokio::time::sleep_until(deadline) => return Err(timeout()),
    };
    // Only our uid can reach the socket; still insist the peer is the child we spawned.
    if let Ok(cred) = stream.peer_cred()
        && let Some(peer) = cred.pid()
        && i64::from(peer) != i64::from(pending.pid)
    {
        return Err(SupervisorError::Handshake(format!(
            "socket peer is pid {peer}, not the worker {}",
            pending.pid
        )));
    }
    let (reader, writer) = stream.into_split();
    let (mut events, reader_task) = spawn_reader(reader);
    let first = tokio::select! {
        event = events.recv() => event,
        status = pending.child.wait() => {
            reader_task.abort();
            return Err(early_exit(status));
        }
        () = tokio::time::sleep_until(deadline) => {
            reader_task.abort();
            return Err(timeout());
        }
    };
    let hello = match first {
        Some(ConnEvent::Message(WorkerMessage::Hello(hello))) => hello,
        other => {
            reader_task.abort();
            return Err(SupervisorError::Handshake(format!(
                "expected hello, got {other:?}"
            )));
        }
    };
    if hello.wire_version != WIRE_VERSION || hello.pid != pending.pid {
        reader_task.abort();
        return Err(SupervisorError::Handshake(format!(
            "hello speaks wire v{} from pid {}; expected v{WIRE_VERSION} from pid {}",
            hello.wire_version, hello.pid, pending.pid
        )));
    }
    Ok((hello, events, writer, reader_task))
}

/// Starts the worker under `RLIMIT_DATA` = `bytes` (soft and hard): the kernel refuses
/// private writable memory beyond it at allocation time, which the resident-memory
/// check, once a second, cannot do. Address space (`RLIMIT_AS`) is left alone: GPU
/// drivers reserve far more of it than they ever touch (D26).
#[allow(unsafe_code)]
fn limit_data_segment(command: &mut Command, bytes: u64) {
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // setrlimit system call, which is async-signal-safe; it allocates nothing and
    // touches no lock.
    unsafe {
        command.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, bytes, bytes)
                .map_err(std::io::Error::from)
        });
    }
}

/// The size in the line the Rust runtime writes to stderr when an allocation fails,
/// just before it aborts: `memory allocation of N bytes failed`.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn refused_allocation_size(line: &str) -> Option<u64> {
    line.trim()
        .strip_prefix("memory allocation of ")?
        .strip_suffix(" bytes failed")?
        .parse()
        .ok()
}

/// Reads a worker's stderr to its end: each line goes where `mode` says, and a refused
/// allocation's size is kept in `refused` for the death report.
fn forward_stderr(
    stderr: tokio::process::ChildStderr,
    pid: u32,
    mode: WorkerStderr,
    refused: Arc<AtomicU64>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(size) = refused_allocation_size(&line) {
                refused.store(size.max(1), Ordering::SeqCst);
            }
            match mode {
                WorkerStderr::Tracing => {
                    tracing::info!(target: "reticle::worker", worker_pid = pid, "{line}");
                }
                WorkerStderr::Inherit => eprintln!("{line}"),
                WorkerStderr::Null => {}
            }
        }
    })
}
