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

// ---- LDS: activations of a phase, [unit of the phase][batch row][row of the unit][4 pairs] ----
constexpr unsigned UNIT_X = BATCH * UNIT * 16 + 16;  // bytes per unit, 16 of them padding
constexpr unsigned ROUND_X = SLICES * UNIT_X;        // bytes per round
constexpr unsigned LDS_BYTES = ROUND_X > 12800 ? ROUND_X : 12800;
constexpr unsigned RPP_FIT = LDS_BYTES / ROUND_X;    // rounds per phase
constexpr unsigned RPP = RPP_FIT < NROUND ? RPP_FIT : NROUND;
constexpr unsigned NPHASE = (NROUND + RPP - 1) / RPP;
constexpr unsigned RED_BYTES = WAVES * BATCH * COLS * 4; // the cross-wave sums, after the last phase

static_assert(BATCH >= 1 && BATCH <= 8 && BATCH * COLS <= WG, "batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG % UNIT == 0, "a unit never straddles two groups");
static_assert(RED_BYTES <= LDS_BYTES && RPP >= 1, "LDS layout");
static_assert((unsigned long long)KW * N * 4 < (1ull << 32), "32-bit byte offsets into qweight");

// Stage the activations of phase p: item t is (unit of the phase, batch row, row of the unit), one
// packed row of one batch row: 8 halves x0..x7 read with one 16-byte load, written as the pairs
// (x0, x4), (x1, x5), (x2, x6), (x3, x7). Rows past K (ragged last unit, or a unit past the last)
// are zeros.
static __device__ __forceinline__ void stage_x(unsigned char* lds, const f16* x, unsigned p) {
    constexpr unsigned ITEMS = RPP * SLICES * BATCH * UNIT;
    for (unsigned t = threadIdx.x; t < ITEMS; t += WG) {
        const unsigned i = t % UNIT, b = (t / UNIT) % BATCH, pu = t / (UNIT * BATCH);
        const unsigned kw = (p * RPP * SLICES + pu) * UNIT + i;
        u32x4 d = {0u, 0u, 0u, 0u};
        if (kw < KW) d = *reinterpret_cast<const u32x4*>(x + b * K + kw * 8);
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
                                            float (&acc)[BATCH][QUAD]) {
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
    float part[BATCH][QUAD];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
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
        for (unsigned b = 0; b < BATCH; ++b) {
            if (BATCH > 1) __builtin_amdgcn_sched_barrier(0); // one batch row's activations at a time
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
    for (unsigned b = 0; b < BATCH; ++b)
#pragma unroll
        for (unsigned c = 0; c < QUAD; ++c) acc[b][c] = fmaf(s[c], part[b][c], acc[b][c]);
}

// The fast rounds of phase p for one lane: the hot loop (all rounds of the phase for general
// shapes, where there is no fast path).
static __device__ __forceinline__ void phase_rounds(const unsigned char* lds, const unsigned* __restrict__ w_qweight,
                                                    const f16* __restrict__ w_scales, const unsigned* __restrict__ w_qzeros,
                                                    unsigned p, unsigned slice, unsigned nl, float (&acc)[BATCH][QUAD]) {
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
                                                  unsigned slice, unsigned nl, float (&acc)[BATCH][QUAD]) {
    if (GROUP_STEP && NFAST < NROUND)
        unit<false>(lds, w_qweight, w_scales, w_qzeros, NPHASE - 1, NROUND - 1, slice, nl, 0, 0, 0, acc);
}

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
