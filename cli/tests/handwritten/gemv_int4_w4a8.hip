// A hand-written W4A8 INT4 GEMV with its activation quantiser (written for issue 38, to test the
// ABI description of pre-quantised inputs; not tuned), in the style of the q8-activation paths of
// public MI50 engines: the activations are quantised to INT8 per token, the products are integer
// dot products (v_dot4_i32_i8), scaled once per group and once per output.
//
//   1. `quantise_x_int8`: one workgroup per token: m = max|x|, s = m / 127, r = 127 / m,
//      xq[k] = clamp(rne(x[k] · r), −127, 127), xs = s (0 and codes 0 where m = 0). The rule of
//      the host quantiser (wavefuse_runtime::exec::quantise_rows), so a kernel quantising here
//      and one taking host-quantised codes compute the same numbers.
//   2. `gemv_w4a8`: one lane per column; per group Σ (q − z) · xq in INT32 (two v_dot4_i32_i8 per
//      qweight word: q − z ∈ [−16, 15] fits an INT8), then acc += isum · scale[g, n] in FP32;
//      y[n] = round_f16(acc · xs).
//
//   y[n] ≈ Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[k], with x[k] ≈ xq[k] · xs   (batch 1)
//
// gemv_int4_w4a8.hip.abi.toml launches both (the codes and the scale in scratch buffers the two
// launches share); gemv_int4_w4a8.host.abi.toml launches `gemv_w4a8` alone on codes and scales
// the host quantised. GPTQ packed: qweight u32 [K/8, N], scales f16 [K/G, N], qzeros u32
// [K/G, N/8] (nibble i of word j is column 8j + i), the stored nibble + zp_add the zero point.

#include <hip/hip_runtime.h>

typedef _Float16 f16;

constexpr int QBLOCK = 256;
constexpr int TILE = 64;

extern "C" __global__ void __launch_bounds__(QBLOCK)
quantise_x_int8(const f16* __restrict__ x, signed char* __restrict__ xq, float* __restrict__ xs, int K) {
    __shared__ float red[QBLOCK];
    const f16* row = x + (size_t)blockIdx.x * K;
    float m = 0.0f;
    for (int k = threadIdx.x; k < K; k += QBLOCK) m = fmaxf(m, fabsf((float)row[k]));
    red[threadIdx.x] = m;
    __syncthreads();
    for (int w = QBLOCK / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    m = red[0];
    const float r = m > 0.0f ? 127.0f / m : 0.0f;
    for (int k = threadIdx.x; k < K; k += QBLOCK) {
        // x · r exactly (an FP16 times an f32 is exact in f64), rounded half to even.
        const double q = __builtin_rint((double)(float)row[k] * (double)r);
        xq[(size_t)blockIdx.x * K + k] = (signed char)fmin(fmax(q, -127.0), 127.0);
    }
    if (threadIdx.x == 0) xs[blockIdx.x] = m > 0.0f ? m / 127.0f : 0.0f;
}

extern "C" __global__ void __launch_bounds__(TILE)
gemv_w4a8(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
          const unsigned* __restrict__ qzeros, const signed char* __restrict__ xq,
          const float* __restrict__ xs, f16* __restrict__ y, int K, int N, int group_size, int zp_add) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    if (n >= N) return;
    const int* xq4 = (const int*)xq; // 4 codes per int
    float acc = 0.0f;
    for (int g = 0; g < K / group_size; ++g) {
        const int z = (int)((qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + zp_add;
        int isum = 0;
        for (int kw = g * group_size / 8; kw < (g + 1) * group_size / 8; ++kw) {
            const unsigned w = qweight[kw * N + n];
            int lo = 0, hi = 0; // (q − z) of rows 8kw..8kw+3 and 8kw+4..8kw+7, an INT8 each
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                lo |= ((((int)((w >> (4 * i)) & 15u) - z)) & 0xff) << (8 * i);
                hi |= ((((int)((w >> (4 * (i + 4))) & 15u) - z)) & 0xff) << (8 * i);
            }
            isum = __builtin_amdgcn_sdot4(lo, xq4[2 * kw], isum, false);
            isum = __builtin_amdgcn_sdot4(hi, xq4[2 * kw + 1], isum, false);
        }
        acc = __builtin_fmaf((float)isum, (float)scales[g * N + n], acc);
    }
    y[n] = (f16)(acc * xs[0]);
}
