// A value has one name: `h` cannot be rebound.
wavefuse::kernel! {
    pub fn twice(batch: usize) {
        in x: f16[batch, 5120];
        in w: f16[5120];
        out y: f16[batch, 5120];

        let h = round_f16(rmsnorm(x, w, eps = 1e-6));
        let h = round_f16(rmsnorm(h, w, eps = 1e-6));
        y = h;
    }
}

fn main() {}
