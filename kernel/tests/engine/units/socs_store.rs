//! Unit tests of the on-disk SOCS kernel store (`reticle_kernel::socs_store`).

use std::sync::Arc;

use num_complex::Complex32;
use reticle_kernel::KernelSet;
use reticle_kernel::socs::SocsKernels;
use reticle_kernel::socs_store::{decode, load, path_of, store};

fn sample() -> SocsKernels {
    SocsKernels {
        set: Arc::new(KernelSet {
            size: 3,
            kernels: (0..18)
                .map(|i| Complex32::new(i as f32, -(i as f32) / 2.0))
                .collect(),
            scales: vec![0.75, 0.25],
            period_nm: 1024.0,
            hash: "sha256:abc".into(),
        }),
        spectrum: vec![0.75, 0.25, 0.01],
        captured: 0.99,
        source_points: 17,
    }
}

#[test]
fn round_trip_and_every_kind_of_damage_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let k = sample();
    assert!(load(dir.path(), "k1").is_none(), "empty store");
    store(dir.path(), "k1", &k).unwrap();
    let back = load(dir.path(), "k1").expect("stored entry");
    assert_eq!(back.set.kernels, k.set.kernels);
    assert_eq!(back.set.scales, k.set.scales);
    assert_eq!(back.set.hash, k.set.hash);
    assert_eq!(back.spectrum, k.spectrum);
    assert_eq!(back.source_points, 17);
    // Another key never reads this entry, even when the file is renamed to it.
    std::fs::copy(path_of(dir.path(), "k1"), path_of(dir.path(), "k2")).unwrap();
    assert!(load(dir.path(), "k2").is_none(), "key mismatch");
    let bytes = std::fs::read(path_of(dir.path(), "k1")).unwrap();
    for cut in [0, 8, 20, bytes.len() - 33, bytes.len() - 1] {
        assert!(decode(&bytes[..cut], "k1").is_none(), "truncated at {cut}");
    }
    for flip in [0, 9, 30, bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[flip] ^= 0x40;
        assert!(decode(&damaged, "k1").is_none(), "bit flip at {flip}");
    }
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}
