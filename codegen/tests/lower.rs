//! Lowering the kernel set: every kernel at every TP size and both targets, validated after each
//! pass; and small shapes run on a lockstep interpreter against the f64 reference.

mod lower_interp;
mod lower_kernels;

use std::collections::BTreeMap;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::reference::{HostData, HostTensor, PackedInt4, RankInputs, evaluate};
use wavefuse_codegen::ir::{
    BufferType, GptqLayout, GroupSize, Kernel, Role, ScalarType, WeightFormat, ZeroPoint,
};
use wavefuse_codegen::lower::{
    AllreduceProtocol, Int4Dot, MmaScale, Schedule, lower, lower_structured,
};
use wavefuse_codegen::lowered::validate::validate;
use wavefuse_codegen::lowered::{LoweredKernel, ParamKind, Purpose};

use lower_interp::{Machine, V};
use lower_kernels::{NAMES, Shapes, TP_SIZES, build};

#[test]
fn every_kernel_lowers_and_validates_after_each_pass() {
    for name in NAMES {
        for tp in TP_SIZES {
            for batch in [1, 8] {
                for arch in Arch::ALL {
                    let k = build(name, &Shapes::qwen27b(tp, batch));
                    for protocol in [AllreduceProtocol::Pull, AllreduceProtocol::Push] {
                        let s = Schedule::default_for(arch, &k).with_protocol(protocol);
                        let what = format!("{name} tp={tp} batch={batch} {arch} {protocol:?}");
                        let structured = lower_structured(&k, arch, &s)
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                        validate(&structured)
                            .unwrap_or_else(|e| panic!("{what} (structured): {e}\n{structured}"));
                        let expanded =
                            lower(&k, arch, &s).unwrap_or_else(|e| panic!("{what}: {e}"));
                        validate(&expanded)
                            .unwrap_or_else(|e| panic!("{what} (expanded): {e}\n{expanded}"));
                    }
                }
            }
        }
    }
}

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        (0..4).map(|_| self.uniform()).sum::<f64>() * 1.7 - 3.4
    }
}

fn f16s(shape: Vec<usize>, data: Vec<f64>) -> HostTensor {
    HostTensor::rounded(ScalarType::F16, shape, data)
}

/// Random inputs for one rank.
fn inputs(k: &Kernel, rng: &mut Rng) -> RankInputs {
    let mut out = BTreeMap::new();
    for b in k.inputs() {
        let d = k.buffer(b).unwrap();
        let data = match d.local_type() {
            BufferType::Tensor(t) => {
                let vals = (0..t.len()).map(|_| rng.normal()).collect();
                HostData::Tensor(f16s(t.shape.clone(), vals))
            }
            BufferType::Weight(w) => match w.format {
                WeightFormat::F16 => {
                    let vals = (0..w.k * w.n).map(|_| rng.normal() * 0.05).collect();
                    HostData::F16Weight(f16s(vec![w.n * w.k], vals).data)
                }
                WeightFormat::Gptq(l) => {
                    let groups = w.k / l.group.rows(w.k);
                    let qweight = (0..w.k / 8 * w.n)
                        .map(|_| rng.next() as u32 as i32)
                        .collect();
                    let scales = (0..groups * w.n)
                        .map(|_| 0.002 + 0.01 * rng.uniform())
                        .collect();
                    let scales = f16s(vec![groups * w.n], scales).data;
                    let qzeros = if l.zero == ZeroPoint::Symmetric {
                        vec![]
                    } else {
                        (0..groups * w.n / 8)
                            .map(|_| rng.next() as u32 as i32)
                            .collect()
                    };
                    HostData::Int4(PackedInt4 {
                        qweight,
                        scales,
                        qzeros,
                        g_idx: None,
                    })
                }
                WeightFormat::Awq(_) => unreachable!(),
            },
        };
        out.insert(b, data);
    }
    out
}

fn vals(ty: wavefuse_codegen::lowered::Ty, data: impl Iterator<Item = f64>) -> Vec<V> {
    use wavefuse_codegen::lowered::Ty;
    data.map(|x| match ty {
        Ty::F16 => V::F16(x as f32),
        Ty::F32 => V::F32(x as f32),
        other => panic!("dense {other:?}"),
    })
    .collect()
}

/// Copy one rank's inputs into the machine's arrays and set its scalars.
fn bind(m: &mut Machine, op: &Kernel, rank: usize, epoch: u32, inp: &RankInputs) {
    let lk: &LoweredKernel = m.k;
    for (p, d) in lk.params.iter() {
        let i = p.as_u32() as usize;
        match &d.kind {
            ParamKind::Scalar {
                purpose: Purpose::Rank,
                ..
            } => m.ranks[rank].scalars[i] = Some(V::U32(rank as u32)),
            ParamKind::Scalar {
                purpose: Purpose::Epoch,
                ..
            } => m.ranks[rank].scalars[i] = Some(V::U32(epoch)),
            ParamKind::Array {
                elem,
                purpose: Purpose::Data { buffer, part },
                ..
            } => {
                let b = op.buffer_by_name(buffer).unwrap();
                if op.buffer(b).unwrap().role == Role::Output {
                    continue;
                }
                let arr = match (&inp[&b], *part) {
                    (HostData::Tensor(t), "data") => vals(*elem, t.data.iter().copied()),
                    (HostData::F16Weight(w), "data") => vals(*elem, w.iter().copied()),
                    (HostData::Int4(p), "qweight") => {
                        p.qweight.iter().map(|&q| V::U32(q as u32)).collect()
                    }
                    (HostData::Int4(p), "qzeros") => {
                        p.qzeros.iter().map(|&q| V::U32(q as u32)).collect()
                    }
                    (HostData::Int4(p), "scales") => vals(*elem, p.scales.iter().copied()),
                    (_, part) => panic!("part {part}"),
                };
                assert_eq!(arr.len(), m.ranks[rank].arrays[i].len(), "{buffer}.{part}");
                m.ranks[rank].arrays[i] = arr;
            }
            _ => {}
        }
    }
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(1e-30)).sqrt()
}

