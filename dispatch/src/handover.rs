//! The one "handing over to the next image" flag of a host (reexec, D32).
//!
//! Set once, just before the session's requests and jobs are handed over; read by what
//! must behave differently when dropped for a handover rather than for a cancel: a
//! request's telemetry record stays open for the next image (the host state, `HostState`), a
//! dropped wait leaves its job to be re-attached ([`crate::jobs`]), and a Slurm batch
//! leaves its arrays running for the next image to follow (D63). One value, shared by
//! clones, so the three can never disagree.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this host image is handing its session over to the next one.
#[derive(Debug, Clone, Default)]
pub struct Handover(Arc<AtomicBool>);

impl Handover {
    /// A flag not set (a fresh image, or a process that never reexecs).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on, work dropped unfinished is the next image's to finish.
    pub fn begin(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Self::begin`] was called on this flag or a clone of it.
    #[must_use]
    pub fn started(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
