// A misspelt value name.
wavefuse::kernel! {
    pub fn add(tp: u32, batch: usize) across tp {
        in partial: f16[batch, 5120] partial;
        in residual: f16[batch, 5120];
        out residual_out: f16[batch, 5120];

        let summed = allreduce(partial);
        residual_out = round_f16(sumed + residual);
    }
}

fn main() {}
