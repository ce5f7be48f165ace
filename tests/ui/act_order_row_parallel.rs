// With act-order, rows of one group are scattered over K: a K-shard cannot be cut cleanly.
wavefuse::kernel! {
    pub fn down(tp: u32, batch: usize, k: usize) across tp {
        in w_down: gptq<group = 128, zero = v2, g_idx>[k, 5120] row_parallel;
        in x: f16[batch, k] col_parallel;
        in residual: f16[batch, 5120];
        out residual_out: f16[batch, 5120];

        residual_out = round_f16(allreduce(round_f16(gemv.row(w_down, x))) + residual);
    }
}

fn main() {}
