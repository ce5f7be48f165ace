// 5000 rows of K do not split into groups of 128.
wavefuse::kernel! {
    pub fn up(tp: u32, batch: usize) across tp {
        in w_up: gptq<group = 128, zero = v2>[5000, 4352] col_parallel;
        in x: f16[batch, 5000];
        out y: f16[batch, 4352] col_parallel;

        y = round_f16(gemv.col(w_up, x));
    }
}

fn main() {}
