//! What one client sees: the files it may read, its layout sessions and their artifacts,
//! and its violation cache.
//!
//! Over stdio the host has one client and one [`ClientScope`]. Over Streamable HTTP
//! (issue 21) every client session, and every bearer token's stateless (2026-07-28)
//! requests, gets its own: another client's session id or violation id is unknown
//! here, exactly as if it had never existed. Jobs are per client too; they live in the
//! server's job table (`ToolShared::jobs`), one per scope.

use crate::confine::AllowedRoots;
use crate::sessions::Sessions;
use crate::violation_cache::ViolationCache;

/// One client's roots, layout sessions and violation cache.
#[derive(Debug)]
pub struct ClientScope {
    /// What this client's tools may read.
    pub roots: AllowedRoots,
    /// Layout sessions and their artifacts (seed 003).
    pub sessions: Sessions,
    /// The violation cache of this client (seed 000 §5, D45).
    pub violations: ViolationCache,
}

impl ClientScope {
    /// A fresh scope reading within `roots`, with the session settings of `config`.
    pub fn new(roots: AllowedRoots, config: &reticle_config::Config) -> Self {
        Self {
            roots,
            sessions: Sessions::configured(config),
            violations: ViolationCache::default(),
        }
    }
}
