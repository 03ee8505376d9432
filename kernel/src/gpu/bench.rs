//! Timing of whole litho jobs on the GPU backend, for `reticle bench litho --backend gpu`.

use std::time::Instant;

use super::GpuBackend;
use crate::{CancelToken, ImagingBackend, ImagingError, LithoJob};

/// Timing figures of [`gpu_bench`]; all times are wall-clock milliseconds of whole
/// `litho` calls (mask upload, every pass, counter readback), after warm-up.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuBenchReport {
    /// Adapter name and type.
    pub adapter: String,
    /// Mask side in pixels.
    pub grid: usize,
    /// Corners per simulation.
    pub corners: usize,
    /// The first call: pipeline compilation, buffer allocation and kernel upload included.
    pub first_call_ms: f64,
    /// Untimed warm-up calls after the first.
    pub warmup: usize,
    /// Timed calls.
    pub runs: usize,
    /// Mean time per simulation.
    pub ms_per_sim_mean: f64,
    /// Fastest simulation.
    pub ms_per_sim_min: f64,
    /// Median simulation.
    pub ms_per_sim_median: f64,
    /// Bytes held in device buffers after the runs.
    pub device_bytes: u64,
}

/// Runs `job` once (compile + upload), `warmup` more times untimed, then `runs` timed
/// times, and reports the figures. `runs` must be at least 1.
pub fn gpu_bench(
    backend: &GpuBackend,
    job: &LithoJob<'_>,
    warmup: usize,
    runs: usize,
) -> Result<GpuBenchReport, ImagingError> {
    if runs == 0 {
        return Err(ImagingError::Invalid(
            "gpu_bench needs at least one run".into(),
        ));
    }
    let cancel = CancelToken::new();
    let quiet = |_| {};
    let start = Instant::now();
    backend.litho(job, &cancel, &quiet)?;
    let first_call_ms = start.elapsed().as_secs_f64() * 1e3;
    for _ in 0..warmup {
        backend.litho(job, &cancel, &quiet)?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        backend.litho(job, &cancel, &quiet)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let info = backend.info();
    Ok(GpuBenchReport {
        adapter: info.adapter,
        grid: job.mask.width,
        corners: job.corners.len(),
        first_call_ms,
        warmup,
        runs,
        ms_per_sim_mean: times.iter().sum::<f64>() / times.len() as f64,
        ms_per_sim_min: times[0],
        ms_per_sim_median: times[times.len() / 2],
        device_bytes: info.device_bytes,
    })
}
