// gemv_int4_dual_silu_ref: hand-written reference for `gemv_int4_dual_silu` (DESIGN.md §3.3),
// sm_90, CUDA.
//
//   g[b, n] = Σ_k Wg[k, n] · x[b, k],   u[b, n] = Σ_k Wu[k, n] · x[b, k]      (GPTQ INT4, FP32 sums)
//   y[b, n] = round_f16( silu(g[b, n]) · u[b, n] ),   silu(g) = g / (1 + e^−g)
//
// Both GEMVs read each activation once, and the output is rounded once. GPTQ format, zero-point
// convention and dequantisation exactly as in gemv_int4.cu (see there).
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_dual_silu.tp<N>.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=… -DWF_GROUP=… -DWF_ZP_V1=0|1
// Launch: 2 · ceil(N / 64) workgroups of exactly 256 lanes, arguments in signature order.
//
// Work split: split-K with a last-arriver finish. A tile is 64 columns; KSPLIT = 2 workgroups share
// it, each taking every other group of K (workgroup = tile + TILES · split). Inside a workgroup,
// lanes t and t + 64·s read column t of the tile (two warps cover the 64 adjacent words of a packed
// K-row, 256 contiguous bytes), and the 4 slices s take chunks of 16 packed rows (one 128-row group)
// in turn; each chunk issues its 16 gate and 16 up loads before using any. The slices meet in LDS
// (added in slice order), and each workgroup writes its FP32 partial sums of g and u to
// `splitk_partials`. Then one lane per workgroup adds 1 to the tile's counter; the workgroup that
// sees it arrive last reads both partials in split order (so the result does not depend on which
// one finishes last), applies silu·mul and stores y.
//
// The tile counters are zeroed once and never reset (DESIGN.md §5.4): each launch adds exactly
// KSPLIT to every counter, so with the runtime's epochs 1, 2, 3, … the last arriver of launch e
// sees the old value e·KSPLIT − 1 (modulo 2^32: wrap-around is harmless). Nothing waits, so no
// co-residency is needed and no wait can time out. The partials are rewritten before being read in
// every launch, so they need no initialisation (§5.11).

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP) || !defined(WF_ZP_V1)
#error "gemv_int4_dual_silu_ref needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1 (the [build] defines of its ABI file)"
#endif

typedef unsigned short f16; // an FP16 value, as its bits

static __device__ __forceinline__ float f16_to_f32(f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

static __device__ __forceinline__ f16 f32_to_f16(float f) { // round to nearest even
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output columns (of gate, of up, and of y)
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;

// ---- work split ----
constexpr unsigned WG = 256;                    // lanes per workgroup
constexpr unsigned COLS = 64;                   // columns per tile = lanes per K-slice (2 warps)
constexpr unsigned SLICES = WG / COLS;          // K-slices per workgroup
constexpr unsigned KSPLIT = 2;                  // workgroups per tile
constexpr unsigned TILES = (N + COLS - 1) / COLS;
constexpr unsigned KW = K / 8;                  // packed K-rows
constexpr unsigned WPG = GROUP / 8;             // packed K-rows per group
constexpr unsigned CHUNK = WPG < 16 ? WPG : 16; // packed K-rows fetched at once, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;        // K ends inside a group: the last chunk is short

static_assert(BATCH >= 1 && BATCH <= 8, "batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 16 || WPG % 16 == 0, "a chunk never straddles two groups");

// One chunk of a lane's column of one weight: CHUNK packed K-rows and the group's scale and zero point.
struct Chunk {
    unsigned q[CHUNK];
    float s;  // scale
    float zf; // 2^23 + z, as a float
};

static __device__ __forceinline__ void fetch(Chunk& ch, const unsigned* __restrict__ qweight,
                                             const f16* __restrict__ scales,
                                             const unsigned* __restrict__ qzeros, unsigned c,
                                             unsigned col) {
    const unsigned g = c * CHUNK / WPG;
    ch.s = f16_to_f32(scales[g * N + col]);
    const unsigned z = ((qzeros[g * (N / 8) + col / 8] >> (4 * (col % 8))) & 0xFu) + ZP_ADD;
    ch.zf = __uint_as_float(0x4B000000u | z);
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        ch.q[i] = (!RAGGED || kw < KW) ? qweight[kw * N + col] : 0u;
    }
}

// Both weights' chunk c against the same activations.
static __device__ __forceinline__ void consume2(const Chunk& cg, const Chunk& cu, const f16* __restrict__ x,
                                                unsigned c, float (&accg)[BATCH], float (&accu)[BATCH]) {
    float pg[BATCH], pu[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) pg[b] = pu[b] = 0.0f;
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        if (RAGGED && kw >= KW) break;
        float dg[8], du[8]; // q − z of rows 8·kw … 8·kw + 7, exact
#pragma unroll
        for (unsigned j = 0; j < 8; ++j) {
            dg[j] = __uint_as_float(0x4B000000u | ((cg.q[i] >> (4 * j)) & 0xFu)) - cg.zf;
            du[j] = __uint_as_float(0x4B000000u | ((cu.q[i] >> (4 * j)) & 0xFu)) - cu.zf;
        }
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            // the 8 activations of this packed row, loaded once for both weights
            const uint4 xv = *reinterpret_cast<const uint4*>(x + b * K + kw * 8);
            const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (unsigned j = 0; j < 8; ++j) {
                const float xf = f16_to_f32((f16)(xw[j / 2] >> (16 * (j % 2))));
                pg[b] = fmaf(dg[j], xf, pg[b]);
                pu[b] = fmaf(du[j], xf, pu[b]);
            }
        }
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        accg[b] = fmaf(cg.s, pg[b], accg[b]);
        accu[b] = fmaf(cu.s, pu[b], accu[b]);
    }
}

