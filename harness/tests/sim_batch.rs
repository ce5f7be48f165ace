//! Batch 1 to 64 (issue #40, item 1): every kernel of the set at small shapes on both targets at
//! batch 16, 32 and 64, lowered with the simulator's schedule and run in the protocol simulator
//! against the f64 reference over a few seeded schedules; at the model shapes, every kernel of
//! the set lowering with the default policy (what `wavefuse emit` prints) at batch 1 to 64, TP 1,
//! 2 and 4, within the LDS one workgroup can declare, and an override that cannot fit refused
//! with the reason; the serial cross-slice reduction (`reduction = serial`) against the f64
//! reference and bit for bit against the slices' sums, and its barriers' mutants caught.

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::Kernel;
use wavefuse_codegen::ir::reference::RankInputs;
use wavefuse_codegen::lower::{Int4Dot, LowerError, MmaScale, Reduction, lower};
use wavefuse_codegen::lowered::Stmt;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::generate::{generate, generate_at};
use wavefuse_harness::policy::{Override, Placement, SchedulePolicy};
use wavefuse_harness::sim::{
    Config, Prepared, SmallShapes, prepare_config, schedule_inputs, small_kernel, small_schedule,
    summary, sweep,
};
use wavefuse_harness::suite::ShapeKind;
use wavefuse_harness::{KernelId, Shapes};

const BATCHES: [usize; 3] = [16, 32, 64];
const ARCHS: [Arch; 2] = [Arch::Gfx906, Arch::Sm90];
/// Few schedules: each lane of each batch row runs in the simulator.
const SCHEDULES: u64 = 4;
const SEED: u64 = 0xB64;

/// Every kernel at small shapes, TP 2, batch 16, 32 and 64 lowers with the simulator's schedule
/// (the default's, in two-wave workgroups: where the slices' sums did not fit, the default's
/// serial reduction) and is clean in the simulator.
fn simulate_every_kernel_at(arch: Arch) {
    for batch in BATCHES {
        for id in KernelId::ALL {
            let c = Config {
                batch,
                ..Config::new(2, arch)
            };
            let p = prepare_config(id, &c, &SmallShapes::DEFAULT)
                .unwrap_or_else(|e| panic!("{id}@{arch} batch {batch}: {e}"));
            let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &r);
            eprintln!(
                "{id}@{arch} tp 2 batch {batch}: {}",
                text.lines().next().unwrap_or("")
            );
            assert!(r.findings.is_empty() && r.failing == 0, "{text}");
        }
    }
}

/// A refusal for LDS names the kernel, the batch, the target's limit and a batch that fits.
fn assert_lds_refusal(id: KernelId, arch: Arch, batch: usize, m: &str) {
    for needle in [
        id.name(),
        &format!("at batch {batch}"),
        "bytes of LDS exceed",
        &arch.to_string(),
    ] {
        assert!(m.contains(needle), "`{needle}` not in: {m}");
    }
    assert!((1..batch).contains(&fits_up_to(m)), "{m}");
}

#[test]
fn every_kernel_at_batch_16_32_64_is_clean_in_the_simulator_gfx906() {
    simulate_every_kernel_at(Arch::Gfx906);
}

#[test]
fn every_kernel_at_batch_16_32_64_is_clean_in_the_simulator_sm90() {
    simulate_every_kernel_at(Arch::Sm90);
}

/// Batches from 1 to 64 around the powers of two (where tiles, phases and LDS change).
const ALL_BATCHES: [usize; 8] = [1, 8, 9, 16, 17, 32, 33, 64];

