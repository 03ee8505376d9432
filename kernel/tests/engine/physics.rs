//! Physics invariants of the Hopkins/SOCS model and the imaging paths.

use crate::common;

use std::sync::Arc;

use common::{random_mask, rel_max_err};
use num_complex::Complex32;
use reticle_kernel::optics::{Optics, Source};
use reticle_kernel::socs::{self, SocsParams};
use reticle_kernel::{CancelToken, CpuBackend, Grid, ImagingBackend, KernelSet, naive};

fn params(
    source: Source,
    period_nm: f64,
    defocus_nm: f64,
    max_kernels: usize,
    energy: f64,
) -> SocsParams {
    SocsParams {
        optics: Optics {
            wavelength_nm: 193.0,
            na: 0.75,
            immersion_index: 1.0,
            source,
            source_step: 0.08,
        },
        defocus_nm,
        period_nm,
        kernel_size: None,
        max_kernels,
        energy,
    }
}

fn annular() -> Source {
    Source::Annular {
        sigma_in: 0.5,
        sigma_out: 0.8,
    }
}

#[test]
fn open_frame_equals_dc_weight_sum() {
    let cancel = CancelToken::new();
    for (source, defocus) in [(annular(), 0.0), (Source::Circular { sigma: 0.6 }, 60.0)] {
        let k = socs::kernels(&params(source, 512.0, defocus, 12, 1.0))
            .unwrap()
            .set;
        let ones = Grid::filled(64, 64, 1.0f32);
        let img = CpuBackend::new().aerial(&ones, &k, 1.0, &cancel).unwrap();
        let of = k.open_frame();
        for &v in &img.data {
            assert!((f64::from(v) - of).abs() < 1e-5 * of, "{v} vs {of}");
        }
        // All source points pass DC (σ < 1): the open frame is 1 up to truncation.
        assert!(of > 0.9 && of <= 1.0 + 1e-6, "{of}");
    }
}

#[test]
fn translating_the_mask_translates_the_image() {
    let cancel = CancelToken::new();
    let k = socs::kernels(&params(annular(), 512.0, 0.0, 12, 1.0))
        .unwrap()
        .set;
    let n = 64;
    let mask = random_mask(n, 7);
    let (dx, dy) = (13, 5);
    let mut shifted = Grid::filled(n, n, 0.0f32);
    for y in 0..n {
        for x in 0..n {
            *shifted.at_mut((x + dx) % n, (y + dy) % n) = *mask.at(x, y);
        }
    }
    let a = CpuBackend::new().aerial(&mask, &k, 1.0, &cancel).unwrap();
    let b = CpuBackend::new()
        .aerial(&shifted, &k, 1.0, &cancel)
        .unwrap();
    let mut moved = Grid::filled(n, n, 0.0f32);
    for y in 0..n {
        for x in 0..n {
            *moved.at_mut((x + dx) % n, (y + dy) % n) = *a.at(x, y);
        }
    }
    let err = rel_max_err(&b, &moved);
    assert!(err < 1e-5, "{err}");
}

#[test]
fn symmetric_source_and_mask_give_symmetric_image() {
    let cancel = CancelToken::new();
    let n = 64;
    // A mask mirror-symmetric in x and y about the origin (circular index).
    let mut mask = Grid::filled(n, n, 0.0f32);
    let r = random_mask(n, 9);
    for y in 0..n {
        for x in 0..n {
            let v = r.at(x, y)
                + r.at((n - x) % n, y)
                + r.at(x, (n - y) % n)
                + r.at((n - x) % n, (n - y) % n);
            *mask.at_mut(x, y) = v / 4.0;
        }
    }
    for source in [
        annular(),
        Source::Quadrupole {
            sigma_in: 0.5,
            sigma_out: 0.8,
            opening_deg: 30.0,
            rotation_deg: 45.0,
        },
        Source::Dipole {
            sigma_in: 0.5,
            sigma_out: 0.8,
            opening_deg: 40.0,
            rotation_deg: 0.0,
        },
    ] {
        let k = socs::kernels(&params(source.clone(), 512.0, 40.0, 64, 1.0))
            .unwrap()
            .set;
        let img = CpuBackend::new().aerial(&mask, &k, 1.0, &cancel).unwrap();
        let max = img.data.iter().fold(0.0f32, |m, &v| m.max(v));
        for y in 0..n {
            for x in 0..n {
                let v = *img.at(x, y);
                for m in [*img.at((n - x) % n, y), *img.at(x, (n - y) % n)] {
                    assert!(
                        (v - m).abs() <= 1e-5 * max,
                        "{source:?} ({x},{y}) {v} vs {m}"
                    );
                }
            }
        }
    }
}

