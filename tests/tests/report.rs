//! The main job's reference table, on kernels small enough for a debug build.

use wavefuse_harness::report::{row, table};
use wavefuse_kernels::{KernelId, Shapes, Workload};

#[test]
fn report_rows_are_finite_and_rank_consistent() {
    let rows: Vec<_> = [
        KernelId::AllreduceResidualRmsnorm,
        KernelId::AllreduceInt8,
        KernelId::GemvInt4,
    ]
    .into_iter()
    .map(|id| row(id, &Shapes::qwen27b(8), Workload::DEFAULT_SEED).expect("row"))
    .collect();
    for r in &rows {
        assert_eq!(r.non_finite, 0, "{}", r.id);
        assert!(r.ranks_agree, "{}", r.id);
        for (name, rms, _) in &r.outputs {
            assert!(*rms > 0.5 && *rms < 3.0, "{} {name}: rms {rms}", r.id);
        }
    }
    let text = table(&rows);
    assert!(
        text.contains("allreduce_residual_rmsnorm") && text.contains("normed"),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "{text}");
}
