//! The reference evaluator against formulas written here by hand, on fresh random inputs.
//!
//! The naive side never calls the evaluator's helpers: packed words are unpacked through their
//! little-endian bytes, groups and zero points are looked up directly, and products are summed in
//! plain loops. Packed data is drawn at random (not produced by the project's packer), so the
//! evaluator's unpacking is checked against an independent reading of DESIGN.md §2.
//!
//! Tolerance: both sides are f64 with different summation orders; relative L2 error ≤ 1e-12.

use std::collections::BTreeMap;

use half::f16;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wavefuse::ir::reference::{EvalError, HostData, HostTensor, PackedInt4, RankInputs, evaluate};
use wavefuse::ir::{
    AWQ_NIBBLE_ORDER, AwqLayout, Builder, GptqLayout, GroupSize, Kernel, Parallelism, ScalarType,
    Sharding, Tensor, Weight, WeightFormat, ZeroPoint,
};

const TOL: f64 = 1e-12;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn f16_values(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|_| f16::from_f64(rng.random_range(-1.0..1.0) * scale).to_f64())
        .collect()
}

fn tensor(shape: Vec<usize>, data: Vec<f64>) -> HostData {
    HostData::Tensor(HostTensor {
        dtype: ScalarType::F16,
        shape,
        data,
    })
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    assert!(got.iter().all(|x| x.is_finite()), "non-finite output");
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    let e = rel_l2(got, want);
    assert!(e <= tol, "{what}: relative L2 error {e:e} > {tol:e}");
}

/// Nibble `i` of a word, read through its little-endian bytes.
fn nibble_of(word: i32, i: usize) -> i64 {
    let byte = word.to_le_bytes()[i / 2];
    i64::from(if i % 2 == 0 { byte & 0x0F } else { byte >> 4 })
}

/// Random packed GPTQ arrays for a `[k, n]` weight.
fn random_gptq(rng: &mut ChaCha8Rng, k: usize, n: usize, l: &GptqLayout) -> PackedInt4 {
    let g = l.group.rows(k);
    let groups = k / g;
    let qweight = (0..k / 8 * n).map(|_| rng.random::<u32>() as i32).collect();
    let scales = (0..groups * n)
        .map(|_| f16::from_f64(rng.random_range(0.001..0.01)).to_f64())
        .collect();
    let qzeros = match l.zero {
        ZeroPoint::Symmetric => vec![],
        _ => (0..groups * n / 8)
            .map(|_| rng.random::<u32>() as i32)
            .collect(),
    };
    let g_idx = l
        .act_order
        .then(|| (0..k).map(|_| rng.random_range(0..groups as i32)).collect());
    PackedInt4 {
        qweight,
        scales,
        qzeros,
        g_idx,
    }
}

/// W[k][n] of a GPTQ weight, by the letter of DESIGN.md §2.
fn naive_gptq(p: &PackedInt4, k: usize, n: usize, l: &GptqLayout) -> Vec<Vec<f64>> {
    let g = l.group.rows(k);
    let mut w = vec![vec![0.0; n]; k];
    for (row, wrow) in w.iter_mut().enumerate() {
        let group = match &p.g_idx {
            Some(gi) => gi[row] as usize,
            None => row / g,
        };
        for (col, out) in wrow.iter_mut().enumerate() {
            let q = nibble_of(p.qweight[(row / 8) * n + col], row % 8);
            let z = match l.zero {
                ZeroPoint::Symmetric => 8,
                ZeroPoint::V2 => nibble_of(p.qzeros[group * (n / 8) + col / 8], col % 8),
                ZeroPoint::V1 => nibble_of(p.qzeros[group * (n / 8) + col / 8], col % 8) + 1,
            };
            *out = (q - z) as f64 * p.scales[group * n + col];
        }
    }
    w
}

/// y[b][n] = Σ_k W[k][n] x[b][k].
fn naive_gemv(w: &[Vec<f64>], x: &[f64], batch: usize) -> Vec<f64> {
    let (k, n) = (w.len(), w[0].len());
    let mut y = vec![0.0; batch * n];
    for b in 0..batch {
        for col in 0..n {
            for row in 0..k {
                y[b * n + col] += w[row][col] * x[b * k + row];
            }
        }
    }
    y
}

