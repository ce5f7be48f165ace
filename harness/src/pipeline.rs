//! The pipeline: a case → the one [`Generated`] (its schedule's sources resolved by the
//! [`SchedulePolicy`], fitted and lowered once by codegen) → data → the compiler that builds it.

use wavefuse::ir::Kernel;
use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::LowerError;
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::{Arch, CompileError};
use wavefuse_runtime::compile::{Bounds, Compiler, Hipcc, Nvcc, Nvrtc};
use wavefuse_runtime::exec::{self, ArtifactSource};
use wavefuse_runtime::{Artifact, Cache, CompileRequest, Error as RtError};

use crate::case::{CaseSpec, Data, PrepError, mix, op_kernel};
use crate::policy::{Placement, SchedulePolicy};

/// A case generated for a target (no data yet): the op-level kernel and the one
/// [`wavefuse_codegen::Generated`] (lowered kernel, source, ABI, schedule) that every consumer
/// uses; it dereferences to the latter.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The case.
    pub spec: CaseSpec,
    /// The op-level kernel.
    pub ir: Kernel,
    /// The placement its schedule was fitted for.
    pub placement: Placement,
    /// What [`wavefuse_codegen::compile`] made of it.
    pub code: wavefuse_codegen::Generated,
}

impl std::ops::Deref for Generated {
    type Target = wavefuse_codegen::Generated;
    fn deref(&self) -> &wavefuse_codegen::Generated {
        &self.code
    }
}

impl Generated {
    /// Per-rank weight and tensor shapes, `K→N` for weights.
    pub fn dims(&self) -> String {
        let ws: Vec<String> = self
            .ir
            .buffers()
            .filter_map(|(_, d)| match d.local_type() {
                wavefuse::ir::BufferType::Weight(w) => Some(format!("{}→{}", w.k, w.n)),
                wavefuse::ir::BufferType::Tensor(_) => None,
            })
            .collect();
        if ws.is_empty() {
            let first = self
                .ir
                .buffers()
                .next()
                .map(|(_, d)| d.local_type().to_string());
            return first.unwrap_or_default();
        }
        ws.join(" + ")
    }
}

