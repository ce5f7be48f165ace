//! The sm_90 tensor-core INT4 GEMV past batch 8 (issue #40, item 2: the GEMV → GEMM switch):
//! the batch as `ceil(batch / 8)` N tiles of `mma.m16n8k16`, each A fragment (the decoded
//! weights) feeding every tile's MMA. At batch 9, 16, 24, 32 and 64 the default schedule picks
//! it, and the generated kernel — staged activations or not, pipelined or not — runs in the
//! protocol simulator against the f64 reference on fresh random inputs (every schedule its own
//! data), held to the FP16 outputs' tolerance: relative L2 error ≤ 1e-3
//! (`wavefuse_codegen::sim::tolerance`). Mutants that give tile j the B fragments of tile 0, or
//! tile j another A fragment than tile 0's, are caught as mismatches.

mod support;

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::ScalarType;
use wavefuse_codegen::lower::{Int4Dot, LowerError, MmaScale, Schedule, lower};
use wavefuse_codegen::lowered::{Block, Expr, Reg, Stmt};
use wavefuse_codegen::sim::{FindingKind, PeerTable, tolerance};
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_kernels::{KernelId, Shapes};

const ARCH: Arch = Arch::Sm90;
const BATCHES: [usize; 5] = [9, 16, 24, 32, 64];
/// Two GPTQ groups of 128 along K for every GEMV (hidden → FFN and FFN → hidden).
const SMALL: SmallShapes = SmallShapes {
    hidden: 256,
    ffn: 256,
    q: 16,
    kv: 16,
};
/// Schedules per case: each with its own random inputs.
const SCHEDULES: u64 = 2;
const SEED: u64 = 0x6E6D;
/// Seeded schedules a missing workgroup barrier is swept over: the simulator finds it on every
/// one (a read after a write or a write after a read with no barrier between), which the tests
/// assert.
const BARRIER_MUTANT_SCHEDULES: u64 = 8;

/// The forms of the tensor-core path run at every batch (overrides of the simulator's schedule,
/// which is the default one scaled to 64-lane workgroups): as chosen (activations staged in
/// LDS), unstaged (each lane loads its B rows), and units of one MMA step, software-pipelined.
const FORMS: [&str; 3] = ["", "x_in_lds=false", "k_unit_words=4,pipeline_depth=2"];

fn prepare(id: KernelId, tp: u32, batch: usize, spec: &str) -> Result<Prepared, LowerError> {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SMALL).expect("small kernel");
    let s: Schedule = small_schedule(ARCH, &ir).with_overrides(spec)?;
    assert_eq!(
        s.int4_dot,
        Int4Dot::Mma,
        "{id} tp {tp} batch {batch}: the default is the tensor-core path"
    );
    let lowered = lower(&ir, ARCH, &s)?;
    Ok(Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    })
}

/// Every `MmaF16` of the body, in program order.
/// `p` swept over seeded schedules from `seed`: every lane checked, no finding, no failing run,
/// the largest relative L2 error against the f64 reference within `tol`; `label` names the case.
fn clean_sweep(p: &Prepared, seed: u64, label: &str, tol: f64) {
    let r = sweep(p, seed, 0, SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(p, &r);
    eprintln!("{label}: {}", text.lines().next().unwrap_or(""));
    assert!(r.not_checked.is_none(), "{text}");
    assert!(r.findings.is_empty() && r.failing == 0, "{text}");
    assert!(r.max_rel_l2 <= tol, "{text}");
}

fn mmas(body: &Block) -> Vec<([Reg; 4], [Reg; 2])> {
    let mut found = vec![];
    support::rewrite(body.clone(), &mut |s| {
        if let Stmt::MmaF16 { a, b, .. } = &s {
            found.push((*a, *b));
        }
        vec![s]
    });
    found
}

/// The kernels that use the INT4 GEMV, at the TP they run here, and the batches each takes on
/// the tensor cores with the scale per unit (two weights keep twice the accumulators: up to batch 32;
/// past it the default scales the weights instead, `mma_scale_on_the_weights_matches_the_reference_sm90`).
fn cases() -> Vec<(KernelId, u32, Vec<usize>)> {
    let upto = |b: usize| BATCHES.iter().copied().filter(|&x| x <= b).collect();
    vec![
        (KernelId::GemvInt4, 1, upto(64)),
        (KernelId::GemvInt4AllreduceRmsnorm, 2, upto(64)),
        (KernelId::GemvInt4DualSilu, 1, upto(32)),
    ]
}

#[test]
fn mma_gemv_at_batch_9_to_64_matches_the_reference_sm90() {
    let tol = tolerance(ScalarType::F16);
    for (id, tp, batches) in cases() {
        for batch in batches {
            for spec in FORMS {
                let p = prepare(id, tp, batch, spec)
                    .unwrap_or_else(|e| panic!("{id} tp {tp} batch {batch} `{spec}`: {e}"));
                // One A fragment per N tile's MMA: ceil(batch / 8) MMAs read each.
                let all = mmas(&p.lowered.body);
                let mut distinct: Vec<[Reg; 4]> = all.iter().map(|m| m.0).collect();
                distinct.dedup();
                assert_eq!(
                    all.len(),
                    distinct.len() * batch.div_ceil(8),
                    "{id} {batch}"
                );
                clean_sweep(
                    &p,
                    SEED ^ batch as u64,
                    &format!("{id} tp {tp} batch {batch} `{spec}`"),
                    tol,
                );
            }
        }
    }
}

/// `gemv_int4` at batch 24 (three N tiles) with its body rewritten by `f`.
fn mutant(spec: &str, f: &mut dyn FnMut(Stmt) -> Vec<Stmt>) -> Prepared {
    let mut p = prepare(KernelId::GemvInt4, 1, 24, spec).expect("lowers");
    let before = p.lowered.body.clone();
    p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), f);
    assert_ne!(before, p.lowered.body, "the mutation changed nothing");
    p
}

