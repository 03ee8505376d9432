//! Imaging backends: the one interface the CPU and GPU paths both implement.
//!
//! A [`LithoJob`] is one clip simulated at one or more process corners. The
//! backend returns only what the caller asked to keep ([`KeepImages`]); metrics
//! (L2 against the target, PV band between the outer corners) are computed where
//! the images live, so the GPU reads back full images only when asked.

use std::sync::Arc;

use crate::{CancelToken, Grid, KernelSet, ProgressFn};

/// What kind of backend ran a job, and on what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackendInfo {
    /// `"cpu"` or `"gpu"`.
    pub kind: String,
    /// Adapter name (`"cpu (rayon, N threads)"` for the CPU path, the wgpu adapter otherwise).
    pub adapter: String,
    /// Bytes currently held in device buffers (0 for the CPU path).
    pub device_bytes: u64,
}

/// Errors from an imaging backend.
#[derive(Debug, thiserror::Error)]
pub enum ImagingError {
    /// The run was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The request does not fit the kernels or the backend (sizes, shapes).
    #[error("invalid imaging request: {0}")]
    Invalid(String),
    /// The device failed (adapter lost, out of memory, shader error).
    #[error("backend error: {0}")]
    Backend(String),
}

impl From<crate::Cancelled> for ImagingError {
    fn from(_: crate::Cancelled) -> Self {
        Self::Cancelled
    }
}

/// Resist model: `R = sigmoid(steepness · (I − threshold))`, printed where `R > 0.5`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resist {
    /// Sigmoid steepness (ICCAD-2013: 50).
    pub steepness: f32,
    /// Intensity threshold (ICCAD-2013: 0.225).
    pub threshold: f32,
}

impl Resist {
    /// The ICCAD-2013 contest resist.
    pub const ICCAD2013: Self = Self {
        steepness: 50.0,
        threshold: 0.225,
    };
}

/// One process corner: a kernel set (focus or defocus) at a dose.
#[derive(Debug, Clone)]
pub struct Corner {
    /// Name for reports (`"nominal"`, `"max"`, `"min"`, ...).
    pub name: String,
    /// Kernels for this focus condition.
    pub kernels: Arc<KernelSet>,
    /// Dose factor applied to the mask before imaging.
    pub dose: f32,
}

/// Which full-resolution images a caller wants back, per corner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepImages {
    /// Aerial intensity.
    pub aerial: bool,
    /// Resist response.
    pub resist: bool,
    /// Printed pixels (1 where the resist response exceeds 0.5).
    pub printed: bool,
}

/// One clip to simulate at some corners.
#[derive(Debug, Clone, Copy)]
pub struct LithoJob<'a> {
    /// Mask transmission in `[0, 1]`, `n × n` with `n · pixel == period` of every corner's kernels.
    pub mask: &'a Grid<f32>,
    /// Target pattern (0/1), same size as the mask, for L2.
    pub target: Option<&'a Grid<u8>>,
    /// Corners in report order. By convention corner 0 is nominal and, with three
    /// corners, 1 is max and 2 is min (ICCAD-2013), so PVB = print(1) ≠ print(2).
    pub corners: &'a [Corner],
    /// Resist model.
    pub resist: Resist,
    /// Images to return.
    pub keep: KeepImages,
}

/// The rectangle of frame pixels a caller reads: columns `x0..x1`, rows `y0..y1` (row-major
/// indices of the job's `n × n` grids). See [`ImagingBackend::litho_part`] (D193).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePart {
    /// First column read.
    pub x0: usize,
    /// One past the last column read.
    pub x1: usize,
    /// First row read.
    pub y0: usize,
    /// One past the last row read.
    pub y1: usize,
    /// How many corners, from the first, whose aerial image the caller reads (with
    /// `keep.aerial`); the later corners' aerial images are not made (`None`), only their
    /// other kept images. `usize::MAX` for every corner (D228).
    pub aerial_corners: usize,
}