/// Lower `k`, run two launches (epochs 1 and 2, fresh inputs) on the interpreter, and compare
/// every output of every rank with the reference.
fn check_numerics(k: &Kernel, arch: Arch, s: &Schedule, tol: f64) {
    let lk = lower(k, arch, s).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    let mut m = Machine::new(&lk);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(k.tp()));
    for epoch in 1..=2 {
        let mut ins: Vec<RankInputs> = (0..k.tp()).map(|_| inputs(k, &mut rng)).collect();
        // Replicated inputs are the same on every rank.
        for b in k.inputs() {
            if k.buffer(b).unwrap().sharding == wavefuse_codegen::ir::Sharding::Replicated {
                let first = ins[0][&b].clone();
                for r in &mut ins[1..] {
                    r.insert(b, first.clone());
                }
            }
        }
        for (rank, inp) in ins.iter().enumerate() {
            bind(&mut m, k, rank, epoch, inp);
        }
        // Poison outputs before each launch so unwritten elements are caught.
        for rank in 0..k.tp() as usize {
            for (p, d) in lk.params.iter() {
                if let ParamKind::Array {
                    access: wavefuse_codegen::lowered::Access::Write,
                    elem,
                    ..
                } = &d.kind
                {
                    for v in &mut m.ranks[rank].arrays[p.as_u32() as usize] {
                        *v = V::poison(*elem);
                    }
                }
            }
        }
        m.launch()
            .unwrap_or_else(|e| panic!("{} epoch {epoch}: {e}", k.name()));
        let want = evaluate(k, &ins).expect("reference");
        for (rank, want) in want.iter().enumerate() {
            for b in k.outputs() {
                let name = &k.buffer(b).unwrap().name;
                let p = lk.params.iter().find(|(_, d)| d.name == *name).unwrap().0;
                let got: Vec<f64> = m.ranks[rank].arrays[p.as_u32() as usize]
                    .iter()
                    .map(|v| v.f())
                    .collect();
                let w = &want[&b].data;
                assert!(
                    got.iter().all(|x| x.is_finite()),
                    "{} {arch} rank {rank} `{name}`: unwritten or non-finite",
                    k.name()
                );
                let err = rel_l2(&got, w);
                assert!(
                    err <= tol,
                    "{} {arch} tp={} rank {rank} epoch {epoch} `{name}`: rel L2 {err:e} > {tol:e}",
                    k.name(),
                    k.tp()
                );
            }
        }
        for b in k.outputs() {
            if k.buffer(b).unwrap().sharding == wavefuse_codegen::ir::Sharding::Replicated
                && k.tp() > 1
            {
                let p = lk
                    .params
                    .iter()
                    .find(|(_, d)| d.name == k.buffer(b).unwrap().name)
                    .unwrap()
                    .0;
                let first = &m.ranks[0].arrays[p.as_u32() as usize];
                for rank in 1..k.tp() as usize {
                    assert!(
                        &m.ranks[rank].arrays[p.as_u32() as usize] == first,
                        "{}: replicated output differs on rank {rank}",
                        k.name()
                    );
                }
            }
        }
        let err = lk
            .error_word
            .map(|p| m.ranks[0].arrays[p.as_u32() as usize][0]);
        assert!(
            matches!(err, None | Some(V::U32(0))),
            "error word set: {err:?}"
        );
    }
}

fn small(tp: u32, batch: usize) -> Shapes {
    Shapes {
        hidden: 256,
        ffn: 512,
        q_gate: 384,
        kv: 128,
        head_dim: 32,
        ..Shapes::qwen27b(tp, batch)
    }
}

fn numerics_for(arch: Arch) {
    for name in NAMES {
        for tp in [1, 2, 4] {
            for batch in [1, 3] {
                let k = build(name, &small(tp, batch));
                let tol = if name == "allreduce_int8" { 5e-3 } else { 2e-3 };
                for protocol in [AllreduceProtocol::Pull, AllreduceProtocol::Push] {
                    let s = Schedule::default_for(arch, &k).with_protocol(protocol);
                    check_numerics(&k, arch, &s, tol);
                }
            }
        }
    }
}

#[test]
fn kernel_set_matches_reference_on_interpreter_gfx906() {
    numerics_for(Arch::Gfx906);
}

#[test]
fn kernel_set_matches_reference_on_interpreter_sm90() {
    numerics_for(Arch::Sm90);
}

/// Split-K with a last-arriver finish: every GPTQ GEMV kernel of the set, both targets, 1, 2 and
/// 4 K parts, with and without the activations staged in LDS, batch 1 and 3, and a tail tile (N = 200), and the fused kernel at TP 1, 2, 4, two launches (epochs 1 and 2 on the same
/// counters) against the f64 reference. The interpreter runs workgroups one after another, so
/// the last workgroup of each tile is the last arriver; the simulator (`harness/tests/
/// sim_splitk.rs`) covers the interleavings.
#[test]
fn split_k_matches_reference_on_interpreter() {
    for name in ["gemv_int4", "gemv_int4_dual_silu", "gemv_int4_qkv"] {
        for (ffn, batch) in [(512, 1), (200, 3)] {
            let shapes = Shapes {
                ffn,
                ..small(1, batch)
            };
            let k = build(name, &shapes);
            for arch in Arch::ALL {
                for parts in [1, 2, 4] {
                    // Activations staged in LDS (the tensor-core path only) and streamed weight
                    // loads (a cache hint) with and without split-K.
                    for (x_in_lds, stream_weights) in [(false, false), (true, true)] {
                        let s = Schedule {
                            k_split: parts,
                            k_unit_words: 4,
                            x_in_lds,
                            stream_weights,
                            ..Schedule::default_for(arch, &k)
                        };
                        check_numerics(&k, arch, &s, 2e-3);
                    }
                }
            }
        }
    }
    // Five parts, the balanced split of the sm_90 default at TP > 1 (K = 640: 20 units of 4
    // words, 4 per part; 5 units of 16 words, 1 per part).
    for name in ["gemv_int4", "gemv_int4_qkv"] {
        for batch in [1, 3] {
            let k = build(
                name,
                &Shapes {
                    hidden: 640,
                    ..small(2, batch)
                },
            );
            for arch in Arch::ALL {
                for unit in [4, 16] {
                    let s = Schedule {
                        k_split: 5,
                        k_unit_words: unit,
                        ..Schedule::default_for(arch, &k)
                    };
                    check_numerics(&k, arch, &s, 2e-3);
                }
            }
        }
    }
    // The fused kernel: only each tile's last arriver publishes, waits, normalises; every
    // workgroup passes the grid barrier. Hidden 200 leaves a tail tile.
    for (tp, batch, hidden) in [(1, 1, 256), (2, 3, 200), (4, 1, 256)] {
        let shapes = Shapes {
            hidden,
            ..small(tp, batch)
        };
        let k = build("gemv_int4_allreduce_rmsnorm", &shapes);
        for arch in Arch::ALL {
            for parts in [2, 4] {
                let s = Schedule {
                    k_split: parts,
                    k_unit_words: 4,
                    x_in_lds: true,
                    ..Schedule::default_for(arch, &k)
                };
                check_numerics(&k, arch, &s, 2e-3);
            }
        }
    }
}

#[test]
fn tails_and_zero_point_conventions_match_reference() {
    for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
        for group in [
            GroupSize::Rows(32),
            GroupSize::Rows(128),
            GroupSize::PerChannel,
        ] {
            let gptq = GptqLayout::new(group, zero);
            // N = 200 is not a multiple of the 32-column tile; hidden 384 not of the 512-column one.
            let s = Shapes {
                hidden: 384,
                ffn: 200,
                gptq,
                ..small(1, 2)
            };
            for name in [
                "gemv_int4",
                "gemv_int4_dual_silu",
                "allreduce_residual_rmsnorm",
            ] {
                check_numerics(
                    &build(name, &s),
                    Arch::Gfx906,
                    &Schedule::default_for(Arch::Gfx906, &build(name, &s)),
                    2e-3,
                );
            }
        }
    }
}

#[test]
fn wider_words_and_more_accumulators_match_reference() {
    let k = build("gemv_int4", &small(2, 2));
    for (v, a) in [(2, 1), (4, 2), (8, 4)] {
        let mut s = Schedule::default_for(Arch::Sm90, &k);
        s.int4_dot = wavefuse_codegen::lower::Int4Dot::Fma;
        s.words_per_iteration = v;
        s.accumulators = a;
        s.columns_per_workgroup = 32 * v;
        check_numerics(&k, Arch::Sm90, &s, 2e-3);
    }
}

