// What an sm_90 reference kernel of kernels-gen/reference/cuda needs from CUDA to compile with a
// host clang++ and run in the host emulation (../README.md), included before the unchanged
// source (which has no #include: NVRTC compiles it as is). The scheduler, the qualifiers,
// threadIdx / blockIdx, __syncthreads and the LDS section are the HIP shim's (../hip/hip_runtime.h):
// a CUDA block is a workgroup there, its lanes fibers that meet only at barriers.
//
// No warp-level operation (shuffles, votes, warp barriers) is provided: a kernel that uses one
// does not compile here, so the HIP shim's wave of 64 never stands in for a warp of 32. The
// sources' inline PTX sits under __CUDA_ARCH__ (never defined here), beside a host fallback
// with the same semantics (the FP16 conversions: the host compiler's _Float16, round to nearest
// even).
#pragma once

#include "hip/hip_runtime.h"

#include <string.h>

struct uint4 {
    unsigned x, y, z, w;
};

// The bits of an FP32 value (CUDA's __uint_as_float: a reinterpretation, no conversion).
inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
