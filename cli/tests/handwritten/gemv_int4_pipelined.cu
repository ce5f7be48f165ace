// A user's Marlin-style kernel (issue 40): the INT4 GPTQ GEMM at batch 8-64 as a block-wide
// pipeline in dynamic shared memory, on the GPTQ arrays the generated kernels take (`qweight` u32
// [K/8][N], `scales` f16 [K/G][N], `qzeros` u32 [K/G][N/8], v1 zero points). Per 256-column x
// 64-row K stage every thread copies 16-byte pieces with `cp.async` into a ring of WF_STAGES
// buffers of dynamic shared memory (one workgroup barrier per stage); 8 warps of 32 columns
// decode the packed words from shared memory into mma.m16n8k16; a persistent grid walks an even
// stripe of (tile, K stage) pairs and each tile's contributors add f32 sums into `partials` with
// vector reductions, the last to arrive writing `y` and zeroing its partials and counter for the
// next launch. It is version 2 of the probe measured in
// bench/results/2026-12-07-gpu-block-pipeline/ (correct on an H100 at the four issue-40 shapes);
// here it is the test of a hand-written kernel bound with `dynamic_lds_bytes` and a parametric
// description (`cli/tests/ab.rs`).
//
// Lane (g = lane / 4, t = lane % 4) of warp w reads the packed words of K-word row t of each
// 32-row quad for its 4 columns w * 32 + 4g .. + 3 (rows padded by 32 bytes: conflict-free),
// decodes nibble pairs (i, i + 4) to FP16 (q - z) * s, and feeds the MMA with the weights as A and
// the activations as B (one 16-byte load per 8 batch rows, four byte permutes), K permuted within
// each quad alike on both sides; activation chunks are XOR-swizzled by the row's parity.
// Synchronisation: the reductions, then a fence, then the arrival (release); the last arriver
// fences after it sees the count (acquire) before it reads the partials. The order of the f32
// additions varies from run to run.

typedef unsigned short f16;

#ifndef WF_KS
#define WF_KS 64
#endif
#ifndef WF_B
#error "WF_B (batch), WF_K, WF_N, WF_G (group size), WF_STAGES, WF_MINB come from the ABI's [build] defines"
#endif

constexpr int B = WF_B;
constexpr int K = WF_K;
constexpr int N = WF_N;
constexpr int GS = WF_G;
constexpr int STAGES = WF_STAGES;
constexpr int THREADS = 256;
constexpr int NT = 256; // columns per tile: 8 warps x 32
constexpr int KS = WF_KS; // K rows per stage (64 or 128)
constexpr int QR = KS / 8;
constexpr int NTILES = N / NT;
constexpr int KSTAGES = K / KS;
constexpr int TOTAL = NTILES * KSTAGES;
constexpr int NB = B / 8; // batch tiles of 8 rows
constexpr int W_ROW = NT * 4 + 32;
constexpr int W_BYTES = QR * W_ROW;
constexpr int X_ROW = KS * 2;
constexpr int X_BYTES = B * X_ROW;
constexpr int S_BYTES = NT * 2;
constexpr int Z_BYTES = NT / 2;
constexpr int STAGE_BYTES = W_BYTES + X_BYTES + S_BYTES + Z_BYTES;
static_assert(B % 8 == 0 && B >= 8 && B <= 64, "batch: a multiple of 8, at most 64");
static_assert(KS % 32 == 0 && KS <= 128, "a stage: whole 32-row quads, at most 128 rows");
static_assert(N % NT == 0 && K % KS == 0 && GS % KS == 0, "shape: N % 256, K and the group a multiple of the stage");
static_assert(STAGE_BYTES % 16 == 0, "16-byte stage buffers");