#[test]
fn tiny_sigma_leaves_one_dominant_kernel() {
    // Period 500 nm puts the pupil cutoff (1.943 bins) 0.057 bins from the nearest
    // frequency sample, so a source of σ = 0.02 (0.039 bins) moves no sample across
    // it: every shifted pupil is the same and the TCC has rank one.
    let first = |sigma: f64| {
        let s = socs::build(&params(Source::Circular { sigma }, 500.0, 0.0, 8, 1.0)).unwrap();
        s.spectrum[0] / s.spectrum.iter().sum::<f64>()
    };
    let fractions: Vec<f64> = [0.02, 0.3, 0.7].iter().map(|&s| first(s)).collect();
    println!("first-kernel energy for σ = 0.02, 0.3, 0.7: {fractions:?}");
    assert!(fractions[0] > 0.999, "{fractions:?}");
    assert!(
        fractions[0] > fractions[1] && fractions[1] > fractions[2],
        "{fractions:?}"
    );
    assert!(fractions[2] < 0.7, "{fractions:?}");
}

#[test]
fn captured_energy_grows_with_kernel_count() {
    let cancel = CancelToken::new();
    let mask = random_mask(64, 21);
    let full = socs::build(&params(annular(), 512.0, 0.0, 4096, 1.0)).unwrap();
    let reference = CpuBackend::new()
        .aerial(&mask, &full.set, 1.0, &cancel)
        .unwrap();
    let mut last = (0.0, f64::INFINITY);
    for count in [1, 2, 4, 8, 16, 32] {
        let k = socs::build(&params(annular(), 512.0, 0.0, count, 1.0)).unwrap();
        let img = CpuBackend::new()
            .aerial(&mask, &k.set, 1.0, &cancel)
            .unwrap();
        let err = rel_max_err(&img, &reference);
        println!(
            "{count} kernels: captured {:.5}, image error {err:.2e}",
            k.captured
        );
        assert!(k.captured > last.0, "captured energy must grow");
        assert!(err <= last.1 * (1.0 + 1e-9), "image error must not grow");
        last = (k.captured, err);
    }
    assert!(last.0 > 0.9 && last.1 < 0.05);
}

/// With every kernel kept, SOCS equals Abbe imaging: the sum over source points of
/// the coherent images through the shifted pupil (computed here the slow way).
#[test]
fn socs_equals_abbe_source_sum() {
    let cancel = CancelToken::new();
    let p = params(annular(), 512.0, 50.0, 4096, 1.0);
    let socs_k = socs::build(&p).unwrap();
    let size = socs_k.set.size;
    let c = (size / 2) as isize;
    let o = &p.optics;
    let pts = o.source.sample(o.source_step);
    let mut kernels = Vec::new();
    for &(sx, sy) in &pts {
        for r in -c..=c {
            for q in -c..=c {
                let z = o.pupil(
                    q as f64 / p.period_nm + sx * o.cutoff(),
                    r as f64 / p.period_nm + sy * o.cutoff(),
                    p.defocus_nm,
                );
                kernels.push(Complex32::new(z.re as f32, z.im as f32));
            }
        }
    }
    let abbe = KernelSet::new(
        size,
        kernels,
        vec![1.0 / pts.len() as f32; pts.len()],
        p.period_nm,
    )
    .unwrap();
    let mask = random_mask(64, 33);
    let a = naive::aerial(&mask, &abbe, 1.0, &cancel).unwrap();
    let s = CpuBackend::new()
        .aerial(&mask, &socs_k.set, 1.0, &cancel)
        .unwrap();
    let err = rel_max_err(&s, &a);
    println!(
        "SOCS ({} kernels) vs Abbe ({} source points): {err:.2e}",
        socs_k.set.count(),
        pts.len()
    );
    assert!(err < 1e-5, "{err}");
}

#[test]
fn kernel_cache_returns_the_same_set() {
    let p = params(annular(), 256.0, 0.0, 6, 1.0);
    let a = socs::kernels(&p).unwrap();
    let b = socs::kernels(&p).unwrap();
    assert!(Arc::ptr_eq(&a.set, &b.set));
    let q = params(annular(), 256.0, 10.0, 6, 1.0);
    assert_ne!(p.key(), q.key());
}