/// A replicated GEMV kernel `y = round_f16(W x)` or, with `round = false`, an f32 output.
fn gemv_kernel(format: WeightFormat, k: usize, n: usize, batch: usize) -> Kernel {
    let mut b = Builder::new("gemv", 1);
    let w = b.input("w", Weight { format, k, n }, Sharding::Replicated);
    let x = b.input(
        "x",
        Tensor::activation(ScalarType::F16, batch, k),
        Sharding::Replicated,
    );
    let y = b.output(
        "y",
        Tensor::activation(ScalarType::F32, batch, n),
        Sharding::Replicated,
    );
    let xv = b.load(x);
    let acc = b.gemv(w, xv, Parallelism::Replicated);
    b.store(acc, y);
    b.finish()
}

fn run_one(kernel: &Kernel, inputs: RankInputs, output: &str) -> Vec<f64> {
    let outs = evaluate(kernel, &[inputs]).expect("evaluates");
    let b = kernel.buffer_by_name(output).expect("output exists");
    outs[0][&b].data.clone()
}

fn check_gptq(seed: u64, k: usize, n: usize, batch: usize, layout: GptqLayout) {
    let mut r = rng(seed);
    let packed = random_gptq(&mut r, k, n, &layout);
    let x = f16_values(&mut r, batch * k, 2.0);
    let kernel = gemv_kernel(WeightFormat::Gptq(layout), k, n, batch);
    let inputs = BTreeMap::from([
        (
            kernel.buffer_by_name("w").unwrap(),
            HostData::Int4(packed.clone()),
        ),
        (
            kernel.buffer_by_name("x").unwrap(),
            tensor(vec![batch, k], x.clone()),
        ),
    ]);
    let got = run_one(&kernel, inputs, "y");
    // The output buffer is f32: the reference rounds each output once to f32.
    let want: Vec<f64> = naive_gemv(&naive_gptq(&packed, k, n, &layout), &x, batch)
        .into_iter()
        .map(|v| v as f32 as f64)
        .collect();
    assert_close(
        &got,
        &want,
        TOL.max(1e-7),
        &format!("gptq {layout:?} k={k} n={n} b={batch}"),
    );
}

#[test]
fn gptq_v2_group128_matches_naive() {
    check_gptq(
        1,
        256,
        24,
        1,
        GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V2),
    );
}

#[test]
fn gptq_v1_adds_one_to_stored_zero() {
    check_gptq(
        2,
        128,
        16,
        1,
        GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V1),
    );
}

#[test]
fn gptq_v1_and_v2_differ_by_exactly_one_zero_step() {
    let mut r = rng(3);
    let (k, n) = (64, 8);
    let v1 = GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V1);
    let v2 = GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V2);
    let packed = random_gptq(&mut r, k, n, &v2);
    // x = e_0 selects row 0 of W: W_v1 − W_v2 = −scale (z is one larger under v1).
    let mut x = vec![0.0; k];
    x[0] = 1.0;
    let y = |l: GptqLayout| {
        let kernel = gemv_kernel(WeightFormat::Gptq(l), k, n, 1);
        let inputs = BTreeMap::from([
            (
                kernel.buffer_by_name("w").unwrap(),
                HostData::Int4(packed.clone()),
            ),
            (
                kernel.buffer_by_name("x").unwrap(),
                tensor(vec![1, k], x.clone()),
            ),
        ]);
        run_one(&kernel, inputs, "y")
    };
    let (y1, y2) = (y(v1), y(v2));
    for col in 0..n {
        let diff = y1[col] - y2[col];
        assert!(
            (diff + packed.scales[col]).abs() < 1e-6,
            "col {col}: v1 − v2 = {diff}"
        );
    }
}

#[test]
fn gptq_symmetric_odd_n_and_batch() {
    for batch in [2, 5, 8] {
        check_gptq(
            4 + batch as u64,
            64,
            13,
            batch,
            GptqLayout::new(GroupSize::Rows(32), ZeroPoint::Symmetric),
        );
    }
}

/// Batch 16, 32 and 64 (issue 40): the f64 oracle's GPTQ GEMV against the naive product row by
/// row, each output rounded once to f32 (relative L2 ≤ 1e-7: the f32 rounding of the outputs,
/// 2^-24 relative, with room), for v1 and v2 zero points, groups 32, 128 and per channel.
#[test]
fn gptq_at_batch_16_32_64_matches_naive() {
    for (i, batch) in [16, 32, 64].into_iter().enumerate() {
        check_gptq(
            40 + i as u64,
            128,
            24,
            batch,
            GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V1),
        );
        check_gptq(
            50 + i as u64,
            256,
            16,
            batch,
            GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V2),
        );
        check_gptq(
            60 + i as u64,
            40,
            8,
            batch,
            GptqLayout::new(GroupSize::PerChannel, ZeroPoint::V2),
        );
    }
}

