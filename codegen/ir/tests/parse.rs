//! The textual IR's parser (STYLE.md "cranelift-reader / filetests": print ∘ parse = identity).
//!
//! Round trips on hand-built kernels that cover every op, element type, weight format, sharding,
//! memory and index space, names that need quoting, and kernels the validator rejects; texts
//! written by hand (renumbered labels, comments) against expected kernels; `invalid_*` tests that
//! pin the line, the column and the message of each kind of error; and a seeded mutation test
//! that no text makes the parser (or the validator and printer behind it) panic.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use wavefuse_ir::ops::{AllReduce, Compression, ReduceOp};
use wavefuse_ir::{
    AwqLayout, BufferDecl, Builder, Found, GptqLayout, GroupSize, IndexSpace, Kernel, MemorySpace,
    OpKind, Parallelism, ParseError, ScalarType, Sharding, Tensor, Weight, WeightFormat, ZeroPoint,
    parse, validate,
};

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

/// print ∘ parse is the identity on `kernel`'s text, the parsed kernel equals `kernel`, and both
/// validate alike (with the same error, if any). Returns the text.
fn assert_round_trip(kernel: &Kernel) -> String {
    let text = kernel.to_string();
    let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
    assert_eq!(
        parsed.to_string(),
        text,
        "print(parse(print(k))) != print(k)"
    );
    assert_eq!(&parsed, kernel, "parse(print(k)) != k\n{text}");
    // The same error, up to where the op was written (the parsed kernel knows its lines).
    let unlocated = |e: Option<wavefuse_ir::ValidationError>| {
        e.map(|mut e| {
            if let wavefuse_ir::ValidationError::Op { at, .. } = &mut e {
                *at = None;
            }
            e
        })
    };
    assert_eq!(
        unlocated(validate(&parsed).err()),
        unlocated(validate(kernel).err()),
        "the parsed kernel validates differently\n{text}"
    );
    text
}

fn f16(batch: usize, features: usize) -> Tensor {
    Tensor::activation(ScalarType::F16, batch, features)
}

fn tensor(dtype: ScalarType, shape: &[usize]) -> Tensor {
    Tensor {
        dtype,
        shape: shape.to_vec(),
    }
}

fn weight(format: WeightFormat, k: usize, n: usize) -> Weight {
    Weight { format, k, n }
}

fn col(tp: u32) -> Sharding {
    Sharding::ColumnParallel { tp }
}

/// Every op at TP 1: gemv.rep, add, rmsnorm, silu, mul, quantize/dequantize, the three
/// reductions, slice, round_f16, load and store.
fn every_op_tp1() -> Kernel {
    let mut b = Builder::new("every_op_tp1", 1);
    let rep = Sharding::Replicated;
    let x = b.input("x", f16(3, 64), rep);
    let w = b.input("w", weight(WeightFormat::F16, 64, 32), rep);
    let norm_w = b.input("norm_w", Tensor::vector(ScalarType::F16, 32), rep);
    let residual = b.input("residual", tensor(ScalarType::F32, &[3, 32]), rep);
    let y = b.output("y", f16(3, 32), rep);
    let codes = b.output("codes", tensor(ScalarType::I8, &[3, 32]), rep);
    let scales = b.output("scales", tensor(ScalarType::F32, &[3, 4]), rep);
    let sums: Vec<_> = ["sum", "sumsq", "absmax"]
        .iter()
        .map(|name| b.output(name, tensor(ScalarType::F32, &[3, 1]), rep))
        .collect();
    let cols = b.output("cols", f16(3, 16), rep);

    let xv = b.load(x);
    let g = b.gemv(w, xv, Parallelism::Replicated);
    let r = b.load(residual);
    let h = b.add(g, r);
    let nw = b.load(norm_w);
    let n = b.rmsnorm(h, nw, 1e-6);
    let s = b.silu(n);
    let m = b.mul(s, h);
    let (q, sc) = b.quantize_int8(m, 8);
    b.store(q, codes);
    b.store(sc, scales);
    let d = b.dequantize_int8(q, sc, 8);
    for (op, out) in [ReduceOp::Sum, ReduceOp::SumSquares, ReduceOp::AbsMax]
        .into_iter()
        .zip(sums)
    {
        let red = b.reduce(op, d);
        b.store(red, out);
    }
    let sl = b.slice(d, 4, 16);
    let sl = b.round_f16(sl);
    b.store(sl, cols);
    let out = b.round_f16(m);
    b.store(out, y);
    b.finish()
}

