//! The replay journal: every public request, its replay contract and what the host
//! knows about its execution (seed 004, DESIGN.md "Replay contracts").
//!
//! An entry opens when a request arrives and closes when the last thing working
//! for it lets go: the request task for a host-side method, the job for a tool that
//! runs on a worker (a job outlives the request that started it). Knowledge uses
//! libmcp's [`ExecutionKnowledge`] and moves only along its transitions: not
//! dispatched → in flight → completed, or in flight → outcome unknown when the
//! worker dies. What to do after a loss is libmcp's [`request_disposition`] of
//! (knowledge, contract, probe evidence, attempts): Convergent replays within the
//! attempt bound, ProbeRequired probes first, NeverReplay fails with a fault saying
//! the outcome is unknown (the host's replay policy, `dispatch::replay`, applies it).
//!
//! Work on workers is tracked per *unit* ([`JournalHandle::unit`]): a request whose job
//! runs several independent units (tiles of one layout) keeps one entry, and each unit
//! has its own knowledge and attempt count, so one unit's lost worker is decided on
//! that unit's attempts alone. Once an entry has units, its knowledge is theirs
//! combined ([`combined`]): outcome unknown if any unit's is, in flight while any runs
//! or some have not started, completed when all completed.
//!
//! Open entries are few (requests and jobs in flight); closed ones only leave
//! counters, so the journal's memory is bounded by the work in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use libmcp::{
    ExecutionKnowledge, ProbeResolution, ReplayAllowance, ReplayContract, RequestDisposition,
    request_disposition,
};
use reticle_protocol::sync::lock;
use serde_json::{Value, json};

/// What the host knows about one run of work: the request itself (host-side
/// methods), or one unit of its work on workers.
#[derive(Debug, Clone, Copy)]
struct Track {
    knowledge: ExecutionKnowledge,
    /// Runs started (the first one plus replays).
    attempts: u8,
}

impl Track {
    const NEW: Self = Self {
        knowledge: ExecutionKnowledge::NotDispatched,
        attempts: 0,
    };
}

/// One open request.
#[derive(Debug, Clone)]
struct OpenEntry {
    contract: ReplayContract,
    /// The request's own execution (answered in the host, or a single run).
    request: Track,
    /// Its units of work on workers, by index.
    units: BTreeMap<u32, Track>,
}

impl OpenEntry {
    /// The request's knowledge: its units' combined, once it has any.
    fn knowledge(&self) -> ExecutionKnowledge {
        if self.units.is_empty() {
            self.request.knowledge
        } else {
            combined(self.units.values().map(|t| t.knowledge))
        }
    }
}

/// Knowledge of a request from its units': unknown if any unit's outcome is unknown,
/// in flight while any unit runs (or some finished and others have not started),
/// not dispatched if none started, completed when every unit completed.
fn combined(units: impl Iterator<Item = ExecutionKnowledge>) -> ExecutionKnowledge {
    let (mut unknown, mut in_flight, mut waiting, mut done) = (false, false, false, false);
    for k in units {
        match k {
            ExecutionKnowledge::OutcomeUnknown => unknown = true,
            ExecutionKnowledge::InFlight => in_flight = true,
            ExecutionKnowledge::NotDispatched => waiting = true,
            ExecutionKnowledge::Completed => done = true,
        }
    }
    match (unknown, in_flight, waiting, done) {
        (true, ..) => ExecutionKnowledge::OutcomeUnknown,
        (false, true, ..) | (false, false, true, true) => ExecutionKnowledge::InFlight,
        (false, false, true, false) => ExecutionKnowledge::NotDispatched,
        _ => ExecutionKnowledge::Completed,
    }
}

/// Counters over the host's lifetime.
#[derive(Debug, Default)]
struct Totals {
    journaled: u64,
    by_contract: BTreeMap<&'static str, u64>,
    closed_by_knowledge: BTreeMap<&'static str, u64>,
    worker_losses: u64,
    replays: u64,
    probes: u64,
    completed_from_probe: u64,
    rejected_ambiguous: u64,
    replay_exhausted: u64,
}

