//! The sm_90 tensor-core INT4 GEMV with its weights through an LDS ring filled by asynchronous
//! copies (`async_stages`, issue 40: bytes in flight that cost no registers). Each lane copies
//! its own operands of the unit `stages − 1` ahead (`Stmt::AsyncCopy`, one group per unit) and
//! waits for the unit it computes (`Stmt::AsyncWait`) before reading them back.
//!
//! The generated kernels run in the protocol simulator against the f64 reference on fresh
//! random inputs (every schedule its own data), held to the FP16 outputs' tolerance (relative L2
//! error ≤ 1e-3, `wavefuse_codegen::sim::tolerance`). The simulator writes a copy's LDS words
//! only at the wait that completes its group and reports any access before it, so a kernel
//! without its wait, or waiting for one group too few, is caught (§5.2).

mod support;

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Int4Dot, LowerError, Schedule, lower};
use wavefuse_codegen::lowered::Stmt;
use wavefuse_codegen::sim::{FindingKind, PeerTable};
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_kernels::{KernelId, Shapes};

const ARCH: Arch = Arch::Sm90;
/// Two GPTQ groups of 128 along K for every GEMV (hidden → FFN and FFN → hidden).
const SMALL: SmallShapes = SmallShapes {
    hidden: 256,
    ffn: 256,
    q: 16,
    kv: 16,
};
const SCHEDULES: u64 = 2;
const SEED: u64 = 0xA5C0;

fn prepare(id: KernelId, tp: u32, batch: usize, spec: &str) -> Result<Prepared, LowerError> {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SMALL).expect("small kernel");
    let s: Schedule = small_schedule(ARCH, &ir).with_overrides(spec)?;
    assert_eq!(s.int4_dot, Int4Dot::Mma, "{id}: the tensor-core path");
    let lowered = lower(&ir, ARCH, &s)?;
    Ok(Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    })
}

/// The kernel, or `None` (said on stderr) where the LDS limit refuses the form.
fn prepare_unless_lds(
    id: KernelId,
    (tp, batch): (u32, usize),
    spec: &str,
    label: &str,
) -> Option<Prepared> {
    match prepare(id, tp, batch, spec) {
        Ok(p) => Some(p),
        Err(LowerError::Schedule(m)) if m.contains("LDS") => {
            eprintln!("{label}: refused: {m}");
            None
        }
        Err(e) => panic!("{label}: {e}"),
    }
}

fn count(body: &[Stmt], f: &dyn Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    support::rewrite(body.to_vec(), &mut |s| {
        n += usize::from(f(&s));
        vec![s]
    });
    n
}

/// The ring in every form the lowering offers: 2 to 4 stages, units of one MMA step (so a warp
/// cycles through the ring several times) and of a whole group, the activations staged at once,
/// in phases (then a ring too: the asynchronous stage, tested below) and not at all, the scale
/// per unit and on the weights; `gemv_int4` at batch 1, 16 and 64, the fused kernel (TP 2) and
/// the two-weight kernel at batch 16.
#[test]
fn mma_async_ring_matches_the_reference_sm90() {
    // The 32-column tile of two K warps (the default's at batch 1 and 16) named where a spec
    // names none: the default's tile at batch 64 is another (`whole_rounds`), which these
    // phase and ring forms do not fit.
    let specs = [
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,async_stages=2,k_unit_words=4,k_split=1",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,async_stages=3,k_unit_words=4,k_split=1,x_in_lds=false",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,async_stages=4,k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,async_stages=4,k_unit_words=16,k_split=1,mma_scale=weight",
        "async_stages=3,k_unit_words=4,k_split=2,columns_per_workgroup=64,threads_per_column=1,x_in_lds=true,x_phase_units=1",
    ];
    let cases: [(KernelId, u32, &[usize]); 3] = [
        (KernelId::GemvInt4, 1, &[1, 16, 64]),
        (KernelId::GemvInt4AllreduceRmsnorm, 2, &[16]),
        (KernelId::GemvInt4DualSilu, 1, &[16]),
    ];
    for (id, tp, batches) in cases {
        for &batch in batches {
            for spec in specs {
                let label = format!("{id} tp {tp} batch {batch} `{spec}`");
                // Only the LDS limit may refuse a form here (the two-weight kernel's
                // whole-part stage past it), with the numbers.
                let Some(p) = prepare_unless_lds(id, (tp, batch), spec, &label) else {
                    continue;
                };
                let copies = count(&p.lowered.body, &|s| matches!(s, Stmt::AsyncCopy { .. }));
                assert!(copies > 0, "{label}: no asynchronous copy\n{}", p.lowered);
                support::matches_reference(&p, SEED ^ batch as u64, SCHEDULES, &label);
            }
        }
    }
}