#[test]
fn gptq_per_channel_partial_group_shapes() {
    // K = 40 is not a multiple of any power-of-two group: per-channel is the legal choice.
    check_gptq(
        7,
        40,
        24,
        3,
        GptqLayout::new(GroupSize::PerChannel, ZeroPoint::V2),
    );
}

#[test]
fn gptq_group_64_and_32() {
    check_gptq(
        8,
        192,
        40,
        1,
        GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V2),
    );
    check_gptq(
        9,
        96,
        8,
        4,
        GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V1),
    );
}

#[test]
fn gptq_act_order_uses_g_idx() {
    let layout = GptqLayout {
        act_order: true,
        ..GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V2)
    };
    check_gptq(10, 128, 16, 2, layout);
}

#[test]
fn awq_interleaved_nibbles_match_naive() {
    let mut r = rng(11);
    let (k, n, g) = (64, 32, 32);
    let groups = k / g;
    let qweight: Vec<i32> = (0..k * n / 8).map(|_| r.random::<u32>() as i32).collect();
    let qzeros: Vec<i32> = (0..groups * n / 8)
        .map(|_| r.random::<u32>() as i32)
        .collect();
    let scales: Vec<f64> = (0..groups * n)
        .map(|_| f16::from_f64(r.random_range(0.001..0.01)).to_f64())
        .collect();
    // Forward reading: nibble i of word j is column 8j + ORDER[i].
    let mut w = vec![vec![0.0; n]; k];
    for row in 0..k {
        for j in 0..n / 8 {
            for (i, &off) in AWQ_NIBBLE_ORDER.iter().enumerate() {
                let col = 8 * j + off;
                let q = nibble_of(qweight[row * (n / 8) + j], i);
                let z = nibble_of(qzeros[(row / g) * (n / 8) + j], i);
                w[row][col] = (q - z) as f64 * scales[(row / g) * n + col];
            }
        }
    }
    let x = f16_values(&mut r, k, 1.0);
    let layout = AwqLayout {
        group: GroupSize::Rows(g as u32),
        scale: ScalarType::F16,
    };
    let kernel = gemv_kernel(WeightFormat::Awq(layout), k, n, 1);
    let packed = PackedInt4 {
        qweight,
        scales,
        qzeros,
        g_idx: None,
    };
    let inputs = BTreeMap::from([
        (kernel.buffer_by_name("w").unwrap(), HostData::Int4(packed)),
        (
            kernel.buffer_by_name("x").unwrap(),
            tensor(vec![1, k], x.clone()),
        ),
    ]);
    let want: Vec<f64> = naive_gemv(&w, &x, 1)
        .into_iter()
        .map(|v| v as f32 as f64)
        .collect();
    assert_close(&run_one(&kernel, inputs, "y"), &want, 1e-7, "awq");
}

#[test]
fn f16_weight_is_stored_n_by_k() {
    let mut r = rng(12);
    let (k, n, batch) = (24, 7, 2);
    let nk = f16_values(&mut r, n * k, 0.1);
    let w: Vec<Vec<f64>> = (0..k)
        .map(|row| (0..n).map(|col| nk[col * k + row]).collect())
        .collect();
    let x = f16_values(&mut r, batch * k, 1.0);
    let kernel = gemv_kernel(WeightFormat::F16, k, n, batch);
    let inputs = BTreeMap::from([
        (kernel.buffer_by_name("w").unwrap(), HostData::F16Weight(nk)),
        (
            kernel.buffer_by_name("x").unwrap(),
            tensor(vec![batch, k], x.clone()),
        ),
    ]);
    let want: Vec<f64> = naive_gemv(&w, &x, batch)
        .into_iter()
        .map(|v| v as f32 as f64)
        .collect();
    assert_close(&run_one(&kernel, inputs, "y"), &want, 1e-7, "f16 weight");
}

