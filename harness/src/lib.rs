//! The wavefuse pipeline as a library (DESIGN.md §4): cases and shape sets, the schedule a case is
//! generated with, generate → compile → bind → check → time → report, the A/B harness, the GPU
//! suite, the multi-GPU bench, the tuner and checkpoint loading.
//!
//! The kernel set, its shapes and its workload come from `wavefuse-kernels` (re-exported here as
//! [`set`], [`shapes`] and [`workload`]); the `wavefuse` command (`wavefuse-cli`) parses its
//! arguments and calls into this crate.

pub mod ab;
pub mod case;
pub mod checkpoint;
pub mod fuzz;
pub mod generate;
pub mod launch;
pub mod llvm_diff;
pub mod mgpu;
pub mod model_config;
pub mod npy;
pub mod outputs;
pub mod pipeline;
pub mod policy;
pub mod provenance;
pub mod report;
pub mod sim;
pub mod suite;
pub mod tune;

pub use wavefuse_kernels::{KernelId, Shapes, Workload, set, shapes, workload};
