//! wavefuse code generation: targets, the lowered level, passes, and the C++ back ends.
//!
//! - [`target`]: the architectures as data (wave size, LDS, CU count, instruction availability).
//! - [`lowered`]: the lowered level — workgroups, waves, lanes, registers, LDS, global and peer
//!   memory, atomics and fences with ordering and scope, grid barriers and flags with epochs.

pub mod lowered;
pub mod target;

pub use target::Arch;
pub use wavefuse_ir as ir;
