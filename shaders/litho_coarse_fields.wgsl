// Pass C: multiply the mask band by every kernel of every set and inverse-FFT
// each band column along y on the coarse grid (length COARSE_M).
// Transform t = (d * K + k) * S + j; coarse_fields[t][yc].

@group(0) @binding(2) var<storage, read> mask_band: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> kernel_bank: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> coarse_fields: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let count = params.images * params.kernels * BAND_S;
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= count) {
        return;
    }
    let half = i32(BAND_S / 2u);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        let yc = e % FFT_L;
        var v = vec2<f32>(0.0, 0.0);
        let i = signed_freq(yc, COARSE_M) + half;
        if (t < count && i >= 0 && i < i32(BAND_S)) {
            let set_kernel = t / BAND_S;
            let j = t % BAND_S;
            let ui = u32(i);
            v = cmul(mask_band[ui * BAND_S + j], kernel_bank[(set_kernel * BAND_S + ui) * BAND_S + j]);
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, true);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let t = first + e / FFT_L;
        if (t < count) {
            coarse_fields[t * COARSE_M + e % FFT_L] = fft_buf[e];
        }
    }
}
