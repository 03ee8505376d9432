//! Per-size imaging plans: the grid sizes, compiled pipelines and device buffers.
//!
//! A plan is built once per `(mask side, kernel side)` and reused by every later job
//! of that size; the buffers whose size depends on the job (number of kernel sets,
//! kernels per set, corners) grow on demand and are then reused too.

use super::context::GpuContext;
use super::shaders::{self, FftShape, GridConsts, Pass, WORKGROUP_ELEMS};
use crate::ImagingError;

/// Smallest power of two `>= x`.
fn pow2_at_least(x: u32) -> u32 {
    x.next_power_of_two()
}

/// Chooses the coarse grid for a mask of side `n` and kernels of side `s`.
///
/// The field of one kernel has `s` frequencies per axis, so its intensity has
/// `2s - 1`: a coarse grid of `m >= 2s - 1` samples holds the intensity without
/// aliasing and the upsampling back to `n` is exact. When `n` itself is smaller,
/// the coarse grid is the full grid (the same samples the full-size computation gives).
pub(crate) fn grid_for(n: usize, s: usize, max_elems: u32) -> Result<GridConsts, ImagingError> {
    let invalid = |m: String| Err(ImagingError::Invalid(m));
    if s.is_multiple_of(2) {
        return invalid(format!("kernel side {s} must be odd"));
    }
    if !n.is_power_of_two() || n < 16 {
        return invalid(format!(
            "the GPU backend needs a power-of-two mask side >= 16, got {n}"
        ));
    }
    if s > n {
        return invalid(format!("kernel side {s} exceeds the mask side {n}"));
    }
    let (Ok(n32), Ok(s32)) = (u32::try_from(n), u32::try_from(s)) else {
        return invalid(format!("mask side {n} too large"));
    };
    if n32 > max_elems {
        return invalid(format!(
            "mask side {n} exceeds what one workgroup can transform on this adapter ({max_elems})"
        ));
    }
    let band = 2 * s32 - 1;
    let m = pow2_at_least(band).max(8).min(n32);
    let b = if m >= band { band } else { m };
    Ok(GridConsts {
        n: n32,
        s: s32,
        m,
        b,
    })
}

/// Job-dependent buffer capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Capacity {
    /// Distinct kernel sets (images).
    pub images: u32,
    /// Kernels per set.
    pub kernels: u32,
    /// Corners.
    pub corners: u32,
}

impl Capacity {
    fn covers(self, need: Capacity) -> bool {
        self.images >= need.images && self.kernels >= need.kernels && self.corners >= need.corners
    }

    fn max(self, other: Capacity) -> Capacity {
        Capacity {
            images: self.images.max(other.images),
            kernels: self.kernels.max(other.kernels),
            corners: self.corners.max(other.corners),
        }
    }
}

/// The buffers of one window of a batch: its mask, its intermediate images and its
/// outputs. A plan holds one slot per window of the largest batch it ran (issue 29 item 5);
/// the sizes that depend on the job (kernel sets, kernels, corners) are the same for every
/// slot of a plan and grow on demand.
pub(crate) struct Slot {
    pub cap: Capacity,
    pub params: wgpu::Buffer,
    pub mask: wgpu::Buffer,
    pub row_band: wgpu::Buffer,
    pub mask_band: wgpu::Buffer,
    pub target_bits: wgpu::Buffer,
    pub counters: wgpu::Buffer,
    pub coarse_fields: wgpu::Buffer,
    pub coarse_int: wgpu::Buffer,
    pub spec_rows: wgpu::Buffer,
    pub coarse_spec: wgpu::Buffer,
    pub full_cols: wgpu::Buffer,
    pub aerial: wgpu::Buffer,
    pub corners: wgpu::Buffer,
    pub printed_bits: wgpu::Buffer,
}

const COMPLEX: u64 = 8;
const REAL: u64 = 4;

impl Slot {
    fn new(ctx: &GpuContext, g: GridConsts, cap: Capacity) -> Self {
        let (n, s, m, b) = (
            u64::from(g.n),
            u64::from(g.s),
            u64::from(g.m),
            u64::from(g.b),
        );
        let images = u64::from(cap.images);
        let pairs = images.div_ceil(2);
        let kernels = u64::from(cap.kernels);
        let corners = u64::from(cap.corners.max(1));
        Self {
            cap,
            params: ctx.uniform("litho_params", PARAMS_BYTES),
            mask: ctx.storage("mask", n * n * REAL),
            row_band: ctx.storage("row_band", n * s * COMPLEX),
            mask_band: ctx.storage("mask_band", s * s * COMPLEX),
            target_bits: ctx.storage("target_bits", n * n / 8),
            counters: ctx.storage("counters", COUNTERS * 4),
            coarse_fields: ctx.storage("coarse_fields", images * kernels * s * m * COMPLEX),
            coarse_int: ctx.storage("coarse_int", pairs * m * m * COMPLEX),
            spec_rows: ctx.storage("spec_rows", pairs * m * b * COMPLEX),
            coarse_spec: ctx.storage("coarse_spec", pairs * b * b * COMPLEX),
            full_cols: ctx.storage("full_cols", pairs * b * n * COMPLEX),
            aerial: ctx.storage("aerial", images * n * n * REAL),
            corners: ctx.storage("corners", corners * 8),
            printed_bits: ctx.storage("printed_bits", corners * n * n / 8),
        }
    }

