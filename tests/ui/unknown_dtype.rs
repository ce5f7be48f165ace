// `fp16` is not an element type of the language.
wavefuse::kernel! {
    pub fn copy(batch: usize) {
        in x: fp16[batch, 5120];
        out y: f16[batch, 5120];

        y = x;
    }
}

fn main() {}
