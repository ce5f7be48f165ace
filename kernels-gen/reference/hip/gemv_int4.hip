// gemv_int4_ref: hand-written reference for `gemv_int4` (DESIGN.md §3.2), gfx906, HIP.
//
//   y[b, n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[b, k] )   b < BATCH, n < N
//
// GPTQ INT4 (DESIGN.md §2): `qweight` u32 [K/8, N] packed along K (nibble i of word (kw, n) is the
// code of row 8·kw + i, least significant first); `scales` f16 [ceil(K/G), N]; `qzeros` u32
// [ceil(K/G), N/8] packed along N (nibble i of word j is column 8j + i). GPTQ v1 checkpoints store
// z − 1 (WF_ZP_V1=1 adds the 1 back), v2 stores z (WF_ZP_V1=0): the convention is a build define,
// never guessed.
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: ceil(N / 32) workgroups of exactly 256 lanes (4 waves of 64), arguments in signature
// order; qweight and x 16-byte aligned, scales 8-byte aligned.
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
// iterations: with 54 VGPRs (occupancy 4, 16 waves per CU) the other waves of the CU hide the
// latency, and each wave has 76 bytes per lane in flight (≥ 16 KB per CU at every Qwen TP shape,
// 68 workgroups at TP = 8). A lane's part of every offset is a 32-bit byte offset computed once;
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
//
// Batch > 8 (up to 64): the rows go in tiles of TILE = 8, one after the other, each the batch-8
// kernel above over the whole of K — its own accumulators, its rows' activations staged in its
// phases, its own reduction and stores — so the registers stay those of batch 8 (a lane holding
// 64 rows' sums would need 256+ VGPRs). The weights are read once per tile (NTILE times in all;
// the ABI's [model] weight_passes). A last tile past the batch stages zeros for its missing rows
// and does not store them.

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_ref needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

typedef _Float16 f16;
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
typedef unsigned u32x4 __attribute__((ext_vector_type(4)));
typedef unsigned u32x2 __attribute__((ext_vector_type(2)));

static __device__ __forceinline__ f16x2 as_f16x2(unsigned bits) { return __builtin_bit_cast(f16x2, bits); }

// (x & m) | c in one v_and_or_b32. A VOP3 instruction takes no literal and one scalar operand on
// gfx906, so the compiler left alone emits v_and_b32 + v_or_b32 with literals; here the mask is
// the scalar operand and c lives in a VGPR (loaded once).
static __device__ __forceinline__ unsigned and_or(unsigned x, unsigned m, unsigned c) {
#if defined(__HIP_DEVICE_COMPILE__)
    unsigned d;
    asm("v_and_or_b32 %0, %1, %2, %3" : "=v"(d) : "v"(x), "s"(m), "v"(c));
    return d;
#else
    return (x & m) | c;
#endif
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output columns
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned TILE = BATCH < 8 ? BATCH : 8;       // batch rows per pass (see "Batch > 8")
constexpr unsigned NTILE = (BATCH + TILE - 1) / TILE;  // passes over the weights
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

// ---- LDS: activations of a phase, [unit of the phase][batch row][row of the unit][4 pairs] ----
constexpr unsigned UNIT_X = TILE * UNIT * 16 + 16;   // bytes per unit, 16 of them padding
constexpr unsigned ROUND_X = SLICES * UNIT_X;        // bytes per round
constexpr unsigned LDS_BYTES = ROUND_X > 12800 ? ROUND_X : 12800;
constexpr unsigned RPP_FIT = LDS_BYTES / ROUND_X;    // rounds per phase
constexpr unsigned RPP = RPP_FIT < NROUND ? RPP_FIT : NROUND;
constexpr unsigned NPHASE = (NROUND + RPP - 1) / RPP;
constexpr unsigned RED_BYTES = WAVES * TILE * COLS * 4; // the cross-wave sums, after the last phase

static_assert(BATCH >= 1 && BATCH <= 64 && TILE * COLS <= WG, "batch 1..64");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG % UNIT == 0, "a unit never straddles two groups");
static_assert(RED_BYTES <= LDS_BYTES && RPP >= 1, "LDS layout");
static_assert((unsigned long long)KW * N * 4 < (1ull << 32), "32-bit byte offsets into qweight");

