extern "C" __global__ void __launch_bounds__(1024, 2) spill(float* y, const float* x) {
    float r[96];
#pragma unroll
    for (int i = 0; i < 96; ++i) r[i] = x[i * 64 + threadIdx.x];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int i = 0; i < 96; ++i) r[(i * 7 + j) % 96] += r[i] * r[(i+1)%96];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 96; ++i) s += r[i] * (float)i;
    y[threadIdx.x] = s;
}
