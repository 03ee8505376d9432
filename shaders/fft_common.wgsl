// Shared-memory Stockham FFT used by every transform pass.
//
// The host prepends the sizes as constants:
//   FFT_L       transform length (a power of two, >= 4)
//   FFT_LOG2    log2(FFT_L)
//   FFT_BATCH   transforms held by one workgroup at a time
//   FFT_THREADS workgroup size (divides FFT_L * FFT_BATCH / 4)
//
// Each stage is radix 4 (a radix-2 stage finishes odd powers of two). The
// Stockham order sorts itself, so no bit reversal is needed; one workgroup
// buffer suffices because every thread reads its inputs into registers before
// a barrier and only then writes its outputs. Twiddles come from a table
// fft_twiddles[j] = exp(-2*pi*i*j / FFT_L) computed in f64 by the host: a table is
// both faster and more accurate than f32 sin/cos on the GPU. Transforms are
// unnormalized in both directions; the passes apply their own scale factors.

const FFT_SIZE: u32 = FFT_L * FFT_BATCH;
const FFT_QUARTER: u32 = FFT_L / 4u;
const FFT_HALF: u32 = FFT_L / 2u;
const R4_PER_THREAD: u32 = FFT_SIZE / 4u / FFT_THREADS;
const R2_PER_THREAD: u32 = FFT_SIZE / 2u / FFT_THREADS;
const ELEMS_PER_THREAD: u32 = FFT_SIZE / FFT_THREADS;

@group(0) @binding(0) var<storage, read> fft_twiddles: array<vec2<f32>>;

var<workgroup> fft_buf: array<vec2<f32>, FFT_SIZE>;

fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn conjugate(a: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x, -a.y);
}

// Signed frequency of bin `index` in a transform of length `len` (DC at 0).
fn signed_freq(index: u32, len: u32) -> i32 {
    return select(i32(index), i32(index) - i32(len), index >= len / 2u);
}

// Bin of signed frequency `freq` in a transform of length `len`.
fn freq_bin(freq: i32, len: u32) -> u32 {
    return u32((freq + i32(len)) % i32(len));
}

fn twiddle(index: u32, inverse: bool) -> vec2<f32> {
    let w = fft_twiddles[index];
    return select(w, conjugate(w), inverse);
}

// Linear workgroup index of a dispatch that may be split over x and y.
fn workgroup_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn fft_radix4_stage(tid: u32, p: u32, inverse: bool) {
    var outs: array<vec2<f32>, R4_PER_THREAD * 4u>;
    var dst: array<u32, R4_PER_THREAD>;
    let tw_stride = FFT_L / (4u * p);
    for (var b = 0u; b < R4_PER_THREAD; b++) {
        let g = tid + b * FFT_THREADS;
        let base = (g / FFT_QUARTER) * FFT_L;
        let i = g % FFT_QUARTER;
        let k = i & (p - 1u);
        let x0 = fft_buf[base + i];
        let x1 = cmul(fft_buf[base + i + FFT_QUARTER], twiddle(k * tw_stride, inverse));
        let x2 = cmul(fft_buf[base + i + 2u * FFT_QUARTER], twiddle(2u * k * tw_stride, inverse));
        let x3 = cmul(fft_buf[base + i + 3u * FFT_QUARTER], twiddle(3u * k * tw_stride, inverse));
        let t0 = x0 + x2;
        let t1 = x0 - x2;
        let t2 = x1 + x3;
        let d = x1 - x3;
        // -i*d forward, +i*d inverse.
        let t3 = select(vec2<f32>(d.y, -d.x), vec2<f32>(-d.y, d.x), inverse);
        outs[4u * b] = t0 + t2;
        outs[4u * b + 1u] = t1 + t3;
        outs[4u * b + 2u] = t0 - t2;
        outs[4u * b + 3u] = t1 - t3;
        dst[b] = base + ((i - k) << 2u) + k;
    }
    workgroupBarrier();
    for (var b = 0u; b < R4_PER_THREAD; b++) {
        let j = dst[b];
        fft_buf[j] = outs[4u * b];
        fft_buf[j + p] = outs[4u * b + 1u];
        fft_buf[j + 2u * p] = outs[4u * b + 2u];
        fft_buf[j + 3u * p] = outs[4u * b + 3u];
    }
    workgroupBarrier();
}

fn fft_radix2_stage(tid: u32, p: u32, inverse: bool) {
    var outs: array<vec2<f32>, R2_PER_THREAD * 2u>;
    var dst: array<u32, R2_PER_THREAD>;
    let tw_stride = FFT_L / (2u * p);
    for (var b = 0u; b < R2_PER_THREAD; b++) {
        let g = tid + b * FFT_THREADS;
        let base = (g / FFT_HALF) * FFT_L;
        let i = g % FFT_HALF;
        let k = i & (p - 1u);
        let x0 = fft_buf[base + i];
        let x1 = cmul(fft_buf[base + i + FFT_HALF], twiddle(k * tw_stride, inverse));
        outs[2u * b] = x0 + x1;
        outs[2u * b + 1u] = x0 - x1;
        dst[b] = base + ((i - k) << 1u) + k;
    }
    workgroupBarrier();
    for (var b = 0u; b < R2_PER_THREAD; b++) {
        let j = dst[b];
        fft_buf[j] = outs[2u * b];
        fft_buf[j + p] = outs[2u * b + 1u];
    }
    workgroupBarrier();
}

// Transforms every FFT_L-long segment of fft_buf in place. The caller must have
// filled fft_buf and passed a barrier; the result is visible to all threads on return.
fn fft_run(tid: u32, inverse: bool) {
    var p = 1u;
    for (var s = 0u; s < FFT_LOG2 / 2u; s++) {
        fft_radix4_stage(tid, p, inverse);
        p = p * 4u;
    }
    if ((FFT_LOG2 & 1u) == 1u) {
        fft_radix2_stage(tid, p, inverse);
    }
}
