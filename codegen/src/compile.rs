//! The one chain from an op-level kernel to what the runtime compiles: lower → expand the
//! synchronisation → validate the lowered kernel → write the target's C++ → describe the ABI.
//!
//! Every consumer — `wavefuse emit`, the snapshots, `check`, `ab`, the GPU suite, the tuner, the
//! examples — gets its kernel from [`compile`], so the source that is reviewed is the source that
//! is measured. Nothing downstream re-lowers or re-derives what a [`Generated`] holds.

use thiserror::Error;
use wavefuse_ir::Kernel;

use crate::abi::Abi;
use crate::cpp::{self, Source};
use crate::lower::{self, LowerError, Schedule};
use crate::lowered::LoweredKernel;
use crate::target::Arch;

/// A kernel generated for one target with one schedule: the lowered kernel, its C++ source and
/// its ABI description, made together by [`compile`].
#[derive(Clone, Debug)]
pub struct Generated {
    /// The schedule it was generated with.
    pub schedule: Schedule,
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

/// Generate `kernel` for `arch` with `schedule`: the only chain of lower → expand → validate →
/// emit → ABI.
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
    let lowered = lower::lower(kernel, arch, schedule)?;
    let source = cpp::emit(&lowered)?;
    let abi = Abi::from_kernel(&lowered);
    Ok(Generated {
        schedule: schedule.clone(),
        lowered,
        source,
        abi,
    })
}
