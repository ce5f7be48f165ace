// Prototype: what limits the tensor-core INT4 GEMV on the H200 (issue 7)?
//
// Variants of the generated kernel's structure (same GPTQ layout, same MMA fragment mapping as
// `wavefuse emit gemv_int4 --target sm90`), each checked against a plain f32 reference kernel
// and timed with weights rotating over copies totalling > 6 x L2, next to a device copy and a
// pure streaming read of the same bytes. Build and run: bash bench/proto/run-proto.sh
//
// Template parameters:
//   CT    column tiles of 32 per workgroup (adjacent: CT x 128 B contiguous per K-row)
//   KW    K-slicing warps per column tile (workgroup = CT*KW warps)
//   UNIT  K-words per unit (multiple of 4; one scale/zero load per unit)
//   DEPTH units whose loads are in flight per warp (1, or 2: next unit's loads before this MMA)
//   XS    activations: 0 global in the unit's loads, 1 staged once per workgroup in LDS (B-fragment
//         order) and read with the unit's loads, 2 staged and read just before the MMAs
//   SK    workgroups splitting K per column tile (partials to an f32 workspace)
//   PF    weight loads: 0 plain, 1 ld.global.nc.L1::no_allocate.L2::256B, 2 ld.global.nc.L1::no_allocate
//   MINB  __launch_bounds__ minimum workgroups per SM (caps registers)
//   DEC2  decode nibble pairs i, i+4 with one LOP3; odd nibbles as 16q+1024 fixed by one HFMA2
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <string>

#include "gen/gemv_int4.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