/// Every INT4 decode x scaling x unit size, with wide words and several chains, on a tail shape
/// (N = 200 is not a multiple of the tile) and every zero-point convention, against the f64
/// reference: the magic-number decode and the per-unit fold are exact rewrites of
/// `(q − z)·s·x`, so they must meet the same tolerance as the per-weight form.
#[test]
fn int4_decodes_scalings_and_units_match_reference() {
    use wavefuse_codegen::lower::{Int4Scaling, LowerError, NibbleDecode};
    for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
        let s = Shapes {
            hidden: 384,
            ffn: 200,
            gptq: GptqLayout::new(GroupSize::Rows(128), zero),
            ..small(1, 2)
        };
        for name in ["gemv_int4", "gemv_int4_dual_silu"] {
            let k = build(name, &s);
            for arch in Arch::ALL {
                for decode in [NibbleDecode::Convert, NibbleDecode::Magic] {
                    for scaling in [Int4Scaling::PerWeight, Int4Scaling::PerUnit] {
                        for (unit, v, accs) in [(16, 1, 2), (4, 2, 1), (1, 4, 2), (8, 1, 4)] {
                            let mut sc = Schedule::default_for(arch, &k);
                            sc.k_split = 1;
                            sc.int4_dot = wavefuse_codegen::lower::Int4Dot::Fma;
                            sc.nibble_decode = decode;
                            sc.int4_scaling = scaling;
                            sc.k_unit_words = unit;
                            sc.words_per_iteration = v;
                            sc.accumulators = accs;
                            sc.columns_per_workgroup = 8 * v;
                            sc.threads_per_column = sc.workgroup_size / 8;
                            check_numerics(&k, arch, &sc, 2e-3);
                        }
                    }
                }
            }
        }
    }
    // A unit that does not divide the group is a schedule error, not a panic.
    let k = build("gemv_int4", &small(1, 1));
    let mut sc = Schedule::default_for(Arch::Sm90, &k);
    sc.k_unit_words = 3;
    assert!(matches!(
        lower(&k, Arch::Sm90, &sc),
        Err(LowerError::Schedule(_))
    ));
}

/// The tensor-core INT4 GEMV (`int4_dot = mma`): every zero-point convention, the kernels with
/// one and two weights and with the allreduce epilogue, batch 1, 3 and 8, a tail tile (N = 200),
/// one and two column warps per workgroup, units of 4, 8 and 16 K-words, both pipeline depths,
/// the activations from global memory and staged in LDS, both nibble decodes (`MmaDecode`), (the pipelined loop's odd unit counts included: 3 groups over 2 or 8 slices), against the f64
/// reference through the interpreter's independent model of the PTX fragment layout.
#[test]
fn int4_mma_matches_reference() {
    use wavefuse_codegen::lower::{Int4Dot, LowerError, MmaDecode};
    let mma = |k: &Kernel, cols: u32, unit: u32, depth: u32, x_in_lds: bool| {
        let mut sc = Schedule::default_for(Arch::Sm90, k);
        sc.k_split = 1;
        sc.x_in_lds = x_in_lds;
        sc.pipeline_depth = depth;
        sc.int4_dot = Int4Dot::Mma;
        sc.words_per_iteration = 4;
        sc.columns_per_workgroup = cols;
        sc.threads_per_column = sc.workgroup_size / cols;
        sc.k_unit_words = unit;
        sc
    };
    for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
        for batch in [1, 3, 8] {
            let s = Shapes {
                hidden: 384,
                ffn: 200,
                gptq: GptqLayout::new(GroupSize::Rows(128), zero),
                ..small(1, batch)
            };
            for name in ["gemv_int4", "gemv_int4_dual_silu"] {
                let k = build(name, &s);
                for (cols, unit, depth, xs) in [
                    (32, 16, 1, true),
                    (64, 4, 2, false),
                    (32, 8, 2, true),
                    (32, 4, 1, false),
                    (64, 8, 1, true),
                ] {
                    for decode in [MmaDecode::Shift, MmaDecode::Fma] {
                        let sc = Schedule {
                            mma_decode: decode,
                            ..mma(&k, cols, unit, depth, xs)
                        };
                        check_numerics(&k, Arch::Sm90, &sc, 2e-3);
                    }
                }
            }
        }
    }
    for name in ["gemv_int4_allreduce_rmsnorm", "gemv_int4_qkv"] {
        for tp in [1, 2] {
            let k = build(name, &small(tp, 3));
            for xs in [false, true] {
                check_numerics(&k, Arch::Sm90, &mma(&k, 32, 16, 2, xs), 2e-3);
            }
        }
    }
    // No tensor-core MMA in a 64-lane wave: a schedule error, not a panic.
    let k = build("gemv_int4", &small(1, 1));
    let sc = mma(&k, 32, 16, 1, false);
    assert!(matches!(
        lower(&k, Arch::Gfx906, &sc),
        Err(LowerError::Schedule(_))
    ));
}

/// Past batch 8 the tensor-core GEMV takes the batch as N tiles of 8 rows sharing each decoded A
/// fragment (issue 40): at batch 9 (a tile of one row) and 24 (three full tiles), with a tail
/// tile of columns (N = 200), one and two weights, zero points stored and symmetric, staged and
/// unstaged activations and both pipeline depths, against the f64 reference through the
/// interpreter's independent model of the PTX fragment layout (relative L2 ≤ 2e-3, as above).
#[test]
fn int4_mma_n_tiles_match_reference() {
    use wavefuse_codegen::lower::{Int4Dot, MmaDecode};
    for zero in [ZeroPoint::V1, ZeroPoint::Symmetric] {
        for batch in [9, 24] {
            let s = Shapes {
                hidden: 384,
                ffn: 200,
                gptq: GptqLayout::new(GroupSize::Rows(128), zero),
                ..small(1, batch)
            };
            for name in ["gemv_int4", "gemv_int4_dual_silu"] {
                let k = build(name, &s);
                for (cols, unit, depth, xs) in [(32, 16, 1, true), (64, 4, 2, false)] {
                    let mut sc = Schedule::default_for(Arch::Sm90, &k);
                    sc.k_split = 1;
                    sc.x_in_lds = xs;
                    sc.pipeline_depth = depth;
                    sc.int4_dot = Int4Dot::Mma;
                    sc.mma_decode = MmaDecode::Fma;
                    sc.words_per_iteration = 4;
                    sc.columns_per_workgroup = cols;
                    sc.threads_per_column = sc.workgroup_size / cols;
                    sc.k_unit_words = unit;
                    check_numerics(&k, Arch::Sm90, &sc, 2e-3);
                }
            }
        }
    }
}

#[test]
fn int4_unit_must_divide_the_group() {
    use wavefuse_codegen::lower::LowerError;
    let k = build("gemv_int4", &small(1, 1));
    let mut sc = Schedule::default_for(Arch::Sm90, &k);
    sc.k_unit_words = 3;
    assert!(matches!(
        lower(&k, Arch::Sm90, &sc),
        Err(LowerError::Schedule(_))
    ));
}

/// A replicated GEMV with a residual epilogue and two outputs (the sum and the bare product).
fn gemv_residual(format: WeightFormat, batch: usize) -> Kernel {
    use wavefuse_codegen::ir::{Builder, Parallelism, Sharding, Tensor, Weight};
    let (k, n) = (256, 136);
    let f16 = |f| Tensor::activation(ScalarType::F16, batch, f);
    let mut b = Builder::new("gemv_residual", 1);
    let w = b.input("w", Weight { format, k, n }, Sharding::Replicated);
    let x = b.input("x", f16(k), Sharding::Replicated);
    let r = b.input("residual", f16(n), Sharding::Replicated);
    let y = b.output("y", f16(n), Sharding::Replicated);
    let bare = b.output("bare", f16(n), Sharding::Replicated);
    let xv = b.load(x);
    let acc = b.gemv(w, xv, Parallelism::Replicated);
    let rv = b.load(r);
    let sum = b.add(acc, rv);
    let s16 = b.round_f16(sum);
    b.store(s16, y);
    let a16 = b.round_f16(acc);
    b.store(a16, bare);
    b.finish()
}

