//! One imaging run on the device: uploads, the pass sequence, readbacks.

use super::GpuBackend;
use super::plan::{Capacity, GridPipelines, Slot};
use super::shaders::{GridConsts, MAX_CORNERS, Pass};
use crate::{CancelToken, Grid, ImagingError, KernelSet, Progress, ProgressFn, Resist};

/// One corner as the print pass sees it.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct CornerGpu {
    /// Index of the kernel set (image) in the run.
    pub image: u32,
    /// Dose squared: the image of `dose · M` is `dose² · I(M)`.
    pub dose_sq: f32,
}

/// The `LithoParams` uniform of the shaders.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ParamsGpu {
    images: u32,
    kernels: u32,
    corners: u32,
    pairs: u32,
    has_target: u32,
    steepness: f32,
    threshold: f32,
    pad: u32,
}

/// What to compute in one run.
pub(crate) struct GpuRun<'a> {
    pub mask: &'a Grid<f32>,
    /// Distinct kernel sets; corner `image` indices point into this list.
    pub sets: Vec<&'a KernelSet>,
    pub corners: Vec<CornerGpu>,
    pub resist: Resist,
    pub target: Option<&'a Grid<u8>>,
    /// Read back the full-resolution image of every set (at dose 1).
    pub read_aerial: bool,
    /// Read back the printed bit planes of every corner.
    pub read_printed: bool,
}

/// What came back from the device.
pub(crate) struct RunResult {
    /// `sets × n × n` intensities at dose 1, when asked for.
    pub aerial: Option<Vec<f32>>,
    /// `corners × n² / 32` words, bit `p % 32` of word `p / 32` for pixel `p`, when asked for.
    pub printed_bits: Option<Vec<u32>>,
    /// Printed pixels per corner, then L2 at `MAX_CORNERS`, PVB at `MAX_CORNERS + 1`.
    pub counters: Vec<u32>,
}

/// Index of the L2 counter.
pub(crate) const L2_COUNTER: usize = MAX_CORNERS as usize;
/// Index of the PVB counter.
pub(crate) const PVB_COUNTER: usize = MAX_CORNERS as usize + 1;

fn to_u32(x: usize, what: &str) -> Result<u32, ImagingError> {
    u32::try_from(x).map_err(|_| ImagingError::Invalid(format!("{what} too large: {x}")))
}

/// Packs a 0/1 target into 32-pixel words.
fn pack_bits(target: &Grid<u8>) -> Vec<u32> {
    let mut words = vec![0u32; target.data.len().div_ceil(32)];
    for (p, &v) in target.data.iter().enumerate() {
        if v != 0 {
            words[p / 32] |= 1 << (p % 32);
        }
    }
    words
}

/// Splits a 1D workgroup count over x and y to respect the per-dimension limit.
fn split_groups(groups: u32, max_dim: u32) -> (u32, u32) {
    if groups <= max_dim {
        (groups, 1)
    } else {
        (max_dim, groups.div_ceil(max_dim))
    }
}

fn validate(req: &GpuRun<'_>) -> Result<usize, ImagingError> {
    let mask = req.mask;
    if mask.width != mask.height || mask.data.len() != mask.width * mask.height {
        return Err(ImagingError::Invalid(format!(
            "mask must be square with width*height samples, got {}x{} with {}",
            mask.width,
            mask.height,
            mask.data.len()
        )));
    }
    if req.sets.is_empty() {
        return Err(ImagingError::Invalid("no kernel set".into()));
    }
    let period = req.sets[0].period_nm;
    if req.sets.iter().any(|s| s.period_nm != period) {
        return Err(ImagingError::Invalid(
            "kernel sets of one job must share their period".into(),
        ));
    }
    if req.sets.iter().any(|s| s.count() == 0 || s.size == 0) {
        return Err(ImagingError::Invalid("empty kernel set".into()));
    }
    if req.corners.len() > MAX_CORNERS as usize {
        return Err(ImagingError::Invalid(format!(
            "at most {MAX_CORNERS} corners per GPU job, got {}",
            req.corners.len()
        )));
    }
    if let Some(t) = req.target
        && (t.width != mask.width || t.height != mask.height || t.data.len() != mask.data.len())
    {
        return Err(ImagingError::Invalid(format!(
            "target is {}x{}, mask is {}x{}",
            t.width, t.height, mask.width, mask.height
        )));
    }
    Ok(mask.width)
}

