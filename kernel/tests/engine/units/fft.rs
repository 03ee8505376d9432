//! Unit tests of the FFT helpers (`reticle_kernel::fft`).

use num_complex::Complex64;
use reticle_kernel::fft::{Direction, fast_size, full_2d, transpose};

#[test]
fn fast_sizes() {
    assert_eq!(fast_size(69), 72);
    assert_eq!(fast_size(7), 8);
    assert_eq!(fast_size(2048), 2048);
    assert_eq!(fast_size(1), 1);
}

#[test]
fn full_2d_round_trip() {
    let n = 12;
    let orig: Vec<Complex64> = (0..n * n)
        .map(|i| Complex64::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
        .collect();
    let mut d = orig.clone();
    let mut tmp = Vec::new();
    full_2d(&mut d, n, Direction::Forward, &mut tmp);
    // DC equals the sum.
    let sum: Complex64 = orig.iter().sum();
    assert!((d[0] - sum).norm() < 1e-9);
    full_2d(&mut d, n, Direction::Inverse, &mut tmp);
    for (a, b) in d.iter().zip(&orig) {
        assert!((a / (n * n) as f64 - b).norm() < 1e-12);
    }
}

#[test]
fn transpose_rectangular() {
    let (w, h) = (5, 3);
    let src: Vec<Complex64> = (0..w * h).map(|i| Complex64::new(i as f64, 0.0)).collect();
    let mut dst = vec![Complex64::default(); w * h];
    transpose(&src, w, h, &mut dst);
    for y in 0..h {
        for x in 0..w {
            assert_eq!(dst[x * h + y], src[y * w + x]);
        }
    }
}