/// §5.2 for the ring: a lane reads its copies only after the wait that completes their group.
/// Without the waits, or with each wait letting one group more stay in flight (the unit being
/// computed among them), the simulator reports the read of a word whose copy is in flight.
#[test]
fn mma_async_ring_without_its_wait_is_caught_sm90() {
    let spec = "async_stages=3,k_unit_words=4,k_split=1";
    for (what, drop) in [("removed", true), ("one group too lax", false)] {
        let mut p = prepare(KernelId::GemvInt4, 1, 16, spec).expect("lowers");
        let mut changed = 0;
        p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
            Stmt::AsyncWait { pending } => {
                changed += 1;
                if drop {
                    vec![]
                } else {
                    vec![Stmt::AsyncWait {
                        pending: pending + 1,
                    }]
                }
            }
            s => vec![s],
        });
        assert!(changed > 0, "no wait to mutate");
        let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        assert!(
            r.findings
                .iter()
                .any(|f| f.first.kind == FindingKind::StaleRead
                    && f.first.message.contains("asynchronous copy")),
            "wait {what}: not caught\n{text}"
        );
    }
}

/// Out of range or combined with the register pipeline, the ring is refused, naming the field.
#[test]
fn mma_async_ring_out_of_range_is_refused_sm90() {
    for (spec, needle) in [
        (
            "async_stages=1",
            "async_stages = 1 is neither 0 (register loads) nor 2..=8",
        ),
        (
            "async_stages=9",
            "async_stages = 9 is neither 0 (register loads) nor 2..=8",
        ),
        (
            "async_stages=3,pipeline_depth=2",
            "async_stages = 3 needs pipeline_depth = 1 (not 2)",
        ),
    ] {
        match prepare(KernelId::GemvInt4, 1, 16, spec) {
            Err(LowerError::Schedule(m)) => assert!(m.contains(needle), "{spec}: {m}"),
            Err(e) => panic!("{spec}: {e}"),
            Ok(_) => panic!("{spec}: lowered"),
        }
    }
}

/// Where the cross-slice sums' LDS is large enough, the ring shares it (`Ring::shared`): the
/// sums are stored only after a workgroup barrier that follows every warp's main loop (§5.2:
/// the last ring reads of every warp before the overwrite). Without that barrier the simulator
/// reports the overwrite (a write race with another lane's copy, or a read of the ring after
/// the sums overwrote it: a wrong result).
#[test]
fn mma_async_ring_sharing_the_sums_without_its_barrier_is_caught_sm90() {
    let spec = "async_stages=2,k_unit_words=4,k_split=1";
    let mut p = prepare(KernelId::GemvInt4, 1, 16, spec).expect("lowers");
    let text = p.lowered.to_string();
    assert!(
        text.contains("ring shares their LDS"),
        "the ring does not share the sums' LDS here:\n{text}"
    );
    let mut removed = false;
    let mut next = false;
    p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
        Stmt::Comment(c) if c.contains("ring shares their LDS") => {
            next = true;
            vec![Stmt::Comment(c)]
        }
        Stmt::WorkgroupBarrier if next => {
            next = false;
            removed = true;
            vec![]
        }
        s => {
            next = false;
            vec![s]
        }
    });
    assert!(removed, "no barrier after the comment");
    let r = sweep(&p, SEED, 0, 16, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    assert!(
        !r.findings.is_empty() || r.failing > 0,
        "barrier removed, not caught:\n{text}"
    );
    eprintln!("{}", text.lines().take(3).collect::<Vec<_>>().join("\n"));
}

/// The phased activation stage as a ring too (`async_stages` with `x_phase_units` = the K
/// warps): each K warp's unit of a phase is one asynchronous group, issued `stages − 1` phases
/// ahead into buffer `phase mod stages`, the phase's activations (every lane its share) loaded
/// into registers with it and stored into that buffer in B-fragment order a phase later, with
/// one wait and one workgroup barrier per phase; the scales and zero words copied once per
/// quad. 2 to 4 buffers, units of 4 and 8 K-words, one and two K warps, 32 to 128 columns, the
/// scale per unit and on the weights; `gemv_int4` at batch 1, 13 (a partial N tile), 16 and 64,
/// the fused kernel (TP 2) and the two-weight kernel at batch 16.
const ASYNC_STAGE: &str = "one wait and one barrier per phase";