/// Every op of tensor parallelism at TP 4: gemv.col (GPTQ, act-order, global index space),
/// gemv.row (AWQ, per-channel), allreduce, allreduce.int8, a partial output, a host output.
fn every_op_tp4() -> Kernel {
    let tp = 4;
    let mut b = Builder::new("every_op_tp4", tp);
    let x = b.input("x", f16(1, 512), Sharding::Replicated);
    let gptq = WeightFormat::Gptq(GptqLayout {
        group: GroupSize::Rows(128),
        scale: ScalarType::Bf16,
        zero: ZeroPoint::V2,
        act_order: true,
    });
    let up = BufferDecl::input("w_up", weight(gptq, 512, 256), col(tp));
    let w_up = b.param(up.index_space(IndexSpace::Global));
    let awq = WeightFormat::Awq(AwqLayout {
        group: GroupSize::PerChannel,
        scale: ScalarType::F32,
    });
    let w_down = b.input("w_down", weight(awq, 64, 512), Sharding::RowParallel { tp });
    let h_decl = BufferDecl::output("h", f16(1, 256), col(tp)).index_space(IndexSpace::Global);
    let h_out = b.param(h_decl);
    let p_out = b.output(
        "partials",
        tensor(ScalarType::F32, &[1, 512]),
        Sharding::Partial { tp },
    );
    let s_out = b.output(
        "partial_sum",
        tensor(ScalarType::F32, &[1, 1]),
        Sharding::Partial { tp },
    );
    let y_decl = BufferDecl::output("y", f16(1, 512), Sharding::Replicated);
    let y = b.param(y_decl.space(MemorySpace::HostVisible));

    let xv = b.load(x);
    let up = b.gemv(w_up, xv, Parallelism::Column);
    let h = b.round_f16(up);
    b.store(h, h_out);
    let p = b.gemv(w_down, h, Parallelism::Row);
    b.store(p, p_out);
    let ps = b.reduce(ReduceOp::Sum, p);
    b.store(ps, s_out);
    let full = b.allreduce(p);
    let compressed = b.allreduce_int8(p, 32);
    let sum = b.add(full, compressed);
    let out = b.round_f16(sum);
    b.store(out, y);
    b.finish()
}

const DTYPES: [ScalarType; 6] = [
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::I8,
    ScalarType::I32,
    ScalarType::U32,
];

/// A copy of one tensor of each element type, replicated and column-parallel (local and global).
fn every_dtype() -> Kernel {
    let tp = 2;
    let mut b = Builder::new("every_dtype", tp);
    for dtype in DTYPES {
        for (i, (sharding, index)) in [
            (Sharding::Replicated, IndexSpace::Local),
            (col(tp), IndexSpace::Local),
            (col(tp), IndexSpace::Global),
        ]
        .into_iter()
        .enumerate()
        {
            let t = tensor(dtype, &[2, 8]);
            let decl = BufferDecl::input(&format!("in_{dtype}_{i}"), t.clone(), sharding);
            let src = b.param(decl.index_space(index));
            let decl = BufferDecl::output(&format!("out_{dtype}_{i}"), t, sharding);
            let dst = b.param(decl.index_space(index));
            let v = b.load(src);
            b.store(v, dst);
        }
    }
    b.finish()
}