// Stage the activations of phase p: item t is (unit of the phase, batch row, row of the unit), one
// packed row of one batch row: 8 halves x0..x7 read with one 16-byte load, written as the pairs
// (x0, x4), (x1, x5), (x2, x6), (x3, x7). Rows past K (ragged last unit, or a unit past the last)
// are zeros, and so are the rows of tile `tb` past the batch.
static __device__ __forceinline__ void stage_x(unsigned char* lds, const f16* x, unsigned p, unsigned tb) {
    constexpr unsigned ITEMS = RPP * SLICES * TILE * UNIT;
    for (unsigned t = threadIdx.x; t < ITEMS; t += WG) {
        const unsigned i = t % UNIT, b = (t / UNIT) % TILE, pu = t / (UNIT * TILE);
        const unsigned kw = (p * RPP * SLICES + pu) * UNIT + i;
        const unsigned row = tb * TILE + b;
        u32x4 d = {0u, 0u, 0u, 0u};
        if (kw < KW && row < BATCH) d = *reinterpret_cast<const u32x4*>(x + row * K + kw * 8);
        u32x4 e;
        e.x = (d.x & 0xFFFFu) | (d.z << 16);         // (x0, x4)
        e.y = (d.x >> 16) | (d.z & 0xFFFF0000u);     // (x1, x5)
        e.z = (d.y & 0xFFFFu) | (d.w << 16);         // (x2, x6)
        e.w = (d.y >> 16) | (d.w & 0xFFFF0000u);     // (x3, x7)
        *reinterpret_cast<u32x4*>(lds + pu * UNIT_X + (b * UNIT + i) * 16) = e;
    }
}

// Rounds whose units all lie inside K, in whole groups per round: the hot loop's fast path.
// The round (at most one) past them holds the ragged last unit or units past the last, and takes
// the general path.
constexpr unsigned NFAST = GROUP_STEP ? (RAGGED ? NUNIT - 1 : NUNIT) / SLICES : 0;

