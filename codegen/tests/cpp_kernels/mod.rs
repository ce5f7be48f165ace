//! Hand-built lowered kernels shaped like what the lowering produces: they exercise every
//! statement the C++ writer prints, independently of the lowering passes.

#![allow(dead_code)]

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{MemorySpace, Ordering, Scope};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::*;

pub fn array(elem: Ty, len: usize, access: Access, purpose: Purpose) -> ParamKind {
    ParamKind::Array {
        elem,
        len,
        space: MemorySpace::Global,
        access,
        purpose,
    }
}

pub fn data(buffer: &str, part: &'static str) -> Purpose {
    Purpose::Data {
        buffer: buffer.into(),
        part,
    }
}

pub fn at(base: Base, index: Expr) -> MemRef {
    MemRef { base, index }
}

fn r(reg: Reg) -> Expr {
    Expr::Reg(reg)
}

fn sp(s: Special) -> Expr {
    Expr::Special(s)
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}

fn lane0() -> Expr {
    bin(BinOp::Eq, sp(Special::LocalId), Expr::u32(0))
}

/// A miniature of the fused kernel: an INT4 GEMV slice (8 nibbles per word, FP16 activations
/// read as one 16-byte vector), a two-level reduction (wave shuffle, then LDS across waves), a
/// publish of the FP16 partial to every peer's buffer with a release flag, waits on the peers'
/// flags, a sum in rank order, a grid barrier, and an RMS-style epilogue with a packed FP16x2
/// store. Expanded (`expand_sync`), as the writer expects.
pub fn mini_fused(arch: Arch, tp: u32) -> LoweredKernel {
    let (wg, grid, n, kwords) = (256u32, 4u32, 1024u32, 16u32);
    let waves = wg / arch.wave_size();
    let mut k = LoweredKernel::new("mini_fused", arch, tp, wg, grid);
    let w = k.param(
        "w_qweight",
        array(
            Ty::U32,
            (kwords * n) as usize,
            Access::Read,
            data("w", "qweight"),
        ),
    );
    let x = k.param(
        "x",
        array(
            Ty::F16,
            (kwords * 8) as usize,
            Access::Read,
            data("x", "data"),
        ),
    );
    let y = k.param(
        "y",
        array(Ty::F16, (2 * n) as usize, Access::Write, data("y", "data")),
    );
    let partials = k.param(
        "partials",
        ParamKind::PeerArrays {
            elem: Ty::F16,
            len: (tp * n) as usize,
            access: Access::ReadWrite,
            purpose: Purpose::Scratch,
        },
    );
    let flags = k.param(
        "flags",
        ParamKind::PeerArrays {
            elem: Ty::U32,
            len: grid as usize,
            access: Access::ReadWrite,
            purpose: Purpose::Flags,
        },
    );
    let counter = k.param(
        "counter",
        array(Ty::U32, 1, Access::ReadWrite, Purpose::Counter),
    );
    let rank = k.param(
        "rank",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: Purpose::Rank,
        },
    );
    let red = k.lds(Ty::F32, waves as usize);

    let col = k.reg(Ty::U32, "col");
    let acc = k.reg(Ty::F32, "acc");
    let kk = k.reg(Ty::U32, "kg");
    let word = k.reg(Ty::U32, "qw");
    let xs: Vec<Reg> = (0..8).map(|_| k.reg(Ty::F16, "x")).collect();
    let wsum = k.reg(Ty::F32, "wave_sum");
    let total = k.reg(Ty::F32, "total");
    let i = k.reg(Ty::U32, "i");
    let p = k.reg(Ty::U32, "peer");
    let v = k.reg(Ty::F16, "pv");
    let sum = k.reg(Ty::F32, "sum");
    let scale = k.reg(Ty::F32, "scale");
    let seen = k.reg(Ty::U32, "seen");

    // Dequantise nibble j of `word`: (q - 8) as f32, times x_j, accumulated.
    let mut dot = Vec::new();
    for (j, xj) in xs.iter().enumerate() {
        let q = Expr::Bfe {
            value: Box::new(r(word)),
            offset: Box::new(Expr::u32(4 * j as u32)),
            width: 4,
        };
        let wq = bin(BinOp::Sub, Expr::cast(Ty::F32, q), Expr::f32(8.0));
        dot.push(Stmt::Assign {
            dst: acc,
            value: Expr::Fma(
                Box::new(wq),
                Box::new(Expr::cast(Ty::F32, r(*xj))),
                Box::new(r(acc)),
            ),
        });
    }
    let mut gemv = vec![
        Stmt::Load {
            dst: vec![word],
            mem: at(
                Base::Param(w),
                Expr::add(Expr::mul(r(kk), Expr::u32(n)), r(col)),
            ),
        },
        Stmt::Load {
            dst: xs.clone(),
            mem: at(Base::Param(x), Expr::mul(r(kk), Expr::u32(8))),
        },
    ];
    gemv.extend(dot);

    let peer_flag = |who: Expr| {
        at(
            Base::Peer {
                param: flags,
                rank: who,
            },
            sp(Special::WorkgroupId),
        )
    };
    let publish: Vec<Stmt> = (0..tp)
        .map(|q| Stmt::Store {
            mem: at(
                Base::Peer {
                    param: partials,
                    rank: Expr::u32(q),
                },
                Expr::add(Expr::mul(Expr::Param(rank), Expr::u32(n)), r(col)),
            ),
            values: vec![Expr::cast(Ty::F16, r(acc))],
        })
        .collect();

    k.body = vec![
        Stmt::Comment("column of this lane; the grid covers N exactly".into()),
        Stmt::Assign {
            dst: col,
            value: Expr::add(
                Expr::mul(sp(Special::WorkgroupId), Expr::u32(wg)),
                sp(Special::LocalId),
            ),
        },
        Stmt::Assign {
            dst: acc,
            value: Expr::f32(0.0),
        },
        Stmt::For {
            var: kk,
            start: Expr::u32(0),
            end: Expr::u32(kwords),
            step: Expr::u32(1),
            body: gemv,
        },
        Stmt::WaveReduce {
            dst: wsum,
            op: ReduceKind::Sum,
            value: r(acc),
        },
        Stmt::If {
            cond: bin(BinOp::Eq, sp(Special::LaneId), Expr::u32(0)),
            then_body: vec![Stmt::Store {
                mem: at(Base::Lds(red), sp(Special::WaveId)),
                values: vec![r(wsum)],
            }],
            else_body: vec![],
        },
        Stmt::WorkgroupBarrier,
        Stmt::Assign {
            dst: total,
            value: Expr::f32(0.0),
        },
        Stmt::For {
            var: i,
            start: Expr::u32(0),
            end: Expr::u32(waves),
            step: Expr::u32(1),
            body: vec![
                Stmt::Load {
                    dst: vec![scale],
                    mem: at(Base::Lds(red), r(i)),
                },
                Stmt::Assign {
                    dst: total,
                    value: Expr::add(r(total), r(scale)),
                },
            ],
        },
        Stmt::Comment(
            "push this rank's FP16 partial into every rank's buffer, then flag it".into(),
        ),
    ];
    k.body.extend(publish);
    k.body.extend([
        Stmt::PublishFlag {
            flag: peer_flag(Expr::Param(rank)),
            round: 0,
        },
        Stmt::For {
            var: p,
            start: Expr::u32(0),
            end: Expr::u32(tp),
            step: Expr::u32(1),
            body: vec![Stmt::WaitFlag {
                flag: peer_flag(r(p)),
                round: 0,
            }],
        },
        Stmt::Assign {
            dst: sum,
            value: Expr::f32(0.0),
        },
        Stmt::For {
            var: p,
            start: Expr::u32(0),
            end: Expr::u32(tp),
            step: Expr::u32(1),
            body: vec![
                Stmt::Load {
                    dst: vec![v],
                    mem: at(
                        Base::Peer {
                            param: partials,
                            rank: Expr::Param(rank),
                        },
                        Expr::add(Expr::mul(r(p), Expr::u32(n)), r(col)),
                    ),
                },
                Stmt::Assign {
                    dst: sum,
                    value: Expr::add(r(sum), Expr::cast(Ty::F32, r(v))),
                },
            ],
        },
        Stmt::GridBarrier {
            counter: at(Base::Param(counter), Expr::u32(0)),
            index: 0,
        },
        Stmt::Atomic {
            dst: Some(seen),
            op: AtomicOp::Load,
            mem: at(Base::Param(counter), Expr::u32(0)),
            value: None,
            ordering: Ordering::Relaxed,
            scope: Scope::Agent,
            why: Invariant::MonotonicEpochs,
        },
        Stmt::Fence {
            ordering: Ordering::Acquire,
            scope: Scope::Agent,
            why: Invariant::CoResidentGrid,
        },
        Stmt::Assign {
            dst: scale,
            value: Expr::Un(
                UnOp::Rsqrt,
                Box::new(Expr::add(Expr::mul(r(sum), r(sum)), Expr::f32(1e-6))),
            ),
        },
        Stmt::If {
            cond: bin(BinOp::Lt, r(col), Expr::u32(n)),
            then_body: vec![Stmt::Store {
                mem: at(Base::Param(y), Expr::mul(r(col), Expr::u32(2))),
                values: vec![
                    Expr::cast(Ty::F16, Expr::mul(r(sum), r(scale))),
                    Expr::cast(Ty::F16, r(total)),
                ],
            }],
            else_body: vec![],
        },
    ]);
    expand_sync(&mut k);
    k
}
