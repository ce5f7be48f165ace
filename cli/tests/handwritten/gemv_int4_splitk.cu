// The CUDA twin of gemv_int4_splitk.hip (written for issue 38): a 2-D grid, blockIdx.y a slice of
// K, FP32 partials reduced in split order by the last workgroup of each column tile to arrive (a
// monotonic arrival counter, zeroed once, never reset). FP16 values travel as their bits.

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
            const float z = (float)((int)((qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + zp_add);
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i)
                part = fmaf((float)((w >> (4 * i)) & 15u) - z, f16_to_f32(x[kw * 8 + i]), part);
            acc = fmaf(part, f16_to_f32(scales[g * N + n]), acc);
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
        y[n] = f32_to_f16(sum);
    }
}
