//! Resource limits an agent's calls run under (issue 10.4), read once at start.
//!
//! The host owns every limit: [`crate`] reads the settings below when the
//! process starts, the dispatcher sends the per-job ones to the worker in every
//! attempt's context ([`job_limits`] → `reticle_protocol::wire::JobLimits`), and the
//! job table enforces its cap itself (`Jobs`, in `reticle-dispatch`).
//!
//! | setting | default | exceeded |
//! |---|---|---|
//! | `RETICLE_MAX_LAYOUT_BYTES` | 536870912 (512 MiB) | `QUERY_TOO_LARGE` |
//! | `RETICLE_MAX_SHAPES` | 5000000 | `QUERY_TOO_LARGE` |
//! | `RETICLE_MAX_RASTER_PIXELS` | 67108864 (8192²) | `QUERY_TOO_LARGE` |
//! | `RETICLE_MAX_ACTIVE_JOBS` | 64 | `TOOL_LIMIT_EXCEEDED` |
//! | `RETICLE_MAX_SESSIONS` | 64 | `TOOL_LIMIT_EXCEEDED` |
//! | `RETICLE_MAX_JOB_ARTIFACT_BYTES` | 4294967296 (4 GiB) | `TOOL_LIMIT_EXCEEDED` |

use reticle_protocol::wire::JobLimits;

/// Setting: largest layout file a job reads, bytes.
pub const MAX_LAYOUT_BYTES_ENV: &str = "RETICLE_MAX_LAYOUT_BYTES";
/// Setting: most shapes one flattening (a query, a simulated window) may produce.
pub const MAX_SHAPES_ENV: &str = "RETICLE_MAX_SHAPES";
/// Setting: most raster pixels one image of a job may have.
pub const MAX_RASTER_PIXELS_ENV: &str = "RETICLE_MAX_RASTER_PIXELS";
/// Setting: most unfinished (queued or running) jobs in the host's job table.
pub const MAX_ACTIVE_JOBS_ENV: &str = "RETICLE_MAX_ACTIVE_JOBS";
/// Setting: most live layout sessions (`open_layout`) at once.
pub const MAX_SESSIONS_ENV: &str = "RETICLE_MAX_SESSIONS";

/// Setting: most bytes of job artifact directories (`simulate` images, `optimize` masks)
/// kept under the artifact root (D49).
pub const MAX_JOB_ARTIFACT_BYTES_ENV: &str = "RETICLE_MAX_JOB_ARTIFACT_BYTES";

/// Default of [`MAX_JOB_ARTIFACT_BYTES_ENV`]: room for several full-size (8192²)
/// `simulate` image sets, small next to a workstation's disk.
pub const DEFAULT_MAX_JOB_ARTIFACT_BYTES: u64 = 4 << 30;

/// Default of [`MAX_SESSIONS_ENV`]: each session may hold up to 200 000 shape-id
/// locators in the host and a parsed layout in a worker's cache.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// Default of [`MAX_ACTIVE_JOBS_ENV`]: far more than a pool of workers can run at
/// once, far fewer than would let one agent pile up unbounded waiters.
pub const DEFAULT_MAX_ACTIVE_JOBS: usize = 64;

/// The limit settings and what each bounds (for `reticle config`).
pub const SETTINGS: [(&str, &str); 6] = [
    (MAX_LAYOUT_BYTES_ENV, "largest layout file one job reads"),
    (MAX_SHAPES_ENV, "most shapes one flattened window may hold"),
    (MAX_RASTER_PIXELS_ENV, "most pixels of one simulated image"),
    (MAX_ACTIVE_JOBS_ENV, "most queued or running jobs"),
    (MAX_SESSIONS_ENV, "most live layout sessions"),
    (
        MAX_JOB_ARTIFACT_BYTES_ENV,
        "most bytes of finished jobs' artifact directories",
    ),
];

