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

// ---------------------------------------------------------------- tests

#[test]
fn fft_matches_rustfft() {
    let Some(gpu) = backend() else { return };
    let mut planner = FftPlanner::<f64>::new();
    let mut rng = SplitMix(7);
    for &len in &[4usize, 8, 16, 32, 64, 128, 256, 512, 1024, 2048] {
        for inverse in [false, true] {
            let count = (8192 / len).clamp(3, 64);
            let input: Vec<Complex32> = (0..count * len)
                .map(|_| Complex32::new(rng.unit() as f32 - 0.5, rng.unit() as f32 - 0.5))
                .collect();
            let mut got = input.clone();
            gpu.fft_batch(&mut got, len, inverse).expect("gpu fft");
            let plan = if inverse {
                planner.plan_fft_inverse(len)
            } else {
                planner.plan_fft_forward(len)
            };
            let mut want: Vec<Complex64> = input
                .iter()
                .map(|c| Complex64::new(f64::from(c.re), f64::from(c.im)))
                .collect();
            for chunk in want.chunks_mut(len) {
                plan.process(chunk);
            }
            let (mut err2, mut ref2, mut max_err, mut max_ref) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for (g, w) in got.iter().zip(&want) {
                let e = (Complex64::new(f64::from(g.re), f64::from(g.im)) - w).norm();
                err2 += e * e;
                ref2 += w.norm_sqr();
                max_err = max_err.max(e);
                max_ref = max_ref.max(w.norm());
            }
            let rel_rms = (err2 / ref2).sqrt();
            assert!(
                rel_rms < 2e-6,
                "len {len} inverse {inverse}: relative rms error {rel_rms}"
            );
            assert!(
                max_err < 1e-5 * max_ref,
                "len {len} inverse {inverse}: max error {max_err} vs {max_ref}"
            );
        }
    }
    // Bad lengths are typed errors, not panics.
    let mut odd = vec![Complex32::new(0.0, 0.0); 12];
    assert!(matches!(
        gpu.fft_batch(&mut odd, 12, false),
        Err(ImagingError::Invalid(_))
    ));
}

#[test]
fn random_masks_agree_with_cpu_reference() {
    let Some(gpu) = backend() else { return };
    let focus = Arc::new(synthetic_kernels(35, 10, 11, 0.0, "focus"));
    let defocus = Arc::new(synthetic_kernels(35, 10, 11, 0.004, "defocus"));
    let resist = Resist {
        steepness: 50.0,
        threshold: 0.3,
    };
    for seed in [1u64, 2] {
        let mask = random_mask(256, seed);
        let target = Grid {
            width: 256,
            height: 256,
            data: mask.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
        };
        check_litho_against_reference(
            gpu,
            &mask,
            &target,
            &focus,
            &defocus,
            resist,
            &format!("random{seed}"),
        );
    }
}

#[test]
fn agrees_with_the_cpu_backend() {
    // The project's CPU path (band-limited SOCS on rayon) against the GPU path.
    let Some(gpu) = backend() else { return };
    let cpu = CpuBackend::new();
    let focus = Arc::new(synthetic_kernels(35, 10, 31, 0.0, "cpu-focus"));
    let defocus = Arc::new(synthetic_kernels(35, 10, 31, 0.004, "cpu-defocus"));
    let resist = Resist {
        steepness: 50.0,
        threshold: 0.3,
    };
    let mask = random_mask(256, 77);
    let target = Grid {
        width: 256,
        height: 256,
        data: mask.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
    };
    let corners = iccad_corners(&focus, &defocus);
    let job = LithoJob {
        mask: &mask,
        target: Some(&target),
        corners: &corners,
        resist,
        keep: KEEP_ALL,
    };
    let g = gpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("gpu litho");
    let c = cpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("cpu litho");
    let tol = 1e-4 * open_frame(&focus);
    let area = (256 * 256) as f64;
    for (k, (gc, cc)) in g.corners.iter().zip(&c.corners).enumerate() {
        let (ga, ca) = (gc.aerial.as_ref().unwrap(), cc.aerial.as_ref().unwrap());
        let max_err = ga
            .data
            .iter()
            .zip(&ca.data)
            .map(|(a, b)| f64::from((a - b).abs()))
            .fold(0.0, f64::max);
        let differ = gc
            .printed
            .as_ref()
            .unwrap()
            .data
            .iter()
            .zip(&cc.printed.as_ref().unwrap().data)
            .filter(|(a, b)| a != b)
            .count();
        eprintln!("cpu vs gpu corner {k}: max |dI| = {max_err:.3e}, {differ} printed px differ");
        assert!(max_err <= tol, "corner {k}: {max_err} > {tol}");
        assert!(1.0 - differ as f64 / area >= 0.9999);
    }
    let slack = (area * 1e-4) as u64;
    assert!(
        g.l2.unwrap().abs_diff(c.l2.unwrap()) <= slack,
        "L2 {:?} vs {:?}",
        g.l2,
        c.l2
    );
    assert!(
        g.pvb.unwrap().abs_diff(c.pvb.unwrap()) <= slack,
        "PVB {:?} vs {:?}",
        g.pvb,
        c.pvb
    );
}

