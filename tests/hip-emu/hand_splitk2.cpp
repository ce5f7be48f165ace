// Runs a user's hand-written split-K GEMV of two launches (cli/tests/handwritten/
// gemv_int4_splitk2.hip, issue 38) in the host emulation: `gemv_splitk_partial` on a 2-D grid
// (blockIdx.y the K split) writing FP32 partials to a scratch buffer, then `splitk_reduce` reading
// them, in that order, as the ABI file describes; y compared with the f64 oracle. The partials
// start as NaN (emu_alloc), so a partial the first launch does not write fails the comparison.
// Defines: -DWF_K -DWF_N -DWF_GROUP -DWF_ZP_V1 -DWF_SPLITS (and WF_BATCH=1: the kernel is batch 1).
// Usage: hand_splitk2 SEED. Exit status as the other drivers (README.md).
#include WF_EMU_KERNEL

#include <stdio.h>

#include "driver.h"

int main(int argc, char** argv) {
    const WfArgs args = wf_args(argc, argv);
    emu_seed(args.seed);
    WfGptq w = wf_gptq_alloc(WF_K, WF_N);
    wf_random_gptq(w, args.seed, 0);
    _Float16* x = emu_alloc<_Float16>(WF_K);
    wf_random_f16(x, WF_K, 0.0, 1.0, args.seed, 0);
    wf_require_gptq(w);
    wf_require_varied("x", x, (size_t)WF_K * 2);
    _Float16* y = emu_alloc<_Float16>(WF_N);                      // NaN until written
    float* partials = emu_alloc<float>((size_t)WF_SPLITS * WF_N); // the ABI's [[scratch]]

    // The ABI file's launches, in order: grid [N / 64, splits] x 64, then [N / 64] x 64.
    emu_launch_2d((WF_N + 63) / 64, WF_SPLITS, 64, [&] {
        gemv_splitk_partial(w.qweight, (const f16*)w.scales, w.qzeros, (const f16*)x, partials, WF_K, WF_N, WF_GROUP,
                            WF_SPLITS, WF_ZP_V1);
    });
    emu_launch((WF_N + 63) / 64, 64, [&] { splitk_reduce(partials, (f16*)y, WF_N, WF_SPLITS); });

    double* want = new double[WF_N];
    wf_oracle_gemv(w, x, 1, want);
    char what[160];
    snprintf(what, sizeof what, "gemv_int4_splitk2 K=%d N=%d group=%d splits=%d zp_v1=%d seed=%llu", WF_K, WF_N,
             WF_GROUP, WF_SPLITS, WF_ZP_V1, (unsigned long long)args.seed);
    return wf_compare(what, y, want, WF_N, WF_TOL_GEMV) ? 0 : 1;
}
