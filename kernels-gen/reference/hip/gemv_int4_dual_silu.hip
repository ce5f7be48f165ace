// gemv_int4_dual_silu_ref: hand-written reference for `gemv_int4_dual_silu` (DESIGN.md §3.3),
// gfx906, HIP.
//
//   g[b, n] = Σ_k Wg[k, n] · x[b, k],   u[b, n] = Σ_k Wu[k, n] · x[b, k]      (GPTQ INT4, FP32 sums)
//   y[b, n] = round_f16( silu(g[b, n]) · u[b, n] ),   silu(g) = g / (1 + e^−g)
//
// Both GEMVs read each activation once, and the output is rounded once. GPTQ format, zero-point
// convention, dequantisation (v_pk_add_f16 + v_dot2_f32_f16), the LDS-staged activations and the
// prefetching rounds are exactly as in gemv_int4.hip (see there), with two weights per chunk.
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_dual_silu.tp<N>.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: 2 · ceil(N / 64) workgroups of exactly 256 lanes (4 waves of 64), arguments in signature order.
//
// Work split: split-K with a last-arriver finish. A tile is 64 columns; KSPLIT = 2 workgroups share
// it (workgroup = tile + TILES · split). Lane l of a wave reads column l of the tile (256
// contiguous bytes per packed K-row); in round r, wave s of split p takes chunk
// 8r + 4p + s of 8 packed rows (half a 128-row group) of both weights, and prefetches its chunks
// of round r + 1 (16 loads, as in gemv_int4.hip; the chunk is half as long because there are two
// weights) before consuming the current ones. The 4 slices meet in LDS (added in slice
// order), and each workgroup writes its FP32 partial sums of g and u to `splitk_partials`. Then one
// lane per workgroup adds 1 to the tile's counter; the workgroup that sees it arrive last reads
// both partials in split order (so the result does not depend on which one finishes last),
// applies silu·mul and stores y.
//
// The tile counters are zeroed once and never reset (DESIGN.md §5.4): each launch adds exactly
// KSPLIT to every counter, so with the runtime's epochs 1, 2, 3, … the last arriver of launch e
// sees the old value e·KSPLIT − 1 (modulo 2^32: wrap-around is harmless). Nothing waits, so no
// co-residency is needed and no wait can time out. The partials are rewritten before being read in
// every launch, so they need no initialisation (§5.11).
//
// The weight and activation inputs are deliberately not __restrict__ (see gemv_int4.hip).

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_dual_silu_ref needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
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
constexpr unsigned N = WF_N;         // output columns (of gate, of up, and of y)
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                    // lanes per workgroup
constexpr unsigned WAVE = 64;
constexpr unsigned COLS = WAVE;                 // columns per tile: one per lane of a wave
constexpr unsigned SLICES = WG / COLS;          // K-slices per workgroup (one wave each)
constexpr unsigned KSPLIT = 2;                  // workgroups per tile
constexpr unsigned TILES = (N + COLS - 1) / COLS;
constexpr unsigned KW = K / 8;                  // packed K-rows
constexpr unsigned WPG = GROUP / 8;             // packed K-rows per group
constexpr unsigned CHUNK = WPG < 8 ? WPG : 8;   // packed K-rows fetched at once per weight, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;        // K ends inside a group: the last chunk is short
constexpr unsigned STRIDE = SLICES * KSPLIT;    // chunks per round over the tile's workgroups
constexpr unsigned NROUND = (NCHUNK + STRIDE - 1) / STRIDE;
constexpr unsigned RW = SLICES * CHUNK;         // packed K-rows per round and workgroup
constexpr unsigned XD = RW * 4;                 // x dwords per round and batch row
constexpr unsigned XPL = (BATCH * XD + WG - 1) / WG; // x dwords each lane stages per round

