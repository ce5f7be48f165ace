// gemv_int4_allreduce_rmsnorm_ref: hand-written reference for `gemv_int4_allreduce_rmsnorm`
// (DESIGN.md §3.7), sm_90, CUDA: THE fused kernel. One launch per rank of a TP group.
//
//   partial_p[b, n] = round_f16( Σ_{k in rank p's K-shard} W_p[k, n] · x_p[b, k] )   (row-parallel INT4 GEMV)
//   r[b, n]         = round_f16( Σ_{p < TP} partial_p[b, n] + residual[b, n] )         → residual_out
//   normed[b, n]    = round_f16( r[b, n] · (1 / sqrt(mean_j r[b, j]² + eps)) · w[n] ) → normed
//
// Each rank holds a K-shard of W_down (GPTQ INT4, exactly as in gemv_int4.cu) and the matching
// shard of x, and produces partial sums of all N outputs. The published partial is FP16 (the op
// level's rounding point: 10 KB per rank at N = 5120); the sum over ranks is FP32 in ascending
// rank order, so every rank computes bit-identical outputs; the norm reads the rounded residual.
// Two outputs: the new residual stream and its normalised copy (§5.7).
//
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_allreduce_rmsnorm.tp<N>.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_K=… (this rank's K-shard) -DWF_HIDDEN=… (N) -DWF_GROUP=… -DWF_ZP_V1=0|1 -DWF_RMS_EPS=…
// Launch per rank: ceil(HIDDEN / 64) workgroups of exactly 256 lanes, all resident at once (grid
// barrier, §5.9: launch cooperatively or check the co-resident capacity first). 64-column tiles
// keep the grid at 80 per rank: at batch 1 (≤ 64 registers, 4 workgroups per SM) four ranks
// sharing one H100/H200 still fit.
//
// 1. GEMV: workgroup w owns output columns [64w, 64w + 64). Lanes t and t + 64·s read column t
//    (two warps cover the 64 adjacent words of a packed K-row, 256 contiguous bytes); the 4
//    slices take chunks of 16 packed rows (one 128-row group) in turn, the next chunk in flight
//    while the current one is used. Slices meet in LDS, added in slice order; one FP16 rounding.
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
// No CUDA header is needed (NVRTC compiles it as is).

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_K) || !defined(WF_HIDDEN) || !defined(WF_GROUP) || !defined(WF_ZP_V1) || !defined(WF_RMS_EPS)
#error "gemv_int4_allreduce_rmsnorm_ref needs -DWF_TP -DWF_BATCH -DWF_K -DWF_HIDDEN -DWF_GROUP -DWF_ZP_V1 -DWF_RMS_EPS (the [build] defines of its ABI file)"
#endif
#ifndef WF_SPIN_BUDGET
#define WF_SPIN_BUDGET (1u << 26) // polls before a wait gives up (≥ 4 s with 64 ns sleeps)
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
constexpr unsigned TP = WF_TP;       // ranks
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned K = WF_K;         // this rank's K-shard
constexpr unsigned N = WF_HIDDEN;    // outputs (features of the residual stream)
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;
constexpr float EPS = WF_RMS_EPS;    // RMSNorm epsilon

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 32, WAVES = WG / WAVE;
constexpr unsigned COLS = 64;                   // columns per workgroup = lanes per K-slice
constexpr unsigned SLICES = WG / COLS;          // K-slices per workgroup
constexpr unsigned GRID = (N + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned KW = K / 8;                  // packed K-rows
constexpr unsigned WPG = GROUP / 8;             // packed K-rows per group
constexpr unsigned CHUNK = WPG < 16 ? WPG : 16; // packed K-rows fetched at once, all of one group
constexpr unsigned NCHUNK = (KW + CHUNK - 1) / CHUNK;
constexpr bool RAGGED = KW % CHUNK != 0;        // K ends inside a group: the last chunk is short
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");
static_assert(WPG <= 16 || WPG % 16 == 0, "a chunk never straddles two groups");
static_assert(GRID <= WG, "one lane per norm partial sum");

// One chunk of a lane's column: CHUNK packed K-rows and the group's scale and zero point.
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

static __device__ __forceinline__ void consume(const Chunk& ch, const f16* __restrict__ x,
                                               unsigned c, float (&acc)[BATCH]) {
    float part[BATCH][2]; // two independent FMA chains per batch row
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) part[b][0] = part[b][1] = 0.0f;
#pragma unroll
    for (unsigned i = 0; i < CHUNK; ++i) {
        const unsigned kw = c * CHUNK + i;
        if (RAGGED && kw >= KW) break;
        float d[8]; // q − z of rows 8·kw … 8·kw + 7, exact
#pragma unroll
        for (unsigned j = 0; j < 8; ++j)
            d[j] = __uint_as_float(0x4B000000u | ((ch.q[i] >> (4 * j)) & 0xFu)) - ch.zf;
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            // the 8 activations of this packed row: one 16-byte load, the same address in every lane
            const uint4 xv = *reinterpret_cast<const uint4*>(x + b * K + kw * 8);
            const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (unsigned j = 0; j < 8; ++j) {
                const float xf = f16_to_f32((f16)(xw[j / 2] >> (16 * (j % 2))));
                part[b][j % 2] = fmaf(d[j], xf, part[b][j % 2]);
            }
        }
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) acc[b] = fmaf(ch.s, part[b][0] + part[b][1], acc[b]);
}