/// Per-corner output of a [`LithoJob`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CornerOutput {
    /// Aerial intensity, when kept.
    pub aerial: Option<Grid<f32>>,
    /// Resist response, when kept.
    pub resist: Option<Grid<f32>>,
    /// Printed pixels, when kept.
    pub printed: Option<Grid<u8>>,
    /// Number of printed pixels (always computed).
    pub printed_pixels: u64,
}

/// Output of a [`LithoJob`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LithoOutput {
    /// One entry per corner, in the job's order.
    pub corners: Vec<CornerOutput>,
    /// Pixels where corner 0's print differs from the target (when a target was given).
    pub l2: Option<u64>,
    /// Pixels where corner 1's print differs from corner 2's (when there are 3+ corners).
    pub pvb: Option<u64>,
}

/// One window of [`ImagingBackend::litho_batch`].
#[derive(Debug, Clone)]
pub struct BatchJob<'a> {
    /// The window.
    pub job: LithoJob<'a>,
    /// The pixels the caller reads, as [`ImagingBackend::litho_part`]'s `part`; `None` for
    /// the whole frame and its counts, as [`ImagingBackend::litho`].
    pub part: Option<FramePart>,
    /// Buffers the images may go into, as [`ImagingBackend::litho_part`]'s `reuse`.
    pub reuse: LithoOutput,
}

/// The one interface both imaging paths implement.
///
/// Implementations must agree: the GPU path equals the CPU path to 1e-4 of the
/// open-frame intensity (max abs) and on ≥ 99.99 % of printed pixels.
pub trait ImagingBackend: Send + Sync {
    /// What this backend is and what it holds now.
    fn info(&self) -> BackendInfo;

    /// Aerial intensity of `dose · mask` under one kernel set, at full resolution.
    fn aerial(
        &self,
        mask: &Grid<f32>,
        kernels: &KernelSet,
        dose: f32,
        cancel: &CancelToken,
    ) -> Result<Grid<f32>, ImagingError>;

    /// A whole multi-corner simulation with resist, print and metrics.
    fn litho(
        &self,
        job: &LithoJob<'_>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<LithoOutput, ImagingError>;

    /// [`Self::litho`] for a caller that reads only the pixels of `part` of each kept image
    /// and none of the whole-frame counts (a whole-layout tile, which counts its own core;
    /// D193). Inside `part` the kept images equal [`Self::litho`]'s bit for bit; outside it
    /// they are unspecified, and so are `l2`, `pvb` and `printed_pixels`. The CPU path
    /// computes only the rows of `part` and skips the counts (`None`, 0); the default (the
    /// GPU path) runs [`Self::litho`]. `reuse` is an earlier output (or the default) whose
    /// images' buffers the engine may write the new images into instead of allocating and
    /// zeroing fresh ones (D194): the CPU path does, for each kept image of the same size.
    fn litho_part(
        &self,
        job: &LithoJob<'_>,
        part: FramePart,
        reuse: LithoOutput,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<LithoOutput, ImagingError> {
        let _ = (part, reuse);
        self.litho(job, cancel, progress)
    }

    /// How many windows of `side × side` pixels [`Self::litho_batch`] gains from taking at
    /// once. The CPU path (the default) answers 1: it spreads one window over its threads
    /// and a batch would only hold more images in memory. The GPU path answers as many as
    /// its batch memory holds (issue 29 item 5).
    fn batch_windows(&self, side: usize) -> usize {
        let _ = side;
        1
    }

    /// [`Self::litho`] (or [`Self::litho_part`], where a window has a `part`) of every
    /// window of `jobs`, in order. Each output equals what that call gives for the window
    /// alone. The default makes those calls one by one; the GPU path sends windows that
    /// share their size and kernels to the device in batches of up to
    /// [`Self::batch_windows`], one submission and one readback each.
    fn litho_batch(
        &self,
        jobs: Vec<BatchJob<'_>>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<LithoOutput>, ImagingError> {
        jobs.into_iter()
            .map(|w| match w.part {
                None => self.litho(&w.job, cancel, progress),
                Some(part) => self.litho_part(&w.job, part, w.reuse, cancel, progress),
            })
            .collect()
    }
}
