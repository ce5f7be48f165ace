// allreduce_residual_ref: hand-written reference for `allreduce_residual` (DESIGN.md §3.5),
// gfx906, HIP. One launch per rank of a TP group.
//
//   residual_out[b, i] = round_f16( Σ_{p < TP} partial_p[b, i] + residual[b, i] )
//
// The sum over ranks is FP32 in ascending rank order (p = 0, 1, …), so every rank computes
// bit-identical results; one FP16 rounding at the end.
//
// Shapes are compile-time defines, listed in the [build] table of allreduce_residual.tp<N>.abi.toml:
//   -DWF_TP=… -DWF_BATCH=… -DWF_HIDDEN=…
// Launch per rank: ceil(HIDDEN / 1024) workgroups of exactly 256 lanes (4 waves of 64), arguments in
// signature order.
//
// Protocol (pull, DESIGN.md §5.3, §5.5, §5.12). Workgroup w owns features [1024w, 1024w + 1024),
// 4 per lane (8-byte accesses), for every batch row. It copies this rank's partial for its tile
// into this rank's `ar_payload`, and releases its flag `ar_flags[rank][w] = epoch` (system scope).
// Then lane p < TP (p ≠ rank) waits for rank p's flag of the same tile to reach the epoch (bounded,
// acquire at system scope); after a workgroup barrier every lane reads the peers' slices, adds all
// ranks in rank order plus the residual, rounds and stores. Every rank publishes before it waits,
// so no cycle of waits can form; peer memory is only read, never written or updated atomically.
//
// Synchronisation state (the runtime's conventions, DESIGN.md §5.4): the flags are zeroed once and
// never reset; launch e (epoch = 1, 2, 3, …) stores e and waits for e, compared as a signed
// difference so that wrap-around at 2^32 is harmless. The payload is double-buffered by epoch
// parity: launch e writes half e & 1, so a slow peer still reading this rank's launch e − 1 data
// reads the other half; launch e + 1 rewrites half e & 1 only after it has acquired every peer's
// flag e + 1, which each peer released after finishing its launch e (and so its reads of it).
// The input is copied into the payload (10 KB of local writes) rather than registered as a peer
// array, so reuse depends only on these epochs, not on when the caller overwrites `partial`.
// A wait that exceeds its budget writes its code (1 + the peer's rank) to the error word and gives
// up, so the host reports a timeout instead of hanging (§5.10).
//
// On AMD the flags live in uncached device memory and the payload in fine-grained memory (the
// ABI's `memory` fields), so polls and peer reads never hit a stale cache line (§5.12).

#include <hip/hip_runtime.h>

#if !defined(WF_TP) || !defined(WF_BATCH) || !defined(WF_HIDDEN)
#error "allreduce_residual_ref needs -DWF_TP -DWF_BATCH -DWF_HIDDEN (the [build] defines of its ABI file)"
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

// ---- work split ----
constexpr unsigned WG = 256;
constexpr unsigned PER_LANE = 4;             // features per lane (one 8-byte access)
constexpr unsigned COLS = WG * PER_LANE;     // features per workgroup
constexpr unsigned GRID = (H + COLS - 1) / COLS; // workgroups per rank = flags per rank
constexpr unsigned SPIN_BUDGET = WF_SPIN_BUDGET;

static_assert(TP >= 1 && TP <= 8 && BATCH >= 1 && BATCH <= 8, "TP 1..8, batch 1..8");
static_assert(H % PER_LANE == 0, "features come 4 at a time");
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

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
allreduce_residual_ref(
    const f16* __restrict__ partial,  // f16 [BATCH, H], this rank's partial sums; 8-byte aligned
    const f16* __restrict__ residual, // f16 [BATCH, H]; 8-byte aligned
    f16* __restrict__ residual_out,   // f16 [BATCH, H]; 8-byte aligned
    const unsigned rank,              // this rank, 0 ≤ rank < TP
    f16* const* ar_payload,           // peer table, slot p = rank p: f16 [2][BATCH][H] (halves by epoch parity)
    unsigned* const* ar_flags,        // peer table, slot p = rank p: u32 [GRID] flags, zeroed once
    const unsigned epoch,             // 1, 2, 3, … per launch on these flags
    unsigned* error_word)             // u32 [1], zero before the launch
{
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

    // 3. All ranks in rank order, plus the residual, one rounding.
    if (live) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (unsigned p = 0; p < TP; ++p) {
                const u32x2 v = p == rank ? mine[b] : *reinterpret_cast<const u32x2*>(ar_payload[p] + half + b * H + col);
                float f[4];
                unpack4(v, f);
#pragma unroll
                for (unsigned j = 0; j < 4; ++j) sum[j] += f[j];
            }
            float r[4];
            unpack4(*reinterpret_cast<const u32x2*>(residual + b * H + col), r);
#pragma unroll
            for (unsigned j = 0; j < 4; ++j) sum[j] += r[j];
            *reinterpret_cast<u32x2*>(residual_out + b * H + col) = pack4(sum);
        }
    }
}
