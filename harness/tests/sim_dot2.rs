//! The gfx906 dot2 INT4 path (`int4_dot = dot2`, `codegen/src/lower/gemv.rs`) in the protocol
//! simulator: every GPTQ kernel of the set at small shapes, alone and split over K, the fused
//! kernel at TP 2, clean over seeded schedules against the f64 reference.

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Int4Dot, Schedule, lower};
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_harness::{KernelId, Shapes};

const SCHEDULES: u64 = 16;
const SEED: u64 = 0xD072;

#[test]
fn dot2_kernels_are_clean_in_the_simulator() {
    let arch = Arch::Gfx906;
    for (id, tp) in [
        (KernelId::GemvInt4, 1),
        (KernelId::GemvInt4DualSilu, 1),
        (KernelId::GemvInt4Qkv, 1),
        (KernelId::GemvInt4AllreduceRmsnorm, 2),
    ] {
        for (batch, parts) in [(1, 1), (2, 2)] {
            let shapes = Shapes {
                batch,
                ..Shapes::qwen27b(tp)
            };
            let ir = small_kernel(id, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
            let s = Schedule {
                int4_dot: Int4Dot::Dot2,
                k_unit_words: 2,
                k_split: parts,
                ..small_schedule(arch, &ir)
            };
            let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id}: {e}"));
            let p = Prepared {
                ir,
                lowered,
                shapes: Some(shapes),
                peer_table: PeerTable::Shared,
            };
            let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &r);
            eprintln!(
                "{id}@{arch} tp {tp} batch {batch} k_split {parts} dot2: {}",
                text.lines().next().unwrap_or("")
            );
            assert!(r.findings.is_empty() && r.failing == 0, "{text}");
        }
    }
}
