// The CUDA twin of gemv_int4_fp16z.hip (written for issue 38): one file with two tile variants,
// `K`, `N`, `group_size` as `int` arguments, FP16 zero points [K/G, N] (the zero point itself).
// FP16 values travel as their bits (no cuda_fp16.h: NVRTC compiles it without the toolkit's
// headers). gemv_int4_fp16z.cu.abi.toml binds `gemv_tile128`.

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
        const float z = f16_to_f32(zeros[g * N + n]);
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
            part = fmaf((float)((w >> (4 * i)) & 15u) - z, f16_to_f32(x[kw * 8 + i]), part);
        acc = fmaf(part, f16_to_f32(scales[g * N + n]), acc);
    }
    y[n] = f32_to_f16(acc);
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
