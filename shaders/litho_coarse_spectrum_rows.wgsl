// Pass E1: forward FFT of the packed coarse intensity rows (length COARSE_M),
// keeping the BAND_B intensity frequencies: spec_rows[p][yc][jb], fx = jb - B/2.

@group(0) @binding(2) var<storage, read> coarse_int: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> spec_rows: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let count = params.pairs * COARSE_M;
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= count) {
        return;
    }
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        var v = vec2<f32>(0.0, 0.0);
        if (t < count) {
            v = coarse_int[t * COARSE_M + e % FFT_L];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, false);
    for (var e = tid; e < FFT_BATCH * BAND_B; e += FFT_THREADS) {
        let slot = e / BAND_B;
        let jb = e % BAND_B;
        let t = first + slot;
        if (t < count) {
            let k = freq_bin(i32(jb) - i32(BAND_B / 2u), COARSE_M);
            spec_rows[t * BAND_B + jb] = fft_buf[slot * FFT_L + k];
        }
    }
}
