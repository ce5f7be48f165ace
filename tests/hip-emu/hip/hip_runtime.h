// <hip/hip_runtime.h> for the host emulation (../README.md): what a gfx906 reference kernel of
// kernels-gen/reference/hip needs to compile with a host clang++ and run on the CPU, lane by
// lane. The kernel source is compiled unchanged; everything it takes from HIP is defined here.
//
// Lanes are fibers on one host thread, run by the scheduler in ../emu.cpp. A lane runs until it
// reaches a synchronisation point (a workgroup barrier, or a wave-level exchange: a shuffle or a
// readfirstlane) or polls (s_sleep), so the only ordering between lanes is the one those points
// give. The instructions the kernels reach through builtins or inline assembly are implemented
// from their documented semantics; whether the hardware behaves as documented is outside what
// this proves.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>

// ---- qualifiers and attributes ----
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// LDS: every __shared__ variable lands in one linker section, so the scheduler can fill the
// whole of it with NaN bytes before each workgroup (an LDS read before its write then poisons
// the result instead of seeing the previous workgroup's data) and check its size against the
// 64 KiB a gfx906 workgroup may have.
#define __shared__ static __attribute__((section("wf_emu_lds")))
// The AMDGPU function attributes only steer code generation for the GPU.
#define amdgpu_flat_work_group_size(lo, hi) unused
#define amdgpu_waves_per_eu(n) unused

constexpr unsigned EMU_WAVE = 64;       // gfx906 runs waves of 64 lanes
constexpr unsigned EMU_MAX_LANES = 1024; // HIP's largest workgroup
constexpr unsigned warpSize = EMU_WAVE;

struct EmuDim {
    unsigned x = 0, y = 0, z = 0;
};
// Set by the scheduler whenever it switches to a lane; x and y of a workgroup (emu_launch_2d).
extern EmuDim threadIdx, blockIdx, blockDim, gridDim;

// ---- synchronisation points (../emu.cpp) ----
// The lane waits until every lane of the workgroup is at a barrier. The source line is recorded
// so that lanes waiting at different barriers are reported (DESIGN.md §5.8).
void emu_syncthreads(int line);
#define __syncthreads() emu_syncthreads(__LINE__)
// The lane waits until every lane of its wave is at a wave-level exchange.
void emu_wave_sync(int line);
// Prints the message (printf format) and ends the run with exit status 3 (emulation error).
[[noreturn]] void emu_die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// One slot per lane for the wave-level exchanges below.
extern float emu_xchg_f32[EMU_MAX_LANES];
extern unsigned emu_xchg_u32[EMU_MAX_LANES];

// __shfl_xor: the value of lane (lane ^ mask) of the same wave. Every lane of the wave writes its
// value, all meet, each reads its partner's, and all meet again before the slots are reused. On
// the hardware a wave runs in lockstep; here its lanes meet only at these points.
inline float emu_shfl_xor_f32(float v, int mask, int width, int line) {
    if (width <= 0 || width > (int)EMU_WAVE || (width & (width - 1)) != 0 || mask < 0 || mask >= width)
        emu_die("__shfl_xor(mask %d, width %d) at line %d: the emulation takes 0 <= mask < width <= 64, width a power of two\n",
                mask, width, line);
    const unsigned lane = threadIdx.x;
    emu_xchg_f32[lane] = v;
    emu_wave_sync(line);
#if defined(WF_EMU_PLANT_SHFL_SELF)
    // Planted bug for the negative check: the shuffle returns the lane's own value.
    const float r = v;
#else
    const float r = emu_xchg_f32[lane ^ (unsigned)mask];
#endif
    emu_wave_sync(line);
    return r;
}
#define __shfl_xor(...) emu_shfl_xor_dispatch(__LINE__, __VA_ARGS__)
inline float emu_shfl_xor_dispatch(int line, float v, int mask, int width = (int)EMU_WAVE) {
    return emu_shfl_xor_f32(v, mask, width, line);
}

// __builtin_amdgcn_readfirstlane (v_readfirstlane_b32): the value of the wave's first active lane
// (all lanes are active in these kernels). The kernels apply it to values they claim are uniform
// across the wave; a lane whose own value differs is reported, because on the hardware it would
// silently take lane 0's value.
inline unsigned emu_readfirstlane(unsigned v, int line) {
    const unsigned lane = threadIdx.x;
    emu_xchg_u32[lane] = v;
    emu_wave_sync(line);
    const unsigned first = emu_xchg_u32[lane & ~(EMU_WAVE - 1)];
    if (first != v)
        emu_die("readfirstlane at line %d: lane %u holds %u, the wave's first lane %u (not uniform)\n", line, lane, v, first);
    emu_wave_sync(line);
    return first;
}
#define __builtin_amdgcn_readfirstlane(v) emu_readfirstlane((unsigned)(v), __LINE__)

// Only orders instructions for the GPU's scheduler.
#define __builtin_amdgcn_sched_barrier(mask) ((void)(mask))

// s_sleep, between the polls of a bounded wait: the lane lets the other lanes of its workgroup
// run, then sleeps so the processes it waits for (the other workgroups and ranks, ../emu.cpp) get
// the CPU. On the hardware a wave runs in lockstep, so in the fused kernel lane 0's flag store is
// issued before lanes 1 … TP − 1 of the same wave start polling the peers' flags; here lanes run
// one at a time, and without this a polling lane would keep lane 0 from publishing and the ranks
// could wait on each other in a cycle. Every poll loop of the kernels has an s_sleep.
void emu_sleep(unsigned n);
#define __builtin_amdgcn_s_sleep(n) emu_sleep(n)

