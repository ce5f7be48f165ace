// LDS is private to one workgroup: it cannot hold a kernel parameter (DESIGN.md §5.2).
wavefuse::kernel! {
    pub fn scale(batch: usize) {
        in x: f16[batch, 5120] @lds;
        in w: f16[5120];
        out y: f16[batch, 5120];

        y = round_f16(rmsnorm(x, w, eps = 1e-6));
    }
}

fn main() {}
