//! Replay (DESIGN.md §5.4, §10): every kernel of the set that synchronises — a grid barrier,
//! cross-rank flags, a split-K arrival — is simulated as a captured graph is replayed: the same
//! launch, with the same arguments, many times in a row on the same state, ranks skewed against
//! each other (a rank may start its next replay while a peer is still in the previous one).
//! Nothing the host passes changes between replays: split-K arrivals and grid barriers count
//! weighted tickets on never-reset counters (`codegen/src/lowered/ticket.rs`), flags count the
//! epoch that lives on the device (`epoch_state`); each replay's outputs are checked against the
//! f64 oracle of its own inputs. Then the mutants the simulator must report:
//! - the ticket without its weights (every arrival adds 1): where a round is not a power of two
//!   its boundaries drift from the second replay on, and a split-K tile picks the wrong last
//!   arriver or a grid barrier opens early or never;
//! - a device epoch whose advance is frozen (lane 0 of every workgroup adds 0 to its
//!   `epoch_state` word): from the second replay on, every flag of the launch is already
//!   "passed";
//! - an advance without the workgroup barrier before it: lane 0 advances the word while a
//!   lagging lane of its workgroup has yet to load this launch's epoch from it, so that lane
//!   runs one epoch ahead of its workgroup (refused by the validator).

mod support;

use support::rewrite;

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Schedule, lower};
use wavefuse_codegen::lowered::{AtomicOp, Base, Expr, Invariant, ParamKind, Purpose, Stmt};
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::KernelId;
use wavefuse_harness::Shapes;
use wavefuse_harness::sim::{
    Config, Prepared, SmallShapes, prepare_config, summary, sweep_replayed, sweep_replayed_from,
};
use wavefuse_harness::sim::{small_kernel, small_schedule};
use wavefuse_harness::suite::tolerance;

const SEED: u64 = 0x8E_91A7;
/// Replays per schedule: epochs 1..=6 on one set of counters, flags and epoch state.
const REPLAYS: u32 = 6;
const SCHEDULES: u64 = 4;

/// Whether the lowered kernel synchronises across workgroups or ranks: a counter (split-K
/// arrivals, grid barriers, the device epoch) or flags.
fn synchronises(p: &Prepared) -> bool {
    p.lowered.params.values().any(|d| {
        matches!(
            &d.kind,
            ParamKind::Array {
                purpose: Purpose::Counter | Purpose::Flags,
                ..
            } | ParamKind::PeerArrays {
                purpose: Purpose::Flags,
                ..
            }
        )
    })
}

/// The set's kernels at `tp` whose lowering for `arch` synchronises.
fn replayable(tp: u32, arch: Arch, batch: usize) -> Vec<(KernelId, Prepared)> {
    KernelId::ALL
        .into_iter()
        .filter_map(|id| {
            let c = Config {
                batch,
                ..Config::new(tp, arch)
            };
            let p = match prepare_config(id, &c, &SmallShapes::DEFAULT) {
                Ok(p) => p,
                Err(e) if e.is_unsupported() => return None,
                Err(e) => panic!("{id}@{arch} tp{tp}: {e}"),
            };
            synchronises(&p).then_some((id, p))
        })
        .collect()
}

#[test]
fn replayed_launches_are_clean_and_match_the_oracle_both_targets() {
    let mut seen = Vec::new();
    for arch in Arch::ALL {
        for (tp, batch) in [(1, 1), (2, 1), (4, 2)] {
            for (id, p) in replayable(tp, arch, batch) {
                assert!(
                    p.lowered.epoch.is_none(),
                    "{id}@{arch}: a generated kernel takes no host epoch"
                );
                let s =
                    sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
                let text = summary(&p, &s);
                let (tol, _) = tolerance(id);
                assert!(
                    s.findings.is_empty() && s.failing == 0 && s.max_rel_l2 <= tol,
                    "{id}@{arch} tp{tp} over {REPLAYS} replays: {text}"
                );
                seen.push(format!("{id}@{arch}_tp{tp}"));
            }
        }
    }
    // The allreduce kernels synchronise at every TP > 1, on both targets.
    for want in [
        "allreduce_residual@gfx906_tp2",
        "gemv_int4_allreduce_rmsnorm@gfx906_tp4",
        "allreduce_residual_rmsnorm@sm90_tp2",
        "allreduce_int8@sm90_tp4",
    ] {
        assert!(
            seen.iter().any(|s| s == want),
            "{want} not simulated: {seen:?}"
        );
    }
}

