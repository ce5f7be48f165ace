//! A new fused kernel in the wavefuse DSL: RMSNorm of the residual stream, then the FFN's gate and
//! up INT4 GEMVs sharing one read of the normalised activation, then `silu(gate) · up`, in one
//! launch per rank (column-parallel over TP = 4).
//!
//! The normalised activation is a *GEMV prologue* (`codegen/src/lower/prologue.rs`): every
//! workgroup recomputes `h = round_f16(rmsnorm(x, norm_w))` from `x` and `norm_w` into LDS (the
//! sum of squares over K is a workgroup-local reduction in a fixed order, so every workgroup gets
//! the same `1/rms`), behind a workgroup barrier, and its GEMV reads `h` there. The kernels are
//! here, in the library, so that the crate's tests lower, simulate, compile and snapshot the same
//! kernel `main` prints.

use wavefuse::ir::GptqLayout;
use wavefuse_kernels::shapes::{HIDDEN, RMS_EPS};

wavefuse::kernel! {
    /// `y = silu(W_gate·h) · (W_up·h)` with `h = round_f16(rmsnorm(x, norm_w))`: the FFN's
    /// pre-norm and gate/up projections in one launch; `n` is the per-rank FFN width.
    pub fn rmsnorm_gate_up_silu(tp: u32, batch: usize, n: usize, gptq: GptqLayout) across tp {
        in x: f16[batch, HIDDEN];
        in norm_w: f16[HIDDEN];
        in w_gate: gptq(gptq)[HIDDEN, n] col_parallel;
        in w_up: gptq(gptq)[HIDDEN, n] col_parallel;
        out y: f16[batch, n] col_parallel;

        // Both GEMVs read the normalised activation as FP16: a rounding point.
        let h = round_f16(rmsnorm(x, norm_w, eps = RMS_EPS));
        let gate = gemv.col(w_gate, h);
        let up = gemv.col(w_up, h);
        y = round_f16(silu(gate) * up);
    }

    /// The first half of the unfused pipeline, for comparison.
    pub fn rmsnorm_only(batch: usize) {
        in x: f16[batch, HIDDEN];
        in norm_w: f16[HIDDEN];
        out h: f16[batch, HIDDEN];

        h = round_f16(rmsnorm(x, norm_w, eps = RMS_EPS));
    }
}
