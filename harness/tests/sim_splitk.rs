//! Split-K with a last-arriver finish (`codegen/src/lower/splitk.rs`) in the protocol simulator:
//! the GPTQ GEMV kernels of the set at small shapes with `k_split` 2, 4 and 5, both targets, clean
//! over seeded schedules (three back-to-back launches each on the same never-reset counters,
//! lane and wave granularity, workgroup skew); then each synchronisation step of the protocol
//! weakened at a time, and the simulator must catch it on the same schedules.

mod support;

use support::rewrite;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::Ordering;
use wavefuse_codegen::lower::{AllreduceProtocol, Schedule, lower, lower_structured};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::{AtomicOp, Block, Expr, Stmt};
use wavefuse_codegen::sim::{FindingKind, PeerTable};
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_harness::{KernelId, Shapes};

const SCHEDULES: u64 = 24;
const SEED: u64 = 0x59_174;

/// `id` at the simulator's small shapes (batch `batch`, TP 1), lowered for `arch` with the small
/// schedule split into `parts` K parts of 4-word units.
fn split(id: KernelId, arch: Arch, batch: usize, parts: u32) -> Prepared {
    split_tp(id, arch, batch, parts, 1, None)
}

/// [`split`] at TP `tp`, optionally with another allreduce protocol.
fn split_tp(
    id: KernelId,
    arch: Arch,
    batch: usize,
    parts: u32,
    tp: u32,
    protocol: Option<AllreduceProtocol>,
) -> Prepared {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
    let mut s = Schedule {
        k_split: parts,
        k_unit_words: 4,
        // the tensor-core path (sm90) stages the activations in LDS; the FMA path ignores it
        x_in_lds: true,
        ..small_schedule(arch, &ir)
    };
    if let Some(p) = protocol {
        s = s.with_protocol(p);
    }
    let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id}@{arch}: {e}"));
    assert_eq!(
        lowered.grid % parts,
        0,
        "{id}: the grid is tiles x parts ({} workgroups)",
        lowered.grid
    );
    Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    }
}

#[test]
fn split_k_kernels_are_clean_in_the_simulator() {
    for id in [
        KernelId::GemvInt4,
        KernelId::GemvInt4DualSilu,
        KernelId::GemvInt4Qkv,
    ] {
        for arch in Arch::ALL {
            // Batch 5: the row-spread finish (`rows_per_sweep`, batch ≥ 4: 2 rows per sweep on
            // sm_90's 64-lane small workgroups, 4 on gfx906's 128) leaves lanes of a last sweep
            // past the batch, which must not store.
            for (batch, parts) in [(1, 2), (2, 4), (5, 2)] {
                let p = split(id, arch, batch, parts);
                let s = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
                let text = summary(&p, &s);
                eprintln!(
                    "{id}@{arch} batch {batch} k_split {parts}: {}",
                    text.lines().next().unwrap_or("")
                );
                assert!(s.findings.is_empty() && s.failing == 0, "{text}");
            }
        }
    }
}

/// Five K parts (the sm_90 default's balanced split at TP > 1 for K = 5120): K = 640 is 20 units
/// of 4 words, 4 per part; every part arrives once on the tile's counter, the fifth adds them
/// (§5.1, §5.4: the last-arrival test is `epoch · 5 − 1`).
#[test]
fn five_part_split_k_is_clean_in_the_simulator() {
    let small = SmallShapes {
        hidden: 640,
        ..SmallShapes::DEFAULT
    };
    for id in [KernelId::GemvInt4, KernelId::GemvInt4Qkv] {
        for arch in Arch::ALL {
            let shapes = Shapes::qwen27b(1);
            let ir = small_kernel(id, &shapes, &small).expect("small kernel");
            let s = Schedule {
                k_split: 5,
                k_unit_words: 4,
                x_in_lds: true,
                ..small_schedule(arch, &ir)
            };
            let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id}@{arch}: {e}"));
            let p = Prepared {
                ir,
                lowered,
                shapes: Some(shapes),
                peer_table: PeerTable::Shared,
            };
            let sw = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &sw);
            assert!(
                sw.findings.is_empty() && sw.failing == 0,
                "{id}@{arch}: {text}"
            );
        }
    }
}

fn gemv() -> Prepared {
    split(KernelId::GemvInt4, Arch::Sm90, 1, 2)
}

