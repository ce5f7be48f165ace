// gemv_int4_dual_silu_ref: hand-written reference for `gemv_int4_dual_silu` (DESIGN.md §3.3),
// gfx906, HIP.
//
//   g[b, n] = Σ_k Wg[k, n] · x[b, k],   u[b, n] = Σ_k Wu[k, n] · x[b, k]      (GPTQ INT4, FP32 sums)
//   y[b, n] = round_f16( silu(g[b, n]) · u[b, n] ),   silu(g) = g / (1 + e^−g)
//
// Both GEMVs read each activation from global memory once per workgroup, and the output is
// rounded once. GPTQ format and zero-point convention as in gemv_int4.hip: `qweight` u32 [K/8, N]
// packed along K, `scales` f16 [ceil(K/G), N], `qzeros` u32 [ceil(K/G), N/8] packed along N, one
// set per weight; WF_ZP_V1=1 adds 1 to the stored zero points (GPTQ v1), WF_ZP_V1=0 does not.
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_dual_silu.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: ceil(N / 32) workgroups of exactly 256 lanes (4 waves of 64), arguments in signature
// order; qweights and x 16-byte aligned, scales 8-byte aligned.
//
// Work split: no split-K, so no cross-workgroup communication. Workgroup w owns the 32 columns
// [32w, 32w + 32) of both weights: waves 0–1 compute g, waves 2–3 compute u (the weight is
// uniform per wave, so choosing its pointers costs no branch), and both halves read the same
// activations from LDS. Each half is gemv_int4.hip's kernel with 16 K-slices instead of 32: lane
// t is (weight t / 128, quad t % 8, slice (t % 128) / 8), owns 4 adjacent columns of its weight
// and reads them with one 16-byte load per packed K-row (8 lanes of a slice read 128 contiguous
// bytes of a row). K is cut into units of UNIT = 4 packed rows (never straddling two groups);
// round r gives unit 16r + s to slice s of both halves, so at K = 5120 (160 units) every slice
// takes 10 units. A unit is one iteration of the hot loop: the group's qzeros word and 4 scales
// (8 bytes) and 4 weight loads, all issued before any is used (a scheduling barrier keeps the
// compiler from sinking them), then 128 weights per lane. With 53 VGPRs (occupancy 4) the other
// waves of the CU hide the latency; 76 bytes per lane in flight per wave (≥ 16 KB per CU at
// every Qwen TP shape, 68 workgroups at TP = 8). Offsets are 32-bit: the lane's part fixed, the
// round's part uniform (readfirstlane keeps it scalar), one 32-bit add per load; the wave's
// weight pointers are made scalar once, before the loop (uniform_global).
//
// The split-K parameters of the signature (`splitk_partials`, `tile_counters`, `epoch`) are kept
// so the kernel binds exactly as before and as the runtime's conventions expect, but this design
// does not use them: no scratch is read or written, no counter is touched (DESIGN.md §5 has
// nothing to uphold here).
//
// Dequantisation and dot product, exact, two weights per instruction (as in gemv_int4.hip):
//   (w & 0x000F000F) | 0x64006400 = (1024 + q0, 1024 + q4), minus (1024 + z, 1024 + z)
//     (v_pk_add_f16) = (q0 − z, q4 − z);
//   (w & 0x00F000F0) | 0x64006400 = (1024 + 16·q1, 1024 + 16·q5), times 1/16 plus
//     (−(64 + z), −(64 + z)) in one v_pk_fma_f16 = (q1 − z, q5 − z) (exact product and sum);
//   the same on w >> 8 for (q2, q6) and (q3, q7); then v_dot2_f32_f16 with (x_j, x_{j+4}).
// 13 VALU per word at batch 1; hipcc 5.2's hot loop is 232 VALU per 128 weights (1.81 per
// weight) including the unit's zero points, scales and offsets. Products are exact, sums FP32;
// the group's scale multiplies each unit's sum once (v_fma_mix_f32): Σ (q − z)·s·x = s·Σ (q − z)·x,
// equal up to FP32 rounding order.
//
// Activations: staged in LDS once per phase (all of K at K = 5120, batch 1) as the pairs
// (x_j, x_{j+4}), read with one broadcast ds_read_b128 per packed row and batch row; 16 bytes of
// padding per unit keep the 8 slices of a wave on disjoint LDS banks; rows past K are zeros.
//
// Finish: each lane's FP32 sums of its 4 columns are added over the 8 slices of its wave by a
// butterfly (xor 8, 16, 32), the 4 waves' sums meet in LDS, g = wave 0 + wave 1 and
// u = wave 2 + wave 3 (fixed order, so the result does not depend on timing), then
// y = round_f16(silu(g) · u), one rounding.
//
// General shapes (units not dividing evenly over the slices, ragged K, odd groups) take
// gemv_int4.hip's general path for their last round. Batch > 1: a scheduling barrier between
// batch rows keeps the compiler from reading every batch row's activations at once (no spills at
// batch 8).

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_dual_silu_ref needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output columns (of gate, of up, and of y)
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                  // lanes per workgroup
constexpr unsigned WAVE = 64;
constexpr unsigned QUAD = 4;                  // columns per lane: one 16-byte load per packed row
constexpr unsigned LPS = 8;                   // lanes per slice
constexpr unsigned COLS = LPS * QUAD;         // columns per workgroup
constexpr unsigned WEIGHTS = 2;               // gate (waves 0–1) and up (waves 2–3)
constexpr unsigned HALF = WG / WEIGHTS;       // lanes per weight
constexpr unsigned SLICES = HALF / LPS;       // K-slices per weight
constexpr unsigned WAVES = WG / WAVE;
constexpr unsigned KW = K / 8;                // packed K-rows
constexpr unsigned WPG = GROUP / 8;           // packed K-rows per group
constexpr unsigned UNIT = WPG % 4 == 0 ? 4 : WPG % 2 == 0 ? 2 : 1; // packed rows per unit, within one group
constexpr unsigned NUNIT = (KW + UNIT - 1) / UNIT;
constexpr bool RAGGED = KW % UNIT != 0;       // K ends inside a unit: its last rows are padding
constexpr unsigned NROUND = (NUNIT + SLICES - 1) / SLICES;
constexpr bool GROUP_STEP = (SLICES * UNIT) % WPG == 0; // a round advances a whole number of groups

