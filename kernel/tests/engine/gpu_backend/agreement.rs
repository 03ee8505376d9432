//! The GPU path agrees with the references: its FFT with rustfft, its images with the f64
//! reference and with the CPU backend (random masks, small grids, the default model), and
//! backend selection.

use super::*;

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
