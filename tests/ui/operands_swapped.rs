// Operands swapped: the weight comes first.
wavefuse::kernel! {
    pub fn proj(batch: usize) {
        in w: f16_nk[5120, 3072];
        in x: f16[batch, 5120];
        out y: f16[batch, 3072];

        y = round_f16(gemv.rep(x, w));
    }
}

fn main() {}
