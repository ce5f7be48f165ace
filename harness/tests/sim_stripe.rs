//! The stripe grid (`Schedule::stripe_workgroups`, `codegen/src/lower/splitk.rs`) in the
//! protocol simulator: `gemv_int4` at small shapes on both targets, at grids that cut the tiles'
//! K unevenly, that give one workgroup every tile, and that leave workgroups without work; at
//! batch 1 to 64 (sm_90: the tensor-core path unstaged, and staged in phases at batch 64), each
//! against the f64 reference on fresh random inputs over seeded schedules of three back-to-back
//! launches on the same never-reset counters (a replayed graph). Then each piece of the stripe's
//! synchronisation weakened at a time, and the simulator must catch it:
//! - the designated arrival's weight from the most contributors any tile has instead of the
//!   tile's own (§5.4: the tile's counter leaves its round boundary, the next launch's verdict is
//!   wrong);
//! - the arrival without its release or its acquire half (§5.2).

mod support;

use support::rewrite;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::Ordering;
use wavefuse_codegen::lower::{LowerError, Schedule, lower};
use wavefuse_codegen::lowered::{AtomicOp, BinOp, Expr, Stmt};
use wavefuse_codegen::sim::{FindingKind, PeerTable};
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_harness::{KernelId, Shapes};

const SEED: u64 = 0x57_21BE;
/// Seeded schedules per clean case (each its own inputs, three launches each).
const SCHEDULES: u64 = 3;
/// Seeded schedules a mutant is swept over; it must be caught on at least half.
const MUTANT_SCHEDULES: u64 = 8;
/// K = 256 (two GPTQ groups), N = 256 per rank.
const SMALL: SmallShapes = SmallShapes {
    hidden: 256,
    ffn: 256,
    q: 16,
    kv: 16,
};

/// `gemv_int4` at TP 1 and `batch`, the simulator's schedule with `spec` over it.
fn prepare(arch: Arch, batch: usize, spec: &str) -> Result<Prepared, LowerError> {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(1)
    };
    let ir = small_kernel(KernelId::GemvInt4, &shapes, &SMALL).expect("small kernel");
    let s: Schedule = small_schedule(arch, &ir).with_overrides(spec)?;
    let lowered = lower(&ir, arch, &s)?;
    Ok(Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    })
}

/// The stripe's shape, from the comment the lowering writes: (tiles, granules per tile).
fn stripe_shape(p: &Prepared) -> (usize, usize) {
    let text = p.lowered.to_string();
    let line = text
        .lines()
        .find(|l| l.contains("stripe grid:"))
        .unwrap_or_else(|| panic!("no stripe grid in\n{text}"));
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[1], nums[2])
}

fn clean(p: &Prepared, label: &str) {
    support::matches_reference(p, SEED, SCHEDULES, label);
}

/// Grids at small shapes: fewer workgroups than tiles (each takes several tiles' segments), not a
/// divisor of the granules (contributors per tile vary), one workgroup, and more workgroups than
/// granules (some stripes empty).
#[test]
fn stripe_grids_are_clean_in_the_simulator_on_both_targets() {
    for arch in Arch::ALL {
        for batch in [1, 5, 16] {
            let probe = prepare(arch, batch, "k_unit_words=4,stripe_workgroups=3")
                .unwrap_or_else(|e| panic!("{arch} b{batch}: {e}"));
            let (tiles, per) = stripe_shape(&probe);
            for g in [1, 3, 7, tiles + 1, tiles * per + 3] {
                let spec = format!("k_unit_words=4,stripe_workgroups={g}");
                let p = prepare(arch, batch, &spec)
                    .unwrap_or_else(|e| panic!("{arch} b{batch} {spec}: {e}"));
                // At most one workgroup per granule (more would leave stripes empty).
                assert_eq!(
                    p.lowered.grid as usize,
                    g.min(tiles * per),
                    "{arch} b{batch}: the grid is the stripe's"
                );
                clean(
                    &p,
                    &format!("{arch} batch {batch} {spec} ({tiles} tiles x {per})"),
                );
            }
        }
    }
}

