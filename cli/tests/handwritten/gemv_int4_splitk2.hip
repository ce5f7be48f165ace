// A hand-written split-K INT4 GEMV in two launches (written for issue 38, to test the ABI
// description of an op made of several kernels; not tuned), as public MI50 engines write them:
//
//   1. `gemv_splitk_partial`, a 2-D grid: blockIdx.x a tile of 64 columns, blockIdx.y one of
//      `splits` slices of K. Each lane sums its column over its slice in FP32 and writes the
//      partial to `partials[blockIdx.y * N + n]` (a scratch buffer of splits × N floats).
//   2. `splitk_reduce`: one lane per column adds the `splits` partials in split order (a fixed
//      order: no atomics on data) and writes the FP16 output, rounded once.
//
// The stream orders the two launches; nothing is shared but the scratch buffer, which the first
// launch writes whole before the second reads it (no counter, no zeroing needed).
//
//   y[n] = round_f16( Σ_s Σ_{k in slice s} (q[k, n] − z[g(k), n]) · s[g(k), n] · x[k] )  (batch 1)
//
// GPTQ packed: qweight u32 [K/8, N], scales f16 [K/G, N], qzeros u32 [K/G, N/8] (nibble i of word
// j is column 8j + i), the stored nibble + zp_add (1 for GPTQ v1, 0 for v2) the zero point.

#include <hip/hip_runtime.h>

typedef _Float16 f16;

constexpr int TILE = 64;

extern "C" __global__ void __launch_bounds__(TILE)
gemv_splitk_partial(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
                    const unsigned* __restrict__ qzeros, const f16* __restrict__ x,
                    float* __restrict__ partials, int K, int N, int group_size, int splits,
                    int zp_add) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    if (n >= N) return; // no barrier below: a tail lane may leave
    const int kw_per = K / 8 / splits;
    const int kw0 = blockIdx.y * kw_per;
    float acc = 0.0f;
    for (int kw = kw0; kw < kw0 + kw_per; ++kw) {
        const unsigned w = qweight[kw * N + n];
        const int g = kw * 8 / group_size;
        const int z = (int)((qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + zp_add;
        const f16 zh = (f16)z;
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const f16 d = (f16)((w >> (4 * i)) & 15u) - zh;
            part = __builtin_fmaf((float)d, (float)x[kw * 8 + i], part);
        }
        acc = __builtin_fmaf(part, (float)scales[g * N + n], acc);
    }
    partials[blockIdx.y * N + n] = acc;
}

extern "C" __global__ void __launch_bounds__(TILE)
splitk_reduce(const float* __restrict__ partials, f16* __restrict__ y, int N, int splits) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    if (n >= N) return;
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partials[s * N + n];
    y[n] = (f16)sum;
}