#[test]
fn residual_epilogue_with_two_outputs_matches_reference() {
    let gptq = WeightFormat::Gptq(GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V2));
    for format in [gptq, WeightFormat::F16] {
        for arch in Arch::ALL {
            let k = gemv_residual(format, 2);
            check_numerics(&k, arch, &Schedule::default_for(arch, &k), 2e-3);
        }
    }
}

#[test]
fn unsupported_patterns_are_errors_not_panics() {
    use wavefuse_codegen::ir::AwqLayout;
    use wavefuse_codegen::lower::LowerError;
    let awq = WeightFormat::Awq(AwqLayout {
        group: GroupSize::Rows(64),
        scale: ScalarType::F16,
    });
    let act_order = WeightFormat::Gptq(GptqLayout {
        act_order: true,
        ..GptqLayout::new(GroupSize::Rows(64), ZeroPoint::V2)
    });
    for format in [awq, act_order] {
        let k = gemv_residual(format, 1);
        let err = lower(&k, Arch::Gfx906, &Schedule::default_for(Arch::Gfx906, &k)).unwrap_err();
        assert!(matches!(err, LowerError::Unsupported(_)), "{err}");
    }
    // Split-K: kernels without a GEMV and FP16 GEMVs are refused, and a part count that does
    // not divide the K units is a schedule error.
    for name in ["allreduce_residual_rmsnorm", "gemv_f16"] {
        let k = build(name, &small(2, 1));
        let s = Schedule {
            k_split: 2,
            ..Schedule::default_for(Arch::Gfx906, &k)
        };
        let err = lower(&k, Arch::Gfx906, &s).unwrap_err();
        assert!(matches!(err, LowerError::Unsupported(_)), "{name}: {err}");
    }
    let k = build("gemv_int4", &small(1, 1));
    let s = Schedule {
        k_split: 3,
        ..Schedule::default_for(Arch::Gfx906, &k)
    };
    let err = lower(&k, Arch::Gfx906, &s).unwrap_err();
    assert!(matches!(err, LowerError::Schedule(_)), "{err}");
    let s = Schedule {
        threads_per_column: 3,
        ..Schedule::default_for(Arch::Gfx906, &k)
    };
    assert!(matches!(
        lower(&k, Arch::Gfx906, &s),
        Err(LowerError::Schedule(_))
    ));
}

/// sm_90 at batch 9–16: a GEMV alone takes units of 8 K-words with the K parts the split chose for
/// units of 16 (the schedule measured on an H100: 36.3 -> 28.6 us at 5120 -> 17408 batch 16,
/// bench/results/2026-12-06-h100-phased-tune); batch 8 and 17, the fused kernel and the
/// two-weight GEMV keep what they had.
#[test]
fn sm90_gemv_alone_at_batch_9_to_16_takes_units_of_8() {
    let s = |kernel: &str, tp: u32, batch: usize| {
        Schedule::default_for(Arch::Sm90, &build(kernel, &Shapes::qwen27b(tp, batch)))
    };
    for batch in [9, 16] {
        let (got, at8, at17) = (
            s("gemv_int4", 1, batch),
            s("gemv_int4", 1, 8),
            s("gemv_int4", 1, 17),
        );
        assert_eq!(got.int4_dot, Int4Dot::Mma);
        assert_eq!(got.k_unit_words, 8, "batch {batch}: {got:?}");
        // Batch 8 keeps units of 16; batch 17 is the next regime of `whole_rounds` (units of
        // 8 with the scale on the weights).
        assert_eq!(
            (at8.k_unit_words, at17.k_unit_words, at17.mma_scale),
            (16, 8, MmaScale::Weight)
        );
        // No K split at 5120 -> 17408: 544 tiles fit one round of 6 workgroups per SM
        // (`whole_rounds`; 28.66 -> 25.34 us against 2 parts, bench/results/2026-12-07-gpu-round-rules).
        assert_eq!(got.k_split, 1, "{got:?}");
        assert_eq!(s("gemv_int4_qkv", 1, batch).k_unit_words, 8);
    }
    assert_ne!(s("gemv_int4_allreduce_rmsnorm", 1, 16).k_unit_words, 8);
    assert_eq!(
        s("gemv_int4_dual_silu", 1, 16).k_unit_words,
        s("gemv_int4_dual_silu", 1, 8).k_unit_words
    );
}

/// sm_90, a GEMV alone at batch 57–64 (eight N tiles), `whole_rounds`: at K up to 8192 the
/// 64-column tile (two K warps) staged in phases of one unit per K warp, the scale on the
/// weights, the most K parts that keep the grid within one round of 3 workgroups per SM with an
/// even count of units per part, in units of 16 K-words where they allow as many parts as
/// units of 8 — no split at 5120 -> 17408 (272 tiles; units of 16), 5 parts at one TP 4 rank's
/// 5120 -> 4352 (68 tiles; units of 16), 2 at 4352 -> 5120 (80 tiles, units of 8: 68 units, 4
/// parts leave 17; of 16, 2 parts leave 17); past it (17408 -> 5120) the 128-column tile of
/// `wide_phased` with units of 16 in 8 parts. The measured schedules
/// (bench/results/2026-12-07-gpu-round-rules, …-tune-new-space); each lowers within the static
/// LDS. Batch 32, the fused and the two-weight kernels keep what they had.
#[test]
fn sm90_gemv_alone_at_batch_57_to_64_fits_one_round() {
    let at = |kernel: &str, shapes: &Shapes| {
        (
            build(kernel, shapes),
            Schedule::default_for(Arch::Sm90, &build(kernel, shapes)),
        )
    };
    let shaped = |hidden: usize, ffn: usize, tp: u32, batch: usize| Shapes {
        hidden,
        ffn,
        ..Shapes::qwen27b(tp, batch)
    };
    for (shapes, form) in [
        (Shapes::qwen27b(1, 64), (64, 2, 16, 2, 1)),
        (Shapes::qwen27b(1, 57), (64, 2, 16, 2, 1)),
        (Shapes::qwen27b(4, 64), (64, 2, 16, 2, 5)),
        (shaped(4352, 5120, 1, 64), (64, 2, 8, 2, 2)),
        (shaped(17408, 5120, 1, 64), (128, 1, 16, 1, 8)),
    ] {
        let (ir, s) = at("gemv_int4", &shapes);
        assert_eq!(
            (
                s.int4_dot,
                s.workgroup_size,
                s.x_in_lds,
                s.mma_scale,
                s.pipeline_depth,
            ),
            (Int4Dot::Mma, 128, true, MmaScale::Weight, 1),
            "{shapes:?}: {s:?}"
        );
        assert_eq!(
            (
                s.columns_per_workgroup,
                s.threads_per_column,
                s.k_unit_words,
                s.x_phase_units,
                s.k_split
            ),
            form,
            "{shapes:?}: {s:?}"
        );
        let lowered = lower(&ir, Arch::Sm90, &s).expect("lowers");
        let lds: usize = lowered.lds.values().map(|d| d.len * d.elem.bytes()).sum();
        assert!(lds <= 48 * 1024, "{lds} bytes of LDS");
    }
    assert_ne!(at("gemv_int4", &Shapes::qwen27b(1, 32)).1.x_phase_units, 2);
    for kernel in ["gemv_int4_allreduce_rmsnorm", "gemv_int4_dual_silu"] {
        let s = at(kernel, &Shapes::qwen27b(1, 64)).1;
        assert!(
            s.columns_per_workgroup != 64 && s.columns_per_workgroup != 128,
            "{kernel}: {s:?}"
        );
    }
}

