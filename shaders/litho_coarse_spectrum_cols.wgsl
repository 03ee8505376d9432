// Pass E2: forward FFT along y of the kept columns (length COARSE_M), keeping the
// BAND_B frequencies and dividing by M^2: coarse_spec[p][ib][jb] are the Fourier
// coefficients of the band-limited intensity, exact because M >= 2S-1.

@group(0) @binding(2) var<storage, read> spec_rows: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> coarse_spec: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let count = params.pairs * BAND_B;
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= count) {
        return;
    }
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        var v = vec2<f32>(0.0, 0.0);
        if (t < count) {
            let p = t / BAND_B;
            let jb = t % BAND_B;
            v = spec_rows[(p * COARSE_M + e % FFT_L) * BAND_B + jb];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, false);
    let inv_area = 1.0 / (f32(COARSE_M) * f32(COARSE_M));
    for (var e = tid; e < FFT_BATCH * BAND_B; e += FFT_THREADS) {
        let slot = e / BAND_B;
        let ib = e % BAND_B;
        let t = first + slot;
        if (t < count) {
            let p = t / BAND_B;
            let jb = t % BAND_B;
            let k = freq_bin(i32(ib) - i32(BAND_B / 2u), COARSE_M);
            coarse_spec[(p * BAND_B + ib) * BAND_B + jb] = fft_buf[slot * FFT_L + k] * inv_area;
        }
    }
}