#[test]
fn selection_forces_wgpu_or_falls_back_to_cpu() {
    let Some(gpu) = backend() else { return };
    // `gpu` takes whatever adapter exists; `auto` takes it only when it is real hardware.
    let forced = select_backend(BackendPref::Gpu).expect("gpu forced");
    assert!(matches!(forced, SelectedBackend::Gpu(_)));
    match select_backend(BackendPref::Auto).expect("auto") {
        SelectedBackend::Gpu(b) => assert!(b.is_hardware(), "auto picked {}", b.adapter_name()),
        SelectedBackend::Cpu { reason } => {
            assert!(
                !gpu.is_hardware(),
                "auto fell back to CPU although {} is a GPU",
                gpu.adapter_name()
            );
            eprintln!("auto chose the CPU path: {reason}");
        }
    }
}

#[test]
fn small_grid_where_the_coarse_grid_is_the_full_grid() {
    // 64 < 2·35 − 1: the coarse grid is the mask grid itself.
    let Some(gpu) = backend() else { return };
    let focus = Arc::new(synthetic_kernels(35, 6, 5, 0.0, "small-focus"));
    let defocus = Arc::new(synthetic_kernels(35, 6, 5, 0.006, "small-defocus"));
    let mask = random_mask(64, 9);
    let target = Grid {
        width: 64,
        height: 64,
        data: vec![0u8; 64 * 64],
    };
    let resist = Resist {
        steepness: 50.0,
        threshold: 0.3,
    };
    check_litho_against_reference(gpu, &mask, &target, &focus, &defocus, resist, "n64");
}

#[test]
fn default_model_at_coarse_pixels_agrees_with_the_cpu_backend() {
    // The default model (193 nm, NA 1.35, annular 0.6–0.9, P = 2048 nm, 55×55 kernels) at
    // 2, 4, 8 and 16 nm pixels: coarse grid 128 below the mask side, then equal to it.
    let Some(gpu) = backend() else { return };
    let set = reticle_kernel::model::default_model(2048.0)
        .kernels()
        .expect("default model")
        .focus;
    let cpu = CpuBackend::new();
    let cancel = CancelToken::new();
    let tol = 1e-4 * open_frame(&set);
    for pixel in [2usize, 4, 8, 16] {
        let n = 2048 / pixel;
        let mask = random_mask(n, 40 + pixel as u64);
        let g = gpu.aerial(&mask, &set, 1.0, &cancel).expect("gpu aerial");
        let c = cpu.aerial(&mask, &set, 1.0, &cancel).expect("cpu aerial");
        let worst = g
            .data
            .iter()
            .zip(&c.data)
            .map(|(a, b)| f64::from((a - b).abs()))
            .fold(0.0, f64::max);
        eprintln!(
            "default model, {pixel} nm ({n}²): max |gpu − cpu| = {:.2e} of the open frame",
            worst / open_frame(&set)
        );
        assert!(worst <= tol, "{pixel} nm: {worst} > {tol}");
    }
}