/// sm_90, `gemv_int4` alone at batch 2–4 and 17–32 (`whole_rounds`): at batch 2 and 4 the K
/// parts raised from 2 to 5 at 5120 -> 17408 (1088 workgroups were a last round of 32 past the
/// 1056 an H100 holds at 64 registers; 2720 are 2.6 rounds), unchanged where the fill's parts
/// already leave the last round at least half full (17408 -> 5120: 4 parts, one TP 4 rank: 5);
/// at batch 17–32 units of 8 with the scale on the weights in the most K parts within one round
/// of 5 per SM (5120 -> 17408: none, 17408 -> 5120 and the TP 4 rank: 4) — the measured
/// schedules (bench/results/2026-12-07-gpu-round-rules); batch 1 and 8 keep theirs.
#[test]
fn sm90_gemv_alone_fits_whole_rounds_at_batch_2_to_4_and_17_to_32() {
    let s = |hidden: usize, ffn: usize, tp: u32, batch: usize| {
        let shapes = Shapes {
            hidden,
            ffn,
            ..Shapes::qwen27b(tp, batch)
        };
        Schedule::default_for(Arch::Sm90, &build("gemv_int4", &shapes))
    };
    for batch in [2, 4] {
        let got = s(5120, 17408, 1, batch);
        assert_eq!(
            (got.k_unit_words, got.k_split),
            (16, 5),
            "batch {batch}: {got:?}"
        );
        assert_eq!(s(17408, 5120, 1, batch).k_split, 4);
        assert_eq!(s(5120, 17408, 4, batch).k_split, 5);
    }
    assert_eq!(s(5120, 17408, 1, 1).k_split, 2);
    for (hidden, ffn, tp, parts) in [
        (5120, 17408, 1, 1),
        (17408, 5120, 1, 4),
        (5120, 17408, 4, 4),
    ] {
        let got = s(hidden, ffn, tp, 32);
        assert_eq!(
            (got.k_unit_words, got.mma_scale, got.k_split),
            (8, MmaScale::Weight, parts),
            "{hidden} -> {ffn} tp {tp}: {got:?}"
        );
    }
}

/// sm_90 stages a K part's activations in LDS only when the staged grid stays one wave (or must be
/// co-resident anyway): measured on the H200, bench/results/2026-12-03-h200-stage-limit.
#[test]
fn sm90_stages_activations_only_where_the_grid_stays_one_wave() {
    let staged = |kernel: &str, tp: u32, batch: usize| {
        Schedule::default_for(Arch::Sm90, &build(kernel, &Shapes::qwen27b(tp, batch))).x_in_lds
    };
    // 1088 and 896 workgroups: staged (45 KB each) 5 fit per SM, unstaged 9. Unstaged measured
    // 24.6 -> 21.1 and 22.1 -> 16.2 us.
    assert!(!staged("gemv_int4", 1, 8));
    assert!(!staged("gemv_int4_qkv", 1, 8));
    // 544 workgroups fit staged: staged 14.4, unstaged 16.5 us.
    assert!(staged("gemv_int4", 2, 8));
    // A grid stage keeps the grid co-resident anyway: staged 22.8 / 32.7, unstaged 32.4 / 38.0 us.
    assert!(staged("gemv_int4_allreduce_rmsnorm", 1, 4));
    assert!(staged("gemv_int4_allreduce_rmsnorm", 8, 8));
    // Batch 1 and 4 at TP 1: small parts, the grid fits either way.
    assert!(staged("gemv_int4", 1, 1));
    assert!(staged("gemv_int4", 1, 4));
}

#[test]
fn schedule_defaults_per_target() {
    let int4 = build("gemv_int4", &Shapes::qwen27b(4, 1));
    let f16 = build("gemv_f16", &Shapes::qwen27b(4, 1));
    let int8 = build("allreduce_int8", &Shapes::qwen27b(4, 1));
    let dual = build("gemv_int4_dual_silu", &Shapes::qwen27b(4, 1));
    for arch in Arch::ALL {
        let s = Schedule::default_for(arch, &int4);
        // gfx906: the dot2 floor path, 32 K slices of 8 lanes x 4 packed columns, units of 4
        // K-words, activations (10 KB) in LDS, one workgroup per tile; sm90: 4
        // K-slicing warps of 16-byte loads on the tensor cores, whole-group units (4 K-words
        // with two weights), split-K with every K warp the same units (K = 5120 is 40 units:
        // 5 parts of 2 per warp at TP 4, 2 parts of 5 at TP 1, below), activations staged in
        // LDS, streamed weight loads.
        let (wg, slices, v, dot, unit) = if arch.has_fp16_mma() {
            (128, 4, 4, wavefuse_codegen::lower::Int4Dot::Mma, 16)
        } else {
            (256, 32, 4, wavefuse_codegen::lower::Int4Dot::Dot2, 4)
        };
        let sm90 = arch.has_fp16_mma();
        assert_eq!(
            (s.k_split, s.x_in_lds, s.stream_weights),
            if sm90 {
                (5, true, true)
            } else {
                (1, true, false)
            }
        );
        assert_eq!(s.byte_offsets, !sm90);
        assert_eq!(
            (
                s.workgroup_size,
                s.columns_per_workgroup,
                s.threads_per_column,
                s.words_per_iteration,
                s.int4_dot,
                s.k_unit_words
            ),
            (wg, 32, slices, v, dot, unit)
        );
        // TP 1 without a grid stage: the fewest parts that give every K warp the same units (K =
        // 5120: 40 units, 2 parts of 5 per warp); with a grid stage (the fused kernel, K = 17408:
        // 136 units) the largest of 4 and 2 that divides them; the dual kernel's 80 units of 8
        // words already split evenly in 4 parts.
        let tp1 = Schedule::default_for(arch, &build("gemv_int4", &Shapes::qwen27b(1, 1)));
        let fused1 = Schedule::default_for(
            arch,
            &build("gemv_int4_allreduce_rmsnorm", &Shapes::qwen27b(1, 1)),
        );
        let dual1 =
            Schedule::default_for(arch, &build("gemv_int4_dual_silu", &Shapes::qwen27b(1, 1)));
        // gfx906 splits K only where the activations do not fit the floor path's 16 KiB LDS
        // stage (issue 19): the fused kernel at TP 1 (34.8 KB) in 4 parts of 128-column tiles,
        // at TP 2 (17.4 KB) in 2 parts of 64 columns, so a part's activations are staged (8.7
        // KB) and the grid stays 160 co-resident workgroups; at TP 4 (8.7 KB) it needs no split.
        // Before, it read them unstaged: 2.09 VALU per weight at 65 VGPRs, occupancy 3; now 1.83
        // (TP 1) / 1.85 (TP 2) at 62 VGPRs, occupancy 4 (hipcc, tests/tests/hip.rs).
        assert_eq!(
            (tp1.k_split, fused1.k_split, dual1.k_split),
            if sm90 { (2, 4, 4) } else { (1, 4, 1) }
        );
        if !sm90 {
            let fused = |tp| {
                let s = Schedule::default_for(
                    arch,
                    &build("gemv_int4_allreduce_rmsnorm", &Shapes::qwen27b(tp, 1)),
                );
                (
                    s.k_split,
                    s.columns_per_workgroup,
                    s.threads_per_column,
                    s.x_in_lds,
                )
            };
            assert_eq!(fused(1), (4, 128, 8, true));
            assert_eq!(fused(2), (2, 64, 16, true));
            assert_eq!(fused(4), (1, 32, 32, true));
            assert_eq!(fused(8), (1, 32, 32, true));
        }
        // Two weights on the tensor cores: units of 8 K-words at batch 1, 4 above (registers).
        // gfx906 from batch 5: units of 8 (1 packed column per lane shares a unit's overhead
        // with few weights; `floor_phases`).
        let d = Schedule::default_for(arch, &dual);
        assert_eq!(d.k_unit_words, if arch.has_fp16_mma() { 8 } else { 4 });
        let d8 = Schedule::default_for(arch, &build("gemv_int4_dual_silu", &Shapes::qwen27b(4, 8)));
        assert_eq!(d8.k_unit_words, if sm90 { 4 } else { 8 });
        // gfx906 at batch 8: 80 KB of activations, staged in phases of one unit per K slice (1
        // word per lane for the two weights, 64-column tiles: 4 K slices; `floor_phases`).
        assert!(d8.x_in_lds);
        if !sm90 {
            assert_eq!(
                (
                    d8.k_split,
                    d8.words_per_iteration,
                    d8.threads_per_column,
                    d8.x_phase_units
                ),
                (1, 1, 4, 4)
            );
        }
        let s = Schedule::default_for(arch, &f16);
        assert_eq!(s.threads_per_column, arch.wave_size());
        // One wave per 128-column INT8 block.
        let s = Schedule::default_for(arch, &int8);
        assert_eq!(
            s.columns_per_workgroup / s.workgroup_size * arch.wave_size(),
            128
        );
    }
    // The fused kernel at TP = 4: 160 co-resident workgroups, a grid barrier, one flag round.
    let fused = build("gemv_int4_allreduce_rmsnorm", &Shapes::qwen27b(4, 1));
    let lk = lower(
        &fused,
        Arch::Gfx906,
        &Schedule::default_for(Arch::Gfx906, &fused),
    )
    .unwrap();
    assert_eq!(
        (lk.grid, lk.barriers_per_launch, lk.flag_rounds_per_launch),
        (160, 1, 1)
    );
    assert_eq!(lk.coresidency.as_ref().map(|c| c.workgroups), Some(160));
}