// Wait until *flag reaches `target` (flags only grow; the signed difference survives wrap-around).
// Bounded (§5.10): after SPIN_BUDGET polls, write `code` to the error word and stop waiting.
static __device__ __forceinline__ void wait_flag(unsigned* flag, unsigned target, unsigned* error_word,
                                                 unsigned code) {
    // §5.10: a bounded spin of relaxed polls at system scope (the flag is in peer memory)
    for (unsigned polls = 1; (int)(__nv_atomic_load_n(flag, __NV_ATOMIC_RELAXED, __NV_THREAD_SCOPE_SYSTEM) - target) < 0; ++polls) {
        if (polls == SPIN_BUDGET) {
            __nv_atomic_store_n(error_word, code, __NV_ATOMIC_RELAXED, __NV_THREAD_SCOPE_SYSTEM);
            return;
        }
        __nanosleep(64);
    }
    // §5.3: acquire (system scope) the flag before anything it publishes is read
    (void)__nv_atomic_load_n(flag, __NV_ATOMIC_ACQUIRE, __NV_THREAD_SCOPE_SYSTEM);
}

// Wait until the grid counter reaches `target`, like wait_flag but at device scope.
static __device__ __forceinline__ void wait_counter(unsigned* counter, unsigned target, unsigned* error_word,
                                                    unsigned code) {
    // §5.10: a bounded spin of relaxed polls at device scope
    for (unsigned polls = 1; (int)(__nv_atomic_load_n(counter, __NV_ATOMIC_RELAXED, __NV_THREAD_SCOPE_DEVICE) - target) < 0; ++polls) {
        if (polls == SPIN_BUDGET) {
            __nv_atomic_store_n(error_word, code, __NV_ATOMIC_RELAXED, __NV_THREAD_SCOPE_SYSTEM);
            return;
        }
        __nanosleep(64);
    }
    // §5.2: acquire (device scope): every workgroup's writes before its arrival, which went through
    // global memory, are visible after this
    (void)__nv_atomic_load_n(counter, __NV_ATOMIC_ACQUIRE, __NV_THREAD_SCOPE_DEVICE);
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (unsigned m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m, 32);
    return v;
}

