// `up` is used one line before its `let`.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn gate_up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in w_gate: gptq(layout)[5120, n] col_parallel;
        in w_up: gptq(layout)[5120, n] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        let gate = gemv.col(w_gate, x);
        y = round_f16(silu(gate) * up);
        let up = gemv.col(w_up, x);
    }
}

fn main() {}
