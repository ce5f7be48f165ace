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
// Shapes are compile-time defines, listed in the [build] table of gemv_int4.tp<N>.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: ceil(N / 64) workgroups of exactly 256 lanes (4 waves of 64), arguments in signature order.
//
// Work split. Workgroup w owns the 64 columns [64w, 64w + 64). Lane l of a wave reads column
// 64w + l, so a wave reads 64 adjacent words (256 contiguous bytes) of one packed K-row: the
// coalesced pattern of DESIGN.md §2. The 4 waves are 4 K-slices. K is walked in rounds: in round
// r, wave s takes chunk 4r + s of 16 packed rows (a chunk is one 128-row group at G = 128) and
// loads the chunk's scale and zero point once. Each round also issues the next round's 16 weight
// loads before the current chunk is consumed (two register sets, used alternately), so a lane
// keeps up to 32 loads in flight: with about one wave per SIMD there is no other wave to hide
// the latency. Each lane accumulates its column in FP32; the 4 slices meet in LDS and are added
// in slice order (deterministic), then rounded once to FP16.
//
// Dequantisation and dot product, exact, two weights per instruction:
//   (w >> 4j) & 0x000F000F | 0x64006400   = the FP16 pair (1024 + q_j, 1024 + q_{j+4})
//   minus the FP16 pair (1024 + z, 1024 + z) = (q_j − z, q_{j+4} − z), exact (v_pk_add_f16)
//   v_dot2_f32_f16 with (x_j, x_{j+4}) adds both products to an FP32 sum; each product is exact.
// The scale multiplies the chunk's sum once: Σ_k (q − z)·s·x = s · Σ_k (q − z)·x, equal up to
// FP32 rounding order.
//
// Activations: every lane of a wave needs the same x values, so the workgroup stages each round's
// x in LDS, already arranged as the (x_j, x_{j+4}) pairs the dot2 wants, and a wave reads the 4
// pairs of a packed row with one broadcast ds_read_b128. The staging buffer is double-buffered by
// round parity and guarded by an LDS-only barrier (s_waitcnt lgkmcnt(0); s_barrier): it does not
// wait for outstanding global loads, so the weight prefetch stays in flight across it
// (__syncthreads() would wait for all of them: s_waitcnt vmcnt(0)).
//
// The inputs are deliberately not __restrict__: loads through restrict read-only pointers may be
// moved by the compiler past the barriers to their point of use, which would undo the prefetch.

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_ref needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

typedef _Float16 f16;
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
typedef unsigned u32x4 __attribute__((ext_vector_type(4)));

static __device__ __forceinline__ f16x2 as_f16x2(unsigned bits) { return __builtin_bit_cast(f16x2, bits); }

