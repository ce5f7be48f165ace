// gemv_f16_ref: hand-written reference for `gemv_f16` (DESIGN.md §3.1), gfx906, HIP.
//
//   y[b, n] = round_f16( Σ_k W[n, k] · x[b, k] )   b < BATCH, n < N;   W FP16 [N, K] row-major
//
// Shapes are compile-time defines, listed in the [build] table of gemv_f16.tp<N>.abi.toml:
//   -DWF_K=… -DWF_N=… -DWF_BATCH=…
// Launch: ceil(N / 16) workgroups of exactly 256 lanes (4 waves of 64), arguments in signature order.
//
// Work split. Each wave owns 4 rows of W (a workgroup: 16 rows) and walks them along K: lane l
// reads halves [8l, 8l + 8) of each 512-half step, so a wave reads 1 KB contiguous of a row per
// 16-byte load. Two steps of the 4 rows are loaded before any is used (8 loads in flight per
// lane); the activations of a step are loaded once per lane and used for all 4 rows, which keeps
// their (L1-served) traffic below the weights' at batch ≤ 4. v_dot2_f32_f16 multiplies a pair of
// weights by a pair of activations and adds both exact products to an FP32 sum. Each lane's
// partial sum is reduced across the wave with butterfly shuffles (a whole row belongs to one wave,
// so no LDS and no workgroup barrier are needed), and lane 0 rounds once to FP16 and stores.

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH)
#error "gemv_f16_ref needs -DWF_K -DWF_N -DWF_BATCH (the [build] defines of its ABI file)"
#endif

typedef _Float16 f16;
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
typedef unsigned u32x4 __attribute__((ext_vector_type(4)));

static __device__ __forceinline__ f16x2 as_f16x2(unsigned bits) { return __builtin_bit_cast(f16x2, bits); }

static __device__ __forceinline__ float wave_sum(float v) {
#pragma unroll
    for (int m = 32; m >= 1; m /= 2) v += __shfl_xor(v, m, 64);
    return v;
}

// ---- shapes (per rank) ----
constexpr unsigned K = WF_K;         // reduction length
constexpr unsigned N = WF_N;         // output rows of W
constexpr unsigned BATCH = WF_BATCH; // tokens decoded at once

// ---- work split ----
constexpr unsigned WG = 256, WAVE = 64, WAVES = WG / WAVE;
constexpr unsigned ROWS = 4;                      // rows per wave
constexpr unsigned ROWS_PER_WG = WAVES * ROWS;    // 16
constexpr unsigned STEP = WAVE * 8;               // halves of a row per wave-wide 16-byte load
constexpr unsigned UNROLL = 2;                    // steps loaded before use
constexpr bool RAGGED = K % (STEP * UNROLL) != 0; // the last steps are partly past K

static_assert(BATCH >= 1 && BATCH <= 8, "batch 1..8");
static_assert(K % 8 == 0, "rows are read 16 bytes at a time");

extern "C" __global__ void __launch_bounds__(WG) __attribute__((amdgpu_flat_work_group_size(WG, WG)))
gemv_f16_ref(
    const f16* __restrict__ w, // f16 [N, K] row-major, 16-byte aligned
    const f16* __restrict__ x, // f16 [BATCH, K], 16-byte aligned
    f16* __restrict__ y)       // f16 [BATCH, N]
{
    const unsigned lane = threadIdx.x % WAVE;
    const unsigned row0 = blockIdx.x * ROWS_PER_WG + (threadIdx.x / WAVE) * ROWS;

    // Rows past N (the tail workgroup) read row N − 1 and store nothing: masked, not returned
    // from, so every lane of the wave takes part in the shuffles (§5.8).
    const f16* wrow[ROWS];
#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r) wrow[r] = w + (size_t)(row0 + r < N ? row0 + r : N - 1) * K;

    float acc[ROWS][BATCH];
#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r)
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) acc[r][b] = 0.0f;

    for (unsigned k0 = lane * 8; k0 < K; k0 += STEP * UNROLL) {
        u32x4 wv[UNROLL][ROWS];
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            const unsigned k = k0 + u * STEP;
#pragma unroll
            for (unsigned r = 0; r < ROWS; ++r)
                if (!RAGGED || k < K) wv[u][r] = *reinterpret_cast<const u32x4*>(wrow[r] + k);
        }
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            const unsigned k = k0 + u * STEP;
            if (RAGGED && k >= K) break;
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) {
                const u32x4 xv = *reinterpret_cast<const u32x4*>(x + b * K + k); // (x0,x1) … (x6,x7)
#pragma unroll
                for (unsigned r = 0; r < ROWS; ++r) {
                    float a = acc[r][b];
                    a = __builtin_amdgcn_fdot2(as_f16x2(wv[u][r].x), as_f16x2(xv.x), a, false);
                    a = __builtin_amdgcn_fdot2(as_f16x2(wv[u][r].y), as_f16x2(xv.y), a, false);
                    a = __builtin_amdgcn_fdot2(as_f16x2(wv[u][r].z), as_f16x2(xv.z), a, false);
                    a = __builtin_amdgcn_fdot2(as_f16x2(wv[u][r].w), as_f16x2(xv.w), a, false);
                    acc[r][b] = a;
                }
            }
        }
    }

#pragma unroll
    for (unsigned r = 0; r < ROWS; ++r) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            const float v = wave_sum(acc[r][b]);
            if (lane == 0 && row0 + r < N) y[b * N + row0 + r] = (f16)v; // the one FP16 rounding
        }
    }
}
