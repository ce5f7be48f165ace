// The GEMV's block must be the quantisation's: scales of blocks of 32 are [batch, 160].
use wavefuse::ir::GptqLayout;

wavefuse::kernel! {
    pub fn q8_up(batch: usize, layout: GptqLayout) {
        in x: f16[batch, 5120];
        in w: gptq(layout)[5120, 4352];
        out y: f16[batch, 4352];

        let (q, s) = quantize_int8.rne(x, block = 32, clamp = 127);
        y = round_f16(gemv_q8.rep(w, q, s, block = 64));
    }
}

fn main() {}
