//! The gfx906 INT4 floor path (dot2 with the one-shift decode, 4 packed columns per lane, the
//! activations staged in LDS as FP16 pairs or packed per lane, 32-bit byte offsets; see
//! `codegen/src/lower/gemv.rs` `gptq_unit_dot2`) in the protocol simulator: every GPTQ kernel of
//! the set at small shapes, at batch 1 and 3, alone and split over K (the fused kernel at TP 2),
//! clean over seeded schedules against the f64 reference: CI runs 40 schedules per combination
//! (24 combinations, about 15 s of test time here); the 1000-schedule soak (25 times as many
//! schedules; it took 26 minutes on a loaded machine) is
//! `cargo test -p wavefuse-harness --test sim_floor -- --ignored`.

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Int4Dot, MmaDecode, Schedule, lower};
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_kernels::{KernelId, Shapes};

const SEED: u64 = 0xF100_4;

/// Schedules per combination in CI.
const CI_SCHEDULES: u64 = 40;

/// Schedules per combination in the soak.
const SOAK_SCHEDULES: u64 = 1000;

fn floor(id: KernelId, tp: u32, batch: usize, parts: u32, x_in_lds: bool) -> Prepared {
    let arch = Arch::Gfx906;
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
    let small = small_schedule(arch, &ir);
    // 8 lanes x 4 packed columns per K row: 32 columns, workgroup / 8 K slices.
    let s = Schedule {
        int4_dot: Int4Dot::Dot2,
        mma_decode: MmaDecode::Fma,
        x_in_lds,
        byte_offsets: true,
        words_per_iteration: 4,
        columns_per_workgroup: 32,
        threads_per_column: small.workgroup_size / 8,
        k_unit_words: 4,
        accumulators: 1,
        k_split: parts,
        ..small
    };
    let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id}: {e}"));
    Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    }
}

fn run(id: KernelId, tp: u32, schedules: u64) {
    for batch in [1, 3] {
        for (parts, x_in_lds) in [(1, true), (1, false), (2, true)] {
            let p = floor(id, tp, batch, parts, x_in_lds);
            let r = sweep(&p, SEED, 0, schedules, |_, _| {}).expect("simulates");
            let text = summary(&p, &r);
            eprintln!(
                "{id}@gfx906 tp {tp} batch {batch} k_split {parts} x_in_lds {x_in_lds} floor path: {}",
                text.lines().next().unwrap_or("")
            );
            assert!(r.findings.is_empty() && r.failing == 0, "{text}");
        }
    }
}

#[test]
fn floor_gemv_int4_is_clean_in_the_simulator_gfx906() {
    run(KernelId::GemvInt4, 1, CI_SCHEDULES);
}

#[test]
fn floor_gemv_int4_dual_silu_is_clean_in_the_simulator_gfx906() {
    run(KernelId::GemvInt4DualSilu, 1, CI_SCHEDULES);
}

#[test]
fn floor_gemv_int4_qkv_is_clean_in_the_simulator_gfx906() {
    run(KernelId::GemvInt4Qkv, 1, CI_SCHEDULES);
}

#[test]
fn floor_fused_kernel_is_clean_in_the_simulator_gfx906() {
    run(KernelId::GemvInt4AllreduceRmsnorm, 2, CI_SCHEDULES);
}

#[test]
#[ignore = "soak: 1000 schedules per combination (minutes)"]
fn floor_path_soak_1000_schedules_gfx906() {
    run(KernelId::GemvInt4, 1, SOAK_SCHEDULES);
    run(KernelId::GemvInt4DualSilu, 1, SOAK_SCHEDULES);
    run(KernelId::GemvInt4Qkv, 1, SOAK_SCHEDULES);
    run(KernelId::GemvInt4AllreduceRmsnorm, 2, SOAK_SCHEDULES);
}

/// §5.2 (LDS is workgroup-local, so every lane must see the whole stage before reading it): the
/// floor path's activation stage without the workgroup barrier after it — lanes read pairs other
/// lanes have not written yet — is caught by the simulator.
#[test]
fn floor_stage_without_its_workgroup_barrier_is_caught_gfx906() {
    use wavefuse_codegen::lowered::Stmt;
    use wavefuse_codegen::sim::FindingKind;
    let mut p = floor(KernelId::GemvInt4, 1, 1, 1, true);
    let body = std::mem::take(&mut p.lowered.body);
    let mut removed = false;
    let mut out = Vec::new();
    for (i, s) in body.iter().enumerate() {
        // The stage is a loop over the workgroup's lanes followed by the barrier.
        let after_loop = i > 0
            && matches!(&body[i - 1], Stmt::For { body: b, .. }
                if b.iter().any(|t| matches!(t, Stmt::Store { .. }) && format!("{t:?}").contains("Lds")));
        if !removed && after_loop && matches!(s, Stmt::WorkgroupBarrier) {
            removed = true;
            continue;
        }
        out.push(s.clone());
    }
    assert!(removed, "no stage barrier found in:\n{}", p.lowered);
    p.lowered.body = out;
    let r = sweep(&p, SEED, 0, CI_SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    assert!(
        r.findings.iter().any(|f| matches!(
            f.first.kind,
            FindingKind::StaleRead | FindingKind::UninitRead | FindingKind::WriteRace
        )),
        "the missing stage barrier was not caught:\n{text}"
    );
}
