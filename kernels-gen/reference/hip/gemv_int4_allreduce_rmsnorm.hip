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
// Shapes are compile-time defines, listed in the [build] table of gemv_int4_allreduce_rmsnorm.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_K=… (this rank's K-shard) -DWF_HIDDEN=… (N) -DWF_GROUP=… -DWF_ZP_V1=0|1 -DWF_RMS_EPS=…
// Launch per rank: ceil(HIDDEN / 64) workgroups of exactly 256 lanes (4 waves of 64), all resident
// at once (grid barrier, §5.9: launch cooperatively or check the co-resident capacity first);
// qweight and x 16-byte aligned, scales 8-byte aligned.
//
// 1. GEMV: gemv_int4.hip's kernel (the same dequantisation, hot loop, LDS staging and general
//    last round, repeated here so the file reads on its own) with 64-column tiles, so the grid
//    stays at 80 workgroups (2 per CU are enough for co-residency at every batch): lane t is
//    (quad t % 16, slice t / 16); it owns 4 adjacent columns of the tile and reads them with one
//    16-byte load per packed K-row (16 lanes of a slice read 256 contiguous bytes of a row). K is
//    cut into units of UNIT = 4 packed rows; round r gives unit 16r + s to slice s (34 rounds at
//    TP = 1, K = 17408; at TP = 4 and 8 the units do not divide evenly and the last round takes
//    the general path). A unit is one iteration of the hot loop: qzeros word, 4 scales and 4
//    weight loads issued first, then 128 weights per lane with v_and_or_b32, v_pk_add_f16 /
//    v_pk_fma_f16 (q − z exact) and v_dot2_f32_f16, the scale once per unit (v_fma_mix_f32).
//    The activations are staged in LDS as dot2 pairs one phase of rounds at a time (10 rounds
//    at batch 1). Each lane's FP32 sums are added over its wave's 4 slices by a butterfly
//    (xor 16, 32), then the 4 waves' sums in LDS in wave order; one FP16 rounding. hipcc 5.2:
//    60–62 VGPRs at batch 1 (occupancy 4, 76 bytes per lane in flight, 1.81 VALU per weight in
//    the hot loop), 120–124 at batch 8 (occupancy 2, what co-residency needs), no spills.
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
// ABI's `memory` fields), so polls and peer reads never hit a stale cache line (§5.12).

#include <hip/hip_runtime.h>

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_K) || !defined(WF_HIDDEN) || !defined(WF_GROUP) || !defined(WF_ZP_V1) || !defined(WF_RMS_EPS)
#error "gemv_int4_allreduce_rmsnorm_ref needs -DWF_TP -DWF_BATCH -DWF_K -DWF_HIDDEN -DWF_GROUP -DWF_ZP_V1 -DWF_RMS_EPS (the [build] defines of its ABI file)"
#endif
#ifndef WF_SPIN_BUDGET
#define WF_SPIN_BUDGET (1u << 26) // polls before a wait gives up (seconds, with s_sleep between polls)
#endif

// ---- shapes (per rank) ----
constexpr unsigned TP = WF_TP;       // ranks
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once
constexpr unsigned K = WF_K;         // this rank's K-shard
constexpr unsigned N = WF_HIDDEN;    // outputs (features of the residual stream)
constexpr unsigned GROUP = WF_GROUP; // rows of K per scale / zero point
constexpr unsigned ZP_ADD = WF_ZP_V1 ? 1u : 0u;
constexpr float EPS = WF_RMS_EPS;    // RMSNorm epsilon

// ---- work split ----
constexpr unsigned WG = 256;                  // lanes per workgroup
constexpr unsigned WAVE = 64;
constexpr unsigned QUAD = 4;                  // columns per lane: one 16-byte load per packed row
constexpr unsigned LPS = 16;                  // lanes per slice
constexpr unsigned COLS = LPS * QUAD;         // columns per workgroup
constexpr unsigned SLICES = WG / LPS;         // K-slices per workgroup
constexpr unsigned WAVES = WG / WAVE;
constexpr unsigned GRID = (N + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;
constexpr unsigned KW = K / 8;                // packed K-rows
constexpr unsigned WPG = GROUP / 8;           // packed K-rows per group
constexpr unsigned UNIT = WPG % 4 == 0 ? 4 : WPG % 2 == 0 ? 2 : 1; // packed rows per unit, within one group
constexpr unsigned NUNIT = (KW + UNIT - 1) / UNIT;
constexpr bool RAGGED = KW % UNIT != 0;       // K ends inside a unit: its last rows are padding
constexpr unsigned NROUND = (NUNIT + SLICES - 1) / SLICES;
constexpr bool GROUP_STEP = (SLICES * UNIT) % WPG == 0; // a round advances a whole number of groups

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(GRID <= WG, "one lane per norm partial sum");
static_assert(K % 8 == 0 && N % 8 == 0 && GROUP % 8 == 0, "GPTQ packs 8 rows per word and 8 zero points per word");

// The INT4 dequantisation, dot product and activation staging the four gfx906 INT4 references
// share (one copy; it reads the shapes and work split above).
#include "gemv_int4_loop.h"

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
// co-resident on a 60-CU MI50 at every batch size (§5.9); the LDS (12.8–13 KB) allows 4.
extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG), amdgpu_waves_per_eu(2)))
gemv_int4_allreduce_rmsnorm_ref(
    const unsigned* __restrict__ w_down_qweight, // u32 [K/8, N], this rank's K-shard
    const f16* __restrict__ w_down_scales,       // f16 [ceil(K/G), N]
    const unsigned* __restrict__ w_down_qzeros,  // u32 [ceil(K/G), N/8]
    const f16* __restrict__ x,                   // f16 [BATCH, K], this rank's shard
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
    __shared__ __attribute__((aligned(16))) unsigned char lds[LDS_BYTES]; // activations, then the cross-wave sums
    __shared__ float wsum[WAVES][BATCH];                                 // per-wave sums of the norm reductions

    const unsigned quad = threadIdx.x % LPS;
    const unsigned slice = threadIdx.x / LPS;
    const unsigned n0 = blockIdx.x * COLS + quad * QUAD;
    // A lane past N (the tail tile) computes on the last quad and stores nothing: the tail is
    // masked at the store (§5.8: no early return), and the loop has no lane-divergent branches.
    const unsigned nl = n0 < N ? n0 : N - QUAD;
    const unsigned half = (epoch & 1u) * BATCH * N;

    // ---- 1. this rank's partial sums for the tile ----

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

        phase_rounds(lds, w_down_qweight, w_down_scales, w_down_qzeros, p, slice, nl, acc);
    }
    last_round(lds, w_down_qweight, w_down_scales, w_down_qzeros, slice, nl, acc);

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
    // Lane t < COLS (wave 0) owns column n of the tile from here on ("point lanes").
    const unsigned n = blockIdx.x * COLS + threadIdx.x;
    const bool point = threadIdx.x < COLS && n < N;
    f16 mine[BATCH]; // this rank's partial, rounded: the published value
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        float v = 0.0f;
        if (point) {
            v = red[b * COLS + threadIdx.x];
#pragma unroll
            for (unsigned w = 1; w < WAVES; ++w) v += red[(w * BATCH + b) * COLS + threadIdx.x];
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
