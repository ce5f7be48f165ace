//! The C++ back ends: one [`Writer`] generic over a [`Dialect`], with [`HipDialect`] for AMD
//! (gfx906) and [`CudaDialect`] for NVIDIA (sm_90).
//!
//! The writer prints a lowered kernel (after
//! [`expand_sync`](crate::lowered::expand::expand_sync)) as one `extern "C" __global__` function
//! with exact launch bounds. Output is deterministic: identifiers come from entity indices through
//! one [`Names`] table, helpers are printed in name order, indentation goes through [`Level`].
//! Every synchronisation statement is preceded by a one-line comment naming the DESIGN.md §5
//! invariant it upholds. What a target cannot express returns [`Error::Unsupported`].
//!
//! Assumptions the generated code makes of its launcher are part of the ABI description
//! ([`crate::abi::Abi`]): argument order and types, a 1-D grid of `grid` workgroups of exactly
//! `workgroup_size` lanes, arrays aligned to their vector width, peer tables in rank order.
//!
//! The real compilers (hipcc, hiprtc, nvcc, NVRTC) are driven by the runtime
//! (`wavefuse_runtime::compile`), which parses their reports into [`crate::resources`];
//! [`budget`] checks those reports against a committed budget.

pub mod budget;
mod cuda;
mod dialect;
mod expr;
mod hip;
mod level;
mod memory;
mod sync;
mod ty;
mod writer;

pub use cuda::CudaDialect;
pub use dialect::{
    Atomics, Builtins, Dialect, Fp16, KernelAttrs, Prelude, Rmw, WaveOps, special_1d,
};
pub use hip::HipDialect;
pub use level::Level;
// Shared with the other back ends (`crate::back`); re-exported where users have found them.
pub use crate::back::{Language, Names, identifier, language, symbol, vector_words};
pub use ty::{elem_ty, expr_ty};
pub use writer::{Writer, ranks_symbol};

use crate::lowered::{LoweredInfo, LoweredKernel};
use crate::target::{Arch, Vendor};

/// Why a kernel could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The target (or this back end) cannot express something the kernel needs.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The lowered kernel breaks a rule of the lowered level (a lowering bug).
    #[error("malformed lowered kernel: {0}")]
    Malformed(String),
}

/// A generated source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The kernel's exported symbol.
    pub symbol: String,
    /// Target architecture.
    pub arch: Arch,
    /// Source language.
    pub language: Language,
    /// The C++ text.
    pub text: String,
}

impl Source {
    /// `<symbol>.hip` or `<symbol>.cu`.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.symbol, self.language.extension())
    }
}

/// Write `k` in its target's dialect, with facts derived from `k` ([`LoweredInfo::derive`]): for a
/// kernel that may not have been through the validator (the writer then reports what it cannot
/// write instead of panicking). [`emit_with`] takes the validator's facts.
pub fn emit(k: &LoweredKernel) -> Result<Source, Error> {
    emit_with(k, &LoweredInfo::derive(k))
}

/// Write `k` in its target's dialect, reading the facts `info` that
/// [`validate`](crate::lowered::validate::validate) returned for it.
pub fn emit_with(k: &LoweredKernel, info: &LoweredInfo) -> Result<Source, Error> {
    emit_entries(k, info, false)
}

/// [`emit_with`], and with `ranks_entry` (and TP > 1) the kernel's ranks entry too
/// ([`Writer::with_ranks_entry`]): what [`generate`](crate::generate) writes for a kernel placed
/// with several ranks on one device.
pub fn emit_entries(
    k: &LoweredKernel,
    info: &LoweredInfo,
    ranks_entry: bool,
) -> Result<Source, Error> {
    let text = match k.arch.vendor() {
        Vendor::Amd => Writer::new(k, info, HipDialect)
            .with_ranks_entry(ranks_entry)
            .write()?,
        Vendor::Nvidia => Writer::new(k, info, CudaDialect)
            .with_ranks_entry(ranks_entry)
            .write()?,
    };
    Ok(Source {
        symbol: symbol(&k.name),
        arch: k.arch,
        language: language(k.arch),
        text,
    })
}