#[derive(Debug, Default)]
struct JournalState {
    next: u64,
    open: HashMap<u64, OpenEntry>,
    totals: Totals,
}

/// Called with the request's method key (`tools/call:<tool>`) on every replay.
type ReplayHook = Box<dyn Fn(&str) + Send + Sync>;

/// The journal of one host.
#[derive(Default)]
pub struct Journal {
    inner: Mutex<JournalState>,
    /// Told of every replay a journaled request starts (the host's telemetry counts
    /// them per method: seed 004's retry counts, layout ops included).
    on_replay: std::sync::OnceLock<ReplayHook>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("inner", &self.inner)
            .field("on_replay", &self.on_replay.get().is_some())
            .finish()
    }
}

fn contract_name(contract: ReplayContract) -> &'static str {
    match contract {
        ReplayContract::Convergent => "convergent",
        ReplayContract::ProbeRequired => "probe_required",
        ReplayContract::NeverReplay => "never_replay",
    }
}

fn knowledge_name(knowledge: ExecutionKnowledge) -> &'static str {
    match knowledge {
        ExecutionKnowledge::NotDispatched => "not_dispatched",
        ExecutionKnowledge::InFlight => "in_flight",
        ExecutionKnowledge::Completed => "completed",
        ExecutionKnowledge::OutcomeUnknown => "outcome_unknown",
    }
}

impl Journal {
    /// An empty journal.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Installs the hook told of every replay (once; later calls are ignored).
    pub fn on_replay(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        let _ = self.on_replay.set(Box::new(hook));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, JournalState> {
        lock(&self.inner)
    }

    /// Opens an entry for a request under `contract` (not dispatched yet). The
    /// entry closes when the returned handle and all its clones are dropped.
    pub fn open(self: &Arc<Self>, method: &str, contract: ReplayContract) -> JournalHandle {
        let seq = {
            let mut inner = self.lock();
            inner.next += 1;
            let seq = inner.next;
            inner.open.insert(
                seq,
                OpenEntry {
                    contract,
                    request: Track::NEW,
                    units: BTreeMap::new(),
                },
            );
            inner.totals.journaled += 1;
            *inner
                .totals
                .by_contract
                .entry(contract_name(contract))
                .or_default() += 1;
            seq
        };
        tracing::trace!(seq, method, ?contract, "journaled");
        JournalHandle(Arc::new(HandleInner {
            journal: Arc::clone(self),
            seq,
            method: method.to_owned(),
        }))
    }

    fn close(&self, seq: u64) {
        let mut inner = self.lock();
        if let Some(entry) = inner.open.remove(&seq) {
            *inner
                .totals
                .closed_by_knowledge
                .entry(knowledge_name(entry.knowledge()))
                .or_default() += 1;
        }
    }

    /// The `telemetry.journal` payload: open entries by knowledge and contract,
    /// entries closed by final knowledge, and the replay decisions taken.
    pub fn counts(&self) -> Value {
        let inner = self.lock();
        let mut open_by_knowledge: BTreeMap<&str, u64> = [
            ExecutionKnowledge::NotDispatched,
            ExecutionKnowledge::InFlight,
            ExecutionKnowledge::Completed,
            ExecutionKnowledge::OutcomeUnknown,
        ]
        .into_iter()
        .map(|k| (knowledge_name(k), 0))
        .collect();
        for entry in inner.open.values() {
            *open_by_knowledge
                .entry(knowledge_name(entry.knowledge()))
                .or_default() += 1;
        }
        let t = &inner.totals;
        json!({
            "journaled": t.journaled,
            "open": inner.open.len(),
            "open_by_knowledge": open_by_knowledge,
            "by_contract": t.by_contract,
            "closed_by_knowledge": t.closed_by_knowledge,
            "worker_losses": t.worker_losses,
            "replays": t.replays,
            "probes": t.probes,
            "completed_from_probe": t.completed_from_probe,
            "rejected_ambiguous": t.rejected_ambiguous,
            "replay_exhausted": t.replay_exhausted,
        })
    }
}

struct HandleInner {
    journal: Arc<Journal>,
    seq: u64,
    /// The request's method key.
    method: String,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.journal.close(self.seq);
    }
}