#[test]
fn aerial_open_frame_and_translation() {
    let Some(gpu) = backend() else { return };
    let set = synthetic_kernels(35, 8, 3, 0.0, "aerial");
    let n = 128;
    let cancel = CancelToken::new();
    let tol = 1e-4 * open_frame(&set);

    // Open frame: the image of a clear mask is the constant Σ w_k |Φ_k(0)|².
    let open = gpu
        .aerial(&Grid::filled(n, n, 1.0), &set, 1.0, &cancel)
        .expect("aerial");
    let expect = open_frame(&set);
    let worst = open
        .data
        .iter()
        .map(|&v| (f64::from(v) - expect).abs())
        .fold(0.0, f64::max);
    assert!(worst <= tol, "open frame off by {worst}");

    // Dose scales the image by dose².
    let mask = random_mask(n, 4);
    let base = gpu.aerial(&mask, &set, 1.0, &cancel).expect("aerial");
    let dosed = gpu.aerial(&mask, &set, 1.1, &cancel).expect("aerial");
    let reference = reference_aerial(&mask, &set, 1.1);
    for ((&d, &b), &r) in dosed.data.iter().zip(&base.data).zip(&reference) {
        assert!((f64::from(d) - 1.21 * f64::from(b)).abs() <= tol);
        assert!((f64::from(d) - r).abs() <= tol);
    }

    // A translated mask gives the translated image (circular).
    let (dx, dy) = (17usize, 40usize);
    let mut shifted = Grid::filled(n, n, 0.0f32);
    for y in 0..n {
        for x in 0..n {
            *shifted.at_mut((x + dx) % n, (y + dy) % n) = *mask.at(x, y);
        }
    }
    let moved = gpu.aerial(&shifted, &set, 1.0, &cancel).expect("aerial");
    for y in 0..n {
        for x in 0..n {
            let d = (moved.at((x + dx) % n, (y + dy) % n) - base.at(x, y)).abs();
            assert!(f64::from(d) <= tol, "translation broke at ({x},{y}): {d}");
        }
    }
}

#[test]
fn caches_are_reused_and_reported() {
    // Its own device, so the byte counts are not moved by the other tests' plans.
    if backend().is_none() {
        return;
    }
    let gpu = GpuBackend::new().expect("a second device on the same adapter");
    assert_eq!(gpu.info().device_bytes, 0);
    assert_eq!(gpu.info().kind, "gpu");
    let focus = Arc::new(synthetic_kernels(35, 4, 21, 0.0, "cache-focus"));
    let corners = vec![Corner {
        name: "nominal".into(),
        kernels: Arc::clone(&focus),
        dose: 1.0,
    }];
    let mask = random_mask(128, 5);
    let job = LithoJob {
        mask: &mask,
        target: None,
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    };
    let first = gpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("litho");
    let held = gpu.info().device_bytes;
    // At least the mask, its aerial image and the printed plane are on the device.
    assert!(held >= 3 * 128 * 128 * 4 / 2, "device_bytes {held}");
    let second = gpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("litho");
    assert_eq!(first, second, "the same job gives the same answer");
    // One submission for all passes (the GPU default) gives the same answer too.
    gpu.set_sync_each_pass(false);
    let batched = gpu
        .litho(&job, &CancelToken::new(), &|_| {})
        .expect("litho");
    assert_eq!(first, batched);
    gpu.set_sync_each_pass(true);
    assert_eq!(
        gpu.info().device_bytes,
        held,
        "a repeat job reuses every buffer"
    );
    assert!(first.corners[0].aerial.is_none() && first.corners[0].printed.is_none());
    assert!(first.corners[0].printed_pixels > 0);
    assert_eq!(first.l2, None);
    assert_eq!(first.pvb, None);
    // A new kernel set adds only its bank (4 kernels of 35x35 complex + weights).
    let other = synthetic_kernels(35, 4, 22, 0.0, "cache-other");
    gpu.aerial(&mask, &other, 1.0, &CancelToken::new())
        .expect("aerial");
    assert_eq!(gpu.info().device_bytes, held + 4 * 35 * 35 * 8 + 4 * 4);
}