/// The mutant is caught on at least half the schedules, with one of `kinds`.
fn caught(p: Prepared, kinds: &[FindingKind]) {
    let s = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
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

/// Whether `s` is the `if local_id == 0` block holding the split-K arrival.
fn is_arrival(s: &Stmt) -> bool {
    matches!(s, Stmt::If { then_body, .. }
        if then_body.iter().any(|t| matches!(t, Stmt::Atomic { op: AtomicOp::Add, dst: Some(_), .. })))
}

/// The arrival with another ordering.
fn arrival_ordered(p: &mut Prepared, ordering: Ordering) {
    let body = std::mem::take(&mut p.lowered.body);
    p.lowered.body = rewrite(body, &mut support::arrival_ordered(ordering));
}

/// The release half is what publishes this part's partials to the last arriver.
#[test]
fn split_k_arrival_without_release_is_caught() {
    let mut p = gemv();
    arrival_ordered(&mut p, Ordering::Acquire);
    caught(p, &[FindingKind::StaleRead]);
}

/// The acquire half is what makes the other parts' partials visible to the last arriver.
#[test]
fn split_k_arrival_without_acquire_is_caught() {
    let mut p = gemv();
    arrival_ordered(&mut p, Ordering::Release);
    caught(p, &[FindingKind::StaleRead]);
}

/// §5.1: without the barrier before the arrival, lane 0's release covers only its own stores.
#[test]
fn split_k_arrival_without_the_barrier_before_it_is_caught() {
    let mut p = gemv();
    let mut out: Block = Vec::new();
    for s in std::mem::take(&mut p.lowered.body) {
        if is_arrival(&s) {
            // the last statement before the arrival that is not a comment is the barrier
            let at = out
                .iter()
                .rposition(|t| !matches!(t, Stmt::Comment(_)))
                .expect("statements before the arrival");
            assert!(matches!(out[at], Stmt::WorkgroupBarrier), "{:?}", out[at]);
            out.remove(at);
        }
        out.push(s);
    }
    p.lowered.body = out;
    caught(p, &[FindingKind::StaleRead]);
}

/// Without the barrier after the arrival, lanes read the verdict before lane 0 writes it, and
/// nothing orders their reads of the partials after lane 0's acquire.
#[test]
fn split_k_verdict_without_the_barrier_after_the_arrival_is_caught() {
    let mut p = gemv();
    let body = std::mem::take(&mut p.lowered.body);
    let mut out: Block = Vec::new();
    let mut skip_next_barrier = false;
    for s in body {
        if skip_next_barrier && matches!(s, Stmt::WorkgroupBarrier) {
            skip_next_barrier = false;
            continue;
        }
        skip_next_barrier |= is_arrival(&s);
        out.push(s);
    }
    p.lowered.body = out;
    caught(
        p,
        &[
            FindingKind::UninitRead,
            FindingKind::StaleRead,
            FindingKind::WriteRace,
        ],
    );
}

/// §5.1: every lane arrives, so the counter passes the launch's target early (or skips it).
#[test]
fn split_k_arrival_by_every_lane_is_caught() {
    let mut p = gemv();
    let mut f = |s: Stmt| {
        if is_arrival(&s) {
            let Stmt::If { then_body, .. } = s else {
                unreachable!()
            };
            then_body
        } else {
            vec![s]
        }
    };
    p.lowered.body = rewrite(std::mem::take(&mut p.lowered.body), &mut f);
    caught(
        p,
        &[
            FindingKind::Mismatch,
            FindingKind::StaleRead,
            FindingKind::WriteRace,
        ],
    );
}

/// §5.4: a last-arrival test that ignores the epoch (`old == parts − 1`) only works on the first
/// launch on a zeroed counter; later launches never finish, and their outputs stay poisoned.
#[test]
fn split_k_last_arrival_without_the_epoch_is_caught() {
    let mut p = gemv();
    let parts = 2;
    let mut f = |s: Stmt| match s {
        Stmt::Store { mem, values } if matches!(values.as_slice(), [Expr::Select(..)]) => {
            let Expr::Select(cond, a, b) = &values[0] else {
                unreachable!()
            };
            let Expr::Bin(op, old, _) = cond.as_ref() else {
                panic!("the verdict compares the arrival with its target")
            };
            let cond = Expr::bin(*op, old.as_ref().clone(), Expr::u32(parts - 1));
            vec![Stmt::Store {
                mem,
                values: vec![Expr::Select(Box::new(cond), a.clone(), b.clone())],
            }]
        }
        s => vec![s],
    };
    p.lowered.body = rewrite(std::mem::take(&mut p.lowered.body), &mut f);
    caught(p, &[FindingKind::Mismatch]);
}

// The fused kernel with split-K: every K part of a tile arrives, only the tile's last arriver
// publishes the tile's allreduce slice, waits on the peers, writes the tile's norm partials and
// normalises; every workgroup, finisher or not, passes the grid barrier.

const FUSED: KernelId = KernelId::GemvInt4AllreduceRmsnorm;

#[test]
fn fused_split_k_is_clean_in_the_simulator() {
    for arch in Arch::ALL {
        for (tp, batch, parts, protocol) in [
            (1, 1, 2, None),
            (2, 1, 2, None),
            (2, 2, 4, Some(AllreduceProtocol::Push)),
            (4, 1, 4, None),
        ] {
            let p = split_tp(FUSED, arch, batch, parts, tp, protocol);
            let s = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &s);
            eprintln!(
                "{FUSED}@{arch} tp {tp} batch {batch} k_split {parts} {protocol:?}: {}",
                text.lines().next().unwrap_or("")
            );
            assert!(s.findings.is_empty() && s.failing == 0, "{text}");
        }
    }
}

