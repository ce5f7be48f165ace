// `gemv` alone does not say how the product is split over the TP group.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in w_up: gptq(layout)[5120, n] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv(w_up, x));
    }
}

fn main() {}