/// The dot2 path ([`Int4Dot::Dot2`], gfx906 `v_dot2_f32_f16`) against the f64 reference on the
/// interpreter (its own model of the pair decode and of dot2: two exact FP16 products and the
/// accumulator, one f32 rounding): every GPTQ kernel, the three zero-point conventions, per-
/// channel and grouped scales, 1 and 4 words per lane, 1 and 2 accumulator chains, batch 1 and
/// 3, a tail tile (N = 200), and split-K; both pair decodes (`mma_decode`: three shifts, or one
/// shift and an FP16 FMA by 1/16); the floor path's 4 packed columns per lane with the
/// activations staged in LDS or packed per lane and 32-bit byte offsets; sm_90 (no dot2
/// instruction) refuses it.
#[test]
fn dot2_matches_reference_on_interpreter() {
    use wavefuse_codegen::lower::{Int4Dot, LowerError, MmaDecode};
    for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
        for group in [GroupSize::Rows(128), GroupSize::PerChannel] {
            let gptq = GptqLayout::new(group, zero);
            // A tail tile: N = 200 (ffn for the GEMVs, hidden for the fused kernel).
            for (batch, tail) in [(1, false), (3, true)] {
                for name in [
                    "gemv_int4",
                    "gemv_int4_dual_silu",
                    "gemv_int4_qkv",
                    "gemv_int4_allreduce_rmsnorm",
                ] {
                    let fused = name == "gemv_int4_allreduce_rmsnorm";
                    let base = small(1, batch);
                    let shapes = Shapes {
                        ffn: if tail && !fused { 200 } else { base.ffn },
                        hidden: if tail && fused { 200 } else { base.hidden },
                        gptq,
                        ..base
                    };
                    let k = build(name, &shapes);
                    let d = Schedule::default_for(Arch::Gfx906, &k);
                    for (v, accs, parts) in [(1, 1, 1), (4, 2, 1), (1, 2, 2)] {
                        let s = Schedule {
                            int4_dot: Int4Dot::Dot2,
                            words_per_iteration: v,
                            columns_per_workgroup: 32 * v,
                            threads_per_column: d.workgroup_size / 32,
                            accumulators: accs,
                            k_split: parts,
                            k_unit_words: 4,
                            mma_decode: MmaDecode::Shift,
                            x_in_lds: false,
                            byte_offsets: false,
                            ..d.clone()
                        };
                        check_numerics(&k, Arch::Gfx906, &s, 2e-3);
                    }
                    // The floor path: 8 lanes x 4 packed columns per K row.
                    for (x_in_lds, parts) in [(true, 1), (false, 1), (true, 2)] {
                        let s = Schedule {
                            int4_dot: Int4Dot::Dot2,
                            mma_decode: MmaDecode::Fma,
                            x_in_lds,
                            byte_offsets: true,
                            words_per_iteration: 4,
                            columns_per_workgroup: 32,
                            threads_per_column: d.workgroup_size / 8,
                            accumulators: 1,
                            k_split: parts,
                            k_unit_words: 4,
                            ..d.clone()
                        };
                        check_numerics(&k, Arch::Gfx906, &s, 2e-3);
                    }
                }
            }
        }
    }
    let k = build("gemv_int4", &small(1, 1));
    let s = Schedule {
        int4_dot: Int4Dot::Dot2,
        ..Schedule::default_for(Arch::Sm90, &k)
    };
    assert!(matches!(
        lower(&k, Arch::Sm90, &s),
        Err(LowerError::Schedule(_))
    ));
}

/// An FP16 row-parallel GEMV + allreduce + residual + RMSNorm over `n` features at batch 4, TP 4
/// (`fixtures/f16_row_norm.wfir`): one wave per output column, so `n / 4` workgroups of 256
/// lanes, all behind the norm's grid barrier.
fn f16_row_norm(n: usize) -> Kernel {
    let text = include_str!("fixtures/f16_row_norm.wfir")
        .replace("=N]", &format!("={n}]"))
        .replace(", N]", &format!(", {n}]"))
        .replace("[N]", &format!("[{n}]"));
    wavefuse_codegen::ir::parse(&text).expect("parses")
}

