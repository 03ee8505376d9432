//! Job artifact directories (`<artifact root>/jobs/<prefix>_<hex>`, D44) and their
//! retention (D49).
//!
//! `simulate` images and `optimize` masks are files a worker writes into a directory the
//! host made for the job. Left alone they would fill the disk: an agent can ask for
//! images of 8192² pixels over and over. So a directory lives while its job runs (a
//! [`JobDir`] guard is held by the job), then stays for the artifact TTL
//! (`KLAYOUT_MCP_SESSION_TTL_SECONDS`, the same lifetime as a layout session's files),
//! and all finished jobs' directories together stay under
//! `RETICLE_MAX_JOB_ARTIFACT_BYTES`: making a new directory first deletes expired ones,
//! then the oldest finished ones until the rest fit. A directory whose job still runs
//! is never deleted; when those alone fill the quota the new job is refused
//! (`TOOL_LIMIT_EXCEEDED`, recoverable).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reticle_protocol::sync::lock;
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;

/// The directories of running jobs.
type InUse = Arc<Mutex<HashSet<PathBuf>>>;

/// A job's artifact directory, in use (never swept) while this guard lives; the job
/// holds it to its end, however the job ends.
#[derive(Debug)]
pub struct JobDir {
    path: PathBuf,
    in_use: InUse,
}

impl JobDir {
    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        lock(&self.in_use).remove(&self.path);
    }
}

/// The retention rules of the `jobs/` directory of one artifact root.
#[derive(Debug)]
pub struct JobDirs {
    in_use: InUse,
    ttl: Duration,
    max_bytes: u64,
    /// Held from the sweep to the creation, so two new jobs cannot both take the last room.
    admission: Mutex<()>,
    /// Every directory made here (the client's own: its artifacts are its resources,
    /// D200), forgotten once the sweep deleted it.
    owned: Mutex<BTreeSet<PathBuf>>,
}

/// One directory under `jobs/` as the sweep sees it.
struct JobDirEntry {
    path: PathBuf,
    modified: SystemTime,
    bytes: u64,
    in_use: bool,
}

impl JobDirs {
    /// Directories kept `ttl` after their last write, finished ones within `max_bytes`.
    #[must_use]
    pub fn new(ttl: Duration, max_bytes: u64) -> Self {
        Self {
            in_use: InUse::default(),
            ttl,
            max_bytes,
            admission: Mutex::new(()),
            owned: Mutex::new(BTreeSet::new()),
        }
    }

    /// The directories made here that still exist, oldest name first.
    pub fn owned(&self) -> Vec<PathBuf> {
        let mut owned = lock(&self.owned);
        owned.retain(|dir| dir.is_dir());
        owned.iter().cloned().collect()
    }

    /// The directories whose job still runs (their guard lives).
    pub fn running(&self) -> Vec<PathBuf> {
        lock(&self.in_use).iter().cloned().collect()
    }

    /// Takes `dirs` as made here (a reexec's restore of [`Self::owned`]).
    pub fn adopt(&self, dirs: impl IntoIterator<Item = PathBuf>) {
        lock(&self.owned).extend(dirs);
    }

    /// Sweeps `jobs` (expired, then oldest finished over the quota) and makes a fresh
    /// private directory `jobs/<prefix>_<16 hex>` for a job.
    ///
    /// # Errors
    /// `TOOL_LIMIT_EXCEEDED` when running jobs' directories alone fill the quota;
    /// `INTERNAL_ERROR` when the directory cannot be made.
    pub fn create(&self, jobs: &Path, prefix: &str) -> Result<JobDir, ToolError> {
        let _admission = lock(&self.admission);
        let used = self.sweep(jobs);
        if used >= self.max_bytes {
            return Err(ToolError::new(
                ErrorCode::ToolLimitExceeded,
                format!(
                    "running jobs' artifacts take {used} bytes; the limit is {}",
                    self.max_bytes
                ),
            )
            .with_details(json!({
                "limit": "max_job_artifact_bytes",
                "max": self.max_bytes,
                "used": used,
                "setting": reticle_config::limits::MAX_JOB_ARTIFACT_BYTES_ENV,
            }))
            .recoverable(true)
            .with_hint(
                "wait for running simulate/optimize jobs to end (or cancel one), then call again",
            ));
        }
        let path = jobs.join(format!("{prefix}_{}", random_hex(16)));
        create_private_dir(&path).map_err(|e| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("cannot create {}: {e}", path.display()),
            )
        })?;
        lock(&self.in_use).insert(path.clone());
        lock(&self.owned).insert(path.clone());
        Ok(JobDir {
            path,
            in_use: Arc::clone(&self.in_use),
        })
    }

    /// Deletes the expired directories under `jobs` that no job of this host holds
    /// (those of hosts that are gone among them), and the oldest finished ones while the
    /// total is over the quota.
    pub fn collect(&self, jobs: &Path) {
        let _admission = lock(&self.admission);
        self.sweep(jobs);
    }

    /// Deletes expired finished directories, then the oldest finished ones while the
    /// total is over the quota; returns the bytes that remain.
    fn sweep(&self, jobs: &Path) -> u64 {
        let now = SystemTime::now();
        let mut entries = self.entries(jobs);
        entries.sort_by_key(|e| e.modified);
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        for entry in entries.iter().filter(|e| !e.in_use) {
            let expired = now
                .duration_since(entry.modified)
                .is_ok_and(|age| age >= self.ttl);
            if !expired && total < self.max_bytes {
                continue;
            }
            match std::fs::remove_dir_all(&entry.path) {
                Ok(()) => {
                    total -= entry.bytes;
                    tracing::info!(dir = %entry.path.display(), bytes = entry.bytes, expired, "job artifacts deleted");
                }
                Err(e) => {
                    tracing::warn!(dir = %entry.path.display(), error = %e, "cannot delete job artifacts");
                }
            }
        }
        total
    }

    /// The directories under `jobs` (links and files are not ours and are left alone).
    fn entries(&self, jobs: &Path) -> Vec<JobDirEntry> {
        let in_use = lock(&self.in_use).clone();
        let Ok(read) = std::fs::read_dir(jobs) else {
            return Vec::new();
        };
        read.filter_map(Result::ok)
            .filter_map(|entry| {
                let meta = entry.path().symlink_metadata().ok()?;
                meta.is_dir().then(|| {
                    let path = entry.path();
                    let (bytes, newest) = tree_bytes(&path, meta.modified().ok());
                    JobDirEntry {
                        in_use: in_use.contains(&path),
                        modified: newest.unwrap_or(SystemTime::UNIX_EPOCH),
                        bytes,
                        path,
                    }
                })
            })
            .collect()
    }
}

