// The activation has 4096 features but the weight's K is 5120.
wavefuse::kernel! {
    pub fn up(tp: u32) across tp {
        in w_up: gptq<group = 128, zero = v1>[5120, 4352] col_parallel;
        in x: f16[1, 4096];
        out y: f16[1, 4352] col_parallel;

        y = round_f16(gemv.col(w_up, x));
    }
}

fn main() {}
