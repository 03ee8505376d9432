// Pass B: forward FFT along y of the BAND_S kept columns, keeping the BAND_S field
// frequencies: mask_band[i][j] = F{mask}[fy = i - S/2][fx = j - S/2] / N^2.
// The 1/N^2 makes the field O(1) and equals the inverse-FFT normalization.

@group(0) @binding(2) var<storage, read> row_band: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> mask_band: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= BAND_S) {
        return;
    }
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let col = first + e / FFT_L;
        let y = e % FFT_L;
        var v = vec2<f32>(0.0, 0.0);
        if (col < BAND_S) {
            v = row_band[y * BAND_S + col];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, false);
    let inv_area = 1.0 / (f32(GRID_N) * f32(GRID_N));
    for (var e = tid; e < FFT_BATCH * BAND_S; e += FFT_THREADS) {
        let slot = e / BAND_S;
        let i = e % BAND_S;
        let col = first + slot;
        if (col < BAND_S) {
            let k = freq_bin(i32(i) - i32(BAND_S / 2u), GRID_N);
            mask_band[i * BAND_S + col] = fft_buf[slot * FFT_L + k] * inv_area;
        }
    }
}
