//! Artifact directories no live host owns (issue 30 item 7): the session directories of
//! hosts that crashed or were killed, and the job directories they left, deleted by a later
//! host once nothing in them has changed for the TTL (docs/DECISIONS.md D135).
//!
//! A session directory names its host in `host.pid` (written when the session is made). A
//! directory is an orphan when no running process has that pid, or when it has no
//! `host.pid` (a host from before the file existed). This process counts as running: the
//! client scopes of one HTTP host share an artifact root, each with its own session table,
//! and must not collect each other's sessions; a reexec keeps the pid, so the next image's
//! sessions stay owned. A recycled pid only keeps an orphan longer; it never deletes a live
//! session.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::job_dirs::tree_bytes;

/// The file in a session directory that names the host process owning it.
pub(super) const OWNER_FILE: &str = "host.pid";

/// Whether `name` is a session directory's name (`ses_<12 hex>`).
fn is_session_id(name: &str) -> bool {
    name.strip_prefix("ses_").is_some_and(|hex| {
        hex.len() == 12
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Whether a running process (this one included) owns session directory `dir`.
fn owner_is_running(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(OWNER_FILE)) else {
        return false;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return false;
    };
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Deletes the orphaned session directories under `sessions` (the artifact root's
/// `sessions/`) that have not changed for `ttl`; `live` are this host's live session ids.
/// Returns how many it deleted.
pub(super) fn collect(sessions: &Path, live: &BTreeSet<String>, ttl: Duration) -> usize {
    let Ok(read) = std::fs::read_dir(sessions) else {
        return 0;
    };
    let now = SystemTime::now();
    let mut deleted = 0;
    for entry in read.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_session_id(name) || live.contains(name) {
            continue;
        }
        let path = entry.path();
        // Links and files are not ours to delete.
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || owner_is_running(&path) {
            continue;
        }
        let (_, newest) = tree_bytes(&path, meta.modified().ok());
        let idle = newest
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        if idle < ttl {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                deleted += 1;
                tracing::info!(dir = %path.display(), idle_s = idle.as_secs(), "orphaned session directory deleted");
            }
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "cannot delete an orphaned session directory");
            }
        }
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_recognised_and_nothing_else() {
        assert!(is_session_id("ses_0123456789ab"));
        for name in [
            "ses_0123456789a",
            "ses_0123456789AB",
            "ses_0123456789abc",
            "job_0123456789ab",
            "ses_",
            ".ses_0123456789ab",
        ] {
            assert!(!is_session_id(name), "{name}");
        }
    }
}
