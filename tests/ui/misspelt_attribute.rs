// A misspelt attribute name.
wavefuse::kernel! {
    pub fn final_norm(batch: usize) {
        in x: f16[batch, 5120];
        in w: f16[5120];
        out y: f16[batch, 5120];

        y = round_f16(rmsnorm(x, w, epsilon = 1e-6));
    }
}

fn main() {}
