//! WGSL sources and the compile-time constants prepended to them.
//!
//! Sizes are baked into each pipeline as `const`s (workgroup arrays and register
//! arrays need constant sizes), so a plan compiles its pipelines once per grid size.

const FFT_COMMON: &str = include_str!("../../../shaders/fft_common.wgsl");
const LITHO_PARAMS: &str = include_str!("../../../shaders/litho_params.wgsl");

/// The imaging passes, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Pass {
    MaskRows,
    MaskBand,
    CoarseFields,
    CoarseIntensity,
    CoarseSpectrumRows,
    CoarseSpectrumCols,
    UpsampleCols,
    UpsampleRows,
    Print,
}

impl Pass {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::MaskRows => "litho_mask_rows",
            Self::MaskBand => "litho_mask_band",
            Self::CoarseFields => "litho_coarse_fields",
            Self::CoarseIntensity => "litho_coarse_intensity",
            Self::CoarseSpectrumRows => "litho_coarse_spectrum_rows",
            Self::CoarseSpectrumCols => "litho_coarse_spectrum_cols",
            Self::UpsampleCols => "litho_upsample_cols",
            Self::UpsampleRows => "litho_upsample_rows",
            Self::Print => "litho_print",
        }
    }

    fn body(self) -> &'static str {
        match self {
            Self::MaskRows => include_str!("../../../shaders/litho_mask_rows.wgsl"),
            Self::MaskBand => include_str!("../../../shaders/litho_mask_band.wgsl"),
            Self::CoarseFields => include_str!("../../../shaders/litho_coarse_fields.wgsl"),
            Self::CoarseIntensity => include_str!("../../../shaders/litho_coarse_intensity.wgsl"),
            Self::CoarseSpectrumRows => {
                include_str!("../../../shaders/litho_coarse_spectrum_rows.wgsl")
            }
            Self::CoarseSpectrumCols => {
                include_str!("../../../shaders/litho_coarse_spectrum_cols.wgsl")
            }
            Self::UpsampleCols => include_str!("../../../shaders/litho_upsample_cols.wgsl"),
            Self::UpsampleRows => include_str!("../../../shaders/litho_upsample_rows.wgsl"),
            Self::Print => include_str!("../../../shaders/litho_print.wgsl"),
        }
    }
}

/// How one transform pass lays out its FFTs over workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FftShape {
    /// Transform length (power of two, >= 4).
    pub len: u32,
    /// Transforms per workgroup.
    pub batch: u32,
    /// Threads per workgroup.
    pub threads: u32,
}

/// Elements one workgroup keeps in shared memory (16 KiB of complex f32): enough
/// for a 2048-point row, and small enough for several workgroups per multiprocessor.
pub(crate) const WORKGROUP_ELEMS: u32 = 2048;
const MAX_THREADS: u32 = 256;

impl FftShape {
    /// `batch` transforms of `len` points per workgroup, capped by `max_elems`.
    pub(crate) fn new(len: u32, batch_cap: u32, max_elems: u32) -> Self {
        let batch = (max_elems.max(len) / len).clamp(1, batch_cap.max(1));
        let threads = (len * batch / 4).min(MAX_THREADS);
        Self {
            len,
            batch,
            threads,
        }
    }

    /// Workgroups needed for `count` transforms.
    pub(crate) fn groups(self, count: u32) -> u32 {
        count.div_ceil(self.batch)
    }

    fn header(self) -> String {
        format!(
            "const FFT_L: u32 = {}u;\nconst FFT_LOG2: u32 = {}u;\nconst FFT_BATCH: u32 = {}u;\nconst FFT_THREADS: u32 = {}u;\n",
            self.len,
            self.len.trailing_zeros(),
            self.batch,
            self.threads
        )
    }
}

/// Grid sizes of one imaging plan, baked into its shaders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GridConsts {
    /// Mask side.
    pub n: u32,
    /// Kernel side (odd).
    pub s: u32,
    /// Coarse grid side.
    pub m: u32,
    /// Intensity band width kept on the coarse grid.
    pub b: u32,
}

/// Most corners the print pass handles in one job.
pub(crate) const MAX_CORNERS: u32 = 8;

fn grid_header(g: GridConsts) -> String {
    format!(
        "const GRID_N: u32 = {}u;\nconst BAND_S: u32 = {}u;\nconst COARSE_M: u32 = {}u;\nconst BAND_B: u32 = {}u;\nconst MAX_CORNERS: u32 = {MAX_CORNERS}u;\n",
        g.n, g.s, g.m, g.b
    )
}

/// Source of an imaging pass; `fft` is `None` only for the print pass.
pub(crate) fn pass_source(pass: Pass, grid: GridConsts, fft: Option<FftShape>) -> String {
    let mut src = grid_header(grid);
    if let Some(shape) = fft {
        src.push_str(&shape.header());
        src.push_str(FFT_COMMON);
    }
    src.push_str(LITHO_PARAMS);
    src.push_str(pass.body());
    src
}

/// Source of the plain batched FFT (used by [`super::GpuBackend::fft_batch`]).
pub(crate) fn fft_batch_source(shape: FftShape, count: u32, inverse: bool) -> String {
    let mut src = shape.header();
    src.push_str(&format!(
        "const FFT_COUNT: u32 = {count}u;\nconst FFT_INVERSE: bool = {inverse};\n"
    ));
    src.push_str(FFT_COMMON);
    src.push_str(include_str!("../../../shaders/fft_batch.wgsl"));
    src
}

/// `exp(-2πi j / len)` for `j < len`, computed in f64 and rounded once.
pub(crate) fn twiddles(len: u32) -> Vec<[f32; 2]> {
    (0..len)
        .map(|j| {
            let angle = -2.0 * std::f64::consts::PI * f64::from(j) / f64::from(len);
            #[allow(clippy::cast_possible_truncation)]
            [angle.cos() as f32, angle.sin() as f32]
        })
        .collect()
}
