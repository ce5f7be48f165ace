// The CUDA twin of gemv_int4_splitk2.hip (written for issue 38): a split-K INT4 GEMV in two
// launches — `gemv_splitk_partial` (a 2-D grid, blockIdx.y one of `splits` K slices) writes FP32
// partials to a scratch buffer of splits × N floats, `splitk_reduce` sums them in split order and
// writes the FP16 output. FP16 values travel as their bits (no cuda_fp16.h: NVRTC compiles it
// without the toolkit's headers). gemv_int4_splitk2.cu.abi.toml describes both launches.

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
        const float z = (float)((int)((qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + zp_add);
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
            part = fmaf((float)((w >> (4 * i)) & 15u) - z, f16_to_f32(x[kw * 8 + i]), part);
        acc = fmaf(part, f16_to_f32(scales[g * N + n]), acc);
    }
    partials[blockIdx.y * N + n] = acc;
}

extern "C" __global__ void __launch_bounds__(TILE)
splitk_reduce(const float* __restrict__ partials, f16* __restrict__ y, int N, int splits) {
    const int n = blockIdx.x * TILE + threadIdx.x;
    if (n >= N) return;
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partials[s * N + n];
    y[n] = f32_to_f16(sum);
}