// Workgroup barrier for LDS only: waits for this wave's LDS accesses, not for its global loads.
static __device__ __forceinline__ void lds_barrier() {
    asm volatile("s_waitcnt lgkmcnt(0)\n\ts_barrier" ::: "memory");
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output columns
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                    // lanes per workgroup
constexpr unsigned WAVE = 64;
constexpr unsigned COLS = WAVE;                 // columns per workgroup: one per lane of a wave
constexpr unsigned SLICES = WG / COLS;          // K-slices per workgroup (one wave each)
constexpr unsigned KW = K / 8;                  // packed K-rows
constexpr unsigned WPG = GROUP / 8;             // packed K-rows per group
constexpr unsigned CHUNK = WPG < 16 ? WPG : 16; // packed K-rows fetched at once, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;        // K ends inside a group: the last chunk is short
constexpr unsigned NROUND = (NCHUNK + SLICES - 1) / SLICES;
constexpr unsigned RW = SLICES * CHUNK;         // packed K-rows per round
constexpr unsigned XD = RW * 4;                 // x dwords per round and batch row
constexpr unsigned XPL = (BATCH * XD + WG - 1) / WG; // x dwords each lane stages per round

static_assert(BATCH >= 1 && BATCH <= 8, "batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 16 || WPG % 16 == 0, "a chunk never straddles two groups");

// One chunk of a lane's column: CHUNK packed K-rows and the group's scale and zero-point word,
// raw as loaded (all arithmetic on them happens in consume(), so issuing the loads never waits).
struct Chunk {
    unsigned q[CHUNK];
    f16 s;       // scale
    unsigned zw; // the qzeros word holding this column's zero point
    bool valid;  // false past the last chunk: weighted by 0
};

// The round's activations, per batch row and packed K-row: halves (x0, x4, x1, x5, x2, x6, x3, x7),
// i.e. the u32 pairs (x_j, x_{j+4}) for j = 0..3.
typedef unsigned short XStage[BATCH][RW][8];

// Issue the loads of chunk c of column `col`. A chunk past the end (a wave with nothing left in
// the last round) is loaded from the last chunk instead and weighted by 0, so every round runs the
// same branch-free code (and the compiler can count outstanding loads exactly).
static __device__ __forceinline__ void fetch(Chunk& ch, const unsigned* qweight, const f16* scales,
                                             const unsigned* qzeros, unsigned c, unsigned col) {
    ch.valid = c < NCHUNK;
    if (!ch.valid) c = NCHUNK - 1;
    const unsigned g = c * CHUNK / WPG;
    ch.s = scales[g * N + col];
    ch.zw = qzeros[g * (N / 8) + col / 8];
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        ch.q[i] = qweight[(RAGGED && kw >= KW ? KW - 1 : kw) * N + col]; // rows past K: never used
    }
}

// Lane t's share of round r's activations: dwords t, t + WG, … of [BATCH][XD] (coalesced). Past
// the end of x (the last round of a K that is not a multiple of the round) the load is clamped to
// the last dword: always a valid address, and those values are never used.
static __device__ __forceinline__ void x_load(unsigned (&xr)[XPL], const f16* x, unsigned r) {
    const unsigned* xw = reinterpret_cast<const unsigned*>(x); // [BATCH][K / 2]
#pragma unroll
    for (unsigned k = 0; k < XPL; ++k) {
        const unsigned t = threadIdx.x + k * WG, b = t / XD, d = t % XD;
        const unsigned i = b * (K / 2) + r * (RW * 4) + d;
        xr[k] = xw[i < BATCH * (K / 2) ? i : BATCH * (K / 2) - 1];
    }
}

// Dword d of a packed row holds halves p = 2(d % 4) and p + 1; half p goes to pair p % 4, high
// half if p >= 4.
static __device__ __forceinline__ void x_store(XStage& xs, const unsigned (&xr)[XPL]) {
#pragma unroll
    for (unsigned k = 0; k < XPL; ++k) {
        const unsigned t = threadIdx.x + k * WG, b = t / XD, d = t % XD;
        if ((BATCH * XD) % WG == 0 || t < BATCH * XD) {
            const unsigned w = d / 4, e = d % 4, j = (2 * e) % 4, hi = e / 2;
            xs[b][w][2 * j + hi] = (unsigned short)xr[k];
            xs[b][w][2 * (j + 1) + hi] = (unsigned short)(xr[k] >> 16);
        }
    }
}

static __device__ __forceinline__ void consume(const Chunk& ch, const XStage& xs, unsigned c,
                                               unsigned col, unsigned w0, float (&acc)[BATCH]) {
    float part[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) part[b] = 0.0f;
    const unsigned z = ((ch.zw >> (4 * (col % 8))) & 0xFu) + ZP_ADD;
    const f16x2 zz = as_f16x2((0x6400u + z) * 0x00010001u); // (1024 + z, 1024 + z)
    const float s = ch.valid ? (float)ch.s : 0.0f;
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        if (RAGGED && c * CHUNK + i >= KW) break;
        // At large batch, keep the compiler from hoisting every row's LDS reads at once (8 batch
        // rows × 4 VGPRs per packed row would crowd out the prefetched weights).
        if (BATCH > 4) asm volatile("" ::: "memory");
        const unsigned w = ch.q[i];
        const f16x2 d04 = as_f16x2((w & 0x000F000Fu) | 0x64006400u) - zz;         // (q0 − z, q4 − z)
        const f16x2 d15 = as_f16x2(((w >> 4) & 0x000F000Fu) | 0x64006400u) - zz;  // (q1 − z, q5 − z)
        const f16x2 d26 = as_f16x2(((w >> 8) & 0x000F000Fu) | 0x64006400u) - zz;  // (q2 − z, q6 − z)
        const f16x2 d37 = as_f16x2(((w >> 12) & 0x000F000Fu) | 0x64006400u) - zz; // (q3 − z, q7 − z)
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            u32x4 xp; // (x0, x4), (x1, x5), (x2, x6), (x3, x7): one broadcast LDS read
            __builtin_memcpy(&xp, &xs[b][w0 + i][0], sizeof xp);
            part[b] = __builtin_amdgcn_fdot2(d04, as_f16x2(xp.x), part[b], false);
            part[b] = __builtin_amdgcn_fdot2(d15, as_f16x2(xp.y), part[b], false);
            part[b] = __builtin_amdgcn_fdot2(d26, as_f16x2(xp.z), part[b], false);
            part[b] = __builtin_amdgcn_fdot2(d37, as_f16x2(xp.w), part[b], false);
        }
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) acc[b] = fmaf(s, part[b], acc[b]);
}