/// Every workgroup's `epoch_state[wg] += 1` becomes `+= 0`: the epoch stays 1 forever.
fn freeze_the_advance(p: &mut Prepared) {
    let state = p.lowered.epoch_state.expect("a device epoch");
    let mut frozen = 0;
    let body = std::mem::take(&mut p.lowered.body);
    p.lowered.body = rewrite(body, &mut |s| match s {
        Stmt::Atomic {
            dst: None,
            op: AtomicOp::Add,
            mem,
            ordering,
            scope,
            why: Invariant::MonotonicEpochs,
            ..
        } if mem.base == Base::Param(state) => {
            frozen += 1;
            vec![Stmt::Atomic {
                dst: None,
                op: AtomicOp::Add,
                mem,
                value: Some(Expr::u32(0)),
                ordering,
                scope,
                why: Invariant::MonotonicEpochs,
            }]
        }
        s => vec![s],
    });
    assert_eq!(frozen, 1, "one advance per kernel");
}

#[test]
fn a_frozen_device_epoch_is_caught_on_replay_both_targets() {
    for arch in Arch::ALL {
        for (tp, ids) in [
            (
                2,
                &[
                    KernelId::AllreduceResidual,
                    KernelId::GemvInt4AllreduceRmsnorm,
                ][..],
            ),
            (4, &[KernelId::AllreduceResidualRmsnorm][..]),
        ] {
            for (id, mut p) in replayable(tp, arch, 1) {
                if !ids.contains(&id) {
                    continue;
                }
                let clean =
                    sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
                assert_eq!(clean.failing, 0, "{id}@{arch}: {}", summary(&p, &clean));
                freeze_the_advance(&mut p);
                let s =
                    sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
                assert!(
                    s.failing * 2 >= SCHEDULES,
                    "{id}@{arch} tp{tp}: the frozen epoch caught on only {} of {SCHEDULES} schedules:\n{}",
                    s.failing,
                    summary(&p, &s)
                );
            }
        }
    }
}

/// One launch is not enough to see the frozen epoch: the mutant passes a single launch, which is
/// why the replay test replays.
#[test]
fn a_frozen_device_epoch_passes_one_launch() {
    let (id, mut p) = replayable(2, Arch::Gfx906, 1)
        .into_iter()
        .find(|(id, _)| *id == KernelId::AllreduceResidual)
        .expect("allreduce_residual synchronises at TP 2");
    freeze_the_advance(&mut p);
    let s = sweep_replayed(&p, SEED, 0, SCHEDULES, 1, |_, _| {}).expect("simulates");
    assert_eq!(s.failing, 0, "{id}: {}", summary(&p, &s));
}

/// Removes the workgroup barrier that precedes the exit advance (`if lane == 0 { epoch_state[wg]
/// += 1 }`, the last statement of the body).
fn drop_the_barrier_before_the_advance(p: &mut Prepared) {
    let body = &mut p.lowered.body;
    let n = body.len();
    assert!(
        matches!(&body[n - 1], Stmt::If { then_body, .. }
            if matches!(then_body[..], [Stmt::Atomic { why: Invariant::MonotonicEpochs, .. }])),
        "the body ends with the advance"
    );
    assert!(
        matches!(body[n - 2], Stmt::WorkgroupBarrier),
        "a workgroup barrier precedes the advance"
    );
    body.remove(n - 2);
}

/// The workgroup barrier before the advance (§5.4: lane 0 advances its workgroup's word only
/// once every lane has loaded it) is enforced by construction: without it, the lowered validator
/// refuses the kernel (§5.1's rule for every elected add on a counter: lane 0, directly after a
/// workgroup barrier). The simulator alone would not see this mutant in the set's kernels: each
/// of their bodies already has top-level workgroup barriers (those of its grid barriers and flag
/// rounds) that every lane passes after its entry load, so no schedule lets a lane lag past the
/// advance — which this test also checks, so that the day a kernel has none, the validator is
/// what stands between it and a lane reading the next launch's epoch.
#[test]
fn an_advance_without_its_workgroup_barrier_is_refused_both_targets() {
    use wavefuse_codegen::lowered::validate::validate;
    for arch in Arch::ALL {
        for (tp, id) in [
            (2, KernelId::AllreduceResidual),
            (2, KernelId::GemvInt4AllreduceRmsnorm),
            (4, KernelId::AllreduceResidualRmsnorm),
        ] {
            let Some((_, mut p)) = replayable(tp, arch, 1).into_iter().find(|(i, _)| *i == id)
            else {
                panic!("{id}@{arch} tp{tp} synchronises");
            };
            validate(&p.lowered).expect("the kernel as lowered is valid");
            drop_the_barrier_before_the_advance(&mut p);
            let err = validate(&p.lowered)
                .expect_err("an advance without its barrier is refused")
                .to_string();
            assert!(
                err.contains("does not follow a workgroup barrier") && err.contains("§5.1"),
                "{id}@{arch} tp{tp}: {err}"
            );
            // What the simulator sees: nothing, as the body's own barriers order the loads.
            let s = sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
            assert_eq!(s.failing, 0, "{id}@{arch} tp{tp}: {}", summary(&p, &s));
            assert!(
                p.lowered.body[..p.lowered.body.len() - 1]
                    .iter()
                    .any(|s| matches!(s, Stmt::WorkgroupBarrier)),
                "{id}@{arch} tp{tp}: a top-level workgroup barrier after the entry load"
            );
        }
    }
}

