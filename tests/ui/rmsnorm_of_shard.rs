// The norm of one rank's shard is not the norm of the vector.
wavefuse::kernel! {
    pub fn norm(tp: u32, batch: usize, n: usize) across tp {
        in x: f16[batch, n] col_parallel;
        in norm_w: f16[n];
        out y: f16[batch, n] col_parallel;

        y = round_f16(rmsnorm(x, norm_w, eps = 1e-6));
    }
}

fn main() {}
