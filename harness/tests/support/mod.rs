//! Helpers shared by the simulator mutation tests.

use wavefuse_codegen::ir::{Ordering, ScalarType};
use wavefuse_codegen::lowered::{AtomicOp, Block, Stmt};
use wavefuse_codegen::sim::tolerance;
use wavefuse_harness::sim::{Prepared, summary, sweep};

/// `p` swept over `schedules` seeded schedules from `seed` (each with fresh random inputs and
/// back-to-back launches): every output checked, no finding, no failing run, and the largest
/// relative L2 error against the f64 reference within the FP16 outputs' tolerance.
#[allow(dead_code)] // not every test crate that includes this module sweeps an FP16 kernel
pub fn matches_reference(p: &Prepared, seed: u64, schedules: u64, label: &str) {
    let r = sweep(p, seed, 0, schedules, |_, _| {}).expect("simulates");
    let text = summary(p, &r);
    eprintln!("{label}: {}", text.lines().next().unwrap_or(""));
    assert!(r.not_checked.is_none(), "{label}: {text}");
    assert!(r.findings.is_empty() && r.failing == 0, "{label}: {text}");
    assert!(
        r.max_rel_l2 <= tolerance(ScalarType::F16),
        "{label}: {text}"
    );
}

/// Apply `f` to every statement, depth first; `f` returns the statements that replace it.
pub fn rewrite(block: Block, f: &mut dyn FnMut(Stmt) -> Vec<Stmt>) -> Block {
    let mut out = Vec::new();
    for s in block {
        let s = match s {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => Stmt::If {
                cond,
                then_body: rewrite(then_body, f),
                else_body: rewrite(else_body, f),
            },
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => Stmt::For {
                var,
                start,
                end,
                step,
                body: rewrite(body, f),
            },
            s => s,
        };
        out.extend(f(s));
    }
    out
}

/// A rewrite giving the split-K arrival (the acq_rel `Add` atomic whose old value is used; a grid
/// barrier's arrival is release) `ordering` instead of its acq_rel: the mutants of §5.1/§5.2 the
/// split-K tests plant.
#[allow(dead_code)] // not every test crate that includes this module mutates the arrival
pub fn arrival_ordered(ordering: Ordering) -> impl FnMut(Stmt) -> Vec<Stmt> {
    move |s| match s {
        Stmt::Atomic {
            dst: Some(d),
            op: AtomicOp::Add,
            mem,
            value,
            scope,
            why,
            ordering: Ordering::AcqRel,
        } => vec![Stmt::Atomic {
            dst: Some(d),
            op: AtomicOp::Add,
            mem,
            value,
            ordering,
            scope,
            why,
        }],
        s => vec![s],
    }
}

/// `body` with the first (or, with `second`, the second) workgroup barrier of the first loop
/// that holds two or more of them directly (the phase loop; two phases of a pipelined one) removed ([`rewrite`] visits loops
/// after their bodies, so the innermost such loop is the one).
#[allow(dead_code)] // used by the phased-stage tests only
pub fn without_phase_barrier(body: Vec<Stmt>, second: bool, removed: &mut bool) -> Vec<Stmt> {
    rewrite(body, &mut |s| match s {
        Stmt::For {
            var,
            start,
            end,
            step,
            body,
        } if !*removed
            && body
                .iter()
                .filter(|t| matches!(t, Stmt::WorkgroupBarrier))
                .count()
                >= 2 =>
        {
            *removed = true;
            let mut seen = 0;
            let body = body
                .into_iter()
                .filter(|t| {
                    seen += usize::from(matches!(t, Stmt::WorkgroupBarrier));
                    !matches!(t, Stmt::WorkgroupBarrier) || seen != 1 + usize::from(second)
                })
                .collect();
            vec![Stmt::For {
                var,
                start,
                end,
                step,
                body,
            }]
        }
        other => vec![other],
    })
}