/// A grid that no register count lets the device hold is refused by the lowering with the
/// numbers (DESIGN.md §5.9: it would wait forever at its barrier), on both targets; one that
/// fits at the hardware's most waves is lowered, and its compiled occupancy then decides.
#[test]
fn a_grid_the_device_cannot_hold_is_refused_at_lowering_on_both_targets() {
    use wavefuse_codegen::lower::LowerError;
    use wavefuse_codegen::lowered::Occupancy;
    let refused = |arch: Arch, n: usize| {
        let k = f16_row_norm(n);
        match lower(&k, arch, &Schedule::default_for(arch, &k)) {
            Err(LowerError::NotCoResident(e)) => e,
            other => panic!("{arch} n={n}: {:?}", other.map(|k| k.grid)),
        }
    };
    // gfx906: 1280 workgroups; 60 CUs × 10 (40 waves per CU, 4 per workgroup) = 600.
    let e = refused(Arch::Gfx906, 5120);
    assert_eq!((e.workgroups, e.cus, e.per_cu), (1280, 60, 10));
    let msg = LowerError::NotCoResident(e).to_string();
    assert!(
        msg.contains("1280 workgroups of 256 lanes") && msg.contains("at most 600"),
        "{msg}"
    );
    // sm_90: 5120 columns (640 workgroups) fit in 132 SMs × 8; 10240 (1280) do not.
    let k = f16_row_norm(5120);
    let sm90 = lower(&k, Arch::Sm90, &Schedule::default_for(Arch::Sm90, &k)).expect("fits");
    assert_eq!(sm90.grid, 640);
    let e = refused(Arch::Sm90, 10240);
    assert_eq!((e.workgroups, e.cus, e.per_cu), (1280, 132, 8));
    // Four ranks' grids on one H200 at the hardware's most waves: 2560 > 1056.
    let e = sm90.coresident(4, Occupancy::HardwareMax).unwrap_err();
    assert_eq!((e.ranks_per_device, e.workgroups, e.per_cu), (4, 640, 8));

    // gfx906, 1536 columns: 384 workgroups fit at the most waves (600), not at a compiled 56
    // VGPRs (4 waves per SIMD: 4 workgroups per CU, 240), and do at 7 waves (420).
    let k = f16_row_norm(1536);
    let g = lower(&k, Arch::Gfx906, &Schedule::default_for(Arch::Gfx906, &k)).expect("fits");
    assert_eq!(g.grid, 384);
    let at = |waves_per_simd| Occupancy::Compiled {
        waves_per_simd,
        registers: 56,
    };
    let e = g.coresident(1, at(4)).unwrap_err();
    assert_eq!(e.per_cu, 4);
    let msg = e.to_string();
    assert!(
        msg.contains("at most 240") && msg.contains("compiled 56 VGPRs (4 waves per SIMD)"),
        "{msg}"
    );
    assert!(g.coresident(1, at(7)).is_ok());
}

/// sm_90 without a grid stage: where no K part count fills the device at the default units, the
/// units halve until one does. 4352 → 5120 (one TP 4 rank's down GEMV, `hidden` = K = 4352):
/// 34 units of 16 K-words, no divisor in 3..=8, so 68 units of 8 in 4 parts (640 workgroups;
/// H200 graphs 10.1 → 8.2 µs, bench/results/2026-12-03-h200-k4352-units/); K = 5120 (40 units
/// of 16, 5 parts at N = 4352) keeps its units; the fused kernel (a grid stage) keeps them too.
#[test]
fn sm90_units_halve_until_a_k_split_fills_the_device() {
    let at = |hidden: usize, n: usize| Shapes {
        hidden,
        ffn: n,
        ..Shapes::qwen27b(1, 1)
    };
    let s = Schedule::default_for(Arch::Sm90, &build("gemv_int4", &at(4352, 5120)));
    assert_eq!((s.k_unit_words, s.k_split), (8, 4));
    lower(&build("gemv_int4", &at(4352, 5120)), Arch::Sm90, &s).expect("lowers");
    let s = Schedule::default_for(Arch::Sm90, &build("gemv_int4", &at(5120, 4352)));
    assert_eq!((s.k_unit_words, s.k_split), (16, 5));
    let fused = build("gemv_int4_allreduce_rmsnorm", &Shapes::qwen27b(4, 1));
    let s = Schedule::default_for(Arch::Sm90, &fused);
    assert_eq!(s.k_unit_words, 16);
}

/// sm_90 without a grid stage, batch 8: where the filling split's parts do not fit the stage,
/// twice the parts when staging then adds no round of workgroups. 17408 → 5120: 4 parts of 70 KB
/// unstaged → 8 parts of 35 KB staged (1280 workgroups take two rounds either way; H200 graphs
/// 25.7 → 21.6 µs); 5120 → 17408 keeps 2 parts unstaged (1088 workgroups: one round unstaged,
/// two staged; staging measured slower there).
#[test]
fn sm90_more_k_parts_where_they_let_the_activations_stage() {
    let at = |hidden: usize, n: usize| Shapes {
        hidden,
        ffn: n,
        ..Shapes::qwen27b(1, 8)
    };
    let k = build("gemv_int4", &at(17408, 5120));
    let s = Schedule::default_for(Arch::Sm90, &k);
    assert_eq!((s.k_split, s.x_in_lds), (8, true));
    lower(&k, Arch::Sm90, &s).expect("lowers");
    let s = Schedule::default_for(Arch::Sm90, &build("gemv_int4", &at(5120, 17408)));
    assert_eq!((s.k_split, s.x_in_lds), (2, false));
}

/// LDS bounds residency too: the fused INT4 kernel on gfx906 at batch 8 with 256-lane
/// workgroups of 32 K slices over 32-column tiles keeps 32 KiB of cross-slice sums per
/// workgroup, one per CU, and is refused (160 workgroups); the default (64-column tiles, 8 K
/// slices, the activations in phases: 80 workgroups with 16 KiB of sums and 4 KiB of stage)
/// fits.
#[test]
fn lds_bounds_coresidency_and_the_gfx906_default_fits() {
    use wavefuse_codegen::lower::LowerError;
    let k = build("gemv_int4_allreduce_rmsnorm", &Shapes::qwen27b(4, 8));
    let s = Schedule::default_for(Arch::Gfx906, &k);
    assert_eq!(
        (
            s.workgroup_size,
            s.columns_per_workgroup,
            s.threads_per_column,
            s.x_phase_units
        ),
        (256, 64, 8, 8)
    );
    let fits = lower(&k, Arch::Gfx906, &s).expect("the default fits");
    assert!(fits.coresidency.is_some());
    let wide = s
        .clone()
        .with_overrides(
            "workgroup_size=256,columns_per_workgroup=32,words_per_iteration=4,threads_per_column=32,x_in_lds=false,x_phase_units=0",
        )
        .expect("a valid override");
    match lower(&k, Arch::Gfx906, &wide) {
        Err(LowerError::NotCoResident(e)) => {
            assert_eq!((e.per_cu, e.workgroups), (1, 160), "{e}");
            assert!(e.lds_bytes > 32 * 1024, "{e}");
        }
        other => panic!("{:?}", other.map(|k| (k.grid, k.lds_bytes()))),
    }
}

/// The q8-activation GEMV (`quantize_int8.rne` + `gemv_q8`, `lower/gemv/q8.rs`) on the lockstep
/// interpreter (its own model of `dot4_i8`: four sign-extended byte products) against the f64
/// reference of the q8 semantics, f32 output, rel L2 ≤ 1e-5: both targets, batch 1 and 3, GPTQ
/// v1 / v2 / symmetric, group 64 and per-channel, blocks of 32 and 64, the default schedule,
/// one part and 2 K parts, 2 words per lane, a tail tile (N = 200). (The simulator runs the
/// same kernels in `tests/q8.rs`.)
#[test]
fn q8_matches_reference_on_interpreter() {
    use wavefuse_codegen::ir::{Builder, Parallelism, Sharding, Tensor, Weight};
    let kernel = |batch: usize, n: usize, layout: GptqLayout, block: usize| {
        let col = Sharding::ColumnParallel { tp: 1 };
        let mut b = Builder::new("gemv_int4_q8", 1);
        let format = WeightFormat::Gptq(layout);
        let w = b.input("w", Weight { format, k: 256, n }, col);
        let x = Tensor::activation(ScalarType::F16, batch, 256);
        let x = b.input("x", x, wavefuse_codegen::ir::Sharding::Replicated);
        let y = b.output("y", Tensor::activation(ScalarType::F32, batch, n), col);
        let xv = b.load(x);
        let q = b.quantize_rne(xv, block, 127);
        let g = b.gemv_q8(w, q, block, Parallelism::Column);
        b.store(g, y);
        b.finish()
    };
    for arch in [Arch::Gfx906, Arch::Sm90] {
        for (batch, zero, group, block) in [
            (1, ZeroPoint::V1, GroupSize::Rows(64), 32),
            (3, ZeroPoint::V2, GroupSize::Rows(64), 64),
            (3, ZeroPoint::Symmetric, GroupSize::PerChannel, 32),
        ] {
            for n in [512, 200] {
                let k = kernel(batch, n, GptqLayout::new(group, zero), block);
                let d = Schedule::default_for(arch, &k);
                // (One group per channel cannot be split: `k_split = 2` is refused there.)
                let two = if group == GroupSize::PerChannel { 1 } else { 2 };
                for (parts, v, cols) in [(d.k_split, 1, 256), (1, 1, 256), (two, 2, 128)] {
                    let s = Schedule {
                        k_split: parts,
                        words_per_iteration: v,
                        columns_per_workgroup: cols,
                        threads_per_column: d.workgroup_size / (cols / v),
                        ..d.clone()
                    };
                    check_numerics(&k, arch, &s, 1e-5);
                }
            }
        }
    }
}

