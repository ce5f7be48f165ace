// gemv_int4_qkv_ref: hand-written reference for `gemv_int4_qkv` (DESIGN.md §3.4), gfx906, HIP.
//
// One GPTQ INT4 GEMV over the fused [K, NQ + 2·NKV] weight, one launch, three outputs by column
// range (each a contiguous [BATCH, width] array):
//   qkv[b, n] = Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[b, k]
//   q[b, n] = round_f16(qkv[b, n]),  k[b, n] = round_f16(qkv[b, NQ + n]),  v[b, n] = round_f16(qkv[b, NQ + NKV + n])
//
// GPTQ INT4 (DESIGN.md §2): `qweight` u32 [K/8, N] packed along K (nibble i of word (kw, n) is the
// code of row 8·kw + i, least significant first); `scales` f16 [ceil(K/G), N]; `qzeros` u32
// [ceil(K/G), N/8] packed along N (nibble i of word j is column 8j + i). GPTQ v1 checkpoints store
// z − 1 (WF_ZP_V1=1 adds the 1 back), v2 stores z (WF_ZP_V1=0): the convention is a build define,
// never guessed.
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_qkv.abi.toml:
//   -DWF_K=… -DWF_NQ=… -DWF_NKV=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// N = NQ + 2·NKV below. Launch: ceil(N / 32) workgroups of exactly 256 lanes (4 waves of 64),
// arguments in signature order; qweight and x 16-byte aligned, scales 8-byte aligned.
//
// Everything up to the final store is gemv_int4.hip's kernel (the same work split, dequantisation,
// staging and reduction, repeated here so each file reads on its own); only the store differs:
// the column range picks the output. NQ and NKV are multiples of 8, so a lane's 4 columns never
// straddle two outputs.
//
// Work split. Workgroup w owns the 32 columns [32w, 32w + 32). Lane t is (quad t % 8, slice t / 8):
// it owns the 4 adjacent columns 32w + 4·(t % 8) … + 3 and reads them with one 16-byte load per
// packed K-row (global_load_dwordx4), so the 8 lanes of a slice read 128 contiguous bytes of a
// row (the coalesced pattern of DESIGN.md §2) and a wave reads 8 rows at once. K is cut into
// units of UNIT = 4 packed rows (32 rows of K, a quarter of a 128-row group; a unit never
// straddles two groups); round r gives unit 32r + s to slice s, so at K = 5120 (160 units) every
// slice takes 5 units and the work is even. A unit is one iteration of the hot loop: the group's
// qzeros word and 4 scales (one 8-byte load) and its 4 weight loads are all issued before any is
// used (a scheduling barrier keeps the compiler from sinking each load to its use; the zero
// points come first because they are needed first), then 4 rows × 4 columns × 8 weights = 128
// weights per lane are consumed. No loads are carried across
// iterations: with 54–55 VGPRs (occupancy 4, 16 waves per CU) the other waves of the CU hide the
// latency, and each wave has 76 bytes per lane in flight (≥ 16 KB per CU at every Qwen TP shape,
// 64 workgroups at TP = 8). A lane's part of every offset is a 32-bit byte offset computed once;
// the round's part is uniform (kept scalar with readfirstlane), so each load costs one 32-bit
// add and uses the SGPR base + VGPR offset form, with no 64-bit address arithmetic; the
// activation reads use immediate LDS offsets.
//
// Dequantisation and dot product, exact, two weights per instruction (v_dot2_f32_f16):
//   (w & 0x000F000F) | 0x64006400 = the FP16 pair (1024 + q0, 1024 + q4) (v_and_or_b32);
//     minus (1024 + z, 1024 + z) (v_pk_add_f16) = (q0 − z, q4 − z), exact;
//   (w & 0x00F000F0) | 0x64006400 = (1024 + 16·q1, 1024 + 16·q5), exact (ulp 1 in [1024, 2048));
//     times 1/16 plus (−(64 + z), −(64 + z)) in one v_pk_fma_f16 = (q1 − z, q5 − z): the product
//     64 + q is exact and so is the sum, so the one rounding is exact;
//   the same on w >> 8 gives (q2 − z, q6 − z) and (q3 − z, q7 − z).
// So the 8 weights of a word cost 4 v_and_or_b32, 1 shift, 2 v_pk_add_f16, 2 v_pk_fma_f16 and, per
// batch row, 4 v_dot2_f32_f16: 13 VALU at batch 1, 1.625 per weight; with the unit's overhead
// (zero points, scales, 6 load offsets, the LDS offset) hipcc 5.2's hot loop is 232 VALU for
// 128 weights, 1.81 per weight. Each product (q − z)·x is exact in FP32 and is accumulated in
// FP32 per unit; the group's scale multiplies the unit's sum once (v_fma_mix_f32 reads the FP16
// scale directly): Σ (q − z)·s·x = s · Σ (q − z)·x, equal up to FP32 rounding order. The
// zero-point pairs of the 4 columns are rebuilt per unit from the qzeros word (one bitfield
// extract and two 24-bit multiply-adds per column).
//
// Activations: every lane of a slice needs the same x values, and the dot2 wants them as the
// pairs (x_j, x_{j+4}). The workgroup stages x in LDS already in that order (4 pairs of a packed
// row = 16 bytes, read with one broadcast ds_read_b128 per row and batch row), a phase at a time:
// a phase is RPP rounds (all of K at K = 5120, batch 1; more phases at larger batch), staged
// once behind a workgroup barrier (nothing is in flight then, so __syncthreads costs no loads).
// Each unit's rows are followed by 16 bytes of padding, so the 8 slices of a wave (8 different
// units) read 8 disjoint sets of 4 LDS banks. Activations of rows past K are staged as zeros, so
// a ragged last unit adds exact zeros. A shape whose units do not divide evenly over the slices
// (a K-shard of the fused kernel, odd K) runs its last round outside the hot loop through a
// general path: offsets per lane, loads clamped to valid rows (a unit past the last re-reads the
// last one; its activations are zeros, so it adds exact zeros).
//
// Reduction: each lane holds FP32 sums of its 4 columns over its slice; the 8 slices of a wave
// are added by a butterfly over lanes (xor 8, 16, 32), then the 4 waves' sums meet in LDS (reusing
// the staging buffer behind a barrier) and are added in wave order; one FP16 rounding per output.
// Every order is fixed, so the result does not depend on timing.
//
// Batch > 1: a scheduling barrier between batch rows keeps the compiler from reading every batch
// row's activations at once (70 VGPRs at batch 2, 120 at batch 8; no spills).

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_NQ) || !defined(WF_NKV) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_qkv_ref needs -DWF_K -DWF_NQ -DWF_NKV -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned NQ = WF_NQ;       // columns of q (query + output gate)
constexpr unsigned NKV = WF_NKV;     // columns of k, and of v
constexpr unsigned N = NQ + 2 * NKV; // columns of the fused weight
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                  // lanes per workgroup
constexpr unsigned WAVE = 64;
constexpr unsigned QUAD = 4;                  // columns per lane: one 16-byte load per packed row
constexpr unsigned LPS = 8;                   // lanes per slice
constexpr unsigned COLS = LPS * QUAD;         // columns per workgroup
constexpr unsigned SLICES = WG / LPS;         // K-slices per workgroup
constexpr unsigned WAVES = WG / WAVE;
constexpr unsigned KW = K / 8;                // packed K-rows
constexpr unsigned WPG = GROUP / 8;           // packed K-rows per group
constexpr unsigned UNIT = WPG % 4 == 0 ? 4 : WPG % 2 == 0 ? 2 : 1; // packed rows per unit, within one group
constexpr unsigned NUNIT = (KW + UNIT - 1) / UNIT;
constexpr bool RAGGED = KW % UNIT != 0;       // K ends inside a unit: its last rows are padding
constexpr unsigned NROUND = (NUNIT + SLICES - 1) / SLICES;
constexpr bool GROUP_STEP = (SLICES * UNIT) % WPG == 0; // a round advances a whole number of groups

