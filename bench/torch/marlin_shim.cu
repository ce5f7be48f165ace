// A C entry point to Marlin's FP16 x INT4 GEMM (IST-DASLab/marlin, `marlin_cuda_kernel.cu`), so
// bench/torch/marlin_bench.py can call it through ctypes without building a PyTorch extension.
// Marlin's source is not part of this repository: the run script copies it next to this file's
// build and compiles
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -shared -Xcompiler -fPIC \
//        -I<marlin>/marlin -o libmarlin.so marlin_shim.cu
#include "marlin_cuda_kernel.cu"

// Returns 0 on success, Marlin's own error (1: problem shape, 2: no kernel for the tile), or
// 100 + the CUDA error of the launch.
extern "C" int marlin_mul(const void* a, const void* b, void* c, void* s, int m, int n, int k,
                          void* workspace, int groupsize, int dev, void* stream, int thread_k,
                          int thread_n, int sms, int max_par) {
    int err = marlin_cuda(a, b, c, s, m, n, k, workspace, groupsize, dev,
                          static_cast<cudaStream_t>(stream), thread_k, thread_n, sms, max_par);
    if (err != 0) {
        return err;
    }
    cudaError_t launch = cudaGetLastError();
    return launch == cudaSuccess ? 0 : 100 + static_cast<int>(launch);
}
