//! Helpers shared by the integration tests (deterministic pseudo-random data).
#![allow(dead_code)]

use num_complex::Complex32;
use reticle_kernel::{Grid, KernelSet};

/// A tiny deterministic generator (SplitMix64) so tests need no extra crates.
pub struct Rng(pub u64);

impl Rng {
    /// Next raw value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A random mask with values in [0, 1].
pub fn random_mask(n: usize, seed: u64) -> Grid<f32> {
    let mut r = Rng(seed);
    Grid {
        width: n,
        height: n,
        data: (0..n * n).map(|_| r.unit() as f32).collect(),
    }
}

/// Random complex kernels with positive decreasing weights.
pub fn random_kernels(size: usize, count: usize, seed: u64) -> KernelSet {
    let mut r = Rng(seed);
    let kernels = (0..count * size * size)
        .map(|_| Complex32::new(r.unit() as f32 - 0.5, r.unit() as f32 - 0.5))
        .collect();
    let scales = (0..count).map(|k| 1.0 / (1.0 + k as f32)).collect();
    KernelSet::new(size, kernels, scales, 1.0).unwrap()
}

/// max |a − b| / max |b|.
pub fn rel_max_err(a: &Grid<f32>, b: &Grid<f32>) -> f64 {
    assert_eq!((a.width, a.height), (b.width, b.height));
    let scale = b
        .data
        .iter()
        .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
    let err = a
        .data
        .iter()
        .zip(&b.data)
        .fold(0.0f64, |m, (&x, &y)| m.max(f64::from(x - y).abs()));
    err / scale
}

/// The test process's `RETICLE_DATA_DIR` (the setting a program's composition root would
/// hand the kernel).
pub fn data_dir_setting() -> Option<std::path::PathBuf> {
    std::env::var_os("RETICLE_DATA_DIR").map(std::path::PathBuf::from)
}

/// The ICCAD-2013 folder, as [`reticle_kernel::data::iccad13_dir`] finds it for the test
/// process's `RETICLE_DATA_DIR`.
pub fn iccad13_dir() -> Option<std::path::PathBuf> {
    reticle_kernel::data::iccad13_dir(data_dir_setting().as_deref())
}

/// The rectangle `[l, r] × [b, t]` (dbu) as a polygon: the rule and region tests' shapes.
pub fn rect(l: i64, b: i64, r: i64, t: i64) -> reticle_layout::Polygon {
    reticle_layout::Polygon::rect(reticle_layout::BBox {
        left: l,
        bottom: b,
        right: r,
        top: t,
    })
}
