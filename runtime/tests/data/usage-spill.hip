#include <hip/hip_runtime.h>
extern "C" __global__ void __launch_bounds__(256) axpy(float* y, const float* x, float a, unsigned n) {
    __shared__ float tile[256];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = a * tile[255 - threadIdx.x] + y[i];
}
extern "C" __global__ void __launch_bounds__(1024) spill(float* y, const float* x) {
    float r[96];
    for (int i = 0; i < 96; ++i) r[i] = x[i * 64 + threadIdx.x];
    for (int j = 0; j < 4; ++j) for (int i = 0; i < 96; ++i) r[(i * 7 + j) % 96] += r[i] * r[(i+1)%96];
    float s = 0; for (int i = 0; i < 96; ++i) s += r[i] * (float)i;
    y[threadIdx.x] = s;
}