/// `y = round_f16(gemv.col(w, x))` for one weight of every format variant the printer can write.
fn every_weight_format() -> Kernel {
    let tp = 2;
    let mut formats = vec![WeightFormat::F16];
    let groups = [
        GroupSize::Rows(32),
        GroupSize::Rows(128),
        GroupSize::PerChannel,
    ];
    for group in groups {
        for scale in [ScalarType::F16, ScalarType::Bf16, ScalarType::F32] {
            for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
                for act_order in [false, true] {
                    let l = GptqLayout {
                        group,
                        scale,
                        zero,
                        act_order,
                    };
                    formats.push(WeightFormat::Gptq(l));
                }
            }
            formats.push(WeightFormat::Awq(AwqLayout { group, scale }));
        }
    }
    let mut b = Builder::new("every_weight_format", tp);
    let x = b.input("x", f16(1, 256), Sharding::Replicated);
    let xv = b.load(x);
    for (i, format) in formats.into_iter().enumerate() {
        let w = b.input(&format!("w{i}"), weight(format, 256, 64), col(tp));
        let y = b.output(&format!("y{i}"), f16(1, 64), col(tp));
        let g = b.gemv(w, xv, Parallelism::Column);
        let r = b.round_f16(g);
        b.store(r, y);
    }
    b.finish()
}

/// Names that are not bare identifiers, which the printer quotes.
fn odd_names() -> Kernel {
    let mut b = Builder::new("odd names ☃/2", 1);
    let names = [
        "w up",
        "naïve",
        "q\"uote",
        "back\\slash",
        "tab\tnew\nline",
        "",
        "1st",
        "a.b_c",
        "nul\0",
        "\u{301}accent",
    ];
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    let xv = b.load(x);
    for name in names {
        let out = b.output(name, f16(1, 8), Sharding::Replicated);
        b.store(xv, out);
    }
    b.finish()
}

#[test]
fn hand_built_kernels_validate() {
    for k in [
        every_op_tp1(),
        every_op_tp4(),
        every_dtype(),
        every_weight_format(),
        odd_names(),
    ] {
        if let Err(e) = validate(&k) {
            panic!("control kernel `{}` should validate: {e}\n{k}", k.name());
        }
    }
}

#[test]
fn round_trip_every_op() {
    let tp1 = assert_round_trip(&every_op_tp1());
    let tp4 = assert_round_trip(&every_op_tp4());
    // The test is only as good as its coverage: every mnemonic appears.
    let mnemonics = [
        "load",
        "store",
        "gemv.rep",
        "gemv.col",
        "gemv.row",
        "add",
        "mul",
        "silu",
        "round_f16",
        "slice",
        "rmsnorm",
        "reduce.sum",
        "reduce.sumsq",
        "reduce.absmax",
        "allreduce",
        "allreduce.int8",
        "quantize_int8",
        "dequantize_int8",
    ];
    for m in mnemonics {
        let used = |t: &str| t.lines().any(|l| l.contains(&format!(" {m} ")));
        assert!(used(&tp1) || used(&tp4), "no kernel uses `{m}`");
    }
    for s in [
        "partial(tp=4)",
        "row_parallel(tp=4)",
        "@host",
        "index=global",
        ", g_idx>",
    ] {
        assert!(tp4.contains(s), "{s} not covered");
    }
}

#[test]
fn round_trip_every_dtype() {
    let text = assert_round_trip(&every_dtype());
    for d in DTYPES {
        assert!(text.contains(&format!(": {d}[2, 8]")), "{d} not covered");
    }
}

#[test]
fn round_trip_every_weight_format() {
    let text = assert_round_trip(&every_weight_format());
    for s in [
        "f16_nk[k=256",
        "zero=sym",
        "zero=v1",
        "group=per_channel",
        "awq<group=32, scale=bf16>",
    ] {
        assert!(text.contains(s), "{s} not covered");
    }
}

