//! The job directory of a batch on the shared file system: its private (0700) layout,
//! `follow.json` (what a host image after a reexec adopts), and the tiles' outcome files
//! read back into the job's artifact directory.

use std::collections::HashSet;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use reticle_protocol::ToolError;
use reticle_protocol::wire::{JobOutcome, TILES_DIR};
use serde_json::Value;
use tokio::sync::mpsc;

use super::fault;

/// The folder of a job directory that holds one marker per tile done, `done/<tile>`,
/// holding the tile output's name: what a host image that adopts the directory after a
/// reexec reads back. Kept apart from `results/`, which then holds only outcomes not yet
/// read, so a poll costs what arrived since the last one, not every tile done (issue 29
/// item 3).
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub const DONE_DIR: &str = "done";

/// Reads new outcome files: a tile done has its output linked (or copied) into
/// `artifact_dir`, its outcome file replaced by a marker in [`DONE_DIR`], and is announced
/// on `done_tx`; a tile that failed with a tool error fails the batch. `completed` is told
/// of every tile whose outcome arrived, either way. While no tile is done yet, the markers
/// a host image before a reexec left are read first.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn collect_outcomes(
    dir: &Path,
    artifact_dir: &Path,
    done: &mut HashSet<u64>,
    done_tx: &mpsc::UnboundedSender<u64>,
    completed: &dyn Fn(u64),
) -> Result<(), ToolError> {
    if done.is_empty() {
        adopt_markers(dir, artifact_dir, done, done_tx, completed)?;
    }
    let results = dir.join("results");
    let entries = std::fs::read_dir(&results)
        .map_err(|e| fault(format!("cannot read {}: {e}", results.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // `<tile>.done` in `results/`: a marker an image before D192 left.
        let (tile, finished) = match (name.strip_suffix(".json"), name.strip_suffix(".done")) {
            (Some(n), _) => (n, false),
            (None, Some(n)) => (n, true),
            _ => continue,
        };
        let Ok(tile) = tile.parse::<u64>() else {
            continue;
        };
        let path = entry.path();
        if done.contains(&tile) {
            // A second outcome of a tile done (a replay that also finished).
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let file = if finished {
            marked_output(&path)?
        } else {
            let outcome: JobOutcome = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| fault(format!("tile {tile}'s outcome file is unreadable")))?;
            completed(tile);
            match outcome {
                JobOutcome::Err { error } => return Err(error),
                JobOutcome::Ok { payload_json } => {
                    let summary: Value = serde_json::from_str(&payload_json)
                        .map_err(|e| fault(format!("tile {tile}'s summary: {e}")))?;
                    summary["tile"]
                        .as_str()
                        .and_then(|id| tile_output_name(id.trim_start_matches("T_")))
                        .ok_or_else(|| fault(format!("tile {tile}'s summary names no tile")))?
                }
            }
        };
        place_tile_outputs(dir, artifact_dir, &file)?;
        mark_done(dir, tile, &file)?;
        std::fs::remove_file(&path)
            .map_err(|e| fault(format!("cannot mark tile {tile} done: {e}")))?;
        if finished {
            // Done under the image before a reexec: new to this image's journal.
            completed(tile);
        }
        done.insert(tile);
        let _ = done_tx.send(tile);
    }
    Ok(())
}

/// The tiles an image before a reexec marked done ([`DONE_DIR`]): placed, announced, told
/// to `completed` (new to this image's journal).
fn adopt_markers(
    dir: &Path,
    artifact_dir: &Path,
    done: &mut HashSet<u64>,
    done_tx: &mpsc::UnboundedSender<u64>,
    completed: &dyn Fn(u64),
) -> Result<(), ToolError> {
    let Ok(entries) = std::fs::read_dir(dir.join(DONE_DIR)) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let Some(tile) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let file = marked_output(&entry.path())?;
        place_tile_outputs(dir, artifact_dir, &file)?;
        completed(tile);
        done.insert(tile);
        let _ = done_tx.send(tile);
    }
    Ok(())
}

/// The tile output a marker names.
fn marked_output(path: &Path) -> Result<String, ToolError> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|f| {
            tile_output_name(
                f.trim()
                    .trim_start_matches("tile_")
                    .trim_end_matches(".json"),
            )
        })
        .ok_or_else(|| fault(format!("{} is unreadable", path.display())))
}

/// Writes tile `tile`'s marker (the name of its output `file`) into [`DONE_DIR`].
fn mark_done(dir: &Path, tile: u64, file: &str) -> Result<(), ToolError> {
    let markers = dir.join(DONE_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&markers)
        .and_then(|()| std::fs::write(markers.join(tile.to_string()), file))
        .map_err(|e| fault(format!("cannot mark tile {tile} done: {e}")))
}

/// The output file of tile `<ix>_<iy>` (a summary's `T_3_4` without its `T_`):
/// `tile_3_4.json`, as the worker's whole-layout ops write it; `None` for anything else.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn tile_output_name(id: &str) -> Option<String> {
    let (ix, iy) = id.split_once('_')?;
    let (ix, iy) = (ix.parse::<i64>().ok()?, iy.parse::<i64>().ok()?);
    Some(format!("tile_{ix}_{iy}.json"))
}