/// Every limit the host enforces or hands to workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLimits {
    /// Limits sent with every job.
    pub job: JobLimits,
    /// Most unfinished jobs in the job table; one more is refused.
    pub max_active_jobs: usize,
    /// Most live layout sessions; one more `open_layout` is refused.
    pub max_sessions: usize,
    /// Most bytes of job artifact directories; finished ones are deleted oldest first
    /// to stay under it, and a new job is refused when running ones fill it.
    pub max_job_artifact_bytes: u64,
}

impl Default for HostLimits {
    fn default() -> Self {
        Self {
            job: JobLimits::default(),
            max_active_jobs: DEFAULT_MAX_ACTIVE_JOBS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_job_artifact_bytes: DEFAULT_MAX_JOB_ARTIFACT_BYTES,
        }
    }
}

impl HostLimits {
    /// The defaults overridden by the settings in `lookup` (an environment).
    ///
    /// # Errors
    /// A setting that is not a positive integer (`"1048576"`, `"1_048_576"` is not
    /// accepted), naming the variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut limits = Self::default();
        let read = |name: &str| -> Result<Option<u64>, String> {
            let Some(raw) = lookup(name) else {
                return Ok(None);
            };
            match libmcp::parse_human_unsigned_u64(&raw) {
                Ok(0) | Err(_) => Err(format!("{name}={raw:?} is not a positive integer")),
                Ok(n) => Ok(Some(n)),
            }
        };
        if let Some(n) = read(MAX_LAYOUT_BYTES_ENV)? {
            limits.job.max_layout_bytes = n;
        }
        if let Some(n) = read(MAX_SHAPES_ENV)? {
            limits.job.max_shapes = n;
        }
        if let Some(n) = read(MAX_RASTER_PIXELS_ENV)? {
            limits.job.max_raster_pixels = n;
        }
        if let Some(n) = read(MAX_ACTIVE_JOBS_ENV)? {
            limits.max_active_jobs = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = read(MAX_SESSIONS_ENV)? {
            limits.max_sessions = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = read(MAX_JOB_ARTIFACT_BYTES_ENV)? {
            limits.max_job_artifact_bytes = n;
        }
        Ok(limits)
    }

    /// The value of the limit set by the variable `name`.
    #[must_use]
    pub fn value_of(&self, name: &str) -> Option<u64> {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        Some(match name {
            MAX_LAYOUT_BYTES_ENV => self.job.max_layout_bytes,
            MAX_SHAPES_ENV => self.job.max_shapes,
            MAX_RASTER_PIXELS_ENV => self.job.max_raster_pixels,
            MAX_ACTIVE_JOBS_ENV => count(self.max_active_jobs),
            MAX_SESSIONS_ENV => count(self.max_sessions),
            MAX_JOB_ARTIFACT_BYTES_ENV => self.max_job_artifact_bytes,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_override_the_defaults_and_bad_values_are_refused() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            HostLimits::from_lookup(env(&[])).unwrap(),
            HostLimits::default()
        );
        let limits = HostLimits::from_lookup(env(&[
            (MAX_LAYOUT_BYTES_ENV, "1000"),
            (MAX_SHAPES_ENV, " 7 "),
            (MAX_RASTER_PIXELS_ENV, "4096.0"),
            (MAX_ACTIVE_JOBS_ENV, "2"),
            (MAX_SESSIONS_ENV, "3"),
            (MAX_JOB_ARTIFACT_BYTES_ENV, "5000"),
        ]))
        .unwrap();
        assert_eq!(limits.job.max_layout_bytes, 1000);
        assert_eq!(limits.job.max_shapes, 7);
        assert_eq!(limits.job.max_raster_pixels, 4096);
        assert_eq!(limits.max_active_jobs, 2);
        assert_eq!(limits.max_sessions, 3);
        assert_eq!(limits.max_job_artifact_bytes, 5000);
        for bad in ["0", "-1", "lots", "1.5", ""] {
            let err = HostLimits::from_lookup(|n| (n == MAX_SHAPES_ENV).then(|| bad.to_owned()))
                .unwrap_err();
            assert!(err.contains(MAX_SHAPES_ENV), "{err}");
        }
    }
}
