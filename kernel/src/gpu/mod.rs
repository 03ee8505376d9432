//! The wgpu imaging backend: band-limited SOCS imaging in WGSL compute shaders.
//!
//! The forward model is `I = Σ_k w_k |F⁻¹{F{dose·M} · Φ_k}|²`. Only the `s × s`
//! low frequencies of the mask spectrum reach the image, so the passes are:
//!
//! 1. **mask rows** — FFT of every mask row (two real rows per complex FFT), keeping
//!    the `s` field frequencies of each row;
//! 2. **mask band** — FFT of those `s` columns, keeping `s` frequencies: the band;
//! 3. **coarse fields** — band × every kernel of every set, inverse FFT of the columns
//!    on a coarse grid of `m ≥ 2s − 1` points (128 for 35×35 kernels);
//! 4. **coarse intensity** — inverse FFT of the rows and `Σ w_k |·|²`, two images
//!    (e.g. focus and defocus) packed as one complex field;
//! 5. **coarse spectrum** (rows, then columns) — FFT of the coarse intensity, keeping
//!    its `2s − 1` frequencies;
//! 6. **upsample** (columns, then rows) — inverse FFT of that band zero-padded to the
//!    full grid. This is exact, not an interpolation: the intensity is band-limited;
//! 7. **print** — resist sigmoid, printed bit planes and the L2/PVB/printed counters,
//!    reduced on the device so only counters come back unless images are asked for.
//!
//! Every transform is a shared-memory Stockham FFT (radix 4, plus one radix-2 stage
//! for odd powers of two), batched over rows, columns and kernels. All arithmetic is
//! f32. Plans (pipelines + buffers) are cached per grid size, kernel banks per
//! kernel-set content, so repeated jobs upload only the mask.

mod bank;
mod bench;
mod context;
mod litho;
mod plan;
mod select;
mod shaders;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use num_complex::Complex32;

pub use bench::{GpuBenchReport, gpu_bench};
pub use context::{AdapterPolicy, is_hardware};
pub use select::{BackendPref, SelectedBackend, select_backend};

use self::bank::BankCache;
use self::context::GpuContext;
use self::litho::{CornerGpu, GpuRun, L2_COUNTER, PVB_COUNTER, RunResult, batchable};
use self::plan::GridPipelines;
use self::shaders::{FftShape, GridConsts};
use crate::{
    BackendInfo, BatchJob, CancelToken, CornerOutput, Grid, ImagingBackend, ImagingError,
    KernelSet, LithoJob, LithoOutput, ProgressFn,
};

/// Plans kept at once (distinct grid sizes); older ones are dropped with their buffers.
const PLAN_SLOTS: usize = 2;

/// The most windows one batch holds, whatever the memory allows.
pub const MAX_BATCH_WINDOWS: usize = 16;

/// The default device and readback memory one batch may use (D257): 1 GiB, eleven 1 nm
/// windows of 2,048² pixels or the sixteen of [`MAX_BATCH_WINDOWS`] at 4 nm.
pub const DEFAULT_BATCH_BYTES: u64 = 1 << 30;

/// Bytes one window of `side × side` pixels takes in a batch, for [`GpuBackend::batch_windows`]:
/// on the device its mask (4 per pixel), two kernel sets' images (8), the printed bit
/// planes and the target (0.5); their readback (8.4); rounded up to 24 per pixel for the
/// band-limited intermediates, which grow with the side too.
fn window_bytes(side: usize) -> u64 {
    (side as u64)
        .saturating_mul(side as u64)
        .saturating_mul(24)
        .max(1)
}

/// Device-side caches, behind the backend's lock.
#[derive(Default)]
struct DeviceCache {
    /// Most recently used first.
    plans: Vec<GridPipelines>,
    banks: BankCache,
}