/// An FP16 GEMV `[1, k] × [k, n]` over `tp` ranks, its weight and output sharded by column and
/// shaped globally (`index=global`): each rank holds `k · n / tp` weight elements.
fn f16_gemv(k: usize, n: usize, tp: u32) -> Kernel {
    let text = format!(
        "kernel big_f16_gemv(tp={tp}) {{
    buf0 = input w : f16_nk[k={k}, n={n}] col_parallel(tp={tp}) @global index=global
    buf1 = input x : f16[1, {k}] replicated @global index=global
    buf2 = output y : f16[1, {n}] col_parallel(tp={tp}) @global index=global
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}}"
    );
    wavefuse_codegen::ir::parse(&text).expect("parses")
}

/// Issue 39 item 1: a weight of more than 2^32 − 1 elements per rank (hidden 65536 → 512 heads ×
/// 256: 2^33 FP16 elements, 16 GiB, which an H100 holds) used to lower and emit `w[(n * 65536u) +
/// k]` in 32-bit arithmetic that wraps — silent wrong code; exactly 2^32 panicked in the lowering
/// (`build.rs`). Both are now refused at the lowering's entry, naming the buffer, the array, its
/// elements per rank and the limit; the same weight sharded over 4 ranks (2^31 each) and the
/// largest single-rank weight that fits still lower.
#[test]
fn invalid_buffer_beyond_32_bit_indices_is_refused_not_wrapped() {
    use wavefuse_codegen::lower::{LowerError, MAX_INDEXED_ELEMENTS};
    for arch in Arch::ALL {
        for (n, tp, elements) in [
            (131072, 1, 1u64 << 33),
            (65536, 1, 1 << 32),
            (131072, 2, 1 << 32),
        ] {
            let k = f16_gemv(65536, n, tp);
            let err = lower(&k, arch, &Schedule::default_for(arch, &k)).unwrap_err();
            let LowerError::IndexWidth {
                buffer,
                array,
                elements: e,
                limit,
            } = &err
            else {
                panic!("{arch} n={n} tp={tp}: {err}");
            };
            assert_eq!((buffer.as_str(), *array), ("w", "data"), "{err}");
            assert_eq!(
                (e.as_str(), *limit),
                (elements.to_string().as_str(), MAX_INDEXED_ELEMENTS)
            );
            let msg = err.to_string();
            assert!(msg.contains("`w`") && msg.contains("4294967295"), "{msg}");
        }
        // The lowering's own arrays too: an allreduce's payload is double-buffered, so an
        // operand of 2^32 − 512 elements needs a scratch of twice that (the lowered validator
        // caught it, as "the lowering produced an invalid kernel").
        let n: u64 = 2147483392;
        let ar = wavefuse_codegen::ir::parse(&format!(
            "kernel ar(tp=2) {{
    buf0 = input partial : f16[2, {n}] partial(tp=2) @global index=local
    buf1 = output hidden : f16[2, {n}] replicated @global index=local
    v0 = load buf0
    v1 = allreduce v0, tp=2
    v2 = round_f16 v1
    store v2, buf1
}}"
        ))
        .expect("parses");
        let err = lower(&ar, arch, &Schedule::default_for(arch, &ar)).unwrap_err();
        let LowerError::IndexWidth {
            buffer,
            array,
            elements,
            ..
        } = &err
        else {
            panic!("{arch} allreduce: {err}");
        };
        let want = (4 * n).to_string();
        assert_eq!(
            (buffer.as_str(), *array, elements),
            ("ar_payload", "scratch", &want)
        );
        for (n, tp) in [(131072, 4), (65535, 1)] {
            let k = f16_gemv(65536, n, tp);
            let lowered = lower(&k, arch, &Schedule::default_for(arch, &k));
            assert!(lowered.is_ok(), "{arch} n={n} tp={tp}: {:?}", lowered.err());
        }
    }
}

/// A chain `load → silu × (depth − 3) → round_f16 → store`: `depth` dependent ops.
fn chain(depth: usize) -> Kernel {
    let mut text = String::from(
        "kernel chain(tp=1) {
    buf0 = input x : f32[1, 64] replicated @global index=local
    buf1 = output y : f16[1, 64] replicated @global index=local
    v0 = load buf0
",
    );
    for i in 1..depth - 2 {
        text.push_str(&format!("    v{i} = silu v{}\n", i - 1));
    }
    let last = depth - 3;
    text.push_str(&format!(
        "    v{} = round_f16 v{last}\n    store v{}, buf1\n}}\n",
        last + 1,
        last + 1
    ));
    wavefuse_codegen::ir::parse_named(&text, "chain.wfir").expect("parses")
}

/// Issue 39 item 4: a chain of ~10,000 dependent ops overflowed the stack in the lowering's
/// recursion over operands (SIGABRT in `emit`, `sim`, `check`). It is now refused at the
/// lowering's entry, naming where the chain passes the limit; a chain at the limit lowers and
/// its C++ is written on both targets on a 2 MiB stack (a test thread's, smaller than a main
/// thread's 8 MiB), so the limit leaves the recursion room.
#[test]
fn invalid_op_chain_deeper_than_the_limit_is_refused_not_a_stack_overflow() {
    use wavefuse_codegen::lower::{LowerError, MAX_OP_DEPTH};
    let deep = chain(10_000);
    for arch in Arch::ALL {
        let err = lower(&deep, arch, &Schedule::default_for(arch, &deep)).unwrap_err();
        let LowerError::TooDeep { op, depth, limit } = &err else {
            panic!("{arch}: {err}");
        };
        assert_eq!((*depth, *limit), (MAX_OP_DEPTH + 1, MAX_OP_DEPTH), "{err}");
        // v0 is the load, op `MAX_OP_DEPTH` (0-based) the first past the limit.
        let want = format!(
            "chain.wfir:{}:12: the op of v{MAX_OP_DEPTH}",
            MAX_OP_DEPTH + 4
        );
        assert_eq!(op, &want, "{err}");
    }
    let at_limit = chain(MAX_OP_DEPTH);
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for arch in Arch::ALL {
                let s = Schedule::default_for(arch, &at_limit);
                let g = wavefuse_codegen::compile(&at_limit, arch, &s).expect("compiles");
                assert!(g.source.text.contains("chain"), "{arch}");
            }
        })
        .unwrap()
        .join()
        .expect("lowers and writes at the limit on a 2 MiB stack");
}