// One round r: stage round r's activations (loaded during round r − 1), barrier, prefetch this
// wave's chunk of round r + 1 into `nxt`, consume `cur` (its chunk of round r), load round r + 1's
// activations. Branch-free, so the compiler counts outstanding loads exactly: waiting for the
// activations (issued last in round r − 1) also waits for `cur`, which is needed next anyway,
// and the prefetch into `nxt` stays in flight through the whole round. Past the end, loads are
// clamped to valid addresses and their results unused or weighted by 0.
static __device__ __forceinline__ void round_step(unsigned r, Chunk& cur, Chunk& nxt, XStage (&xs)[2],
                                                  unsigned (&xr)[XPL],
                                                  const unsigned* qweight,
                                                  const f16* scales,
                                                  const unsigned* qzeros,
                                                  const f16* x, unsigned slice,
                                                  unsigned col, float (&acc)[BATCH]) {
    x_store(xs[r % 2], xr);
    // §5.8: barrier in uniform control flow (every wave runs every round). It orders every wave's
    // stores to xs[r % 2] before this round's reads, and round r − 1's reads of xs[(r + 1) % 2]
    // before round r + 1 overwrites it.
    lds_barrier();
    fetch(nxt, qweight, scales, qzeros, (r + 1) * SLICES + slice, col);
    // Keep the prefetch here: the compiler may not sink these loads to their use next round.
    asm volatile("" ::: "memory");
    consume(cur, xs[r % 2], r * SLICES + slice, col, slice * CHUNK, acc);
    x_load(xr, x, r + 1);
}

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_int4_ref(
    const unsigned* w_qweight, // u32 [K/8, N]
    const f16* w_scales,       // f16 [ceil(K/G), N]
    const unsigned* w_qzeros,  // u32 [ceil(K/G), N/8]
    const f16* x,              // f16 [BATCH, K]
    f16* y)                    // f16 [BATCH, N]
{
    __shared__ __attribute__((aligned(16))) XStage xs[2]; // activations of rounds r (parity r % 2)
    __shared__ float red[SLICES][BATCH][COLS];            // per-slice column sums

    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = __builtin_amdgcn_readfirstlane(threadIdx.x / COLS); // the wave
    const unsigned col = blockIdx.x * COLS + lane_col;
    // A lane past N (the tail tile) computes on column N − 1 and stores nothing: the tail is masked
    // at the store (§5.8: no early return), and the loop has no lane-divergent branches.
    const unsigned col_ld = col < N ? col : N - 1;

    float acc[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) acc[b] = 0.0f;

    Chunk a, b;
    unsigned xr[XPL];
    fetch(a, w_qweight, w_scales, w_qzeros, slice, col_ld); // this wave's chunk of round 0
    x_load(xr, x, 0);
    // Rounds two at a time, so the two chunk register sets alternate without copies (a copy of a
    // register still being loaded would wait for every outstanding load).
    for (unsigned r = 0; r < NROUND; r += 2) {
        round_step(r, a, b, xs, xr, w_qweight, w_scales, w_qzeros, x, slice, col_ld, acc);
        if (r + 1 >= NROUND) break;
        round_step(r + 1, b, a, xs, xr, w_qweight, w_scales, w_qzeros, x, slice, col_ld, acc);
    }

#pragma unroll
    for (unsigned bi = 0; bi < BATCH; ++bi) red[slice][bi][lane_col] = acc[bi];
    // §5.8: workgroup barrier in uniform control flow
    __syncthreads();

    // Lane t < COLS (wave 0) finishes column t of the tile for every batch row: slices added in order.
    if (threadIdx.x < COLS) {
        const unsigned n = blockIdx.x * COLS + threadIdx.x;
#pragma unroll
        for (unsigned bi = 0; bi < BATCH; ++bi) {
            float v = red[0][bi][threadIdx.x];
#pragma unroll
            for (unsigned s = 1; s < SLICES; ++s) v += red[s][bi][threadIdx.x];
            if (n < N) y[bi * N + n] = (f16)v; // the one FP16 rounding of the output (nearest even)
        }
    }
}
