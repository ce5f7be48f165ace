//! q8 activations (issue 19 item 2): the user's opt-in `quantize_int8.rne` + `gemv_q8`, written
//! in the DSL and in the textual IR (`examples/gemv_int4_q8.wfir`).

use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint, parse, validate};

wavefuse::kernel! {
    /// y = W·x with GPTQ INT4 weights and q8 activations: x quantised per block of 32 K rows,
    /// round half to even, codes clamped to ±127.
    pub fn gemv_int4_q8(tp: u32, batch: usize, hidden: usize, n: usize, gptq: GptqLayout) across tp {
        in w: gptq(gptq)[hidden, n] col_parallel;
        in x: f16[batch, hidden];
        out y: f16[batch, n] col_parallel;

        let (q, s) = quantize_int8.rne(x, block = 32, clamp = 127);
        y = round_f16(gemv_q8.col(w, q, s, block = 32));
    }
}

/// The DSL kernel and the example `.wfir` file are the same kernel (printed alike; the file's
/// comments aside), and it validates.
#[test]
fn q8_dsl_is_the_example_file() {
    let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
    let dsl = gemv_int4_q8(1, 8, 5120, 17408, layout);
    validate(&dsl).expect("valid");
    let file = include_str!("../../examples/gemv_int4_q8.wfir");
    let parsed = parse(file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dsl.to_string(), parsed.to_string());
}