#[test]
fn round_trip_quoted_names() {
    let text = assert_round_trip(&odd_names());
    assert!(
        text.starts_with("kernel \"odd names ☃/2\"(tp=1) {\n"),
        "{text}"
    );
    assert!(text.contains("output \"q\\\"uote\" : f16[1, 8]"), "{text}");
    assert!(text.contains("output \"\" : f16[1, 8]"), "{text}");
    assert!(
        text.contains("output a.b_c : f16[1, 8]"),
        "bare names stay bare: {text}"
    );
}

/// Kernels the validator rejects parse too, and are rejected the same way after the round trip.
#[test]
fn round_trip_invalid_kernels() {
    let mut kernels = Vec::new();
    // An FP32 activation into a GEMV.
    let mut b = Builder::new("f32_gemv", 1);
    let w = b.input("w", weight(WeightFormat::F16, 8, 8), Sharding::Replicated);
    let x = b.input("x", tensor(ScalarType::F32, &[1, 8]), Sharding::Replicated);
    let y = b.output("y", tensor(ScalarType::F32, &[1, 8]), Sharding::Replicated);
    let xv = b.load(x);
    let g = b.gemv(w, xv, Parallelism::Replicated);
    b.store(g, y);
    kernels.push(b.finish());
    // Register and LDS parameters, a TP group of 0, a rank-3 tensor, a zero dimension, an
    // allreduce over another group, an output never written.
    let mut b = Builder::new("odd_params", 0);
    let decl = BufferDecl::input("r", f16(1, 8), Sharding::Replicated);
    b.param(decl.space(MemorySpace::Register));
    let decl = BufferDecl::input("l", f16(1, 8), col(3));
    b.param(decl.space(MemorySpace::Lds));
    let decl = BufferDecl::output(
        "p",
        tensor(ScalarType::F16, &[1, 2, 3]),
        Sharding::Replicated,
    );
    b.param(decl.space(MemorySpace::PeerGlobal));
    b.input("e", tensor(ScalarType::F16, &[]), Sharding::Replicated);
    b.input("z", tensor(ScalarType::F16, &[0, 4]), Sharding::Replicated);
    kernels.push(b.finish());
    let mut b = Builder::new("other_group", 2);
    let p = b.input(
        "p",
        tensor(ScalarType::F32, &[1, 8]),
        Sharding::Partial { tp: 2 },
    );
    let y = b.output("y", tensor(ScalarType::F32, &[1, 8]), Sharding::Replicated);
    let pv = b.load(p);
    let kind = OpKind::AllReduce(AllReduce {
        x: pv,
        tp: 8,
        compression: Compression::Int8 { block: 0 },
    });
    let r = b.op(kind)[0];
    let bad_slice = b.slice(r, 7, 9);
    b.store(bad_slice, y);
    kernels.push(b.finish());
    // Non-positive and infinite eps.
    for eps in [
        -1e-6,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        5e-324,
    ] {
        kernels.push(rmsnorm_kernel(eps));
    }
    for k in &kernels {
        assert!(k.name() == "eps_kernel" || validate(k).is_err(), "{k}");
        assert_round_trip(k);
    }
}

fn rmsnorm_kernel(eps: f64) -> Kernel {
    let mut b = Builder::new("eps_kernel", 1);
    let x = b.input("x", f16(1, 8), Sharding::Replicated);
    let w = b.input(
        "w",
        Tensor::vector(ScalarType::F16, 8),
        Sharding::Replicated,
    );
    let y = b.output("y", f16(1, 8), Sharding::Replicated);
    let (xv, wv) = (b.load(x), b.load(w));
    let n = b.rmsnorm(xv, wv, eps);
    let r = b.round_f16(n);
    b.store(r, y);
    b.finish()
}

