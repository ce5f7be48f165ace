// Diagnostic (issue 7, target 1): how fast can the bytes of an INT4 GEMV be read on this GPU, in
// the generated kernel's access pattern and in others, with no arithmetic at all?
//
// Every kernel below reads the same qweight/scales/qzeros bytes a GPTQ GEMV reads (K x N INT4,
// group 128) and XORs them into one word per lane (stored only when it equals a value it never
// takes, so the loads stay live). Timed like the prototype: back-to-back launches over 8 copies of
// the weights (> 6 x L2), CUDA events, mean per launch.
//   linear      grid-stride 16-byte loads over the qweight bytes, 4 in flight per lane
//   gptq        the generated gemv_int4's sm_90 default exactly: 128-lane workgroups of 4 K warps,
//               32-column tiles, K split 4 ways, units of 16 K-words (4 x 16 B per lane, rows
//               4s + lane%4, columns tile*32 + 4*(lane/4)), plus the unit's scales and zero word
//   gptq-2      the same, two units' loads in flight before their XOR (8 x 16 B per lane)
//   contig      the same grid and unit count, but each unit's 2 KB are contiguous (a repacked
//               layout: lane l reads bytes 16 l + 512 s of the unit)
//   gen         the generated kernel itself (gen-now/gemv_int4.cu, K = 5120, N = 17408 only),
//               and hand-edited variants of it (make_variants.py), checked bit for bit against it
// Build and run on the GPU machine: bash bench/proto/run-read-pattern.sh (makes the variants first)
#include <cuda_fp16.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gen-now/gemv_int4.cu"
// hand-edited variants of it and of the kernel with units of 8 K-words (make_variants.py)
#include "gen-now/v_s16_plain.cu"
#include "gen-now/v_s16_noepi.cu"
#include "gen-now/v_s16_early.cu"
#include "gen-now/v_s16_early2.cu"
#include "gen-now/v_s8_plain.cu"
#include "gen-now/v_s8_noepi.cu"
#include "gen-now/v_s8_early.cu"
#include "gen-now/v_s8_early2.cu"
#include "gen-now/v_s16_noload.cu"
// the generator after the lop3 / no-select change (gen-lop3/gemv_int4.cu, renamed), and the
// offset decode hand-edited onto it (make_offset.py)
static __device__ __forceinline__ unsigned wf_and_or(unsigned x, unsigned a, unsigned b) {
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(x), "r"(a), "r"(b));
    return d;
}
#include "gen-now/v_lop3.cu"
#include "gen-now/v_offset.cu"
#include "gen-now/v_offset12.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

static __device__ __forceinline__ uint4 ldnc(const uint32_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
static __device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

__global__ void __launch_bounds__(256) read_linear(const uint4* __restrict__ p, size_t n16, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 a = ldnc((const uint32_t*)&p[i]), b = ldnc((const uint32_t*)&p[i + stride]);
    uint4 c = ldnc((const uint32_t*)&p[i + 2 * stride]), d = ldnc((const uint32_t*)&p[i + 3 * stride]);
    acc ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
  }
  for (; i < n16; i += stride) acc ^= fold(ldnc((const uint32_t*)&p[i]));
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// MODE 0: gptq pattern, one unit in flight; 1: two units in flight; 2: contiguous units.
template <int MODE>
__global__ void __launch_bounds__(128) read_gptq(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ sc,
                                                 const uint32_t* __restrict__ qz, int K, int N, int P, uint32_t* out) {
  const int tiles = N / 32, units = K / 128;  // units of 16 K-words = one group of 128
  const int tile = blockIdx.x % tiles, part = blockIdx.x / tiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = tile * 32 + g * 4;
  const int u0 = units * part / P, u1 = units * (part + 1) / P;
  uint32_t acc = 0;
  auto unit = [&](int u) {
    uint32_t a = 0;
    a ^= *reinterpret_cast<const uint32_t*>(&sc[(size_t)u * N + n0]);
    a ^= qz[(size_t)u * (N / 8) + n0 / 8];
    if (MODE == 2) {
      // unit (u, tile) stored as 2 KB contiguous, units of a tile adjacent in K
      const uint32_t* base = qw + ((size_t)tile * units + u) * 512;
#pragma unroll
      for (int s = 0; s < 4; s++) a ^= fold(ldnc(base + s * 128 + lane * 4));
    } else {
#pragma unroll
      for (int s = 0; s < 4; s++) a ^= fold(ldnc(&qw[(size_t)(u * 16 + 4 * s + t) * N + n0]));
    }
    return a;
  };
  if (MODE == 1) {
    int u = u0 + warp;
    for (; u + 4 < u1; u += 8) {
      uint4 w[8];
#pragma unroll
      for (int s = 0; s < 4; s++) w[s] = ldnc(&qw[(size_t)(u * 16 + 4 * s + t) * N + n0]);
#pragma unroll
      for (int s = 0; s < 4; s++) w[4 + s] = ldnc(&qw[(size_t)((u + 4) * 16 + 4 * s + t) * N + n0]);
      acc ^= *reinterpret_cast<const uint32_t*>(&sc[(size_t)u * N + n0]) ^ qz[(size_t)u * (N / 8) + n0 / 8];
      acc ^= *reinterpret_cast<const uint32_t*>(&sc[(size_t)(u + 4) * N + n0]) ^ qz[(size_t)(u + 4) * (N / 8) + n0 / 8];
#pragma unroll
      for (int s = 0; s < 8; s++) acc ^= fold(w[s]);
    }
    for (; u < u1; u += 4) acc ^= unit(u);
  } else {
    for (int u = u0 + warp; u < u1; u += 4) acc ^= unit(u);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
  template <class F> float per_launch(F f, int iters) {
    for (int i = 0; i < 20; i++) f(i);
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(a));
    for (int i = 0; i < iters; i++) f(i);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaGetLastError());
    return ms * 1000.f / iters;
  }
};