impl DeviceCache {
    /// Index of the plan for `grid`, compiling it when needed.
    fn plan(&mut self, ctx: &GpuContext, grid: GridConsts) -> Result<usize, ImagingError> {
        if let Some(pos) = self.plans.iter().position(|p| p.grid == grid) {
            let plan = self.plans.remove(pos);
            self.plans.insert(0, plan);
        } else {
            self.plans.truncate(PLAN_SLOTS - 1);
            let max_elems = ctx.limits.max_compute_workgroup_storage_size / 8;
            let plan = GridPipelines::new(ctx, grid, max_elems)?;
            self.plans.insert(0, plan);
        }
        Ok(0)
    }

    fn bytes(&self) -> u64 {
        self.plans.iter().map(GridPipelines::bytes).sum::<u64>() + self.banks.bytes()
    }
}

/// The wgpu imaging backend. One instance owns one device; jobs on it run one at a time.
pub struct GpuBackend {
    ctx: GpuContext,
    state: Mutex<DeviceCache>,
    /// Bytes held in device buffers, as of the end of the last run (read without the lock).
    device_bytes: AtomicU64,
    /// Submit and wait pass by pass (cancellation between passes) instead of one submit.
    sync_each_pass: AtomicBool,
    /// The memory one batch of windows may take ([`DEFAULT_BATCH_BYTES`]).
    batch_bytes: AtomicU64,
}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("adapter", &self.ctx.adapter.name)
            .field("device_type", &self.ctx.adapter.device_type)
            .finish_non_exhaustive()
    }
}

impl GpuBackend {
    /// Opens the best adapter there is: a discrete, integrated or virtual GPU when one
    /// exists, else a CPU implementation such as Mesa's lavapipe.
    pub fn new() -> Result<Self, ImagingError> {
        Self::with_policy(AdapterPolicy::Any)
    }

    /// Opens the best adapter `policy` allows.
    pub fn with_policy(policy: AdapterPolicy) -> Result<Self, ImagingError> {
        let ctx = GpuContext::open(policy)?;
        let slow = ctx.adapter.device_type == wgpu::DeviceType::Cpu;
        Ok(Self {
            ctx,
            state: Mutex::new(DeviceCache::default()),
            device_bytes: AtomicU64::new(0),
            sync_each_pass: AtomicBool::new(slow),
            batch_bytes: AtomicU64::new(DEFAULT_BATCH_BYTES),
        })
    }

    /// The adapter's name as the driver reports it (e.g. `"NVIDIA H100"`, `"llvmpipe (…)"`).
    #[must_use]
    pub fn adapter_name(&self) -> &str {
        &self.ctx.adapter.name
    }

    /// The adapter's device type.
    #[must_use]
    pub fn device_type(&self) -> wgpu::DeviceType {
        self.ctx.adapter.device_type
    }

    /// Whether the adapter is a real GPU (not a CPU implementation).
    #[must_use]
    pub fn is_hardware(&self) -> bool {
        is_hardware(self.ctx.adapter.device_type)
    }

    /// Whether jobs submit and wait pass by pass, so a cancellation stops the run
    /// between passes, or encode every pass into one submission (faster on a GPU).
    /// The default is pass by pass on CPU adapters only, where one pass can take seconds.
    pub fn set_sync_each_pass(&self, on: bool) {
        self.sync_each_pass.store(on, Ordering::Relaxed);
    }