// One unit of the hot loop: unit u = r·SLICES + slice of round r (in phase p) for one lane (the
// column quad at `nl`) of one weight, accumulated into acc. FAST: the unit lies inside K and the
// round starts on a group boundary, so every offset is the lane's fixed part (q_off, s_off,
// z_off) plus a uniform part. Otherwise (general shapes; at most the last round at the Qwen
// shapes' TP splits) the offsets are computed per lane, and loads past K are clamped to valid
// addresses: rows past K re-read the last row, a unit past the last re-reads the last unit. Their
// activations are staged as zeros, so they add exact zeros ((q − z)·0 with q − z finite).
template <bool FAST>
static __device__ __forceinline__ void unit(const unsigned char* lds, const unsigned* __restrict__ w_qweight,
                                            const f16* __restrict__ w_scales, const unsigned* __restrict__ w_qzeros,
                                            unsigned p, unsigned r, unsigned slice, unsigned nl,
                                            unsigned q_off, unsigned s_off, unsigned z_off,
                                            float (&acc)[TILE][QUAD]) {
    const f16x2 sixteenth = {(f16)0.0625f, (f16)0.0625f};
    const unsigned magic = 0x64006400u; // (1024, 1024) in FP16
    const unsigned zshift = 4 * (nl % 8); // 0 or 16: the lane's 4 zero points in the qzeros word

    // ---- loads of the unit: all issued before any is used, the zero point first (it is
    // needed first) ----
    const unsigned u = r * SLICES + slice;
    u32x4 q[UNIT];
    u32x2 sv;
    unsigned zw;
    if (FAST) {
        // the kernel argument (scalar) + a 32-bit byte offset: the round's part uniform, the
        // lane's part fixed, one 32-bit add per load. readfirstlane keeps the round's part
        // scalar; without it the compiler makes every address a 64-bit vector induction
        // variable (two VALU per load).
        constexpr unsigned GPR = GROUP_STEP ? SLICES * UNIT / WPG : 0; // groups per round
        const unsigned rz = __builtin_amdgcn_readfirstlane(r * (GPR * (N / 8) * 4));
        const unsigned rs = __builtin_amdgcn_readfirstlane(r * (GPR * N * 2));
        const unsigned rq = __builtin_amdgcn_readfirstlane(r * (SLICES * UNIT * N * 4));
        zw = *reinterpret_cast<const unsigned*>(reinterpret_cast<const char*>(w_qzeros) + (rz + z_off));
        sv = *reinterpret_cast<const u32x2*>(reinterpret_cast<const char*>(w_scales) + (rs + s_off));
#pragma unroll
        for (unsigned i = 0; i < UNIT; ++i)
            q[i] = *reinterpret_cast<const u32x4*>(reinterpret_cast<const char*>(w_qweight) + (rq + i * N * 4 + q_off));
    } else {
        const unsigned uu = u < NUNIT ? u : NUNIT - 1;
        const unsigned g = uu * UNIT / WPG;
        zw = *reinterpret_cast<const unsigned*>(reinterpret_cast<const char*>(w_qzeros) + (g * (N / 8) + nl / 8) * 4);
        sv = *reinterpret_cast<const u32x2*>(reinterpret_cast<const char*>(w_scales) + (g * N + nl) * 2);
#pragma unroll
        for (unsigned i = 0; i < UNIT; ++i) {
            const unsigned kw = uu * UNIT + i < KW ? uu * UNIT + i : KW - 1;
            q[i] = *reinterpret_cast<const u32x4*>(reinterpret_cast<const char*>(w_qweight) + (kw * N + nl) * 4);
        }
    }

    // Keep every load of the unit above this point: left alone, the scheduler sinks each load
    // to its use to save registers, and the wave then has one or two in flight.
    __builtin_amdgcn_sched_barrier(0);

    // ---- zero points of the lane's 4 columns, as FP16 pairs ----
    unsigned zlo[QUAD], zhi[QUAD];
    const unsigned zs = zw >> zshift;
#pragma unroll
    for (unsigned c = 0; c < QUAD; ++c) {
        const unsigned z = ((zs >> (4 * c)) & 0xFu) + ZP_ADD;  // 0 … 16
        zlo[c] = (0x6400u + z) * 0x00010001u;        // (1024 + z, 1024 + z)
        zhi[c] = (0xD400u + 16u * z) * 0x00010001u;  // (−(64 + z), −(64 + z))
    }

    // ---- 4 rows × 4 columns × 8 weights, FP32 sums of the unit ----
    float part[TILE][QUAD];
#pragma unroll
    for (unsigned b = 0; b < TILE; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) part[b][c] = 0.0f;
    const unsigned char* xu = lds + (r - p * RPP) * ROUND_X + slice * UNIT_X;
#pragma unroll
    for (unsigned i = 0; i < UNIT; ++i) {
        const unsigned w4[QUAD] = {q[i].x, q[i].y, q[i].z, q[i].w};
        f16x2 d[QUAD][4]; // (q_j − z, q_{j+4} − z), j = 0..3, per column
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) {
            const unsigned w = w4[c], w8 = w >> 8;
            d[c][0] = as_f16x2(and_or(w, 0x000F000Fu, magic)) - as_f16x2(zlo[c]);
            d[c][1] = __ocml_fma_2f16(as_f16x2(and_or(w, 0x00F000F0u, magic)), sixteenth, as_f16x2(zhi[c]));
            d[c][2] = as_f16x2(and_or(w8, 0x000F000Fu, magic)) - as_f16x2(zlo[c]);
            d[c][3] = __ocml_fma_2f16(as_f16x2(and_or(w8, 0x00F000F0u, magic)), sixteenth, as_f16x2(zhi[c]));
        }
#pragma unroll
        for (unsigned b = 0; b < TILE; ++b) {
            if (TILE > 1) __builtin_amdgcn_sched_barrier(0); // one batch row's activations at a time
            // (x0, x4), (x1, x5), (x2, x6), (x3, x7): one broadcast LDS read
            const u32x4 xp = *reinterpret_cast<const u32x4*>(xu + (b * UNIT + i) * 16);
            const unsigned xv[4] = {xp.x, xp.y, xp.z, xp.w};
#pragma unroll
            for (unsigned j = 0; j < 4; ++j)
#pragma unroll
                for (unsigned c = 0; c < QUAD; ++c)
                    part[b][c] = __builtin_amdgcn_fdot2(d[c][j], as_f16x2(xv[j]), part[b][c], false);
        }
    }

    // ---- the group's scale, once per unit and column ----
    const f16x2 s01 = as_f16x2(sv.x), s23 = as_f16x2(sv.y);
    const float s[QUAD] = {(float)s01.x, (float)s01.y, (float)s23.x, (float)s23.y};
#pragma unroll
    for (unsigned b = 0; b < TILE; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) acc[b][c] = fmaf(s[c], part[b][c], acc[b][c]);
}

// The fast rounds of phase p for one lane: the hot loop (all rounds of the phase for general
// shapes, where there is no fast path).
static __device__ __forceinline__ void phase_rounds(const unsigned char* lds, const unsigned* __restrict__ w_qweight,
                                                    const f16* __restrict__ w_scales, const unsigned* __restrict__ w_qzeros,
                                                    unsigned p, unsigned slice, unsigned nl, float (&acc)[TILE][QUAD]) {
    // The lane's fixed 32-bit byte offsets (round 0's unit of this slice).
    const unsigned q_off = (slice * UNIT * N + nl) * 4;
    const unsigned s_off = ((slice * UNIT) / WPG * N + nl) * 2;
    const unsigned z_off = ((slice * UNIT) / WPG * (N / 8) + nl / 8) * 4;
    const unsigned r_begin = p * RPP, r_end = (p + 1) * RPP < NROUND ? (p + 1) * RPP : NROUND;
    if (GROUP_STEP) {
        const unsigned f_end = r_end < NFAST ? r_end : NFAST;
#pragma nounroll
        for (unsigned r = r_begin; r < f_end; ++r)
            unit<true>(lds, w_qweight, w_scales, w_qzeros, p, r, slice, nl, q_off, s_off, z_off, acc);
    } else {
#pragma nounroll
        for (unsigned r = r_begin; r < r_end; ++r)
            unit<false>(lds, w_qweight, w_scales, w_qzeros, p, r, slice, nl, q_off, s_off, z_off, acc);
    }
}