static_assert(BATCH >= 1 && BATCH <= 8 && BATCH * COLS <= WG, "batch 1..8");
static_assert(K % 8 == 0 && NQ % 8 == 0 && NKV % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");

// The INT4 dequantisation, dot product and activation staging the four gfx906 INT4 references
// share (one copy; it reads the shapes and work split above).
#include "gemv_int4_loop.h"

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_int4_qkv_ref(
    const unsigned* __restrict__ w_qkv_qweight, // u32 [K/8, NQ + 2·NKV]
    const f16* __restrict__ w_qkv_scales,       // f16 [ceil(K/G), NQ + 2·NKV]
    const unsigned* __restrict__ w_qkv_qzeros,  // u32 [ceil(K/G), (NQ + 2·NKV)/8]
    const f16* __restrict__ x,                  // f16 [BATCH, K]
    f16* q,                                     // f16 [BATCH, NQ]
    f16* k,                                     // f16 [BATCH, NKV]
    f16* v)                                     // f16 [BATCH, NKV] (a KV-cache slot may be passed)
{
    __shared__ __attribute__((aligned(16))) unsigned char lds[LDS_BYTES];

    const unsigned quad = threadIdx.x % LPS;
    const unsigned slice = threadIdx.x / LPS;
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

        phase_rounds(lds, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, p, slice, nl, acc);
    }
    last_round(lds, w_qkv_qweight, w_qkv_scales, w_qkv_qzeros, slice, nl, acc);

    // ---- reduction over the slices: butterfly within the wave, then waves in order ----
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) {
            float t = acc[b][c];
#pragma unroll
            for (unsigned m = LPS; m < WAVE; m *= 2) t += __shfl_xor(t, m);
            acc[b][c] = t;
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
        float sum = red[b * COLS + c];
#pragma unroll
        for (unsigned w = 1; w < WAVES; ++w) sum += red[(w * BATCH + b) * COLS + c];
        // the one FP16 rounding of each output (nearest even); the column range picks the output
        if (n < NQ) q[b * NQ + n] = (f16)sum;
        else if (n < NQ + NKV) k[b * NKV + (n - NQ)] = (f16)sum;
        else if (n < N) v[b * NKV + (n - NQ - NKV)] = (f16)sum;
    }
}
