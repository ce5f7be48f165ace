// The norm weights have one entry per feature: 5120, not 4096.
wavefuse::kernel! {
    pub fn final_norm(batch: usize) {
        in x: f16[batch, 5120];
        in w: f16[4096];
        out y: f16[batch, 5120];

        y = round_f16(rmsnorm(x, w, eps = 1e-6));
    }
}

fn main() {}
