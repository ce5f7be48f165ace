// The language has `+` and `*` only.
wavefuse::kernel! {
    pub fn diff(batch: usize) {
        in a: f16[batch, 5120];
        in b: f16[batch, 5120];
        out y: f16[batch, 5120];

        y = round_f16(a - b);
    }
}

fn main() {}
