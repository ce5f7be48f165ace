// gemv_residual_hand: a hand-written CUDA kernel for sm_90 computing what the crate's
// `gemv_residual` kernel computes, bound to wavefuse by its ABI description
// (gemv_residual.sm90.abi.toml) so that `wavefuse ab --manual` can A/B it against the generated one:
//
//   y[b, n] = round_f16( Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · a[b, k]  +  r[b, n] )
//
// GPTQ INT4 with v1 zero points (the checkpoint stores z − 1): `qweight` u32 [K/8, N], nibble i of
// word (kw, n) is row 8·kw + i (least significant first); `scales` f16 [K/G, N]; `qzeros` u32
// [K/G, N/8], nibble i of word j is column 8j + i. Shapes are the [build] defines of the ABI file.
//
// Work split: a workgroup of 256 lanes owns 32 adjacent columns; lane t reads column t % 32, so a
// warp loads 32 adjacent words (128 bytes) of one packed row. The 8 warps take the K groups
// round-robin (warp w: groups w, w + 8, …), each group's scale and zero point loaded once, and meet
// in shared memory, added in warp order. The residual is added in FP32 before the one rounding.

#if !defined(WF_K) || !defined(WF_N) || !defined(WF_BATCH) || !defined(WF_GROUP)
#error "gemv_residual_hand needs -DWF_K -DWF_N -DWF_BATCH -DWF_GROUP (the [build] defines of its ABI file)"
#endif

typedef unsigned short f16; // FP16 bits; converted with one PTX instruction each (no CUDA header)

static __device__ __forceinline__ float to_f32(f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

static __device__ __forceinline__ f16 to_f16(float f) {
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

constexpr unsigned K = WF_K, N = WF_N, BATCH = WF_BATCH, GROUP = WF_GROUP;
constexpr unsigned COLS = 32, WARPS = 8, GROUPS = K / GROUP, ROWS = GROUP / 8;
static_assert(K % GROUP == 0 && GROUP % 8 == 0 && N % COLS == 0, "whole groups, whole tiles");
static_assert(BATCH >= 1 && BATCH <= 8, "decode batches");

extern "C" __global__ void __launch_bounds__(COLS * WARPS)
gemv_residual_hand(const unsigned* __restrict__ w_qweight, const f16* __restrict__ w_scales,
                   const unsigned* __restrict__ w_qzeros, const f16* __restrict__ a,
                   const f16* __restrict__ r, f16* __restrict__ y) {
    __shared__ float sums[WARPS][BATCH][COLS];
    const unsigned lane = threadIdx.x % COLS, warp = threadIdx.x / COLS;
    const unsigned n = blockIdx.x * COLS + lane;
    float acc[BATCH] = {};
    for (unsigned g = warp; g < GROUPS; g += WARPS) {
        const float s = to_f32(w_scales[g * N + n]);
        const int z = int((w_qzeros[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 0xFu) + 1; // v1
        float part[BATCH] = {};
#pragma unroll
        for (unsigned i = 0; i < ROWS; ++i) {
            const unsigned kw = g * ROWS + i;
            const unsigned q = w_qweight[kw * N + n];
#pragma unroll
            for (unsigned b = 0; b < BATCH; ++b) {
                // 8 activations of this packed row: one 16-byte load, the same address in every lane
                const uint4 x = *reinterpret_cast<const uint4*>(a + b * K + kw * 8);
                const unsigned xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
                for (unsigned j = 0; j < 8; ++j) {
                    const float d = float(int((q >> (4 * j)) & 0xFu) - z); // q − z, exact
                    part[b] = fmaf(d, to_f32(f16(xs[j / 2] >> (16 * (j % 2)))), part[b]);
                }
            }
        }
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) acc[b] = fmaf(s, part[b], acc[b]);
    }
#pragma unroll
    for (unsigned b = 0; b < BATCH; ++b) sums[warp][b][lane] = acc[b];
    __syncthreads(); // every warp's sums are in shared memory before warp 0 adds them
    if (warp == 0) {
#pragma unroll
        for (unsigned b = 0; b < BATCH; ++b) {
            float v = sums[0][b][lane];
#pragma unroll
            for (unsigned w = 1; w < WARPS; ++w) v += sums[w][b][lane];
            y[b * N + n] = to_f16(v + to_f32(r[b * N + n]));
        }
    }
}
