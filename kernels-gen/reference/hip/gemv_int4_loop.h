// gemv_int4_loop.h: the INT4 hot loop the gfx906 INT4 references share —
// gemv_int4_dual_silu, gemv_int4_qkv and the K-shard GEMV of gemv_int4_allreduce_rmsnorm (one copy,
// included by each; gemv_int4.hip keeps its own, batch-tiled to 64; DESIGN.md §2 and the header comment of gemv_int4.hip explain it).
//
// Included after the includer's shape and work-split constants, which it reads:
//   shapes      K, N, BATCH, GROUP, ZP_ADD
//   work split  WG, WAVE, QUAD, LPS, COLS, SLICES, WAVES, KW, WPG, UNIT, NUNIT, RAGGED, NROUND,
//               GROUP_STEP
// It defines the FP16 types and bit helpers, the LDS layout of a phase's activations (UNIT_X …
// RED_BYTES), stage_x (a phase's activations into LDS), unit (one unit of the hot loop: loads,
// exact dequantisation, dot products, the group's scale), phase_rounds (the hot loop of a phase)
// and last_round (the general path of the round past the fast ones).
//
// The harness and the tests splice it into the source where it is included (hipcc, hiprtc and
// the cache see one translation unit); hipcc by hand and the host emulation find it beside the
// source.

#ifndef WF_GEMV_INT4_LOOP_H
#define WF_GEMV_INT4_LOOP_H

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

// ---- LDS: activations of a phase, [unit of the phase][batch row][row of the unit][4 pairs] ----
constexpr unsigned UNIT_X = BATCH * UNIT * 16 + 16;  // bytes per unit, 16 of them padding
constexpr unsigned ROUND_X = SLICES * UNIT_X;        // bytes per round
constexpr unsigned LDS_BYTES = ROUND_X > 12800 ? ROUND_X : 12800;
constexpr unsigned RPP_FIT = LDS_BYTES / ROUND_X;    // rounds per phase
constexpr unsigned RPP = RPP_FIT < NROUND ? RPP_FIT : NROUND;
constexpr unsigned NPHASE = (NROUND + RPP - 1) / RPP;
constexpr unsigned RED_BYTES = WAVES * BATCH * COLS * 4; // the cross-wave sums, after the last phase

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

#endif // WF_GEMV_INT4_LOOP_H
