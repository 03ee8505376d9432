//! The batch manifest: how a cluster executor hands tiles to `reticle-worker batch`
//! (docs/DECISIONS.md D60, D61).
//!
//! The host writes one manifest per submitted job array into a private (0700) job
//! directory on the shared file system; each array element runs
//! `reticle-worker batch MANIFEST` and takes the tiles of its element number
//! ([`BatchManifest::tiles_of_element`]). A tile's output goes into the manifest's
//! directory (`tile_<ix>_<iy>.json`, as the pool worker writes it into the artifact
//! directory) and its outcome into `results/<tile>.json` ([`result_file`]).
//!
//! Both sides check the paths ([`BatchManifest::check`]): the host before it writes the
//! manifest, the worker before it runs anything. A manifest may name only the job
//! directory it lies in and files under its allowed roots.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::paths::resolve_under;
use crate::wire::JobContext;

/// Version of the manifest format; a worker refuses any other.
pub const MANIFEST_VERSION: u32 = 1;

/// The manifest's file name in its job directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Ops a batch worker runs: the tile ops of whole-layout jobs, nothing else.
pub const BATCH_OPS: &[&str] = &["evaluate.tile", "optimize.tile", "simulate.tile"];

/// One job array's work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchManifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// The attempt-id prefix of the batch's tiles (`<scope>.s<submission>`); tile `n`
    /// runs as `<batch_id>.<n>`.
    pub batch_id: String,
    /// The tile op (one of [`BATCH_OPS`]).
    pub op: String,
    /// The op's arguments without `tile_number` (JSON object text).
    pub args_json: String,
    /// Roots, limits, and the artifact directory, which is the manifest's directory.
    pub context: JobContext,
    /// The tiles, as half-open ranges `[first, end)`, in order.
    pub tiles: Vec<[u64; 2]>,
    /// Tiles per array element: element `e` runs positions `e*k .. (e+1)*k` of `tiles`.
    pub tiles_per_task: u64,
}

/// Why a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

fn refuse(message: impl Into<String>) -> ManifestError {
    ManifestError(message.into())
}

/// The file tile `n`'s outcome is written to, under the job directory.
#[must_use]
pub fn result_file(dir: &Path, tile: u64) -> PathBuf {
    dir.join("results").join(format!("{tile}.json"))
}

/// `tiles` (sorted, distinct) as half-open ranges.
#[must_use]
pub fn ranges_of(tiles: &[u64]) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for &t in tiles {
        match out.last_mut() {
            Some(last) if last[1] == t => last[1] = t + 1,
            _ => out.push([t, t + 1]),
        }
    }
    out
}

impl BatchManifest {
    /// How many tiles the manifest holds.
    #[must_use]
    pub fn tile_count(&self) -> u64 {
        self.tiles.iter().map(|[a, b]| b.saturating_sub(*a)).sum()
    }

    /// How many array elements the tiles need.
    #[must_use]
    pub fn elements(&self) -> u64 {
        self.tile_count().div_ceil(self.tiles_per_task.max(1))
    }

    /// The tiles element `e` runs, in order (empty past the last element).
    #[must_use]
    pub fn tiles_of_element(&self, element: u64) -> Vec<u64> {
        let k = self.tiles_per_task.max(1);
        let (from, to) = (
            element.saturating_mul(k),
            element.saturating_add(1).saturating_mul(k),
        );
        let mut out = Vec::new();
        let mut position = 0u64;
        for &[a, b] in &self.tiles {
            let len = b.saturating_sub(a);
            let (lo, hi) = (from.max(position), to.min(position + len));
            if lo < hi {
                out.extend((lo - position + a)..(hi - position + a));
            }
            position += len;
            if position >= to {
                break;
            }
        }
        out
    }

