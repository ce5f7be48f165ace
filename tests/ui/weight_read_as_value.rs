// A weight is only read by a GEMV.
wavefuse::kernel! {
    pub fn bias(batch: usize) {
        in w: f16_nk[5120, 5120];
        in x: f16[batch, 5120];
        out y: f16[batch, 5120];

        y = round_f16(x + w);
    }
}

fn main() {}
