// Two parameters with one name.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn gate_up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in w: gptq(layout)[5120, n] col_parallel;
        in w: gptq(layout)[5120, n] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv.col(w, x));
    }
}

fn main() {}