/// sm_90 at batch 64: the tensor-core path's activations staged in LDS in phases of one unit per
/// K warp (the batch-64 default's form), so every segment restages them behind its barriers.
#[test]
fn stripe_with_phased_stage_is_clean_at_batch_64_sm90() {
    for spec in [
        "k_unit_words=4,x_in_lds=true,x_phase_units=2,threads_per_column=2,columns_per_workgroup=32,stripe_workgroups=5",
        "k_unit_words=4,x_in_lds=true,x_phase_units=2,threads_per_column=2,columns_per_workgroup=32,stripe_workgroups=2",
    ] {
        let p = prepare(Arch::Sm90, 64, spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        clean(&p, &format!("sm90 batch 64 {spec}"));
    }
}

/// What the stripe refuses, with its reason.
#[test]
fn stripe_refusals_name_the_reason() {
    let depth2 = prepare(
        Arch::Sm90,
        64,
        "k_unit_words=4,x_in_lds=true,x_phase_units=2,threads_per_column=2,columns_per_workgroup=32,pipeline_depth=2,stripe_workgroups=4",
    )
    .err()
    .expect("phases at depth 2 are refused");
    assert!(
        depth2.to_string().contains("pipeline_depth = 1"),
        "{depth2}"
    );
    // A fused kernel (allreduce and RMSNorm after the GEMV).
    let shapes = Shapes {
        batch: 1,
        ..Shapes::qwen27b(2)
    };
    let ir = small_kernel(KernelId::GemvInt4AllreduceRmsnorm, &shapes, &SMALL).expect("small");
    let s = small_schedule(Arch::Sm90, &ir)
        .with_overrides("stripe_workgroups=4")
        .expect("a field");
    let fused = lower(&ir, Arch::Sm90, &s).expect_err("refused");
    assert!(
        fused.to_string().contains("allreduce or RMSNorm"),
        "{fused}"
    );
}

/// A stripe whose tiles have different numbers of contributors (3 workgroups over tiles of 4
/// granules): the mutants below need a tile with fewer than the most.
fn uneven() -> Prepared {
    prepare(Arch::Sm90, 1, "k_unit_words=4,stripe_workgroups=3").expect("lowers")
}

fn caught(p: Prepared, kinds: &[FindingKind], label: &str) {
    let s = sweep(&p, SEED, 0, MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &s);
    eprintln!("{label}: {}", text.lines().next().unwrap_or(""));
    assert!(
        s.failing * 2 >= MUTANT_SCHEDULES,
        "{label}: caught on only {} of {MUTANT_SCHEDULES} schedules:\n{text}",
        s.failing
    );
    assert!(
        s.findings.iter().any(|f| kinds.contains(&f.first.kind)),
        "{label}: {text}"
    );
}

/// §5.4: the designated arrival adds `Q − P + 1` with the tile's own `P` (its contributors, a
/// register); with the most contributors of any tile instead, a tile with fewer leaves its
/// counter off the round boundary, and the next launch's last arriver is misjudged.
#[test]
fn stripe_weight_from_the_most_contributors_is_caught() {
    let mut p = uneven();
    let text = p.lowered.to_string();
    let most: i64 = text
        .split(" parts per tile")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the stripe's comment names the most contributors");
    let mut replaced = 0;
    let mut f = |mut s: Stmt| {
        if let Stmt::Atomic {
            op: AtomicOp::Add,
            value: Some(Expr::Select(_, a, _)),
            ..
        } = &mut s
            && let Expr::Bin(BinOp::Sub, q1, _) = a.as_ref()
        {
            // `Q + 1 − contributors` → the constant `Q + 1 − most`.
            let Expr::Int(v, ty) = **q1 else {
                panic!("Q + 1 is a constant: {q1:?}")
            };
            **a = Expr::Int(v - most, ty);
            replaced += 1;
        }
        vec![s]
    };
    p.lowered.body = rewrite(std::mem::take(&mut p.lowered.body), &mut f);
    assert!(replaced > 0, "the arrival's weight was found");
    caught(
        p,
        &[FindingKind::Mismatch],
        "weight of the most contributors",
    );
}

/// The arrival with `ordering` instead of acq_rel: without its release half a contributor's
/// partials are not published to the tile's last arriver, without its acquire half the other
/// contributors' partials are not visible to it (§5.2).
fn arrival_ordered(ordering: Ordering, label: &str) {
    let mut p = uneven();
    p.lowered.body = rewrite(
        std::mem::take(&mut p.lowered.body),
        &mut support::arrival_ordered(ordering),
    );
    caught(p, &[FindingKind::StaleRead], label);
}

#[test]
fn stripe_arrival_without_release_is_caught() {
    arrival_ordered(Ordering::Acquire, "arrival without release");
}

#[test]
fn stripe_arrival_without_acquire_is_caught() {
    arrival_ordered(Ordering::Release, "arrival without acquire");
}
