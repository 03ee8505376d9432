//! A Slurm job directory's outcomes and markers (`src/slurm/job_dir.rs`).

use std::collections::HashSet;
use std::path::Path;

use reticle_dispatch::slurm::{DONE_DIR, collect_outcomes};
use reticle_protocol::wire::{JobOutcome, TILES_DIR};
use tokio::sync::mpsc;

/// A job directory whose `results/` holds tile `n`'s outcome (tile `T_<n>_0`) and its
/// output in `.tiles/`, for each `n` of `tiles`.
fn outcomes(dir: &Path, tiles: std::ops::Range<u64>) {
    std::fs::create_dir_all(dir.join("results")).unwrap();
    std::fs::create_dir_all(dir.join(TILES_DIR)).unwrap();
    for n in tiles {
        let summary = format!(r#"{{"tile":"T_{n}_0"}}"#);
        let outcome = JobOutcome::Ok {
            payload_json: summary,
        };
        std::fs::write(
            dir.join("results").join(format!("{n}.json")),
            serde_json::to_vec(&outcome).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.join(TILES_DIR).join(format!("tile_{n}_0.json")), b"{}").unwrap();
    }
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn a_poll_reads_only_new_outcomes_and_a_new_image_adopts_the_markers() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, artifacts) = (tmp.path().join("job"), tmp.path().join("artifacts"));
    std::fs::create_dir_all(&artifacts).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut done = HashSet::new();
    outcomes(&dir, 0..3);
    collect_outcomes(&dir, &artifacts, &mut done, &tx, &|_| {}).unwrap();
    assert_eq!(done.len(), 3);
    // Read outcomes leave `results/`: the next poll lists only what arrives after.
    assert_eq!(entries(&dir.join("results")), 0);
    assert_eq!(entries(&dir.join(DONE_DIR)), 3);
    outcomes(&dir, 3..5);
    collect_outcomes(&dir, &artifacts, &mut done, &tx, &|_| {}).unwrap();
    assert_eq!(done.len(), 5);
    assert_eq!(entries(&dir.join("results")), 0);
    for n in 0..5 {
        assert!(
            artifacts
                .join(TILES_DIR)
                .join(format!("tile_{n}_0.json"))
                .is_file()
        );
    }
    let mut announced: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    announced.sort_unstable();
    assert_eq!(announced, [0, 1, 2, 3, 4]);
    // A host image after a reexec: nothing done yet, the markers say what is.
    let adopted = tmp.path().join("adopted");
    std::fs::create_dir_all(&adopted).unwrap();
    let mut again = HashSet::new();
    let told = std::sync::Mutex::new(Vec::new());
    collect_outcomes(&dir, &adopted, &mut again, &tx, &|t| {
        told.lock().unwrap().push(t);
    })
    .unwrap();
    assert_eq!(again, done);
    assert_eq!(told.lock().unwrap().len(), 5);
    assert!(adopted.join(TILES_DIR).join("tile_4_0.json").is_file());
}
