// x is loaded from FP16 memory: it is already f16.
wavefuse::kernel! {
    pub fn copy(batch: usize) {
        in x: f16[batch, 5120];
        out y: f16[batch, 5120];

        y = round_f16(x);
    }
}

fn main() {}
