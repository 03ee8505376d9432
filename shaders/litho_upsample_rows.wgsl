// Pass F2: inverse FFT along x (length GRID_N) of every full-grid row. The result of
// pair p is I_{2p} + i I_{2p+1}; the real images go to aerial[d][y][x].

@group(0) @binding(2) var<storage, read> full_cols: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> aerial: array<f32>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let count = params.pairs * GRID_N;
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= count) {
        return;
    }
    let half = i32(BAND_B / 2u);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        let jb = signed_freq(e % FFT_L, GRID_N) + half;
        var v = vec2<f32>(0.0, 0.0);
        if (t < count && jb >= 0 && jb < i32(BAND_B)) {
            let p = t / GRID_N;
            let y = t % GRID_N;
            v = full_cols[(p * BAND_B + u32(jb)) * GRID_N + y];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, true);
    let area = GRID_N * GRID_N;
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        if (t < count) {
            let p = t / GRID_N;
            let pixel = (t % GRID_N) * GRID_N + e % FFT_L;
            let v = fft_buf[e];
            aerial[2u * p * area + pixel] = v.x;
            if (2u * p + 1u < params.images) {
                aerial[(2u * p + 1u) * area + pixel] = v.y;
            }
        }
    }
}
