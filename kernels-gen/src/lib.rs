//! The wavefuse kernel set (DESIGN.md §3) on the Qwen 3.5 27B decode workload (DESIGN.md §1), the
//! embedded synthetic data, and the data files that go with the set: the hand-written reference
//! kernels, the committed resource budgets and the committed tuned schedules.
//!
//! This crate is data. The pipeline that generates, compiles, checks and times these kernels is
//! `wavefuse-harness`; the `wavefuse` command is `wavefuse-cli`.

pub mod set;
pub mod shapes;
pub mod workload;

pub use set::KernelId;
pub use shapes::Shapes;
pub use workload::Workload;

/// The committed resource budget of every kernel, target and TP size (`kernels-gen/budgets.toml`).
pub const BUDGETS_TOML: &str = include_str!("../budgets.toml");

/// The committed tuned-schedule store (`kernels-gen/tuned/tuned.toml`).
pub const TUNED_TOML: &str = include_str!("../tuned/tuned.toml");

/// The directory of the hand-written reference kernels in this source tree
/// (`kernels-gen/reference`: `cuda/`, `hip/`, one ABI description per kernel).
pub const REFERENCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/reference");