int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int shapes[][2] = {{5120, 17408}, {17408, 5120}, {5120, 4352}, {4352, 5120}};
  uint32_t* out; CK(cudaMalloc(&out, 4));
  Timer tm;
  const int iters = 400;
  for (auto& s : shapes) {
    const int K = s[0], N = s[1];
    const size_t qw_words = (size_t)K / 8 * N, sc_n = (size_t)K / 128 * N, qz_words = (size_t)K / 128 * N / 8;
    const size_t bytes = qw_words * 4 + sc_n * 2 + qz_words * 4;
    const int copies = (int)((400u << 20) / bytes) + 1;
    std::vector<uint32_t*> qw(copies), qz(copies);
    std::vector<uint16_t*> sc(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&qw[c], qw_words * 4)); CK(cudaMemset(qw[c], c + 1, qw_words * 4));
      CK(cudaMalloc(&sc[c], sc_n * 2)); CK(cudaMemset(sc[c], 0x3c, sc_n * 2));
      CK(cudaMalloc(&qz[c], qz_words * 4)); CK(cudaMemset(qz[c], 0x77, qz_words * 4));
    }
    // the copy bandwidth of the same bytes, in this run (read + write counted)
    uint32_t* dst; CK(cudaMalloc(&dst, qw_words * 4));
    const float copy_us = tm.per_launch([&](int i) {
      CK(cudaMemcpyAsync(dst, qw[i % copies], qw_words * 4, cudaMemcpyDeviceToDevice)); }, iters / 4);
    printf("## K=%d N=%d: %.1f MB per call (qweight+scales+qzeros), %d copies rotated; device copy of the qweight "
           "%.2f us = %.0f GB/s (r+w)\n", K, N, bytes / 1e6, copies, copy_us, 2.0 * qw_words * 4 / copy_us / 1e3);
    printf("| kernel | us | GB/s (bytes above) | vs linear |\n|---|---:|---:|---:|\n");
    const int tiles = N / 32, P = 4;
    float lin = 0;
    for (int blocks_per_sm : {4, 8, 16}) {
      const float us = tm.per_launch([&](int i) {
        read_linear<<<sms * blocks_per_sm, 256>>>((const uint4*)qw[i % copies], qw_words / 4, out); }, iters);
      if (blocks_per_sm == 8) lin = us;
      printf("| linear, %d x 256 lanes per SM (qweight only) | %.2f | %.0f | |\n", blocks_per_sm, us, qw_words * 4 / us / 1e3);
    }
    const char* names[] = {"gptq (generated pattern)", "gptq-2 (two units in flight)", "contig (2 KB units)"};
    float r[3];
    r[0] = tm.per_launch([&](int i) { read_gptq<0><<<tiles * P, 128>>>(qw[i % copies], sc[i % copies], qz[i % copies], K, N, P, out); }, iters);
    r[1] = tm.per_launch([&](int i) { read_gptq<1><<<tiles * P, 128>>>(qw[i % copies], sc[i % copies], qz[i % copies], K, N, P, out); }, iters);
    r[2] = tm.per_launch([&](int i) { read_gptq<2><<<tiles * P, 128>>>(qw[i % copies], sc[i % copies], qz[i % copies], K, N, P, out); }, iters);
    for (int v = 0; v < 3; v++) printf("| %s | %.2f | %.0f | %.2f |\n", names[v], r[v], bytes / r[v] / 1e3, r[v] / lin);
    if (K == 5120 && N == 17408) {
      uint16_t* x; CK(cudaMalloc(&x, K * 2));
      {
        // copy 0 and x random (the outputs compared below come from copy 0): weights and zeros
        // uniform nibbles, scales in [0.005, 0.015), x in [-1, 1)
        uint64_t st = 0x9e3779b97f4a7c15ull;
        auto rnd = [&]() { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return st; };
        std::vector<uint32_t> hq(qw_words), hz(qz_words);
        std::vector<uint16_t> hs(sc_n), hx(K);
        for (auto& w : hq) w = (uint32_t)rnd();
        for (auto& w : hz) w = (uint32_t)rnd();
        for (auto& v : hs) v = __half_as_ushort(__float2half(0.005f + 0.01f * (float)(rnd() % 1000) / 1000.f));
        for (auto& v : hx) v = __half_as_ushort(__float2half((float)((int)(rnd() % 2001) - 1000) / 1000.f));
        CK(cudaMemcpy(qw[0], hq.data(), qw_words * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(qz[0], hz.data(), qz_words * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(sc[0], hs.data(), sc_n * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(x, hx.data(), K * 2, cudaMemcpyHostToDevice));
      }
      uint16_t* y; CK(cudaMalloc(&y, N * 2));
      float* part; CK(cudaMalloc(&part, (size_t)4 * N * 4));
      uint32_t* cnt; CK(cudaMalloc(&cnt, tiles * 4)); CK(cudaMemset(cnt, 0, tiles * 4));
      typedef void (*Gemv)(const unsigned*, const wf_f16*, const unsigned*, const wf_f16*, wf_f16*, float*, unsigned*, unsigned);
      const Gemv fs[] = {gemv_int4, gemv_int4_s16_noepi, gemv_int4_s16_early, gemv_int4_s16_early2,
                         gemv_int4_s8_plain, gemv_int4_s8_noepi, gemv_int4_s8_early, gemv_int4_s8_early2,
                         gemv_int4_s16_noload, gemv_int4_lop3, gemv_int4_offset, gemv_int4_offset12};
      const char* fn[] = {"gen (generated gemv_int4, full GEMV)", "gen, no split-K arrival/finisher (y wrong)",
                          "gen, early first loads", "gen, early + next unit before the MMAs",
                          "gen units of 8 K-words", "gen8, no split-K arrival/finisher (y wrong)",
                          "gen8, early first loads", "gen8, early + next unit before the MMAs",
                          "gen, no weight loads (y wrong)", "gen with lop3 decode, no B selects",
                          "gen with lop3, offset decode", "gen with lop3, offset decode, launch bounds 12/SM"};
      const int nv = 12;
      std::vector<uint16_t> y0(N), yv(N);
      for (int v = 0; v < nv; v++) {
        CK(cudaMemset(cnt, 0, tiles * 4));
        unsigned epoch = 0;
        const float us = tm.per_launch([&](int i) {
          fs[v]<<<tiles * P, 128>>>(qw[i % copies], sc[i % copies], qz[i % copies], x, y, part, cnt, ++epoch); }, iters);
        // the outputs of one more launch on copy 0, against the generated kernel's
        CK(cudaMemset(y, 0xff, N * 2));
        fs[v]<<<tiles * P, 128>>>(qw[0], sc[0], qz[0], x, y, part, cnt, ++epoch);
        CK(cudaMemcpy(v == 0 ? y0.data() : yv.data(), y, N * 2, cudaMemcpyDeviceToHost));
        const bool noepi = v == 1 || v == 5 || v == 8;
        double dmax = 0, ymax = 0;
        for (int n = 0; n < N; n++) {
          auto f = [](uint16_t h) { return (double)__half2float(__ushort_as_half(h)); };
          dmax = fmax(dmax, fabs(f(yv[n]) - f(y0[n])));
          ymax = fmax(ymax, fabs(f(y0[n])));
        }
        char buf[96];
        snprintf(buf, sizeof buf, " (y differs from gen's: max |diff| / max |y| %.1e)", dmax / ymax);
        const char* same = v == 0 ? "" : (yv == y0 ? " (y bit-identical)" : buf);
        printf("| %s%s | %.2f | %.0f | %.2f |\n", fn[v], noepi ? "" : same, us, bytes / us / 1e3, us / lin);
      }
    }
    printf("\n");
    for (int c = 0; c < copies; c++) { cudaFree(qw[c]); cudaFree(sc[c]); cudaFree(qz[c]); }
    cudaFree(dst);
  }
  return 0;
}
