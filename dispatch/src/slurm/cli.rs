//! The Slurm client, run as argument vectors: `squeue` for element states, `scancel` for
//! a cancel, and the cutting of a batch's tile ranges into arrays.

use std::collections::HashMap;

use reticle_protocol::ToolError;

use super::fault;

/// Kills the running elements of `ids` at once (SIGKILL to the batch shells and their
/// children), then cancels the arrays (pending elements included). Blocking: it runs
/// from `Drop`, and must have finished before the cancel is reported.
pub(super) fn cancel_arrays(ids: &[String]) {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("scancel")
            .args(args)
            .args(ids)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if let Err(e) = status {
            tracing::warn!(error = %e, ?ids, "scancel failed");
        }
    };
    run(&["--signal=KILL", "--full"]);
    run(&[]);
    tracing::info!(?ids, "slurm arrays cancelled");
}

/// `ranges` cut into consecutive pieces of at most `max_tiles` tiles each.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn split_ranges(ranges: &[[u64; 2]], max_tiles: u64) -> Vec<Vec<[u64; 2]>> {
    let max_tiles = max_tiles.max(1);
    let mut out: Vec<Vec<[u64; 2]>> = vec![Vec::new()];
    let mut room = max_tiles;
    for &[mut a, b] in ranges {
        while a < b {
            if room == 0 {
                out.push(Vec::new());
                room = max_tiles;
            }
            let end = b.min(a + room);
            if let Some(last) = out.last_mut() {
                last.push([a, end]);
            }
            room -= end - a;
            a = end;
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// States of the elements of arrays `ids`: (job id, element) → state. An array Slurm no
/// longer knows has no entries.
pub(super) async fn squeue(ids: &[String]) -> Result<HashMap<(String, u64), String>, ToolError> {
    let out = tokio::process::Command::new("squeue")
        .arg("--noheader")
        .arg("--array")
        .arg("--states=all")
        .arg(format!("--jobs={}", ids.join(",")))
        .arg("--format=%i %T")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| fault(format!("cannot run squeue: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !stderr.contains("Invalid job id") {
        return Err(fault(format!(
            "squeue failed ({}): {}",
            out.status,
            stderr.trim()
        )));
    }
    Ok(parse_squeue(&String::from_utf8_lossy(&out.stdout)))
}

/// `<job>_<element> <STATE>` lines; a state like `CANCELLED by 0` keeps its first word.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn parse_squeue(text: &str) -> HashMap<(String, u64), String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(id), Some(state)) = (words.next(), words.next()) else {
            continue;
        };
        let Some((job, element)) = id.split_once('_') else {
            continue;
        };
        if let Ok(e) = element.parse::<u64>() {
            out.insert((job.to_owned(), e), state.to_owned());
        }
    }
    out
}

/// Final states of the elements of arrays `ids` from Slurm's accounting (`sacct`), for the
/// elements `squeue` no longer lists (slurmctld forgets an ended job after `MinJobAge`):
/// (job id, element) → state. Empty when `sacct` fails or accounting is off; the caller
/// then knows no more than before (the element is `GONE`).
pub(super) async fn sacct(ids: &[String]) -> HashMap<(String, u64), String> {
    let out = tokio::process::Command::new("sacct")
        .args(["--noheader", "--parsable2", "--allocations"])
        .arg("--format=JobID,State")
        .arg(format!("--jobs={}", ids.join(",")))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    match out {
        Ok(out) if out.status.success() => parse_sacct(&String::from_utf8_lossy(&out.stdout)),
        Ok(out) => {
            tracing::debug!(status = %out.status, stderr = %String::from_utf8_lossy(&out.stderr).trim(), "sacct failed");
            HashMap::new()
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot run sacct");
            HashMap::new()
        }
    }
}

/// `<job>_<element>|<STATE>` lines (`sacct --parsable2`); a state like `CANCELLED by 0`
/// keeps its first word, and lines of element ranges (`<job>_[3-9]`, still pending) are
/// skipped.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn parse_sacct(text: &str) -> HashMap<(String, u64), String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((id, state)) = line.split_once('|') else {
            continue;
        };
        let (Some((job, element)), Some(state)) =
            (id.trim().split_once('_'), state.split_whitespace().next())
        else {
            continue;
        };
        if let Ok(e) = element.parse::<u64>() {
            out.insert((job.to_owned(), e), state.to_owned());
        }
    }
    out
}