#[test]
fn cancellation_and_bad_input_are_typed_errors() {
    let Some(gpu) = backend() else { return };
    let set = Arc::new(synthetic_kernels(35, 2, 1, 0.0, "errors"));
    let corners = vec![Corner {
        name: "nominal".into(),
        kernels: Arc::clone(&set),
        dose: 1.0,
    }];
    let mask = random_mask(64, 1);
    let cancel = CancelToken::new();
    cancel.cancel();
    let job = LithoJob {
        mask: &mask,
        target: None,
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    };
    assert!(matches!(
        gpu.litho(&job, &cancel, &|_| {}),
        Err(ImagingError::Cancelled)
    ));

    // Cancelling from the progress callback stops the run between passes.
    let cancel = CancelToken::new();
    let stopper = cancel.clone();
    let result = gpu.litho(&job, &cancel, &move |p| {
        if p.done == 2 {
            stopper.cancel();
        }
    });
    assert!(matches!(result, Err(ImagingError::Cancelled)));

    let odd = Grid::filled(100, 100, 0.0f32);
    let job = LithoJob { mask: &odd, ..job };
    assert!(matches!(
        gpu.litho(&job, &CancelToken::new(), &|_| {}),
        Err(ImagingError::Invalid(_))
    ));
    let small_target = Grid::filled(32, 32, 0u8);
    let job = LithoJob {
        mask: &mask,
        target: Some(&small_target),
        ..job
    };
    assert!(matches!(
        gpu.litho(&job, &CancelToken::new(), &|_| {}),
        Err(ImagingError::Invalid(_))
    ));
}

// ---------------------------------------------------------------- ICCAD-2013 data

fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RETICLE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    dir.join("iccad13").is_dir().then_some(dir)
}

/// Minimal `.npy` reader for little-endian C-order arrays: (shape, raw data).
fn read_npy(path: &std::path::Path, descr: &str) -> (Vec<usize>, Vec<u8>) {
    let bytes = std::fs::read(path).expect("read npy");
    assert_eq!(
        &bytes[..6],
        b"\x93NUMPY",
        "{}: not an npy file",
        path.display()
    );
    let (header_len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).expect("npy header");
    assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("shape");
    let shape = shape_text
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    (shape, bytes[start + header_len..].to_vec())
}

