//! The wgpu backend against an independent CPU reference.
//!
//! The reference is the textbook model in f64: full-size FFT of `dose·mask`, each
//! kernel placed around DC of the spectrum, full-size inverse FFT (skipping the
//! columns that are all zero, which changes nothing), `Σ w_k |·|²`. It shares no
//! code with the GPU path (no coarse grid, no upsampling, no packing).
//!
//! Tests run on whatever wgpu adapter exists (lavapipe in CI). Without one they print
//! `SKIP: no wgpu adapter` and return.
#![cfg(feature = "gpu")]
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use num_complex::{Complex32, Complex64};
use reticle_kernel::gpu::{BackendPref, GpuBackend, SelectedBackend, gpu_bench, select_backend};
use reticle_kernel::{
    CancelToken, Corner, CpuBackend, Grid, ImagingBackend, ImagingError, KeepImages, KernelSet,
    LithoJob, Resist,
};
use rustfft::FftPlanner;

// ---------------------------------------------------------------- shared backend

fn backend() -> Option<&'static GpuBackend> {
    static BACKEND: OnceLock<Result<GpuBackend, String>> = OnceLock::new();
    match BACKEND.get_or_init(|| GpuBackend::new().map_err(|e| e.to_string())) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("SKIP: no wgpu adapter ({e})");
            None
        }
    }
}

// ---------------------------------------------------------------- deterministic noise

struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

// ---------------------------------------------------------------- CPU reference

fn wrap(f: isize, n: usize) -> usize {
    f.rem_euclid(n as isize) as usize
}

/// Spectrum of `dose·mask` (unnormalized 2D FFT), f64.
fn reference_spectrum(mask: &Grid<f32>, dose: f64) -> Vec<Complex64> {
    let n = mask.width;
    let mut planner = FftPlanner::<f64>::new();
    let fwd = planner.plan_fft_forward(n);
    let mut spec: Vec<Complex64> = mask
        .data
        .iter()
        .map(|&v| Complex64::new(dose * f64::from(v), 0.0))
        .collect();
    for row in spec.chunks_mut(n) {
        fwd.process(row);
    }
    let mut col = vec![Complex64::new(0.0, 0.0); n];
    for x in 0..n {
        for y in 0..n {
            col[y] = spec[y * n + x];
        }
        fwd.process(&mut col);
        for y in 0..n {
            spec[y * n + x] = col[y];
        }
    }
    spec
}

/// `Σ w_k |ifft2(spec · Φ_k)|²` at full resolution, f64.
fn reference_aerial(mask: &Grid<f32>, set: &KernelSet, dose: f64) -> Vec<f64> {
    let n = mask.width;
    let spec = reference_spectrum(mask, dose);
    let mut planner = FftPlanner::<f64>::new();
    let inv = planner.plan_fft_inverse(n);
    let (s, h) = (set.size, (set.size / 2) as isize);
    let norm = 1.0 / (n as f64 * n as f64);
    let mut acc = vec![0.0f64; n * n];
    let mut cols = vec![Complex64::new(0.0, 0.0); s * n];
    let mut row = vec![Complex64::new(0.0, 0.0); n];
    for k in 0..set.count() {
        let kernel = set.kernel(k);
        cols.fill(Complex64::new(0.0, 0.0));
        for j in 0..s {
            let cx = wrap(j as isize - h, n);
            let col = &mut cols[j * n..(j + 1) * n];
            for i in 0..s {
                let ry = wrap(i as isize - h, n);
                let phi = kernel[i * s + j];
                col[ry] = spec[ry * n + cx] * Complex64::new(f64::from(phi.re), f64::from(phi.im));
            }
            inv.process(col);
        }
        let w = f64::from(set.scales[k]);
        for y in 0..n {
            row.fill(Complex64::new(0.0, 0.0));
            for j in 0..s {
                row[wrap(j as isize - h, n)] = cols[j * n + y];
            }
            inv.process(&mut row);
            for (a, v) in acc[y * n..(y + 1) * n].iter_mut().zip(&row) {
                *a += w * (v * norm).norm_sqr();
            }
        }
    }
    acc
}

