//! `reticle-worker batch MANIFEST [--element N]`: one element of a cluster job array
//! (docs/DECISIONS.md D60, D61).
//!
//! Reads the manifest ([`BatchManifest`]) a cluster executor wrote into a private job
//! directory, takes the tiles of its element (`--element`, else `SLURM_ARRAY_TASK_ID`),
//! and runs each with the same op code the pool worker runs, so its tile files are
//! byte-identical to a local run's. Each tile's outcome goes to `results/<tile>.json`
//! (written through a temporary name and a rename: the host sees a whole file or none).
//!
//! Refused before anything runs (exit 2, nothing written): a manifest or job directory
//! not owned by this user, a job directory others can read or write (not 0700), a
//! manifest writable by others, and a manifest that names any path outside its allowed
//! roots and its own directory ([`BatchManifest::check`]).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reticle_kernel::CancelToken;
use reticle_protocol::batch::{BatchManifest, result_file};
use reticle_protocol::wire::JobOutcome;

use crate::attempt::{AttemptCtx, ProgressSink, WorkerState};
use crate::backend::Backend;
use crate::ops;
use crate::settings::Settings;

/// Runs `reticle-worker batch …`.
pub fn main(args: &[String], settings: &Settings) -> ExitCode {
    match run(args, settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("batch: {message}");
            ExitCode::from(2)
        }
    }
}

fn usage() -> String {
    "usage: reticle-worker batch MANIFEST [--element N] (N defaults to SLURM_ARRAY_TASK_ID)".into()
}

fn run(args: &[String], settings: &Settings) -> Result<(), String> {
    let (manifest_path, element) = match args {
        [path] => {
            let element = settings.array_element.clone().ok_or_else(|| {
                format!(
                    "no --element and SLURM_ARRAY_TASK_ID is not set; {}",
                    usage()
                )
            })?;
            (path, element)
        }
        [path, flag, n] if flag == "--element" => (path, n.clone()),
        _ => return Err(usage()),
    };
    let element: u64 = element
        .trim()
        .parse()
        .map_err(|_| format!("element {element:?} is not a number"))?;
    let (manifest, dir) = load(Path::new(manifest_path))?;
    let tiles = manifest.tiles_of_element(element);
    tracing::info!(
        batch = %manifest.batch_id,
        element,
        tiles = tiles.len(),
        "batch element started"
    );
    let op = ops::find(&manifest.op).ok_or_else(|| format!("unknown op {}", manifest.op))?;
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&manifest.args_json).map_err(|e| format!("arguments: {e}"))?;
    std::fs::create_dir_all(dir.join("results")).map_err(|e| format!("results: {e}"))?;
    let state = WorkerState::new(Backend::select(settings.backend));
    let cancel = CancelToken::new();
    for tile in tiles {
        let mut tile_args = args.clone();
        tile_args.insert("tile_number".into(), tile.into());
        let job_id = format!("{}.{tile}", manifest.batch_id);
        let progress = ProgressSink::silent(job_id.clone());
        let ctx = AttemptCtx {
            job_id: &job_id,
            context: &manifest.context,
            cancel: &cancel,
            state: &state,
            progress: &progress,
        };
        let args_json = serde_json::Value::Object(tile_args).to_string();
        let outcome = crate::server::run_op(&ctx, op, &args_json);
        write_result(&result_file(&dir, tile), &outcome)?;
    }
    Ok(())
}

/// The manifest at `path` and its directory, both checked.
fn load(path: &Path) -> Result<(BatchManifest, PathBuf), String> {
    let path = path
        .canonicalize()
        .map_err(|e| format!("manifest {}: {e}", path.display()))?;
    let dir = path
        .parent()
        .ok_or_else(|| "the manifest has no directory".to_owned())?
        .to_path_buf();
    let me = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| format!("cannot read my uid: {e}"))?;
    let dir_meta = std::fs::metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if dir_meta.uid() != me || dir_meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "job directory {} must be private (owned by uid {me}, mode 0700); it is uid {} mode {:o}",
            dir.display(),
            dir_meta.uid(),
            dir_meta.permissions().mode() & 0o7777
        ));
    }
    let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "manifest {} must be owned by uid {me} and writable by no one else",
            path.display()
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest: BatchManifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("manifest is not valid: {e}"))?;
    manifest
        .check(&dir)
        .map_err(|e| format!("manifest refused: {e}"))?;
    Ok((manifest, dir))
}

fn write_result(path: &Path, outcome: &JobOutcome) -> Result<(), String> {
    let bytes = serde_json::to_vec(outcome).map_err(|e| format!("outcome: {e}"))?;
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    reticle_protocol::paths::write_replacing(path, &tmp, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