// Sum v[b] over the workgroup's lanes: butterfly within each warp, then warps in order through LDS.
// The result is in out[b] for every lane. Same order in every workgroup. Call in uniform control flow.
static __device__ __forceinline__ void block_sum(float (&v)[BATCH], float (&wsum)[WAVES][BATCH],
                                                 float (&out)[BATCH]) {
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        const float w = warp_sum(v[b]);
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

extern "C" __global__ void __launch_bounds__(WG)
gemv_int4_allreduce_rmsnorm_ref(
    const unsigned* __restrict__ w_down_qweight, // u32 [K/8, N], this rank's K-shard
    const f16* __restrict__ w_down_scales,       // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_down_qzeros,  // u32 [ceil(K/G), N/8]
    const f16* __restrict__ x,                   // f16 [BATCH, K], this rank's shard; 16-byte aligned
    const f16* __restrict__ residual,            // f16 [BATCH, N]
    const f16* __restrict__ norm_w,              // f16 [N], RMSNorm weights (Gemma 1 + w folded in)
    f16* __restrict__ residual_out,              // f16 [BATCH, N]
    f16* __restrict__ normed,                    // f16 [BATCH, N]
    const unsigned rank,                         // this rank, 0 ≤ rank < TP
    f16* const* ar_payload,                      // peer table, slot p = rank p: f16 [2][BATCH][N] (halves by epoch parity)
    unsigned* const* ar_flags,                   // peer table, slot p = rank p: u32 [GRID] flags, zeroed once
    const unsigned epoch,                        // 1, 2, 3, … per launch on these flags and counter
    float* norm_partials,                        // f32 [GRID][BATCH] scratch: each tile's sums of squares
    unsigned* grid_counter,                      // u32 [1] grid-barrier counter, zeroed once
    unsigned* error_word)                        // u32 [1], zero before the launch
{
    __shared__ float red[SLICES][BATCH][COLS]; // per-slice column sums
    __shared__ float wsum[WAVES][BATCH];       // per-warp sums of the norm reductions

    const unsigned lane_col = threadIdx.x % COLS;
    const unsigned slice = threadIdx.x / COLS; // uniform within each warp
    const unsigned col = blockIdx.x * COLS + lane_col;
    const unsigned half = (epoch & 1u) * BATCH * N;

    // ---- 1. this rank's partial sums for the tile ----
    float acc[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) acc[b] = 0.0f;
    // Columns past N are masked, not returned from: every lane reaches the barriers below (§5.8).
    if (col < N && slice < NCHUNK) {
        unsigned c = slice;
        Chunk cur;
        fetch(cur, w_down_qweight, w_down_scales, w_down_qzeros, c, col);
        for (;;) {
            const unsigned next = c + SLICES;
            Chunk nxt;
            if (next < NCHUNK) fetch(nxt, w_down_qweight, w_down_scales, w_down_qzeros, next, col); // in flight while `cur` is used
            consume(cur, x, c, acc);
            if (next >= NCHUNK) break;
            cur = nxt;
            c = next;
        }
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) red[slice][b][lane_col] = acc[b];
    // §5.8: workgroup barrier in uniform control flow (tails were masked above)
    __syncthreads();

    // Lane t < COLS owns column n of the tile from here on ("point lanes").
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
        mine[b] = f32_to_f16(v);
    }

    // ---- 2. allreduce ----
    if (TP > 1) {
        if (point) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) ar_payload[rank][half + b * N + n] = mine[b];
        }
        // §5.3: every lane's payload stores happen before the flag (workgroup barrier, then the
        // release store below, which is cumulative over them)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __nv_atomic_store_n(&ar_flags[rank][blockIdx.x], epoch, __NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_SYSTEM);
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
            for (unsigned p = 0; p < TP; ++p) sum += f16_to_f32(p == rank ? mine[b] : ar_payload[p][half + b * N + n]);
            const f16 out = f32_to_f16(sum + f16_to_f32(residual[b * N + n]));
            residual_out[b * N + n] = out;
            r[b] = f16_to_f32(out); // the norm's input is the rounded residual
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
        // device scope publishes this workgroup's partial sums with it
        __nv_atomic_fetch_add(grid_counter, 1u, __NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_DEVICE);
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
        const float w = f16_to_f32(norm_w[n]);
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float inv_rms = 1.0f / sqrtf(total[b] / (float)N + EPS);
            normed[b * N + n] = f32_to_f16(r[b] * inv_rms * w); // one rounding
        }
    }
}
