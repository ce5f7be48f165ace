// Storing the f32 sum into an f16 output: the FP16 rounding point must be explicit.
wavefuse::kernel! {
    pub fn residual_add(batch: usize) {
        in x: f16[batch, 5120];
        in residual: f16[batch, 5120];
        out residual_out: f16[batch, 5120];

        residual_out = x + residual;
    }
}

fn main() {}