/// `id` at small shapes with its K split into `parts` (tiles · parts workgroups): K = 384 (three
/// GPTQ groups, 12 units of 4 words) for the GEMVs on the hidden size and the fused kernel's FFN
/// shard.
fn split_into(id: KernelId, arch: Arch, tp: u32, parts: u32) -> Prepared {
    let shapes = Shapes {
        batch: 1,
        ..Shapes::qwen27b(tp)
    };
    let small = SmallShapes {
        hidden: 384,
        ffn: 384,
        ..SmallShapes::DEFAULT
    };
    let ir = small_kernel(id, &shapes, &small).expect("small kernel");
    let s = Schedule {
        k_split: parts,
        k_unit_words: 4,
        x_in_lds: true,
        ..small_schedule(arch, &ir)
    };
    let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id}@{arch}: {e}"));
    Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    }
}

/// The weighted tickets' round arithmetic frozen at the first launch — the ticket scheme's
/// frozen epoch: a split-K verdict `((old + w) & (Q − 1)) == 0` becomes `old + w == Q`, a grid
/// barrier's target `(ticket & !(Q − 1)) + Q` becomes `Q`. Returns how many were frozen.
fn freeze_the_rounds(p: &mut Prepared) -> usize {
    use wavefuse_codegen::lowered::BinOp;
    fn verdict(e: Expr, frozen: &mut usize) -> Expr {
        match e {
            Expr::Bin(BinOp::Eq, a, b) if *b == Expr::u32(0) => match *a {
                Expr::Bin(BinOp::And, x, m) => match *m {
                    Expr::Int(mask, ty) => {
                        *frozen += 1;
                        Expr::bin(BinOp::Eq, *x, Expr::Int(mask + 1, ty))
                    }
                    m => Expr::bin(BinOp::Eq, Expr::bin(BinOp::And, *x, m), *b),
                },
                a => Expr::bin(BinOp::Eq, a, *b),
            },
            Expr::Select(c, a, b) => Expr::Select(Box::new(verdict(*c, frozen)), a, b),
            e => e,
        }
    }
    let mut frozen = 0;
    let body = std::mem::take(&mut p.lowered.body);
    p.lowered.body = rewrite(body, &mut |s| match s {
        // The split-K verdict, stored by the elected lane right after its arrival.
        Stmt::Store { mem, values } if matches!(values.as_slice(), [Expr::Select(..)]) => {
            let values = values
                .into_iter()
                .map(|v| verdict(v, &mut frozen))
                .collect();
            vec![Stmt::Store { mem, values }]
        }
        Stmt::WaitGe {
            mem,
            target: Expr::Bin(BinOp::Add, start, q),
            ordering,
            scope,
            budget,
            error,
            code,
            why,
        } if matches!(*start, Expr::Bin(BinOp::And, ..)) => {
            frozen += 1;
            vec![Stmt::WaitGe {
                mem,
                target: *q,
                ordering,
                scope,
                budget,
                error,
                code,
                why,
            }]
        }
        s => vec![s],
    });
    frozen
}