/// A NaN eps is not equal to itself, so compare the text and the validation only.
#[test]
fn round_trip_nan_eps() {
    let k = rmsnorm_kernel(f64::NAN);
    let text = k.to_string();
    assert!(text.contains("eps=NaN"), "{text}");
    let parsed = parse(&text).expect("NaN parses");
    assert_eq!(parsed.to_string(), text);
    assert!(validate(&k).is_err() && validate(&parsed).is_err());
}

// ---------------------------------------------------------------------------------------------
// Texts written by hand
// ---------------------------------------------------------------------------------------------

/// Labels are renumbered in definition order; comments, blank lines and spacing are free.
#[test]
fn hand_written_text_with_other_labels() {
    let text = "
; a copy with a rounding point
kernel hand(tp=1){
    buf7 = input x : f32[2, 8] replicated @global index=local   ; x
    buf3=output y:f16[2,8] replicated@global index=local

    v10 = load buf7
    v4 = round_f16 v10 ; rounded
    store v4, buf3
}
; trailing comment
";
    let mut b = Builder::new("hand", 1);
    let x = b.input("x", tensor(ScalarType::F32, &[2, 8]), Sharding::Replicated);
    let y = b.output("y", f16(2, 8), Sharding::Replicated);
    let xv = b.load(x);
    let r = b.round_f16(xv);
    b.store(r, y);
    let expected = b.finish();
    assert_eq!(parse(text).expect("parses"), expected);
    let printed = expected.to_string();
    assert!(printed.contains("    v1 = round_f16 v0"), "{printed}");
}

/// The type comments are not read: a wrong one does not change the kernel.
#[test]
fn type_comments_are_ignored() {
    let text = every_op_tp1().to_string();
    let wrong = text.replace("; f32[", "; i8[");
    assert_ne!(wrong, text);
    assert_eq!(parse(&wrong).expect("parses"), every_op_tp1());
}

#[test]
fn carriage_returns_are_blanks() {
    let text = every_op_tp4().to_string().replace('\n', "\r\n");
    assert_eq!(parse(&text).expect("parses"), every_op_tp4());
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A small valid kernel; line 4 onwards are the ops.
const COPY: &str = "\
kernel k(tp=1) {
    buf0 = input x : f32[1, 8] replicated @global index=local
    buf1 = output y : f16[1, 8] replicated @global index=local
    v0 = load buf0
    v1 = silu v0
    v2 = round_f16 v1
    store v2, buf1
}
";

fn err(text: &str) -> ParseError {
    match parse(text) {
        Ok(k) => panic!("should not parse:\n{text}\nparsed as:\n{k}"),
        Err(e) => e,
    }
}

/// `COPY` with one line replaced.
fn copy_with(line: usize, new: &str) -> String {
    let mut lines: Vec<&str> = COPY.lines().collect();
    lines[line - 1] = new;
    lines.join("\n") + "\n"
}

/// Asserts the position and the full message.
fn assert_error(e: &ParseError, line: usize, column: usize, message: &str) {
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert_eq!(e.to_string(), message);
}

#[test]
fn copy_is_valid() {
    validate(&parse(COPY).expect("parses")).expect("validates");
}

#[test]
fn invalid_truncated_input() {
    // Inside a shape.
    let cut = &COPY[..COPY.find("8] replicated").expect("in COPY") + 1];
    let e = err(cut);
    assert_error(&e, 2, 30, "2:30: expected `,` or `]`, found end of input");
    assert_eq!(e.found, Found::EndOfInput);
    // After a whole line, before `}`.
    let cut = &COPY[..COPY.find("    store").expect("in COPY")];
    assert_error(
        &err(cut),
        7,
        1,
        "7:1: expected a statement or `}`, found end of input",
    );
    // The empty text.
    assert_error(&err(""), 1, 1, "1:1: expected `kernel`, found end of input");
    // Every prefix of a valid text that is not the whole text fails (the closing `}` is
    // required), and none panics.
    let full = every_op_tp4().to_string();
    let end = full.trim_end().len();
    for cut in (0..end).filter(|&i| full.is_char_boundary(i)) {
        assert!(parse(&full[..cut]).is_err(), "prefix of {cut} bytes parsed");
    }
}

