//! Replay (DESIGN.md §5.4, §10): every kernel of the set whose synchronisation counts epochs — a
//! grid barrier, cross-rank flags, a split-K arrival — is simulated as a captured graph is
//! replayed: the same launch, with the same arguments, many times in a row on the same state,
//! ranks skewed against each other (a rank may start its next replay while a peer is still in the
//! previous one). The epoch lives on the device (`epoch_state`), so nothing the host passes changes
//! between replays; each replay's outputs are checked against the f64 oracle of its own inputs.
//! Then two mutants of the device-side advance, each of which the simulator must report: one that
//! freezes it (lane 0 of every workgroup adds 0 to its `epoch_state` word): from the second replay
//! on, every barrier and flag of the launch is already "passed"; and one that drops the workgroup
//! barrier before it: lane 0 advances the word while a lagging lane of its workgroup has yet to
//! load this launch's epoch from it, so that lane runs one epoch ahead of its workgroup.

mod support;

use support::rewrite;

use wavefuse_codegen::Arch;
use wavefuse_codegen::lowered::{AtomicOp, Base, Expr, Invariant, Stmt};
use wavefuse_harness::KernelId;
use wavefuse_harness::sim::{
    Config, Prepared, SmallShapes, prepare_config, summary, sweep_replayed,
};
use wavefuse_harness::suite::tolerance;

const SEED: u64 = 0x8E_91A7;
/// Replays per schedule: epochs 1..=6 on one set of counters, flags and epoch state.
const REPLAYS: u32 = 6;
const SCHEDULES: u64 = 4;

/// The set's kernels at `tp` whose lowering for `arch` keeps a device epoch.
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
            p.lowered.epoch_state.is_some().then_some((id, p))
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