static __device__ __forceinline__ uint32_t hsub2u(uint32_t a, uint32_t b) {
  uint32_t d; asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d;
}
static __device__ __forceinline__ uint32_t hfma2u(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d; asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
static __device__ __forceinline__ void mma(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

template <int PF> static __device__ __forceinline__ uint4 ldw(const uint32_t* p) {
  if (PF == 0) return *reinterpret_cast<const uint4*>(p);
  uint4 v;
  if (PF == 1)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

template <int UNIT> struct Buf {
  uint2 sc; uint32_t zw; uint4 w[UNIT / 4]; uint4 xb[UNIT / 4];
};

template <int CT, int KW, int UNIT, int DEPTH, int XS, int SK, bool DEC2, int PF = 0, int MINB = 1>
__global__ void __launch_bounds__(CT * KW * 32, MINB)
gemv_proto(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ sc, const uint32_t* __restrict__ qz,
           const uint16_t* __restrict__ x, float* __restrict__ ws, uint16_t* __restrict__ y, int K, int N) {
  constexpr int STEPS = UNIT / 4;
  extern __shared__ uint4 xs_s[];                 // [K/8] : (x0,x4),(x1,x5),(x2,x6),(x3,x7)
  __shared__ float red[KW][CT * 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ct = warp % CT, kw = warp / CT, g = lane / 4, t = lane % 4;
  const int n0 = (blockIdx.x * CT + ct) * 32 + g * 4;
  const int units = K / 8 / UNIT;
  const int u_begin = (int)((long)units * blockIdx.y / SK), u_end = (int)((long)units * (blockIdx.y + 1) / SK);
  if (XS) {
    const int kw_begin = u_begin * UNIT, kw_end = u_end * UNIT;
    for (int k = kw_begin + threadIdx.x; k < kw_end; k += blockDim.x) {
      uint4 v = *reinterpret_cast<const uint4*>(&x[k * 8]);
      uint4 o;
      o.x = (v.x & 0xffffu) | (v.z << 16);
      o.y = (v.x >> 16) | (v.z & 0xffff0000u);
      o.z = (v.y & 0xffffu) | (v.w << 16);
      o.w = (v.y >> 16) | (v.w & 0xffff0000u);
      xs_s[k] = o;
    }
    __syncthreads();
  }
  float tot[8];
#pragma unroll
  for (int i = 0; i < 8; i++) tot[i] = 0.f;
  const bool col_ok = n0 < N;

  auto load = [&](Buf<UNIT>& b, int un) {
    const int grp = un * UNIT / 16;  // group 128 = 16 words
    b.sc = make_uint2(0, 0); b.zw = 0;
    if (col_ok) {
      b.sc = *reinterpret_cast<const uint2*>(&sc[(size_t)grp * N + n0]);
      b.zw = qz[(size_t)grp * (N / 8) + n0 / 8];
#pragma unroll
      for (int st = 0; st < STEPS; st++)
        b.w[st] = ldw<PF>(&qw[(size_t)(un * UNIT + 4 * st + t) * N + n0]);
    }
#pragma unroll
    for (int st = 0; st < STEPS; st++) {
      const int kword = un * UNIT + 4 * st + t;
      if (XS == 2) {
        // read from LDS just before the MMAs (compute): no registers held across the wait
      } else if (XS == 1) {
        b.xb[st] = g == 0 ? xs_s[kword] : make_uint4(0, 0, 0, 0);
      } else {
        uint4 o = make_uint4(0, 0, 0, 0);
        if (g == 0) {
          uint4 v = *reinterpret_cast<const uint4*>(&x[kword * 8]);
          o.x = (v.x & 0xffffu) | (v.z << 16);
          o.y = (v.x >> 16) | (v.z & 0xffff0000u);
          o.z = (v.y & 0xffffu) | (v.w << 16);
          o.w = (v.y >> 16) | (v.w & 0xffff0000u);
        }
        b.xb[st] = o;
      }
    }
  };
  auto compute = [&](Buf<UNIT>& b, int un) {
    if (XS == 2) {
#pragma unroll
      for (int st = 0; st < STEPS; st++) b.xb[st] = g == 0 ? xs_s[un * UNIT + 4 * st + t] : make_uint4(0, 0, 0, 0);
    }
    float s[4] = {h2f(b.sc.x & 0xffff), h2f(b.sc.x >> 16), h2f(b.sc.y & 0xffff), h2f(b.sc.y >> 16)};
    uint32_t zp[4], zh[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t z = ((b.zw >> (((n0 + j) % 8) * 4)) & 0xf) + 1;   // GPTQ v1: stored z - 1
      zp[j] = (z + 0x6400u) * 0x10001u;                          // 1024 + z in both halves
      // -(64 + z) in both halves (an integer <= 80: exact in FP16), so that
      // fma(1024 + 16q, 1/16, -(64 + z)) = q - z exactly
      __half hz = __float2half_rn(-(64.0f + (float)z));
      uint32_t hb = __half_as_ushort(hz);
      zh[j] = hb * 0x10001u;
    }
    float ua[8];
#pragma unroll
    for (int i = 0; i < 8; i++) ua[i] = 0.f;
    const uint32_t sixteenth = 0x2C002C00u;  // 1/16 in both halves
#pragma unroll
    for (int st = 0; st < STEPS; st++) {
      const uint32_t ws_[4] = {b.w[st].x, b.w[st].y, b.w[st].z, b.w[st].w};
      const uint32_t bf[4] = {b.xb[st].x, b.xb[st].y, b.xb[st].z, b.xb[st].w};
#pragma unroll
      for (int p = 0; p < 2; p++) {
        uint32_t dec[2][4];  // [cwi][nibble pair i]
#pragma unroll
        for (int cwi = 0; cwi < 2; cwi++) {
          const uint32_t w = ws_[2 * p + cwi];
          if (DEC2) {
            const uint32_t w8 = w >> 8;
            dec[cwi][0] = hsub2u((w & 0x000F000Fu) | 0x64006400u, zp[2 * p + cwi]);
            dec[cwi][1] = hfma2u((w & 0x00F000F0u) | 0x64006400u, sixteenth, zh[2 * p + cwi]);
            dec[cwi][2] = hsub2u((w8 & 0x000F000Fu) | 0x64006400u, zp[2 * p + cwi]);
            dec[cwi][3] = hfma2u((w8 & 0x00F000F0u) | 0x64006400u, sixteenth, zh[2 * p + cwi]);
          } else {
#pragma unroll
            for (int i = 0; i < 4; i++)
              dec[cwi][i] = hsub2u(((w >> (4 * i)) & 0x000F000Fu) | 0x64006400u, zp[2 * p + cwi]);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const uint32_t a[4] = {dec[0][2 * h], dec[1][2 * h], dec[0][2 * h + 1], dec[1][2 * h + 1]};
          mma(&ua[p * 4], a, bf[2 * h], bf[2 * h + 1]);
        }
      }
    }
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
      for (int i = 0; i < 4; i++) tot[p * 4 + i] = fmaf(s[2 * p + i / 2], ua[p * 4 + i], tot[p * 4 + i]);
  };

  if (DEPTH == 1) {
    for (int un = u_begin + kw; un < u_end; un += KW) {
      Buf<UNIT> b; load(b, un); compute(b, un);
    }
  } else {
    Buf<UNIT> b0, b1;
    int un = u_begin + kw;
    if (un < u_end) load(b0, un);
    for (; un < u_end; un += 2 * KW) {
      if (un + KW < u_end) load(b1, un + KW);
      compute(b0, un);
      if (un + 2 * KW < u_end) load(b0, un + 2 * KW);
      if (un + KW < u_end) compute(b1, un + KW);
    }
  }
  // batch row 0 lives in lanes t == 0: d0 = column n0+2p, d2 = column n0+2p+1
  if (t == 0) {
#pragma unroll
    for (int p = 0; p < 2; p++) {
      red[kw][ct * 32 + g * 4 + 2 * p] = tot[p * 4 + 0];
      red[kw][ct * 32 + g * 4 + 2 * p + 1] = tot[p * 4 + 2];
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < CT * 32; c += blockDim.x) {
    const int n = blockIdx.x * CT * 32 + c;
    if (n >= N) continue;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < KW; k++) sum += red[k][c];
    if (SK == 1) y[n] = __half_as_ushort(__float2half_rn(sum));
    else ws[(size_t)blockIdx.y * N + n] = sum;
  }
}


// Round 3: the packed words of each warp's units staged through shared memory with cp.async
// (L2 -> SMEM, no registers held while in flight), STAGES units in flight per warp; each lane
// copies and later reads back only its own 64 bytes, so no barrier is needed between the copy
// and the read (cp.async.wait_group orders them per thread). KW = 4 K warps, split-K SK, x in
// LDS (XS = 2), one-shift decode. Columns past N are not masked (the test shapes have none).
static __device__ __forceinline__ void cp16(void* smem, const void* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" :: "r"(a), "l"(g));
}
static __device__ __forceinline__ void cp8(void* smem, const void* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(a), "l"(g));
}
static __device__ __forceinline__ void cp4(void* smem, const void* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(a), "l"(g));
}
template <int N> static __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }

template <int KW, int STAGES, int SK>
__global__ void __launch_bounds__(KW * 32)
gemv_cpasync(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ sc, const uint32_t* __restrict__ qz,
             const uint16_t* __restrict__ x, float* __restrict__ ws, uint16_t* __restrict__ y, int K, int N) {
  constexpr int UNIT = 16, STEPS = 4;
  extern __shared__ uint4 dyn[];
  // [K/8/SK] x fragments, then per warp [STAGES][32 lanes][STEPS + 1] (the +1: scales and zero word)
  __shared__ float red[KW][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * 32 + g * 4;
  const int units = K / 8 / UNIT;
  const int u_begin = units * blockIdx.y / SK, u_end = units * (blockIdx.y + 1) / SK;
  const int kw_begin = u_begin * UNIT, kwords = (u_end - u_begin) * UNIT;
  uint4* xs_s = dyn;
  uint4* stage = dyn + kwords + (warp * STAGES * 32 + lane) * (STEPS + 1);
  for (int k = threadIdx.x; k < kwords; k += blockDim.x) {
    uint4 v = *reinterpret_cast<const uint4*>(&x[(kw_begin + k) * 8]);
    uint4 o;
    o.x = (v.x & 0xffffu) | (v.z << 16);
    o.y = (v.x >> 16) | (v.z & 0xffff0000u);
    o.z = (v.y & 0xffffu) | (v.w << 16);
    o.w = (v.y >> 16) | (v.w & 0xffff0000u);
    xs_s[k] = o;
  }
  __syncthreads();
  const int mine = (u_end - u_begin - warp + KW - 1) / KW;  // units of this warp
  auto issue = [&](int i) {
    if (i < mine) {
      const int un = u_begin + warp + i * KW, grp = un;  // UNIT 16 = one group
      uint4* st = stage + (i % STAGES) * 32 * (STEPS + 1);
#pragma unroll
      for (int s = 0; s < STEPS; s++) cp16(&st[s], &qw[(size_t)(un * UNIT + 4 * s + t) * N + n0]);
      cp8(&st[STEPS], &sc[(size_t)grp * N + n0]);
      cp4(reinterpret_cast<uint32_t*>(&st[STEPS]) + 2, &qz[(size_t)grp * (N / 8) + n0 / 8]);
    }
    cp_commit();
  };
  float tot[8];
#pragma unroll
  for (int i = 0; i < 8; i++) tot[i] = 0.f;
#pragma unroll
  for (int i = 0; i < STAGES - 1; i++) issue(i);
  const uint32_t sixteenth = 0x2C002C00u;
  for (int i = 0; i < mine; i++) {
    cp_wait<STAGES - 2>();
    issue(i + STAGES - 1);
    const uint4* st = stage + (i % STAGES) * 32 * (STEPS + 1);
    const int un = u_begin + warp + i * KW;
    const uint4 meta = st[STEPS];
    float s4[4] = {h2f(meta.x & 0xffff), h2f(meta.x >> 16), h2f(meta.y & 0xffff), h2f(meta.y >> 16)};
    uint32_t zp[4], zh[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t z = ((meta.z >> (((n0 + j) % 8) * 4)) & 0xf) + 1;
      zp[j] = (z + 0x6400u) * 0x10001u;
      zh[j] = (0xD400u + 16u * z) * 0x10001u;
    }
    float ua[8];
#pragma unroll
    for (int q = 0; q < 8; q++) ua[q] = 0.f;
#pragma unroll
    for (int s = 0; s < STEPS; s++) {
      const uint4 w4 = st[s];
      const uint4 xb = g == 0 ? xs_s[un * UNIT - kw_begin + 4 * s + t] : make_uint4(0, 0, 0, 0);
      const uint32_t ws_[4] = {w4.x, w4.y, w4.z, w4.w};
      const uint32_t bf[4] = {xb.x, xb.y, xb.z, xb.w};
#pragma unroll
      for (int p = 0; p < 2; p++) {
        uint32_t dec[2][4];
#pragma unroll
        for (int cwi = 0; cwi < 2; cwi++) {
          const uint32_t w = ws_[2 * p + cwi], w8 = w >> 8;
          dec[cwi][0] = hsub2u((w & 0x000F000Fu) | 0x64006400u, zp[2 * p + cwi]);
          dec[cwi][1] = hfma2u((w & 0x00F000F0u) | 0x64006400u, sixteenth, zh[2 * p + cwi]);
          dec[cwi][2] = hsub2u((w8 & 0x000F000Fu) | 0x64006400u, zp[2 * p + cwi]);
          dec[cwi][3] = hfma2u((w8 & 0x00F000F0u) | 0x64006400u, sixteenth, zh[2 * p + cwi]);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const uint32_t a[4] = {dec[0][2 * h], dec[1][2 * h], dec[0][2 * h + 1], dec[1][2 * h + 1]};
          mma(&ua[p * 4], a, bf[2 * h], bf[2 * h + 1]);
        }
      }
    }
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
      for (int q = 0; q < 4; q++) tot[p * 4 + q] = fmaf(s4[2 * p + q / 2], ua[p * 4 + q], tot[p * 4 + q]);
  }
  cp_wait<0>();
  if (t == 0) {
#pragma unroll
    for (int p = 0; p < 2; p++) {
      red[warp][g * 4 + 2 * p] = tot[p * 4 + 0];
      red[warp][g * 4 + 2 * p + 1] = tot[p * 4 + 2];
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int n = blockIdx.x * 32 + threadIdx.x;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < KW; k++) sum += red[k][threadIdx.x];
    if (SK == 1) y[n] = __half_as_ushort(__float2half_rn(sum));
    else ws[(size_t)blockIdx.y * N + n] = sum;
  }
}

// Reference: one thread per column, f32, plain dequantisation.
__global__ void gemv_ref(const uint32_t* qw, const uint16_t* sc, const uint32_t* qz, const uint16_t* x, float* y, int K, int N) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; k++) {
    int grp = k / 128;
    uint32_t q = (qw[(size_t)(k / 8) * N + n] >> (4 * (k % 8))) & 0xf;
    uint32_t z = ((qz[(size_t)grp * (N / 8) + n / 8] >> (4 * (n % 8))) & 0xf) + 1;
    acc += ((float)q - (float)z) * h2f(sc[(size_t)grp * N + n]) * h2f(x[k]);
  }
  y[n] = acc;
}

template <int U>
__global__ void read_seq(const uint4* __restrict__ a, size_t n16, uint32_t* out) {
  uint32_t acc = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; j++) v[j] = i + j * stride < n16 ? a[i + j * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < U; j++) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}
