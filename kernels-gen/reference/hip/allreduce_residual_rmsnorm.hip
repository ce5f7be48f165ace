// allreduce_residual_rmsnorm_ref: hand-written reference for `allreduce_residual_rmsnorm`
// (DESIGN.md §3.6), gfx906, HIP. One launch per rank of a TP group.
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
// Launch per rank: ceil(HIDDEN / 1024) workgroups of exactly 256 lanes (4 waves of 64), all resident
// at once (grid barrier, §5.9: launch cooperatively or check the co-resident capacity first).
//
// Allreduce protocol: exactly as allreduce_residual.hip (pull; per-workgroup epoch flags; payload
// double-buffered by epoch parity; bounded waits with codes 1 + peer rank).
//
// RMSNorm: each workgroup sums the squares of its tile per batch row (lanes, then waves through
// LDS, in a fixed order) and lane 0 writes the tile's sums to `norm_partials` in global memory (never
// LDS: other workgroups read them, §5.2). A grid barrier follows: one arrival per workgroup on
// `grid_counter`, which is zeroed once and never reset (§5.4): the barrier of launch e completes
// when the counter reaches e·GRID. Its wait is bounded too (code TP + 1). Then every workgroup adds
// all GRID partial sums in the same order, so every workgroup (and every rank) uses the same 1/rms.
// `norm_partials` is written before and read after the barrier of the same launch, and a rank's
// launches run in stream order, so it needs no epoch stamp (§5.11).
//
// On AMD the flags live in uncached device memory and the payload in fine-grained memory (the
// ABI's `memory` fields), so polls and peer reads never hit a stale cache line (§5.12).

#include <hip/hip_runtime.h>

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_HIDDEN) || !defined(WF_RMS_EPS)
#error "allreduce_residual_rmsnorm_ref needs -DWF_TP -DWF_BATCH -DWF_HIDDEN -DWF_RMS_EPS (the [build] defines of its ABI file)"
#endif
#ifndef WF_SPIN_BUDGET
#define WF_SPIN_BUDGET (1u << 26) // polls before a wait gives up (seconds, with s_sleep between polls)
#endif

typedef _Float16 f16;
typedef unsigned u32x2 __attribute__((ext_vector_type(2)));

// ---- shapes (per rank) ----
constexpr unsigned TP = WF_TP;       // ranks
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned H = WF_HIDDEN;    // features
constexpr float EPS = WF_RMS_EPS;    // RMSNorm epsilon

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 64, WAVES = WG / WAVE;
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

static __device__ __forceinline__ void unpack4(u32x2 v, float (&f)[4]) {
    f[0] = (float)__builtin_bit_cast(f16, (unsigned short)v.x);
    f[1] = (float)__builtin_bit_cast(f16, (unsigned short)(v.x >> 16));
    f[2] = (float)__builtin_bit_cast(f16, (unsigned short)v.y);
    f[3] = (float)__builtin_bit_cast(f16, (unsigned short)(v.y >> 16));
}

static __device__ __forceinline__ unsigned bits(float f) { // one rounding (nearest even)
    return __builtin_bit_cast(unsigned short, (f16)f);
}

static __device__ __forceinline__ u32x2 pack4(const float (&f)[4]) {
    u32x2 v;
    v.x = bits(f[0]) | (bits(f[1]) << 16);
    v.y = bits(f[2]) | (bits(f[3]) << 16);
    return v;
}

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
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

    u32x2 mine[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b)
        mine[b] = live ? *reinterpret_cast<const u32x2*>(partial + b * H + col) : u32x2(0u);

    if (TP > 1) {
        // 1. Publish this tile of the partial in this rank's payload.
        if (live) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b)
                *reinterpret_cast<u32x2*>(ar_payload[rank] + half + b * H + col) = mine[b];
        }
        // §5.3: every lane's payload stores happen before the flag (the workgroup barrier waits for
        // this wave's stores to complete, s_waitcnt vmcnt(0), in every wave; then one lane releases)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __hip_atomic_store(&ar_flags[rank][blockIdx.x], epoch, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
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
                const u32x2 v = p == rank ? mine[b] : *reinterpret_cast<const u32x2*>(ar_payload[p] + half + b * H + col);
                float f[4];
                unpack4(v, f);
#pragma unroll
                for (unsigned j = 0; j < 4; ++j) sum[j] += f[j];
            }
            float res[4];
            unpack4(*reinterpret_cast<const u32x2*>(residual + b * H + col), res);
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) sum[j] += res[j];
            const u32x2 out = pack4(sum);
            *reinterpret_cast<u32x2*>(residual_out + b * H + col) = out;
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
        // agent scope publishes this workgroup's partial sums with it
        __hip_atomic_fetch_add(grid_counter, 1u, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
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
        unpack4(*reinterpret_cast<const u32x2*>(norm_w + col), w);
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float inv_rms = 1.0f / sqrtf(total[b] / (float)H + EPS);
            float y[4];
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) y[j] = r[b][j] * inv_rms * w[j];
            *reinterpret_cast<u32x2*>(normed + b * H + col) = pack4(y);
        }
    }
}