fn printed(intensity: f64, resist: Resist) -> bool {
    let r = 1.0
        / (1.0 + (-f64::from(resist.steepness) * (intensity - f64::from(resist.threshold))).exp());
    r > 0.5
}

fn open_frame(set: &KernelSet) -> f64 {
    let c = set.size / 2;
    (0..set.count())
        .map(|k| f64::from(set.scales[k]) * f64::from(set.kernel(k)[c * set.size + c].norm_sqr()))
        .sum()
}

// ---------------------------------------------------------------- synthetic inputs

/// A pupil-like set: random smooth kernels inside a disc, weights normalized so the
/// open-frame intensity is 1. `defocus` adds a quadratic phase.
fn synthetic_kernels(size: usize, count: usize, seed: u64, defocus: f64, tag: &str) -> KernelSet {
    let mut rng = SplitMix(seed);
    let c = (size / 2) as f64;
    let mut kernels = Vec::with_capacity(count * size * size);
    for k in 0..count {
        for i in 0..size {
            for j in 0..size {
                let (dy, dx) = (i as f64 - c, j as f64 - c);
                let r2 = dx * dx + dy * dy;
                if r2 > c * c {
                    kernels.push(Complex32::new(0.0, 0.0));
                    continue;
                }
                let env = (-r2 / (2.0 * (0.45 * c).powi(2))).exp();
                let (re, im) = if k == 0 {
                    (1.0, 0.0)
                } else {
                    (rng.unit() - 0.5, rng.unit() - 0.5)
                };
                let phase = defocus * r2;
                let v = Complex64::new(re, im) * env * Complex64::from_polar(1.0, phase);
                kernels.push(Complex32::new(v.re as f32, v.im as f32));
            }
        }
    }
    let mut set = KernelSet {
        size,
        kernels,
        scales: (0..count).map(|k| 1.0 / (1.0 + k as f32)).collect(),
        period_nm: 1.0,
        hash: format!("test:{tag}"),
    };
    let i0 = open_frame(&set) as f32;
    set.scales.iter_mut().for_each(|w| *w /= i0);
    set
}

/// Random rectangles (1) on a dark field, some gray pixels to exercise non-binary masks.
fn random_mask(n: usize, seed: u64) -> Grid<f32> {
    let mut rng = SplitMix(seed);
    let mut mask = Grid::filled(n, n, 0.0f32);
    for _ in 0..(n / 8) {
        let (w, h) = (4 + rng.below(n / 6), 4 + rng.below(n / 6));
        let (x0, y0) = (rng.below(n), rng.below(n));
        for y in y0..(y0 + h).min(n) {
            for x in x0..(x0 + w).min(n) {
                *mask.at_mut(x, y) = 1.0;
            }
        }
    }
    for _ in 0..(n * n / 50) {
        let p = rng.below(n * n);
        mask.data[p] = rng.unit() as f32;
    }
    mask
}

fn iccad_corners(focus: &Arc<KernelSet>, defocus: &Arc<KernelSet>) -> Vec<Corner> {
    vec![
        Corner {
            name: "nominal".into(),
            kernels: Arc::clone(focus),
            dose: 1.00,
        },
        Corner {
            name: "max".into(),
            kernels: Arc::clone(focus),
            dose: 1.02,
        },
        Corner {
            name: "min".into(),
            kernels: Arc::clone(defocus),
            dose: 0.98,
        },
    ]
}

const KEEP_ALL: KeepImages = KeepImages {
    aerial: true,
    resist: true,
    printed: true,
};

mod agreement;
mod batch;
mod behaviour;
mod iccad;

