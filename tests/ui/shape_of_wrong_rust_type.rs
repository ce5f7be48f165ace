// Shapes are `usize` expressions; the Rust type error lands on the user's expression.
wavefuse::kernel! {
    pub fn final_norm(batch: usize, hidden: u32) {
        in x: f16[batch, 5120];
        in w: f16[hidden];
        out y: f16[batch, 5120];

        y = round_f16(rmsnorm(x, w, eps = 1e-6));
    }
}

fn main() {}