static_assert(BATCH >= 1 && BATCH <= 8, "batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 8 || WPG % 8 == 0, "a chunk never straddles two groups");

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

// Lane t's share of the activations of packed rows [w0, w0 + RW): dwords t, t + WG, … of
// [BATCH][XD] (coalesced). Past the end of x the load is clamped to the last dword: always a valid
// address, and those values are never used.
static __device__ __forceinline__ void x_load(unsigned (&xr)[XPL], const f16* x, unsigned w0) {
    const unsigned* xw = reinterpret_cast<const unsigned*>(x); // [BATCH][K / 2]
#pragma unroll
    for (unsigned k = 0; k < XPL; ++k) {
        const unsigned t = threadIdx.x + k * WG, b = t / XD, d = t % XD;
        const unsigned i = b * (K / 2) + w0 * 4 + d;
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

// The packed row's 4 nibble pairs minus the zero point: (q_j − z, q_{j+4} − z), exact.
static __device__ __forceinline__ void dequant(unsigned w, f16x2 zz, f16x2 (&d)[4]) {
    d[0] = as_f16x2((w & 0x000F000Fu) | 0x64006400u) - zz;
    d[1] = as_f16x2(((w >> 4) & 0x000F000Fu) | 0x64006400u) - zz;
    d[2] = as_f16x2(((w >> 8) & 0x000F000Fu) | 0x64006400u) - zz;
    d[3] = as_f16x2(((w >> 12) & 0x000F000Fu) | 0x64006400u) - zz;
}

static __device__ __forceinline__ f16x2 zero_pair(const Chunk& ch, unsigned col) {
    const unsigned z = ((ch.zw >> (4 * (col % 8))) & 0xFu) + ZP_ADD;
    return as_f16x2((0x6400u + z) * 0x00010001u); // (1024 + z, 1024 + z)
}

// Both weights' chunk c against the same activations, read once per packed row and batch row.
static __device__ __forceinline__ void consume2(const Chunk& cg, const Chunk& cu, const XStage& xs,
                                                unsigned c, unsigned col, unsigned w0,
                                                float (&accg)[BATCH], float (&accu)[BATCH]) {
    float pg[BATCH], pu[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) pg[b] = pu[b] = 0.0f;
    const f16x2 zg = zero_pair(cg, col), zu = zero_pair(cu, col);
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        if (RAGGED && c * CHUNK + i >= KW) break;
        // At large batch, keep the compiler from hoisting every row's LDS reads at once (8 batch
        // rows × 16 VGPRs per packed row would spill).
        if (BATCH > 4) asm volatile("" ::: "memory");
        f16x2 dg[4], du[4];
        dequant(cg.q[i], zg, dg);
        dequant(cu.q[i], zu, du);
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            u32x4 xp; // (x0, x4), (x1, x5), (x2, x6), (x3, x7): one broadcast LDS read
            __builtin_memcpy(&xp, &xs[b][w0 + i][0], sizeof xp);
            const unsigned xpair[4] = {xp.x, xp.y, xp.z, xp.w};
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) {
                pg[b] = __builtin_amdgcn_fdot2(dg[j], as_f16x2(xpair[j]), pg[b], false);
                pu[b] = __builtin_amdgcn_fdot2(du[j], as_f16x2(xpair[j]), pu[b], false);
            }
        }
    }
    const float sg = cg.valid ? (float)cg.s : 0.0f, su = cu.valid ? (float)cu.s : 0.0f;
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        accg[b] = fmaf(sg, pg[b], accg[b]);
        accu[b] = fmaf(su, pu[b], accu[b]);
    }
}

// One round r of split p: stage the round's activations (loaded during round r − 1), barrier,
// prefetch this wave's chunks of round r + 1 into `ng`/`nu`, consume `cg`/`cu`, load round r + 1's
// activations. Branch-free (see gemv_int4.hip).
static __device__ __forceinline__ void round_step(unsigned r, Chunk& cg, Chunk& cu, Chunk& ng, Chunk& nu,
                                                  XStage (&xs)[2], unsigned (&xr)[XPL],
                                                  const unsigned* gq, const f16* gs, const unsigned* gz,
                                                  const unsigned* uq, const f16* us, const unsigned* uz,
                                                  const f16* x, unsigned p, unsigned slice,
                                                  unsigned col, float (&accg)[BATCH], float (&accu)[BATCH]) {
    x_store(xs[r % 2], xr);
    // §5.8: barrier in uniform control flow (every wave runs every round). It orders every wave's
    // stores to xs[r % 2] before this round's reads, and round r − 1's reads of xs[(r + 1) % 2]
    // before round r + 1 overwrites it.
    lds_barrier();
    const unsigned c = r * STRIDE + p * SLICES + slice;
    fetch(ng, gq, gs, gz, c + STRIDE, col);
    fetch(nu, uq, us, uz, c + STRIDE, col);
    // Keep the prefetch here: the compiler may not sink these loads to their use next round.
    asm volatile("" ::: "memory");
    consume2(cg, cu, xs[r % 2], c, col, slice * CHUNK, accg, accu);
    x_load(xr, x, ((r + 1) * STRIDE + p * SLICES) * CHUNK);
}