fn iccad_kernels(dir: &std::path::Path, name: &str) -> KernelSet {
    let kdir = dir.join("iccad13/kernels");
    let (shape, raw) = read_npy(&kdir.join(format!("{name}.npy")), "<c8");
    let (count, size) = (shape[0], shape[1]);
    assert_eq!(shape, vec![count, size, size]);
    let kernels = raw
        .chunks_exact(8)
        .map(|c| {
            Complex32::new(
                f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    let (sshape, sraw) = read_npy(&kdir.join(format!("{name}_scales.npy")), "<f4");
    assert_eq!(sshape, vec![count]);
    let scales = sraw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    KernelSet {
        size,
        kernels,
        scales,
        period_nm: 2048.0,
        hash: format!("iccad13:{name}"),
    }
}

/// Rasterizes the rectilinear RECT/PGON shapes of a `.glp` clip at 1 nm, centred in
/// an `n × n` grid; a pixel is inside when its centre is (even-odd rule).
fn rasterize_glp(path: &std::path::Path, n: usize) -> Grid<u8> {
    let text = std::fs::read_to_string(path).expect("read glp");
    let mut polys: Vec<Vec<(i64, i64)>> = Vec::new();
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        let nums =
            |from: usize| -> Vec<i64> { t[from..].iter().filter_map(|v| v.parse().ok()).collect() };
        match t.first() {
            Some(&"RECT") => {
                let v = nums(3);
                let (x, y, w, h) = (v[0], v[1], v[2], v[3]);
                polys.push(vec![(x, y), (x + w, y), (x + w, y + h), (x, y + h)]);
            }
            Some(&"PGON") => {
                let v = nums(3);
                polys.push(v.chunks_exact(2).map(|p| (p[0], p[1])).collect());
            }
            _ => {}
        }
    }
    assert!(!polys.is_empty(), "{}: no shapes", path.display());
    let (mut x0, mut y0, mut x1, mut y1) = (i64::MAX, i64::MAX, i64::MIN, i64::MIN);
    for &(x, y) in polys.iter().flatten() {
        (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
    }
    let off_x = (n as i64 - (x1 - x0)) / 2 - x0;
    let off_y = (n as i64 - (y1 - y0)) / 2 - y0;
    let mut grid = Grid::filled(n, n, 0u8);
    for poly in &polys {
        for y in 0..n {
            let yc = y as f64 + 0.5 - off_y as f64;
            let mut xs: Vec<f64> = Vec::new();
            for e in 0..poly.len() {
                let (a, b) = (poly[e], poly[(e + 1) % poly.len()]);
                if a.0 == b.0 && ((a.1 as f64) <= yc) != ((b.1 as f64) <= yc) {
                    xs.push(a.0 as f64);
                }
            }
            xs.sort_by(f64::total_cmp);
            for pair in xs.chunks_exact(2) {
                let from = (pair[0] + off_x as f64 - 0.5).ceil().max(0.0) as usize;
                let to = ((pair[1] + off_x as f64 - 0.5).ceil().max(0.0) as usize).min(n);
                for x in from..to {
                    *grid.at_mut(x, y) ^= 1;
                }
            }
        }
    }
    grid
}

#[test]
fn iccad_clips_agree_with_cpu_reference() {
    let Some(gpu) = backend() else { return };
    let Some(dir) = data_dir() else {
        eprintln!(
            "SKIP: ICCAD-2013 data not found (set RETICLE_DATA_DIR or provide ../shared/data)"
        );
        return;
    };
    let focus = Arc::new(iccad_kernels(&dir, "focus"));
    let defocus = Arc::new(iccad_kernels(&dir, "defocus"));
    let i0 = open_frame(&focus);
    assert!((i0 - 0.9515).abs() < 2e-3, "focus open frame {i0}");
    let clip = std::env::var("RETICLE_ICCAD_CLIP").unwrap_or_else(|_| "M1_test1".into());
    let target = rasterize_glp(&dir.join(format!("iccad13/layouts/{clip}.glp")), 2048);
    let mask = Grid {
        width: 2048,
        height: 2048,
        data: target.data.iter().map(|&v| f32::from(v)).collect(),
    };
    check_litho_against_reference(
        gpu,
        &mask,
        &target,
        &focus,
        &defocus,
        Resist::ICCAD2013,
        &clip,
    );
}

/// One 2048² three-corner benchmark (explicit: `cargo test … -- --ignored gpu_bench_2048`).
#[test]
#[ignore = "benchmark; run explicitly"]
fn gpu_bench_2048() {
    let Some(gpu) = backend() else { return };
    let (focus, defocus) = match data_dir() {
        Some(dir) => (
            Arc::new(iccad_kernels(&dir, "focus")),
            Arc::new(iccad_kernels(&dir, "defocus")),
        ),
        None => (
            Arc::new(synthetic_kernels(35, 24, 1, 0.0, "bench-focus")),
            Arc::new(synthetic_kernels(35, 24, 1, 0.004, "bench-defocus")),
        ),
    };
    let mask = random_mask(2048, 3);
    let target = Grid {
        width: 2048,
        height: 2048,
        data: mask.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
    };
    let corners = iccad_corners(&focus, &defocus);
    let job = LithoJob {
        mask: &mask,
        target: Some(&target),
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    };
    let runs: usize = std::env::var("RETICLE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let report = gpu_bench(gpu, &job, 1, runs).expect("bench");
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    assert!(report.ms_per_sim_min > 0.0);
    // The CPU path on the same job, for the ratio (one warm-up, one timed run).
    let cpu = CpuBackend::new();
    let cancel = CancelToken::new();
    let cpu_out = cpu.litho(&job, &cancel, &|_| {}).expect("cpu litho");
    let t = std::time::Instant::now();
    cpu.litho(&job, &cancel, &|_| {}).expect("cpu litho");
    let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
    let gpu_out = gpu.litho(&job, &cancel, &|_| {}).expect("gpu litho");
    println!(
        "cpu {cpu_ms:.1} ms per sim ({}); gpu/cpu time ratio {:.3}; L2 gpu {:?} cpu {:?}; PVB gpu {:?} cpu {:?}",
        cpu.info().adapter,
        report.ms_per_sim_median / cpu_ms,
        gpu_out.l2,
        cpu_out.l2,
        gpu_out.pvb,
        cpu_out.pvb
    );
}
