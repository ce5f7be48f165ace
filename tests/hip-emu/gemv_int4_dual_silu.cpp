// Runs gemv_int4_dual_silu_ref (kernels-gen/reference/hip/gemv_int4_dual_silu.hip) in the host
// emulation on random inputs and compares y = silu(gate·x) · (up·x) with the f64 oracle. One build
// per shape, with the kernel's [build] defines (-DWF_K -DWF_N -DWF_BATCH -DWF_GROUP -DWF_ZP_V1)
// and -DWF_EMU_KERNEL='"…"'. Usage: gemv_int4_dual_silu SEED. Exit status as in README.md.
#include WF_EMU_KERNEL

#include <stdio.h>

#include "driver.h"

int main(int argc, char** argv) {
    const WfArgs args = wf_args(argc, argv);
    emu_seed(args.seed);
    WfGptq gate = wf_gptq_alloc(WF_K, WF_N), up = wf_gptq_alloc(WF_K, WF_N);
    wf_random_gptq(gate, args.seed, 0);
    wf_random_gptq(up, args.seed, 1);
    _Float16* x = emu_alloc<_Float16>((size_t)WF_BATCH * WF_K);
    wf_random_f16(x, (size_t)WF_BATCH * WF_K, 0.0, 1.0, args.seed, 0);
    wf_require_gptq(gate);
    wf_require_gptq(up);
    wf_require_varied("x", x, (size_t)WF_BATCH * WF_K * 2);
    _Float16* y = emu_alloc<_Float16>((size_t)WF_BATCH * WF_N);
    // The split-K arguments the kernel keeps but does not use (its header): poisoned buffers of
    // the ABI's lengths (4·batch·N and N/64, rounded up), so a use would show.
    float* partials = emu_alloc<float>((size_t)4 * WF_BATCH * WF_N);
    unsigned* counters = emu_alloc<unsigned>((WF_N + 63) / 64);

    // The launch of the kernel's header: ceil(N / 32) workgroups of 256 lanes.
    emu_launch((WF_N + 31) / 32, 256, [&] {
        gemv_int4_dual_silu_ref(gate.qweight, (const f16*)gate.scales, gate.qzeros, up.qweight, (const f16*)up.scales,
                                up.qzeros, (const f16*)x, (f16*)y, partials, counters, 1u);
    });

    double* want = new double[(size_t)WF_BATCH * WF_N];
    wf_oracle_dual_silu(gate, up, x, WF_BATCH, want);
    char what[160];
    snprintf(what, sizeof what, "gemv_int4_dual_silu K=%d N=%d batch=%d group=%d zp_v1=%d seed=%llu", WF_K, WF_N, WF_BATCH,
             WF_GROUP, WF_ZP_V1, (unsigned long long)args.seed);
    return wf_compare(what, y, want, (size_t)WF_BATCH * WF_N, WF_TOL_GEMV) ? 0 : 1;
}
