// The normalised value overwrites the residual stream, which is an input (DESIGN.md §5.7).
wavefuse::kernel! {
    pub fn add_norm(tp: u32, batch: usize) across tp {
        in partial: f16[batch, 5120] partial;
        in residual: f16[batch, 5120];
        in norm_w: f16[5120];
        out normed: f16[batch, 5120];

        let r = round_f16(allreduce(partial) + residual);
        residual = r;
        normed = round_f16(rmsnorm(r, norm_w, eps = 1e-6));
    }
}

fn main() {}