#[test]
fn mma_async_phased_stage_matches_the_reference_sm90() {
    let specs = [
        "async_stages=2,k_unit_words=4,k_split=1,columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=1",
        "async_stages=3,k_unit_words=4,k_split=1,columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,x_phase_units=1,mma_scale=weight",
        "async_stages=4,k_unit_words=8,k_split=1,columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,x_in_lds=true,x_phase_units=2",
        "async_stages=3,k_unit_words=4,k_split=2,columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=1",
    ];
    let cases: [(KernelId, u32, &[usize]); 3] = [
        (KernelId::GemvInt4, 1, &[1, 13, 16, 64]),
        (KernelId::GemvInt4AllreduceRmsnorm, 2, &[16]),
        (KernelId::GemvInt4DualSilu, 1, &[16]),
    ];
    let mut ran = 0;
    for (id, tp, batches) in cases {
        for &batch in batches {
            for spec in specs {
                let label = format!("{id} tp {tp} batch {batch} `{spec}`");
                let Some(p) = prepare_unless_lds(id, (tp, batch), spec, &label) else {
                    continue;
                };
                assert!(
                    p.lowered.to_string().contains(ASYNC_STAGE),
                    "{label}: not the asynchronous stage\n{}",
                    p.lowered
                );
                support::matches_reference(&p, SEED ^ batch as u64, SCHEDULES, &label);
                ran += 1;
            }
        }
    }
    // Every form but the LDS-refused ones ran (the two-weight kernel at 128 columns may not fit).
    assert!(ran >= 20, "only {ran} forms ran");
}

/// §5.2 for the asynchronous stage: a lane's wait completes its own copies of the phase, the
/// workgroup barrier after it makes every lane's copies visible to all (the activations and the
/// quads' scales are read by lanes that did not copy them) and keeps the last phase's reads of a
/// buffer before the next copies into it. Without the barrier, or with each wait letting one
/// group more stay in flight, the simulator reports it.
#[test]
fn mma_async_phased_stage_without_its_wait_or_barrier_is_caught_sm90() {
    let spec = "async_stages=3,k_unit_words=4,k_split=1,columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=1";
    for what in ["barrier removed", "wait one group too lax"] {
        let mut p = prepare(KernelId::GemvInt4, 1, 16, spec).expect("lowers");
        let mut changed = 0;
        let mut next = false;
        p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
            Stmt::Comment(c) if c.contains("visible to all") => {
                next = true;
                vec![Stmt::Comment(c)]
            }
            Stmt::WorkgroupBarrier if next && what == "barrier removed" => {
                next = false;
                changed += 1;
                vec![]
            }
            Stmt::AsyncWait { pending } if what == "wait one group too lax" => {
                changed += 1;
                vec![Stmt::AsyncWait {
                    pending: pending + 1,
                }]
            }
            s => {
                if !matches!(s, Stmt::Comment(_)) {
                    next = false;
                }
                vec![s]
            }
        });
        assert!(changed > 0, "{what}: nothing to mutate");
        let r = sweep(&p, SEED, 0, 16, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        assert!(!r.findings.is_empty(), "{what}: not caught\n{text}");
        eprintln!(
            "{what}: {}",
            text.lines().take(3).collect::<Vec<_>>().join("\n")
        );
    }
}

/// The activation ring's stores (a phase's activations, loaded with its weights' group, stored
/// into their buffer at the top of the next phase): without them the phases past the
/// prologue's read buffers no lane of this launch wrote, and the simulator reports it. (Stores
/// into the buffer one phase off were caught the same way while the form was written: a write
/// race with the phase still reading it, and stale reads.)
#[test]
fn mma_async_phased_stage_without_its_activation_stores_is_caught_sm90() {
    let spec = "async_stages=3,k_unit_words=4,k_split=1,columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=1";
    let mut p = prepare(KernelId::GemvInt4, 1, 16, spec).expect("lowers");
    let (mut dropped, mut next) = (0, false);
    p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
        Stmt::Comment(c) if c.contains("loaded a phase ago") => {
            next = true;
            vec![Stmt::Comment(c)]
        }
        // The guarded stores after that comment (their children, all stores, come first).
        Stmt::If { .. } if next => {
            next = false;
            dropped += 1;
            vec![]
        }
        s => vec![s],
    });
    assert_eq!(dropped, 1, "the loop's activation stores, once");
    let r = sweep(&p, SEED, 0, 8, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    assert!(
        r.findings
            .iter()
            .any(|f| f.first.kind == FindingKind::UninitRead),
        "stores dropped, not caught:\n{text}"
    );
}

/// A phase of more than one unit per K warp cannot be one group of both rings: refused, naming
/// the fields.
#[test]
fn mma_async_phased_stage_of_several_units_per_warp_is_refused_sm90() {
    let spec = "async_stages=2,k_unit_words=4,k_split=1,columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=2";
    match prepare(KernelId::GemvInt4, 1, 16, spec) {
        Err(LowerError::Schedule(m)) => assert!(
            m.contains("async_stages = 2 with x_phase_units = 2 needs one unit per K warp per phase (x_phase_units = 1)"),
            "{m}"
        ),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("lowered"),
    }
}
