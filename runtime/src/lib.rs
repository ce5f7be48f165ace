//! wavefuse runtime: compiles generated code, loads and launches it on GPUs, and runs tensor-parallel
//! rank groups.
//!
//! The runtime depends on `wavefuse-codegen` and `wavefuse-ir` only: never on the DSL, so kernels
//! can also come from IR built by hand or from a file.
//!
//! # Layers
//! - [`compile`]: the four compilers behind one [`Compiler`] trait (hipcc and hiprtc for AMD, nvcc
//!   and NVRTC for NVIDIA), the [`ResourceUsage`] they report, and typed errors that carry the
//!   compiler's log and the source.
//! - [`cache`]: a content-hash cache on disk, so an unchanged kernel is never recompiled.
//! - [`device`]: the GPUs behind one [`Device`] trait: [`CudaDevice`] through cudarc (driver and
//!   NVRTC loaded at run time) and [`HipDevice`] through a thin `libloading` wrapper of
//!   libamdhip64. A missing driver or GPU is a typed error, never a panic.
//! - [`launch`]: the ABI-agnostic launch core: typed [`KernelArg`]s, [`LaunchSpec`] (grid, block,
//!   dynamic LDS, co-residency requirement) and the co-residency check of DESIGN.md §5.9.
//! - [`rank`]: [`RankGroup`], a TP group of ranks either one per device or all on one device.
//! - [`exec`]: an op-level kernel on a rank group: op-level inputs to device arrays, launch,
//!   outputs back, and their error against the f64 reference.
//! - [`sync`]: the per-kernel-instance synchronisation state the runtime owns — counters, flags and
//!   the error word (zeroed once), the epoch passed to every launch (1, 2, 3, …), and the error word
//!   turned into [`Error::BarrierTimeout`] after each launch (DESIGN.md §5.4, §5.10, §5.11).
//! - [`timing`]: CUDA-event timing of one launch of a rank group behind a gate (device time only),
//!   the device's copy bandwidth and L2 size (DESIGN.md §8).
//!
//! # Safety
//! Every FFI call is checked and mapped to a typed error carrying the API's own error string; every
//! `unsafe` block says why it is sound in a `// SAFETY:` line.

pub mod cache;
pub mod compile;
pub mod device;
mod error;
pub mod exec;
pub mod launch;
pub mod rank;
pub mod sync;
pub mod timing;

pub use cache::{Cache, CacheError, CacheWarning, Lookup};
pub use compile::{
    Artifact, ArtifactFormat, CompileError, CompileRequest, Compiler, CompilerId, ResourceUsage,
};
pub use device::{
    CudaDevice, Device, DeviceBuffer, DeviceError, DeviceInfo, HipDevice, MemKind, PeerMapping,
};
pub use error::{Error, Result};
pub use launch::{Capacity, CoResidency, KernelArg, LaunchSpec};
pub use rank::{RankGroup, SameDeviceMode};
pub use sync::{DataParam, Epochs, KernelInstance};
pub use wavefuse_codegen as codegen;
