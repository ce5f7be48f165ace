// The normalised activation is f32; a GEMV reads FP16 activations.
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn norm_up(tp: u32, batch: usize, n: usize, layout: GptqLayout) across tp {
        in x: f16[batch, 5120];
        in norm_w: f16[5120];
        in w_up: gptq(layout)[5120, n] col_parallel;
        out y: f16[batch, n] col_parallel;

        let h = rmsnorm(x, norm_w, eps = 1e-6);
        y = round_f16(gemv.col(w_up, h));
    }
}

fn main() {}
