//! [`Scope`]: who a unit of work runs for, and where its attempts' progress goes.
//!
//! One type for the three kinds of caller: a job in the job table (the MCP job tools:
//! progress and attempts go to the job, ids are `job_…`), a synchronous call (the
//! observer tools: no job entry, ids `lay_<uuid>`), and the command line (`reticle eval`,
//! `reticle demo`: progress to a callback, no job table, a private journal entry so the
//! same replay rules apply). Every scope has a journal entry that carries the request's
//! replay contract; its units are tracked in it one by one.

use std::sync::Arc;

use libmcp::ReplayContract;

use super::executor::AttemptProgress;
use crate::jobs::JobReporter;
use reticle_journal::{Journal, JournalHandle, UnitJournal};

/// Which kind of caller a scope serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    /// A job in the job table.
    Job,
    /// A synchronous tool call (no job entry).
    Call,
    /// A command-line run.
    Cli,
}

/// Where a scope's progress goes.
#[derive(Clone)]
enum ScopeSink {
    Job(JobReporter),
    Call,
    Cli(Arc<dyn Fn(&AttemptProgress) + Send + Sync>),
}

/// The context units run in: an id, the request's journal entry, the roots workers may
/// read, and the caller's progress sink. Shared by every unit of one job; each
/// [`super::Dispatcher::run`] call under it tracks its own attempts.
#[derive(Clone)]
pub struct Scope {
    id: String,
    journal: JournalHandle,
    allowed_roots: Vec<String>,
    sink: ScopeSink,
    /// The stage this scope reports for, when the job runs several fan-outs one after the
    /// other ([`Self::next_stage`]).
    stage: Option<Arc<Stage>>,
    /// The highest progress this scope and its clones reported: where a next stage starts.
    high_water: Arc<std::sync::Mutex<f64>>,
}

/// A later stage of a job: its progress counts on from `base`, its messages say `label`.
#[derive(Debug)]
struct Stage {
    base: f64,
    label: String,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("id", &self.id)
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

impl Scope {
    /// Units of the job `reporter` reports for, journaled under the request's `journal`
    /// entry: runs are the job's attempts, progress is the job's.
    #[must_use]
    pub fn job(reporter: JobReporter, journal: JournalHandle, allowed_roots: Vec<String>) -> Self {
        Self {
            id: reporter.job_id(),
            journal,
            allowed_roots,
            sink: ScopeSink::Job(reporter),
            stage: None,
            high_water: Arc::default(),
        }
    }

    /// Units of a synchronous call (`prefix` names the caller: `lay` for the layout
    /// tools), journaled under the request's `journal` entry; progress is dropped.
    #[must_use]
    pub fn call(prefix: &str, journal: JournalHandle, allowed_roots: Vec<String>) -> Self {
        Self {
            id: format!("{prefix}_{}", uuid::Uuid::new_v4().simple()),
            journal,
            allowed_roots,
            sink: ScopeSink::Call,
            stage: None,
            high_water: Arc::default(),
        }
    }

    /// Units of a command-line run `id`: progress goes to `on_progress`; a private
    /// journal entry (Convergent: every CLI op is a pure function of its inputs) gives
    /// them the same replay rules as the tools.
    pub fn cli(
        id: impl Into<String>,
        allowed_roots: Vec<String>,
        on_progress: impl Fn(&AttemptProgress) + Send + Sync + 'static,
    ) -> Self {
        let id = id.into();
        let journal = Journal::new().open(&format!("cli:{id}"), ReplayContract::Convergent);
        Self {
            id,
            journal,
            allowed_roots,
            sink: ScopeSink::Cli(Arc::new(on_progress)),
            stage: None,
            high_water: Arc::default(),
        }
    }

    /// The scope's id: the job id, `lay_<uuid>`, or the command's id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Which kind of caller it serves.
    #[must_use]
    pub fn kind(&self) -> ScopeKind {
        match self.sink {
            ScopeSink::Job(_) => ScopeKind::Job,
            ScopeSink::Call => ScopeKind::Call,
            ScopeSink::Cli(_) => ScopeKind::Cli,
        }
    }