__global__ void copy_k(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n16) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += stride) b[i] = a[i];
}

struct Set { uint32_t* qw; uint16_t* sc; uint32_t* qz; };
static int ROT = 8, ITERS = 200, WARM = 20;
static cudaEvent_t e0, e1;

template <class F> static float time_it(F launch) {
  for (int i = 0; i < WARM; i++) launch(i % ROT);
  CK(cudaEventRecord(e0));
  for (int i = 0; i < ITERS; i++) launch(i % ROT);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaGetLastError());
  return ms * 1000.f / ITERS;
}

static uint32_t rng = 12345u;
static uint32_t nextu() { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }

int main(int argc, char** argv) {
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const int shapes[][2] = {{5120, 17408}, {17408, 5120}, {5120, 4352}, {4352, 5120}};
  float* d_ref; float* d_ws; uint16_t* d_y; uint16_t* d_x; uint32_t* d_junk;
  CK(cudaMalloc(&d_ref, 17408 * 4)); CK(cudaMalloc(&d_ws, 16 * 17408 * 4)); CK(cudaMalloc(&d_y, 17408 * 2));
  CK(cudaMalloc(&d_x, 17408 * 2)); CK(cudaMalloc(&d_junk, 64));
  for (auto& sh : shapes) {
    const int K = sh[0], N = sh[1];
    size_t nq = (size_t)K / 8 * N, ns = (size_t)K / 128 * N, nz = (size_t)K / 128 * N / 8;
    double bytes = nq * 4.0 + ns * 2.0 + nz * 4.0 + K * 2.0 + N * 2.0;
    ROT = (int)std::max(4.0, std::ceil(6 * 60e6 / bytes));
    std::vector<uint32_t> hq(nq), hz(nz); std::vector<uint16_t> hs(ns), hx(K);
    for (auto& v : hq) v = nextu();
    for (auto& v : hz) v = nextu();
    for (auto& v : hs) v = __half_as_ushort(__float2half(0.002f + 0.008f * (nextu() % 1000) / 1000.f));
    for (auto& v : hx) v = __half_as_ushort(__float2half(((int)(nextu() % 2001) - 1000) / 1000.f));
    std::vector<Set> sets(ROT);
    for (auto& s : sets) {
      CK(cudaMalloc(&s.qw, nq * 4)); CK(cudaMalloc(&s.sc, ns * 2)); CK(cudaMalloc(&s.qz, nz * 4));
      CK(cudaMemcpy(s.qw, hq.data(), nq * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(s.sc, hs.data(), ns * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(s.qz, hz.data(), nz * 4, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(d_x, hx.data(), K * 2, cudaMemcpyHostToDevice));
    gemv_ref<<<(N + 127) / 128, 128>>>(sets[0].qw, sets[0].sc, sets[0].qz, d_x, d_ref, K, N);
    std::vector<float> ref(N); CK(cudaMemcpy(ref.data(), d_ref, N * 4, cudaMemcpyDeviceToHost));
    double refmax = 0; for (float v : ref) refmax = std::max(refmax, (double)fabs(v));

    // copy bandwidth of the same bytes (read + write), and a streaming read
    uint4* cb; CK(cudaMalloc(&cb, (size_t)ROT * nq * 4));
    float tcopy = time_it([&](int r) { copy_k<<<132 * 8, 512>>>((const uint4*)sets[r].qw, cb + (size_t)r * nq / 4, nq / 4); });
    float tread4 = time_it([&](int r) { read_seq<4><<<132 * 8, 256>>>((const uint4*)sets[r].qw, nq / 4, d_junk); });
    float tread8 = time_it([&](int r) { read_seq<8><<<132 * 4, 256>>>((const uint4*)sets[r].qw, nq / 4, d_junk); });
    CK(cudaFree(cb));
    double copybw = 2.0 * nq * 4 / (tcopy * 1e-6) / 1e9;
    printf("\n## K=%d N=%d  (%.1f MB per call, %d copies rotated)\n", K, N, bytes / 1e6, ROT);
    printf("copy %.2f us = %.0f GB/s (r+w) | read4 %.2f us = %.0f GB/s | read8 %.2f us = %.0f GB/s\n", tcopy, copybw,
           tread4, nq * 4 / (tread4 * 1e-6) / 1e9, tread8, nq * 4 / (tread8 * 1e-6) / 1e9);
    printf("| variant | us | GB/s | %% copy | max err / max|ref| |\n|---|---:|---:|---:|---:|\n");
    auto report = [&](const char* name, float us, int sk) {
      std::vector<float> out(N);
      if (sk == 1) {
        std::vector<uint16_t> h(N); CK(cudaMemcpy(h.data(), d_y, N * 2, cudaMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) out[i] = __half2float(__ushort_as_half(h[i]));
      } else {
        std::vector<float> w((size_t)sk * N); CK(cudaMemcpy(w.data(), d_ws, (size_t)sk * N * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) { float s = 0; for (int k = 0; k < sk; k++) s += w[(size_t)k * N + i]; out[i] = s; }
      }
      double err = 0; for (int i = 0; i < N; i++) err = std::max(err, (double)fabs(out[i] - ref[i]));
      double bw = bytes / (us * 1e-6) / 1e9;
      printf("| %s | %.2f | %.0f | %.0f %% | %.1e%s |\n", name, us, bw, 100 * bw / copybw, err / refmax,
             err / refmax > 2e-3 ? " WRONG" : "");
    };
    // the generated kernel (emitted at TP 1 for 5120 -> 17408 only)
    if (K == 5120 && N == 17408) {
      CK(cudaMemset(d_y, 0, N * 2));
      float us = time_it([&](int r) { gemv_int4<<<544, 256>>>(sets[r].qw, (const wf_f16*)sets[r].sc, sets[r].qz, d_x, d_y); });
      // the last launch used set (WARM+ITERS-1) % ROT; recompute on set 0 for the check
      gemv_int4<<<544, 256>>>(sets[0].qw, (const wf_f16*)sets[0].sc, sets[0].qz, d_x, d_y);
      report("generated (emit, as committed)", us, 1);
    }
#define VAR(CT, KW, UNIT, DEPTH, XS, SK, DEC2, PF, MINB)                                                                   \
    {                                                                                                            \
      auto kern = gemv_proto<CT, KW, UNIT, DEPTH, XS, SK, DEC2, PF, MINB>;                                                 \
      size_t smem = XS ? (size_t)K * 2 : 0;                                                                      \
      if (smem > 48 * 1024) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
      dim3 grid((N + CT * 32 - 1) / (CT * 32), SK);                                                              \
      auto go = [&](int r) { kern<<<grid, CT * KW * 32, smem>>>(sets[r].qw, sets[r].sc, sets[r].qz, d_x, d_ws, d_y, K, N); }; \
      float us = time_it(go);                                                                                    \
      go(0); CK(cudaDeviceSynchronize());                                                                        \
      cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kern));                                               \
      int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, CT * KW * 32, smem));                \
      char name[200];                                                                                            \
      snprintf(name, sizeof name, "CT%d KW%d unit%d depth%d xs%d sk%d dec%d pf%d minb%d (%d regs, %d wg/SM, grid %d)", CT, KW, UNIT, \
               DEPTH, (int)XS, SK, DEC2 ? 2 : 1, PF, MINB, fa.numRegs, occ, grid.x * grid.y);                              \
      report(name, us, SK);                                                                                      \
    }
    VAR(1, 4, 16, 1, 2, 4, true, 1, 1)
#define CPVAR(KW, STAGES, SK)                                                                                    \
    {                                                                                                            \
      auto kern = gemv_cpasync<KW, STAGES, SK>;                                                                  \
      size_t smem = (size_t)(K / 8 / SK) * 16 + (size_t)KW * STAGES * 32 * 5 * 16;                               \
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));                    \
      dim3 grid(N / 32, SK);                                                                                     \
      auto go = [&](int r) { kern<<<grid, KW * 32, smem>>>(sets[r].qw, sets[r].sc, sets[r].qz, d_x, d_ws, d_y, K, N); }; \
      float us = time_it(go);                                                                                    \
      go(0); CK(cudaDeviceSynchronize());                                                                        \
      cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kern));                                               \
      int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, KW * 32, smem));                     \
      char name[200];                                                                                            \
      snprintf(name, sizeof name, "cp.async KW%d stages%d sk%d (%d regs, %zu B smem, %d wg/SM, grid %d)", KW, STAGES, SK, \
               fa.numRegs, smem, occ, grid.x * grid.y);                                                          \
      report(name, us, SK);                                                                                      \
    }
    CPVAR(4, 2, 4)
    CPVAR(4, 3, 4)
    CPVAR(4, 4, 4)
    CPVAR(4, 6, 4)
    CPVAR(4, 4, 2)
    CPVAR(4, 4, 8)
    CPVAR(8, 4, 4)
    CPVAR(2, 4, 8)
    CPVAR(2, 6, 8)
    for (auto& s : sets) { CK(cudaFree(s.qw)); CK(cudaFree(s.sc)); CK(cudaFree(s.qz)); }
  }
  return 0;
}
