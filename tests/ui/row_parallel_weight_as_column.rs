// w_down is sharded along K (row-parallel) but used as a column-parallel GEMV (DESIGN.md §5.6).
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn down(tp: u32, batch: usize, k: usize, layout: GptqLayout) across tp {
        in w_down: gptq(layout)[k, 5120] row_parallel;
        in x: f16[batch, k] col_parallel;
        out y: f16[batch, 5120];

        y = round_f16(gemv.col(w_down, x));
    }
}

fn main() {}
