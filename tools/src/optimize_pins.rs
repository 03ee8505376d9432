//! `layout_artifact_id` pins (issue 28 item 7, seed 000 §5; docs/DECISIONS.md D214).
//!
//! A `violation_id` names the layout version it was found on (its SHA-256 prefix). When
//! the file is edited after `evaluate`, its ids must stay repairable while the evaluation
//! job lives. So a finished tiled `evaluate` job keeps a copy of the layout it evaluated in
//! its own directory (`<job dir>/layout_pin/<sha256>.<ext>`, written only when the copy's
//! SHA-256 is the report's `layout.sha256`: a file edited during the evaluation is not
//! pinned). The copy lives and goes with the job's directory (the artifact TTL and quota,
//! D49), and counts against the quota like any artifact.
//!
//! `optimize(violation_id)` then checks the layout it was given (or the evaluation's):
//! still the id's version → used as is; changed → the pinned copy of that version in one
//! of this client's job directories is optimized instead (`resolved_from: layout_pin`);
//! changed and no copy left although this connection evaluated it → `LAYOUT_NOT_PINNED`
//! with `reason: pin_expired`. The host hashes and copies bytes; it never parses them.

use std::io::Read;
use std::path::{Path, PathBuf};

use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The folder of a job's directory holding its pinned layout.
pub const PIN_DIR: &str = "layout_pin";

/// The SHA-256 of the file at `path`, in lowercase hex.
///
/// # Errors
/// What reading the file reports.
pub fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Pins `layout`, the file a finished tiled evaluation read, whose report is `payload`
/// (its `layout.sha256` and `artifacts.dir`): copies the file into the job's directory
/// and keeps the copy only when its SHA-256 is the report's. Returns the pinned path, or
/// `None` (logged) when nothing was pinned.
pub(crate) fn pin(layout: &str, payload: &Value) -> Option<PathBuf> {
    let (Some(sha), Some(dir)) = (
        payload["layout"]["sha256"].as_str(),
        payload["artifacts"]["dir"].as_str(),
    ) else {
        return None;
    };
    let sha = sha.trim_start_matches("sha256:");
    if sha.len() < 16 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let source = Path::new(layout);
    let ext = source
        .extension()
        .and_then(|e| e.to_str())
        .filter(|e| e.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("layout");
    let folder = Path::new(dir).join(PIN_DIR);
    let target = folder.join(format!("{sha}.{ext}"));
    let partial = folder.join(format!(".{sha}.partial"));
    let copied = std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::copy(source, &partial))
        .and_then(|_| sha256_of(&partial));
    match copied {
        Ok(copy) if copy == sha => match std::fs::rename(&partial, &target) {
            Ok(()) => Some(target),
            Err(e) => {
                tracing::warn!(layout, error = %e, "layout pin: cannot rename the copy");
                let _ = std::fs::remove_file(&partial);
                None
            }
        },
        Ok(copy) => {
            tracing::warn!(
                layout,
                evaluated = sha,
                now = copy,
                "layout pin: the file changed during the evaluation; not pinned"
            );
            let _ = std::fs::remove_file(&partial);
            None
        }
        Err(e) => {
            tracing::warn!(layout, error = %e, "layout pin: cannot copy the layout");
            let _ = std::fs::remove_file(&partial);
            None
        }
    }
}

/// The pinned copy of the layout whose SHA-256 starts with `layout16` in one of `dirs`
/// (this client's artifact directories).
#[must_use]
pub fn find(dirs: &[PathBuf], layout16: &str) -> Option<PathBuf> {
    dirs.iter().find_map(|dir| {
        std::fs::read_dir(dir.join(PIN_DIR))
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(layout16) && !n.starts_with('.'))
            })
    })
}

/// What `optimize(violation_id)` images: the layout at `path` when it is still the
/// version `layout16` names, else that version's pinned copy among `dirs`. `None` when the
/// file is the id's version. `evaluated_here`: this connection evaluated that version (so
/// a missing copy means its job expired).
///
/// # Errors
/// `LAYOUT_NOT_PINNED` (`reason: pin_expired`) when the file changed, no copy is left and
/// this connection evaluated it.
pub fn pinned_version(
    path: &Path,
    layout16: &str,
    dirs: &[PathBuf],
    evaluated_here: bool,
    id: &str,
) -> Result<Option<PathBuf>, ToolError> {
    match sha256_of(path) {
        Ok(sha) if sha.starts_with(layout16) => return Ok(None),
        // Unreadable: the worker says why.
        Err(_) => return Ok(None),
        Ok(_) => {}
    }
    if let Some(copy) = find(dirs, layout16) {
        return Ok(Some(copy));
    }
    if !evaluated_here {
        // The worker's own check answers (LAYOUT_NOT_PINNED, the file changed).
        return Ok(None);
    }
    Err(ToolError::new(
        ErrorCode::LayoutNotPinned,
        format!(
            "{} changed after the evaluation that made {id}, and that evaluation's pinned copy has expired with its job",
            path.display()
        ),
    )
    .with_details(json!({
        "violation_id": id,
        "layout": path,
        "violation_id_layout_sha256": layout16,
        "reason": "pin_expired",
    }))
    .recoverable(false)
    .with_hint("run evaluate again on the current layout and use its violation_ids"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_kept_only_when_the_copy_is_the_evaluated_version_and_found_by_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = tmp.path().join("chip.gds");
        std::fs::write(&layout, b"version one").unwrap();
        let sha = sha256_of(&layout).unwrap();
        let job = tmp.path().join("eval_1");
        std::fs::create_dir_all(&job).unwrap();
        let payload = |sha: &str| json!({"layout": {"sha256": sha}, "artifacts": {"dir": job}});
        let text = layout.display().to_string();
        let pinned = pin(&text, &payload(&sha)).expect("pinned");
        assert_eq!(std::fs::read(&pinned).unwrap(), b"version one");
        assert_eq!(
            find(std::slice::from_ref(&job), &sha[..16]),
            Some(pinned.clone())
        );

        // The file edited: its version is no longer the id's; the copy is.
        std::fs::write(&layout, b"version two").unwrap();
        let dirs = vec![job.clone()];
        assert_eq!(
            pinned_version(&layout, &sha[..16], &dirs, true, "rv1:x").unwrap(),
            Some(pinned.clone())
        );
        // The job's directory gone: a typed error for this connection's evaluation.
        std::fs::remove_dir_all(&job).unwrap();
        let e = pinned_version(&layout, &sha[..16], &dirs, true, "rv1:x").unwrap_err();
        assert_eq!(e.code, ErrorCode::LayoutNotPinned);
        assert_eq!(e.details["reason"], "pin_expired");
        assert_eq!(
            pinned_version(&layout, &sha[..16], &dirs, false, "rv1:x").unwrap(),
            None
        );

        // A report whose hash is not the file's pins nothing.
        std::fs::create_dir_all(&job).unwrap();
        assert!(pin(&text, &payload(&"0".repeat(64))).is_none());
        assert!(find(std::slice::from_ref(&job), "0000000000000000").is_none());
    }
}
