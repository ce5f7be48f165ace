//! The protocol simulator on every kernel of the set, lowered for gfx906 at small shapes, over
//! 1000 seeded schedules per kernel (TP 1, 2, 4 and 8; lane and wave granularity; no, mild and
//! strong rank/workgroup skew; three back-to-back launches per schedule on the same counters and
//! flags): zero findings — no deadlock, no stale read, no partial barrier, every output within
//! tolerance of the f64 reference and replicated outputs identical on every rank. Plus a shorter
//! sweep for sm90 (32-lane waves).

use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_harness::KernelId;
use wavefuse_harness::sim::{SmallShapes, prepare, shrink, summary, sweep};

/// Schedules per TP size for gfx906: 1000 per kernel.
const MIX: [(u32, u64); 4] = [(1, 250), (2, 350), (4, 300), (8, 100)];

/// Kernels the lowering does not support yet (at any TP): listed so progress is visible. A kernel
/// listed here that lowers, or one that does not lower and is not listed, fails the test.
const UNSUPPORTED: &[KernelId] = &[];

const SEED: u64 = 0x51_5EED;

fn sweep_kernel(id: KernelId, arch: Arch, mix: &[(u32, u64)]) {
    let mut total = 0;
    for &(tp, n) in mix {
        let p = match prepare(id, tp, arch, &SmallShapes::DEFAULT) {
            Err(e) if e.is_unsupported() => {
                assert!(
                    UNSUPPORTED.contains(&id),
                    "{id}@{arch} tp={tp} does not lower and is not listed as unsupported: {e}"
                );
                eprintln!("skipped: {id} is not supported by the lowering yet ({e})");
                return;
            }
            Err(e) => panic!("{id}@{arch} tp={tp}: {e}"),
            Ok(p) => p,
        };
        assert!(
            !UNSUPPORTED.contains(&id),
            "{id} lowers now: remove it from UNSUPPORTED"
        );
        let s = sweep(&p, SEED, 0, n, |_, _| {}).expect("simulates");
        eprintln!(
            "{id}@{arch} tp={tp}: {}",
            summary(&p, &s).lines().next().unwrap_or("")
        );
        assert!(
            s.findings.is_empty(),
            "{id}@{arch} tp={tp}:\n{}",
            summary(&p, &s)
        );
        assert_eq!(s.failing, 0);
        total += s.schedules;
    }
    assert_eq!(total, mix.iter().map(|m| m.1).sum::<u64>());
}

#[test]
fn sim_gemv_f16_gfx906() {
    sweep_kernel(KernelId::GemvF16, Arch::Gfx906, &MIX);
}

#[test]
fn sim_gemv_int4_gfx906() {
    sweep_kernel(KernelId::GemvInt4, Arch::Gfx906, &MIX);
}

#[test]
fn sim_gemv_int4_dual_silu_gfx906() {
    sweep_kernel(KernelId::GemvInt4DualSilu, Arch::Gfx906, &MIX);
}

#[test]
fn sim_gemv_int4_qkv_gfx906() {
    sweep_kernel(KernelId::GemvInt4Qkv, Arch::Gfx906, &MIX);
}

#[test]
fn sim_allreduce_residual_gfx906() {
    sweep_kernel(KernelId::AllreduceResidual, Arch::Gfx906, &MIX);
}

#[test]
fn sim_allreduce_residual_rmsnorm_gfx906() {
    sweep_kernel(KernelId::AllreduceResidualRmsnorm, Arch::Gfx906, &MIX);
}

#[test]
fn sim_gemv_int4_allreduce_rmsnorm_gfx906() {
    sweep_kernel(KernelId::GemvInt4AllreduceRmsnorm, Arch::Gfx906, &MIX);
}

#[test]
fn sim_allreduce_int8_gfx906() {
    sweep_kernel(KernelId::AllreduceInt8, Arch::Gfx906, &MIX);
}

#[test]
fn sim_every_kernel_sm90() {
    for id in KernelId::ALL {
        sweep_kernel(id, Arch::Sm90, &[(2, 40), (4, 20)]);
    }
}

#[test]
fn invalid_shrink_rejects_a_dimension_it_has_no_small_size_for() {
    let k = KernelId::GemvInt4.build(&wavefuse_harness::Shapes::qwen27b(4));
    let err = shrink(&k, &[(5120, 256)]).unwrap_err().to_string();
    assert!(
        err.contains("buffer `w`: no small size for dimension 4352"),
        "{err}"
    );
}

#[test]
fn sim_command_reports_shapes_and_exits_zero_when_clean() {
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "sim",
            "allreduce_residual_rmsnorm",
            "--tp",
            "2",
            "--schedules",
            "6",
            "--seed",
            "7",
        ])
        .output()
        .expect("runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("small shapes: hidden 128"), "{out}");
    assert!(
        out.contains("6 schedules in") && out.contains("0 with findings"),
        "{out}"
    );
}

#[test]
fn invalid_sim_command_with_rotated_peer_tables_prints_findings_and_fails() {
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args([
            "sim",
            "allreduce_residual",
            "--tp",
            "2",
            "--schedules",
            "3",
            "--rotate-peers",
        ])
        .output()
        .expect("runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("3 with findings"), "{out}");
    for what in [
        "deadlock: no lane can run",
        "wait timeout",
        "error word set: rank",
        "mismatch: launch",
        "on 3 schedules",
    ] {
        assert!(out.contains(what), "missing `{what}` in:\n{out}");
    }
}

#[test]
fn invalid_sim_command_without_schedules_is_a_usage_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["sim", "gemv_int4"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--schedules"));
}
