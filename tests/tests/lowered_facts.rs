//! The lowered validator's facts ([`LoweredInfo`]) on the kernels of the set, as generated for
//! both targets: they give every expression the type the C++ writer used to compute with the
//! validator's type rules, the parameters the writers used to find atomics on, uniformity that
//! agrees with the lanes' indices, and the writer reading them writes the pipeline's source byte
//! for byte.

use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::ScheduleInputs;
use wavefuse_codegen::lowered::validate::{ty, validate};
use wavefuse_codegen::lowered::{
    Base, Expr, LoweredInfo, LoweredKernel, MemRef, Param, Special, Stmt, Uniformity,
};
use wavefuse_codegen::{Arch, Generated, generate};
use wavefuse_kernels::{KernelId, Shapes};

/// Every kernel of the set at TP 1 and 4 on both targets (those a target supports).
fn generated() -> Vec<Generated> {
    let mut out = Vec::new();
    for tp in [1, 4] {
        for id in KernelId::ALL {
            let kernel = id.build(&Shapes::qwen27b(tp));
            for arch in Arch::ALL {
                match generate(&kernel, arch, &ScheduleInputs::per_device()) {
                    Ok(g) => out.push(g),
                    Err(e) if e.is_unsupported() => {}
                    Err(e) => panic!("{} on {arch} at TP {tp}: {e}", kernel.name()),
                }
            }
        }
    }
    assert!(out.len() >= 16, "only {} kernels generated", out.len());
    out
}

/// `e` and its operands, depth first.
fn subexpressions<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    out.push(e);
    let operands: Vec<&Expr> = match e {
        Expr::Int(..) | Expr::Float(..) | Expr::Reg(_) | Expr::Param(_) | Expr::Special(_) => {
            vec![]
        }
        Expr::Un(_, a) | Expr::Cast(_, a) | Expr::Bitcast(_, a) => vec![a],
        Expr::Bin(_, a, b) | Expr::PackHalf2(a, b) | Expr::SubHalf2(a, b) => vec![a, b],
        Expr::Bfe { value, offset, .. } => vec![value, offset],
        Expr::FmaHalf2(a, b, c)
        | Expr::Dot2F16(a, b, c)
        | Expr::Dot4I8(a, b, c)
        | Expr::Select(a, b, c)
        | Expr::Fma(a, b, c) => vec![a, b, c],
    };
    for o in operands {
        subexpressions(o, out);
    }
}

fn mem_exprs<'e>(m: &'e MemRef, out: &mut Vec<&'e Expr>) {
    if let Base::Peer { rank, .. } = &m.base {
        subexpressions(rank, out);
    }
    subexpressions(&m.index, out);
}

/// Every expression of `block` (operands included), and the parameters its atomics and waits
/// touch (what the writers computed for themselves before the facts).
fn walk<'e>(block: &'e [Stmt], exprs: &mut Vec<&'e Expr>, atomic: &mut Vec<Param>) {
    let param = |m: &MemRef| match &m.base {
        Base::Param(p) | Base::Peer { param: p, .. } => Some(*p),
        Base::Lds(_) => None,
    };
    for s in block {
        match s {
            Stmt::Assign { value, .. } | Stmt::WaveReduce { value, .. } => {
                subexpressions(value, exprs)
            }
            Stmt::Load { mem, .. } | Stmt::PrefetchL2 { mem } => mem_exprs(mem, exprs),
            Stmt::Store { mem, values } => {
                mem_exprs(mem, exprs);
                values.iter().for_each(|v| subexpressions(v, exprs));
            }
            Stmt::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                [start, end, step]
                    .into_iter()
                    .for_each(|e| subexpressions(e, exprs));
                walk(body, exprs, atomic);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                subexpressions(cond, exprs);
                walk(then_body, exprs, atomic);
                walk(else_body, exprs, atomic);
            }
            Stmt::Atomic { mem, value, .. } => {
                mem_exprs(mem, exprs);
                value.iter().for_each(|v| subexpressions(v, exprs));
                atomic.extend(param(mem));
            }
            Stmt::WaitGe {
                mem, target, error, ..
            } => {
                mem_exprs(mem, exprs);
                subexpressions(target, exprs);
                mem_exprs(error, exprs);
                atomic.extend(param(mem));
                atomic.extend(param(error));
            }
            _ => {}
        }
    }
}

fn mentions_lane(e: &Expr) -> bool {
    let mut all = Vec::new();
    subexpressions(e, &mut all);
    all.iter()
        .any(|e| matches!(e, Expr::Special(Special::LocalId | Special::LaneId)))
}

fn check(k: &LoweredKernel, info: &LoweredInfo) -> usize {
    let (mut exprs, mut atomic) = (Vec::new(), Vec::new());
    walk(&k.body, &mut exprs, &mut atomic);
    for e in &exprs {
        let checked = ty(e, k).unwrap_or_else(|err| panic!("{}: {err}", k.name));
        assert_eq!(info.expr_ty(e), Some(checked), "{}: {e:?}", k.name);
        if mentions_lane(e) {
            assert_eq!(
                info.expr_uniformity(e),
                Uniformity::Divergent,
                "{}: {e:?}",
                k.name
            );
        }
    }
    for p in k.params.keys() {
        assert_eq!(info.is_atomic(p), atomic.contains(&p), "{}: {p}", k.name);
    }
    exprs.len()
}

#[test]
fn the_validators_facts_type_every_expression_of_the_kernel_set_as_the_writer_did() {
    let mut seen = [false; 3];
    for g in generated() {
        let k = &g.lowered;
        let info = validate(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        assert!(check(k, &info) > 0, "{}", k.name);
        for (r, _) in k.regs.iter() {
            let u = info.reg(r).expect("a defined register").uniformity;
            seen[u as usize] = true;
        }
        if let Some(e) = k.epoch_reg {
            // Loaded from the workgroup's epoch word at `wg_id`: one value per workgroup.
            assert_eq!(info.reg_uniformity(e), Uniformity::Uniform, "{}", k.name);
        }
    }
    assert_eq!(
        seen, [true; 3],
        "uniform, per-wave and divergent registers all occur"
    );
}

#[test]
fn the_writer_reading_the_validators_facts_writes_the_pipelines_source() {
    for g in generated() {
        let info = validate(&g.lowered).expect("valid");
        assert_eq!(info, LoweredInfo::derive(&g.lowered), "{}", g.lowered.name);
        let source = cpp::emit_with(&g.lowered, &info).expect("writes");
        assert_eq!(source, g.source, "{}", g.lowered.name);
    }
}