#[test]
fn invalid_unknown_op() {
    let e = err(&copy_with(5, "    v1 = slu v0"));
    assert_error(
        &e,
        5,
        10,
        "5:10: expected an op, found `slu`; did you mean `silu`?",
    );
    let e = err(&copy_with(5, "    v1 = gemv.rwo buf0, v0"));
    assert_eq!(e.note.as_deref(), Some("did you mean `gemv.row`?"));
    // Nothing close: no suggestion.
    let e = err(&copy_with(5, "    v1 = frobnicate v0"));
    assert_error(&e, 5, 10, "5:10: expected an op, found `frobnicate`");
    // Keywords get suggestions too.
    let e = err(&copy_with(
        2,
        "    buf0 = inptu x : f32[1, 8] replicated @global index=local",
    ));
    assert_error(
        &e,
        2,
        12,
        "2:12: expected `input` or `output`, found `inptu`; did you mean `input`?",
    );
    let e = err(&copy_with(
        2,
        "    buf0 = input x : f32[1, 8] replicated @gloabl index=local",
    ));
    assert_eq!(e.column, 44);
    assert!(
        e.to_string()
            .ends_with("found `gloabl`; did you mean `global`?"),
        "{e}"
    );
}

#[test]
fn invalid_bad_number() {
    let e = err(&copy_with(
        2,
        "    buf0 = input x : f32[1, 8x] replicated @global index=local",
    ));
    assert_error(
        &e,
        2,
        29,
        "2:29: expected a dimension (an unsigned integer), found `8x`",
    );
    let e = err(&copy_with(
        2,
        "    buf0 = input x : f32[1, -8] replicated @global index=local",
    ));
    assert_eq!((e.column, e.found.clone()), (29, Found::Token("-8".into())));
    // Beyond the caps: the message says it is the parser's limit.
    let big = "    buf0 = input x : f32[1, 99999999999999999999999] replicated @global index=local";
    let e = err(&copy_with(2, big));
    assert_error(
        &e,
        2,
        29,
        "2:29: expected a dimension of at most 2147483647 (the parser's limit), found `99999999999999999999999`",
    );
    let huge = "    buf0 = input x : f32[2000000000, 2000000000] replicated @global index=local";
    let e = err(&copy_with(2, huge));
    assert_error(
        &e,
        2,
        22,
        "2:22: expected a buffer of at most 17179869184 elements (the parser's limit), found `f32[2000000000, 2000000000]`",
    );
    let e = err(&copy_with(1, "kernel k(tp=100000) {"));
    assert_error(
        &e,
        1,
        13,
        "1:13: expected a TP group size of at most 1024 (the parser's limit), found `100000`",
    );
    let rank9 =
        "    buf0 = input x : f32[1, 1, 1, 1, 1, 1, 1, 1, 1] replicated @global index=local";
    let e = err(&copy_with(2, rank9));
    assert_eq!(e.column, 50);
    assert!(e.expected.contains("at most 8 axes"), "{e}");
    // A float attribute.
    let text = rmsnorm_kernel(1e-6)
        .to_string()
        .replace("eps=1e-6", "eps=1e-6x");
    let e = err(&text);
    assert_eq!(e.found, Found::Token("1e-6x".into()));
    assert!(e.to_string().contains("expected a number"), "{e}");
}