    /// Caps the device and readback memory of one batch of windows (default
    /// [`DEFAULT_BATCH_BYTES`]); a batch holds at least one window whatever the cap.
    pub fn set_batch_bytes(&self, bytes: u64) {
        self.batch_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Complex elements one workgroup can hold: the largest mask side this device images.
    fn max_elems(&self) -> u32 {
        self.ctx.limits.max_compute_workgroup_storage_size / 8
    }

    /// Unnormalized FFTs of `data.len() / len` contiguous transforms of `len` points,
    /// in place, on the device (`inverse` uses `e^{+2πi…}`). The imaging passes use the
    /// same routine; this entry point exists to test it against a CPU FFT.
    pub fn fft_batch(
        &self,
        data: &mut [Complex32],
        len: usize,
        inverse: bool,
    ) -> Result<(), ImagingError> {
        if !len.is_power_of_two() || len < 4 || !data.len().is_multiple_of(len) {
            return Err(ImagingError::Invalid(format!(
                "fft_batch needs a power-of-two length >= 4 dividing the data, got {len} for {}",
                data.len()
            )));
        }
        let (Ok(len32), Ok(count)) = (u32::try_from(len), u32::try_from(data.len() / len)) else {
            return Err(ImagingError::Invalid("fft_batch input too large".into()));
        };
        if len32 > self.max_elems() {
            return Err(ImagingError::Invalid(format!(
                "transform length {len} exceeds one workgroup"
            )));
        }
        let ctx = &self.ctx;
        let shape = FftShape::new(
            len32,
            u32::MAX,
            shaders::WORKGROUP_ELEMS.min(self.max_elems()),
        );
        let pipeline = ctx.pipeline(
            "fft_batch",
            &shaders::fft_batch_source(shape, count, inverse),
        )?;
        let twiddles = shaders::twiddles(len32);
        let tw = ctx.storage("fft_twiddles", (twiddles.len() * 8) as u64);
        ctx.queue
            .write_buffer(&tw, 0, bytemuck::cast_slice(&twiddles));
        let buf = ctx.storage("fft_data", (data.len() * 8) as u64);
        ctx.queue.write_buffer(&buf, 0, bytemuck::cast_slice(data));
        let layout = pipeline.get_bind_group_layout(0);
        let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("fft_batch"),
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: tw.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: buf.as_entire_binding(),
                },
            ],
        });
        let mut encoder = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("fft_batch"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("fft_batch"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(shape.groups(count), 1, 1);
        }
        ctx.queue.submit([encoder.finish()]);
        let bytes = ctx.read(&buf, (data.len() * 8) as u64)?;
        data.copy_from_slice(bytemuck::cast_slice(&bytes));
        Ok(())
    }
}

fn sigmoid_resist(intensity: f32, resist: crate::Resist) -> f32 {
    1.0 / (1.0 + (-resist.steepness * (intensity - resist.threshold)).exp())
}

/// Whether two kernel sets are the same, by identity or by content.
fn same_set(a: &KernelSet, b: &KernelSet) -> bool {
    std::ptr::eq(a, b) || (!a.hash.is_empty() && a.hash == b.hash) || a == b
}

/// Index of `set` in `sets`, by identity or by content.
fn set_index(sets: &[&KernelSet], set: &KernelSet) -> Option<usize> {
    sets.iter().position(|&s| same_set(s, set))
}

/// The device run of `job`: its distinct kernel sets and its corners.
fn request<'a>(job: &LithoJob<'a>) -> Result<GpuRun<'a>, ImagingError> {
    if job.corners.is_empty() {
        return Err(ImagingError::Invalid(
            "a litho job needs at least one corner".into(),
        ));
    }
    let mut sets: Vec<&KernelSet> = Vec::new();
    let mut corners = Vec::with_capacity(job.corners.len());
    for corner in job.corners {
        let image = match set_index(&sets, &corner.kernels) {
            Some(i) => i,
            None => {
                sets.push(&corner.kernels);
                sets.len() - 1
            }
        };
        corners.push(CornerGpu {
            image: u32::try_from(image).unwrap_or(u32::MAX),
            dose_sq: corner.dose * corner.dose,
        });
    }
    let keep = job.keep;
    Ok(GpuRun {
        mask: job.mask,
        sets,
        corners,
        resist: job.resist,
        target: job.target,
        read_aerial: keep.aerial || keep.resist,
        read_printed: keep.printed,
    })
}

