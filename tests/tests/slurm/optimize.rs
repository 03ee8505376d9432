//! A region optimize on the cluster (issue 28 item 3, D253): its tiles run wave by wave
//! as job arrays, each wave's elements reading the finished neighbours the executor
//! placed in their batch directory, and the result is the local executor's, byte for byte.

use std::process::Command;
use std::time::Instant;

use reticle_tests::{data_dir, release_binary};
use serde_json::Value;

use super::{cluster_up, gcd, tile_arrays};

#[test]
fn reticle_optimize_on_slurm_writes_the_same_layout_and_prints_the_same_bytes_as_the_local_executor()
 {
    let _cluster = cluster_up();
    let gcd = gcd();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("optimize");
    let shared = tmp.path().join("shared");
    let roots = std::env::join_paths([data_dir(), tmp.path().to_path_buf()]).unwrap();
    // The corner of issue 28's acceptance box: 2 × 2 tiles, one per wave, so every wave
    // but the first reads a neighbour that an earlier array element wrote.
    let optimize = |executor: &str| {
        let started = Instant::now();
        let output = Command::new(release_binary("reticle"))
            .args(["optimize", "--executor", executor])
            .args(["--deck", "nangate45_m1_litho", "--layer", "11/0"])
            .args(["--box", "5,5,7,7", "--pixel-nm", "2", "--out"])
            .arg(&out)
            .arg(&gcd)
            .env("RETICLE_ALLOWED_ROOTS", &roots)
            .env("RETICLE_BACKEND", "cpu")
            .env("RETICLE_SLURM_SHARED_DIR", &shared)
            .env("RETICLE_SLURM_TILES_PER_TASK", "1")
            .output()
            .expect("reticle optimize runs");
        eprintln!(
            "reticle optimize --executor {executor}: {:?}",
            started.elapsed()
        );
        assert!(
            output.status.success(),
            "reticle optimize --executor {executor} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let layout = std::fs::read(out.join("optimized.gds")).expect("the written layout");
        (output.stdout, layout)
    };
    let (local, local_layout) = optimize("local");
    let result: Value = serde_json::from_slice(&local).unwrap();
    assert_eq!(result["tiles"]["total"], 4, "{}", result["tiles"]);
    assert!(
        result["tiles"]["ilt_mask_kept"]
            .as_array()
            .is_some_and(|kept| !kept.is_empty()),
        "no tile kept an ILT mask: the runs would compare two copies of the drawn target: {}",
        result["tiles"]
    );
    let before = tile_arrays();
    let (slurm, slurm_layout) = optimize("slurm");
    let after = tile_arrays();
    let new: Vec<_> = after.iter().filter(|id| !before.contains(id)).collect();
    // Four waves of tiles, then the evaluations' tiles: one array each at least.
    assert!(
        new.len() >= 4,
        "the slurm run submitted {} job arrays (squeue before {before:?}, after {after:?})",
        new.len()
    );
    assert!(
        local == slurm,
        "the results differ:\nlocal {}\nslurm {}",
        String::from_utf8_lossy(&local),
        String::from_utf8_lossy(&slurm)
    );
    assert!(local_layout == slurm_layout, "the written layouts differ");
    let leftovers: Vec<_> = std::fs::read_dir(&shared).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "job directories left: {leftovers:?}");
}
