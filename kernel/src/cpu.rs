//! The CPU imaging backend: band-limited SOCS on a rayon pool.

use std::sync::Arc;

use rayon::prelude::*;

mod part;

use crate::bandlimited;
use crate::imaging::{
    BackendInfo, CornerOutput, FramePart, ImagingBackend, ImagingError, LithoJob, LithoOutput,
};
use crate::resist::sigmoid;
use crate::{CancelToken, Grid, KernelSet, Progress, ProgressFn, scratch};

/// Band-limited imaging on the CPU, threaded with rayon.
#[derive(Debug, Clone, Default)]
pub struct CpuBackend {
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl CpuBackend {
    /// A backend on rayon's global pool.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend on its own pool of `threads` threads.
    pub fn with_threads(threads: usize) -> Result<Self, ImagingError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| ImagingError::Backend(e.to_string()))?;
        Ok(Self {
            pool: Some(Arc::new(pool)),
        })
    }

    /// Threads this backend runs on.
    #[must_use]
    pub fn threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
    }

    /// Runs `f` on this backend's pool.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

/// Sizes rayon's global pool, the one [`CpuBackend::new`] and every other parallel loop of
/// the process run on, to `threads` threads. Call it once, before the first parallel loop;
/// afterwards the pool exists and this is an error.
///
/// # Errors
/// The global pool was already built, or its threads could not be started.
pub fn set_global_threads(threads: usize) -> Result<(), ImagingError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .map_err(|e| ImagingError::Backend(e.to_string()))
}

impl ImagingBackend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "cpu".into(),
            adapter: format!("cpu (rayon, {} threads)", self.threads()),
            device_bytes: 0,
        }
    }

    fn aerial(
        &self,
        mask: &Grid<f32>,
        kernels: &KernelSet,
        dose: f32,
        cancel: &CancelToken,
    ) -> Result<Grid<f32>, ImagingError> {
        self.install(|| bandlimited::aerial(mask, kernels, dose, cancel))
    }

    fn litho(
        &self,
        job: &LithoJob<'_>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<LithoOutput, ImagingError> {
        self.install(|| litho(job, None, LithoOutput::default(), cancel, progress))
    }

    fn litho_part(
        &self,
        job: &LithoJob<'_>,
        part: FramePart,
        reuse: LithoOutput,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<LithoOutput, ImagingError> {
        self.install(|| litho(job, Some(part), reuse, cancel, progress))
    }
}

/// `f` of each pixel of `img`, in one parallel pass; `f` is taken by value and copied
/// into each task, so the loop holds its constants in registers and vectorizes (D196).
fn per_pixel<T: Copy + Send>(img: &[f32], f: impl Fn(f32) -> T + Sync + Send + Copy) -> Vec<T> {
    img.par_iter().map(|&i| f(i)).collect()
}

/// An `n × n` grid of `data`.
fn square<T>(n: usize, data: Vec<T>) -> Grid<T> {
    Grid {
        width: n,
        height: n,
        data,
    }
}

/// Index of the first corner whose kernel set is the same set as corner `i`'s.
fn first_with_same_kernels(job: &LithoJob<'_>, i: usize) -> usize {
    let k = &job.corners[i].kernels;
    job.corners
        .iter()
        .position(|c| {
            Arc::ptr_eq(&c.kernels, k) || (c.kernels.hash == k.hash && !k.hash.is_empty())
        })
        .unwrap_or(i)
}