/// A request's entry in the journal. Clones share the entry; it closes when the
/// last clone is dropped.
#[derive(Clone)]
pub struct JournalHandle(Arc<HandleInner>);

impl std::fmt::Debug for JournalHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JournalHandle").field(&self.0.seq).finish()
    }
}

impl JournalHandle {
    /// Runs `f` on the entry's contract, the track `unit` names (`None`: the request's
    /// own) and the counters; `None` once the entry is closed.
    fn with<R>(
        &self,
        unit: Option<u32>,
        f: impl FnOnce(ReplayContract, &mut Track, &mut Totals) -> R,
    ) -> Option<R> {
        let mut inner = self.0.journal.lock();
        let JournalState { open, totals, .. } = &mut *inner;
        let entry = open.get_mut(&self.0.seq)?;
        let contract = entry.contract;
        let track = match unit {
            None => &mut entry.request,
            Some(index) => entry.units.entry(index).or_insert(Track::NEW),
        };
        Some(f(contract, track, totals))
    }

    /// The journal this entry belongs to.
    pub fn journal(&self) -> &Journal {
        &self.0.journal
    }

    /// The entry's replay contract.
    pub fn contract(&self) -> Option<ReplayContract> {
        self.with(None, |c, _, _| c)
    }

    /// What the host knows about the execution now (its units' combined, once it has any).
    pub fn knowledge(&self) -> Option<ExecutionKnowledge> {
        let inner = self.0.journal.lock();
        inner.open.get(&self.0.seq).map(OpenEntry::knowledge)
    }

    /// Runs of the request itself started so far.
    pub fn attempts(&self) -> u8 {
        self.with(None, |_, t, _| t.attempts).unwrap_or(0)
    }

    /// The track of unit `index` of this request's work on workers (registered, not
    /// dispatched, on first use). Units of one entry are independent: each has its own
    /// knowledge, attempts and replay decisions; the counters are the entry's.
    pub fn unit(&self, index: u32) -> UnitJournal {
        let unit = UnitJournal {
            handle: self.clone(),
            index: Some(index),
        };
        unit.handle.with(unit.index, |_, _, _| ());
        unit
    }

    fn track(&self) -> UnitJournal {
        UnitJournal {
            handle: self.clone(),
            index: None,
        }
    }

    /// The first run reached its executor (a worker, or the host's own handler).
    /// Idempotent: a later call while in flight changes nothing.
    pub fn dispatched(&self) {
        self.track().dispatched();
    }

    /// A terminal outcome arrived (success or a tool error).
    pub fn completed(&self) {
        self.track().completed();
    }

    /// The worker running this request died: the outcome is unknown. A request the
    /// supervisor reports lost was on a worker, so a missed `dispatched` is implied.
    pub fn worker_lost(&self) {
        self.track().worker_lost();
    }

    /// libmcp's decision for this entry now, given probe evidence and the bound on
    /// runs. Records the decision in the counters.
    pub fn disposition(
        &self,
        probe: Option<ProbeResolution>,
        max_attempts: u8,
    ) -> RequestDisposition {
        self.track().disposition(probe, max_attempts)
    }

    /// A probe ran (ProbeRequired after a loss).
    pub fn probed(&self) {
        self.track().probed();
    }

    /// The probe proved the earlier attempt took effect: completed without a re-run.
    pub fn completed_from_probe(&self) {
        self.track().completed_from_probe();
    }

    /// A replay authorized by [`Self::disposition`] starts.
    pub fn replaying(&self) {
        self.track().replaying();
    }
}

/// One unit of a request's work in the journal ([`JournalHandle::unit`]): its own
/// knowledge and attempts under the request's contract. Holding it keeps the entry open.
#[derive(Debug, Clone)]
pub struct UnitJournal {
    handle: JournalHandle,
    /// `None`: the request's own track.
    index: Option<u32>,
}