// After the last phase (its activations still in LDS): the round past the fast ones, if any,
// through the general path, outside the hot loop.
static __device__ __forceinline__ void last_round(const unsigned char* lds, const unsigned* __restrict__ w_qweight,
                                                  const f16* __restrict__ w_scales, const unsigned* __restrict__ w_qzeros,
                                                  unsigned slice, unsigned nl, float (&acc)[TILE][QUAD]) {
    if (GROUP_STEP && NFAST < NROUND)
        unit<false>(lds, w_qweight, w_scales, w_qzeros, NPHASE - 1, NROUND - 1, slice, nl, 0, 0, 0, acc);
}

// One tile of batch rows (`tb`: rows tb·TILE …): the whole kernel for its rows — accumulators,
// phases, the last round, the reduction and the stores.
static __device__ __forceinline__ void tile_pass(unsigned char* lds, const unsigned* __restrict__ w_qweight,
                                                 const f16* __restrict__ w_scales, const unsigned* __restrict__ w_qzeros,
                                                 const f16* __restrict__ x, f16* __restrict__ y, unsigned tb,
                                                 unsigned slice, unsigned quad, unsigned nl) {
    float acc[TILE][QUAD];
#pragma unroll
    for (unsigned b = 0; b < TILE; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) acc[b][c] = 0.0f;

    for (unsigned p = 0; p < NPHASE; ++p) {
        if (p > 0) {
            // §5.8: barrier in uniform control flow: every wave has finished reading the previous
            // phase's activations before they are overwritten.
            __syncthreads();
        }
        stage_x(lds, x, p, tb);
        // §5.8: barrier in uniform control flow: the phase's activations are in LDS for all waves.
        __syncthreads();

        phase_rounds(lds, w_qweight, w_scales, w_qzeros, p, slice, nl, acc);
    }
    last_round(lds, w_qweight, w_scales, w_qzeros, slice, nl, acc);

    // ---- reduction over the slices: butterfly within the wave, then waves in order ----
#pragma unroll
    for (unsigned b = 0; b < TILE; ++b)
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
    float* red = reinterpret_cast<float*>(lds); // [WAVES][TILE][COLS]
    const unsigned wave = threadIdx.x / WAVE;
    if (threadIdx.x % WAVE < LPS) {
#pragma unroll
        for (unsigned b = 0; b < TILE; ++b)
#pragma unroll
            for (unsigned c = 0; c < QUAD; ++c) red[(wave * TILE + b) * COLS + quad * QUAD + c] = acc[b][c];
    }
    // §5.8: barrier in uniform control flow: all waves' sums are in LDS.
    __syncthreads();
    if (threadIdx.x < TILE * COLS) {
        const unsigned b = threadIdx.x / COLS, c = threadIdx.x % COLS, n = blockIdx.x * COLS + c;
        const unsigned row = tb * TILE + b;
        float v = red[b * COLS + c];
#pragma unroll
        for (unsigned w = 1; w < WAVES; ++w) v += red[(w * TILE + b) * COLS + c];
        // the one FP16 rounding of the output (nearest even); rows past the batch are not stored
        if (n < N && row < BATCH) y[row * N + n] = (f16)v;
    }
}

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_int4_ref(
    const unsigned* __restrict__ w_qweight, // u32 [K/8, N]
    const f16* __restrict__ w_scales,       // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_qzeros,  // u32 [ceil(K/G), N/8]
    const f16* __restrict__ x,              // f16 [BATCH, K]
    f16* __restrict__ y)                    // f16 [BATCH, N]
{
    __shared__ __attribute__((aligned(16))) unsigned char lds[LDS_BYTES];

    const unsigned quad = threadIdx.x % LPS;
    const unsigned slice = threadIdx.x / LPS;
    const unsigned n0 = blockIdx.x * COLS + quad * QUAD;
    // A lane past N (the tail tile) computes on the last quad and stores nothing: the tail is
    // masked at the store (§5.8: no early return), and the loop has no lane-divergent branches.
    const unsigned nl = n0 < N ? n0 : N - QUAD;

    for (unsigned tb = 0; tb < NTILE; ++tb) {
        if (tb > 0) {
            // §5.8: barrier in uniform control flow: every wave has read the last tile's
            // cross-wave sums before this tile's activations overwrite them.
            __syncthreads();
        }
        tile_pass(lds, w_qweight, w_scales, w_qzeros, x, y, tb, slice, quad, nl);
    }
}
