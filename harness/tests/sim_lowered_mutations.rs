//! The lowering's own fused kernel (`gemv_int4_allreduce_rmsnorm`, TP = 4, small shapes), with one
//! synchronisation step of its protocol weakened at a time: the simulator must catch each, on the
//! same schedules where the unmodified kernel is clean (`sim_set.rs`).

mod support;

use support::rewrite;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{Ordering, Scope};
use wavefuse_codegen::lowered::{AtomicOp, Block, Invariant, Stmt};
use wavefuse_codegen::sim::FindingKind;
use wavefuse_harness::KernelId;
use wavefuse_harness::sim::{Prepared, SmallShapes, prepare, summary, sweep};

const SCHEDULES: u64 = 16;

fn fused() -> Prepared {
    prepare(
        KernelId::GemvInt4AllreduceRmsnorm,
        4,
        Arch::Gfx906,
        &SmallShapes::DEFAULT,
    )
    .expect("lowers")
}

fn caught(mut p: Prepared, mutate: &mut dyn FnMut(Stmt) -> Vec<Stmt>, kinds: &[FindingKind]) {
    p.lowered.body = rewrite(std::mem::take(&mut p.lowered.body), mutate);
    let s = sweep(&p, 0xF00D, 0, SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &s);
    assert!(
        s.failing * 2 >= SCHEDULES,
        "caught on only {} of {SCHEDULES} schedules:\n{text}",
        s.failing
    );
    assert!(
        s.findings.iter().any(|f| kinds.contains(&f.first.kind)),
        "{text}"
    );
    eprintln!("{text}");
}

#[test]
fn lowered_flag_store_without_release_is_caught() {
    let mut relax = |s: Stmt| match s {
        Stmt::Atomic {
            dst,
            op: AtomicOp::Store,
            mem,
            value,
            scope,
            why: Invariant::PeerFlagHandshake,
            ..
        } => {
            vec![Stmt::Atomic {
                dst,
                op: AtomicOp::Store,
                mem,
                value,
                ordering: Ordering::Relaxed,
                scope,
                why: Invariant::PeerFlagHandshake,
            }]
        }
        s => vec![s],
    };
    caught(fused(), &mut relax, &[FindingKind::StaleRead]);
}

#[test]
fn lowered_flag_wait_without_acquire_is_caught() {
    let mut relax = |s: Stmt| match s {
        Stmt::WaitGe {
            mem,
            target,
            scope,
            budget,
            error,
            code,
            why: Invariant::PeerFlagHandshake,
            ..
        } => {
            vec![Stmt::WaitGe {
                mem,
                target,
                ordering: Ordering::Relaxed,
                scope,
                budget,
                error,
                code,
                why: Invariant::PeerFlagHandshake,
            }]
        }
        s => vec![s],
    };
    caught(fused(), &mut relax, &[FindingKind::StaleRead]);
}

#[test]
fn lowered_peer_reads_without_waits_are_caught() {
    let mut drop_waits = |s: Stmt| match s {
        Stmt::WaitGe {
            why: Invariant::PeerFlagHandshake,
            ..
        } => vec![],
        s => vec![s],
    };
    caught(
        fused(),
        &mut drop_waits,
        &[FindingKind::StaleRead, FindingKind::Mismatch],
    );
}

#[test]
fn lowered_grid_barrier_at_workgroup_scope_is_caught() {
    let mut narrow = |s: Stmt| match s {
        Stmt::Atomic {
            dst,
            op,
            mem,
            value,
            ordering,
            why: Invariant::OneArrivalPerWorkgroup,
            ..
        } => {
            vec![Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                scope: Scope::Workgroup,
                why: Invariant::OneArrivalPerWorkgroup,
            }]
        }
        s => vec![s],
    };
    caught(fused(), &mut narrow, &[FindingKind::StaleRead]);
}

#[test]
fn lowered_publish_without_the_workgroup_barrier_before_the_flag_is_caught() {
    // Drop the barrier that orders every lane's payload stores before lane 0's release of the
    // flag: the release then covers only lane 0's own stores.
    let mut p = fused();
    let body = std::mem::take(&mut p.lowered.body);
    let mut out: Block = Vec::new();
    for s in body {
        let releases_flag = matches!(&s, Stmt::If { then_body, .. }
            if then_body.iter().any(|t| matches!(t, Stmt::Atomic { op: AtomicOp::Store, why: Invariant::PeerFlagHandshake, .. })));
        if releases_flag && matches!(out.last(), Some(Stmt::WorkgroupBarrier)) {
            out.pop();
        }
        out.push(s);
    }
    p.lowered.body = out;
    caught(p, &mut |s| vec![s], &[FindingKind::StaleRead]);
}

/// The per-lane flag waits (lane p acquires peer p's flag) are followed by one workgroup barrier,
/// which hands what each lane acquired to the whole workgroup: without it, lanes read peers'
/// payloads that only the waiting lanes have acquired.
#[test]
fn lowered_per_lane_waits_without_the_barrier_after_them_are_caught() {
    let mut p = fused();
    let body = std::mem::take(&mut p.lowered.body);
    let mut out: Block = Vec::new();
    let mut after_wait = false;
    let mut dropped = 0;
    for s in body {
        let waits = matches!(&s, Stmt::If { then_body, .. }
            if then_body.iter().any(|t| matches!(t, Stmt::WaitGe { why: Invariant::PeerFlagHandshake, .. })));
        if after_wait && matches!(s, Stmt::WorkgroupBarrier) {
            after_wait = false;
            dropped += 1;
            continue;
        }
        after_wait |= waits;
        out.push(s);
    }
    assert!(dropped > 0, "no per-lane wait found");
    p.lowered.body = out;
    caught(p, &mut |s| vec![s], &[FindingKind::StaleRead]);
}
