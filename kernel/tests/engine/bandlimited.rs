//! The band-limited fast path equals the naive full-FFT path.

use crate::common;

use common::{random_kernels, random_mask, rel_max_err};
use reticle_kernel::{CancelToken, CpuBackend, ImagingBackend, bandlimited, naive};

#[test]
fn equals_naive_on_random_masks() {
    let cancel = CancelToken::new();
    // (n, kernel side, kernels): coarse grid smaller than n, odd coarse size, and m == n.
    for (i, &(n, s, k)) in [
        (128, 35, 6),
        (64, 7, 4),
        (96, 13, 3),
        (40, 11, 2),
        (24, 9, 2),
    ]
    .iter()
    .enumerate()
    {
        let mask = random_mask(n, 11 + i as u64);
        let kernels = random_kernels(s, k, 100 + i as u64);
        for dose in [1.0f32, 1.02] {
            let fast = bandlimited::aerial(&mask, &kernels, dose, &cancel).unwrap();
            let slow = naive::aerial(&mask, &kernels, dose, &cancel).unwrap();
            let err = rel_max_err(&fast, &slow);
            println!(
                "n={n} s={s} k={k} dose={dose}: coarse {} rel err {err:.2e}",
                bandlimited::coarse_side(n, s)
            );
            assert!(err < 1e-5, "n={n} s={s}: {err}");
        }
    }
}

#[test]
fn odd_mask_side_works() {
    let cancel = CancelToken::new();
    let mask = random_mask(75, 5);
    let kernels = random_kernels(9, 3, 6);
    let fast = CpuBackend::new()
        .aerial(&mask, &kernels, 1.0, &cancel)
        .unwrap();
    let slow = naive::aerial(&mask, &kernels, 1.0, &cancel).unwrap();
    assert!(rel_max_err(&fast, &slow) < 1e-5);
}

#[test]
fn bad_shapes_are_errors() {
    let cancel = CancelToken::new();
    let kernels = random_kernels(9, 1, 1);
    let small = random_mask(8, 1);
    assert!(
        CpuBackend::new()
            .aerial(&small, &kernels, 1.0, &cancel)
            .is_err()
    );
    let rect = reticle_kernel::Grid {
        width: 16,
        height: 20,
        data: vec![0.0; 320],
    };
    assert!(
        CpuBackend::new()
            .aerial(&rect, &kernels, 1.0, &cancel)
            .is_err()
    );
}

#[test]
fn images_are_not_trivial() {
    let cancel = CancelToken::new();
    let mask = random_mask(64, 3);
    let kernels = random_kernels(7, 2, 4);
    let fast = bandlimited::aerial(&mask, &kernels, 1.0, &cancel).unwrap();
    let slow = naive::aerial(&mask, &kernels, 1.0, &cancel).unwrap();
    let max = slow.data.iter().fold(0.0f32, |m, &v| m.max(v));
    let min = slow.data.iter().fold(f32::MAX, |m, &v| m.min(v));
    let diffs = fast
        .data
        .iter()
        .zip(&slow.data)
        .filter(|(a, b)| a != b)
        .count();
    println!(
        "min {min} max {max} differing pixels {diffs} sample {} {}",
        fast.data[100], slow.data[100]
    );
    assert!(max > 1.2 * min && min >= 0.0);
}
