//! The q8-activation ops (issue 19 item 2): `quantize_int8.rne` and `gemv_q8.MODE`.
//!
//! Round trips of the textual IR, a hand-written text against the builder's kernel, `invalid_*`
//! validator and parser errors (no panics), and the f64 semantics checked against an
//! independent computation in this file: the rounding point (RNE ties, clamp, zero blocks, the
//! dequantisation error bound) and the GEMV's `Σ (q − z)·s·code·sx` from the packed words.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use wavefuse_ir::reference::{HostData, HostTensor, PackedInt4, evaluate, round_to};
use wavefuse_ir::{
    Builder, GptqLayout, GroupSize, Kernel, OpError, Parallelism, ScalarType, Sharding, Tensor,
    ValidationError, Weight, WeightFormat, ZeroPoint, parse, validate,
};

const K: usize = 256;
const N: usize = 24;
const BATCH: usize = 3;

fn gptq(group: u32) -> WeightFormat {
    WeightFormat::Gptq(GptqLayout::new(GroupSize::Rows(group), ZeroPoint::V2))
}

/// `y = gemv_q8.rep(w, quantize_int8.rne(x, block, clamp), block)` (f32), and the codes and
/// scales stored too.
fn q8_kernel(format: WeightFormat, qblock: usize, gblock: usize, clamp: usize) -> Kernel {
    let rep = Sharding::Replicated;
    let mut b = Builder::new("q8_gemv", 1);
    let x = b.input("x", Tensor::activation(ScalarType::F16, BATCH, K), rep);
    let w = b.input("w", Weight { format, k: K, n: N }, rep);
    let y = b.output("y", Tensor::activation(ScalarType::F32, BATCH, N), rep);
    let codes = b.output("codes", Tensor::activation(ScalarType::I8, BATCH, K), rep);
    let sx = Tensor::activation(ScalarType::F32, BATCH, K / qblock.max(1));
    let scales = b.output("scales", sx, rep);
    let xv = b.load(x);
    let q = b.quantize_rne(xv, qblock, clamp);
    b.store(q.0, codes);
    b.store(q.1, scales);
    let g = b.gemv_q8(w, q, gblock, Parallelism::Replicated);
    b.store(g, y);
    b.finish()
}

fn round_trip(kernel: &Kernel) -> String {
    let text = kernel.to_string();
    let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
    assert_eq!(parsed.to_string(), text);
    assert_eq!(&parsed, kernel, "parse(print(k)) != k\n{text}");
    text
}

#[test]
fn q8_round_trip_and_validates() {
    let k = q8_kernel(gptq(64), 32, 32, 127);
    validate(&k).expect("valid");
    let text = round_trip(&k);
    assert!(
        text.contains("v1, v2 = quantize_int8.rne v0, block=32, clamp=127"),
        "{text}"
    );
    assert!(
        text.contains("v3 = gemv_q8.rep buf1, v1, v2, block=32"),
        "{text}"
    );
}

/// The column- and row-parallel forms at TP 2, through print and parse.
#[test]
fn q8_round_trip_tp2() {
    let tp = 2;
    let mut b = Builder::new("q8_tp2", tp);
    let x = b.input(
        "x",
        Tensor::activation(ScalarType::F16, 1, K),
        Sharding::Replicated,
    );
    let xs = b.input(
        "xs",
        Tensor::activation(ScalarType::F16, 1, K / 2),
        Sharding::ColumnParallel { tp },
    );
    let wc = Weight {
        format: gptq(32),
        k: K,
        n: 2 * N,
    };
    let wc = b.input("wc", wc, Sharding::ColumnParallel { tp });
    let wr = Weight {
        format: gptq(32),
        k: K / 2,
        n: N,
    };
    let wr = b.input("wr", wr, Sharding::RowParallel { tp });
    let yc = b.output(
        "yc",
        Tensor::activation(ScalarType::F32, 1, 2 * N),
        Sharding::ColumnParallel { tp },
    );
    let yr = b.output(
        "yr",
        Tensor::activation(ScalarType::F32, 1, N),
        Sharding::Partial { tp },
    );
    let xv = b.load(x);
    let q = b.quantize_rne(xv, 64, 100);
    let c = b.gemv_q8(wc, q, 64, Parallelism::Column);
    b.store(c, yc);
    let xsv = b.load(xs);
    let qs = b.quantize_rne(xsv, 32, 127);
    let r = b.gemv_q8(wr, qs, 32, Parallelism::Row);
    b.store(r, yr);
    let k = b.finish();
    if let Err(e) = validate(&k) {
        panic!("{e}\n{k}");
    }
    let text = round_trip(&k);
    assert!(text.contains("gemv_q8.col") && text.contains("gemv_q8.row"));
}

