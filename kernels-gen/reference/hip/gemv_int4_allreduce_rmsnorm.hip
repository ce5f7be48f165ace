// gemv_int4_allreduce_rmsnorm_ref: hand-written reference for `gemv_int4_allreduce_rmsnorm`
// (DESIGN.md §3.7), gfx906, HIP: THE fused kernel. One launch per rank of a TP group.
//
//   partial_p[b, n] = round_f16( Σ_{k in rank p's K-shard} W_p[k, n] · x_p[b, k] )   (row-parallel INT4 GEMV)
//   r[b, n]         = round_f16( Σ_{p < TP} partial_p[b, n] + residual[b, n] )         → residual_out
//   normed[b, n]    = round_f16( r[b, n] · (1 / sqrt(mean_j r[b, j]² + eps)) · w[n] ) → normed
//
// Each rank holds a K-shard of W_down (GPTQ INT4, exactly as in gemv_int4.hip) and the matching
// shard of x, and produces partial sums of all N outputs. The published partial is FP16 (the op
// level's rounding point: 10 KB per rank at N = 5120); the sum over ranks is FP32 in ascending
// rank order, so every rank computes bit-identical outputs; the norm reads the rounded residual.
// Two outputs: the new residual stream and its normalised copy (§5.7).
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_allreduce_rmsnorm.tp<N>.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_K=… (this rank's K-shard) -DWF_HIDDEN=… (N) -DWF_GROUP=… -DWF_ZP_V1=0|1 -DWF_RMS_EPS=…
// Launch per rank: ceil(HIDDEN / 64) workgroups of exactly 256 lanes (4 waves of 64), all resident
// at once (grid barrier, §5.9: launch cooperatively or check the co-resident capacity first).
//
// 1. GEMV, exactly the core of gemv_int4.hip: workgroup w owns output columns [64w, 64w + 64);
//    lane l of each wave reads column l (256 contiguous bytes per packed K-row); the 4 waves are K
//    slices walking K in rounds of one 16-row chunk each, the next round's chunk prefetched, the
//    activations staged in LDS as dot2 pairs; v_pk_add_f16 + v_dot2_f32_f16 dequantise and
//    multiply exactly. Slices meet in LDS, added in slice order; one FP16 rounding.
// 2. Allreduce, pull (§5.3, §5.5, §5.12): the workgroup writes its tile of the partial into this
//    rank's `ar_payload` (half epoch & 1 of a double-buffered array) and releases its flag
//    `ar_flags[rank][w] = epoch` at system scope; lane p (p ≠ rank) waits, bounded, for rank p's
//    flag of the same tile and acquires it at system scope; after a workgroup barrier the tile's
//    lanes read every peer's slice and add all ranks in rank order, plus the residual.
// 3. RMSNorm: the tile's sums of squares go to `norm_partials` (global memory, §5.2), a grid
//    barrier on `grid_counter` follows, and every workgroup adds all GRID partial sums in the same
//    order, so every workgroup and every rank uses the same 1/rms.
//
// Synchronisation state (the runtime's conventions, §5.4): flags and the grid counter are zeroed
// once and never reset. Launch e stores flag value e and waits for e; its grid barrier completes at
// e·GRID arrivals. Comparisons are signed differences, so wrap-around at 2^32 is harmless. Launch
// e + 1 rewrites payload half e & 1 only after acquiring every peer's flag e + 1, which each peer
// released after finishing launch e (and its reads of this rank's half). `norm_partials` is written
// and read within one launch, and a rank's launches are stream-ordered (§5.11). Every wait is
// bounded (§5.10): codes 1 + p for the wait on rank p's flag, TP + 1 for the grid barrier.
//
// On AMD the flags live in uncached device memory and the payload in fine-grained memory (the
// ABI's `memory` fields), so polls and peer reads never hit a stale cache line (§5.12). The GEMV
// inputs are deliberately not __restrict__ (see gemv_int4.hip).

#include <hip/hip_runtime.h>

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_K) || !defined(WF_HIDDEN) || !defined(WF_GROUP) || !defined(WF_ZP_V1) || !defined(WF_RMS_EPS)
#error "gemv_int4_allreduce_rmsnorm_ref needs -DWF_TP -DWF_BATCH -DWF_K -DWF_HIDDEN -DWF_GROUP -DWF_ZP_V1 -DWF_RMS_EPS (the [build] defines of its ABI file)"
#endif
#ifndef WF_SPIN_BUDGET
#define WF_SPIN_BUDGET (1u << 26) // polls before a wait gives up (seconds, with s_sleep between polls)
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
constexpr unsigned TP = WF_TP;       // ranks
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned K = WF_K;         // this rank's K-shard
constexpr unsigned N = WF_HIDDEN;    // outputs (features of the residual stream)
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;
constexpr float EPS = WF_RMS_EPS;    // RMSNorm epsilon

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 64, WAVES = WG / WAVE;
constexpr unsigned COLS = WAVE;                 // columns per workgroup: one per lane of a wave
constexpr unsigned SLICES = WG / COLS;          // K-slices per workgroup (one wave each)
constexpr unsigned GRID = (N + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned KW = K / 8;                  // packed K-rows
constexpr unsigned WPG = GROUP / 8;             // packed K-rows per group
constexpr unsigned CHUNK = WPG < 16 ? WPG : 16; // packed K-rows fetched at once, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;        // K ends inside a group: the last chunk is short
constexpr unsigned NROUND = (NCHUNK + SLICES - 1) / SLICES;
constexpr unsigned RW = SLICES * CHUNK;         // packed K-rows per round
constexpr unsigned XD = RW * 4;                 // x dwords per round and batch row
constexpr unsigned XPL = (BATCH * XD + WG - 1) / WG; // x dwords each lane stages per round
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 16 || WPG % 16 == 0, "a chunk never straddles two groups");
static_assert(GRID <= WG, "one lane per norm partial sum");

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

