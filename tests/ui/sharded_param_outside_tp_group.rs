// A column-parallel weight in a kernel that forgot to declare its TP group.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn up(batch: usize, n: usize, layout: GptqLayout) {
        in w_up: gptq(layout)[5120, n] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv.col(w_up, x));
    }
}

fn main() {}
