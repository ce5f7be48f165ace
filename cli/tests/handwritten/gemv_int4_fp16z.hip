// A hand-written INT4 GEMV in the style of the public MI50 engines (written for issue 38, to test
// the ABI description of such kernels; not tuned): one .hip file with two tile variants, the
// shapes `K`, `N` and `group_size` as `int` arguments, FP16 zero points.
//
//   y[n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[k] )   (batch 1)
//
// qweight u32 [K/8, N] (GPTQ: nibble i of word (kw, n) is row 8·kw + i); scales f16 [K/G, N];
// zeros f16 [K/G, N]: the zero point itself (not z − 1, not packed). Lane n of the grid owns
// column n; `gemv_tile64` and `gemv_tile128` differ in the workgroup (64 or 128 columns).
// gemv_int4_fp16z.abi.toml binds `gemv_tile128`.

#include <hip/hip_runtime.h>

typedef _Float16 f16;

template <int TILE>
static __device__ __forceinline__ void gemv(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
                                            const f16* __restrict__ zeros, const f16* __restrict__ x,
                                            f16* __restrict__ y, int K, int N, int group_size) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    if (n >= N) return;
    float acc = 0.0f;
    for (int kw = 0; kw < K / 8; ++kw) {
        const unsigned w = qweight[kw * N + n];
        const int g = kw * 8 / group_size;
        const f16 z = zeros[g * N + n];
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const f16 d = (f16)((w >> (4 * i)) & 15u) - z; // exact: small integers
            part = __builtin_fmaf((float)d, (float)x[kw * 8 + i], part);
        }
        acc = __builtin_fmaf(part, (float)scales[g * N + n], acc);
    }
    y[n] = (f16)acc;
}

extern "C" __global__ void __launch_bounds__(64)
gemv_tile64(const unsigned* __restrict__ qweight, const f16* __restrict__ scales, const f16* __restrict__ zeros,
            const f16* __restrict__ x, f16* __restrict__ y, int K, int N, int group_size) {
    gemv<64>(qweight, scales, zeros, x, y, K, N, group_size);
}

extern "C" __global__ void __launch_bounds__(128)
gemv_tile128(const unsigned* __restrict__ qweight, const f16* __restrict__ scales, const f16* __restrict__ zeros,
             const f16* __restrict__ x, f16* __restrict__ y, int K, int N, int group_size) {
    gemv<128>(qweight, scales, zeros, x, y, K, N, group_size);
}
