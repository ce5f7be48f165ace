// gemv_f16_ref: hand-written reference for `gemv_f16` (DESIGN.md §3.1), sm_90, CUDA.
//
//   y[b, n] = round_f16( Σ_k W[n, k] · x[b, k] )   b < BATCH, n < N;   W FP16 [N, K] row-major
//
// Shapes are compile-time defines, listed in the [build] table of gemv_f16.tp<N>.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=…
// Launch: ceil(N / 16) workgroups of exactly 256 lanes, arguments in signature order.
//
// Work split. Each warp owns 2 rows of W (a workgroup: 8 warps, 16 rows) and walks them along K:
// lane l reads halves [8l, 8l + 8) of each 256-half step, so a warp reads 512 contiguous bytes of
// a row per 16-byte load. Four steps are loaded before any is used (8 loads in flight per lane).
// The activations of a step are loaded once per lane and used for both rows. Products and sums are
// FP32; each lane's partial sum is reduced across the warp with butterfly shuffles (a whole row
// belongs to one warp, so no LDS and no workgroup barrier are needed), and lane 0 rounds once to
// FP16 and stores.
//
// No CUDA header is needed (NVRTC compiles it as is): FP16 values are kept as their 16 bits and
// converted with one PTX instruction each.

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH)
#error "gemv_f16_ref needs -DWF_K -DWF_N -DWF_BATCH (the [build] defines of its ABI file)"
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

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (unsigned m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m, 32);
    return v;
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output rows of W
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 32, WAVES = WG / WAVE;
constexpr unsigned ROWS = 2;                      // rows per warp
constexpr unsigned ROWS_PER_WG = WAVES * ROWS;    // 16
constexpr unsigned STEP = WAVE * 8;               // halves of a row per warp-wide 16-byte load
constexpr unsigned UNROLL = 4;                    // steps loaded before use
constexpr bool RAGGED = K % (STEP * UNROLL) != 0; // the last steps are partly past K

static_assert(BATCH >= 1 && BATCH <= 8, "batch 1..8");
static_assert(K % 8 == 0, "rows are read 16 bytes at a time");

static __device__ __forceinline__ void unpack8(const uint4 v, float (&f)[8]) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (unsigned j = 0; j < 8; ++j) f[j] = f16_to_f32((f16)(w[j / 2] >> (16 * (j % 2))));
}

extern "C" __global__ void __launch_bounds__(WG)
gemv_f16_ref(
    const f16* __restrict__ w, // f16 [N, K] row-major, 16-byte aligned
    const f16* __restrict__ x, // f16 [BATCH, K], 16-byte aligned
    f16* __restrict__ y)       // f16 [BATCH, N]
{
    const unsigned lane = threadIdx.x % WAVE;
    const unsigned row0 = blockIdx.x * ROWS_PER_WG + (threadIdx.x / WAVE) * ROWS;

    // Rows past N (the tail workgroup) read row N − 1 and store nothing: masked, not returned
    // from, so every lane of the warp takes part in the shuffles (§5.8).
    const f16* wrow[ROWS];
#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r) wrow[r] = w + (size_t)(row0 + r < N ? row0 + r : N - 1) * K;

    float acc[ROWS][BATCH];
#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r)
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) acc[r][b] = 0.0f;

    for (unsigned k0 = lane * 8; k0 < K; k0 += STEP * UNROLL) {
        uint4 wv[UNROLL][ROWS];
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            const unsigned k = k0 + u * STEP;
#pragma unroll
            for (unsigned r = 0; r < ROWS; ++r)
                if (!RAGGED || k < K) wv[u][r] = *reinterpret_cast<const uint4*>(wrow[r] + k);
        }
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            const unsigned k = k0 + u * STEP;
            if (RAGGED && k >= K) break;
            float wf[ROWS][8];
#pragma unroll
            for (unsigned r = 0; r < ROWS; ++r) unpack8(wv[u][r], wf[r]);
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) {
                float xf[8];
                unpack8(*reinterpret_cast<const uint4*>(x + b * K + k), xf);
#pragma unroll
                for (unsigned r = 0; r < ROWS; ++r)
#pragma unroll
                    for (unsigned j = 0; j < 8; ++j) acc[r][b] = fmaf(wf[r][j], xf[j], acc[r][b]);
            }
        }
    }

#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float v = warp_sum(acc[r][b]);
            if (lane == 0 && row0 + r < N) y[b * N + row0 + r] = f32_to_f16(v); // the one FP16 rounding
        }
    }
}
