//! The CPU imaging backend: band-limited SOCS on a rayon pool.

use std::sync::Arc;

use rayon::prelude::*;

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

/// `f` of each pixel of `img` (`n` wide): all of them, or with a `part` only those in
/// it, written into `reuse` when it has the image's size (the other pixels keep what it
/// held; D194), else into a new buffer (the others `T::default()`). `f` is taken by value
/// and copied into each row's loop, so the loop holds its constants in registers and
/// vectorizes (D196).
fn per_pixel<T: Copy + Default + Send>(
    img: &[f32],
    n: usize,
    part: Option<FramePart>,
    reuse: Option<Vec<T>>,
    f: impl Fn(f32) -> T + Sync + Send + Copy,
) -> Vec<T> {
    let Some(p) = part else {
        return img.par_iter().map(|&i| f(i)).collect();
    };
    let mut out = match reuse {
        Some(v) if v.len() == img.len() => v,
        _ => vec![T::default(); img.len()],
    };
    let (x0, x1) = (p.x0.min(n), p.x1.min(n));
    let x1 = x1.max(x0);
    out.par_chunks_mut(n)
        .enumerate()
        .skip(p.y0)
        .take(p.y1.saturating_sub(p.y0))
        .for_each(move |(y, row)| {
            let f = f;
            let src = &img[y * n + x0..y * n + x1];
            for (o, &i) in row[x0..x1].iter_mut().zip(src) {
                *o = f(i);
            }
        });
    out
}

/// A corner's aerial image (`d·I`) and print (`d·I > th`) in one pass over the image
/// when both are asked for (`Some`, with the buffer to reuse, if any), each as
/// [`per_pixel`] would write it (D196).
#[allow(clippy::option_option)]
fn scaled_and_printed(
    img: &[f32],
    n: usize,
    part: Option<FramePart>,
    aerial: Option<Option<Vec<f32>>>,
    printed: Option<Option<Vec<u8>>>,
    d: f32,
    th: f32,
) -> (Option<Vec<f32>>, Option<Vec<u8>>) {
    let (Some(p), Some(a), Some(pr)) = (part, aerial.as_ref(), printed.as_ref()) else {
        return (
            aerial.map(|reuse| per_pixel(img, n, part, reuse, move |i| d * i)),
            printed.map(|reuse| per_pixel(img, n, part, reuse, move |i| u8::from(d * i > th))),
        );
    };
    let fresh_a = a.as_ref().is_none_or(|v| v.len() != img.len());
    let fresh_p = pr.as_ref().is_none_or(|v| v.len() != img.len());
    let mut a = match aerial.flatten() {
        Some(v) if !fresh_a => v,
        _ => vec![0.0; img.len()],
    };
    let mut pr = match printed.flatten() {
        Some(v) if !fresh_p => v,
        _ => vec![0; img.len()],
    };
    let (x0, x1) = (p.x0.min(n), p.x1.min(n));
    let x1 = x1.max(x0);
    a.par_chunks_mut(n)
        .zip(pr.par_chunks_mut(n))
        .enumerate()
        .skip(p.y0)
        .take(p.y1.saturating_sub(p.y0))
        .for_each(move |(y, (ra, rp))| {
            let src = &img[y * n + x0..y * n + x1];
            for ((oa, op), &i) in ra[x0..x1].iter_mut().zip(&mut rp[x0..x1]).zip(src) {
                let v = d * i;
                *oa = v;
                *op = u8::from(v > th);
            }
        });
    (Some(a), Some(pr))
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
    mut reuse: LithoOutput,
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
    let mut images: Vec<Option<Grid<f32>>> = vec![None; job.corners.len()];
    for (done, &i) in distinct.iter().enumerate() {
        cancel.check()?;
        let rows = part.map_or(0..n, |p| p.y0..p.y1);
        // Into a pooled buffer (D195): only `rows` are written and read.
        images[i] = Some(bandlimited::aerial_rows_into(
            &band,
            &job.corners[i].kernels,
            1.0,
            n,
            rows,
            scratch::take(n * n),
            cancel,
        )?);
        progress(Progress {
            done: done as u64 + 1,
            total,
            stage: "aerial",
        });
    }
    let image = |i: usize| {
        images[owners[i]]
            .as_ref()
            .map(|g| g.data.as_slice())
            .unwrap_or(&[])
    };

    let th = job.resist.threshold;
    let steepness = job.resist.steepness;
    let d2: Vec<f32> = job.corners.iter().map(|c| c.dose * c.dose).collect();
    // Printed ⇔ sigmoid(s·(d²I − t)) > 0.5 ⇔ d²I > t: no exp needed for counting.
    let counts = part.is_none();
    let l2 = job.target.filter(|_| counts).map(|t| {
        let img = image(0);
        t.data
            .par_iter()
            .zip(img.par_iter())
            .filter(|(t, i)| (**t != 0) != (d2[0] * **i > th))
            .count() as u64
    });
    let pvb = (counts && job.corners.len() >= 3).then(|| {
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
        let mut old = reuse
            .corners
            .get_mut(ci)
            .map(std::mem::take)
            .unwrap_or_default();
        let printed_pixels = if counts {
            img.par_iter().filter(|&&i| d * i > th).count() as u64
        } else {
            0
        };
        let grid = |data| Grid {
            width: n,
            height: n,
            data,
        };
        let move_image =
            job.keep.aerial && d == 1.0 && !moved.iter().any(|m| *m == Some(owners[ci]));
        if move_image {
            moved[ci] = Some(owners[ci]);
            if let Some(g) = old.aerial.take() {
                scratch::give(g.data);
            }
        }
        let (aerial, printed) = scaled_and_printed(
            img,
            n,
            part,
            (job.keep.aerial && !move_image).then(|| old.aerial.map(|g| g.data)),
            job.keep.printed.then(|| old.printed.map(|g| g.data)),
            d,
            th,
        );
        corners.push(CornerOutput {
            aerial: aerial.map(grid),
            resist: job.keep.resist.then(|| {
                grid(per_pixel(
                    img,
                    n,
                    part,
                    old.resist.map(|g| g.data),
                    move |i| sigmoid(steepness * (d * i - th)),
                ))
            }),
            printed: printed.map(|data| Grid {
                width: n,
                height: n,
                data,
            }),
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
