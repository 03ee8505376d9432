// Pass G: resist, print and metrics, one thread per pixel.
// R = sigmoid(steepness * (dose^2 * I_image - threshold)); printed where R > 0.5.
// Printed pixels are packed 32 to a word (bit x%32 of word x/32, row-major); the
// counters [printed per corner..., L2, PVB] are reduced in workgroup memory first
// so each workgroup issues one global atomic per counter.

const PRINT_THREADS: u32 = 256u;
const WORDS_PER_GROUP: u32 = PRINT_THREADS / 32u;

struct CornerParams {
    image: u32,
    dose_sq: f32,
}

@group(0) @binding(2) var<storage, read> aerial: array<f32>;
@group(0) @binding(3) var<storage, read> corners: array<CornerParams>;
@group(0) @binding(4) var<storage, read> target_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> printed_bits: array<u32>;
@group(0) @binding(6) var<storage, read_write> counters: array<atomic<u32>>;

fn workgroup_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

var<workgroup> group_bits: array<atomic<u32>, WORDS_PER_GROUP * MAX_CORNERS>;
var<workgroup> group_counts: array<atomic<u32>, MAX_CORNERS + 2u>;

@compute @workgroup_size(PRINT_THREADS)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let area = GRID_N * GRID_N;
    let group = workgroup_linear(wid, nwg);
    if (group * PRINT_THREADS >= area) {
        return;
    }
    let corner_count = params.corners;
    if (tid < WORDS_PER_GROUP * MAX_CORNERS) {
        atomicStore(&group_bits[tid], 0u);
    }
    if (tid < MAX_CORNERS + 2u) {
        atomicStore(&group_counts[tid], 0u);
    }
    workgroupBarrier();

    let pixel = group * PRINT_THREADS + tid;
    let bit = 1u << (tid % 32u);
    var print0 = false;
    var print1 = false;
    var print2 = false;
    for (var c = 0u; c < corner_count; c++) {
        let corner = corners[c];
        let intensity = corner.dose_sq * aerial[corner.image * area + pixel];
        let resist = 1.0 / (1.0 + exp(-params.steepness * (intensity - params.threshold)));
        let printed = resist > 0.5;
        if (printed) {
            atomicOr(&group_bits[c * WORDS_PER_GROUP + tid / 32u], bit);
            atomicAdd(&group_counts[c], 1u);
        }
        if (c == 0u) { print0 = printed; }
        if (c == 1u) { print1 = printed; }
        if (c == 2u) { print2 = printed; }
    }
    if (params.has_target == 1u && corner_count >= 1u) {
        let wanted = ((target_bits[pixel / 32u] >> (pixel % 32u)) & 1u) == 1u;
        if (wanted != print0) {
            atomicAdd(&group_counts[MAX_CORNERS], 1u);
        }
    }
    if (corner_count >= 3u && print1 != print2) {
        atomicAdd(&group_counts[MAX_CORNERS + 1u], 1u);
    }
    workgroupBarrier();

    if (tid < WORDS_PER_GROUP * corner_count) {
        let c = tid / WORDS_PER_GROUP;
        let w = tid % WORDS_PER_GROUP;
        printed_bits[c * (area / 32u) + group * WORDS_PER_GROUP + w] = atomicLoad(&group_bits[tid]);
    }
    if (tid < corner_count) {
        let n = atomicLoad(&group_counts[tid]);
        if (n > 0u) {
            atomicAdd(&counters[tid], n);
        }
    }
    if (tid == 0u) {
        let l2 = atomicLoad(&group_counts[MAX_CORNERS]);
        let pvb = atomicLoad(&group_counts[MAX_CORNERS + 1u]);
        if (l2 > 0u) {
            atomicAdd(&counters[MAX_CORNERS], l2);
        }
        if (pvb > 0u) {
            atomicAdd(&counters[MAX_CORNERS + 1u], pvb);
        }
    }
}
