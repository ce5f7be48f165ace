// silu of a row-parallel GEMV's partial sums: the allreduce is missing.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn down_silu(tp: u32, batch: usize, k: usize, layout: GptqLayout) across tp {
        in w_down: gptq(layout)[k, 5120] row_parallel;
        in x: f16[batch, k] col_parallel;
        out y: f16[batch, 5120];

        y = round_f16(silu(gemv.row(w_down, x)));
    }
}

fn main() {}