/// Runs a 3-corner job on the GPU and checks every figure against the reference.
fn check_litho_against_reference(
    gpu: &GpuBackend,
    mask: &Grid<f32>,
    target: &Grid<u8>,
    focus: &Arc<KernelSet>,
    defocus: &Arc<KernelSet>,
    resist: Resist,
    label: &str,
) {
    let n = mask.width;
    let corners = iccad_corners(focus, defocus);
    let job = LithoJob {
        mask,
        target: Some(target),
        corners: &corners,
        resist,
        keep: KEEP_ALL,
    };
    let out = gpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("gpu litho");
    assert_eq!(out.corners.len(), 3);

    let tol = 1e-4 * open_frame(focus);
    let mut ref_prints = Vec::new();
    for (c, corner) in corners.iter().enumerate() {
        let reference = reference_aerial(mask, &corner.kernels, f64::from(corner.dose));
        let got = &out.corners[c];
        let aerial = got.aerial.as_ref().expect("aerial kept");
        let max_err = aerial
            .data
            .iter()
            .zip(&reference)
            .map(|(&g, &r)| (f64::from(g) - r).abs())
            .fold(0.0, f64::max);
        let ref_print: Vec<bool> = reference.iter().map(|&i| printed(i, resist)).collect();
        let gpu_print = &got.printed.as_ref().expect("printed kept").data;
        let differ = ref_print
            .iter()
            .zip(gpu_print)
            .filter(|(r, g)| **r != (**g == 1))
            .count();
        let agree = 1.0 - differ as f64 / (n * n) as f64;
        eprintln!(
            "{label} corner {}: max |I_gpu - I_ref| = {max_err:.3e} (tol {tol:.3e}), printed agree {:.6} ({differ} px differ), printed {}",
            corner.name, agree, got.printed_pixels
        );
        assert!(
            max_err <= tol,
            "{label} {}: aerial error {max_err} > {tol}",
            corner.name
        );
        assert!(
            agree >= 0.9999,
            "{label} {}: printed agreement {agree}",
            corner.name
        );
        // The device counter equals the read-back plane.
        let plane_count = gpu_print.iter().filter(|&&p| p == 1).count() as u64;
        assert_eq!(got.printed_pixels, plane_count);
        // Resist is the sigmoid of the kept aerial.
        let resist_img = got.resist.as_ref().expect("resist kept");
        for p in (0..n * n).step_by(997) {
            let i = aerial.data[p];
            let r = 1.0 / (1.0 + (-resist.steepness * (i - resist.threshold)).exp());
            assert!((resist_img.data[p] - r).abs() < 1e-6);
        }
        ref_prints.push(ref_print);
    }
    // L2 and PVB: the device counters equal the counts over the read-back planes, and
    // differ from the reference only by the pixels whose print differs.
    let planes: Vec<&Vec<u8>> = out
        .corners
        .iter()
        .map(|c| &c.printed.as_ref().unwrap().data)
        .collect();
    let l2_planes = planes[0]
        .iter()
        .zip(&target.data)
        .filter(|(p, t)| **p != u8::from(**t > 0))
        .count() as u64;
    let pvb_planes = planes[1]
        .iter()
        .zip(planes[2])
        .filter(|(a, b)| a != b)
        .count() as u64;
    assert_eq!(out.l2, Some(l2_planes));
    assert_eq!(out.pvb, Some(pvb_planes));
    let l2_ref = ref_prints[0]
        .iter()
        .zip(&target.data)
        .filter(|(p, t)| **p != (**t > 0))
        .count() as u64;
    let pvb_ref = ref_prints[1]
        .iter()
        .zip(&ref_prints[2])
        .filter(|(a, b)| a != b)
        .count() as u64;
    let slack = ((n * n) as f64 * 1e-4) as u64;
    eprintln!("{label}: L2 gpu {l2_planes} ref {l2_ref}; PVB gpu {pvb_planes} ref {pvb_ref}");
    assert!(l2_planes.abs_diff(l2_ref) <= slack);
    assert!(pvb_planes.abs_diff(pvb_ref) <= slack);
}