/// The pipeline's generation step, the only one: build the case's kernel, resolve its schedule's
/// sources with `policy` for `placement` and generate it ([`SchedulePolicy::resolve`]: codegen
/// fits the schedule while lowering, once). `wavefuse emit`, `check`, the snapshots, `ab`, `run`,
/// the GPU suite and the examples all come through here, so what is reviewed is what is measured.
pub fn generate(
    c: &CaseSpec,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<Generated, PrepError> {
    let ir = match op_kernel(c) {
        Ok(Some(k)) => k,
        Ok(None) => return Err(PrepError::NotApplicable(c.shape.name().into())),
        Err(e) => return Err(PrepError::NotApplicable(e.to_string())),
    };
    let resolved = policy
        .resolve(c, arch, &ir, placement)
        .map_err(PrepError::from)?;
    if let Some(note) = &resolved.note {
        eprintln!("{note}");
    }
    Ok(Generated {
        spec: c.clone(),
        ir,
        placement,
        code: resolved.code,
    })
}

impl From<CompileError> for PrepError {
    fn from(e: CompileError) -> PrepError {
        match e {
            CompileError::Lower(LowerError::Unsupported(m)) => PrepError::Unsupported(m),
            CompileError::Lower(LowerError::NotCoResident(n)) => {
                PrepError::NotCoResident(n.to_string())
            }
            CompileError::Lower(
                e @ (LowerError::IndexWidth { .. } | LowerError::TooDeep { .. }),
            ) => PrepError::Limit(e.to_string()),
            CompileError::Lower(e) => PrepError::Failed(format!("lowering: {e}")),
            e if e.is_unsupported() => PrepError::Unsupported(e.to_string()),
            e => PrepError::Failed(e.to_string()),
        }
    }
}

/// A case ready to run: generated, with data, and fresh data for the last launch of the stress
/// run when the kernel synchronises.
pub struct Prepared {
    /// The generated kernel.
    pub g: Generated,
    /// The correctness run's data.
    pub data: Data,
    /// Data for the stress run's last launch.
    pub fresh: Option<Data>,
}

/// Generate a case ([`generate`]) and its data (seed `seed`; the stress run's fresh data uses a
/// derived seed).
pub fn prepare(
    c: &CaseSpec,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
    seed: u64,
    stress: bool,
) -> Result<Prepared, PrepError> {
    let g = generate(c, arch, policy, placement)?;
    let data = Data::new(&g.ir, seed)?;
    let fresh = if stress && synchronises(&g.lowered) {
        Some(Data::new(&g.ir, mix(seed, 0xF8E5))?)
    } else {
        None
    };
    Ok(Prepared { g, data, fresh })
}

/// Whether a lowered kernel has a grid barrier or cross-rank flags.
pub fn synchronises(k: &LoweredKernel) -> bool {
    k.coresidency.is_some() || k.flag_rounds_per_launch > 0
}

/// What a compiler is chosen for; with the target it decides the compiler ([`compiler`]).
#[derive(Clone, Copy, Debug)]
pub enum Purpose<'a> {
    /// Generated code and the hand-written references, built to run, time or model (`ab`, `run`,
    /// the GPU suite, `tune`, the examples, the Python package): NVRTC without include paths for
    /// sm_90 (neither needs a header, and the cache key then does not depend on where headers
    /// live), hipcc for gfx906 (it reports resource usage; hiprtc does not).
    Run,
    /// A user's own hand-written kernel (`ab --hand`): as [`Purpose::Run`], with NVRTC's include
    /// directories from `$WAVEFUSE_CUDA_INCLUDE` (a user's kernel may include CUDA headers).
    UserHand,
    /// Resource checks (`wavefuse check`, the ISA tests): the drivers a user installs, hipcc for
    /// gfx906 and nvcc for sm_90 (whose ptxas reports what NVRTC's does), each run within the
    /// bounds.
    Check(&'a Bounds),
    /// `wavefuse check --manual` of a hand-written file: hipcc within the bounds, as `check`
    /// compiles, for gfx906; NVRTC without include paths for sm_90, as `ab` compiles hand-written
    /// CUDA.
    CheckHand(&'a Bounds),
}

/// The compiler for code of `arch` built for `purpose`: the one place a compiler is chosen.
pub fn compiler(arch: Arch, purpose: Purpose<'_>) -> Box<dyn Compiler> {
    match (arch, purpose) {
        (Arch::Sm90, Purpose::Run | Purpose::CheckHand(_)) => {
            Box::new(Nvrtc::with_includes(Vec::new()))
        }
        (Arch::Sm90, Purpose::UserHand) => Box::new(Nvrtc::from_env()),
        (Arch::Sm90, Purpose::Check(bounds)) => {
            Box::new(Nvcc::from_env().with_bounds(bounds.clone()))
        }
        (Arch::Gfx906, Purpose::Run | Purpose::UserHand) => Box::new(Hipcc::from_env()),
        (Arch::Gfx906, Purpose::Check(bounds) | Purpose::CheckHand(bounds)) => {
            Box::new(Hipcc::from_env().with_bounds(bounds.clone()))
        }
    }
}

/// The compile request for generated code (`g`'s source, named after its kernel for logs and
/// the compiler's file names, for its target): the one builder of requests for generated code.
pub fn request(g: &wavefuse_codegen::Generated) -> CompileRequest {
    request_named(&g.lowered.name, &g.source)
}

/// The compile request for `src` under `name` ([`request`] names it after the lowered kernel,
/// [`crate::generate::compile_source`] after the source's symbol).
pub fn request_named(name: &str, src: &cpp::Source) -> CompileRequest {
    CompileRequest::new(name, src.text.clone(), src.arch)
}

/// The artifact of generated code `g`, through `cache`, from the compiler [`Purpose::Run`]
/// chooses: cached, compiled now, or prebuilt where the compiler is missing.
pub fn artifact(
    cache: &Cache,
    g: &wavefuse_codegen::Generated,
) -> Result<(Artifact, ArtifactSource), RtError> {
    let compiler = compiler(g.lowered.arch, Purpose::Run);
    exec::artifact_for(cache, compiler.as_ref(), &request(g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{ShapeKind, cases, cases_at};
    use crate::shapes::Model;
    use crate::{KernelId, Shapes};
    use wavefuse_codegen::lower::fit::{fit_coresident, fits_coresident, resident_per_cu};
    use wavefuse_codegen::lower::{AllreduceProtocol, Schedule};

    /// The split-K fused kernel (128-lane workgroups, 8 per SM) keeps its K parts on a device of
    /// its own and gives them up first where ranks share one; 512-lane fused workgroups count as
    /// 2 per SM, so two ranks' 160 on one H200 go back to 256 lanes (4 per SM).
    #[test]
    fn coresidency_counts_workgroup_sizes_and_lowers_the_split_first() {
        assert_eq!(
            [64, 128, 256, 512, 1024].map(resident_per_cu),
            [8, 8, 4, 2, 1]
        );
        let ir = KernelId::GemvInt4AllreduceRmsnorm.build(&Shapes::qwen27b(2));
        let s = Schedule::default_for(Arch::Sm90, &ir);
        assert_eq!((s.workgroup_size, s.k_split), (128, 4));
        let (k, one) = fit_coresident(&ir, Arch::Sm90, s.clone(), 1).expect("lowers");
        assert_eq!((one.k_split, k.grid), (4, 640));
        let (k, two) = fit_coresident(&ir, Arch::Sm90, s.clone(), 2).expect("lowers");
        assert_eq!((two.k_split, two.workgroup_size, k.grid), (2, 128, 320));
        assert!(fits_coresident(&k, Arch::Sm90, 2));
        let (k, four) = fit_coresident(&ir, Arch::Sm90, s, 4).expect("lowers");
        assert_eq!((four.k_split, k.grid), (1, 160));
        assert!(fits_coresident(&k, Arch::Sm90, 4));

        let wide = Schedule {
            workgroup_size: 512,
            threads_per_column: 16,
            k_split: 1,
            ..Schedule::default_for(Arch::Sm90, &ir)
        };
        let (_, one) = fit_coresident(&ir, Arch::Sm90, wide.clone(), 1).expect("lowers");
        assert_eq!(one.workgroup_size, 512);
        let (k, two) = fit_coresident(&ir, Arch::Sm90, wide, 2).expect("lowers");
        assert_eq!((two.workgroup_size, two.threads_per_column), (256, 8));
        assert!(fits_coresident(&k, Arch::Sm90, 2));
    }

    /// Every case of the full suite is generated for both targets with all its ranks on one
    /// device, as `wavefuse gpu-suite` does (the H200 run of 07e9adc3cb11 found batch 8 at TP 2
    /// and 4 with the split lowered to fit but the activations still staged for 4 parts: 75 KB
    /// of LDS, refused by the CUDA writer).
    ///
    /// On sm_90 (the GPU the suite runs on) every case generates. On gfx906 the fused kernel's
    /// grids at TP 4 and 8 (and TP 2 at batch 8) cannot all be resident on one MI50 (60 CUs; its cross-slice sums take
    /// 16–32 KiB of LDS per workgroup): refused at compile time with the numbers, never at launch.
    #[test]
    fn every_suite_case_generates_with_its_ranks_on_one_device() {
        let mut refused = Vec::new();
        for arch in Arch::ALL {
            for c in cases(false, &KernelId::ALL, &[1, 2, 4, 8]) {
                let what = format!(
                    "{}@{arch} tp {} {:?} batch {}",
                    c.kernel, c.tp, c.shape, c.batch
                );
                match generate(&c, arch, &SchedulePolicy::default(), Placement::SameDevice) {
                    Ok(_) | Err(PrepError::NotApplicable(_)) => {}
                    Err(PrepError::NotCoResident(m)) if arch == Arch::Gfx906 => {
                        assert!(m.contains("must be resident at once"), "{what}: {m}");
                        refused.push(what);
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
        }
        assert!(
            refused
                .iter()
                .all(|w| w.starts_with("gemv_int4_allreduce_rmsnorm@gfx906")),
            "{refused:#?}"
        );
    }

    /// One rank per device: the fused GEMV + allreduce kernel pushes (measured faster over
    /// NVLink); ranks sharing a device, kernels without a GEMV and one rank keep pull.
    #[test]
    fn one_rank_per_device_pushes_the_fused_kernel() {
        let protocol = |id: KernelId, tp: u32, per_device: u32| {
            let ir = id.build(&Shapes::qwen27b(tp));
            let c = CaseSpec {
                kernel: id.into(),
                tp,
                batch: 1,
                shape: ShapeKind::Model,
            };
            SchedulePolicy::default()
                .resolve(&c, Arch::Sm90, &ir, Placement::of(per_device))
                .expect("schedule")
                .code
                .schedule
                .protocol
        };
        let fused = KernelId::GemvInt4AllreduceRmsnorm;
        assert_eq!(protocol(fused, 2, 1), AllreduceProtocol::Push);
        assert_eq!(protocol(fused, 4, 1), AllreduceProtocol::Push);
        assert_eq!(protocol(fused, 2, 2), AllreduceProtocol::Pull);
        assert_eq!(protocol(fused, 1, 1), AllreduceProtocol::Pull);
        assert_eq!(
            protocol(KernelId::AllreduceResidualRmsnorm, 2, 1),
            AllreduceProtocol::Pull
        );
    }

    /// At a model's own shapes: its cases at batch 1, 3, 8 (quick: 1), every one generating for
    /// both targets at those shapes (hidden 2048 here), no Qwen odd shapes.
    #[test]
    fn a_models_cases_are_its_shapes_at_three_batches() {
        let m = Model {
            hidden: 2048,
            ffn: 5632,
            q_gate: 2048,
            kv: 256,
            head_dim: 64,
            rms_eps: 1e-5,
            gptq: Model::QWEN27B.gptq,
        };
        let of = ShapeKind::Of(m);
        assert_eq!(cases_at(true, &KernelId::ALL, &[1, 2], of).len(), 8 * 2);
        let full = cases_at(false, &KernelId::ALL, &[1, 2], of);
        assert_eq!(full.len(), 8 * 2 * 3);
        for c in &full {
            assert_eq!(c.shape, of);
            for arch in Arch::ALL {
                let g = generate(c, arch, &SchedulePolicy::default(), Placement::SameDevice)
                    .unwrap_or_else(|e| panic!("{}@{arch}: {e}", c.label()));
                assert!(
                    g.ir.buffers().any(|(_, b)| matches!(b.local_type(),
                        wavefuse::ir::BufferType::Tensor(t) if t.shape.last() == Some(&2048))),
                    "{}: no 2048-wide buffer",
                    c.label()
                );
            }
        }
    }

    #[test]
    fn symbols_are_the_lowered_names() {
        for id in KernelId::ALL {
            let c = CaseSpec {
                kernel: id.into(),
                tp: 4,
                batch: 1,
                shape: ShapeKind::Model,
            };
            let g = generate(
                &c,
                Arch::Sm90,
                &SchedulePolicy::default(),
                Placement::SameDevice,
            )
            .unwrap();
            assert_eq!(
                g.source.symbol, g.lowered.name,
                "the runtime loads the lowered name"
            );
        }
    }

    #[test]
    fn odd_cases_prepare_with_a_finite_reference() {
        for (id, tp, shape) in [
            (KernelId::GemvInt4AllreduceRmsnorm, 8, ShapeKind::OddK),
            (KernelId::AllreduceInt8, 2, ShapeKind::OddN),
            (KernelId::GemvInt4Qkv, 8, ShapeKind::OddN),
        ] {
            let c = CaseSpec {
                kernel: id.into(),
                tp,
                batch: 3,
                shape,
            };
            let p = prepare(
                &c,
                Arch::Sm90,
                &SchedulePolicy::default(),
                Placement::SameDevice,
                1,
                true,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            assert_eq!(
                p.fresh.is_some(),
                synchronises(&p.g.lowered),
                "{}",
                c.label()
            );
            for outs in &p.data.reference {
                assert!(outs.values().all(|t| t.data.iter().all(|v| v.is_finite())));
            }
        }
    }
}