static_assert(BATCH >= 1 && BATCH <= 8 && BATCH * COLS <= WG, "batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");

// The INT4 dequantisation, dot product and activation staging the four gfx906 INT4 references
// share (one copy; it reads the shapes and work split above).
#include "gemv_int4_loop.h"

// A pointer that is the same in every lane (a kernel argument chosen by a wave-uniform weight),
// kept in scalar registers and known to point to global memory: readfirstlane of both halves,
// then the generic pointer of a global (address space 1) one, so loads through it are
// global_load with a scalar base.
template <class T> static __device__ __forceinline__ const T* uniform_global(const T* p) {
#if defined(__HIP_DEVICE_COMPILE__)
    const unsigned long long v = (unsigned long long)p;
    const unsigned lo = __builtin_amdgcn_readfirstlane((unsigned)v), hi = __builtin_amdgcn_readfirstlane((unsigned)(v >> 32));
    return (const T*)(const __attribute__((address_space(1))) T*)(((unsigned long long)hi << 32) | lo);
#else
    return p;
#endif
}

static __device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_int4_dual_silu_ref(
    const unsigned* __restrict__ w_gate_qweight, // u32 [K/8, N]
    const f16* __restrict__ w_gate_scales,       // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_gate_qzeros,  // u32 [ceil(K/G), N/8]
    const unsigned* __restrict__ w_up_qweight,   // u32 [K/8, N]
    const f16* __restrict__ w_up_scales,         // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_up_qzeros,    // u32 [ceil(K/G), N/8]
    const f16* __restrict__ x,                   // f16 [BATCH, K]
    f16* __restrict__ y,                         // f16 [BATCH, N]
    float* splitk_partials,                      // unused (see the header)
    unsigned* tile_counters,                     // unused (see the header)
    const unsigned epoch)                        // unused (see the header)
{
    __shared__ __attribute__((aligned(16))) unsigned char lds[LDS_BYTES];

    (void)splitk_partials;
    (void)tile_counters;
    (void)epoch;
    // This wave's weight: 0 = gate, 1 = up (uniform per wave; readfirstlane tells the compiler).
    const unsigned weight = __builtin_amdgcn_readfirstlane(threadIdx.x / HALF);
    const unsigned quad = threadIdx.x % LPS;
    const unsigned slice = threadIdx.x % HALF / LPS;
    // The wave's weight, its pointers made scalar once here (left to itself the compiler selects
    // them in VGPRs and repeats 6 v_readfirstlane_b32 in every iteration of the hot loop).
    const unsigned* qwp = uniform_global(weight ? w_up_qweight : w_gate_qweight);
    const f16* scp = uniform_global(weight ? w_up_scales : w_gate_scales);
    const unsigned* qzp = uniform_global(weight ? w_up_qzeros : w_gate_qzeros);
    const unsigned n0 = blockIdx.x * COLS + quad * QUAD;
    // A lane past N (the tail tile) computes on the last quad and stores nothing: the tail is
    // masked at the store (§5.8: no early return), and the loop has no lane-divergent branches.
    const unsigned nl = n0 < N ? n0 : N - QUAD;

    float acc[BATCH][QUAD];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) acc[b][c] = 0.0f;

    for (unsigned p = 0; p < NPHASE; ++p) {
        if (p > 0) {
            // §5.8: barrier in uniform control flow: every wave has finished reading the previous
            // phase's activations before they are overwritten.
            __syncthreads();
        }
        stage_x(lds, x, p);
        // §5.8: barrier in uniform control flow: the phase's activations are in LDS for all waves.
        __syncthreads();

        phase_rounds(lds, qwp, scp, qzp, p, slice, nl, acc);
    }
    last_round(lds, qwp, scp, qzp, slice, nl, acc);

    // ---- reduction over the slices: butterfly within the wave, then waves in order ----
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) {
            float v = acc[b][c];
#pragma unroll
            for (unsigned m = LPS; m < WAVE; m *= 2) v += __shfl_xor(v, m);
            acc[b][c] = v;
        }
    // §5.8: barrier in uniform control flow: every wave has finished reading the activations
    // before the cross-wave sums overwrite them.
    __syncthreads();
    float* red = reinterpret_cast<float*>(lds); // [WAVES][BATCH][COLS]
    const unsigned wave = threadIdx.x / WAVE;
    if (threadIdx.x % WAVE < LPS) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b)
#pragma unroll
            for (unsigned c = 0; c < QUAD; ++c) red[(wave * BATCH + b) * COLS + quad * QUAD + c] = acc[b][c];
    }
    // §5.8: barrier in uniform control flow: all waves' sums are in LDS.
    __syncthreads();
    if (threadIdx.x < BATCH * COLS) {
        const unsigned b = threadIdx.x / COLS, c = threadIdx.x % COLS, n = blockIdx.x * COLS + c;
        // gate: waves 0 + 1, up: waves 2 + 3, then y = silu(g)·u rounded once (nearest even)
        const float g = red[(0 * BATCH + b) * COLS + c] + red[(1 * BATCH + b) * COLS + c];
        const float u = red[(2 * BATCH + b) * COLS + c] + red[(3 * BATCH + b) * COLS + c];
        if (n < N) y[b * N + n] = (f16)(silu(g) * u);
    }
}
