//! Nothing lowers twice (issue 35, item 1): the schedule is fitted where the kernel is lowered,
//! and the pipeline hands on the kernel it fitted. Every lowering a generation makes is logged
//! (`wavefuse_codegen::lower::log`, feature `lowering-log`) and checked: the kept schedule is
//! lowered exactly once, no schedule twice, and nothing outside codegen's fit lowers at all —
//! through `emit`'s path (`generate::generate`), the one `ab`, `run` and the GPU suite take
//! (`suite::generate`), a tuned store's entry and the tuner's baseline.

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{Origin, Schedule, log};
use wavefuse_harness::policy::{Placement, SchedulePolicy, Tuned};
use wavefuse_harness::suite::{self, CaseSpec, ShapeKind};
use wavefuse_harness::tune::candidates;
use wavefuse_harness::tune::store::{Entry, Key, Method, Store};
use wavefuse_harness::{KernelId, generate};

/// The lowerings of `kernel`'s generation (`log`, drained before and after by the caller) that
/// lowered `kept`, after checking none was lowered twice.
fn kept_lowered(log: &[(String, Schedule)], kept: &Schedule, what: &str) -> usize {
    for (i, a) in log.iter().enumerate() {
        assert!(
            !log[..i].contains(a),
            "{what}: {} lowered twice with {:?}",
            a.0,
            a.1
        );
    }
    log.iter().filter(|(_, s)| s == kept).count()
}

/// Kernel `id` at TP `tp`, batch `batch` on `arch` at `placement` through `emit`'s path: its
/// log of lowerings, checked, and how many there were.
fn emitted(id: KernelId, arch: Arch, tp: u32, batch: usize, placement: Placement) -> usize {
    let what = format!("{id}@{arch} tp {tp} batch {batch} {}", placement.name());
    log::take();
    let g = generate::generate_with(id, arch, tp, batch, &SchedulePolicy::default(), placement)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let lowered = log::take();
    assert_eq!(kept_lowered(&lowered, &g.schedule, &what), 1, "{what}");
    assert_eq!(
        lowered.len(),
        g.fit.lowerings,
        "{what}: a lowering outside the fit"
    );
    lowered.len()
}

/// A kernel whose default fits at once is lowered exactly once per generation, on both targets.
#[test]
fn a_generation_lowers_once_sm90_and_gfx906() {
    let once = [
        KernelId::GemvF16,
        KernelId::GemvInt4,
        KernelId::GemvInt4DualSilu,
        KernelId::GemvInt4Qkv,
        KernelId::AllreduceResidual,
        KernelId::AllreduceResidualRmsnorm,
        KernelId::GemvInt4AllreduceRmsnorm,
        KernelId::AllreduceInt8,
    ];
    for arch in Arch::ALL {
        for id in once {
            assert_eq!(
                emitted(id, arch, 4, 1, Placement::PerDevice),
                1,
                "{id}@{arch}"
            );
        }
    }
}

/// The fused TP 4 kernel on gfx906 at batch 8, where the co-residency fit refits the grid (one
/// wave per SIMD assumed above batch 4): its trials are each lowered once and the kept one is
/// not lowered again — by `emit`'s path nor by the suite's.
#[test]
fn the_fitted_fused_kernel_is_lowered_once_gfx906() {
    let id = KernelId::GemvInt4AllreduceRmsnorm;
    let c = CaseSpec {
        kernel: id.into(),
        tp: 4,
        batch: 8,
        shape: ShapeKind::Model,
    };
    let ir = suite::op_kernel(&c).expect("builds").expect("applies");
    let default = Schedule::default_for(Arch::Gfx906, &ir);
    for placement in [Placement::PerDevice, Placement::SameDevice] {
        let trials = emitted(id, Arch::Gfx906, 4, 8, placement);
        eprintln!(
            "{id}@gfx906 tp 4 batch 8 {}: {trials} trials",
            placement.name()
        );
        log::take();
        let g = suite::generate(&c, Arch::Gfx906, &SchedulePolicy::default(), placement)
            .expect("generates");
        let lowered = log::take();
        let what = format!("suite {}", placement.name());
        assert_eq!(kept_lowered(&lowered, &g.schedule, &what), 1);
        assert_eq!(lowered.len(), trials, "{what}: the same fit as emit's");
        // The fit happened: the kept schedule is not the target's default.
        assert_ne!(g.schedule, default, "{what}: nothing was fitted");
        // The tuner's baseline is the pipeline's kernel, not lowered again.
        let space = candidates::build_after(&g.ir, Arch::Gfx906, Some(g.code.clone()), &[], 1, 1);
        assert_eq!(space.kept.len(), 1);
        assert!(
            log::take().is_empty(),
            "{what}: the tuner lowered its baseline again"
        );
    }
}

/// A tuned store's entry is lowered once: the lowering that tells whether it still lowers is
/// the one the kernel keeps.
#[test]
fn a_tuned_entry_is_lowered_once_sm90() {
    let id = KernelId::GemvInt4;
    let ir = id.build(&wavefuse_harness::Shapes::qwen27b(4));
    let default = Schedule::default_for(Arch::Sm90, &ir);
    let schedule = Schedule {
        stream_weights: !default.stream_weights,
        ..default
    };
    let mut store = Store::default();
    store.insert(Entry {
        key: Key {
            kernel: id.name().into(),
            shape: "qwen27b-tp4".into(),
            arch: "sm90".into(),
            device: "*".into(),
        },
        method: Method::Timed,
        median_us: Some(1.0),
        default_median_us: Some(2.0),
        commit: "abc".into(),
        date: "2026-12-05T00:00:00Z".into(),
        compiler: String::new(),
        schedule: schedule.clone(),
    });
    let policy = SchedulePolicy::new(Some(Tuned::new(store, None)), Vec::new());
    log::take();
    let r = policy
        .resolve_kernel(
            &ir,
            Arch::Sm90,
            Placement::PerDevice,
            Some((id.name(), "qwen27b-tp4")),
        )
        .expect("generates");
    let lowered = log::take();
    assert_eq!(r.code.fit.origin, Origin::Preferred);
    assert_eq!(r.code.schedule, schedule);
    assert_eq!(lowered.len(), 1, "{lowered:?}");
}
