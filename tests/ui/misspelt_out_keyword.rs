// `output` spelt out for the declaration keyword `out`.
wavefuse::kernel! {
    pub fn norm(batch: usize) {
        in x: f16[batch, 5120];
        in w: f16[5120];
        output y: f16[batch, 5120];

        y = round_f16(rmsnorm(x, w, eps = 1e-6));
    }
}

fn main() {}