/// §5.4 by weighted tickets: a split-K round of 3 parts (Q = 4) and, in the fused kernel at
/// TP 1, its grid barrier, are clean replayed; with the round arithmetic frozen at the first
/// launch the second replay goes wrong — while one launch alone passes, which is why the test
/// replays.
#[test]
fn frozen_ticket_rounds_are_caught_on_replay_both_targets() {
    for arch in Arch::ALL {
        for id in [KernelId::GemvInt4, KernelId::GemvInt4AllreduceRmsnorm] {
            let mut p = split_into(id, arch, 1, 3);
            let clean =
                sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
            let (tol, _) = tolerance(id);
            assert!(
                clean.findings.is_empty() && clean.failing == 0 && clean.max_rel_l2 <= tol,
                "{id}@{arch}: {}",
                summary(&p, &clean)
            );
            let want = if id == KernelId::GemvInt4 { 1 } else { 2 };
            assert_eq!(
                freeze_the_rounds(&mut p),
                want,
                "{id}@{arch}: verdicts and barriers"
            );
            let once = sweep_replayed(&p, SEED, 0, SCHEDULES, 1, |_, _| {}).expect("simulates");
            assert_eq!(
                once.failing,
                0,
                "{id}@{arch}: one launch: {}",
                summary(&p, &once)
            );
            let s = sweep_replayed(&p, SEED, 0, SCHEDULES, REPLAYS, |_, _| {}).expect("simulates");
            assert_eq!(
                s.failing,
                SCHEDULES,
                "{id}@{arch}: frozen rounds caught on only {} of {SCHEDULES} schedules:\n{}",
                s.failing,
                summary(&p, &s)
            );
        }
    }
}

/// The state `e0` earlier launches leave a kernel with flags (DESIGN.md §5.4): every
/// `epoch_state` word `e0`, the grid barrier's counter `e0·B·Q` (B barriers of rounds of Q per
/// launch), every flag `e0·R` (R flag rounds per launch); the split-K tickets keep zero (any
/// multiple of their round is a round's start). With `consistent` false only the epoch words are
/// set: a history the counters do not share.
fn state_after(p: &Prepared, e0: u32, consistent: bool) -> Vec<(String, u32)> {
    let k = &p.lowered;
    let mut out = vec![("epoch_state".to_owned(), e0)];
    if !consistent {
        return out;
    }
    let per_launch = k.barriers_per_launch * wavefuse_codegen::lowered::ticket::round_len(k.grid);
    if k.barriers_per_launch > 0 {
        out.push(("grid_counter".into(), e0.wrapping_mul(per_launch)));
    }
    for d in k.params.values() {
        if matches!(
            &d.kind,
            ParamKind::PeerArrays {
                purpose: Purpose::Flags,
                ..
            }
        ) {
            out.push((d.name.clone(), e0.wrapping_mul(k.flag_rounds_per_launch)));
        }
    }
    out
}

/// Counters across the 2³² wrap: each kernel with flags, replayed from the state a long history
/// leaves ([`state_after`]) — once where the grid barrier's counter wraps during the replays, once
/// where the epoch itself (and with it every flag value) wraps — is clean and matches the oracle:
/// the barrier's round end `((e − 1)·B + i + 1)·Q`, the flag values and the wrap-safe waits agree
/// modulo 2³². The same replays from epoch words without the counters' history (a state no
/// history leaves) are caught: the test can fail.
#[test]
fn replays_across_the_counters_wrap_are_clean_both_targets() {
    let mut seen = 0;
    for arch in Arch::ALL {
        for (tp, batch) in [(2, 1), (4, 2)] {
            for (id, p) in replayable(tp, arch, batch) {
                let k = &p.lowered;
                if k.flag_rounds_per_launch == 0 {
                    continue;
                }
                let per_launch = (k.barriers_per_launch
                    * wavefuse_codegen::lowered::ticket::round_len(k.grid))
                .max(1);
                let (tol, _) = tolerance(id);
                // The counter wraps during the replays; then the epoch itself wraps.
                for e0 in [u32::MAX / per_launch - 2, u32::MAX - 2] {
                    let preset = state_after(&p, e0, true);
                    let s =
                        sweep_replayed_from(&p, SEED, 0, SCHEDULES, REPLAYS, &preset, |_, _| {})
                            .expect("simulates");
                    assert!(
                        s.findings.is_empty() && s.failing == 0 && s.max_rel_l2 <= tol,
                        "{id}@{arch} tp{tp} from {preset:?}: {}",
                        summary(&p, &s)
                    );
                }
                let bad = state_after(&p, u32::MAX - 2, false);
                let s = sweep_replayed_from(&p, SEED, 0, SCHEDULES, REPLAYS, &bad, |_, _| {})
                    .expect("simulates");
                assert!(
                    s.failing > 0,
                    "{id}@{arch} tp{tp}: epoch words without the counters' history not caught: {}",
                    summary(&p, &s)
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 8, "{seen} kernels with flags simulated");
}
