// allreduce_int8_ref: hand-written reference for `allreduce_int8` (DESIGN.md §3.8), sm_90, CUDA.
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
// Launch per rank: ceil(HIDDEN / 1024) workgroups of exactly 256 lanes, arguments in signature order.
//
// Work split: lane t of workgroup w owns features 1024w + 4t … + 3, so the 32 lanes of a warp
// cover one 128-feature block: the block's absmax is a 5-step butterfly max within the warp.
//
// Protocol: exactly as allreduce_residual.cu (pull; per-workgroup epoch flags released at system
// scope after the payload stores and acquired at system scope before peer reads; codes and scales
// double-buffered by epoch parity; bounded waits writing code 1 + peer rank to the error word).
//
// No CUDA header is needed (NVRTC compiles it as is).

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_HIDDEN) || !defined(WF_INT8_BLOCK)
#error "allreduce_int8_ref needs -DWF_TP -DWF_BATCH -DWF_HIDDEN -DWF_INT8_BLOCK (the [build] defines of its ABI file)"
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
              "a block is 4·2^k ≤ 128 features, within one warp, and divides the features");
static_assert(GRID >= 1, "the launch grid (and the length of ar_flags)");

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
    for (unsigned m = LPB / 2; m >= 1; m /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m, 32));
    return v;
}

extern "C" __global__ void __launch_bounds__(WG)
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
        if (live) unpack4(*reinterpret_cast<const uint2*>(partial + b * H + col), x);
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
        // §5.3: every lane's payload stores happen before the flag (workgroup barrier, then the
        // release store below, which is cumulative over them)
        __syncthreads();
        if (threadIdx.x == 0) {
            // §5.3: the publish ends with a release store at system scope; §5.4: the flag carries
            // the epoch and is never reset
            __nv_atomic_store_n(&ar_flags[rank][blockIdx.x], epoch, __NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_SYSTEM);
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
            *reinterpret_cast<uint2*>(y + b * H + col) = pack4(sum);
        }
    }
}
