// A hand-written INT4 GEMV in the style of the public MI50 engines (written for issue 38, to test
// the MI50 model's count of a conditional reload; not tuned): `K`, `N`, `group_size` as `int`
// arguments, one column per lane, 64 lanes per workgroup, and the group's scale and zero point
// reloaded in a branch taken once per `group_size / 8` words — the shape the model charged on
// every trip before issue 38.
//
//   y[n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[k] )   (batch 1)
//
// GPTQ packed: qweight u32 [K/8, N] (nibble i of word (kw, n) is row 8·kw + i), scales f16
// [K/G, N], qzeros u32 [K/G, N/8] (nibble i of word j is column 8j + i), the stored nibble +
// zp_add (1 for GPTQ v1, 0 for v2) the zero point.

#include <hip/hip_runtime.h>

typedef _Float16 f16;

extern "C" __global__ void __launch_bounds__(64)
gemv_reload(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
            const unsigned* __restrict__ qzeros, const f16* __restrict__ x, f16* __restrict__ y,
            int K, int N, int group_size, int zp_add) {
    const int n = blockIdx.x * 64 + threadIdx.x;
    if (n >= N) return;
    const int words_per_group = group_size / 8;
    float acc = 0.0f, part = 0.0f, s = 0.0f, z = 0.0f;
    for (int kw = 0, left = 0; kw < K / 8; ++kw, --left) {
        if (left == 0) { // a new group: fold the last one, reload scale and zero point
            acc = __builtin_fmaf(part, s, acc);
            part = 0.0f;
            const int g = kw / words_per_group;
            s = (float)scales[g * N + n];
            z = (float)((int)((qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + zp_add);
            left = words_per_group;
        }
        const unsigned w = qweight[kw * N + n];
#pragma unroll
        for (int i = 0; i < 8; ++i)
            part = __builtin_fmaf((float)((w >> (4 * i)) & 15u) - z, (float)x[kw * 8 + i], part);
    }
    acc = __builtin_fmaf(part, s, acc);
    y[n] = (f16)acc;
}
