// Runs a user's hand-written W4A8 GEMV with its quantisation launch (cli/tests/handwritten/
// gemv_int4_w4a8.hip, issue 38) in the host emulation, as gemv_int4_w4a8.hip.abi.toml launches
// them: `quantise_x_int8` (one workgroup per token) writes the INT8 codes and the scale to scratch
// buffers, then `gemv_w4a8` reads them. Three checks:
//   1. the codes and the scale are the host rule's, bit for bit (wavefuse_runtime::exec::
//      quantise_rows: m = max|x|, r = 127 / m in f32, q = clamp(rne(x · r), ±127), s = m / 127);
//   2. y against the f64 oracle of the dequantised activations (the codes as x, times s): the
//      kernel's own arithmetic, at the FP16 tolerance of every GEMV;
//   3. y against the f64 oracle of the FP16 activations at the W4A8 tolerance of docs/abi.md:
//      rel L2 ≤ 1e-3 + 3 · m / (127 · √12 · rms(x)).
// Defines: -DWF_K -DWF_N -DWF_GROUP -DWF_ZP_V1 (and WF_BATCH=1). Usage: hand_w4a8 SEED.
#include WF_EMU_KERNEL

#include <math.h>
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
    _Float16* y = emu_alloc<_Float16>(WF_N);
    signed char* xq = emu_alloc<signed char>(WF_K); // the ABI's [[scratch]] xq and xs
    float* xs = emu_alloc<float>(1);

    emu_launch(1, 256, [&] { quantise_x_int8((const f16*)x, xq, xs, WF_K); });
    emu_launch((WF_N + 63) / 64, 64, [&] {
        gemv_w4a8(w.qweight, (const f16*)w.scales, w.qzeros, xq, xs, (f16*)y, WF_K, WF_N, WF_GROUP, WF_ZP_V1);
    });

    // 1. The host rule.
    float m = 0.0f;
    double sum2 = 0.0;
    for (int k = 0; k < WF_K; ++k) {
        m = fmaxf(m, fabsf((float)x[k]));
        sum2 += (double)x[k] * (double)x[k];
    }
    const float r = m > 0.0f ? 127.0f / m : 0.0f;
    const float s = m > 0.0f ? m / 127.0f : 0.0f;
    int wrong = 0;
    for (int k = 0; k < WF_K; ++k) {
        const double q = fmin(fmax(rint((double)(float)x[k] * (double)r), -127.0), 127.0);
        if ((double)xq[k] != q && wrong++ < 4) printf("code %d: kernel %d, host rule %.0f\n", k, xq[k], q);
    }
    if (xs[0] != s) {
        printf("scale: kernel %.9g, host rule %.9g\n", xs[0], s);
        ++wrong;
    }
    printf("gemv_int4_w4a8 quantisation: %d of %d codes and the scale differ from the host rule\n", wrong, WF_K);

    // 2. The kernel's arithmetic: the oracle on the codes (exact in FP16), times the scale.
    _Float16* codes = new _Float16[WF_K];
    for (int k = 0; k < WF_K; ++k) codes[k] = (_Float16)xq[k];
    double* want_q = new double[WF_N];
    wf_oracle_gemv(w, codes, 1, want_q);
    for (int n = 0; n < WF_N; ++n) want_q[n] *= (double)xs[0];
    char what[160];
    snprintf(what, sizeof what, "gemv_int4_w4a8 vs the dequantised activations K=%d N=%d group=%d seed=%llu", WF_K,
             WF_N, WF_GROUP, (unsigned long long)args.seed);
    const bool arithmetic = wf_compare(what, y, want_q, WF_N, WF_TOL_GEMV);

    // 3. Against the op's oracle at the W4A8 tolerance (per element: 10 of the expected spread).
    double* want = new double[WF_N];
    wf_oracle_gemv(w, x, 1, want);
    const double est = (double)m / (127.0 * sqrt(12.0) * sqrt(sum2 / WF_K));
    const WfTolerance w4a8 = {1e-3 + 3.0 * est, 0.0, 10.0 * est};
    snprintf(what, sizeof what, "gemv_int4_w4a8 vs the FP16 oracle (W4A8 tolerance %.2e) K=%d N=%d seed=%llu",
             w4a8.rel_l2, WF_K, WF_N, (unsigned long long)args.seed);
    const bool op = wf_compare(what, y, want, WF_N, w4a8);
    return wrong == 0 && arithmetic && op ? 0 : 1;
}