impl UnitJournal {
    fn with<R>(&self, f: impl FnOnce(ReplayContract, &mut Track, &mut Totals) -> R) -> Option<R> {
        self.handle.with(self.index, f)
    }

    /// What the host knows about this unit now.
    pub fn knowledge(&self) -> Option<ExecutionKnowledge> {
        self.with(|_, t, _| t.knowledge)
    }

    /// Runs of this unit started so far.
    pub fn attempts(&self) -> u8 {
        self.with(|_, t, _| t.attempts).unwrap_or(0)
    }

    /// The unit's first run reached a worker. Idempotent while in flight.
    pub fn dispatched(&self) {
        self.with(|_, t, _| {
            if let Ok(next) = t
                .knowledge
                .after_dispatch(RequestDisposition::FirstDispatch)
            {
                t.knowledge = next;
                t.attempts = t.attempts.saturating_add(1);
            }
        });
    }

    /// A terminal outcome of the unit arrived (success or a tool error).
    pub fn completed(&self) {
        self.with(|_, t, _| {
            if let Ok(next) = t.knowledge.after_terminal_outcome() {
                t.knowledge = next;
            }
        });
    }

    /// The worker running the unit died: its outcome is unknown. A run the executor
    /// reports lost was on a worker, so a missed `dispatched` is implied.
    pub fn worker_lost(&self) {
        self.with(|_, t, totals| {
            if t.knowledge == ExecutionKnowledge::NotDispatched {
                t.knowledge = ExecutionKnowledge::InFlight;
                t.attempts = t.attempts.saturating_add(1);
            }
            t.knowledge = t.knowledge.after_worker_loss();
            totals.worker_losses += 1;
        });
    }

    /// libmcp's decision for this unit now, given probe evidence and the bound on its
    /// runs. Records the decision in the counters.
    pub fn disposition(
        &self,
        probe: Option<ProbeResolution>,
        max_attempts: u8,
    ) -> RequestDisposition {
        self.with(|contract, t, totals| {
            let allowance = ReplayAllowance::new(t.attempts, max_attempts);
            let decision = request_disposition(t.knowledge, contract, probe, allowance);
            match decision {
                RequestDisposition::CompleteFromProbe => totals.completed_from_probe += 1,
                RequestDisposition::RejectAmbiguousOutcome => totals.rejected_ambiguous += 1,
                RequestDisposition::RejectReplayExhausted => totals.replay_exhausted += 1,
                _ => {}
            }
            decision
        })
        .unwrap_or(RequestDisposition::RejectUnexpectedProbeResolution)
    }

    /// A probe ran for this unit.
    pub fn probed(&self) {
        self.with(|_, _, totals| totals.probes += 1);
    }

    /// The probe proved the lost run took effect: completed without a re-run.
    pub fn completed_from_probe(&self) {
        self.with(|_, t, _| {
            if let Ok(next) = t.knowledge.after_completed_probe() {
                t.knowledge = next;
            }
        });
    }

