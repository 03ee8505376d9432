// Pass D: inverse-FFT each coarse row of every kernel's field along x and accumulate
// I = sum_k w_k |field_k|^2 on the coarse grid. One workgroup owns one row of one
// image and holds FFT_BATCH kernels at a time. Output packs two images as one
// complex field: coarse_int[pair][yc][xc] = (I_{2p}, I_{2p+1}), stored as f32 pairs.

const ACC_PER_THREAD: u32 = (COARSE_M + FFT_THREADS - 1u) / FFT_THREADS;

@group(0) @binding(2) var<storage, read> coarse_fields: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> coarse_int: array<f32>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = workgroup_linear(wid, nwg);
    if (row >= params.images * COARSE_M) {
        return;
    }
    let d = row / COARSE_M;
    let yc = row % COARSE_M;
    let kernels = params.kernels;
    let half = i32(BAND_S / 2u);
    var acc: array<f32, ACC_PER_THREAD>;
    for (var k0 = 0u; k0 < kernels; k0 += FFT_BATCH) {
        for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
            let e = tid + q * FFT_THREADS;
            let k = k0 + e / FFT_L;
            let j = signed_freq(e % FFT_L, COARSE_M) + half;
            var v = vec2<f32>(0.0, 0.0);
            if (k < kernels && j >= 0 && j < i32(BAND_S)) {
                v = coarse_fields[((d * kernels + k) * BAND_S + u32(j)) * COARSE_M + yc];
            }
            fft_buf[e] = v;
        }
        workgroupBarrier();
        fft_run(tid, true);
        for (var a = 0u; a < ACC_PER_THREAD; a++) {
            let xc = tid + a * FFT_THREADS;
            if (xc < COARSE_M) {
                for (var b = 0u; b < FFT_BATCH; b++) {
                    let k = k0 + b;
                    if (k < kernels) {
                        let s = fft_buf[b * FFT_L + xc];
                        acc[a] += weights[d * kernels + k] * dot(s, s);
                    }
                }
            }
        }
        workgroupBarrier();
    }
    for (var a = 0u; a < ACC_PER_THREAD; a++) {
        let xc = tid + a * FFT_THREADS;
        if (xc < COARSE_M) {
            coarse_int[(((d / 2u) * COARSE_M + yc) * COARSE_M + xc) * 2u + (d & 1u)] = acc[a];
        }
    }
}