/// Whether two runs can share a batch: the same grid and the same kernel sets, so one
/// plan and one kernel bank serve both.
pub(crate) fn batchable(a: &GpuRun<'_>, b: &GpuRun<'_>) -> bool {
    a.mask.width == b.mask.width
        && a.mask.height == b.mask.height
        && a.sets.len() == b.sets.len()
        && a.sets
            .iter()
            .zip(&b.sets)
            .all(|(x, y)| super::same_set(x, y))
}

impl GpuBackend {
    /// Runs the pass sequence for `req`.
    pub(crate) fn run(
        &self,
        req: &GpuRun<'_>,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<RunResult, ImagingError> {
        let mut results = self.run_batch(std::slice::from_ref(req), cancel, progress)?;
        results
            .pop()
            .ok_or_else(|| ImagingError::Backend("a run returned no result".into()))
    }

    /// Runs the pass sequence for every run of `reqs` (a batch, [`batchable`] with each
    /// other) in one submission with one readback: each run has its own slot of device
    /// buffers (issue 29 item 5).
    pub(crate) fn run_batch(
        &self,
        reqs: &[GpuRun<'_>],
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<RunResult>, ImagingError> {
        let Some(first) = reqs.first() else {
            return Ok(Vec::new());
        };
        let n = validate(first)?;
        for req in &reqs[1..] {
            validate(req)?;
            if !batchable(first, req) {
                return Err(ImagingError::Invalid(
                    "the windows of one GPU batch must share their size and kernel sets".into(),
                ));
            }
        }
        cancel.check()?;
        let side = first.sets.iter().map(|s| s.size).max().unwrap_or(0);
        let grid = super::plan::grid_for(n, side, self.max_elems())?;
        let mut state = self
            .state
            .lock()
            .map_err(|_| ImagingError::Backend("GPU state poisoned by an earlier panic".into()))?;
        let result = self.run_locked(&mut state, reqs, n, grid, cancel, progress);
        // Published outside the lock so `info()` (a worker's heartbeat) never waits for a
        // running job.
        self.device_bytes
            .store(state.bytes(), std::sync::atomic::Ordering::Relaxed);
        result
    }

    /// [`Self::run_batch`] with the device state held.
    fn run_locked(
        &self,
        state: &mut super::DeviceCache,
        reqs: &[GpuRun<'_>],
        n: usize,
        grid: GridConsts,
        cancel: &CancelToken,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<RunResult>, ImagingError> {
        let ctx = &self.ctx;
        let first = &reqs[0];
        let plan = state.plan(ctx, grid)?;
        let bank = state.banks.get(ctx, &first.sets, grid.s)?;
        let plan = &mut state.plans[plan];
        let images = to_u32(first.sets.len(), "kernel sets")?;
        let most_corners = reqs.iter().map(|r| r.corners.len()).max().unwrap_or(0);
        plan.ensure_slots(
            ctx,
            Capacity {
                images,
                kernels: bank.kernels,
                corners: to_u32(most_corners, "corners")?,
            },
            reqs.len(),
        );
        ctx.check()?;
        let plan: &GridPipelines = plan;
        let slots = plan.slots.get(..reqs.len()).ok_or_else(|| {
            ImagingError::Backend(format!(
                "{} slots for {} windows",
                plan.slots.len(),
                reqs.len()
            ))
        })?;

        let mut stages = Vec::new();
        for (req, slot) in reqs.iter().zip(slots) {
            let params = ParamsGpu {
                images,
                kernels: bank.kernels,
                corners: to_u32(req.corners.len(), "corners")?,
                pairs: images.div_ceil(2),
                has_target: u32::from(req.target.is_some()),
                steepness: req.resist.steepness,
                threshold: req.resist.threshold,
                pad: 0,
            };
            ctx.queue
                .write_buffer(&slot.mask, 0, bytemuck::cast_slice(&req.mask.data));
            ctx.queue
                .write_buffer(&slot.params, 0, bytemuck::bytes_of(&params));
            if !req.corners.is_empty() {
                ctx.queue
                    .write_buffer(&slot.corners, 0, bytemuck::cast_slice(&req.corners));
            }
            if let Some(t) = req.target {
                ctx.queue
                    .write_buffer(&slot.target_bits, 0, bytemuck::cast_slice(&pack_bits(t)));
            }
            stages.extend(stage_list(plan, slot, bank, params));
        }

        let slow = self
            .sync_each_pass
            .load(std::sync::atomic::Ordering::Relaxed);
        let total = stages.len() as u64;
        let max_dim = ctx.limits.max_compute_workgroups_per_dimension;
        let mut pending: Option<wgpu::CommandEncoder> = None;
        for (done, stage) in stages.iter().enumerate() {
            cancel.check()?;
            let pipeline = plan.pipeline(stage.pass);
            let layout = pipeline.get_bind_group_layout(0);
            let entries: Vec<wgpu::BindGroupEntry<'_>> = stage
                .bindings
                .iter()
                .map(|&(binding, buffer)| wgpu::BindGroupEntry {
                    binding,
                    resource: buffer.as_entire_binding(),
                })
                .collect();
            let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(stage.pass.name()),
                layout: &layout,
                entries: &entries,
            });
            // On a GPU every pass of every window goes into one command buffer and one
            // submit (the whole sequence takes milliseconds). On a CPU adapter a pass can
            // take long, so each is submitted and waited for, and cancellation takes effect
            // between passes.
            let encoder = pending.get_or_insert_with(|| ctx.encoder("litho"));
            for buffer in &stage.clear {
                encoder.clear_buffer(buffer, 0, None);
            }
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(stage.pass.name()),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                let (x, y) = split_groups(stage.groups, max_dim);
                pass.dispatch_workgroups(x, y, 1);
            }
            if slow && let Some(encoder) = pending.take() {
                ctx.queue.submit([encoder.finish()]);
                ctx.wait()?;
            }
            ctx.check()?;
            progress(Progress {
                done: done as u64 + 1,
                total,
                stage: "gpu_pass",
            });
        }
        cancel.check()?;

        // Every window's outputs are copied out after the last pass and read with one wait.
        let area = (n * n) as u64;
        let mut copies: Vec<(&wgpu::Buffer, u64)> = Vec::new();
        for (req, slot) in reqs.iter().zip(slots) {
            let corners = req.corners.len() as u64;
            if corners > 0 {
                copies.push((&slot.counters, super::plan::COUNTERS * 4));
            }
            if req.read_aerial {
                copies.push((&slot.aerial, u64::from(images) * area * 4));
            }
            if req.read_printed && corners > 0 {
                copies.push((&slot.printed_bits, corners * area / 8));
            }
        }
        let encoder = pending.take().unwrap_or_else(|| ctx.encoder("readback"));
        let mut bytes = ctx.read_after(encoder, &copies)?.into_iter();
        let mut next = |what: &str| {
            bytes
                .next()
                .ok_or_else(|| ImagingError::Backend(format!("{what} not read back")))
        };
        let mut results = Vec::with_capacity(reqs.len());
        for req in reqs {
            let corners = !req.corners.is_empty();
            let counters = if corners {
                bytemuck::pod_collect_to_vec(&next("counters")?)
            } else {
                Vec::new()
            };
            let aerial = if req.read_aerial {
                Some(bytemuck::pod_collect_to_vec(&next("aerial")?))
            } else {
                None
            };
            let printed_bits = if req.read_printed && corners {
                Some(bytemuck::pod_collect_to_vec(&next("printed bits")?))
            } else {
                None
            };
            results.push(RunResult {
                aerial,
                printed_bits,
                counters,
            });
        }
        ctx.check()?;
        Ok(results)
    }
}

/// One dispatch: which pipeline, how many workgroups, which buffers.
struct Stage<'a> {
    pass: Pass,
    groups: u32,
    bindings: Vec<(u32, &'a wgpu::Buffer)>,
    /// Buffers zeroed before the dispatch.
    clear: Vec<&'a wgpu::Buffer>,
}

fn stage_list<'a>(
    plan: &'a GridPipelines,
    slot: &'a Slot,
    bank: &'a super::bank::Bank,
    params: ParamsGpu,
) -> Vec<Stage<'a>> {
    let g = plan.grid;
    let groups = |pass: Pass, count: u32| plan.shape(pass).map_or(count, |s| s.groups(count));
    let pairs = params.pairs;
    let mut stages = vec![
        Stage {
            pass: Pass::MaskRows,
            groups: groups(Pass::MaskRows, g.n / 2),
            bindings: vec![(0, &plan.twiddles_n), (2, &slot.mask), (3, &slot.row_band)],
            clear: vec![],
        },
        Stage {
            pass: Pass::MaskBand,
            groups: groups(Pass::MaskBand, g.s),
            bindings: vec![
                (0, &plan.twiddles_n),
                (2, &slot.row_band),
                (3, &slot.mask_band),
            ],
            clear: vec![],
        },
        Stage {
            pass: Pass::CoarseFields,
            groups: groups(Pass::CoarseFields, params.images * params.kernels * g.s),
            bindings: vec![
                (0, &plan.twiddles_m),
                (1, &slot.params),
                (2, &slot.mask_band),
                (3, &bank.samples),
                (4, &slot.coarse_fields),
            ],
            clear: vec![],
        },
        Stage {
            pass: Pass::CoarseIntensity,
            // One coarse row of one image per workgroup.
            groups: params.images * g.m,
            bindings: vec![
                (0, &plan.twiddles_m),
                (1, &slot.params),
                (2, &slot.coarse_fields),
                (3, &bank.weights),
                (4, &slot.coarse_int),
            ],
            // With an odd number of images the last pair's imaginary half stays zero.
            clear: vec![&slot.coarse_int],
        },
        Stage {
            pass: Pass::CoarseSpectrumRows,
            groups: groups(Pass::CoarseSpectrumRows, pairs * g.m),
            bindings: vec![
                (0, &plan.twiddles_m),
                (1, &slot.params),
                (2, &slot.coarse_int),
                (3, &slot.spec_rows),
            ],
            clear: vec![],
        },
        Stage {
            pass: Pass::CoarseSpectrumCols,
            groups: groups(Pass::CoarseSpectrumCols, pairs * g.b),
            bindings: vec![
                (0, &plan.twiddles_m),
                (1, &slot.params),
                (2, &slot.spec_rows),
                (3, &slot.coarse_spec),
            ],
            clear: vec![],
        },
        Stage {
            pass: Pass::UpsampleCols,
            groups: groups(Pass::UpsampleCols, pairs * g.b),
            bindings: vec![
                (0, &plan.twiddles_n),
                (1, &slot.params),
                (2, &slot.coarse_spec),
                (3, &slot.full_cols),
            ],
            clear: vec![],
        },
        Stage {
            pass: Pass::UpsampleRows,
            groups: groups(Pass::UpsampleRows, pairs * g.n),
            bindings: vec![
                (0, &plan.twiddles_n),
                (1, &slot.params),
                (2, &slot.full_cols),
                (3, &slot.aerial),
            ],
            clear: vec![],
        },
    ];
    if params.corners > 0 {
        stages.push(Stage {
            pass: Pass::Print,
            groups: g.n * g.n / 256,
            bindings: vec![
                (1, &slot.params),
                (2, &slot.aerial),
                (3, &slot.corners),
                (4, &slot.target_bits),
                (5, &slot.printed_bits),
                (6, &slot.counters),
            ],
            clear: vec![&slot.counters],
        });
    }
    stages
}