    /// A replay authorized by [`Self::disposition`] starts.
    pub fn replaying(&self) {
        let replayed = self.with(|_, t, totals| {
            let Ok(next) = t.knowledge.after_dispatch(RequestDisposition::Replay) else {
                return false;
            };
            t.knowledge = next;
            t.attempts = t.attempts.saturating_add(1);
            totals.replays += 1;
            true
        });
        // Outside the journal's lock: the hook takes the host's.
        if replayed == Some(true)
            && let Some(hook) = self.handle.0.journal.on_replay.get()
        {
            hook(&self.handle.0.method);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_move_along_libmcp_transitions_and_close_on_last_drop() {
        let journal = Journal::new();
        let handle = journal.open("tools/call:simulate", ReplayContract::Convergent);
        let job_side = handle.clone();
        assert_eq!(handle.knowledge(), Some(ExecutionKnowledge::NotDispatched));
        job_side.dispatched();
        job_side.dispatched(); // idempotent
        assert_eq!(handle.attempts(), 1);
        job_side.worker_lost();
        assert_eq!(handle.knowledge(), Some(ExecutionKnowledge::OutcomeUnknown));
        assert_eq!(handle.disposition(None, 3), RequestDisposition::Replay);
        job_side.replaying();
        assert_eq!(handle.knowledge(), Some(ExecutionKnowledge::InFlight));
        job_side.completed();
        drop(handle);
        assert_eq!(journal.counts()["open"], 1, "the job still holds it");
        drop(job_side);
        let counts = journal.counts();
        assert_eq!(counts["open"], 0);
        assert_eq!(counts["closed_by_knowledge"]["completed"], 1);
        assert_eq!(counts["replays"], 1);
        assert_eq!(counts["worker_losses"], 1);
        assert_eq!(counts["by_contract"]["convergent"], 1);
    }

    #[test]
    fn loss_dispositions_follow_the_contract() {
        let journal = Journal::new();
        let never = journal.open("tools/call:x", ReplayContract::NeverReplay);
        never.dispatched();
        never.worker_lost();
        assert_eq!(
            never.disposition(None, 3),
            RequestDisposition::RejectAmbiguousOutcome
        );
        let probe = journal.open("tools/call:y", ReplayContract::ProbeRequired);
        probe.worker_lost(); // implies dispatched
        assert_eq!(probe.attempts(), 1);
        assert_eq!(probe.disposition(None, 3), RequestDisposition::HoldForProbe);
        assert_eq!(
            probe.disposition(Some(ProbeResolution::AlreadyCompleted), 3),
            RequestDisposition::CompleteFromProbe
        );
        probe.completed_from_probe();
        assert_eq!(probe.knowledge(), Some(ExecutionKnowledge::Completed));
        let convergent = journal.open("tools/call:z", ReplayContract::Convergent);
        convergent.dispatched();
        for _ in 0..2 {
            convergent.worker_lost();
            assert_eq!(convergent.disposition(None, 3), RequestDisposition::Replay);
            convergent.replaying();
        }
        convergent.worker_lost();
        assert_eq!(
            convergent.disposition(None, 3),
            RequestDisposition::RejectReplayExhausted
        );
        let counts = journal.counts();
        assert_eq!(counts["rejected_ambiguous"], 1);
        assert_eq!(counts["completed_from_probe"], 1);
        assert_eq!(counts["replay_exhausted"], 1);
        assert_eq!(counts["open_by_knowledge"]["outcome_unknown"], 2);
    }

    #[test]
    fn units_have_their_own_attempts_and_the_entry_combines_them() {
        let journal = Journal::new();
        let entry = journal.open("tools/call:evaluate", ReplayContract::Convergent);
        let (a, b) = (entry.unit(0), entry.unit(1));
        assert_eq!(entry.knowledge(), Some(ExecutionKnowledge::NotDispatched));
        a.dispatched();
        assert_eq!(entry.knowledge(), Some(ExecutionKnowledge::InFlight));
        a.completed();
        assert_eq!(
            entry.knowledge(),
            Some(ExecutionKnowledge::InFlight),
            "unit 1 has not started"
        );
        // Unit 1 dies twice: its own bound decides, unit 0's run does not count.
        b.dispatched();
        for _ in 0..2 {
            b.worker_lost();
            assert_eq!(entry.knowledge(), Some(ExecutionKnowledge::OutcomeUnknown));
            assert_eq!(b.disposition(None, 3), RequestDisposition::Replay);
            b.replaying();
        }
        assert_eq!(b.attempts(), 3);
        assert_eq!(a.attempts(), 1);
        b.completed();
        assert_eq!(entry.knowledge(), Some(ExecutionKnowledge::Completed));
        drop((entry, a, b));
        let counts = journal.counts();
        assert_eq!(counts["replays"], 2);
        assert_eq!(counts["journaled"], 1);
        assert_eq!(counts["closed_by_knowledge"]["completed"], 1);
    }
}
