// Runs gemv_int4_allreduce_rmsnorm_ref (kernels-gen/reference/hip/gemv_int4_allreduce_rmsnorm.hip)
// in the host emulation: TP ranks, every workgroup of every rank a process of its own and all
// resident at once, so the peer flags, the pull of the peers' payload and the grid barrier run as
// written (README.md). Two launches per rank on the same flags and counter, with fresh x and
// residual for each: they take the two payload halves, and the second launch's waits only pass on
// the second epoch's flags. Outputs, payload and scratch are poisoned before each launch, so
// reading last launch's half or an unwritten value shows. Compared with the f64 oracle per rank
// and launch; every rank's outputs must also be bit-identical (the kernel adds the ranks in the
// same order everywhere).
//
// One build per shape, with the kernel's [build] defines (-DWF_TP -DWF_BATCH -DWF_K (the rank's
// K-shard) -DWF_HIDDEN -DWF_GROUP -DWF_ZP_V1 -DWF_RMS_EPS) and -DWF_EMU_KERNEL='"…"'; the build
// also sets -DWF_SPIN_BUDGET so that a wait that never ends gives up in about a minute rather than
// hours (a poll sleeps 20–80 µs here). Usage: gemv_int4_allreduce_rmsnorm SEED [FIRST_EPOCH]: the launches use
// epochs FIRST_EPOCH and FIRST_EPOCH + 1 (default 1; 0xFFFFFFFF crosses the wrap-around to 0), with
// the flags and the counter where FIRST_EPOCH − 1 earlier launches would have left them.
// Exit status as in README.md.
#include WF_EMU_KERNEL

#include <stdio.h>
#include <string.h>

#include "driver.h"

#if !defined(WF_TP) || !defined(WF_HIDDEN) || !defined(WF_RMS_EPS)
#error "needs -DWF_TP -DWF_HIDDEN -DWF_RMS_EPS"
#endif

static void poison(void* p, size_t bytes) { memset(p, 0xFF, bytes); }

int main(int argc, char** argv) {
    constexpr unsigned tp = WF_TP, batch = WF_BATCH, hidden = WF_HIDDEN;
    constexpr unsigned grid = (hidden + 63) / 64; // the kernel header's launch: ceil(HIDDEN / 64) of 256 lanes
    constexpr size_t rows = (size_t)batch * hidden;
    const WfArgs args = wf_args(argc, argv);
    emu_seed(args.seed);

    WfGptq w[tp];
    _Float16* x[tp];
    _Float16 *residual_out[tp], *normed[tp];
    float* norm_partials[tp];
    unsigned *grid_counter[tp], *error_word[tp];
    f16** payload = emu_alloc<f16*>(tp); // the peer tables: slot p is rank p
    unsigned** flags = emu_alloc<unsigned*>(tp);
    for (unsigned p = 0; p < tp; ++p) {
        w[p] = wf_gptq_alloc(WF_K, hidden);
        wf_random_gptq(w[p], args.seed, p);
        wf_require_gptq(w[p]);
        x[p] = emu_alloc<_Float16>((size_t)batch * WF_K);
        residual_out[p] = emu_alloc<_Float16>(rows);
        normed[p] = emu_alloc<_Float16>(rows);
        norm_partials[p] = emu_alloc<float>((size_t)grid * batch);
        grid_counter[p] = emu_alloc<unsigned>(1);
        error_word[p] = emu_alloc<unsigned>(1);
        payload[p] = (f16*)emu_alloc<_Float16>(2 * rows);
        flags[p] = emu_alloc<unsigned>(grid);
        // Zeroed once, then as launches 1 … FIRST_EPOCH − 1 left them (the runtime's conventions).
        for (unsigned t = 0; t < grid; ++t) flags[p][t] = args.first_epoch - 1u;
        *grid_counter[p] = (args.first_epoch - 1u) * grid;
    }
    _Float16* residual = emu_alloc<_Float16>(rows);
    _Float16* norm_w = emu_alloc<_Float16>(hidden);
    wf_random_f16(norm_w, hidden, 1.0, 0.5, args.seed, 100); // Gemma-style 1 + w, folded in
    wf_require_varied("norm_w", norm_w, hidden * 2);
    double* want_residual = new double[rows];
    double* want_normed = new double[rows];

    bool ok = true;
    for (unsigned launch = 0; launch < 2; ++launch) {
        const unsigned epoch = args.first_epoch + launch;
        for (unsigned p = 0; p < tp; ++p) {
            wf_random_f16(x[p], (size_t)batch * WF_K, 0.0, 1.0, args.seed, 200 + 16 * launch + p);
            wf_require_varied("x", x[p], (size_t)batch * WF_K * 2);
            poison(residual_out[p], rows * 2);
            poison(normed[p], rows * 2);
            poison(payload[p], 2 * rows * 2);
            poison(norm_partials[p], (size_t)grid * batch * 4);
            *error_word[p] = 0;
        }
        wf_random_f16(residual, rows, 0.0, 1.0, args.seed, 300 + launch);
        wf_require_varied("residual", residual, rows * 2);

        emu_launch_ranks(tp, grid, 256, [&](unsigned rank) {
            gemv_int4_allreduce_rmsnorm_ref(w[rank].qweight, (const f16*)w[rank].scales, w[rank].qzeros, (const f16*)x[rank],
                                            (const f16*)residual, (const f16*)norm_w, (f16*)residual_out[rank],
                                            (f16*)normed[rank], rank, payload, flags, epoch, norm_partials[rank],
                                            grid_counter[rank], error_word[rank]);
        });

        wf_oracle_allreduce_rmsnorm(w, x, tp, batch, residual, norm_w, WF_RMS_EPS, want_residual, want_normed);
        for (unsigned p = 0; p < tp; ++p) {
            char what[200];
            if (*error_word[p] != 0) {
                printf("rank %u, epoch %u: error word %u (a bounded wait gave up)\n", p, epoch, *error_word[p]);
                ok = false;
            }
            snprintf(what, sizeof what,
                     "gemv_int4_allreduce_rmsnorm residual_out TP=%d K=%d hidden=%d batch=%d group=%d zp_v1=%d seed=%llu "
                     "epoch=%u rank=%u",
                     WF_TP, WF_K, WF_HIDDEN, WF_BATCH, WF_GROUP, WF_ZP_V1, (unsigned long long)args.seed, epoch, p);
            ok = wf_compare(what, residual_out[p], want_residual, rows, WF_TOL_GEMV) && ok;
            snprintf(what, sizeof what,
                     "gemv_int4_allreduce_rmsnorm normed TP=%d K=%d hidden=%d batch=%d group=%d zp_v1=%d seed=%llu "
                     "epoch=%u rank=%u",
                     WF_TP, WF_K, WF_HIDDEN, WF_BATCH, WF_GROUP, WF_ZP_V1, (unsigned long long)args.seed, epoch, p);
            ok = wf_compare(what, normed[p], want_normed, rows, WF_TOL_GEMV) && ok;
            if (memcmp(residual_out[p], residual_out[0], rows * 2) != 0 || memcmp(normed[p], normed[0], rows * 2) != 0) {
                printf("epoch %u: rank %u's outputs differ from rank 0's (they must be bit-identical)\n", epoch, p);
                ok = false;
            }
        }
    }
    return ok ? 0 : 1;
}
