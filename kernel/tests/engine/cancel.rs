//! Cancellation and progress of the CPU backend.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{random_kernels, random_mask};
use reticle_kernel::imaging::{Corner, ImagingBackend, ImagingError, KeepImages, LithoJob, Resist};
use reticle_kernel::{CancelToken, CpuBackend, Grid, Progress};

fn corners(n_kernels: usize) -> Vec<Corner> {
    let k = Arc::new(random_kernels(35, n_kernels, 3));
    let d = Arc::new(random_kernels(35, n_kernels, 4));
    vec![
        Corner {
            name: "nominal".into(),
            kernels: k.clone(),
            dose: 1.0,
        },
        Corner {
            name: "max".into(),
            kernels: k,
            dose: 1.02,
        },
        Corner {
            name: "min".into(),
            kernels: d,
            dose: 0.98,
        },
    ]
}

/// A job imaging `mask` at `corners`, keeping no images.
fn job_of<'a>(mask: &'a Grid<f32>, corners: &'a [Corner]) -> LithoJob<'a> {
    LithoJob {
        mask,
        target: None,
        corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    }
}

#[test]
fn cancelled_run_stops_within_100_ms() {
    let mask = random_mask(4096, 1);
    let backend = CpuBackend::new();
    // The job must run well past the 30 ms cancel delay on any machine: an optimized build
    // images 400 random kernels in 15-55 ms, so the kernel count doubles until
    // the uncancelled run (the reference that shows the cancel cut it short) takes 250 ms.
    let mut n_kernels = 400;
    let (corners, full) = loop {
        let corners = corners(n_kernels);
        let t = Instant::now();
        backend
            .litho(&job_of(&mask, &corners), &CancelToken::new(), &|_| {})
            .unwrap();
        let full = t.elapsed();
        if full > Duration::from_millis(250) || n_kernels >= 400 * 16 {
            break (corners, full);
        }
        n_kernels *= 2;
    };
    let job = job_of(&mask, &corners);
    let cancel = CancelToken::new();
    let canceller = {
        let c = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            c.cancel();
            Instant::now()
        })
    };
    let r = backend.litho(&job, &cancel, &|_| {});
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    let latency = returned.saturating_duration_since(cancelled_at);
    println!("{n_kernels} kernels: full run {full:?}, returned {latency:?} after cancel");
    assert!(matches!(r, Err(ImagingError::Cancelled)), "{r:?}");
    assert!(latency < Duration::from_millis(100), "{latency:?}");
    assert!(
        full > Duration::from_millis(60),
        "the job must outlast the cancel delay: {full:?}"
    );
}

#[test]
fn pre_cancelled_and_progress() {
    let mask = random_mask(256, 2);
    let corners = corners(4);
    let job = LithoJob {
        mask: &mask,
        target: None,
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages {
            aerial: true,
            resist: true,
            printed: true,
        },
    };
    let cancel = CancelToken::new();
    let seen = Mutex::new(Vec::<Progress>::new());
    let out = CpuBackend::new()
        .litho(&job, &cancel, &|p| seen.lock().unwrap().push(p))
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(!seen.is_empty());
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done));
    let last = seen.last().unwrap();
    assert_eq!(last.done, last.total);
    assert_eq!(out.corners.len(), 3);
    let c0 = &out.corners[0];
    let printed = c0.printed.as_ref().unwrap();
    assert_eq!(
        printed.data.iter().map(|&p| u64::from(p)).sum::<u64>(),
        c0.printed_pixels
    );
    assert!(out.pvb.is_some() && out.l2.is_none());
    cancel.cancel();
    let r = CpuBackend::new().litho(&job, &cancel, &|_| {});
    assert!(matches!(r, Err(ImagingError::Cancelled)));
}