fn caught_as_mismatch(p: Prepared) {
    let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    eprintln!("{}", text.lines().next().unwrap_or(""));
    assert_eq!(r.failing, SCHEDULES, "{text}");
    assert!(
        r.findings
            .iter()
            .any(|f| f.first.kind == FindingKind::Mismatch),
        "{text}"
    );
}

/// The MMAs of one A fragment are consecutive (tile 0 first): give tiles 1.. the B fragments of
/// tile 0, so that they sum batch rows 0..7 again.
fn b_of_tile_0() -> impl FnMut(Stmt) -> Vec<Stmt> {
    let mut first: Option<([Reg; 4], [Reg; 2])> = None;
    move |s| match s {
        Stmt::MmaF16 { acc, a, b } => {
            let b = match first {
                Some((fa, fb)) if fa == a => fb,
                _ => {
                    first = Some((a, b));
                    b
                }
            };
            vec![Stmt::MmaF16 { acc, a, b }]
        }
        s => vec![s],
    }
}

/// Tiles 1.. of each A fragment take the previous fragment's A instead (the reuse broken: other
/// columns or nibbles).
fn a_of_the_previous_fragment() -> impl FnMut(Stmt) -> Vec<Stmt> {
    let (mut prev, mut cur): (Option<[Reg; 4]>, Option<[Reg; 4]>) = (None, None);
    move |s| match s {
        Stmt::MmaF16 { acc, a, b } => {
            let a = if cur == Some(a) {
                prev.unwrap_or(a)
            } else {
                (prev, cur) = (cur, Some(a));
                a
            };
            vec![Stmt::MmaF16 { acc, a, b }]
        }
        s => vec![s],
    }
}

#[test]
fn mma_tile_reading_tile_0_rows_is_caught_sm90() {
    for spec in ["", "x_in_lds=false"] {
        caught_as_mismatch(mutant(spec, &mut b_of_tile_0()));
    }
}

#[test]
fn mma_tile_with_another_a_fragment_is_caught_sm90() {
    caught_as_mismatch(mutant("", &mut a_of_the_previous_fragment()));
}