// Wait until *flag reaches `target` (flags only grow; the signed difference survives wrap-around).
// Bounded (§5.10): after SPIN_BUDGET polls, write `code` to the error word and stop waiting.
static __device__ __forceinline__ void wait_flag(unsigned* flag, unsigned target, unsigned* error_word,
                                                 unsigned code) {
    // §5.10: a bounded spin of relaxed polls at system scope (the flag is in peer memory)
    for (unsigned polls = 1; (int)(__hip_atomic_load(flag, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM) - target) < 0; ++polls) {
        if (polls == SPIN_BUDGET) {
            __hip_atomic_store(error_word, code, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
            return;
        }
        __builtin_amdgcn_s_sleep(1);
    }
    // §5.3: acquire (system scope) the flag before anything it publishes is read; on gfx906 this
    // also invalidates the CU's L1 (buffer_wbinvl1_vol), which every wave of the workgroup shares
    (void)__hip_atomic_load(flag, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}

// Wait until the grid counter reaches `target`, like wait_flag but at agent (device) scope.
static __device__ __forceinline__ void wait_counter(unsigned* counter, unsigned target, unsigned* error_word,
                                                    unsigned code) {
    // §5.10: a bounded spin of relaxed polls at agent (device) scope
    for (unsigned polls = 1; (int)(__hip_atomic_load(counter, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT) - target) < 0; ++polls) {
        if (polls == SPIN_BUDGET) {
            __hip_atomic_store(error_word, code, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
            return;
        }
        __builtin_amdgcn_s_sleep(1);
    }
    // §5.2: acquire (agent scope): every workgroup's writes before its arrival, which went through
    // global memory, are visible after this
    (void)__hip_atomic_load(counter, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
}

static __device__ __forceinline__ float wave_sum(float v) {
#pragma unroll
    for (int m = 32; m >= 1; m /= 2) v += __shfl_xor(v, m, 64);
    return v;
}

// Sum v[b] over the workgroup's lanes: butterfly within each wave, then waves in order through LDS.
// The result is in out[b] for every lane. Same order in every workgroup. Call in uniform control flow.
static __device__ __forceinline__ void block_sum(float (&v)[BATCH], float (&wsum)[WAVES][BATCH],
                                                 float (&out)[BATCH]) {
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        const float w = wave_sum(v[b]);
        if (threadIdx.x % WAVE == 0) wsum[threadIdx.x / WAVE][b] = w;
    }
    // §5.8: workgroup barrier in uniform control flow (LDS is workgroup-local, §5.2)
    __syncthreads();
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        float t = wsum[0][b];
#pragma unroll
        for (unsigned w = 1; w < WAVES; ++w) t += wsum[w][b];
        out[b] = t;
    }
    // §5.8: wsum may be reused after this
    __syncthreads();
}

// At least 2 waves per SIMD (≤ 128 VGPRs): 2 workgroups per CU, so the 80-workgroup grid is
// co-resident on a 60-CU MI50 at every batch size (§5.9).
extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG), amdgpu_waves_per_eu(2)))
gemv_int4_allreduce_rmsnorm_ref(
    const unsigned* w_down_qweight,   // u32 [K/8, N], this rank's K-shard
    const f16* w_down_scales,         // f16 [ceil(K/G), N]
    const unsigned* w_down_qzeros,    // u32 [ceil(K/G), N/8]
    const f16* x,                     // f16 [BATCH, K], this rank's shard
    const f16* __restrict__ residual, // f16 [BATCH, N]
    const f16* __restrict__ norm_w,   // f16 [N], RMSNorm weights (Gemma 1 + w folded in)
    f16* __restrict__ residual_out,   // f16 [BATCH, N]
    f16* __restrict__ normed,         // f16 [BATCH, N]
    const unsigned rank,              // this rank, 0 ≤ rank < TP
    f16* const* ar_payload,           // peer table, slot p = rank p: f16 [2][BATCH][N] (halves by epoch parity)
    unsigned* const* ar_flags,        // peer table, slot p = rank p: u32 [GRID] flags, zeroed once
    const unsigned epoch,             // 1, 2, 3, … per launch on these flags and counter
    float* norm_partials,             // f32 [GRID][BATCH] scratch: each tile's sums of squares
    unsigned* grid_counter,           // u32 [1] grid-barrier counter, zeroed once
    unsigned* error_word)             // u32 [1], zero before the launch
{
    __shared__ __attribute__((aligned(16))) XStage xs[2]; // activations of round r (parity r % 2)
    __shared__ float red[SLICES][BATCH][COLS];            // per-slice column sums
    __shared__ float wsum[WAVES][BATCH];                  // per-wave sums of the norm reductions

    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = __builtin_amdgcn_readfirstlane(threadIdx.x / COLS); // the wave
    const unsigned col = blockIdx.x * COLS + lane_col;
    // A lane past N (the tail tile) computes on column N − 1 and stores nothing (§5.8: masked).
    const unsigned col_ld = col < N ? col : N - 1;
    const unsigned half = (epoch & 1u) * BATCH * N;

    // ---- 1. this rank's partial sums for the tile ----
    float acc[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) acc[b] = 0.0f;
    {
        Chunk a, b;
        unsigned xr[XPL];
        fetch(a, w_down_qweight, w_down_scales, w_down_qzeros, slice, col_ld); // chunk of round 0
        x_load(xr, x, 0);
        // Rounds two at a time, so the two chunk register sets alternate without copies.
        for (unsigned r = 0; r < NROUND; r += 2) {
            round_step(r, a, b, xs, xr, w_down_qweight, w_down_scales, w_down_qzeros, x, slice, col_ld, acc);
            if (r + 1 >= NROUND) break;
            round_step(r + 1, b, a, xs, xr, w_down_qweight, w_down_scales, w_down_qzeros, x, slice, col_ld, acc);
        }
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) red[slice][b][lane_col] = acc[b];
    // §5.8: workgroup barrier in uniform control flow
    __syncthreads();

    // Lane t < COLS (wave 0) owns column n of the tile from here on ("point lanes").
    const unsigned n = blockIdx.x * COLS + threadIdx.x;
    const bool point = threadIdx.x < COLS && n < N;
    f16 mine[BATCH]; // this rank's partial, rounded: the published value
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        float v = 0.0f;
        if (point) {
            v = red[0][b][threadIdx.x];
#pragma unroll
            for (unsigned s = 1; s < SLICES; ++s) v += red[s][b][threadIdx.x];
        }
        mine[b] = (f16)v;
    }

    // ---- 2. allreduce ----
    if (TP > 1) {
        if (point) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) ar_payload[rank][half + b * N + n] = mine[b];
        }
        // §5.3: every lane's payload stores happen before the flag (the workgroup barrier waits for
        // this wave's stores to complete, s_waitcnt vmcnt(0), in every wave; then one lane releases)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __hip_atomic_store(&ar_flags[rank][blockIdx.x], epoch, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
        }
        // Lane p waits for rank p's flag of this tile (§5.5: slot p of every table is rank p). Every
        // rank publishes before it waits, so no cycle of waits can form.
        if (threadIdx.x < TP && threadIdx.x != rank)
            wait_flag(&ar_flags[threadIdx.x][blockIdx.x], epoch, error_word, 1 + threadIdx.x);
        // §5.3, §5.8: every peer's flag is acquired before any lane reads peer data
        __syncthreads();
    }

    // All ranks in rank order, plus the residual, one rounding: the new residual stream.
    float r[BATCH], sq[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        r[b] = 0.0f;
        if (point) {
            float sum = 0.0f;
#pragma unroll
            for (unsigned p = 0; p < TP; ++p) sum += (float)(p == rank ? mine[b] : ar_payload[p][half + b * N + n]);
            const f16 out = (f16)(sum + (float)residual[b * N + n]);
            residual_out[b * N + n] = out;
            r[b] = (float)out; // the norm's input is the rounded residual
        }
        sq[b] = r[b] * r[b];
    }

    // ---- 3. RMSNorm ----
    // This tile's sums of squares, to global memory for every other workgroup (§5.2: not LDS).
    float tile_sq[BATCH];
    block_sum(sq, wsum, tile_sq);
    if (threadIdx.x == 0) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) norm_partials[blockIdx.x * BATCH + b] = tile_sq[b];
    }
    // Grid barrier (§5.9: every workgroup is resident).
    // §5.8: workgroup barrier in uniform control flow: lane 0's partial sums are written
    __syncthreads();
    if (threadIdx.x == 0) {
        // §5.1: one arrival per workgroup, by one lane, after the workgroup barrier; release at
        // agent scope publishes this workgroup's partial sums with it
        __hip_atomic_fetch_add(grid_counter, 1u, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
        // §5.4: never reset: barrier 0 of launch e completes at e·GRID arrivals; §5.10: bounded
        wait_counter(grid_counter, epoch * gridDim.x, error_word, TP + 1);
    }
    // §5.8: workgroup barrier in uniform control flow: lane 0 has acquired every arrival
    __syncthreads();

    // Every workgroup adds the GRID partial sums in the same order: the same 1/rms everywhere.
    float part[BATCH], total[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) part[b] = threadIdx.x < GRID ? norm_partials[threadIdx.x * BATCH + b] : 0.0f;
    block_sum(part, wsum, total);

    if (point) {
        const float w = (float)norm_w[n];
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float inv_rms = 1.0f / sqrtf(total[b] / (float)N + EPS);
            normed[b * N + n] = (f16)(r[b] * inv_rms * w); // one rounding (nearest even)
        }
    }
}
