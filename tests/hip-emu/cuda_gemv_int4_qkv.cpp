// Runs the sm_90 gemv_int4_qkv_ref (kernels-gen/reference/cuda/gemv_int4_qkv.cu) in the host
// emulation through the CUDA shim (cuda/cuda_emu.h), exactly as gemv_int4_qkv.cpp runs the
// gfx906 source: q, k and v against the f64 oracle of the one fused [K, NQ + 2·NKV] weight.
// Usage: cuda_gemv_int4_qkv SEED. Exit status as in README.md.
#include "cuda/cuda_emu.h"

#include WF_EMU_KERNEL

#include <stdio.h>

#include "driver.h"

int main(int argc, char** argv) {
    constexpr unsigned n_all = WF_NQ + 2 * WF_NKV;
    const WfArgs args = wf_args(argc, argv);
    emu_seed(args.seed);
    WfGptq w = wf_gptq_alloc(WF_K, n_all);
    wf_random_gptq(w, args.seed, 0);
    _Float16* x = emu_alloc<_Float16>((size_t)WF_BATCH * WF_K);
    wf_random_f16(x, (size_t)WF_BATCH * WF_K, 0.0, 1.0, args.seed, 0);
    wf_require_gptq(w);
    wf_require_varied("x", x, (size_t)WF_BATCH * WF_K * 2);
    // Three separate buffers, each ending at its own guard page: a store past q's end faults
    // instead of landing in k.
    _Float16* q = emu_alloc<_Float16>((size_t)WF_BATCH * WF_NQ);
    _Float16* k = emu_alloc<_Float16>((size_t)WF_BATCH * WF_NKV);
    _Float16* v = emu_alloc<_Float16>((size_t)WF_BATCH * WF_NKV);

    // The launch of the kernel's header: ceil((NQ + 2·NKV) / 32) workgroups of 256 lanes.
    emu_launch((n_all + 31) / 32, 256, [&] {
        gemv_int4_qkv_ref(w.qweight, (const f16*)w.scales, w.qzeros, (const f16*)x, (f16*)q, (f16*)k, (f16*)v);
    });

    double* all = new double[(size_t)WF_BATCH * n_all];
    wf_oracle_gemv(w, x, WF_BATCH, all);
    // The oracle's columns [0, NQ) are q, [NQ, NQ + NKV) k, the rest v; each output row-major.
    const unsigned first[3] = {0, WF_NQ, WF_NQ + WF_NKV}, width[3] = {WF_NQ, WF_NKV, WF_NKV};
    const _Float16* got[3] = {q, k, v};
    const char* name[3] = {"q", "k", "v"};
    bool ok = true;
    for (unsigned o = 0; o < 3; ++o) {
        double* want = new double[(size_t)WF_BATCH * width[o]];
        for (unsigned b = 0; b < WF_BATCH; ++b)
            for (unsigned n = 0; n < width[o]; ++n) want[(size_t)b * width[o] + n] = all[(size_t)b * n_all + first[o] + n];
        char what[160];
        snprintf(what, sizeof what, "cuda gemv_int4_qkv %s K=%d NQ=%d NKV=%d batch=%d group=%d zp_v1=%d seed=%llu", name[o], WF_K,
                 WF_NQ, WF_NKV, WF_BATCH, WF_GROUP, WF_ZP_V1, (unsigned long long)args.seed);
        ok = wf_compare(what, got[o], want, (size_t)WF_BATCH * width[o], WF_TOL_GEMV) && ok;
    }
    return ok ? 0 : 1;
}
