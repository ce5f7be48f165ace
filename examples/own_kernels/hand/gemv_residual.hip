// gemv_residual_hand: a hand-written HIP kernel for gfx906 (MI50) computing what the crate's
// `gemv_residual` kernel computes, bound to wavefuse by its ABI description
// (gemv_residual.gfx906.abi.toml) so that `wavefuse ab --manual` can A/B it against the generated one:
//
//   y[b, n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · a[b, k]  +  r[b, n] )
//
// The layout is the one of gemv_residual.cu (GPTQ INT4, v1 zero points). Work split for wave64: a
// workgroup of 256 lanes owns 64 adjacent columns (lane t: column t % 64, a wave loads 256
// contiguous bytes of one packed row); its 4 waves take the K groups round-robin and meet in LDS,
// added in wave order. The activations' FP16 pairs are converted with `v_cvt_f32_f16` and the
// decoded weight multiplied in FP32 (exact: a 5-bit integer times an 11-bit mantissa).

#include <hip/hip_runtime.h>

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP)
#error "gemv_residual_hand needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP (the [build] defines of its ABI file)"
#endif

typedef _Float16 f16;

constexpr unsigned K = WF_K, N = WF_N, BATCH = WF_BATCH, GROUP = WF_GROUP;
constexpr unsigned COLS = 64, WAVES = 4, GROUPS = K / GROUP, ROWS = GROUP / 8;
static_assert(K % GROUP == 0 && GROUP % 8 == 0 && N % COLS == 0, "whole groups, whole tiles");
static_assert(BATCH >= 1 && BATCH <= 8, "decode batches");

extern "C" __global__ void __launch_bounds__(COLS * WAVES)
gemv_residual_hand(const unsigned* __restrict__ w_qweight, const f16* __restrict__ w_scales,
                   const unsigned* __restrict__ w_qzeros, const f16* __restrict__ a,
                   const f16* __restrict__ r, f16* __restrict__ y) {
    __shared__ float sums[WAVES][BATCH][COLS];
    const unsigned lane = threadIdx.x % COLS, wave = threadIdx.x / COLS;
    const unsigned n = blockIdx.x * COLS + lane;
    float acc[BATCH] = {};
    for (unsigned g = wave; g < GROUPS; g += WAVES) {
        const float s = float(w_scales[g * N + n]);
        const int z = int((w_qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 0xFu) + 1; // v1
        float part[BATCH] = {};
#pragma unroll
        for (unsigned i = 0; i < ROWS; ++i) {
            const unsigned kw = g * ROWS + i;
            const unsigned q = w_qweight[kw * N + n];
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) {
                const f16* x = a + b * K + kw * 8; // the same address in every lane: one broadcast
#pragma unroll
                for (unsigned j = 0; j < 8; ++j) {
                    const float d = float(int((q >> (4 * j)) & 0xFu) - z); // q − z, exact
                    part[b] = fmaf(d, float(x[j]), part[b]);
                }
            }
        }
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) acc[b] = fmaf(s, part[b], acc[b]);
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) sums[wave][b][lane] = acc[b];
    __syncthreads(); // every wave's sums are in LDS before wave 0 adds them
    if (wave == 0) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float v = sums[0][b][lane];
#pragma unroll
            for (unsigned w = 1; w < WAVES; ++w) v += sums[w][b][lane];
            y[b * N + n] = f16(v + float(r[b * N + n]));
        }
    }
}
