// A GPTQ weight declared without its layout: group size and zero points are never guessed.
wavefuse::kernel! {
    pub fn up(tp: u32, batch: usize) across tp {
        in w_up: gptq[5120, 4352] col_parallel;
        in x: f16[batch, 5120];
        out y: f16[batch, 4352] col_parallel;

        y = round_f16(gemv.col(w_up, x));
    }
}

fn main() {}
