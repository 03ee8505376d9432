//! The GPU backend's behaviour: the open frame and translation of the aerial image, its
//! caches, cancellation and bad input.

use super::*;

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