/// The fused kernel's semantics over a TP group, against the unsharded computation by hand:
/// split K over ranks, each rank's partial rounded to FP16, summed, residual added, rounded,
/// RMS-normalised, rounded.
#[test]
fn row_parallel_allreduce_rmsnorm_matches_unsharded_formula() {
    for (tp, batch) in [(1u32, 1usize), (2, 1), (4, 3), (8, 2)] {
        let mut r = rng(100 + u64::from(tp));
        let (k_local, n, eps) = (64, 40, 1e-6);
        let layout = GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V1);
        let mut b = Builder::new("fused", tp);
        let w = b.input(
            "w",
            Weight {
                format: WeightFormat::Gptq(layout),
                k: k_local,
                n,
            },
            Sharding::RowParallel { tp },
        );
        let x = b.input(
            "x",
            Tensor::activation(ScalarType::F16, batch, k_local),
            Sharding::ColumnParallel { tp },
        );
        let res = b.input(
            "res",
            Tensor::activation(ScalarType::F16, batch, n),
            Sharding::Replicated,
        );
        let nw = b.input(
            "nw",
            Tensor::vector(ScalarType::F16, n),
            Sharding::Replicated,
        );
        let res_out = b.output(
            "res_out",
            Tensor::activation(ScalarType::F16, batch, n),
            Sharding::Replicated,
        );
        let normed = b.output(
            "normed",
            Tensor::activation(ScalarType::F16, batch, n),
            Sharding::Replicated,
        );
        let xv = b.load(x);
        let p = b.gemv(w, xv, Parallelism::Row);
        let p16 = b.round_f16(p);
        let s = b.allreduce(p16);
        let rv = b.load(res);
        let sum = b.add(s, rv);
        let sum16 = b.round_f16(sum);
        b.store(sum16, res_out);
        let nwv = b.load(nw);
        let nrm = b.rmsnorm(sum16, nwv, eps);
        let nrm16 = b.round_f16(nrm);
        b.store(nrm16, normed);
        let kernel = b.finish();

        let residual = f16_values(&mut r, batch * n, 1.0);
        let norm_w = f16_values(&mut r, n, 0.5)
            .into_iter()
            .map(|v| f16::from_f64(1.0 + v).to_f64())
            .collect::<Vec<_>>();
        let mut partial_sum = vec![0.0; batch * n];
        let mut inputs = Vec::new();
        for _rank in 0..tp {
            let packed = random_gptq(&mut r, k_local, n, &layout);
            let xr = f16_values(&mut r, batch * k_local, 1.0);
            let y = naive_gemv(&naive_gptq(&packed, k_local, n, &layout), &xr, batch);
            for (acc, v) in partial_sum.iter_mut().zip(y) {
                *acc += f16::from_f64(v).to_f64();
            }
            inputs.push(BTreeMap::from([
                (kernel.buffer_by_name("w").unwrap(), HostData::Int4(packed)),
                (
                    kernel.buffer_by_name("x").unwrap(),
                    tensor(vec![batch, k_local], xr),
                ),
                (
                    kernel.buffer_by_name("res").unwrap(),
                    tensor(vec![batch, n], residual.clone()),
                ),
                (
                    kernel.buffer_by_name("nw").unwrap(),
                    tensor(vec![n], norm_w.clone()),
                ),
            ]));
        }
        let new_res: Vec<f64> = partial_sum
            .iter()
            .zip(&residual)
            .map(|(a, b)| f16::from_f64(a + b).to_f64())
            .collect();
        let mut want_norm = Vec::new();
        for row in new_res.chunks(n) {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
            want_norm.extend(
                row.iter()
                    .zip(&norm_w)
                    .map(|(v, w)| f16::from_f64(v / (ms + eps).sqrt() * w).to_f64()),
            );
        }
        let outs = evaluate(&kernel, &inputs).expect("evaluates");
        assert_eq!(outs.len(), tp as usize);
        for (rank, o) in outs.iter().enumerate() {
            let got_res = &o[&kernel.buffer_by_name("res_out").unwrap()].data;
            let got_norm = &o[&kernel.buffer_by_name("normed").unwrap()].data;
            // FP16 outputs of identical f64 sums: a rounding-boundary flip is at most one FP16 ulp.
            assert_close(
                got_res,
                &new_res,
                1e-3,
                &format!("tp={tp} rank={rank} residual"),
            );
            assert_close(
                got_norm,
                &want_norm,
                1e-3,
                &format!("tp={tp} rank={rank} normed"),
            );
        }
    }
}

