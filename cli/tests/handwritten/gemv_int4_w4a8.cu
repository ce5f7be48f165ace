// The CUDA twin of gemv_int4_w4a8.hip (written for issue 38): `quantise_x_int8` quantises the
// activations to INT8 per token (m = max|x|, r = 127 / m, q = clamp(rne(x · r), ±127), s = m / 127;
// the host quantiser's rule) and `gemv_w4a8` sums (q − z) · xq per group in INT32 with dp4a, then
// scales per group and per output. FP16 values travel as their bits (no cuda_fp16.h: NVRTC
// compiles it without the toolkit's headers). gemv_int4_w4a8.cu.abi.toml launches both.

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

static __device__ __forceinline__ int dp4a(int a, int b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

constexpr int QBLOCK = 256;
constexpr int TILE = 64;

extern "C" __global__ void __launch_bounds__(QBLOCK)
quantise_x_int8(const f16* __restrict__ x, signed char* __restrict__ xq, float* __restrict__ xs, int K) {
    __shared__ float red[QBLOCK];
    const f16* row = x + (size_t)blockIdx.x * K;
    float m = 0.0f;
    for (int k = threadIdx.x; k < K; k += QBLOCK) m = fmaxf(m, fabsf(f16_to_f32(row[k])));
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
        const double q = rint((double)f16_to_f32(row[k]) * (double)r);
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
            isum = dp4a(lo, xq4[2 * kw], isum);
            isum = dp4a(hi, xq4[2 * kw + 1], isum);
        }
        acc = fmaf((float)isum, f16_to_f32(scales[g * N + n]), acc);
    }
    y[n] = f32_to_f16(acc * xs[0]);
}
