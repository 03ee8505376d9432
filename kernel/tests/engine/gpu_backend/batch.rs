//! Windows sent to the device in batches (issue 29 item 5, D257): one submission and one
//! readback per batch, each window in its own slot of buffers, the same answer as one
//! window at a time, and a batch's memory bounded by the backend's cap.

use std::sync::atomic::{AtomicU64, Ordering};

use reticle_kernel::gpu::{DEFAULT_BATCH_BYTES, MAX_BATCH_WINDOWS};
use reticle_kernel::{BatchJob, FramePart, LithoOutput};

use super::*;

/// The target of a mask: its pixels at least half clear.
fn target_of(mask: &Grid<f32>) -> Grid<u8> {
    Grid {
        width: mask.width,
        height: mask.height,
        data: mask.data.iter().map(|&v| u8::from(v >= 0.5)).collect(),
    }
}

fn batch<'a>(jobs: &[LithoJob<'a>]) -> Vec<BatchJob<'a>> {
    jobs.iter()
        .map(|&job| BatchJob {
            job,
            part: None,
            reuse: LithoOutput::default(),
        })
        .collect()
}

#[test]
fn a_batch_gives_what_its_windows_give_one_by_one_within_its_memory_cap() {
    if backend().is_none() {
        return;
    }
    // Its own device, so the byte counts are not moved by the other tests' plans.
    let gpu = GpuBackend::new().expect("a second device on the same adapter");
    let focus = Arc::new(synthetic_kernels(35, 6, 31, 0.0, "batch-focus"));
    let defocus = Arc::new(synthetic_kernels(35, 6, 32, 0.4, "batch-defocus"));
    let corners = iccad_corners(&focus, &defocus);
    let n = 128;
    let masks: Vec<Grid<f32>> = (0..5).map(|seed| random_mask(n, 40 + seed)).collect();
    let targets: Vec<Grid<u8>> = masks.iter().map(target_of).collect();
    let jobs: Vec<LithoJob<'_>> = masks
        .iter()
        .zip(&targets)
        .map(|(mask, target)| LithoJob {
            mask,
            target: Some(target),
            corners: &corners,
            resist: Resist::ICCAD2013,
            keep: KEEP_ALL,
        })
        .collect();
    let cancel = CancelToken::new();
    let alone: Vec<LithoOutput> = jobs
        .iter()
        .map(|job| gpu.litho(job, &cancel, &|_| {}).expect("litho"))
        .collect();
    assert!(
        alone.windows(2).any(|w| w[0] != w[1]),
        "the windows differ, so a batch that mixed them up would show"
    );
    let one_slot = gpu.info().device_bytes;

    // The cap in windows follows the cap in bytes, never below one window.
    let window = (n * n * 24) as u64;
    assert_eq!(
        gpu.batch_windows(n),
        ((DEFAULT_BATCH_BYTES / window) as usize).min(MAX_BATCH_WINDOWS)
    );
    gpu.set_batch_bytes(2 * window);
    assert_eq!(gpu.batch_windows(n), 2);
    gpu.set_batch_bytes(0);
    assert_eq!(gpu.batch_windows(n), 1);

    // Capped at two windows: three batches (2, 2, 1), two slots on the device.
    gpu.set_batch_bytes(2 * window);
    let passes = AtomicU64::new(0);
    let count = |p: reticle_kernel::Progress| {
        passes.fetch_max(p.total, Ordering::Relaxed);
    };
    let two = gpu
        .litho_batch(batch(&jobs), &cancel, &count)
        .expect("batch of two");
    assert_eq!(
        two, alone,
        "batches of two answer what one window at a time does"
    );
    let two_slots = gpu.info().device_bytes;
    let slot = two_slots - one_slot;
    assert!(
        slot >= (n * n * 4) as u64,
        "a slot holds at least a mask: {slot}"
    );
    // A batch's passes are every window's passes: 9 for a window with corners.
    assert_eq!(passes.load(Ordering::Relaxed), 2 * 9);

    // Uncapped: one batch of five, five slots.
    gpu.set_batch_bytes(DEFAULT_BATCH_BYTES);
    passes.store(0, Ordering::Relaxed);
    let five = gpu
        .litho_batch(batch(&jobs), &cancel, &count)
        .expect("batch of five");
    assert_eq!(
        five, alone,
        "a batch of five answers what one window at a time does"
    );
    assert_eq!(
        passes.load(Ordering::Relaxed),
        5 * 9,
        "one submission for the five"
    );
    assert_eq!(gpu.info().device_bytes, one_slot + 4 * slot);

    // One submit for all passes (a GPU's default) gives the same answer as pass by pass.
    gpu.set_sync_each_pass(false);
    let at_once = gpu
        .litho_batch(batch(&jobs), &cancel, &|_| {})
        .expect("batch in one submission");
    gpu.set_sync_each_pass(true);
    assert_eq!(at_once, alone);

    // A part changes nothing on the device: it computes whole frames and their counts.
    let mut parted = batch(&jobs);
    parted[1].part = Some(FramePart {
        x0: 10,
        x1: 40,
        y0: 20,
        y1: 60,
        aerial_corners: 1,
    });
    let parted = gpu
        .litho_batch(parted, &cancel, &|_| {})
        .expect("batch with a part");
    assert_eq!(parted, alone);
}

#[test]
fn a_batch_of_mixed_windows_splits_and_bad_input_is_typed() {
    let Some(gpu) = backend() else { return };
    let focus = Arc::new(synthetic_kernels(35, 4, 33, 0.0, "mixed-focus"));
    let defocus = Arc::new(synthetic_kernels(35, 4, 34, 0.4, "mixed-defocus"));
    let corners = iccad_corners(&focus, &defocus);
    let nominal = &corners[..1];
    let masks = [
        random_mask(128, 50),
        random_mask(64, 51),
        random_mask(64, 52),
    ];
    let job = |mask, corners| LithoJob {
        mask,
        target: None,
        corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages {
            aerial: true,
            resist: false,
            printed: true,
        },
    };
    // Two sizes and two kernel lists: three runs, each as it would be alone.
    let jobs = [
        job(&masks[0], &corners[..]),
        job(&masks[1], &corners[..]),
        job(&masks[2], nominal),
    ];
    let cancel = CancelToken::new();
    let alone: Vec<LithoOutput> = jobs
        .iter()
        .map(|job| gpu.litho(job, &cancel, &|_| {}).expect("litho"))
        .collect();
    let together = gpu
        .litho_batch(batch(&jobs), &cancel, &|_| {})
        .expect("a mixed batch");
    assert_eq!(together, alone);
    assert!(
        gpu.litho_batch(Vec::new(), &cancel, &|_| {})
            .unwrap()
            .is_empty()
    );

    // A window without corners, anywhere in the batch, is refused before anything runs.
    let bad = [jobs[0], job(&masks[1], &[])];
    let err = gpu
        .litho_batch(batch(&bad), &cancel, &|_| {})
        .expect_err("no corners");
    assert!(matches!(err, ImagingError::Invalid(_)), "{err}");
    let stopped = CancelToken::new();
    stopped.cancel();
    let err = gpu
        .litho_batch(batch(&jobs), &stopped, &|_| {})
        .expect_err("cancelled");
    assert!(matches!(err, ImagingError::Cancelled), "{err}");
}
