// allreduce_residual_rmsnorm_ref: hand-written reference for `allreduce_residual_rmsnorm`
// (DESIGN.md §3.6), sm_90, CUDA. One launch per rank of a TP group.
//
//   r[b, i]            = round_f16( Σ_{p < TP} partial_p[b, i] + residual[b, i] )   → residual_out
//   normed[b, i]       = round_f16( r[b, i] · (1 / sqrt(mean_j r[b, j]² + eps)) · w[i] )
//
// Two outputs: the new residual stream and its normalised copy (the residual is never overwritten
// by its normalised value, §5.7). The rank sum is FP32 in ascending rank order, so every rank
// computes bit-identical results; the norm reads the *rounded* residual, as the op level says.
//
// Shapes are compile-time defines, listed in the [build] table of allreduce_residual_rmsnorm.tp<N>.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_HIDDEN=… -DWF_RMS_EPS=…
// Launch per rank: ceil(HIDDEN / 1024) workgroups of exactly 256 lanes, all resident at once (grid
// barrier, §5.9: launch cooperatively or check the co-resident capacity first).
//
// Allreduce protocol: exactly as allreduce_residual.cu (pull; per-workgroup epoch flags; payload
// double-buffered by epoch parity; bounded waits with codes 1 + peer rank).
//
// RMSNorm: each workgroup sums the squares of its tile per batch row (lanes, then warps through
// LDS, in a fixed order) and lane 0 writes the tile's sums to `norm_partials` in global memory (never
// LDS: other workgroups read them, §5.2). A grid barrier follows: one arrival per workgroup on
// `grid_counter`, which is zeroed once and never reset (§5.4): the barrier of launch e completes
// when the counter reaches e·GRID. Its wait is bounded too (code TP + 1). Then every workgroup adds
// all GRID partial sums in the same order, so every workgroup (and every rank) uses the same 1/rms.
// `norm_partials` is written before and read after the barrier of the same launch, and a rank's
// launches run in stream order, so it needs no epoch stamp (§5.11).
//
// No CUDA header is needed (NVRTC compiles it as is).

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_HIDDEN) || !defined(WF_RMS_EPS)
#error "allreduce_residual_rmsnorm_ref needs -DWF_TP -DWF_BATCH -DWF_HIDDEN -DWF_RMS_EPS (the [build] defines of its ABI file)"
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
constexpr unsigned H = WF_HIDDEN;    // features
constexpr float EPS = WF_RMS_EPS;    // RMSNorm epsilon

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 32, WAVES = WG / WAVE;
constexpr unsigned PER_LANE = 4;             // features per lane (one 8-byte access)
constexpr unsigned COLS = WG * PER_LANE;     // features per workgroup
constexpr unsigned GRID = (H + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(H % PER_LANE == 0, "features come 4 at a time");
static_assert(GRID >= 1 && GRID <= WG, "the launch grid (and the length of ar_flags); one lane per partial sum");

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

static __device__ __forceinline__ void unpack4(uint2 v, float (&f)[4]) {
    f[0] = f16_to_f32((f16)v.x);
    f[1] = f16_to_f32((f16)(v.x >> 16));
    f[2] = f16_to_f32((f16)v.y);
    f[3] = f16_to_f32((f16)(v.y >> 16));
}

static __device__ __forceinline__ uint2 pack4(const float (&f)[4]) { // one rounding per value
    uint2 v;
    v.x = (unsigned)f32_to_f16(f[0]) | ((unsigned)f32_to_f16(f[1]) << 16);
    v.y = (unsigned)f32_to_f16(f[2]) | ((unsigned)f32_to_f16(f[3]) << 16);
    return v;
}

extern "C" __global__ void __launch_bounds__(WG)
allreduce_residual_rmsnorm_ref(
    const f16* __restrict__ partial,  // f16 [BATCH, H], this rank's partial sums; 8-byte aligned
    const f16* __restrict__ residual, // f16 [BATCH, H]; 8-byte aligned
    const f16* __restrict__ norm_w,   // f16 [H], RMSNorm weights (Gemma 1 + w folded in); 8-byte aligned
    f16* __restrict__ residual_out,   // f16 [BATCH, H]; 8-byte aligned
    f16* __restrict__ normed,         // f16 [BATCH, H]; 8-byte aligned
    const unsigned rank,              // this rank, 0 ≤ rank < TP
    f16* const* ar_payload,           // peer table, slot p = rank p: f16 [2][BATCH][H] (halves by epoch parity)
    unsigned* const* ar_flags,        // peer table, slot p = rank p: u32 [GRID] flags, zeroed once
    const unsigned epoch,             // 1, 2, 3, … per launch on these flags and counter
    float* norm_partials,             // f32 [GRID][BATCH] scratch: each tile's sums of squares
    unsigned* grid_counter,           // u32 [1] grid-barrier counter, zeroed once
    unsigned* error_word)             // u32 [1], zero before the launch
{
    __shared__ float wsum[WAVES][BATCH];

    const unsigned col = blockIdx.x * COLS + threadIdx.x * PER_LANE;
    const bool live = col < H; // the tail is masked, not returned from (§5.8)
    const unsigned half = (epoch & 1u) * BATCH * H;

    uint2 mine[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
        mine[b] = live ? *reinterpret_cast<const uint2*>(partial + b * H + col) : uint2{0u, 0u};

    if (TP > 1) {
        // 1. Publish this tile of the partial in this rank's payload.
        if (live) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b)
                *reinterpret_cast<uint2*>(ar_payload[rank] + half + b * H + col) = mine[b];
        }
        // §5.3: every lane's payload stores happen before the flag (workgroup barrier, then the
        // release store below, which is cumulative over them)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __nv_atomic_store_n(&ar_flags[rank][blockIdx.x], epoch, __NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_SYSTEM);
        }
        // 2. Lane p waits for rank p's flag of this tile (§5.5: slot p of every table is rank p).
        if (threadIdx.x < TP && threadIdx.x != rank)
            wait_flag(&ar_flags[threadIdx.x][blockIdx.x], epoch, error_word, 1 + threadIdx.x);
        // §5.3, §5.8: every peer's flag is acquired before any lane reads peer data
        __syncthreads();
    }

    // 3. All ranks in rank order, plus the residual, one rounding: the new residual stream. Its
    //    rounded values stay in registers for the norm.
    float r[BATCH][4], sq[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        sq[b] = 0.0f;
        if (live) {
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (unsigned p = 0; p < TP; ++p) {
                const uint2 v = p == rank ? mine[b] : *reinterpret_cast<const uint2*>(ar_payload[p] + half + b * H + col);
                float f[4];
                unpack4(v, f);
#pragma unroll
                for (unsigned j = 0; j < 4; ++j) sum[j] += f[j];
            }
            float res[4];
            unpack4(*reinterpret_cast<const uint2*>(residual + b * H + col), res);
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) sum[j] += res[j];
            const uint2 out = pack4(sum);
            *reinterpret_cast<uint2*>(residual_out + b * H + col) = out;
            unpack4(out, r[b]); // the norm's input is the rounded residual
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) sq[b] = fmaf(r[b][j], r[b][j], sq[b]);
        }
    }

    // 4. This tile's sums of squares, to global memory for every other workgroup (§5.2: not LDS).
    float tile_sq[BATCH];
    block_sum(sq, wsum, tile_sq);
    if (threadIdx.x == 0) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) norm_partials[blockIdx.x * BATCH + b] = tile_sq[b];
    }

    // 5. Grid barrier (§5.9: every workgroup is resident).
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

    // 6. Every workgroup adds the GRID partial sums in the same order: the same 1/rms everywhere.
    float part[BATCH], total[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) part[b] = threadIdx.x < GRID ? norm_partials[threadIdx.x * BATCH + b] : 0.0f;
    block_sum(part, wsum, total);

    // 7. Normalise the rounded residual, one rounding.
    if (live) {
        float w[4];
        unpack4(*reinterpret_cast<const uint2*>(norm_w + col), w);
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float inv_rms = 1.0f / sqrtf(total[b] / (float)H + EPS);
            float y[4];
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) y[j] = r[b][j] * inv_rms * w[j];
            *reinterpret_cast<uint2*>(normed + b * H + col) = pack4(y);
        }
    }
}
