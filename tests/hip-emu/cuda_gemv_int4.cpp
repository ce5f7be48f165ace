// Runs the sm_90 gemv_int4_ref (kernels-gen/reference/cuda/gemv_int4.cu) in the host emulation on
// random inputs and compares y with the f64 oracle, as gemv_int4.cpp does for the gfx906 source.
// One build per shape, with the kernel's [build] defines (-DWF_K -DWF_N -DWF_BATCH -DWF_GROUP
// -DWF_ZP_V1) and -DWF_EMU_KERNEL='"…/gemv_int4.cu"'.
// Usage: cuda_gemv_int4 SEED. Exit status: 0 match, 1 mismatch, 2 bad inputs or usage, 3
// emulation error (README.md).
#include "cuda/cuda_emu.h"

#include WF_EMU_KERNEL

#include <stdio.h>

#include "driver.h"

int main(int argc, char** argv) {
    const WfArgs args = wf_args(argc, argv);
    emu_seed(args.seed);
    WfGptq w = wf_gptq_alloc(WF_K, WF_N);
    wf_random_gptq(w, args.seed, 0);
    _Float16* x = emu_alloc<_Float16>((size_t)WF_BATCH * WF_K);
    wf_random_f16(x, (size_t)WF_BATCH * WF_K, 0.0, 1.0, args.seed, 0);
    wf_require_gptq(w);
    wf_require_varied("x", x, (size_t)WF_BATCH * WF_K * 2);
    _Float16* y = emu_alloc<_Float16>((size_t)WF_BATCH * WF_N); // NaN until written

    // The launch of the kernel's header: ceil(N / 32) blocks of 256 threads.
    emu_launch((WF_N + 31) / 32, 256, [&] {
        gemv_int4_ref(w.qweight, (const f16*)w.scales, w.qzeros, (const f16*)x, (f16*)y);
    });

    double* want = new double[(size_t)WF_BATCH * WF_N];
    wf_oracle_gemv(w, x, WF_BATCH, want);
    char what[160];
    snprintf(what, sizeof what, "cuda gemv_int4 K=%d N=%d batch=%d group=%d zp_v1=%d seed=%llu", WF_K, WF_N, WF_BATCH,
             WF_GROUP, WF_ZP_V1, (unsigned long long)args.seed);
    return wf_compare(what, y, want, (size_t)WF_BATCH * WF_N, WF_TOL_GEMV) ? 0 : 1;
}
