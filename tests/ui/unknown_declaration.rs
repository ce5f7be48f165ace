// A weight is an `in` parameter with a weight type; there is no `weight` declaration.
wavefuse::kernel! {
    pub fn up(batch: usize) {
        weight w_up: f16_nk[5120, 4352];
        in x: f16[batch, 5120];
        out y: f16[batch, 4352];

        y = round_f16(gemv.rep(w_up, x));
    }
}

fn main() {}
