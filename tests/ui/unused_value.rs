// The gate GEMV is computed and then forgotten.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn gate_up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in w_gate: gptq(layout)[5120, n] col_parallel;
        in w_up: gptq(layout)[5120, n] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        let gate = gemv.col(w_gate, x);
        let up = gemv.col(w_up, x);
        y = round_f16(silu(up));
    }
}

fn main() {}