    /// Checks the manifest's paths against `dir`, the directory it lies in (canonical):
    /// the op is a tile op, the artifact directory is `dir`, every allowed root is an
    /// absolute existing directory, and every absolute path in the arguments resolves
    /// inside an allowed root or `dir`.
    ///
    /// # Errors
    /// What is wrong, first problem only.
    pub fn check(&self, dir: &Path) -> Result<(), ManifestError> {
        if self.version != MANIFEST_VERSION {
            return Err(refuse(format!(
                "manifest version {} (this worker reads {MANIFEST_VERSION})",
                self.version
            )));
        }
        if !BATCH_OPS.contains(&self.op.as_str()) {
            return Err(refuse(format!(
                "op {:?} is not a batch op ({BATCH_OPS:?})",
                self.op
            )));
        }
        if self.tiles_per_task == 0 || self.tiles.iter().any(|[a, b]| a >= b) {
            return Err(refuse("empty tile range or tiles_per_task 0"));
        }
        let dir = dir
            .canonicalize()
            .map_err(|e| refuse(format!("job directory {}: {e}", dir.display())))?;
        let artifact = self
            .context
            .artifact_dir
            .as_deref()
            .ok_or_else(|| refuse("the manifest has no artifact directory"))?;
        let artifact = Path::new(artifact)
            .canonicalize()
            .map_err(|e| refuse(format!("artifact directory {artifact}: {e}")))?;
        if artifact != dir {
            return Err(refuse(format!(
                "artifact directory {} is not the manifest's directory {}",
                artifact.display(),
                dir.display()
            )));
        }
        let mut roots = Vec::new();
        for root in &self.context.allowed_roots {
            let path = Path::new(root);
            if !path.is_absolute() {
                return Err(refuse(format!("allowed root {root:?} is not absolute")));
            }
            let canonical = path
                .canonicalize()
                .map_err(|e| refuse(format!("allowed root {root}: {e}")))?;
            if !canonical.is_dir() {
                return Err(refuse(format!("allowed root {root} is not a directory")));
            }
            roots.push(canonical);
        }
        let args: Value = serde_json::from_str(&self.args_json)
            .map_err(|e| refuse(format!("arguments are not JSON: {e}")))?;
        if !args.is_object() {
            return Err(refuse("arguments are not a JSON object"));
        }
        if args.get("tile_number").is_some() {
            return Err(refuse("arguments carry a tile_number"));
        }
        roots.push(dir);
        let mut bad = None;
        visit_strings(&args, &mut |s| {
            if bad.is_some() || !s.starts_with('/') {
                return;
            }
            if resolve_under(Path::new(s), &roots).is_err() {
                bad = Some(s.to_owned());
            }
        });
        match bad {
            Some(path) => Err(refuse(format!(
                "the manifest names {path}, which is not inside its allowed roots"
            ))),
            None => Ok(()),
        }
    }
}

fn visit_strings(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| visit_strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| visit_strings(v, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::JobLimits;

    fn manifest(dir: &Path, root: &Path, args: Value) -> BatchManifest {
        BatchManifest {
            version: MANIFEST_VERSION,
            batch_id: "j1.s1".into(),
            op: "evaluate.tile".into(),
            args_json: args.to_string(),
            context: JobContext {
                artifact_dir: Some(dir.display().to_string()),
                allowed_roots: vec![root.display().to_string()],
                limits: JobLimits {
                    max_layout_bytes: 1,
                    max_shapes: 1,
                    max_raster_pixels: 1,
                },
            },
            tiles: vec![[0, 5], [7, 9]],
            tiles_per_task: 3,
        }
    }

    #[test]
    fn elements_take_their_slice_of_the_ranges() {
        let m = manifest(Path::new("/"), Path::new("/"), serde_json::json!({}));
        assert_eq!(m.tile_count(), 7);
        assert_eq!(m.elements(), 3);
        assert_eq!(m.tiles_of_element(0), vec![0, 1, 2]);
        assert_eq!(m.tiles_of_element(1), vec![3, 4, 7]);
        assert_eq!(m.tiles_of_element(2), vec![8]);
        assert!(m.tiles_of_element(3).is_empty());
        assert_eq!(
            ranges_of(&[1, 2, 3, 7, 9, 10]),
            vec![[1, 4], [7, 8], [9, 11]]
        );
    }

    #[test]
    fn a_path_outside_the_roots_is_refused() {
        let base = std::env::temp_dir().join(format!("reticle-manifest-{}", std::process::id()));
        let (dir, root) = (base.join("job"), base.join("root"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.gds"), b"x").unwrap();
        let ok = manifest(
            &dir,
            &root,
            serde_json::json!({"layout": root.join("a.gds")}),
        );
        assert_eq!(ok.check(&dir), Ok(()));
        let outside = manifest(&dir, &root, serde_json::json!({"layout": "/etc/passwd"}));
        assert!(outside.check(&dir).unwrap_err().0.contains("/etc/passwd"));
        let mut other_dir = ok.clone();
        other_dir.context.artifact_dir = Some(root.display().to_string());
        assert!(other_dir.check(&dir).is_err());
        let mut op = ok.clone();
        op.op = "debug.exec".into();
        assert!(op.check(&dir).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