#[test]
fn invalid_undefined_value_reference() {
    let e = err(&copy_with(5, "    v1 = silu v7"));
    assert_error(
        &e,
        5,
        15,
        "5:15: expected a defined value, found `v7`; no earlier line defines `v7`",
    );
    // A use before the definition is undefined at the use.
    let swapped = copy_with(5, "    v1 = silu v2");
    let e = err(&swapped);
    assert_eq!((e.line, e.column), (5, 15));
    // Buffers too.
    let e = err(&copy_with(4, "    v0 = load buf9"));
    assert_error(
        &e,
        4,
        15,
        "4:15: expected a defined buffer, found `buf9`; no earlier line defines `buf9`",
    );
    // A buffer where a value belongs.
    let e = err(&copy_with(5, "    v1 = silu buf0"));
    assert_error(
        &e,
        5,
        15,
        "5:15: expected a value like `v0`, found `buf0`; usage: `v = silu x`",
    );
}

#[test]
fn invalid_duplicate_definition() {
    let e = err(&copy_with(5, "    v0 = silu v0"));
    assert_error(
        &e,
        5,
        5,
        "5:5: expected a new value name, found `v0`; `v0` is already defined at 4:5",
    );
    let e = err(&copy_with(
        3,
        "    buf0 = output y : f16[1, 8] replicated @global index=local",
    ));
    assert_error(
        &e,
        3,
        5,
        "3:5: expected a new buffer name, found `buf0`; `buf0` is already defined at 2:5",
    );
    let e = err(&copy_with(5, "    v1, v1 = quantize_int8 v0, block=8"));
    assert_error(
        &e,
        5,
        9,
        "5:9: expected a new value name, found `v1`; `v1` is already defined at 5:5",
    );
}

#[test]
fn invalid_wrong_arity() {
    let e = err(&copy_with(5, "    v1 = add v0"));
    assert_error(
        &e,
        5,
        16,
        "5:16: expected `,` and a value like `v0`, found end of line; usage: `v = add a, b`",
    );
    let e = err(&copy_with(5, "    v1 = silu v0, v0"));
    assert_error(
        &e,
        5,
        17,
        "5:17: expected end of line, found `,`; usage: `v = silu x`",
    );
    let e = err(&copy_with(5, "    v1, v9 = silu v0"));
    assert_error(
        &e,
        5,
        14,
        "5:14: expected an op that defines 2 values, found `silu`; `silu` defines 1 value; usage: `v = silu x`",
    );
    let e = err(&copy_with(7, "    v3 = store v2, buf1"));
    assert!(e.to_string().contains("`store` defines no value"), "{e}");
    let e = err(&copy_with(5, "    v1 = slice v0, len=4"));
    assert_error(
        &e,
        5,
        20,
        "5:20: expected `start`, found `len`; usage: `v = slice x, start=S, len=L`",
    );
    let e = err(&copy_with(5, "    v1 = quantize_int8 v0, block=8"));
    assert_eq!(e.expected, "an op that defines 1 value");
}

#[test]
fn invalid_other_syntax() {
    let e = err(&copy_with(5, "    v1 = silu v0 $"));
    assert_error(
        &e,
        5,
        18,
        "5:18: expected a name, a number, a punctuation mark or `;`, found `$`",
    );
    let e = err(&copy_with(2, "    buf0 = input \"x : f32[1, 8]"));
    assert_eq!((e.line, e.found.clone()), (2, Found::EndOfLine));
    assert!(e.expected.contains("closing the name"), "{e}");
    let e = err(&(COPY.to_owned() + "kernel again(tp=1) {\n}\n"));
    assert_error(
        &e,
        9,
        1,
        "9:1: expected end of input (one kernel per text), found `kernel`",
    );
    let e = err(&copy_with(
        2,
        "    buf0 = input x : f32[1, 8] replicated global index=local",
    ));
    assert_error(&e, 2, 43, "2:43: expected `@`, found `global`");
    // The example of the brief's error format.
    let e = err("kernel k(tp=1) {\n    buf0 = input x : gptq<group=128]\n");
    assert_error(&e, 2, 36, "2:36: expected `,`, found `]`");
}

#[test]
fn invalid_too_many_results() {
    let e = err(&copy_with(5, "    v1, v2, v3 = quantize_int8 v0, block=8"));
    assert_error(
        &e,
        5,
        11,
        "5:11: expected `=` (no op defines more than 2 values), found `,`",
    );
}