    /// Bytes held in this slot's device buffers.
    pub(crate) fn bytes(&self) -> u64 {
        [
            &self.params,
            &self.mask,
            &self.row_band,
            &self.mask_band,
            &self.target_bits,
            &self.counters,
            &self.coarse_fields,
            &self.coarse_int,
            &self.spec_rows,
            &self.coarse_spec,
            &self.full_cols,
            &self.aerial,
            &self.corners,
            &self.printed_bits,
        ]
        .iter()
        .map(|b| b.size())
        .sum()
    }
}

/// FFT layout of each transform pass.
pub(crate) fn pass_shape(pass: Pass, g: GridConsts, max_elems: u32) -> Option<FftShape> {
    let elems = WORKGROUP_ELEMS.min(max_elems);
    match pass {
        Pass::MaskRows | Pass::UpsampleRows => Some(FftShape::new(g.n, u32::MAX, elems)),
        // Only S (or P*B) columns: keep workgroups small so they spread over the device.
        Pass::MaskBand => Some(FftShape::new(g.n, 2, elems)),
        Pass::UpsampleCols => Some(FftShape::new(g.n, 2, elems)),
        Pass::CoarseFields | Pass::CoarseSpectrumRows | Pass::CoarseSpectrumCols => {
            Some(FftShape::new(g.m, u32::MAX, elems))
        }
        // Kernels per iteration: 8 divides the usual 24 exactly.
        Pass::CoarseIntensity => Some(FftShape::new(g.m, 8, elems)),
        Pass::Print => None,
    }
}

/// All passes, in execution order.
pub(crate) const PASSES: [Pass; 9] = [
    Pass::MaskRows,
    Pass::MaskBand,
    Pass::CoarseFields,
    Pass::CoarseIntensity,
    Pass::CoarseSpectrumRows,
    Pass::CoarseSpectrumCols,
    Pass::UpsampleCols,
    Pass::UpsampleRows,
    Pass::Print,
];

/// Pipelines and buffers for one grid size.
pub(crate) struct GridPipelines {
    pub grid: GridConsts,
    pub shapes: [Option<FftShape>; 9],
    pub pipelines: Vec<wgpu::ComputePipeline>,
    pub twiddles_n: wgpu::Buffer,
    pub twiddles_m: wgpu::Buffer,
    /// One per window of the largest batch run so far, all of one capacity.
    pub slots: Vec<Slot>,
}

/// Size of the `LithoParams` uniform.
pub(crate) const PARAMS_BYTES: u64 = 32;
/// Counters: printed pixels per corner, then L2, then PVB.
pub(crate) const COUNTERS: u64 = shaders::MAX_CORNERS as u64 + 2;

impl GridPipelines {
    pub(crate) fn new(
        ctx: &GpuContext,
        grid: GridConsts,
        max_elems: u32,
    ) -> Result<Self, ImagingError> {
        let shapes = PASSES.map(|p| pass_shape(p, grid, max_elems));
        let pipelines = PASSES
            .iter()
            .zip(shapes)
            .map(|(&pass, shape)| {
                ctx.pipeline(pass.name(), &shaders::pass_source(pass, grid, shape))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let upload = |label: &str, data: &[[f32; 2]]| {
            let buf = ctx.storage(label, (data.len() as u64) * COMPLEX);
            ctx.queue.write_buffer(&buf, 0, bytemuck::cast_slice(data));
            buf
        };
        Ok(Self {
            grid,
            shapes,
            pipelines,
            twiddles_n: upload("twiddles_n", &shaders::twiddles(grid.n)),
            twiddles_m: upload("twiddles_m", &shaders::twiddles(grid.m)),
            slots: Vec::new(),
        })
    }

    /// Makes at least `count` slots whose capacity covers `need`.
    pub(crate) fn ensure_slots(&mut self, ctx: &GpuContext, need: Capacity, count: usize) {
        let cap = match self.slots.first() {
            Some(s) if s.cap.covers(need) => s.cap,
            Some(s) => {
                // Drop the old buffers before allocating the larger ones.
                let cap = s.cap.max(need);
                self.slots.clear();
                cap
            }
            None => need,
        };
        while self.slots.len() < count {
            self.slots.push(Slot::new(ctx, self.grid, cap));
        }
    }

    pub(crate) fn pipeline(&self, pass: Pass) -> &wgpu::ComputePipeline {
        &self.pipelines[pass as usize]
    }

    pub(crate) fn shape(&self, pass: Pass) -> Option<FftShape> {
        self.shapes[pass as usize]
    }

    /// Bytes held in device buffers.
    pub(crate) fn bytes(&self) -> u64 {
        self.twiddles_n.size()
            + self.twiddles_m.size()
            + self.slots.iter().map(Slot::bytes).sum::<u64>()
    }
}