// ---- packed FP16 arithmetic, from the documented semantics ----
typedef _Float16 emu_f16x2 __attribute__((ext_vector_type(2)));

// v_dot2_f32_f16 (Vega ISA): D.f32 = S0.lo·S1.lo + S0.hi·S1.hi + S2.f32. The FP16 products are
// exact in double, the sum is formed in double and rounded once to FP32. The clamp bit is not
// used by the kernels.
inline float emu_fdot2(emu_f16x2 a, emu_f16x2 b, float c, bool clamp) {
    if (clamp) emu_die("v_dot2_f32_f16 with clamp: not emulated\n");
    return (float)((double)a.x * (double)b.x + (double)a.y * (double)b.y + (double)c);
}
#define __builtin_amdgcn_fdot2(a, b, c, clamp) emu_fdot2((a), (b), (c), (clamp))

// v_pk_fma_f16 (what ocml's __ocml_fma_2f16 compiles to): per half, a·b + c rounded once to FP16.
// The product of two FP16 values is exact in double, so only the sum is rounded before FP16.
inline emu_f16x2 __ocml_fma_2f16(emu_f16x2 a, emu_f16x2 b, emu_f16x2 c) {
    emu_f16x2 r;
    r.x = (_Float16)__builtin_fma((double)a.x, (double)b.x, (double)c.x);
    r.y = (_Float16)__builtin_fma((double)a.y, (double)b.y, (double)c.y);
    return r;
}
// v_and_or_b32: the kernels give it inline assembly only under __HIP_DEVICE_COMPILE__ (never
// defined here) and use their own (x & m) | c otherwise.

// v_dot4_i32_i8 (Vega ISA): D.i32 = Σ_i S0.i8[i] · S1.i8[i] + S2.i32, the bytes signed, the sum
// wrapping in 32 bits. The clamp bit is not used by the kernels.
inline int emu_sdot4(int a, int b, int c, bool clamp) {
    if (clamp) emu_die("v_dot4_i32_i8 with clamp: not emulated\n");
    uint32_t s = (uint32_t)c;
    for (int i = 0; i < 4; ++i) s += (uint32_t)((int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i)));
    return (int)s;
}
#define __builtin_amdgcn_sdot4(a, b, c, clamp) emu_sdot4((a), (b), (c), (clamp))

// ---- atomics: the GCC builtins, which order memory for the host (x86: TSO); the HIP scope
// argument has no host meaning ----
#define __HIP_MEMORY_SCOPE_WORKGROUP 0
#define __HIP_MEMORY_SCOPE_AGENT 0
#define __HIP_MEMORY_SCOPE_SYSTEM 0
#define __hip_atomic_load(p, order, scope) __atomic_load_n((p), (order))
#define __hip_atomic_store(p, v, order, scope) __atomic_store_n((p), (v), (order))
#define __hip_atomic_fetch_add(p, v, order, scope) __atomic_fetch_add((p), (v), (order))
#define __builtin_amdgcn_fence(order, scope) __atomic_thread_fence(order)

// ---- launches (../emu.cpp) ----
// grid workgroups of `lanes` lanes, one workgroup after the other in this process; body(ctx) is
// every lane's code. The kernels here need no two workgroups resident at once.
void emu_run(unsigned grid, unsigned lanes, void (*body)(void*), void* ctx);
// A 2-D grid, gx × gy workgroups (blockIdx.y the slower index), one after the other.
void emu_run_2d(unsigned gx, unsigned gy, unsigned lanes, void (*body)(void*), void* ctx);
// ranks × grid workgroups all resident at once, each in its own process (its own LDS), for
// kernels with grid barriers and peer flags; body(ctx, rank) is every lane's code. Buffers the
// processes share must come from emu_alloc.
void emu_run_ranks(unsigned ranks, unsigned grid, unsigned lanes, void (*body)(void*, unsigned), void* ctx);
// Memory shared with the processes of emu_run_ranks, ending at an inaccessible page: a read or
// write past the end of the buffer stops the run (exit status 3). 16-byte aligned, so the end
// may sit up to 15 bytes before the page.
void* emu_alloc_bytes(size_t bytes);
// Seeds the order in which the scheduler runs the lanes between synchronisation points.
void emu_seed(uint64_t seed);

template <class T> T* emu_alloc(size_t count) { return static_cast<T*>(emu_alloc_bytes(count * sizeof(T))); }

template <class F> void emu_launch(unsigned grid, unsigned lanes, const F& f) {
#if defined(WF_EMU_PLANT_SKIP_LAST_WORKGROUP)
    // Planted bug for the negative check: the last workgroup never runs.
    grid -= 1;
#endif
    emu_run(grid, lanes, [](void* c) { (*static_cast<const F*>(c))(); }, const_cast<F*>(&f));
}

template <class F> void emu_launch_2d(unsigned gx, unsigned gy, unsigned lanes, const F& f) {
    emu_run_2d(gx, gy, lanes, [](void* c) { (*static_cast<const F*>(c))(); }, const_cast<F*>(&f));
}

template <class F> void emu_launch_ranks(unsigned ranks, unsigned grid, unsigned lanes, const F& f) {
    emu_run_ranks(ranks, grid, lanes, [](void* c, unsigned rank) { (*static_cast<const F*>(c))(rank); },
                  const_cast<F*>(&f));
}
