// Random inputs and the f64 oracle (oracle.h). Compiled apart from every kernel and from the
// emulation shim: the oracle knows the GPTQ format and the kernels' formulas, nothing of how a
// kernel splits, stages, decodes or reduces.
#include "oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

// splitmix64 over a state derived from (seed, stream): the same numbers on every platform and
// standard library, independent streams for the buffers of one run.
struct Rng {
    uint64_t s;
    Rng(uint64_t seed, uint64_t stream) : s(seed * 0xD1342543DE82EF95ull + stream * 0x9E3779B97F4A7C15ull + 1) {
        next();
    }
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double)((next() >> 11) + 1) * 0x1p-53; } // (0, 1]
    double normal() { // Box–Muller
        return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
    }
};

// The unsigned 4-bit code of row k, column n: nibble k mod 8 of word (k / 8, n), least
// significant nibble first (DESIGN.md §2).
unsigned code(const WfGptq& w, unsigned k, unsigned n) {
    return (w.qweight[(size_t)(k / 8) * w.n + n] >> (4 * (k % 8))) & 0xFu;
}

// The zero point of group g, column n: nibble n mod 8 of word (g, n / 8); GPTQ v1 stores z − 1.
double zero_point(const WfGptq& w, unsigned g, unsigned n) {
    const unsigned stored = (w.qzeros[(size_t)g * (w.n / 8) + n / 8] >> (4 * (n % 8))) & 0xFu;
    return (double)stored + (w.zp_v1 ? 1.0 : 0.0);
}

// Σ_k w[k, n] · x[k] for one column and one activation row, in double.
double column_dot(const WfGptq& w, unsigned n, const _Float16* x) {
    double sum = 0.0;
    for (unsigned k = 0; k < w.k; ++k) {
        const unsigned g = k / w.group;
        const double weight = ((double)code(w, k, n) - zero_point(w, g, n)) * (double)w.scales[(size_t)g * w.n + n];
        sum += weight * (double)x[k];
    }
    return sum;
}

double round_f16(double v) { return (double)(_Float16)v; }

} // namespace

void wf_random_gptq(WfGptq& w, uint64_t seed, uint64_t stream) {
    Rng codes(seed, 3 * stream), zeros(seed, 3 * stream + 1), scales(seed, 3 * stream + 2);
    for (size_t i = 0; i < wf_qweight_words(w); ++i) w.qweight[i] = (uint32_t)codes.next();
    for (size_t i = 0; i < wf_qzeros_words(w); ++i) w.qzeros[i] = (uint32_t)zeros.next();
    for (size_t i = 0; i < wf_scales_count(w); ++i) w.scales[i] = (_Float16)(0.002 + 0.012 * scales.uniform());
}

void wf_random_f16(_Float16* x, size_t n, double mean, double sd, uint64_t seed, uint64_t stream) {
    Rng r(seed, 1000 + stream);
    for (size_t i = 0; i < n; ++i) x[i] = (_Float16)(mean + sd * r.normal());
}

void wf_require_varied(const char* what, const void* data, size_t bytes) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    size_t words = bytes / 2, nonzero = 0;
    bool varied = false;
    uint16_t first = 0;
    for (size_t i = 0; i < words; ++i) {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        if (i == 0) first = v;
        nonzero += v != 0;
        varied = varied || v != first;
    }
    if (words == 0 || nonzero * 10 < words * 9 || !varied) {
        printf("bad input %s: %zu of %zu 16-bit words nonzero%s\n", what, nonzero, words, varied ? "" : ", all equal");
        exit(2);
    }
}

void wf_oracle_gemv(const WfGptq& w, const _Float16* x, unsigned batch, double* y) {
    for (unsigned b = 0; b < batch; ++b)
        for (unsigned n = 0; n < w.n; ++n) y[(size_t)b * w.n + n] = column_dot(w, n, x + (size_t)b * w.k);
}

void wf_oracle_dual_silu(const WfGptq& gate, const WfGptq& up, const _Float16* x, unsigned batch, double* y) {
    for (unsigned b = 0; b < batch; ++b)
        for (unsigned n = 0; n < gate.n; ++n) {
            const double g = column_dot(gate, n, x + (size_t)b * gate.k), u = column_dot(up, n, x + (size_t)b * up.k);
            y[(size_t)b * gate.n + n] = g / (1.0 + exp(-g)) * u;
        }
}

void wf_oracle_allreduce_rmsnorm(const WfGptq* w, const _Float16* const* x, unsigned tp, unsigned batch,
                                 const _Float16* residual, const _Float16* norm_w, double eps, double* residual_out,
                                 double* normed) {
    const unsigned n_out = w[0].n;
    for (unsigned b = 0; b < batch; ++b) {
        double squares = 0.0;
        for (unsigned n = 0; n < n_out; ++n) {
            double sum = 0.0;
            for (unsigned p = 0; p < tp; ++p) sum += round_f16(column_dot(w[p], n, x[p] + (size_t)b * w[p].k));
            const double r = round_f16(sum + (double)residual[(size_t)b * n_out + n]);
            residual_out[(size_t)b * n_out + n] = r;
            squares += r * r;
        }
        const double inv_rms = 1.0 / sqrt(squares / n_out + eps);
        for (unsigned n = 0; n < n_out; ++n)
            normed[(size_t)b * n_out + n] = residual_out[(size_t)b * n_out + n] * inv_rms * (double)norm_w[n];
    }
}

bool wf_compare(const char* what, const _Float16* got, const double* want, size_t count, WfTolerance tol) {
    double want2 = 0.0, err2 = 0.0, worst = 0.0;
    size_t nonfinite = 0, over = 0, worst_at = 0;
    for (size_t i = 0; i < count; ++i) want2 += want[i] * want[i];
    const double rms = sqrt(want2 / (double)(count ? count : 1));
    for (size_t i = 0; i < count; ++i) {
        const double g = (double)got[i], e = fabs(g - want[i]);
        if (!isfinite(g) || !isfinite(want[i])) { // unwritten outputs are NaN (poisoned)
            ++nonfinite;
            continue;
        }
        const double bound = tol.elem_rel * fabs(want[i]) + tol.elem_rms * rms;
        over += e > bound;
        if (e / bound > worst) {
            worst = e / bound;
            worst_at = i;
        }
        err2 += e * e;
    }
    const double rel_l2 = want2 > 0.0 ? sqrt(err2 / want2) : INFINITY;
    const bool ok = count > 0 && want2 > 0.0 && nonfinite == 0 && over == 0 && rel_l2 <= tol.rel_l2;
    printf("%s: %zu outputs, rel L2 %.3g (tol %.3g), worst element at %.3g of its bound [%zu: got %.6g want %.6g], "
           "%zu over bound, %zu non-finite: %s\n",
           what, count, rel_l2, tol.rel_l2, worst, worst_at, count ? (double)got[worst_at] : 0.0,
           count ? want[worst_at] : 0.0, over, nonfinite, ok ? "ok" : "MISMATCH");
    return ok;
}

WfArgs wf_args(int argc, char** argv) {
    WfArgs a = {0, 1};
    char* end = nullptr;
    if (argc < 2 || argc > 3) {
        printf("usage: %s SEED [FIRST_EPOCH]\n", argv[0]);
        exit(2);
    }
    a.seed = strtoull(argv[1], &end, 0);
    if (*end) {
        printf("bad seed %s\n", argv[1]);
        exit(2);
    }
    if (argc == 3) {
        a.first_epoch = (uint32_t)strtoul(argv[2], &end, 0);
        if (*end) {
            printf("bad first epoch %s\n", argv[2]);
            exit(2);
        }
    }
    return a;
}
