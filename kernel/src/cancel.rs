//! Cooperative cancellation and progress reporting.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A run was cancelled through its [`CancelToken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// A plain, thread-safe cancellation flag shared by every loop of one run.
///
/// Clones share the flag. The engine calls [`CancelToken::check`] per tile, per
/// corner and per kernel batch, so a cancelled run stops within one batch.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A fresh, not-cancelled token.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests cancellation; idempotent.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether cancellation was requested.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// `Err(Cancelled)` once cancellation was requested.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// One progress report: `done` of `total` units of the named stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Units finished so far (monotonic within one run).
    pub done: u64,
    /// Units in the whole run.
    pub total: u64,
    /// What is being done, for humans ("tile", "corner", "ilt_iteration", ...).
    pub stage: &'static str,
}

/// Progress callback; called from engine threads, so it must be cheap and thread-safe.
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Send + Sync);
