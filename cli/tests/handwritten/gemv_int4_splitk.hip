// A hand-written split-K INT4 GEMV (written for issue 38, to test the ABI description of such
// kernels; not tuned): a 2-D grid, blockIdx.x a tile of 64 columns, blockIdx.y one of `splits`
// slices of K. Each workgroup writes its FP32 partial sums (no atomicAdd on data: the sum order is
// fixed); the last workgroup of a column tile to arrive (a monotonic arrival counter, zeroed once
// and never reset: arrival a of a launch is the last when a mod splits = splits − 1) adds the
// partials in split order and writes y. One launch; no second reduce kernel.
//
//   y[n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[k] )   (batch 1)
//
// GPTQ packed: qweight u32 [K/8, N], scales f16 [K/G, N], qzeros u32 [K/G, N/8] (nibble i of word
// j is column 8j + i), the stored nibble + zp_add (1 for GPTQ v1, 0 for v2) the zero point.

#include <hip/hip_runtime.h>

typedef _Float16 f16;

constexpr int TILE = 64;

extern "C" __global__ void __launch_bounds__(TILE)
gemv_splitk(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
            const unsigned* __restrict__ qzeros, const f16* __restrict__ x, f16* __restrict__ y,
            float* __restrict__ partials, unsigned* __restrict__ arrivals,
            int K, int N, int group_size, int splits, int zp_add) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    const int kw_per = K / 8 / splits;
    const int kw0 = blockIdx.y * kw_per;
    float acc = 0.0f;
    if (n < N) {
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
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) last = atomicAdd(&arrivals[blockIdx.x], 1u) % splits == (unsigned)splits - 1;
    __syncthreads();
    if (last && n < N) {
        __threadfence();
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) sum += ((volatile float*)partials)[s * N + n];
        y[n] = (f16)sum;
    }
}
