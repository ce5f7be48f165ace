// What the four drivers share: buffers from emu_alloc (poisoned, ending at a guard page), the
// oracle's view of the kernel's zero-point define, and the tolerances. Included after the kernel
// source, so it uses only the WF_* build defines, never the kernel's own constants.
#pragma once

#include "oracle.h"

#if !defined(WF_K) || !defined(WF_ZP_V1)
#error "a driver needs the kernel's [build] defines"
#endif

// The zero-point convention the oracle reads qzeros with: the kernel's build define, or, for the
// negative check (WF_EMU_PLANT_ZP_FLIP), the other one, which must be reported as a mismatch.
#if defined(WF_EMU_PLANT_ZP_FLIP)
constexpr bool WF_ORACLE_ZP_V1 = !WF_ZP_V1;
#else
constexpr bool WF_ORACLE_ZP_V1 = WF_ZP_V1;
#endif

// Tolerances against the f64 oracle. Every output is rounded to FP16 once (DESIGN.md §2), which
// alone gives a relative L2 error of about 2e-4 (half an ulp, at most 2^-11 relative; observed
// 1.3–2.5e-4); the FP32 sums of ≤ 17408 exact products add orders of magnitude less, and so does
// the host's expf against the GPU's. A relative L2 of 1e-3 (DESIGN.md §7: FP16 outputs ≈ 1e-3)
// leaves a factor of 4 and fails on any error spread over the outputs above a tenth of a percent
// of their norm. The per-element bound, 2^-9 of the value plus 2^-9 of the output's RMS (four
// times the rounding, and room for a near-zero value whose FP32 sum rounds the other way),
// catches what the norm would average away: one wrong column, one wrong zero point or scale of
// one group (an error of a few percent of that output).
//   The fused kernel's outputs sit one more rounding away: each rank's partial is rounded to FP16
// by the kernel from an FP32 sum and by the oracle from the f64 one, so the two may round apart
// by one ulp of the partial (rarely, when the sum lies within FP32 noise of a rounding boundary);
// that is one ulp of one partial, which the RMS term of the per-element bound covers.
constexpr WfTolerance WF_TOL_GEMV = {1e-3, 0x1p-9, 0x1p-9};

inline WfGptq wf_gptq_alloc(unsigned k, unsigned n) {
    WfGptq w = {k, n, WF_GROUP, WF_ORACLE_ZP_V1, nullptr, nullptr, nullptr};
    w.qweight = emu_alloc<uint32_t>(wf_qweight_words(w));
    w.scales = emu_alloc<_Float16>(wf_scales_count(w));
    w.qzeros = emu_alloc<uint32_t>(wf_qzeros_words(w));
    return w;
}

inline void wf_require_gptq(const WfGptq& w) {
    wf_require_varied("qweight", w.qweight, wf_qweight_words(w) * 4);
    wf_require_varied("scales", w.scales, wf_scales_count(w) * 2);
    wf_require_varied("qzeros", w.qzeros, wf_qzeros_words(w) * 4);
}
