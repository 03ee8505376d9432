// Pass F1: inverse FFT along y (length GRID_N) of each kept intensity column, the
// band zero-padded to the full grid: full_cols[p][jb][y].

@group(0) @binding(2) var<storage, read> coarse_spec: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> full_cols: array<vec2<f32>>;

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
    let half = i32(BAND_B / 2u);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        let ib = signed_freq(e % FFT_L, GRID_N) + half;
        var v = vec2<f32>(0.0, 0.0);
        if (t < count && ib >= 0 && ib < i32(BAND_B)) {
            let p = t / BAND_B;
            let jb = t % BAND_B;
            v = coarse_spec[(p * BAND_B + u32(ib)) * BAND_B + jb];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, true);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        if (t < count) {
            full_cols[t * GRID_N + e % FFT_L] = fft_buf[e];
        }
    }
}