#[test]
fn int8_allreduce_matches_hand_quantisation() {
    let (tp, n, block) = (4u32, 256, 64);
    let mut r = rng(13);
    let mut b = Builder::new("ar8", tp);
    let p = b.input(
        "p",
        Tensor::activation(ScalarType::F16, 1, n),
        Sharding::Partial { tp },
    );
    let y = b.output(
        "y",
        Tensor::activation(ScalarType::F32, 1, n),
        Sharding::Replicated,
    );
    let pv = b.load(p);
    let s = b.allreduce_int8(pv, block);
    b.store(s, y);
    let kernel = b.finish();
    let parts: Vec<Vec<f64>> = (0..tp).map(|_| f16_values(&mut r, n, 1.0)).collect();
    let mut want = vec![0.0f64; n];
    let mut exact = vec![0.0f64; n];
    for part in &parts {
        for blk in 0..n / block {
            let vals = &part[blk * block..(blk + 1) * block];
            let amax = vals.iter().map(|v| v.abs()).fold(0.0, f64::max);
            let scale = (amax as f32 / 127.0) as f64;
            for (i, v) in vals.iter().enumerate() {
                let q = (v / scale).round().clamp(-127.0, 127.0);
                want[blk * block + i] += q * scale;
                exact[blk * block + i] += v;
            }
        }
    }
    let inputs: Vec<RankInputs> = parts
        .iter()
        .map(|part| {
            BTreeMap::from([(
                kernel.buffer_by_name("p").unwrap(),
                tensor(vec![1, n], part.clone()),
            )])
        })
        .collect();
    let outs = evaluate(&kernel, &inputs).unwrap();
    let got = &outs[0][&kernel.buffer_by_name("y").unwrap()].data;
    let want32: Vec<f64> = want.iter().map(|v| *v as f32 as f64).collect();
    assert_close(got, &want32, 1e-7, "int8 allreduce");
    // The accuracy gate of DESIGN.md §3.8: per element within tp · scale / 2 of the exact sum.
    for i in 0..n {
        let bound: f64 = parts
            .iter()
            .map(|p| {
                let blk = &p[(i / block) * block..(i / block + 1) * block];
                blk.iter().map(|v| v.abs()).fold(0.0, f64::max) / 127.0 / 2.0
            })
            .sum();
        assert!(
            (got[i] - exact[i]).abs() <= bound * 1.0001 + 1e-6,
            "element {i} outside the gate"
        );
    }
}

#[test]
fn dual_silu_matches_hand_formula() {
    let mut r = rng(14);
    let (k, n) = (64, 16);
    let layout = GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V2);
    let mut b = Builder::new("dual", 1);
    let wg = b.input(
        "wg",
        Weight {
            format: WeightFormat::Gptq(layout),
            k,
            n,
        },
        Sharding::Replicated,
    );
    let wu = b.input(
        "wu",
        Weight {
            format: WeightFormat::Gptq(layout),
            k,
            n,
        },
        Sharding::Replicated,
    );
    let x = b.input(
        "x",
        Tensor::activation(ScalarType::F16, 1, k),
        Sharding::Replicated,
    );
    let y = b.output(
        "y",
        Tensor::activation(ScalarType::F16, 1, n),
        Sharding::Replicated,
    );
    let xv = b.load(x);
    let g = b.gemv(wg, xv, Parallelism::Replicated);
    let u = b.gemv(wu, xv, Parallelism::Replicated);
    let sg = b.silu(g);
    let m = b.mul(sg, u);
    let m16 = b.round_f16(m);
    b.store(m16, y);
    let kernel = b.finish();
    let (pg, pu) = (
        random_gptq(&mut r, k, n, &layout),
        random_gptq(&mut r, k, n, &layout),
    );
    let xs = f16_values(&mut r, k, 1.0);
    let gv = naive_gemv(&naive_gptq(&pg, k, n, &layout), &xs, 1);
    let uv = naive_gemv(&naive_gptq(&pu, k, n, &layout), &xs, 1);
    let want: Vec<f64> = gv
        .iter()
        .zip(&uv)
        .map(|(g, u)| f16::from_f64(g / (1.0 + (-g).exp()) * u).to_f64())
        .collect();
    let inputs = BTreeMap::from([
        (kernel.buffer_by_name("wg").unwrap(), HostData::Int4(pg)),
        (kernel.buffer_by_name("wu").unwrap(), HostData::Int4(pu)),
        (kernel.buffer_by_name("x").unwrap(), tensor(vec![1, k], xs)),
    ]);
    assert_close(&run_one(&kernel, inputs, "y"), &want, 1e-3, "dual silu");
}