/// Bytes of the files under `dir` (links not followed, 4 levels at most: a job writes a
/// flat directory) and the newest modification time among `dir` and its files.
pub(crate) fn tree_bytes(dir: &Path, modified: Option<SystemTime>) -> (u64, Option<SystemTime>) {
    fn walk(dir: &Path, depth: u8, bytes: &mut u64, newest: &mut Option<SystemTime>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read.filter_map(Result::ok) {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if let Ok(m) = meta.modified() {
                *newest = (*newest).max(Some(m));
            }
            if meta.is_dir() && depth > 0 {
                walk(&entry.path(), depth - 1, bytes, newest);
            } else {
                *bytes = bytes.saturating_add(meta.len());
            }
        }
    }
    let mut bytes = 0;
    let mut newest = modified;
    walk(dir, 3, &mut bytes, &mut newest);
    (bytes, newest)
}

/// Random lower-case hex digits (artifact and session names).
pub(crate) fn random_hex(n: usize) -> String {
    let mut s = String::new();
    while s.len() < n {
        s.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    s.truncate(n);
    s
}

/// Creates `dir` (and parents) private to the user (0700).
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(dir: &JobDir, bytes: usize) {
        std::fs::write(dir.path().join("image.npy"), vec![7u8; bytes]).unwrap();
    }

    #[test]
    fn finished_directories_over_the_quota_go_oldest_first_and_running_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let dirs = JobDirs::new(Duration::from_secs(3600), 10_000);
        let a = dirs.create(&jobs, "sim").unwrap();
        fill(&a, 6_000);
        let a_path = a.path().to_owned();
        drop(a);
        std::thread::sleep(Duration::from_millis(20));
        let b = dirs.create(&jobs, "sim").unwrap();
        fill(&b, 6_000);
        // 12 000 bytes: `a` is finished and oldest, so it goes; `b` still runs and stays.
        let c = dirs.create(&jobs, "opt").unwrap();
        assert!(!a_path.exists(), "the oldest finished directory is deleted");
        assert!(b.path().exists() && c.path().exists());
        fill(&c, 6_000);
        // Only running jobs' directories are left, and they fill the quota.
        let refused = dirs.create(&jobs, "sim").unwrap_err();
        assert_eq!(refused.code, ErrorCode::ToolLimitExceeded);
        assert_eq!(refused.details["limit"], "max_job_artifact_bytes");
        assert!(refused.recoverable);
        assert!(
            b.path().exists() && c.path().exists(),
            "running jobs' files are kept"
        );
        // Once one of them ends there is room again: the finished one makes it.
        let b_path = b.path().to_owned();
        drop(b);
        let d = dirs.create(&jobs, "sim").unwrap();
        assert!(!b_path.exists() && c.path().exists() && d.path().exists());
    }

    #[test]
    fn finished_directories_expire_after_the_ttl_and_foreign_entries_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let dirs = JobDirs::new(Duration::from_millis(100), u64::MAX);
        let finished = dirs.create(&jobs, "sim").unwrap();
        fill(&finished, 10);
        let finished_path = finished.path().to_owned();
        drop(finished);
        let running = dirs.create(&jobs, "opt").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, jobs.join("link")).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let fresh = dirs.create(&jobs, "sim").unwrap();
        assert!(!finished_path.exists(), "expired");
        assert!(
            running.path().exists(),
            "a running job's directory never expires"
        );
        assert!(fresh.path().exists());
        assert!(outside.exists() && jobs.join("link").symlink_metadata().is_ok());
    }
}