static __device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
static __device__ __forceinline__ void cp16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int n> static __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory");
}
static __device__ __forceinline__ unsigned and_or(unsigned x, unsigned a, unsigned b) {
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(x), "r"(a), "r"(b));
    return d;
}
static __device__ __forceinline__ unsigned hsub2(unsigned a, unsigned b) {
    unsigned d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
static __device__ __forceinline__ unsigned hfma2(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
static __device__ __forceinline__ unsigned hmul2(unsigned a, unsigned b) {
    unsigned d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
static __device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned s) {
    unsigned d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
    return d;
}
static __device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) { // not volatile: free to schedule
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void red4(float* p, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
                 : "memory");
}
static __device__ __forceinline__ f16 to_f16(float f) {
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The first stage of workgroup `i`'s stripe (of `grid`); the workgroup that owns stage `s`.
static __device__ __forceinline__ int stripe_start(int i, int grid) {
    return (int)(((long long)i * TOTAL) / grid);
}
static __device__ __forceinline__ int stripe_owner(int s, int grid) {
    return (int)((((long long)s + 1) * grid - 1) / TOTAL);
}

// Version 2 (after the first call: 31 SASS instructions per HMMA in the main loop, most of them
// the copies' address arithmetic): each thread's copy offsets are computed once; a stage's
// (tile, K stage) and ring slot advance by increments; the activations of all batch tiles are
// loaded before the MMAs, which run K step by K step so that consecutive MMAs update different
// accumulators; the MMA asm is not volatile, so the compiler may interleave it.
constexpr int WIT = QR * (NT / 4) / THREADS;                    // packed-word copies per thread
constexpr int XCH = B * (KS / 8);                                // activation copies per stage
constexpr int XIT = (XCH + THREADS - 1) / THREADS;
static_assert(QR * (NT / 4) % THREADS == 0, "whole packed-word copies per thread");

extern "C" __global__ void __launch_bounds__(THREADS, WF_MINB)
gemv_int4_pipe(const unsigned* __restrict__ qweight, const f16* __restrict__ scales,
               const unsigned* __restrict__ qzeros, const f16* __restrict__ x, f16* __restrict__ y,
               float* __restrict__ partials, unsigned* __restrict__ arrivals) {
    alignas(16) extern __shared__ unsigned char smem[];
    __shared__ int last_flag;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int grid = gridDim.x, bid = blockIdx.x;
    const int s_begin = stripe_start(bid, grid), nst = stripe_start(bid + 1, grid) - s_begin;
    const int cw = warp * 32 + 4 * g; // the lane's first column within the tile
    const unsigned sbase = smem_u32(smem);

    // This thread's copies, the same at every stage: element offsets from the stage's origin in
    // global memory, byte offsets within a stage buffer.
    unsigned w_g[WIT], w_s[WIT], x_g[XIT], x_s[XIT];
#pragma unroll
    for (int i = 0; i < WIT; ++i) {
        const int c = tid + i * THREADS, row = c / (NT / 4), cc = c % (NT / 4);
        w_g[i] = row * N + cc * 4;
        w_s[i] = row * W_ROW + cc * 16;
    }
#pragma unroll
    for (int i = 0; i < XIT; ++i) {
        const int c = tid + i * THREADS, r = c / (KS / 8), ch = c % (KS / 8);
        x_g[i] = r * K + ch * 8;
        x_s[i] = W_BYTES + r * X_ROW + ((ch ^ ((r & 1) << 2)) * 16);
    }
    const bool copies_scales = tid < NT / 8, copies_zeros = !copies_scales && tid < NT / 8 + NT / 32;
    const unsigned sz_g = copies_scales ? tid * 8 : (tid - NT / 8) * 4;
    const unsigned sz_s = W_BYTES + X_BYTES + (copies_scales ? tid * 16 : S_BYTES + (tid - NT / 8) * 16);

    // The next stage to copy and the stage to compute: (tile, K stage) and ring slot.
    int tile_i = s_begin / KSTAGES, ks_i = s_begin % KSTAGES, slot_i = 0;
    int tile_c = tile_i, ks_c = ks_i, slot_c = 0;
    auto issue = [&]() {
        const unsigned b = sbase + slot_i * STAGE_BYTES;
        const unsigned* wq = qweight + (unsigned)(ks_i * QR) * N + tile_i * NT;
#pragma unroll
        for (int i = 0; i < WIT; ++i) cp16(b + w_s[i], wq + w_g[i]);
        const f16* xq = x + ks_i * KS;
#pragma unroll
        for (int i = 0; i < XIT; ++i)
            if (XCH % THREADS == 0 || tid + i * THREADS < XCH) cp16(b + x_s[i], xq + x_g[i]);
        const unsigned grp = (unsigned)(ks_i * KS) / GS;
        if (copies_scales) cp16(b + sz_s, scales + grp * N + tile_i * NT + sz_g);
        else if (copies_zeros) cp16(b + sz_s, qzeros + grp * (N / 8) + tile_i * (NT / 8) + sz_g);
    };
    auto advance_i = [&]() {
        if (++ks_i == KSTAGES) { ks_i = 0; ++tile_i; }
        if (++slot_i == STAGES) slot_i = 0;
    };

    float acc[2][NB][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int i = 0; i < NB; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[m][i][e] = 0.0f;

#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
        if (p < nst) { issue(); advance_i(); }
        cp_commit();
    }
    for (int it = 0; it < nst; ++it) {
        // The stage's own copies have landed (each thread waits for its groups) and every warp is
        // past the stage before, whose buffer the next copy overwrites (one barrier per stage).
        cp_wait<STAGES - 2>();
        __syncthreads();
        if (it + STAGES - 1 < nst) { issue(); advance_i(); }
        cp_commit();
        const unsigned char* buf = smem + slot_c * STAGE_BYTES;
        const unsigned char* xbuf = buf + W_BYTES;
        const uint2 sv = *reinterpret_cast<const uint2*>(buf + W_BYTES + X_BYTES + cw * 2);
        const unsigned zw = *reinterpret_cast<const unsigned*>(buf + W_BYTES + X_BYTES + S_BYTES + (cw / 8) * 4);
        unsigned s2[4], zlo[4], zhi[4];
        {
            const unsigned sh[4] = {sv.x & 0xffffu, sv.x >> 16, sv.y & 0xffffu, sv.y >> 16};
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const unsigned z = ((zw >> (4 * ((cw % 8) + c))) & 15u) + 1u;
                s2[c] = sh[c] * 0x10001u;
                zlo[c] = (0x6400u + z) * 0x10001u;       // 1024 + z
                zhi[c] = (0xD400u + 16u * z) * 0x10001u; // -(64 + z)
            }
        }
#pragma unroll
        for (int q = 0; q < KS / 32; ++q) {
            const uint4 wv = *reinterpret_cast<const uint4*>(buf + (4 * q + t) * W_ROW + cw * 4);
            const unsigned qw[4] = {wv.x, wv.y, wv.z, wv.w};
            uint4 xv[NB];
#pragma unroll
            for (int i = 0; i < NB; ++i) {
                const int row = 8 * i + g;
                xv[i] = *reinterpret_cast<const uint4*>(xbuf + row * X_ROW + (((4 * q + t) ^ ((g & 1) << 2)) * 16));
            }
            unsigned P[4][4]; // [pair (i, i + 4)][column]
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const unsigned q0 = qw[c], q1 = qw[c] >> 8;
                P[0][c] = hmul2(hsub2(and_or(q0, 0x000f000fu, 0x64006400u), zlo[c]), s2[c]);
                P[1][c] = hmul2(hfma2(and_or(q0, 0x00f000f0u, 0x64006400u), 0x2C002C00u, zhi[c]), s2[c]);
                P[2][c] = hmul2(hsub2(and_or(q1, 0x000f000fu, 0x64006400u), zlo[c]), s2[c]);
                P[3][c] = hmul2(hfma2(and_or(q1, 0x00f000f0u, 0x64006400u), 0x2C002C00u, zhi[c]), s2[c]);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int i = 0; i < NB; ++i) {
                    const unsigned lo = j ? xv[i].y : xv[i].x, hi = j ? xv[i].w : xv[i].z;
                    const unsigned b0 = prmt(lo, hi, 0x5410u), b1 = prmt(lo, hi, 0x7632u);
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        const unsigned a[4] = {P[2 * j][2 * m], P[2 * j][2 * m + 1], P[2 * j + 1][2 * m],
                                               P[2 * j + 1][2 * m + 1]};
                        mma(acc[m][i], a, b0, b1);
                    }
                }
        }
        if (ks_c == KSTAGES - 1 || it == nst - 1) {
            // This workgroup's part of the tile is done: add it to the tile's partials.
            const int tile = tile_c, n0 = tile * NT;
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int bb = 0; bb < 2; ++bb) {
                    const int row = 8 * i + 2 * t + bb;
                    red4(partials + row * N + n0 + cw, acc[0][i][bb], acc[0][i][2 + bb], acc[1][i][bb],
                         acc[1][i][2 + bb]);
                }
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int i = 0; i < NB; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[m][i][e] = 0.0f;
            // Release: every thread's reductions are visible device-wide before the arrival.
            __threadfence();
            __syncthreads();
            if (tid == 0) {
                const int first = stripe_owner(tile * KSTAGES, grid);
                const int last = stripe_owner((tile + 1) * KSTAGES - 1, grid);
                const unsigned old = atomicAdd(&arrivals[tile], 1u);
                last_flag = old == (unsigned)(last - first);
            }
            __syncthreads();
            if (last_flag) {
                // Acquire: the count said every contributor arrived; their sums are visible.
                __threadfence();
                for (int e = tid; e < B * NT / 4; e += THREADS) {
                    const int row = e / (NT / 4), c4 = (e % (NT / 4)) * 4;
                    float* p = partials + row * N + n0 + c4;
                    float4 v;
                    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                                 : "l"(p));
                    uint2 h;
                    h.x = (unsigned)to_f16(v.x) | ((unsigned)to_f16(v.y) << 16);
                    h.y = (unsigned)to_f16(v.z) | ((unsigned)to_f16(v.w) << 16);
                    *reinterpret_cast<uint2*>(y + row * N + n0 + c4) = h;
                    asm volatile("st.global.v4.f32 [%0], {%1, %1, %1, %1};" ::"l"(p), "f"(0.0f) : "memory");
                }
                if (tid == 0) arrivals[tile] = 0u;
            }
        }
        if (++ks_c == KSTAGES) { ks_c = 0; ++tile_c; }
        if (++slot_c == STAGES) slot_c = 0;
    }
    cp_wait<0>();
}
