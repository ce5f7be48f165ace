// Random inputs and the f64 oracle for the emulated reference kernels (oracle.cpp). Nothing here
// includes or calls kernel code: the oracle reads the packed GPTQ arrays as DESIGN.md §2 defines
// them and computes each kernel's formula (DESIGN.md §3, the op-level rounding points of §2) in
// double precision, from the same inputs the kernel gets.
#pragma once

#include <stddef.h>
#include <stdint.h>

// A GPTQ INT4 weight [K, N] in the layout of DESIGN.md §2, in buffers the caller owns.
struct WfGptq {
    unsigned k, n, group;
    bool zp_v1;        // GPTQ v1: the stored zero point is z − 1
    uint32_t* qweight; // [K/8, N], packed along K
    _Float16* scales;  // [ceil(K/G), N]
    uint32_t* qzeros;  // [ceil(K/G), N/8], packed along N
};

inline size_t wf_groups(const WfGptq& w) { return (w.k + w.group - 1) / w.group; }
inline size_t wf_qweight_words(const WfGptq& w) { return (size_t)w.k / 8 * w.n; }
inline size_t wf_scales_count(const WfGptq& w) { return wf_groups(w) * w.n; }
inline size_t wf_qzeros_words(const WfGptq& w) { return wf_groups(w) * w.n / 8; }

// Fresh data for each (seed, stream): every buffer of a run gets its own stream. Codes and zero
// points are uniform over all 16 values (so every decode case occurs), scales positive around
// 0.008 (weights of roughly N(0, 0.02), DESIGN.md §1).
void wf_random_gptq(WfGptq& w, uint64_t seed, uint64_t stream);
// n FP16 values of N(mean, sd²), rounded to FP16.
void wf_random_f16(_Float16* x, size_t n, double mean, double sd, uint64_t seed, uint64_t stream);

// Exits with status 2 unless the buffer is far from degenerate: at least 90% of its words
// nonzero, and not all equal (an all-zero input would let a kernel that computes nothing pass).
void wf_require_varied(const char* what, const void* data, size_t bytes);

// y[b, n] = Σ_k (q[k, n] − z[g(k), n]) · s[g(k), n] · x[b, k], in double, unrounded.
void wf_oracle_gemv(const WfGptq& w, const _Float16* x, unsigned batch, double* y);
// y[b, n] = silu(g) · u with g, u the two GEMVs, in double, unrounded.
void wf_oracle_dual_silu(const WfGptq& gate, const WfGptq& up, const _Float16* x, unsigned batch, double* y);
// The fused kernel's two outputs (DESIGN.md §3.7) from every rank's K-shard w[p] and x[p]:
//   partial_p = round_f16(GEMV_p)             the published partial is FP16 (a rounding point)
//   r        = round_f16(Σ_p partial_p + residual)      → residual_out (compared as is)
//   normed   = r / sqrt(mean_n r² + eps) · norm_w         (unrounded)
void wf_oracle_allreduce_rmsnorm(const WfGptq* w, const _Float16* const* x, unsigned tp, unsigned batch,
                                 const _Float16* residual, const _Float16* norm_w, double eps, double* residual_out,
                                 double* normed);

// How close an FP16 output must be to the f64 oracle. An output passes when it is finite and
//   |got − want| ≤ elem_rel · |want| + elem_rms · rms(want)     (every element)
//   ‖got − want‖₂ ≤ rel_l2 · ‖want‖₂                             (the whole output)
struct WfTolerance {
    double rel_l2, elem_rel, elem_rms;
};
// Prints one line about the comparison; returns true when it passes.
bool wf_compare(const char* what, const _Float16* got, const double* want, size_t count, WfTolerance tol);

// The driver's command line: SEED [FIRST_EPOCH]; exits with status 2 on anything else.
struct WfArgs {
    uint64_t seed;
    uint32_t first_epoch;
};
WfArgs wf_args(int argc, char** argv);