/// A whole job: one mask band, one aerial image per distinct kernel set (doses scale
/// the intensity by `dose²`), then print and metrics in one pass over the pixels. With a
/// `part`, only its rows are upsampled, only its pixels printed and copied, and the
/// whole-frame counts are skipped (D193); its images go into `reuse`'s buffers (D194).
fn litho(
    job: &LithoJob<'_>,
    part: Option<FramePart>,
    reuse: LithoOutput,
    cancel: &CancelToken,
    progress: ProgressFn<'_>,
) -> Result<LithoOutput, ImagingError> {
    if job.corners.is_empty() {
        return Err(ImagingError::Invalid(
            "a job needs at least one corner".into(),
        ));
    }
    let mut n = 0;
    for c in job.corners {
        n = crate::naive::check_shapes(job.mask, &c.kernels)?;
    }
    if let Some(t) = job.target
        && (t.width != n || t.height != n)
    {
        return Err(ImagingError::Invalid("target and mask sizes differ".into()));
    }
    let half = job
        .corners
        .iter()
        .map(|c| c.kernels.size / 2)
        .max()
        .unwrap_or(0);
    cancel.check()?;
    let band = bandlimited::mask_band(job.mask, half, cancel)?;

    // Distinct kernel sets, imaged once each at dose 1.
    let owners: Vec<usize> = (0..job.corners.len())
        .map(|i| first_with_same_kernels(job, i))
        .collect();
    let distinct: Vec<usize> = (0..job.corners.len()).filter(|&i| owners[i] == i).collect();
    let total = distinct.len() as u64 + job.corners.len() as u64;
    if let Some(p) = part {
        let images = part::Images {
            band: &band,
            owners: &owners,
            distinct: &distinct,
            n,
        };
        let corners = part::corners(job, p, reuse, &images, cancel, progress)?;
        return Ok(LithoOutput {
            corners,
            l2: None,
            pvb: None,
        });
    }
    let mut images: Vec<Option<Grid<f32>>> = vec![None; job.corners.len()];
    for (done, &i) in distinct.iter().enumerate() {
        cancel.check()?;
        // Into a pooled buffer (D195).
        images[i] = Some(bandlimited::aerial_rows_into(
            &band,
            &job.corners[i].kernels,
            1.0,
            n,
            0..n,
            scratch::take(n * n),
            cancel,
        )?);
        progress(Progress {
            done: done as u64 + 1,
            total,
            stage: "aerial",
        });
    }
    let th = job.resist.threshold;
    let steepness = job.resist.steepness;
    let d2: Vec<f32> = job.corners.iter().map(|c| c.dose * c.dose).collect();
    let image = |i: usize| {
        images[owners[i]]
            .as_ref()
            .map(|g| g.data.as_slice())
            .unwrap_or(&[])
    };
    // Printed ⇔ sigmoid(s·(d²I − t)) > 0.5 ⇔ d²I > t: no exp needed for counting.
    let l2 = job.target.map(|t| {
        let img = image(0);
        t.data
            .par_iter()
            .zip(img.par_iter())
            .filter(|(t, i)| (**t != 0) != (d2[0] * **i > th))
            .count() as u64
    });
    let pvb = (job.corners.len() >= 3).then(|| {
        let (a, b) = (image(1), image(2));
        a.par_iter()
            .zip(b.par_iter())
            .filter(|(x, y)| (d2[1] * **x > th) != (d2[2] * **y > th))
            .count() as u64
    });
    let mut corners = Vec::with_capacity(job.corners.len());
    // A corner at dose 1 keeps its kernel set's image itself as its aerial image (`1·I`
    // is `I` bit for bit): the first such corner of each image, moved once every corner
    // has read it (D196).
    let mut moved: Vec<Option<usize>> = vec![None; job.corners.len()];
    for (ci, _) in job.corners.iter().enumerate() {
        cancel.check()?;
        let img = image(ci);
        let d = d2[ci];
        let printed_pixels = img.par_iter().filter(|&&i| d * i > th).count() as u64;
        let grid = |data| square(n, data);
        let move_image =
            job.keep.aerial && d == 1.0 && !moved.iter().any(|m| *m == Some(owners[ci]));
        if move_image {
            moved[ci] = Some(owners[ci]);
        }
        corners.push(CornerOutput {
            aerial: (job.keep.aerial && !move_image).then(|| grid(per_pixel(img, move |i| d * i))),
            resist: job
                .keep
                .resist
                .then(|| grid(per_pixel(img, move |i| sigmoid(steepness * (d * i - th))))),
            printed: job
                .keep
                .printed
                .then(|| square(n, per_pixel(img, move |i| u8::from(d * i > th)))),
            printed_pixels,
        });
        progress(Progress {
            done: distinct.len() as u64 + ci as u64 + 1,
            total,
            stage: "corner",
        });
    }
    for (ci, owner) in moved.iter().enumerate() {
        if let Some(owner) = *owner {
            corners[ci].aerial = images[owner].take();
        }
    }
    for image in images.into_iter().flatten() {
        scratch::give(image.data);
    }
    Ok(LithoOutput { corners, l2, pvb })
}
