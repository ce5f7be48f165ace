// The projection was declared as a plain FP16 tensor instead of a weight (`f16_nk[K, N]`).
wavefuse::kernel! {
    pub fn proj(batch: usize) {
        in w: f16[3072, 5120];
        in x: f16[batch, 5120];
        out y: f16[batch, 3072];

        y = round_f16(gemv.rep(w, x));
    }
}

fn main() {}