    /// The request's journal entry.
    #[must_use]
    pub fn journal(&self) -> &JournalHandle {
        &self.journal
    }

    /// The roots workers may read for this scope.
    #[must_use]
    pub fn allowed_roots(&self) -> &[String] {
        &self.allowed_roots
    }

    /// This scope with `root` added to its allowed roots (the same job, progress and
    /// journal): for a job that reads a file it wrote itself (the tiled `optimize`
    /// re-evaluates the layout it wrote into its artifact directory, D171).
    #[must_use]
    pub fn with_allowed_root(&self, root: String) -> Self {
        let mut scope = self.clone();
        scope.allowed_roots.push(root);
        scope
    }

    /// This scope (the same job, roots and journal) for the next stage of a job that runs
    /// several fan-outs one after the other (the tiled `optimize`: its tiles, then the
    /// evaluations, then the seam pass's rounds; D256). The stage's progress counts on from
    /// the highest progress reported so far, so a job's progress keeps moving (a job drops
    /// a report lower than the last) instead of stopping at the first fan-out's end, and its
    /// messages start with `label`. Stages made at the same moment (two evaluations at once)
    /// start from the same point.
    #[must_use]
    pub fn next_stage(&self, label: &str) -> Self {
        let base = *self
            .high_water
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut scope = self.clone();
        scope.stage = Some(Arc::new(Stage {
            base,
            label: label.to_owned(),
        }));
        scope
    }

    /// Reports progress of the whole scope: what a caller that aggregates its units'
    /// progress ([`super::Unit::on_progress`]) sends on. A job's progress only moves
    /// forward; a synchronous call has none.
    pub fn report(&self, done: f64, total: Option<f64>, message: Option<String>) {
        let (done, total, message) = match &self.stage {
            None => (done, total, message),
            Some(stage) => (
                stage.base + done,
                total.map(|t| stage.base + t),
                Some(match message {
                    Some(m) => format!("{}: {m}", stage.label),
                    None => stage.label.clone(),
                }),
            ),
        };
        {
            let mut high = self
                .high_water
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *high = high.max(done);
        }
        match &self.sink {
            ScopeSink::Job(reporter) => {
                reporter.running();
                reporter.report(done, total, message);
            }
            ScopeSink::Call => {}
            ScopeSink::Cli(on_progress) => on_progress(&AttemptProgress {
                job_id: self.id.clone(),
                // Whole units for the command line's bar.
                done: done as u64,
                total: total.map_or(0, |t| t as u64),
                message: message.unwrap_or_default(),
            }),
        }
    }

    /// The journal track of unit `index`.
    pub(super) fn unit_journal(&self, index: u32) -> UnitJournal {
        self.journal.unit(index)
    }

    /// A unit starts a run (`replay`: again, after its worker died).
    pub(super) fn attempt_started(&self, replay: bool) {
        if let ScopeSink::Job(reporter) = &self.sink {
            reporter.attempt(replay);
        }
    }

    /// A unit's run reached a worker (its first progress frame): a job turns `running`.
    pub(super) fn running(&self) {
        if let ScopeSink::Job(reporter) = &self.sink {
            reporter.running();
        }
    }

    /// One progress frame of the scope's only unit (or of a unit without its own sink).
    pub(super) fn progress(&self, p: &AttemptProgress) {
        match &self.sink {
            ScopeSink::Job(reporter) => {
                reporter.report(p.done as f64, Some(p.total as f64), Some(p.message.clone()));
            }
            ScopeSink::Call => {}
            ScopeSink::Cli(on_progress) => on_progress(p),
        }
    }

    /// The id of run `run` of a unit: `<scope>.<run>` for the scope's only unit,
    /// `<scope>.<unit>.<run>` for unit `index` of several.
    pub(super) fn attempt_id(&self, index: Option<u32>, run: u32) -> String {
        match index {
            None => format!("{}.{run}", self.id),
            Some(index) => format!("{}.{index}.{run}", self.id),
        }
    }
}