static __device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_int4_dual_silu_ref(
    const unsigned* w_gate_qweight, // u32 [K/8, N]
    const f16* w_gate_scales,       // f16 [ceil(K/G), N]
    const unsigned* w_gate_qzeros,  // u32 [ceil(K/G), N/8]
    const unsigned* w_up_qweight,   // u32 [K/8, N]
    const f16* w_up_scales,         // f16 [ceil(K/G), N]
    const unsigned* w_up_qzeros,    // u32 [ceil(K/G), N/8]
    const f16* x,                   // f16 [BATCH, K]
    f16* y,                         // f16 [BATCH, N]
    float* splitk_partials,         // f32 [KSPLIT][2][BATCH][N] scratch: g then u
    unsigned* tile_counters,        // u32 [TILES], zeroed once, never reset
    const unsigned epoch)           // 1, 2, 3, … per launch on these counters
{
    __shared__ __attribute__((aligned(16))) XStage xs[2]; // activations of round r (parity r % 2)
    __shared__ float red[SLICES][2][BATCH][COLS];         // per-slice column sums of g and u
    __shared__ unsigned last;                             // this workgroup arrived last at its tile

    const unsigned tile = blockIdx.x % TILES;
    const unsigned split = blockIdx.x / TILES;
    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = __builtin_amdgcn_readfirstlane(threadIdx.x / COLS); // the wave
    const unsigned col = tile * COLS + lane_col;
    // A lane past N (the tail tile) computes on column N − 1 and stores nothing (§5.8: masked).
    const unsigned col_ld = col < N ? col : N - 1;

    float accg[BATCH], accu[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) accg[b] = accu[b] = 0.0f;

    Chunk ga, ua, gb, ub;
    unsigned xr[XPL];
    fetch(ga, w_gate_qweight, w_gate_scales, w_gate_qzeros, split * SLICES + slice, col_ld);
    fetch(ua, w_up_qweight, w_up_scales, w_up_qzeros, split * SLICES + slice, col_ld);
    x_load(xr, x, split * SLICES * CHUNK);
    // Rounds two at a time, so the two register sets alternate without copies.
    for (unsigned r = 0; r < NROUND; r += 2) {
        round_step(r, ga, ua, gb, ub, xs, xr, w_gate_qweight, w_gate_scales, w_gate_qzeros,
                   w_up_qweight, w_up_scales, w_up_qzeros, x, split, slice, col_ld, accg, accu);
        if (r + 1 >= NROUND) break;
        round_step(r + 1, gb, ub, ga, ua, xs, xr, w_gate_qweight, w_gate_scales, w_gate_qzeros,
                   w_up_qweight, w_up_scales, w_up_qzeros, x, split, slice, col_ld, accg, accu);
    }

#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        red[slice][0][b][lane_col] = accg[b];
        red[slice][1][b][lane_col] = accu[b];
    }
    // §5.8: workgroup barrier in uniform control flow
    __syncthreads();

    // Lane t < COLS (wave 0) holds column t of the tile: this workgroup's share of g and u.
    const unsigned n = tile * COLS + threadIdx.x;
    float g[BATCH], u[BATCH];
    if (threadIdx.x < COLS) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            g[b] = red[0][0][b][threadIdx.x];
            u[b] = red[0][1][b][threadIdx.x];
#pragma unroll
            for (unsigned s = 1; s < SLICES; ++s) {
                g[b] += red[s][0][b][threadIdx.x];
                u[b] += red[s][1][b][threadIdx.x];
            }
        }
    }

    if (KSPLIT == 1) {
        if (threadIdx.x < COLS && n < N) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) y[b * N + n] = (f16)(silu(g[b]) * u[b]);
        }
        return; // (no barrier follows)
    }

    // Publish this split's partial sums.
    if (threadIdx.x < COLS && n < N) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            splitk_partials[((split * 2 + 0) * BATCH + b) * N + n] = g[b];
            splitk_partials[((split * 2 + 1) * BATCH + b) * N + n] = u[b];
        }
    }
    // §5.1: the workgroup's stores are done before its one arrival (workgroup barrier, which on
    // gfx906 also waits for them to complete: s_waitcnt vmcnt(0), then one lane)
    __syncthreads();
    if (threadIdx.x == 0) {
        // §5.4: the counter only grows (by KSPLIT per launch); the epoch says which value is last.
        // acq_rel at agent scope: releases this workgroup's partials; the last arriver acquires
        // everyone's (and invalidates this CU's L1 before reading them).
        const unsigned prev = __hip_atomic_fetch_add(&tile_counters[tile], 1u, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_AGENT);
        last = prev == epoch * KSPLIT - 1u;
    }
    // §5.8: workgroup barrier in uniform control flow; `last` is the same for every lane after it
    __syncthreads();

    // The last arriver finishes the tile: partials added in split order (deterministic), one rounding.
    if (last && threadIdx.x < COLS && n < N) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float gsum = splitk_partials[(0 * BATCH + b) * N + n];
            float usum = splitk_partials[(1 * BATCH + b) * N + n];
#pragma unroll
            for (unsigned p = 1; p < KSPLIT; ++p) {
                gsum += splitk_partials[((p * 2 + 0) * BATCH + b) * N + n];
                usum += splitk_partials[((p * 2 + 1) * BATCH + b) * N + n];
            }
            y[b * N + n] = (f16)(silu(gsum) * usum);
        }
    }
}
