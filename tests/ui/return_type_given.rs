// The generated function's return type is not written.
wavefuse::kernel! {
    pub fn copy(batch: usize) -> wavefuse::ir::Kernel {
        in x: f16[batch, 5120];
        out y: f16[batch, 5120];

        y = x;
    }
}

fn main() {}