#[test]
fn round_f16_ties_to_even() {
    let mut b = Builder::new("round", 1);
    let x = b.input(
        "x",
        Tensor::activation(ScalarType::F32, 1, 3),
        Sharding::Replicated,
    );
    let y = b.output(
        "y",
        Tensor::activation(ScalarType::F16, 1, 3),
        Sharding::Replicated,
    );
    let xv = b.load(x);
    let s = b.add(xv, xv); // f32 → f32, exact doubling
    let r = b.round_f16(s);
    b.store(r, y);
    let kernel = b.finish();
    // Halves of: 1 + 2^-11 (tie → 1), 1 + 3·2^-11 (tie → 1 + 2^-9), 65519.99 (→ 65504, the max).
    let half_ulp = 2f64.powi(-11);
    let data = vec![
        (1.0 + half_ulp) / 2.0,
        (1.0 + 3.0 * half_ulp) / 2.0,
        65519.0 / 2.0,
    ];
    let inputs = BTreeMap::from([(
        kernel.buffer_by_name("x").unwrap(),
        HostData::Tensor(HostTensor {
            dtype: ScalarType::F32,
            shape: vec![1, 3],
            data,
        }),
    )]);
    assert_eq!(
        run_one(&kernel, inputs, "y"),
        vec![1.0, 1.0 + 4.0 * half_ulp, 65504.0]
    );
}

#[test]
fn evaluate_rejects_bad_inputs_with_the_tensor_name() {
    let layout = GptqLayout::new(GroupSize::Rows(32), ZeroPoint::V2);
    let kernel = gemv_kernel(WeightFormat::Gptq(layout), 64, 8, 1);
    let (w, x) = (
        kernel.buffer_by_name("w").unwrap(),
        kernel.buffer_by_name("x").unwrap(),
    );
    let mut r = rng(15);
    let good = random_gptq(&mut r, 64, 8, &layout);
    let xs = f16_values(&mut r, 64, 1.0);
    let with = |wd: HostData, xd: HostData| BTreeMap::from([(w, wd), (x, xd)]);

    let err = evaluate(&kernel, &[]).unwrap_err();
    assert!(
        matches!(
            err,
            EvalError::RankCount {
                expected: 1,
                found: 0
            }
        ),
        "{err}"
    );

    let err = evaluate(
        &kernel,
        &[BTreeMap::from([(w, HostData::Int4(good.clone()))])],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("`x`") && err.to_string().contains("no data"),
        "{err}"
    );

    let short = PackedInt4 {
        qweight: good.qweight[1..].to_vec(),
        ..good.clone()
    };
    let err = evaluate(
        &kernel,
        &[with(HostData::Int4(short), tensor(vec![1, 64], xs.clone()))],
    )
    .unwrap_err();
    assert!(err.to_string().contains("qweight"), "{err}");

    let mut not_f16 = xs.clone();
    not_f16[3] = 0.1; // 0.1 is not an FP16 value
    let err = evaluate(
        &kernel,
        &[with(
            HostData::Int4(good.clone()),
            tensor(vec![1, 64], not_f16),
        )],
    )
    .unwrap_err();
    assert!(err.to_string().contains("index 3"), "{err}");

    let mut nan = xs.clone();
    nan[0] = f64::NAN;
    let err = evaluate(
        &kernel,
        &[with(HostData::Int4(good.clone()), tensor(vec![1, 64], nan))],
    )
    .unwrap_err();
    assert!(err.to_string().contains("not a finite"), "{err}");

    let act = GptqLayout {
        act_order: true,
        ..layout
    };
    let kernel2 = gemv_kernel(WeightFormat::Gptq(act), 64, 8, 1);
    let bad_gidx = PackedInt4 {
        g_idx: Some(vec![2; 64]),
        ..good.clone()
    };
    let inputs = BTreeMap::from([
        (
            kernel2.buffer_by_name("w").unwrap(),
            HostData::Int4(bad_gidx),
        ),
        (
            kernel2.buffer_by_name("x").unwrap(),
            tensor(vec![1, 64], xs),
        ),
    ]);
    let err = evaluate(&kernel2, &[inputs]).unwrap_err();
    assert!(err.to_string().contains("g_idx[0] = 2"), "{err}");
}