static __device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

// Workgroups per SM the register allocation must leave room for: 4 (≤ 64 registers) keeps all
// 2·TILES workgroups resident at once at the §1 shapes (batch 1); larger batches need more
// registers for the two weights' accumulators and get them rather than spill.
constexpr unsigned MIN_WG_PER_SM = BATCH == 1 ? 4 : BATCH <= 6 ? 2 : 1;

extern "C" __global__ void __launch_bounds__(WG, MIN_WG_PER_SM)
gemv_int4_dual_silu_ref(
    const unsigned* __restrict__ w_gate_qweight, // u32 [K/8, N]
    const f16* __restrict__ w_gate_scales,       // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_gate_qzeros,  // u32 [ceil(K/G), N/8]
    const unsigned* __restrict__ w_up_qweight,   // u32 [K/8, N]
    const f16* __restrict__ w_up_scales,         // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_up_qzeros,    // u32 [ceil(K/G), N/8]
    const f16* __restrict__ x,                   // f16 [BATCH, K], 16-byte aligned
    f16* __restrict__ y,                         // f16 [BATCH, N]
    float* splitk_partials,                      // f32 [KSPLIT][2][BATCH][N] scratch: g then u
    unsigned* tile_counters,                     // u32 [TILES], zeroed once, never reset
    const unsigned epoch)                        // 1, 2, 3, … per launch on these counters
{
    __shared__ float red[SLICES][2][BATCH][COLS]; // per-slice column sums of g and u
    __shared__ unsigned last;                     // this workgroup arrived last at its tile

    const unsigned tile = blockIdx.x % TILES;
    const unsigned split = blockIdx.x / TILES;
    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = threadIdx.x / COLS; // uniform within each warp
    const unsigned col = tile * COLS + lane_col;

    float accg[BATCH], accu[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) accg[b] = accu[b] = 0.0f;

    // Columns past N are masked, not returned from: every lane reaches the barriers below (§5.8).
    if (col < N) {
        for (unsigned c = split * SLICES + slice; c < NCHUNK; c += SLICES * KSPLIT) {
            Chunk cg, cu;
            fetch(cg, w_gate_qweight, w_gate_scales, w_gate_qzeros, c, col);
            fetch(cu, w_up_qweight, w_up_scales, w_up_qzeros, c, col);
            consume2(cg, cu, x, c, accg, accu);
        }
    }

#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        red[slice][0][b][lane_col] = accg[b];
        red[slice][1][b][lane_col] = accu[b];
    }
    // §5.8: workgroup barrier in uniform control flow (tails were masked above)
    __syncthreads();

    // Lane t < COLS holds column t of the tile: this workgroup's share of g and u, slices in order.
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
            for (unsigned b = 0; b < BATCH; ++b) y[b * N + n] = f32_to_f16(silu(g[b]) * u[b]);
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
    // §5.1: the workgroup's stores are done before its one arrival (workgroup barrier, then one lane)
    __syncthreads();
    if (threadIdx.x == 0) {
        // §5.4: the counter only grows (by KSPLIT per launch); the epoch says which value is last.
        // acq_rel: releases this workgroup's partials; the last arriver acquires everyone's.
        const unsigned prev = __nv_atomic_fetch_add(&tile_counters[tile], 1u, __NV_ATOMIC_ACQ_REL, __NV_THREAD_SCOPE_DEVICE);
        last = prev == epoch * KSPLIT - 1u;
    }
    // §5.8: workgroup barrier in uniform control flow; `last` is the same for every lane after it
    __syncthreads();

    // The last arriver finishes the tile: partials added in split order (deterministic), one rounding.
    if (last && threadIdx.x < COLS && n < N) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float gs = splitk_partials[(0 * BATCH + b) * N + n];
            float us = splitk_partials[(1 * BATCH + b) * N + n];
#pragma unroll
            for (unsigned p = 1; p < KSPLIT; ++p) {
                gs += splitk_partials[((p * 2 + 0) * BATCH + b) * N + n];
                us += splitk_partials[((p * 2 + 1) * BATCH + b) * N + n];
            }
            y[b * N + n] = f32_to_f16(silu(gs) * us);
        }
    }
}
