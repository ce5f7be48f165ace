//! wavefuse code generation: targets, the lowered level, passes, and the C++ back ends.
//!
//! - [`target`]: the architectures as data (wave size, LDS, CU count, instruction availability).
//! - [`lowered`]: the lowered level — workgroups, waves, lanes, registers, LDS, global and peer
//!   memory, atomics and fences with ordering and scope, grid barriers and flags with epochs.
//! - [`cpp`]: the C++ writer with its HIP (gfx906) and CUDA (sm_90) dialects, and the real
//!   compilers' resource checks.
//! - [`sim`]: the CPU protocol simulator of the lowered level (schedules, visibility, deadlocks).
//! - [`back`]: what the back ends share — the ABI description of a generated kernel, for the
//!   runtime ([`abi`], re-exported at the top), and the one namer of generated identifiers.
//! - [`clib`]: the C library of a generated kernel (extern "C" launcher, header, build script).
//! - [`generate`]: the one chain fit and lower → expand → validate → emit → ABI, giving a
//!   [`Generated`] ([`compile`]: the same for an exact schedule).
//! - `llvm` (feature `llvm`): the LLVM back end (inkwell, LLVM 16): gfx906 code objects and
//!   sm_90 PTX from the same lowered kernels.

pub mod back;
pub mod clib;
mod compile;
pub mod cpp;
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod lower;
pub mod lowered;
pub mod model;
pub mod resources;
pub mod sim;
pub mod target;

/// The ABI description ([`back::abi`]), at its long-standing path.
pub use back::abi;
pub use compile::{CompileError, Generated, compile, generate};
pub use target::Arch;
pub use wavefuse_ir as ir;
