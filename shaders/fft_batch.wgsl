// A plain batched FFT of FFT_COUNT contiguous transforms, in place. Used to test the
// shared FFT routine against a CPU FFT; FFT_INVERSE selects the direction.

@group(0) @binding(2) var<storage, read_write> data: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= FFT_COUNT) {
        return;
    }
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        var v = vec2<f32>(0.0, 0.0);
        if (first + e / FFT_L < FFT_COUNT) {
            v = data[first * FFT_L + e];
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, FFT_INVERSE);
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        if (first + e / FFT_L < FFT_COUNT) {
            data[first * FFT_L + e] = fft_buf[e];
        }
    }
}
