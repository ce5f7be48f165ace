// quantize_int8 defines codes and scales.
wavefuse::kernel! {
    pub fn roundtrip(batch: usize) {
        in x: f16[batch, 5120];
        out y: f16[batch, 5120];

        let q = quantize_int8(x, block = 128);
        y = round_f16(q);
    }
}

fn main() {}
