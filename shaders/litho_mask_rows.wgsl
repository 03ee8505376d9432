// Pass A: forward FFT of mask rows, two real rows packed as one complex row.
// z = m[2r] + i m[2r+1]; M_a[k] = (Z[k] + conj Z[-k]) / 2, M_b[k] = (Z[k] - conj Z[-k]) / 2i.
// Only the BAND_S field frequencies of each row are kept: row_band[y][j], f = j - S/2.

@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> row_band: array<vec2<f32>>;

@compute @workgroup_size(FFT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row_pairs = GRID_N / 2u;
    let first = workgroup_linear(wid, nwg) * FFT_BATCH;
    if (first >= row_pairs) {
        return;
    }
    for (var q = 0u; q < ELEMS_PER_THREAD; q++) {
        let e = tid + q * FFT_THREADS;
        let pair = first + e / FFT_L;
        let x = e % FFT_L;
        var v = vec2<f32>(0.0, 0.0);
        if (pair < row_pairs) {
            let row = 2u * pair;
            v = vec2<f32>(mask[row * GRID_N + x], mask[(row + 1u) * GRID_N + x]);
        }
        fft_buf[e] = v;
    }
    workgroupBarrier();
    fft_run(tid, false);
    for (var e = tid; e < FFT_BATCH * BAND_S; e += FFT_THREADS) {
        let slot = e / BAND_S;
        let j = e % BAND_S;
        let pair = first + slot;
        if (pair < row_pairs) {
            let k = freq_bin(i32(j) - i32(BAND_S / 2u), GRID_N);
            let kn = (GRID_N - k) % GRID_N;
            let zk = fft_buf[slot * FFT_L + k];
            let zn = conjugate(fft_buf[slot * FFT_L + kn]);
            let even = 0.5 * (zk + zn);
            let d = 0.5 * (zk - zn);
            let odd = vec2<f32>(d.y, -d.x);
            row_band[(2u * pair) * BAND_S + j] = even;
            row_band[(2u * pair + 1u) * BAND_S + j] = odd;
        }
    }
}