/// At the model shapes the default stages the activations at batch 64 only in phases (the wide
/// tile); staged whole they would outgrow the LDS next to the cross-warp sums, and an override
/// doing so is refused naming the LDS limit, as every LDS refusal is.
#[test]
fn mma_staging_past_the_lds_is_refused_with_the_limit_sm90() {
    let shapes = Shapes {
        batch: 64,
        ..Shapes::qwen27b(1)
    };
    let ir = KernelId::GemvInt4.build(&shapes);
    let s = Schedule::default_for(ARCH, &ir);
    assert_eq!(s.int4_dot, Int4Dot::Mma);
    assert!(!s.x_in_lds || s.x_phase_units > 0, "{s:?}");
    lower(&ir, ARCH, &s).expect("the default lowers");
    let staged = s
        .with_overrides("x_in_lds=true,x_phase_units=0")
        .expect("parses");
    match lower(&ir, ARCH, &staged) {
        Err(LowerError::Schedule(m)) => {
            for needle in [
                "bytes of LDS exceed the 232448",
                "at batch 64",
                "fits up to batch",
            ] {
                assert!(m.contains(needle), "`{needle}` not in {m}");
            }
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("staged at batch 64: lowered"),
    }
}

/// Past what the tensor-core path holds, an override is refused with the limit: batch 65 (8 N
/// tiles), two weights at batch 40 and 64 with the scale per unit (160 and 256 accumulators per
/// lane). The default does not pick the path at batch 65; for two weights past batch 32 it picks
/// it with the scale on the weights (half the accumulators), which lowers.
#[test]
fn mma_past_its_limits_is_refused_with_the_limit_sm90() {
    let force = "int4_dot=mma,words_per_iteration=4,k_unit_words=4,reduction=slices,mma_scale=unit";
    for (id, batch, needle) in [
        (KernelId::GemvInt4, 65, "batch <= 64 (not 65"),
        (
            KernelId::GemvInt4DualSilu,
            64,
            "keeps 256 f32 accumulators per lane",
        ),
        (
            KernelId::GemvInt4DualSilu,
            40,
            "keeps 160 f32 accumulators per lane",
        ),
    ] {
        let shapes = Shapes {
            batch,
            ..Shapes::qwen27b(1)
        };
        let ir = small_kernel(id, &shapes, &SMALL).expect("small kernel");
        let default = small_schedule(ARCH, &ir);
        if batch > 64 {
            assert_ne!(default.int4_dot, Int4Dot::Mma, "{id} batch {batch}");
        } else {
            assert_eq!(
                (default.int4_dot, default.mma_scale),
                (Int4Dot::Mma, MmaScale::Weight),
                "{id} batch {batch}"
            );
            lower(&ir, ARCH, &default).expect("the default lowers");
        }
        let s = default.with_overrides(force).expect("parses");
        match lower(&ir, ARCH, &s) {
            Err(LowerError::Schedule(m)) => assert!(m.contains(needle), "{m}"),
            Err(e) => panic!("{id} batch {batch}: {e}"),
            Ok(_) => panic!("{id} batch {batch}: lowered"),
        }
    }
}

/// The scale on the decoded weights (`mma_scale = weight`): each A register is `(q − z)·s`
/// rounded once to FP16 by an `fma.f16x2` and the MMAs accumulate into the totals, with no unit
/// sums. Against the f64 reference on fresh random inputs (random FP16 scales, so the rounding
/// is real) at the FP16 outputs' tolerance, staged and unstaged, pipelined, at every batch; the
/// fused kernel (allreduce and norm epilogue); and two weights up to batch 64, which only this
/// form holds (128 accumulators per lane, the unit sums' 256 are refused).
#[test]
fn mma_scale_on_the_weights_matches_the_reference_sm90() {
    let tol = tolerance(ScalarType::F16);
    let force =
        "int4_dot=mma,words_per_iteration=4,k_unit_words=4,reduction=slices,mma_scale=weight";
    let cases: [(KernelId, u32, &[usize], &[&str]); 3] = [
        (
            KernelId::GemvInt4,
            1,
            &BATCHES,
            &[
                "mma_scale=weight",
                "mma_scale=weight,x_in_lds=false,k_unit_words=4,pipeline_depth=2",
            ],
        ),
        (
            KernelId::GemvInt4AllreduceRmsnorm,
            2,
            &[16, 64],
            &["mma_scale=weight"],
        ),
        (KernelId::GemvInt4DualSilu, 1, &[9, 40, 64], &[force]),
    ];
    for (id, tp, batches, specs) in cases {
        for &batch in batches {
            for spec in specs {
                let p = prepare(id, tp, batch, spec)
                    .unwrap_or_else(|e| panic!("{id} tp {tp} batch {batch} `{spec}`: {e}"));
                let mut scalings = 0;
                support::rewrite(p.lowered.body.clone(), &mut |s| {
                    if let Stmt::Assign {
                        value: Expr::FmaHalf2(_, _, c),
                        ..
                    } = &s
                    {
                        scalings += usize::from(**c == Expr::u32(0));
                    }
                    vec![s]
                });
                assert!(scalings > 0, "{id} {batch} `{spec}`: no FP16 scaling");
                clean_sweep(
                    &p,
                    SEED ^ 0x5CA1E ^ batch as u64,
                    &format!("{id} tp {tp} batch {batch} `{spec}`"),
                    tol,
                );
            }
        }
    }
}

/// With the scale on the weights, an A register left unscaled (the `fma.f16x2` by the scale
/// replaced by its input) is caught as a mismatch: the scale is applied nowhere else.
#[test]
fn mma_weight_left_unscaled_is_caught_sm90() {
    caught_as_mismatch(mutant("mma_scale=weight", &mut |s| match s {
        Stmt::Assign {
            dst,
            value: Expr::FmaHalf2(a, _, c),
        } if *c == Expr::u32(0) => vec![Stmt::Assign { dst, value: *a }],
        s => vec![s],
    }));
}

/// The activations staged in phases on the tensor cores (`x_phase_units`, issue 40: a part whose
/// activations outgrow the LDS is staged a phase at a time, and a wide tile's column warps share
/// them): each phase's K rows staged behind its two workgroup barriers, each K warp's first unit
/// of the phase loaded before them. One unit per K warp per phase, two per K warp (the loop after
/// the first), and a wide tile (two column warps, one K warp) — at batch 16 and 64, the scale per
/// unit and on the weights, and the fused kernel (its epilogue after the phases) — against the
/// f64 reference on fresh random inputs at the FP16 outputs' tolerance.
#[test]
fn mma_phased_stage_matches_the_reference_sm90() {
    let tol = tolerance(ScalarType::F16);
    // The 32-column tile of two K warps (the default's at batch 1 and 16) named where a spec
    // names none: the default's tile at batch 64 is another (`whole_rounds`), which these
    // phase and ring forms do not fit.
    let phased = [
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=4",
        "k_unit_words=4,k_split=2,columns_per_workgroup=64,threads_per_column=1,x_in_lds=true,x_phase_units=1",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2,mma_scale=weight",
        "columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2,pipeline_depth=2",
        "k_unit_words=4,k_split=2,columns_per_workgroup=64,threads_per_column=1,x_in_lds=true,x_phase_units=1,pipeline_depth=2,mma_scale=weight",
    ];
    let cases: [(KernelId, u32, &[usize]); 3] = [
        (KernelId::GemvInt4, 1, &[16, 64]),
        (KernelId::GemvInt4AllreduceRmsnorm, 2, &[16]),
        (KernelId::GemvInt4DualSilu, 1, &[16]),
    ];
    for (id, tp, batches) in cases {
        for &batch in batches {
            for spec in phased {
                let p = prepare(id, tp, batch, spec)
                    .unwrap_or_else(|e| panic!("{id} tp {tp} batch {batch} `{spec}`: {e}"));
                let mut removed = false;
                support::without_phase_barrier(p.lowered.body.clone(), false, &mut removed);
                assert!(
                    removed,
                    "{id} {batch} `{spec}`: no phase loop\n{}",
                    p.lowered
                );
                clean_sweep(
                    &p,
                    SEED ^ 0x9A5E ^ batch as u64,
                    &format!("{id} tp {tp} batch {batch} `{spec}`"),
                    tol,
                );
            }
        }
    }
}

/// §5.2 with the phased stage: every lane writes the phase's activations and every lane reads
/// them, so the phase needs both workgroup barriers — before the overwrite (the last phase's
/// reads done) and after the stage (its writes done). Either removed is caught by the simulator,
/// at pipeline depth 1 and 2 (there the next phase's activations wait in registers, and the
/// store into the stage is what the first barrier orders after the last phase's reads).
#[test]
fn mma_phased_stage_without_either_workgroup_barrier_is_caught_sm90() {
    let specs = [
        "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2",
        "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2,pipeline_depth=2",
    ];
    for (spec, second) in specs.into_iter().flat_map(|s| [(s, false), (s, true)]) {
        let mut p = prepare(KernelId::GemvInt4, 1, 16, spec).expect("lowers");
        let mut removed = false;
        p.lowered.body = support::without_phase_barrier(
            std::mem::take(&mut p.lowered.body),
            second,
            &mut removed,
        );
        assert!(removed, "no phase loop with two barriers");
        // Without the barrier before the overwrite a lane's store follows other lanes' reads
        // of the last phase with nothing between them, without the one after the stage other
        // lanes' reads follow its store: found on every schedule (the simulator checks reads
        // after writes and writes after reads by happens-before, not by the values a lagging
        // lane happens to read; before the write-after-read check 2 and 1 of 64 schedules
        // showed the first).
        let r = sweep(&p, SEED, 0, BARRIER_MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        assert!(
            r.failing == BARRIER_MUTANT_SCHEDULES,
            "`{spec}`: phase barrier {} removed, not caught:\n{text}",
            if second {
                "after the stage"
            } else {
                "before the overwrite"
            }
        );
    }
}

/// Where the phased stage and the cross-slice sums do not fit the static LDS side by side, the
/// stage lives in the first weight's sums (the LDS the larger of the two): batch 64 in 128
/// lanes, 20 KB of stage beside 32 KB of sums. The sums are stored only after a workgroup
/// barrier that follows the phase loop (§5.2: every lane's reads of the last phase's
/// activations before the overwrite). Each form matches the f64 reference; without that
/// barrier the simulator reports the overwrite (a read of the stage after another lane's sums
/// replaced it: a stale read or a wrong result) — a wide tile (four column warps, one K warp)
/// at depth 1 and 2, and a tile of two K warps.
#[test]
fn mma_phased_stage_in_the_sums_matches_and_needs_its_barrier_sm90() {
    const WIDE: &str = "columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,mma_scale=weight,k_split=1";
    let specs = [
        format!("{WIDE},k_unit_words=8,x_phase_units=2"),
        format!("{WIDE},k_unit_words=16,x_phase_units=1,pipeline_depth=2"),
        "columns_per_workgroup=64,threads_per_column=2,workgroup_size=128,x_in_lds=true,mma_scale=weight,k_split=1,k_unit_words=8,x_phase_units=2".to_string(),
    ];
    const SHARED: &str = "the stage shares their LDS";
    for spec in &specs {
        let label = format!("gemv_int4 batch 64 `{spec}`");
        let mut p =
            prepare(KernelId::GemvInt4, 1, 64, spec).unwrap_or_else(|e| panic!("{label}: {e}"));
        let text = p.lowered.to_string();
        assert!(
            text.contains(SHARED),
            "{label}: the stage does not share the sums:\n{text}"
        );
        clean_sweep(&p, SEED ^ 0x5A4D, &label, tolerance(ScalarType::F16));
        let mut removed = false;
        let mut next = false;
        p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
            Stmt::Comment(c) if c.contains(SHARED) => {
                next = true;
                vec![Stmt::Comment(c)]
            }
            Stmt::WorkgroupBarrier if next => {
                (next, removed) = (false, true);
                vec![]
            }
            s => {
                next = false;
                vec![s]
            }
        });
        assert!(removed, "{label}: no barrier after the comment");
        let r = sweep(&p, SEED, 0, BARRIER_MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        assert!(
            r.failing == BARRIER_MUTANT_SCHEDULES,
            "{label}: the barrier before the sums removed, not caught on every schedule:\n{text}"
        );
        eprintln!(
            "{label}: barrier removed: {}",
            text.lines().next().unwrap_or("")
        );
    }
}

/// A phase that does not divide the K part, or is not a multiple of the K warps, is refused
/// naming both numbers; phases with two units in flight (pipeline depth 2) are refused.
#[test]
fn mma_phase_out_of_shape_is_refused_sm90() {
    for (spec, needle) in [
        (
            "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=3",
            "x_phase_units = 3 must divide the K part's 8 units and be a multiple of the 2 K warps",
        ),
        (
            "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=1",
            "x_phase_units = 1 must divide the K part's 8 units and be a multiple of the 2 K warps",
        ),
        (
            "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=4,pipeline_depth=2",
            "x_phase_units = 4 at pipeline_depth = 2 needs one unit per K warp per phase (x_phase_units = 2) and an even count of phases (the part has 8 units: 2)",
        ),
    ] {
        match prepare(KernelId::GemvInt4, 1, 16, spec) {
            Err(LowerError::Schedule(m)) => assert!(m.contains(needle), "{spec}: {m}"),
            Err(e) => panic!("{spec}: {e}"),
            Ok(_) => panic!("{spec}: lowered"),
        }
    }
}

/// Whether `body` holds an L2 prefetch (at any depth).
fn prefetches(body: &Block) -> usize {
    let mut n = 0;
    support::rewrite(body.clone(), &mut |s| {
        n += usize::from(matches!(s, Stmt::PrefetchL2 { .. }));
        vec![s]
    });
    n
}

/// `l2_prefetch_units` (issue 40): with each unit's register loads a warp asks L2 for its unit
/// D of its units ahead. A hint — no value, no ordering — so the kernel must match the f64
/// reference as without it (FP16 tolerance, relative L2 ≤ 1e-3), and every line asked for must
/// be in its array: the simulator checks each prefetch's address when a lane runs it. Forms:
/// the default at batch 1, 16 and 64, unstaged, pipelined (depth 2), phased (synchronous stage),
/// the wide phased tile; the fused kernel at TP 2 and the two-weight kernel at batch 16. With
/// the bound that keeps the unit ahead in the warp's K part removed, the last part's warps ask
/// past the weights and the simulator reports it out of bounds.
#[test]
fn mma_l2_prefetch_stays_in_its_arrays_and_matches_sm90() {
    let tol = tolerance(ScalarType::F16);
    let forms = [
        "l2_prefetch_units=1",
        "l2_prefetch_units=4,x_in_lds=false",
        "k_unit_words=4,pipeline_depth=2,l2_prefetch_units=3",
        "k_unit_words=4,k_split=1,x_in_lds=true,x_phase_units=2,l2_prefetch_units=2",
        "k_unit_words=4,k_split=2,columns_per_workgroup=64,threads_per_column=1,x_in_lds=true,x_phase_units=1,mma_scale=weight,l2_prefetch_units=8",
    ];
    let cases: [(KernelId, u32, &[usize]); 3] = [
        (KernelId::GemvInt4, 1, &[1, 16, 64]),
        (KernelId::GemvInt4AllreduceRmsnorm, 2, &[16]),
        (KernelId::GemvInt4DualSilu, 1, &[16]),
    ];
    for (id, tp, batches) in cases {
        for &batch in batches {
            for spec in forms {
                let label = format!("{id} tp {tp} batch {batch} `{spec}`");
                let p = prepare(id, tp, batch, spec).unwrap_or_else(|e| panic!("{label}: {e}"));
                assert!(prefetches(&p.lowered.body) > 0, "{label}: no L2 prefetch");
                clean_sweep(&p, SEED ^ 0x2F ^ batch as u64, &label, tol);
            }
        }
    }
    // The mutant: the guard of the unit ahead (`prefetch_unit < part end && column < N`) dropped,
    // its lane conditions kept.
    let unguard = &mut |s: Stmt| match s {
        Stmt::If {
            then_body,
            else_body,
            ..
        } if else_body.is_empty()
            && !then_body.is_empty()
            && then_body.iter().all(|t| {
                matches!(t, Stmt::If { then_body: inner, .. }
                    if inner.iter().all(|i| matches!(i, Stmt::PrefetchL2 { .. })))
            }) =>
        {
            then_body
        }
        s => vec![s],
    };
    for spec in [
        "l2_prefetch_units=1",
        "k_unit_words=4,pipeline_depth=2,l2_prefetch_units=3",
    ] {
        let p = mutant(spec, unguard);
        let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        assert!(
            r.findings
                .iter()
                .any(|f| f.first.kind == FindingKind::OutOfBounds),
            "`{spec}` without the part bound: {text}"
        );
    }
}

/// Batch tiles on the tensor cores (`batch_tile`, a multiple of 8, activations unstaged): batch
/// 64 in passes of 32 and 16, batch 40 in passes of 16 and a last one of 8, with the scale per
/// unit and on the weights, at pipeline depths 1 and 2, for `gemv_int4` and the fused
/// allreduce + RMSNorm kernel (TP 2: its epilogue reads every pass's rows), against the f64
/// reference. Each pass holds only its rows' accumulators: a pass's MMAs are `ceil(rows / 8)`
/// per A fragment, and the weights are read once per pass (`weight_passes`).
#[test]
fn mma_batch_tiles_match_the_reference_sm90() {
    let tol = tolerance(ScalarType::F16);
    let unstaged = "x_in_lds=false,x_phase_units=0,k_unit_words=4,columns_per_workgroup=32,threads_per_column=2,workgroup_size=64";
    let cases: [(KernelId, u32, usize, usize, &str); 6] = [
        (KernelId::GemvInt4, 1, 64, 32, "mma_scale=weight"),
        (KernelId::GemvInt4, 1, 64, 16, "mma_scale=unit"),
        (KernelId::GemvInt4, 1, 40, 16, "mma_scale=unit"),
        (
            KernelId::GemvInt4,
            1,
            40,
            16,
            "mma_scale=weight,pipeline_depth=2",
        ),
        (
            KernelId::GemvInt4AllreduceRmsnorm,
            2,
            64,
            32,
            "mma_scale=weight",
        ),
        (
            KernelId::GemvInt4AllreduceRmsnorm,
            2,
            40,
            16,
            "mma_scale=unit",
        ),
    ];
    for (id, tp, batch, rows, spec) in cases {
        let spec = format!("{unstaged},{spec},batch_tile={rows}");
        let p = prepare(id, tp, batch, &spec)
            .unwrap_or_else(|e| panic!("{id} tp {tp} batch {batch} `{spec}`: {e}"));
        let passes = batch.div_ceil(rows);
        assert_eq!(
            p.lowered.weight_passes as usize, passes,
            "{id} {batch} `{spec}`"
        );
        // Per A fragment, the MMAs of one pass's N tiles: rows / 8 in the tile loop, and the
        // last pass's where the rows do not divide.
        let all = mmas(&p.lowered.body);
        let mut distinct: Vec<[Reg; 4]> = all.iter().map(|m| m.0).collect();
        distinct.dedup();
        let per_fragment: Vec<usize> = distinct
            .iter()
            .map(|a| all.iter().filter(|m| m.0 == *a).count())
            .collect();
        let rest = batch % rows;
        assert!(
            per_fragment
                .iter()
                .all(|&n| n == rows / 8 || (rest > 0 && n == rest.div_ceil(8))),
            "{id} {batch} `{spec}`: MMAs per A fragment {per_fragment:?}"
        );
        clean_sweep(
            &p,
            SEED ^ 0x71E5 ^ batch as u64,
            &format!("{id} tp {tp} batch {batch} `{spec}`"),
            tol,
        );
    }
}

/// Batch tiles on the tensor cores where a pass cannot load its own rows are refused, naming
/// what the tiles need: a staged stage (whole or in phases), the asynchronous ring, rows not a
/// multiple of 8.
#[test]
fn mma_batch_tiles_out_of_shape_are_refused_sm90() {
    let cases = [
        ("x_in_lds=true,batch_tile=32", "x_in_lds = false"),
        (
            "x_in_lds=false,x_phase_units=0,batch_tile=12",
            "a multiple of 8",
        ),
        (
            "x_in_lds=false,x_phase_units=0,k_unit_words=4,async_stages=2,pipeline_depth=1,batch_tile=32",
            "async_stages = 0",
        ),
    ];
    for (spec, needs) in cases {
        let e = prepare(KernelId::GemvInt4, 1, 64, spec)
            .err()
            .unwrap_or_else(|| panic!("`{spec}` lowered"));
        let text = e.to_string();
        assert!(
            text.contains("batch_tile") && text.contains(needs),
            "`{spec}`: {text}"
        );
    }
}

/// The workgroup barrier after the passes of the tensor-core GEMV in batch tiles (§5.2: every pass's sums
/// stored in the cross-slice reduction before the epilogue reads them, other K warps' rows
/// included) removed: the simulator reports the read of another lane's sums with no barrier
/// between, on every schedule of the sweep. No barrier between passes is needed (they store
/// disjoint rows and read no LDS), and the unmutated kernel is clean
/// (`mma_batch_tiles_match_the_reference_sm90`).
#[test]
fn mma_batch_tiles_without_the_reduction_barrier_are_caught_sm90() {
    let spec = "x_in_lds=false,x_phase_units=0,k_unit_words=4,columns_per_workgroup=32,threads_per_column=2,workgroup_size=64,mma_scale=weight,batch_tile=16";
    let mut p = prepare(KernelId::GemvInt4, 1, 40, spec).expect("lowers");
    // The first barrier in program order: the passes stage nothing, so it is the one after
    // the last pass (the epilogue's own follow it).
    let mut removed = false;
    p.lowered.body = support::rewrite(std::mem::take(&mut p.lowered.body), &mut |s| match s {
        Stmt::WorkgroupBarrier if !removed => {
            removed = true;
            vec![]
        }
        s => vec![s],
    });
    assert!(removed, "no workgroup barrier");
    let r = sweep(&p, SEED, 0, BARRIER_MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    assert!(
        r.failing == BARRIER_MUTANT_SCHEDULES,
        "the reduction barrier removed, not caught on every schedule:\n{text}"
    );
}