/// A text written by hand (other labels, a comment, no type annotations) is the builder's kernel.
#[test]
fn q8_text_by_hand() {
    let hand = "
        kernel q8_gemv(tp=1) {
            buf0 = input x : f16[3, 256] replicated @global index=local
            buf1 = input w : gptq<group=64, zero=v2, scale=f16>[k=256, n=24] replicated @global index=local
            buf2 = output y : f32[3, 24] replicated @global index=local
            buf3 = output codes : i8[3, 256] replicated @global index=local
            buf4 = output scales : f32[3, 8] replicated @global index=local
            v0 = load buf0
            ; the rounding point: RNE of x * (127 / max|x|) per block of 32, clamped to 127
            v10, v11 = quantize_int8.rne v0, block=32, clamp=127
            store v10, buf3
            store v11, buf4
            v12 = gemv_q8.rep buf1, v10, v11, block=32
            store v12, buf2
        }
    ";
    let parsed = parse(hand).unwrap_or_else(|e| panic!("{e}\n{hand}"));
    assert_eq!(parsed, q8_kernel(gptq(64), 32, 32, 127));
}

// ---------------------------------------------------------------------------------------------
// Misuse: validator and parser errors (never a panic)
// ---------------------------------------------------------------------------------------------

fn op_error(k: &Kernel) -> (&'static str, OpError) {
    match validate(k) {
        Err(ValidationError::Op {
            mnemonic, source, ..
        }) => (mnemonic, source),
        other => panic!("expected an op error, got {other:?}\n{k}"),
    }
}

fn attribute(e: &OpError) -> &'static str {
    match e {
        OpError::Attribute { operand, .. } => operand,
        other => panic!("expected an attribute error, got {other:?}"),
    }
}

#[test]
fn invalid_q8_block_not_dividing_k() {
    let (m, e) = op_error(&q8_kernel(gptq(64), 24, 24, 127));
    assert_eq!((m, attribute(&e)), ("quantize_int8.rne", "block"));
    assert!(e.to_string().contains("does not divide the 256"), "{e}");
}

#[test]
fn invalid_q8_clamp_out_of_range() {
    for clamp in [0, 128, 1000] {
        let (m, e) = op_error(&q8_kernel(gptq(64), 32, 32, clamp));
        assert_eq!((m, attribute(&e)), ("quantize_int8.rne", "clamp"));
    }
}

#[test]
fn invalid_q8_gemv_of_f16_weight() {
    let (m, e) = op_error(&q8_kernel(WeightFormat::F16, 32, 32, 127));
    assert_eq!((m, attribute(&e)), ("gemv_q8.rep", "weight"));
    assert!(e.to_string().contains("INT4"), "{e}");
}

/// The GEMV's block must be the quantisation's: its scales' shape says so.
#[test]
fn invalid_q8_block_mismatch() {
    let (m, e) = op_error(&q8_kernel(gptq(64), 32, 64, 127));
    assert_eq!(m, "gemv_q8.rep");
    assert!(
        matches!(e, OpError::Shape { operand: "scales", ref expected, .. } if *expected == vec![BATCH, K / 64]),
        "{e:?}"
    );
}

fn with_x(dtype: ScalarType, codes_from_x: bool) -> Kernel {
    let rep = Sharding::Replicated;
    let mut b = Builder::new("q8_bad", 1);
    let x = b.input("x", Tensor::activation(dtype, BATCH, K), rep);
    let w = b.input(
        "w",
        Weight {
            format: gptq(64),
            k: K,
            n: N,
        },
        rep,
    );
    let y = b.output("y", Tensor::activation(ScalarType::F32, BATCH, N), rep);
    let xv = b.load(x);
    let (q, s) = b.quantize_rne(xv, 32, 127);
    let codes = if codes_from_x { xv } else { q };
    let g = b.gemv_q8(w, (codes, s), 32, Parallelism::Replicated);
    b.store(g, y);
    b.finish()
}