/// Every kernel of the set lowers with the default policy (what `wavefuse emit` prints, one rank
/// per device) at the model shapes (Qwen 3.5 27B) at TP `tp` and every batch of
/// [`ALL_BATCHES`], its LDS within what one workgroup can declare. Past batch 8 the default's
/// cross-slice sums, staged activations or norm stash outgrew it; the default now reduces the K
/// slices serially, then reads the activations from global memory, then narrows the tile
/// (`lower/lds_fit.rs`). Prints the schedule's choices where they differ from batch 1's.
fn every_kernel_lowers_at_every_batch(arch: Arch, tp: u32) {
    let max = arch.max_static_lds_per_workgroup() as usize;
    for id in KernelId::ALL {
        for batch in ALL_BATCHES {
            let g = generate(id, arch, tp, batch)
                .unwrap_or_else(|e| panic!("{id}@{arch} tp {tp} batch {batch}: {e}"));
            let lds = g.lowered.lds_bytes();
            assert!(
                lds <= max,
                "{id}@{arch} tp {tp} batch {batch}: {lds} bytes of LDS (limit {max})"
            );
            let s = &g.schedule;
            if s.reduction == Reduction::Serial || batch > 8 {
                eprintln!(
                    "{id}@{arch} tp {tp} batch {batch}: {lds} B of LDS, {} x {} lanes, {} columns, reduction {:?}, x_in_lds {}",
                    g.lowered.grid,
                    g.lowered.workgroup_size,
                    s.columns_per_workgroup,
                    s.reduction,
                    s.x_in_lds
                );
            }
            // The serial reduction only where the slices' sums do not fit (never up to batch 8,
            // whose code the snapshots hold).
            assert!(
                batch > 8 || s.reduction == Reduction::Slices,
                "{id}@{arch} tp {tp} batch {batch}"
            );
        }
    }
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp1_gfx906() {
    every_kernel_lowers_at_every_batch(Arch::Gfx906, 1);
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp2_gfx906() {
    every_kernel_lowers_at_every_batch(Arch::Gfx906, 2);
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp4_gfx906() {
    every_kernel_lowers_at_every_batch(Arch::Gfx906, 4);
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp1_sm90() {
    every_kernel_lowers_at_every_batch(Arch::Sm90, 1);
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp2_sm90() {
    every_kernel_lowers_at_every_batch(Arch::Sm90, 2);
}

#[test]
fn every_kernel_lowers_at_batch_1_to_64_tp4_sm90() {
    every_kernel_lowers_at_every_batch(Arch::Sm90, 4);
}

/// The batch a refusal says still fits (`… fits up to batch N`).
fn fits_up_to(message: &str) -> usize {
    let tail = message
        .split("fits up to batch ")
        .nth(1)
        .unwrap_or_else(|| panic!("no batch that fits in: {message}"));
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a batch")
}

/// A schedule asked for that cannot fit stays a refusal naming the LDS limit, through the policy
/// as `emit` takes an override (`WAVEFUSE_SCHEDULE`): on gfx906 the cross-slice sums of every
/// slice (`reduction = slices`) at batch 32 and 64, where the default reduces serially (the
/// two-weight GEMV: `gemv_int4`'s tiles of 32 rows at one column per lane fit the slices' sums,
/// 48 KB; its default reduces serially for the occupancy, not the limit); on sm_90 the
/// two-weight GEMV at batch 64 on the tensor cores with 16 K warps (256 KiB of sums, past the
/// 227 KiB one workgroup can hold: 64 KiB with 4 K warps now lowers, in dynamic shared memory),
/// where the default keeps 2 (`lds_fit.rs`; the tensor-core path has no serial reduction).
#[test]
fn an_override_whose_lds_does_not_fit_is_refused_with_the_reason() {
    let slices = "reduction=slices";
    let warps = "threads_per_column=16,workgroup_size=512";
    for (arch, id, batch, spec) in [
        (Arch::Gfx906, KernelId::GemvInt4DualSilu, 32, slices),
        (Arch::Gfx906, KernelId::GemvInt4DualSilu, 64, slices),
        (Arch::Sm90, KernelId::GemvInt4DualSilu, 64, warps),
    ] {
        let default = generate(id, arch, 1, batch).expect("the default lowers");
        if arch == Arch::Sm90 {
            let s = &default.schedule;
            assert_eq!(
                (s.int4_dot, s.mma_scale, s.threads_per_column),
                (Int4Dot::Mma, MmaScale::Weight, 2),
                "{id}@{arch}"
            );
        } else {
            assert_eq!(default.schedule.reduction, Reduction::Serial, "{id}@{arch}");
        }
        let policy = SchedulePolicy::new(
            None,
            vec![Override {
                origin: "WAVEFUSE_SCHEDULE".into(),
                arch: None,
                spec: spec.into(),
            }],
        );
        let c = (1, batch, ShapeKind::Model);
        let e = match generate_at(id, arch, c, &policy, Placement::PerDevice) {
            Ok(g) => panic!("{id}@{arch} batch {batch} lowered with {:?}", g.schedule),
            Err(e) => e.to_string(),
        };
        assert_lds_refusal(id, arch, batch, &e);
    }
}

/// The sm_90 tensor-core INT4 path takes the batch as `ceil(batch / 8)` N tiles of the MMA's 8
/// columns: asked for at batch 8 to 64 it lowers (past 64 it is refused with the limit:
/// `sim_mma_batch.rs`).
#[test]
fn int4_mma_lowers_at_batch_8_to_64_sm90() {
    let arch = Arch::Sm90;
    for batch in [8, 16, 32, 64] {
        let shapes = Shapes {
            batch,
            ..Shapes::qwen27b(1)
        };
        let ir =
            small_kernel(KernelId::GemvInt4, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
        let s = small_schedule(arch, &ir)
            .with_overrides("int4_dot=mma,words_per_iteration=4,k_unit_words=4,reduction=slices")
            .expect("parses");
        if let Err(e) = lower(&ir, arch, &s) {
            panic!("batch {batch}: {e}");
        }
    }
}

/// The small kernel `id` at TP `tp` and `batch`, lowered for `arch` with the simulator's
/// schedule and `reduction`.
fn small_with(
    id: KernelId,
    arch: Arch,
    tp: u32,
    batch: usize,
    reduction: &str,
) -> Result<Prepared, LowerError> {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
    // The serial reduction is the FMA / dot2 paths' (the sm_90 tensor-core GEMM, the small
    // schedule there up to batch 64, keeps its own cross-warp sums and refuses it): on sm_90 both
    // reductions are asked of the FMA path, so that they can be compared bit for bit.
    let path = if arch == Arch::Sm90 {
        "int4_dot=fma,threads_per_column=8,"
    } else {
        ""
    };
    let s = small_schedule(arch, &ir).with_overrides(&format!("{path}reduction={reduction}"))?;
    let lowered = lower(&ir, arch, &s)?;
    Ok(Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    })
}

/// One launch of data set `set` on every rank.
fn one_launch(ir: &Kernel, set: u64) -> Vec<Vec<RankInputs>> {
    schedule_inputs(ir, SEED, set, 1)
}

/// The serial cross-slice reduction (`reduction = serial`) in the simulator at the small shapes,
/// batch 16 and 32: `gemv_int4` and the fused GEMV + allreduce + RMSNorm kernel at TP 2, on
/// gfx906 (the dot2 floor path) and sm_90 (the FMA path, the default past batch 8). Each is
/// clean over a few seeded schedules and within the simulator's tolerance of the f64 reference
/// (FP16 outputs: relative L2 error ≤ 1e-3, `sim::tolerance`), on fresh random inputs; and where
/// the slices' sums fit too (`reduction = slices`), both give bit-identical outputs: the same
/// float additions in the same (slice) order.
fn serial_reduction_in_the_simulator(arch: Arch) {
    use wavefuse_codegen::sim::{SimOptions, simulate};
    for (id, batch) in [
        (KernelId::GemvInt4, 16),
        (KernelId::GemvInt4, 32),
        (KernelId::GemvInt4AllreduceRmsnorm, 16),
        (KernelId::GemvInt4AllreduceRmsnorm, 32),
    ] {
        let p = small_with(id, arch, 2, batch, "serial")
            .unwrap_or_else(|e| panic!("{id}@{arch} batch {batch}: {e}"));
        assert!(
            p.lowered.to_string().contains("reduction = serial"),
            "{id}@{arch}: no serial reduction"
        );
        let mut n = 1;
        without_step_barrier(p.lowered.body.clone(), &mut n);
        assert!(
            n < 0,
            "{id}@{arch} batch {batch}: one K slice, nothing serial to check"
        );
        let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
        let summary_text = summary(&p, &r);
        eprintln!(
            "{id}@{arch} tp 2 batch {batch}, serial: {}",
            summary_text.lines().next().unwrap_or("")
        );
        assert!(r.findings.is_empty() && r.failing == 0, "{summary_text}");
        assert!(
            r.schedules == SCHEDULES && r.not_checked.is_none(),
            "{summary_text}"
        );
        let Ok(slices) = small_with(id, arch, 2, batch, "slices") else {
            eprintln!("{id}@{arch} batch {batch}: the slices' sums do not fit; no bit comparison");
            continue;
        };
        let inputs = one_launch(&p.ir, 5);
        let opts = SimOptions::sweep(SEED, 5);
        let a = simulate(&p.lowered, &p.ir, &inputs, &opts).expect("simulates");
        let b = simulate(&slices.lowered, &slices.ir, &inputs, &opts).expect("simulates");
        assert!(a.is_clean() && b.is_clean());
        let bits = |o: &wavefuse_codegen::sim::SimReport| format!("{:?}", o.outputs);
        assert_eq!(
            bits(&a),
            bits(&b),
            "{id}@{arch} batch {batch}: serial != slices"
        );
    }
}

#[test]
fn serial_reduction_matches_the_reference_and_the_slices_gfx906() {
    serial_reduction_in_the_simulator(Arch::Gfx906);
}

#[test]
fn serial_reduction_matches_the_reference_and_the_slices_sm90() {
    serial_reduction_in_the_simulator(Arch::Sm90);
}

/// `block` without the workgroup barrier that closes the `n`-th step of the serial reduction
/// (program order, depth first: 0 is slice 0's, 1 the one in the loop over slices 1, 2, …);
/// counts `n` down through the nested blocks.
fn without_step_barrier(block: Vec<Stmt>, n: &mut i64) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    for s in block {
        let after_step = matches!(out.last(), Some(Stmt::Comment(c)) if c.starts_with("this slice's sums are in LDS"));
        match s {
            Stmt::WorkgroupBarrier if after_step => {
                *n -= 1;
                if *n != -1 {
                    out.push(Stmt::WorkgroupBarrier);
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => out.push(Stmt::For {
                var,
                start,
                end,
                step,
                body: without_step_barrier(body, n),
            }),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let then_body = without_step_barrier(then_body, n);
                let else_body = without_step_barrier(else_body, n);
                out.push(Stmt::If {
                    cond,
                    then_body,
                    else_body,
                });
            }
            s => out.push(s),
        }
    }
    out
}

/// Mutants: without either barrier of the serial reduction (after slice 0's stores, or after
/// each later slice's load-add-store), a slice reads sums another slice's lanes stored with no
/// workgroup barrier between them (§5.2): the simulator reports the stale LDS reads, the write
/// races or the wrong results — on both targets.
#[test]
fn serial_reduction_without_a_step_barrier_is_caught() {
    use wavefuse_codegen::sim::{SimOptions, simulate};
    for arch in ARCHS {
        let p = small_with(KernelId::GemvInt4, arch, 2, 16, "serial").expect("lowers");
        for which in 0..2 {
            let mut k = p.lowered.clone();
            let mut n = which;
            k.body = without_step_barrier(std::mem::take(&mut k.body), &mut n);
            assert!(n < 0, "{arch}: fewer than {} step barriers", which + 1);
            let caught = (0..4).any(|i| {
                let rep = simulate(
                    &k,
                    &p.ir,
                    &one_launch(&p.ir, i),
                    &SimOptions::sweep(SEED, i),
                )
                .expect("simulates");
                !rep.is_clean() || !rep.errors.iter().all(|e| e.passes())
            });
            assert!(caught, "{arch}: step barrier {which} removed, not caught");
        }
    }
}
