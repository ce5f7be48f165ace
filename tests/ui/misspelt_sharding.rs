// A misspelt sharding keyword.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in w_up: gptq(layout)[5120, n] col_paralel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv.col(w_up, x));
    }
}

fn main() {}
