//! Blue/green rollout and rollback of the pool's worker binary (see the module
//! documentation of [`super`]).

use std::path::Path;
use std::time::{Duration, Instant};

use reticle_protocol::sync::lock;
use tokio::task::JoinHandle;

use super::{
    Inner, RolloutRecord, RolloutSnapshot, SlotMode, Supervisor, SupervisorError, SupervisorEvent,
};

impl Inner {
    fn set_mode(&self, ids: &[usize], mode: SlotMode) {
        for slot in self.slots().iter().filter(|s| ids.contains(&s.id)) {
            slot.mode.send_replace(mode);
            lock(&slot.status).mode = mode;
        }
    }

    /// Waits for the tasks of `ids` to end, then forgets those slots.
    async fn retire(&self, ids: &[usize]) {
        self.set_mode(ids, SlotMode::Retiring);
        let tasks: Vec<JoinHandle<()>> = {
            let mut tasks = lock(&self.tasks);
            ids.iter().filter_map(|id| tasks.remove(id)).collect()
        };
        for task in tasks {
            let _ = task.await;
        }
        self.slots().retain(|s| !ids.contains(&s.id));
    }
}

impl Supervisor {
    /// The pool's release: current and previous binaries and the last rollout.
    #[must_use]
    pub fn rollout_snapshot(&self) -> RolloutSnapshot {
        let release = self.inner.release().clone();
        RolloutSnapshot {
            state: if release.rolling_out {
                "reloading"
            } else {
                "stable"
            },
            current_exe: release.current_exe.display().to_string(),
            previous_exe: release.previous_exe.map(|p| p.display().to_string()),
            release: release.number,
            last: release.last,
        }
    }

    /// Replaces every worker with one running `exe`, blue/green: green workers start
    /// in standby; once every one of them completed its handshake, new jobs go to
    /// green and the old workers finish their jobs and stop. If a green worker fails
    /// to start, green is stopped, the old workers keep serving, and the error says
    /// why (the rollout fault is also kept in [`Self::rollout_snapshot`]).
    ///
    /// # Errors
    /// [`SupervisorError::Rollout`] when a rollout is already running, `exe` is not an
    /// executable file, or a green worker failed its start; `ShuttingDown`.
    pub async fn rollout(&self, exe: &Path) -> Result<RolloutRecord, SupervisorError> {
        let inner = &self.inner;
        let _exclusive = inner
            .rollout_lock
            .try_lock()
            .map_err(|_| rollout_error(exe, "another rollout is in progress"))?;
        if *inner.shutdown.borrow() {
            return Err(SupervisorError::ShuttingDown);
        }
        let started = Instant::now();
        let release = {
            let mut release = inner.release();
            release.number += 1;
            release.rolling_out = true;
            release.number
        };
        inner.emit(SupervisorEvent::Rollout {
            step: "start",
            exe: exe.display().to_string(),
            release,
            detail: None,
        });
        let blue: Vec<usize> = inner
            .slots()
            .iter()
            .filter(|s| *s.mode.borrow() == SlotMode::Active)
            .map(|s| s.id)
            .collect();
        let outcome = match check_executable(exe) {
            Err(message) => Err(message),
            Ok(()) => {
                let green: Vec<_> = (0..inner.config.workers)
                    .map(|_| inner.add_slot(exe, release, SlotMode::Standby))
                    .collect();
                let ids: Vec<usize> = green.iter().map(|(id, _)| *id).collect();
                let mut failure = None;
                for (_, ready) in green {
                    let result = ready.await.unwrap_or_else(|_| {
                        Err(SupervisorError::Handshake(
                            "the slot ended during start".into(),
                        ))
                    });
                    if let Err(e) = result {
                        failure.get_or_insert(e.to_string());
                    }
                }
                match failure {
                    Some(message) => {
                        // Green never took a job (standby): stopping it loses nothing.
                        inner.retire(&ids).await;
                        Err(message)
                    }
                    None => Ok(ids),
                }
            }
        };
        let record = match outcome {
            Err(message) => {
                let record = RolloutRecord {
                    ok: false,
                    exe: exe.display().to_string(),
                    release,
                    finished_unix_ms: unix_ms(),
                    duration_ms: millis(started.elapsed()),
                    message: format!(
                        "rollout to {} failed; still serving the previous workers: {message}",
                        exe.display()
                    ),
                };
                let mut state = inner.release();
                state.rolling_out = false;
                state.last = Some(record.clone());
                drop(state);
                inner.emit(SupervisorEvent::Rollout {
                    step: "failed",
                    exe: exe.display().to_string(),
                    release,
                    detail: Some(record.message.clone()),
                });
                return Err(SupervisorError::Rollout {
                    exe: exe.display().to_string(),
                    message: record.message,
                });
            }
            Ok(green) => {
                inner.set_mode(&green, SlotMode::Active);
                inner.emit(SupervisorEvent::Rollout {
                    step: "green_active",
                    exe: exe.display().to_string(),
                    release,
                    detail: Some(format!(
                        "{} green workers take new jobs; {} blue workers finish theirs",
                        green.len(),
                        blue.len()
                    )),
                });
                inner.retire(&blue).await;
                inner.emit(SupervisorEvent::Rollout {
                    step: "blue_retired",
                    exe: exe.display().to_string(),
                    release,
                    detail: None,
                });
                RolloutRecord {
                    ok: true,
                    exe: exe.display().to_string(),
                    release,
                    finished_unix_ms: unix_ms(),
                    duration_ms: millis(started.elapsed()),
                    message: format!("now serving {}", exe.display()),
                }
            }
        };
        let mut state = inner.release();
        let previous = std::mem::replace(&mut state.current_exe, exe.to_path_buf());
        state.previous_exe = Some(previous);
        state.rolling_out = false;
        state.last = Some(record.clone());
        drop(state);
        inner.emit(SupervisorEvent::Rollout {
            step: "done",
            exe: exe.display().to_string(),
            release,
            detail: None,
        });
        Ok(record)
    }

    /// Rolls back to the binary before the last successful rollout (blue/green, as
    /// [`Self::rollout`]).
    ///
    /// # Errors
    /// [`SupervisorError::Rollout`] when there is nothing to roll back to, or as
    /// [`Self::rollout`].
    pub async fn rollback(&self) -> Result<RolloutRecord, SupervisorError> {
        let (current, previous) = {
            let release = self.inner.release();
            (release.current_exe.clone(), release.previous_exe.clone())
        };
        let previous = previous
            .ok_or_else(|| rollout_error(&current, "no previous worker binary to roll back to"))?;
        self.rollout(&previous).await
    }
}

fn rollout_error(exe: &Path, message: &str) -> SupervisorError {
    SupervisorError::Rollout {
        exe: exe.display().to_string(),
        message: message.to_owned(),
    }
}

/// A rollout target must be a regular executable file (checked before any worker of the
/// old release is touched).
fn check_executable(exe: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{} is not an executable file", exe.display()));
    }
    Ok(())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, millis)
}
