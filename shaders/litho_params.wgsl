// Per-job parameters shared by the imaging passes. The grid sizes are compile-time
// constants prepended by the host:
//   GRID_N   mask side (power of two)
//   BAND_S   kernel side (odd): field frequencies -S/2..S/2
//   COARSE_M coarse grid side (power of two, >= 2S-1 unless it equals GRID_N)
//   BAND_B   intensity band width kept on the coarse grid (2S-1, or COARSE_M)
struct LithoParams {
    // Distinct kernel sets (images) in this job.
    images: u32,
    // Kernels per set (sets with fewer kernels are padded with zero weights).
    kernels: u32,
    // Process corners to print.
    corners: u32,
    // Image pairs: ceil(images / 2); two real images travel as one complex field.
    pairs: u32,
    // 1 when a target pattern was uploaded (for L2).
    has_target: u32,
    // Resist sigmoid steepness and threshold.
    steepness: f32,
    threshold: f32,
    _pad: u32,
}

@group(0) @binding(1) var<uniform> params: LithoParams;