/// What a tile writes besides its `tile_<ix>_<iy>.json`: `simulate.tile`'s image block.
pub(super) const TILE_EXTRA_OUTPUTS: &[&str] = &["blk"];

/// Places tile output `file` (`tile_<ix>_<iy>.json`, which must exist) and its companions
/// ([`TILE_EXTRA_OUTPUTS`], where written) from the job directory's tiles folder into
/// `artifact_dir`'s ([`TILES_DIR`]: the elements' tile ops wrote them where a local
/// worker does, the merge reads them where a local run leaves them; D190).
pub(super) fn place_tile_outputs(
    dir: &Path,
    artifact_dir: &Path,
    file: &str,
) -> Result<(), ToolError> {
    let (from, to) = (dir.join(TILES_DIR), artifact_dir.join(TILES_DIR));
    std::fs::create_dir_all(&to)
        .map_err(|e| fault(format!("cannot create {}: {e}", to.display())))?;
    let place = |name: &str| {
        link_or_copy(&from.join(name), &to.join(name))
            .map_err(|e| fault(format!("cannot place tile output {name}: {e}")))
    };
    place(file)?;
    let stem = file.trim_end_matches(".json");
    for ext in TILE_EXTRA_OUTPUTS {
        let name = format!("{stem}.{ext}");
        if from.join(&name).exists() {
            place(&name)?;
        }
    }
    Ok(())
}

/// Places every file of `artifact_dir`'s tiles folder ([`TILES_DIR`]: what the job's
/// earlier waves left) in the batch directory `dir`'s, where the elements' tile ops read
/// them as a local worker reads them in the job's folder (D253). Nothing when the job has
/// none yet.
pub(super) fn place_earlier_tiles(artifact_dir: &Path, dir: &Path) -> Result<(), ToolError> {
    let Ok(entries) = std::fs::read_dir(artifact_dir.join(TILES_DIR)) else {
        return Ok(());
    };
    let to = dir.join(TILES_DIR);
    std::fs::create_dir_all(&to)
        .map_err(|e| fault(format!("cannot create {}: {e}", to.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        // Not a write under way (`.part`, a worker's hidden temporary).
        if !is_file
            || name.to_string_lossy().ends_with(".part")
            || name.to_string_lossy().starts_with('.')
        {
            continue;
        }
        link_or_copy(&entry.path(), &to.join(&name))
            .map_err(|e| fault(format!("cannot place {}: {e}", entry.path().display())))?;
    }
    Ok(())
}

/// Puts `from` at `to` (replacing it): a hard link, or a copy through a temporary name
/// across file systems. `from` stays (a host image that adopts the batch needs it).
pub(super) fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut tmp = to.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(from, &tmp).is_err() {
        std::fs::copy(from, &tmp)?;
    }
    std::fs::rename(&tmp, to)
}

/// What a batch is: a job directory is adopted only by a batch of the same key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct FollowKey {
    pub(super) op: String,
    pub(super) args_json: String,
    pub(super) total: u64,
    pub(super) tiles_per_task: u64,
    pub(super) allowed_roots: Vec<String>,
}

/// `follow.json` in a job directory: the batch and the arrays submitted for it (Slurm
/// job id, manifest file), rewritten after each submission.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Follow {
    pub(super) key: FollowKey,
    pub(super) arrays: Vec<(String, String)>,
}

impl Follow {
    pub(super) fn save(&self, dir: &Path) -> Result<(), ToolError> {
        let bytes = serde_json::to_vec(self).map_err(|e| fault(format!("follow.json: {e}")))?;
        let tmp = dir.join("follow.json.tmp");
        let _ = std::fs::remove_file(&tmp);
        write_private(&tmp, &bytes, 0o600)?;
        std::fs::rename(&tmp, dir.join("follow.json"))
            .map_err(|e| fault(format!("cannot write follow.json: {e}")))
    }
}

/// The private (0700) directory of scope `scope_id` under `shared` (0700 too), and the
/// arrays to follow when a host image before a reexec left it for this one (same scope,
/// same batch). A directory of the same name holding another batch is not touched: this
/// batch gets a fresh name.
pub(super) fn job_dir(
    shared: &Path,
    scope_id: &str,
    key: &FollowKey,
) -> Result<(PathBuf, Option<Follow>), ToolError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(shared)
        .map_err(|e| fault(format!("cannot create {}: {e}", shared.display())))?;
    let shared = shared
        .canonicalize()
        .map_err(|e| fault(format!("{}: {e}", shared.display())))?;
    let safe: String = scope_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(96)
        .collect();
    let dir = shared.join(&safe);
    if dir.exists() {
        let previous: Option<Follow> = std::fs::read(dir.join("follow.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(previous) = previous.filter(|p| p.key == *key && !p.arrays.is_empty()) {
            return Ok((dir, Some(previous)));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = shared.join(format!("{safe}-{nanos:x}"));
        return create_private(&dir).map(|()| (dir, None));
    }
    create_private(&dir).map(|()| (dir, None))
}

pub(super) fn create_private(dir: &Path) -> Result<(), ToolError> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| fault(format!("cannot create {}: {e}", dir.display())))
}

/// Writes `bytes` to a new file at `path` with `mode`.
pub(super) fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), ToolError> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| fault(format!("cannot write {}: {e}", path.display())))
}
