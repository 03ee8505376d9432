//! Dying with the parent: no orphaned worker may outlive a SIGKILLed host.

use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::getppid;
use reticle_protocol::wire::WORKER_PARENT_PID_ENV;

/// Why the worker refuses to run.
#[derive(Debug, thiserror::Error)]
pub enum ParentError {
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    #[error("cannot arm the parent-death signal: {0}")]
    Prctl(#[from] nix::Error),
    /// The parent the host said it would be is not our parent any more: it died
    /// between forking us and our arming the signal, and nobody would kill us.
    #[error("parent {expected} is gone (getppid() = {actual})")]
    ParentGone {
        /// The pid from the environment.
        expected: i32,
        /// Our parent now (the reaper that adopted us).
        actual: i32,
    },
    /// The environment variable is not a pid.
    #[error("{WORKER_PARENT_PID_ENV} is not a pid: {0:?}")]
    BadPid(String),
}

/// Asks the kernel to SIGKILL us when the parent dies, then closes the race in which
/// the parent died before the request: if the host told us its pid and that is no
/// longer our parent, we are already an orphan and must not run.
pub fn die_with_parent(parent_pid: Option<&std::ffi::OsStr>) -> Result<(), ParentError> {
    prctl::set_pdeathsig(Signal::SIGKILL)?;
    let Some(raw) = parent_pid else {
        // Started by hand (debugging): the signal is armed for whoever our parent is.
        tracing::debug!("{WORKER_PARENT_PID_ENV} not set; skipping the parent check");
        return Ok(());
    };
    let raw = raw.to_string_lossy().into_owned();
    let expected: i32 = raw
        .trim()
        .parse()
        .map_err(|_| ParentError::BadPid(raw.clone()))?;
    let actual = getppid().as_raw();
    if actual != expected {
        return Err(ParentError::ParentGone { expected, actual });
    }
    Ok(())
}
