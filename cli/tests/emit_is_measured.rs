//! What is reviewed is what is measured: for every kernel of the set at the model shapes of the
//! GPU suite (TP 1, 2, 4, 8; batch 1, 3, 8), both targets and both placements, the source that
//! `wavefuse emit` prints is byte-identical to the source the pipeline hands `ab`, `run` and the
//! GPU suite (`suite::generate`, which `suite::prepare` calls), to the tuner's baseline candidate,
//! and — at batch 1, one rank per device, as TP is deployed — to the committed snapshot. Where the
//! placement changes a kernel (all ranks on one device refits a grid-barrier kernel), `emit
//! --placement same-device` prints what `ab` and the default GPU suite run.

use std::path::PathBuf;
use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_harness::policy::{Placement, SchedulePolicy};
use wavefuse_harness::suite::{self, CaseSpec, PrepError, ShapeKind};
use wavefuse_harness::tune::candidates;
use wavefuse_kernels::KernelId;

/// `wavefuse emit` with no schedule overrides in its environment.
fn emit(
    id: KernelId,
    arch: Arch,
    tp: u32,
    batch: usize,
    placement: Placement,
) -> Result<String, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_wavefuse"))
        .args(["emit", id.name(), "--target", arch.name()])
        .args(["--tp", &tp.to_string(), "--batch", &batch.to_string()])
        .args(["--placement", placement.name()])
        .env_remove("WAVEFUSE_SCHEDULE")
        .env_remove("WAVEFUSE_SCHEDULE_SM90")
        .env_remove("WAVEFUSE_SCHEDULE_GFX906")
        .output()
        .expect("wavefuse runs");
    if !o.status.success() {
        assert!(o.stdout.is_empty(), "a failed emit printed a kernel");
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(String::from_utf8(o.stdout).expect("UTF-8 source"))
}

/// The committed snapshot's body (after insta's header), if there is one for this name.
fn snapshot(id: KernelId, arch: Arch, tp: u32) -> Option<String> {
    let (file, target) = match arch {
        Arch::Gfx906 => ("hip", "gfx906"),
        Arch::Sm90 => ("cuda", "sm90"),
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/tests/snapshots")
        .join(format!("{file}__{}@{target}_tp{tp}.snap", id.name()));
    let text = std::fs::read_to_string(path).ok()?;
    // `---\n<metadata>\n---\n<body>`: the body is everything after the second `---` line.
    let body = text.splitn(3, "---\n").nth(2)?;
    Some(body.to_owned())
}

#[test]
fn emit_snapshot_and_measured_sources_are_identical() {
    let policy = SchedulePolicy::default();
    let mut compared = 0;
    let mut snapshots = 0;
    let mut refused = 0;
    for arch in Arch::ALL {
        for id in KernelId::ALL {
            for tp in [1, 2, 4, 8] {
                for batch in [1, 3, 8] {
                    let c = CaseSpec {
                        kernel: id.into(),
                        tp,
                        batch,
                        shape: ShapeKind::Model,
                    };
                    let placements: &[Placement] = if tp > 1 {
                        &[Placement::SameDevice, Placement::PerDevice]
                    } else {
                        &[Placement::SameDevice]
                    };
                    for &placement in placements {
                        let what =
                            format!("{id}@{arch} tp {tp} batch {batch} {}", placement.name());
                        let measured = match suite::generate(&c, arch, &policy, placement) {
                            Ok(g) => g,
                            // Refused at compile time (DESIGN.md §5.9): `emit` refuses it with
                            // the same numbers and prints no kernel.
                            Err(PrepError::NotCoResident(why)) => {
                                let printed = emit(id, arch, tp, batch, placement);
                                assert!(
                                    printed.as_ref().is_err_and(|e| e.contains(&why)),
                                    "{what}: refused by the pipeline ({why}) but emit said {printed:?}"
                                );
                                refused += 1;
                                continue;
                            }
                            Err(e) => panic!("{what}: {e}"),
                        };
                        let printed = emit(id, arch, tp, batch, placement)
                            .unwrap_or_else(|e| panic!("{what}: emit failed: {e}"));
                        assert!(
                            printed == measured.source.text,
                            "{what}: `wavefuse emit` differs from the source ab/gpu-suite compile"
                        );
                        // The tuner's first candidate is the untuned baseline it measures against.
                        let space = candidates::build(
                            &measured.ir,
                            arch,
                            &[measured.schedule.clone()],
                            1,
                            placement.ranks_per_device(tp),
                        );
                        assert_eq!(
                            space.kept.first().map(|g| &g.source.text),
                            Some(&measured.source.text),
                            "{what}: the tuner's baseline differs"
                        );
                        compared += 1;
                        if batch == 1 && (placement == Placement::PerDevice || tp == 1) {
                            let snap = snapshot(id, arch, tp)
                                .unwrap_or_else(|| panic!("{what}: no committed snapshot"));
                            assert!(
                                snap.trim_end() == printed.trim_end(),
                                "{what}: the committed snapshot differs from `wavefuse emit`"
                            );
                            snapshots += 1;
                        }
                    }
                }
            }
        }
    }
    // 2 targets × 8 kernels × (TP 1 + 3 TPs × 2 placements) × 3 batches; 64 snapshots; the
    // refusals: the fused kernel on gfx906 with its ranks on one MI50 at TP 4 batch 1 and at
    // TP 8 batch 1, 3, 8 (see harness's `every_suite_case_generates_with_its_ranks_on_one_device`;
    // TP 2 batch 8 and TP 4 batch 3 fit since the default stages in phases at batch > 1, and TP 4
    // batch 8 since the gfx906 fit assumes hipcc's occupancy above batch 4 and narrows the
    // workgroups, issue 34 item 3).
    assert_eq!(
        (compared + refused, snapshots, refused),
        (2 * 8 * 7 * 3, 64, 4)
    );
}

/// The README's snapshot recipe (`wavefuse::pipeline::generate`, what a user's own insta test
/// holds) gives exactly what `wavefuse emit` prints, for the allreduce kernels whose protocol
/// (push or pull) once depended on which crate picked the default schedule (issue 34).
#[test]
fn the_readme_snapshot_recipe_is_what_emit_prints() {
    use wavefuse::pipeline;
    for arch in Arch::ALL {
        for id in [
            KernelId::GemvInt4AllreduceRmsnorm,
            KernelId::AllreduceResidualRmsnorm,
            KernelId::GemvInt4,
        ] {
            let kernel = id.build(&wavefuse_kernels::Shapes::qwen27b(4));
            let recipe = pipeline::generate(&kernel, arch).expect("generates");
            let printed = emit(id, arch, 4, 1, Placement::PerDevice).expect("emits");
            assert_eq!(recipe.source.text, printed, "{id}@{arch}_tp4");
        }
    }
}
