// A misspelt output name on the left of `=`.
wavefuse::kernel! {
    pub fn add_norm(tp: u32, batch: usize) across tp {
        in partial: f16[batch, 5120] partial;
        in residual: f16[batch, 5120];
        in norm_w: f16[5120];
        out residual_out: f16[batch, 5120];
        out normed: f16[batch, 5120];

        residual_out = round_f16(allreduce(partial) + residual);
        nromed = round_f16(rmsnorm(residual_out, norm_w, eps = 1e-6));
    }
}

fn main() {}