#[test]
fn report_points_at_the_token() {
    let text = "kernel k(tp=1) {\n\tbuf0 = input x : gptq<group=128]\n";
    let e = err(text);
    let expected = "\
2:33: expected `,`, found `]`
  |
2 |  buf0 = input x : gptq<group=128]
  |                                 ^";
    assert_eq!(e.report(text), expected);
    // At the end of the input, past the last line.
    let e = err("kernel k(tp=1) {\n");
    assert_eq!((e.line, e.found.clone()), (2, Found::EndOfInput));
    assert_eq!(e.report("kernel k(tp=1) {\n"), e.to_string());
    // A long token gets a long caret.
    let e = err(&copy_with(5, "    v1 = frobnicate v0"));
    assert!(
        e.report(&copy_with(5, "    v1 = frobnicate v0"))
            .ends_with("\n  |          ^^^^^^^^^^")
    );
}

/// The error of a very long token is shortened.
#[test]
fn invalid_long_token_is_shortened() {
    let long = "x".repeat(1000);
    let e = err(&copy_with(5, &format!("    v1 = {long} v0")));
    let Found::Token(t) = &e.found else {
        panic!("{e:?}")
    };
    assert_eq!(t.chars().count(), 41, "{t}");
    assert!(e.to_string().len() < 120, "{e}");
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

/// Characters worth inserting: the grammar's punctuation, digits, signs, letters of keywords, and
/// characters it does not know.
const ALPHABET: &[u8] = b"=,:[](){}<>@;\"\\\n\r\t -+.e0123456789vbufkntpx_$\xff";

fn mutate(rng: &mut StdRng, text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.random_range(1..=3) {
        let len = bytes.len();
        if len == 0 {
            break;
        }
        let at = rng.random_range(0..len);
        match rng.random_range(0..7) {
            0 => bytes.truncate(at),
            1 => {
                bytes.remove(at);
            }
            2 => bytes[at] = ALPHABET[rng.random_range(0..ALPHABET.len())],
            3 => bytes.insert(at, ALPHABET[rng.random_range(0..ALPHABET.len())]),
            4 => {
                // A huge number where a digit was.
                if bytes[at].is_ascii_digit() {
                    bytes.splice(at..=at, b"18446744073709551617".iter().copied());
                }
            }
            5 => {
                // Duplicate a span (a line, or part of one).
                let end = (at + rng.random_range(1..80)).min(len);
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
            _ => {
                // Swap two bytes.
                let other = rng.random_range(0..len);
                bytes.swap(at, other);
            }
        }
    }
    bytes
}

/// Seeded mutations and truncations of printed kernels: the parser returns (never panics), a
/// kernel it accepts can be validated and printed, and printing is then a fixed point.
#[test]
fn mutations_never_panic() {
    let corpus: Vec<String> = [
        every_op_tp1(),
        every_op_tp4(),
        every_dtype(),
        odd_names(),
        rmsnorm_kernel(1e-5),
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    let mut rng = StdRng::seed_from_u64(0x5eed_0017);
    let start = Instant::now();
    let (mut parsed, mut rejected) = (0, 0);
    for _ in 0..2000 {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let bytes = mutate(&mut rng, base);
        let text = String::from_utf8_lossy(&bytes);
        match parse(&text) {
            Ok(k) => {
                parsed += 1;
                let _ = validate(&k);
                let printed = k.to_string();
                let again = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
                assert_eq!(again.to_string(), printed);
            }
            Err(e) => {
                rejected += 1;
                assert!(e.line >= 1 && e.column >= 1, "{e}");
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // Both outcomes occur, so the mutations are neither all fatal nor all harmless.
    assert!(
        parsed > 50 && rejected > 500,
        "parsed {parsed}, rejected {rejected}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "2000 cases took {:?}",
        start.elapsed()
    );
}
