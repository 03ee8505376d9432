//! What the supervisor tells its owner as it happens: workers ready, faults, restarts,
//! retirements and rollout steps. The host turns these into event-log records, health
//! and the telemetry ledger; the supervisor itself keeps no history.

use std::sync::Arc;

use reticle_protocol::wire::BackendDescription;

use super::DeathCause;

/// One thing that happened in the pool.
#[derive(Debug, Clone)]
pub enum SupervisorEvent {
    /// A worker completed its handshake.
    WorkerReady {
        /// Slot id.
        slot: usize,
        /// Its pid.
        pid: u32,
        /// The slot's process generation (1 for the first).
        generation: u64,
        /// Its binary.
        exe: String,
        /// The version it announced.
        version: String,
        /// Its imaging backend.
        backend: BackendDescription,
        /// The release (rollout) the slot belongs to.
        release: u64,
    },
    /// A worker died (crash, lost socket, missed heartbeats, over a limit).
    WorkerFault {
        /// Slot id.
        slot: usize,
        /// Its pid.
        pid: u32,
        /// Why.
        cause: DeathCause,
        /// The job it was running, if any.
        job_id: Option<String>,
    },
    /// A replacement worker is about to start (after a death or a cancel-kill).
    WorkerRestart {
        /// Slot id.
        slot: usize,
        /// The generation being started.
        generation: u64,
        /// Backoff waited before it, milliseconds.
        delay_ms: u64,
        /// What ended the previous process: `"fault"` or `"killed"` (a cancel).
        after: &'static str,
    },
    /// A slot of an old release stopped after finishing its work.
    WorkerRetired {
        /// Slot id.
        slot: usize,
        /// The release it belonged to.
        release: u64,
    },
    /// A rollout step: `start`, `failed`, `green_active`, `blue_retired`, `done`.
    Rollout {
        /// The step.
        step: &'static str,
        /// The binary being rolled out.
        exe: String,
        /// The release number of the rollout.
        release: u64,
        /// Free text for operators.
        detail: Option<String>,
    },
}

type Callback = Arc<dyn Fn(&SupervisorEvent) + Send + Sync>;

/// The owner's callback; empty by default.
#[derive(Clone, Default)]
pub struct EventHook(Option<Callback>);

impl EventHook {
    /// A hook calling `f` for every event (from the supervisor's tasks: keep it quick).
    pub fn new(f: impl Fn(&SupervisorEvent) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    /// Calls the hook, if any.
    pub fn emit(&self, event: &SupervisorEvent) {
        if let Some(f) = &self.0 {
            f(event);
        }
    }
}

impl std::fmt::Debug for EventHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "EventHook(set)"
        } else {
            "EventHook(none)"
        })
    }
}