/// The fused kernel at TP 2 with `k_split` 2, its structured body rewritten by `f` before the
/// synchronisation is expanded (the validator is not asked: the mutants are what it would not
/// see, or what it is not there to see).
fn fused_mutant(f: impl FnOnce(Block) -> Block) -> Prepared {
    let shapes = Shapes {
        batch: 1,
        ..Shapes::qwen27b(2)
    };
    let arch = Arch::Sm90;
    let ir = small_kernel(FUSED, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
    let s = Schedule {
        k_split: 2,
        k_unit_words: 4,
        x_in_lds: true,
        ..small_schedule(arch, &ir)
    };
    let mut lowered = lower_structured(&ir, arch, &s).expect("lowers");
    lowered.body = f(std::mem::take(&mut lowered.body));
    expand_sync(&mut lowered);
    Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    }
}

/// Whether `s` is the `if last == 1` block of the tile's finisher that holds the flag publish.
fn is_finisher_with_publish(s: &Stmt) -> bool {
    matches!(s, Stmt::If { then_body, else_body, .. }
        if else_body.is_empty() && then_body.iter().any(|t| matches!(t, Stmt::PublishFlag { .. })))
}

/// Only the last arriver has the tile's sums: a flag published by every K part releases a
/// payload the finisher has not written yet, and the peers read it (§5.3).
#[test]
fn fused_split_k_flag_published_by_every_part_is_caught() {
    let p = fused_mutant(|body| {
        let mut out: Block = Vec::new();
        let mut found = false;
        for s in body {
            if !is_finisher_with_publish(&s) {
                out.push(s);
                continue;
            }
            found = true;
            let Stmt::If {
                cond, then_body, ..
            } = s
            else {
                unreachable!()
            };
            let at = then_body
                .iter()
                .position(|t| matches!(t, Stmt::PublishFlag { .. }))
                .expect("the publish");
            let mut before = then_body;
            let after = before.split_off(at + 1);
            let publish = before.pop().expect("the publish");
            out.push(Stmt::If {
                cond: cond.clone(),
                then_body: before,
                else_body: vec![],
            });
            out.push(publish);
            out.push(Stmt::If {
                cond,
                then_body: after,
                else_body: vec![],
            });
        }
        assert!(found, "the finisher's block with the publish");
        out
    });
    caught(
        p,
        &[
            FindingKind::StaleRead,
            FindingKind::Mismatch,
            FindingKind::RanksDisagree,
        ],
    );
}

/// The grid barrier counts every workgroup of the grid: passed by the finishers alone it never
/// opens (§5.1, §5.9), and the bounded waits report it (§5.10).
#[test]
fn fused_split_k_grid_barrier_passed_by_finishers_only_is_caught() {
    let p = fused_mutant(|body| {
        let mut out: Block = Vec::new();
        for s in body {
            if matches!(s, Stmt::GridBarrier { .. }) {
                let Some(Stmt::If { then_body, .. }) =
                    out.iter_mut().rev().find(|t| matches!(t, Stmt::If { .. }))
                else {
                    panic!("the finisher's block before the grid barrier")
                };
                then_body.push(s);
            } else {
                out.push(s);
            }
        }
        out
    });
    caught(
        p,
        &[
            FindingKind::Timeout,
            FindingKind::Deadlock,
            FindingKind::ErrorWord,
        ],
    );
}
