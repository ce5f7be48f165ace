//! The one chain from an op-level kernel to what the runtime compiles: fit the schedule while
//! lowering (lower → expand the synchronisation → validate the lowered kernel, once per schedule
//! tried) → write the target's C++ → describe the ABI.
//!
//! Every consumer — `wavefuse emit`, the snapshots, `check`, `ab`, the GPU suite, the tuner, the
//! examples — gets its kernel from [`generate`] (or [`compile`], for an exact schedule), so the
//! source that is reviewed is the source that is measured. Nothing downstream re-lowers or
//! re-derives what a [`Generated`] holds.

use thiserror::Error;
use wavefuse_ir::Kernel;

use crate::abi::Abi;
use crate::cpp::{self, Source};
use crate::lower::{FitError, FitReport, LowerError, Schedule, ScheduleInputs, fit};
use crate::lowered::LoweredKernel;
use crate::target::Arch;

/// A kernel generated for one target with one schedule: the lowered kernel, its C++ source and
/// its ABI description, made together by [`generate`].
#[derive(Clone, Debug)]
pub struct Generated {
    /// The schedule it was generated with.
    pub schedule: Schedule,
    /// How the schedule was found (where it started, warnings, lowerings made).
    pub fit: FitReport,
    /// The lowered kernel (one rank's kernel, primitive synchronisation only).
    pub lowered: LoweredKernel,
    /// The C++ source (HIP for gfx906, CUDA for sm_90).
    pub source: Source,
    /// How the runtime binds and launches it.
    pub abi: Abi,
}

/// Why a kernel could not be generated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CompileError {
    /// The lowering refused the kernel or the schedule (or the op-level kernel is invalid).
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// An explicit schedule override does not parse or does not fit the kernel.
    #[error("{origin}: {source}")]
    Override {
        /// Where the override came from.
        origin: String,
        /// What is wrong with it.
        source: LowerError,
    },
    /// The C++ writer could not express the lowered kernel.
    #[error("C++ writer: {0}")]
    Write(#[from] cpp::Error),
}

impl CompileError {
    /// The lowering or the writer does not support the kernel (a known limitation, not a bug).
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            CompileError::Lower(LowerError::Unsupported(_))
                | CompileError::Write(cpp::Error::Unsupported(_))
        )
    }
}

impl From<FitError> for CompileError {
    fn from(e: FitError) -> CompileError {
        match e {
            FitError::Lower(e) => CompileError::Lower(e),
            FitError::Override { origin, source } => CompileError::Override { origin, source },
        }
    }
}

/// Generate `kernel` for `arch` with the schedule made of `inputs` (where it starts, the explicit
/// overrides, the placement): the only chain of fit and lower → expand → validate → emit → ABI.
/// The schedule is fitted while lowering ([`fit()`]), and the kernel kept is the fit's own.
///
/// ```
/// use wavefuse_codegen::{Arch, generate, lower::ScheduleInputs};
/// # use wavefuse_codegen::ir::{Builder, ScalarType, Sharding, Tensor};
/// # let mut b = Builder::new("copy_add", 1);
/// # let x = b.input("x", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let r = b.input("r", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let y = b.output("y", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let (xv, rv) = (b.load(x), b.load(r));
/// # let s = b.add(xv, rv);
/// # let s = b.round_f16(s);
/// # b.store(s, y);
/// # let kernel = b.finish();
/// let g = generate(&kernel, Arch::Sm90, &ScheduleInputs::per_device()).expect("generates");
/// assert!(g.source.text.contains("__global__"));
/// assert_eq!(g.fit.lowerings, 1);
/// ```
pub fn generate(
    kernel: &Kernel,
    arch: Arch,
    inputs: &ScheduleInputs,
) -> Result<Generated, CompileError> {
    let fitted = fit(kernel, arch, inputs)?;
    // Ranks sharing a device launch as one grid through the ranks entry (one launch, no fork
    // and join of streams per call): written only where the placement has them.
    let ranks_entry = inputs.ranks_per_device > 1 && fitted.lowered.tp > 1;
    let source = cpp::emit_entries(&fitted.lowered, &fitted.info, ranks_entry)?;
    let mut abi = Abi::from_kernel(&fitted.lowered);
    if ranks_entry {
        abi.ranks_symbol = Some(cpp::ranks_symbol(&abi.symbol));
    }
    Ok(Generated {
        schedule: fitted.schedule,
        fit: fitted.report,
        lowered: fitted.lowered,
        source,
        abi,
    })
}

/// Generate `kernel` for `arch` with exactly `schedule` ([`generate`] with
/// [`ScheduleInputs::exact`]: no default rules, no overrides, no fit): a tuner's candidate, a
/// schedule a test spells out.
///
/// ```
/// use wavefuse_codegen::{Arch, compile, lower::Schedule};
/// # use wavefuse_codegen::ir::{Builder, ScalarType, Sharding, Tensor};
/// # let mut b = Builder::new("copy_add", 1);
/// # let x = b.input("x", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let r = b.input("r", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let y = b.output("y", Tensor::activation(ScalarType::F16, 1, 256), Sharding::Replicated);
/// # let (xv, rv) = (b.load(x), b.load(r));
/// # let s = b.add(xv, rv);
/// # let s = b.round_f16(s);
/// # b.store(s, y);
/// # let kernel = b.finish();
/// let schedule = Schedule::default_for(Arch::Gfx906, &kernel);
/// match compile(&kernel, Arch::Gfx906, &schedule) {
///     Ok(g) => assert!(g.source.text.contains("__global__")),
///     Err(e) => assert!(e.is_unsupported(), "{e}"),
/// }
/// ```
pub fn compile(
    kernel: &Kernel,
    arch: Arch,
    schedule: &Schedule,
) -> Result<Generated, CompileError> {
    generate(kernel, arch, &ScheduleInputs::exact(schedule.clone()))
}