/// What `job` returns, from what its run read back.
fn output_of(job: &LithoJob<'_>, req: &GpuRun<'_>, out: RunResult) -> LithoOutput {
    let keep = job.keep;
    let (w, h) = (job.mask.width, job.mask.height);
    let area = w * h;
    fn grid<T>(width: usize, height: usize, data: Vec<T>) -> Grid<T> {
        Grid {
            width,
            height,
            data,
        }
    }
    let mut outputs = Vec::with_capacity(req.corners.len());
    for (c, corner) in req.corners.iter().enumerate() {
        let mut o = CornerOutput {
            printed_pixels: u64::from(out.counters[c]),
            ..CornerOutput::default()
        };
        if let Some(all) = &out.aerial {
            let image = corner.image as usize;
            let aerial: Vec<f32> = all[image * area..(image + 1) * area]
                .iter()
                .map(|&v| corner.dose_sq * v)
                .collect();
            if keep.resist {
                o.resist = Some(grid(
                    w,
                    h,
                    aerial
                        .iter()
                        .map(|&v| sigmoid_resist(v, job.resist))
                        .collect(),
                ));
            }
            if keep.aerial {
                o.aerial = Some(grid(w, h, aerial));
            }
        }
        if let Some(bits) = &out.printed_bits {
            let words = &bits[c * area / 32..(c + 1) * area / 32];
            o.printed = Some(grid(
                w,
                h,
                (0..area)
                    .map(|p| u8::from(words[p / 32] >> (p % 32) & 1 == 1))
                    .collect(),
            ));
        }
        outputs.push(o);
    }
    LithoOutput {
        corners: outputs,
        l2: job.target.map(|_| u64::from(out.counters[L2_COUNTER])),
        pvb: (job.corners.len() >= 3).then(|| u64::from(out.counters[PVB_COUNTER])),
    }
}

impl ImagingBackend for GpuBackend {
    fn info(&self) -> BackendInfo {
        // Never takes the state lock: a heartbeat must not wait for a running job.
        let device_bytes = self.device_bytes.load(Ordering::Relaxed);
        let a = &self.ctx.adapter;
        BackendInfo {
            kind: "gpu".into(),
            adapter: format!("{} ({:?}, {:?})", a.name, a.backend, a.device_type),
            device_bytes,
        }
    }

    fn aerial(
        &self,
        mask: &Grid<f32>,
        kernels: &KernelSet,
        dose: f32,
        cancel: &CancelToken,
    ) -> Result<Grid<f32>, ImagingError> {
        let req = GpuRun {
            mask,
            sets: vec![kernels],
            corners: Vec::new(),
            resist: crate::Resist::ICCAD2013,
            target: None,
            read_aerial: true,
            read_printed: false,
        };
        let out = self.run(&req, cancel, &|_| {})?;
        let mut data = out
            .aerial
            .ok_or_else(|| ImagingError::Backend("aerial image not read back".into()))?;
        let dose_sq = dose * dose;
        if dose_sq != 1.0 {
            data.iter_mut().for_each(|v| *v *= dose_sq);
        }
        Ok(Grid {
            width: mask.width,
            height: mask.height,
            data,
        })
    }

    fn litho(
        &self,
        job: &LithoJob<'_>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<LithoOutput, ImagingError> {
        let req = request(job)?;
        let out = self.run(&req, cancel, progress)?;
        Ok(output_of(job, &req, out))
    }

    fn batch_windows(&self, side: usize) -> usize {
        let fits = self.batch_bytes.load(Ordering::Relaxed) / window_bytes(side);
        usize::try_from(fits)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_BATCH_WINDOWS)
    }

    fn litho_batch(
        &self,
        jobs: Vec<BatchJob<'_>>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<LithoOutput>, ImagingError> {
        // The device computes whole frames and their counts, so a part changes nothing here.
        let reqs = jobs
            .iter()
            .map(|w| request(&w.job))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outputs = Vec::with_capacity(jobs.len());
        let mut start = 0;
        while start < reqs.len() {
            let most = self.batch_windows(reqs[start].mask.width);
            let mut end = start + 1;
            while end < reqs.len() && end - start < most && batchable(&reqs[start], &reqs[end]) {
                end += 1;
            }
            let results = self.run_batch(&reqs[start..end], cancel, progress)?;
            for ((w, req), out) in jobs[start..end].iter().zip(&reqs[start..end]).zip(results) {
                outputs.push(output_of(&w.job, req, out));
            }
            start = end;
        }
        Ok(outputs)
    }
}
