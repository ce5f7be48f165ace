// allreduce_int8_ref: hand-written reference for `allreduce_int8` (DESIGN.md §3.8), gfx906, HIP.
// One launch per rank of a TP group.
//
//   y[b, i] = round_f16( Σ_{p < TP} q_p[b, i] · s_p[b, i / BLOCK] )
//
// the compressed allreduce: each rank quantises its partial per batch row and block of BLOCK
// features, s = max|x| / 127 (FP32), q = clamp(round_half_away(x / s), −127, 127) (0 where s = 0),
// publishes the INT8 codes and FP32 scales (≈ half the bytes of FP16), and every rank dequantises
// and sums in FP32 in ascending rank order (bit-identical on every rank), one rounding at the end.
// With one rank the quantisation round trip still happens (the op level says so), without any
// exchange.
//
// Shapes are compile-time defines, listed in the [build] table of allreduce_int8.tp<N>.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_HIDDEN=… -DWF_INT8_BLOCK=…
// Launch per rank: ceil(HIDDEN / 1024) workgroups of exactly 256 lanes (4 waves of 64), arguments in
// signature order.
//
// Work split: lane t of workgroup w owns features 1024w + 4t … + 3, so each half of a wave (32
// lanes) covers one 128-feature block: the block's absmax is a 5-step butterfly max within it.
//
// Protocol: exactly as allreduce_residual.hip (pull; per-workgroup epoch flags released at system
// scope after the payload stores and acquired at system scope before peer reads; codes and scales
// double-buffered by epoch parity; bounded waits writing code 1 + peer rank to the error word).
//
// On AMD the flags live in uncached device memory and the payload in fine-grained memory (the
// ABI's `memory` fields), so polls and peer reads never hit a stale cache line (§5.12).

#include <hip/hip_runtime.h>

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_HIDDEN) || !defined(WF_INT8_BLOCK)
#error "allreduce_int8_ref needs -DWF_TP -DWF_BATCH -DWF_HIDDEN -DWF_INT8_BLOCK (the [build] defines of its ABI file)"
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
constexpr unsigned BLOCK = WF_INT8_BLOCK; // features per quantisation block

// ---- work split ----
constexpr unsigned WG = 256;
constexpr unsigned PER_LANE = 4;             // features per lane (one 8-byte access)
constexpr unsigned COLS = WG * PER_LANE;     // features per workgroup
constexpr unsigned GRID = (H + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(H % PER_LANE == 0, "features come 4 at a time");
constexpr unsigned LPB = BLOCK / PER_LANE; // lanes per quantisation block
static_assert(BLOCK % PER_LANE == 0 && LPB <= 32 && (LPB & (LPB - 1)) == 0 && H % BLOCK == 0,
              "a block is 4·2^k ≤ 128 features, within half a wave, and divides the features");
static_assert(GRID >= 1, "the launch grid (and the length of ar_flags)");

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

// q = clamp(round_half_away(x / s), −127, 127), and 0 where s = 0. Exact: y − trunc(y) is exact in
// FP32, so the half-way test is too.
static __device__ __forceinline__ int quantize(float x, float s) {
    const float y = s > 0.0f ? x / s : 0.0f;
    const int t = (int)y; // toward zero
    const float frac = y - (float)t;
    const int q = t + (frac >= 0.5f ? 1 : 0) - (frac <= -0.5f ? 1 : 0);
    return q < -127 ? -127 : (q > 127 ? 127 : q);
}

// Max over the LPB lanes of a quantisation block (butterfly; the same value in each of them).
static __device__ __forceinline__ float block_max(float v) {
#pragma unroll
    for (unsigned m = LPB / 2; m >= 1; m /= 2) v = fmaxf(v, __shfl_xor(v, (int)m, 64));
    return v;
}

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
allreduce_int8_ref(
    const f16* __restrict__ partial, // f16 [BATCH, H], this rank's partial sums; 8-byte aligned
    f16* __restrict__ y,             // f16 [BATCH, H]; 8-byte aligned
    const unsigned rank,             // this rank, 0 ≤ rank < TP
    signed char* const* ar_codes,    // peer table, slot p = rank p: i8 [2][BATCH][H] (halves by epoch parity)
    float* const* ar_scales,         // peer table, slot p = rank p: f32 [2][BATCH][H / BLOCK]
    unsigned* const* ar_flags,       // peer table, slot p = rank p: u32 [GRID] flags, zeroed once
    const unsigned epoch,            // 1, 2, 3, … per launch on these flags
    unsigned* error_word)            // u32 [1], zero before the launch
{
    const unsigned col = blockIdx.x * COLS + threadIdx.x * PER_LANE;
    const bool live = col < H; // whole blocks are live or not; the tail is masked (§5.8)
    const unsigned half = (epoch & 1u) * BATCH * H;               // codes
    const unsigned half_s = (epoch & 1u) * BATCH * (H / BLOCK);   // scales

    // 1. Quantise this lane's 4 features of every batch row (in uniform control flow: the block max
    //    is a cross-lane reduction).
    unsigned codes[BATCH]; // 4 INT8 codes, feature 4t + j in byte j
    float scale[BATCH];
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) {
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (live) unpack4(*reinterpret_cast<const u32x2*>(partial + b * H + col), x);
        const float amax = block_max(fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3]))));
        scale[b] = amax / 127.0f;
        codes[b] = 0;
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) codes[b] |= ((unsigned)quantize(x[j], scale[b]) & 0xFFu) << (8 * j);
    }

    if (TP > 1) {
        // 2. Publish this tile's codes and scales in this rank's payload.
        if (live) {
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) {
                *reinterpret_cast<unsigned*>(ar_codes[rank] + half + b * H + col) = codes[b];
                if (threadIdx.x % LPB == 0) ar_scales[rank][half_s + b * (H / BLOCK) + col / BLOCK] = scale[b];
            }
        }
        // §5.3: every lane's payload stores happen before the flag (the workgroup barrier waits for
        // this wave's stores to complete, s_waitcnt vmcnt(0), in every wave; then one lane releases)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __hip_atomic_store(&ar_flags[rank][blockIdx.x], epoch, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
        }
        // 3. Lane p waits for rank p's flag of this tile (§5.5: slot p of every table is rank p).
        if (threadIdx.x < TP && threadIdx.x != rank)
            wait_flag(&ar_flags[threadIdx.x][blockIdx.x], epoch, error_word, 1 + threadIdx.x);
        // §5.3, §5.8: every peer's flag is acquired before any lane reads peer data
        __syncthreads();
    }

    // 4. Dequantise and sum all ranks in rank order (FP32), one rounding.
    if (live) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (unsigned p = 0; p < TP; ++p) {
                const unsigned c = p == rank ? codes[b] : *reinterpret_cast<const unsigned*>(ar_codes[p] + half + b * H + col);
                const float s = p == rank ? scale[b] : ar_scales[p][half_s + b * (H / BLOCK) + col / BLOCK];
#pragma unroll
                for (unsigned j = 0; j < 4; ++j) sum[j] = fmaf((float)(signed char)(c >> (8 * j)), s, sum[j]);
            }
            *reinterpret_cast<u32x2*>(y + b * H + col) = pack4(sum);
        }
    }
}