#[test]
fn invalid_q8_quantize_of_f32() {
    let (m, e) = op_error(&with_x(ScalarType::F32, false));
    assert_eq!(m, "quantize_int8.rne");
    assert!(matches!(e, OpError::Dtype { operand: "x", .. }), "{e:?}");
}

#[test]
fn invalid_q8_gemv_of_f16_activation() {
    let (m, e) = op_error(&with_x(ScalarType::F16, true));
    assert_eq!(m, "gemv_q8.rep");
    assert!(
        matches!(
            e,
            OpError::Dtype {
                operand: "codes",
                ..
            }
        ),
        "{e:?}"
    );
}

/// Dropping an attribute or an operand, or a word where a number goes, is a parse error.
#[test]
fn invalid_q8_text() {
    let text = q8_kernel(gptq(64), 32, 32, 127).to_string();
    for (from, to) in [
        (", clamp=127", ""),
        ("block=32, clamp", "clamp"),
        ("clamp=127", "clamp=rne"),
        ("v1, v2, block=32", "v1, block=32"),
        ("v1, v2 = quantize", "v1 = quantize"),
        ("gemv_q8.rep", "gemv_q8"),
    ] {
        assert!(text.contains(from), "{from}");
        let bad = text.replacen(from, to, 1);
        assert!(parse(&bad).is_err(), "parsed:\n{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// Semantics (f64 reference) against computations written here
// ---------------------------------------------------------------------------------------------

fn tensor(shape: &[usize], data: Vec<f64>) -> HostData {
    HostData::Tensor(HostTensor {
        dtype: ScalarType::F16,
        shape: shape.to_vec(),
        data,
    })
}

/// Random GPTQ v2 weight `[K, N]` with group `g`: codes and zero points uniform in 0..16, FP16
/// scales ~ 0.002..0.02.
fn random_weight(rng: &mut StdRng, g: usize) -> PackedInt4 {
    let groups = K / g;
    PackedInt4 {
        qweight: (0..K / 8 * N).map(|_| rng.random::<u32>() as i32).collect(),
        scales: (0..groups * N)
            .map(|_| round_to(ScalarType::F16, rng.random_range(0.002..0.02)))
            .collect(),
        qzeros: (0..groups * N / 8)
            .map(|_| rng.random::<u32>() as i32)
            .collect(),
        g_idx: None,
    }
}

fn nib(word: i32, i: usize) -> i64 {
    i64::from(((word as u32) >> (4 * i)) & 0xF)
}

/// `Σ_k (q − z)·s · code · sx`, straight from the packed words.
fn gemv_q8_here(w: &PackedInt4, g: usize, codes: &[f64], sx: &[f64], block: usize) -> Vec<f64> {
    let mut y = vec![0.0; BATCH * N];
    for b in 0..BATCH {
        for n in 0..N {
            let mut acc = 0.0;
            for k in 0..K {
                let q = nib(w.qweight[(k / 8) * N + n], k % 8);
                let z = nib(w.qzeros[(k / g) * (N / 8) + n / 8], n % 8);
                let wk = (q - z) as f64 * w.scales[(k / g) * N + n];
                acc += wk * codes[b * K + k] * sx[b * K / block + k / block];
            }
            y[b * N + n] = acc;
        }
    }
    y
}

fn run(k: &Kernel, x: Vec<f64>, w: Option<PackedInt4>) -> BTreeMap<String, Vec<f64>> {
    let mut inputs = BTreeMap::new();
    for b in k.inputs() {
        let data = match k.buffer(b).expect("declared").name.as_str() {
            "x" => tensor(&[BATCH, K], x.clone()),
            _ => HostData::Int4(w.clone().expect("a weight")),
        };
        inputs.insert(b, data);
    }
    let out = evaluate(k, &[inputs]).expect("evaluates");
    out[0]
        .iter()
        .map(|(b, t)| (k.buffer(*b).expect("declared").name.clone(), t.data.clone()))
        .collect()
}

/// RNE at ties (half away from zero would give 1, 3, −3), the block's absmax at ±C, and an
/// all-zero block (scale 0, codes 0).
#[test]
fn q8_rne_rounding_point() {
    let k = q8_kernel(gptq(64), 32, 32, 127);
    let mut x = vec![0.0; BATCH * K];
    // Block 0 of row 0: m = 127, so s = 1 and r = 1 exactly.
    x[..6].copy_from_slice(&[127.0, 0.5, 1.5, 2.5, -2.5, -127.0]);
    // Block 1 of row 0 stays zero; block 2: m = 2 → r = 63.5, x = 1 → 63.5 → 64 (even).
    x[64] = 2.0;
    x[65] = 1.0;
    x[66] = -1.0;
    let out = run(
        &k,
        x,
        Some(random_weight(&mut StdRng::seed_from_u64(1), 64)),
    );
    assert_eq!(&out["codes"][..6], &[127.0, 0.0, 2.0, 2.0, -2.0, -127.0]);
    assert_eq!(out["scales"][0], 1.0);
    assert!(out["codes"][32..64].iter().all(|&q| q == 0.0));
    assert_eq!(out["scales"][1], 0.0);
    assert_eq!(&out["codes"][64..67], &[127.0, 64.0, -64.0]);
    assert_eq!(out["scales"][2], f64::from(2.0f32 / 127.0));
}

/// A clamp below 127 bounds the codes by it.
#[test]
fn q8_clamp_bounds_codes() {
    let k = q8_kernel(gptq(64), 32, 32, 7);
    let mut rng = StdRng::seed_from_u64(2);
    let x: Vec<f64> = (0..BATCH * K)
        .map(|_| round_to(ScalarType::F16, rng.random_range(-3.0..3.0)))
        .collect();
    let out = run(&k, x, Some(random_weight(&mut rng, 64)));
    assert!(
        out["codes"]
            .iter()
            .all(|&q| q.abs() <= 7.0 && q.fract() == 0.0)
    );
    assert!(out["codes"].iter().any(|&q| q.abs() == 7.0));
}

/// On fresh random inputs: every code within half a step of `x / s` (the dequantisation error
/// bound `|q·s − x| ≤ s/2`, up to the f32 roundings of `s` and `r`), and the GEMV equal to the
/// sum written in this file from the packed words (f64 sums in another order, stored as f32: to
/// 1e-6 of the largest output).
#[test]
fn q8_semantics_on_random_inputs() {
    for seed in 0..3 {
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let (g, block) = [(64, 32), (128, 64), (32, 32)][seed as usize];
        let k = q8_kernel(gptq(g as u32), block, block, 127);
        let x: Vec<f64> = (0..BATCH * K)
            .map(|_| round_to(ScalarType::F16, rng.random_range(-4.0..4.0)))
            .collect();
        let w = random_weight(&mut rng, g);
        let out = run(&k, x.clone(), Some(w.clone()));
        let (codes, sx) = (&out["codes"], &out["scales"]);
        for (i, (&xi, &q)) in x.iter().zip(codes).enumerate() {
            let s = sx[i / block];
            assert!(
                (q * s - xi).abs() <= s * (0.5 + 1e-6),
                "seed {seed}, element {i}: x {xi}, code {q}, scale {s}"
            );
        }
        let here = gemv_q8_here(&w, g, codes, sx, block);
        let y = &out["y"];
        let scale = here.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.1, "a test of something");
        for (i, (&a, &b)) in here.iter().zip(y).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * scale,
                "seed {seed}, y[{i}]: {a} vs {b}"
            );
        }
    }
}

/// The product `x · r` is rounded to an integer exactly, not after an f32 rounding: a case where
/// `f32(x · r)` is a tie `k + 1/2` but the exact product is not (found by a seeded search) gets
/// the code of the exact product.
#[test]
fn q8_rne_of_the_exact_product() {
    let mut rng = StdRng::seed_from_u64(5);
    let found = (0..2_000_000).find_map(|_| {
        let m = round_to(ScalarType::F16, rng.random_range(0.5..4.0)) as f32;
        let x = round_to(ScalarType::F16, rng.random_range(0.0..f64::from(m))) as f32;
        let r = 127.0f32 / m;
        let rounded = x * r;
        let exact = f64::from(x) * f64::from(r);
        (rounded.fract() == 0.5 && exact != f64::from(rounded)).then_some((m, x, exact))
    });
    let (m, x, exact) = found.expect("a near-tie within the search");
    let mut block = vec![0.0; 32];
    block[0] = f64::from(m);
    block[1] = f64::from(x);
    let (codes, _) = wavefuse_ir::reference::quant::q8_rne_quantize(&block, 127);
    assert_eq!(codes[1], exact.round(), "m {m}, x {x}, exact {exact}");
}
