// q8 activations multiply INT4 weights only (integer products); this weight is FP16.
wavefuse::kernel! {
    pub fn q8_up(batch: usize) {
        in x: f16[batch, 5120];
        in w: f16_nk[5120, 4352];
        out y: f16[batch, 4352];

        let (q, s) = quantize_int8.rne(x, block = 32, clamp = 127);
        y = round_f16(gemv_q8.rep(w, q, s, block = 32));
    }
}

fn main() {}
