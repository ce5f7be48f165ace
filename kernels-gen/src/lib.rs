//! The wavefuse kernel set (DESIGN.md §3) on the Qwen 3.5 27B decode workload (DESIGN.md §1),
//! the embedded synthetic data, and the reference report of the `wavefuse` binary.

pub mod ab;
pub mod checkpoint;
pub mod cmd_codegen;
pub mod cmd_run;
pub mod cmd_sim;
pub mod llvm_diff;
pub mod mgpu;
pub mod npy;
pub mod report;
pub mod set;
pub mod shapes;
pub mod suite;
pub mod tune;
pub mod workload;

pub use set::KernelId;
pub use shapes::Shapes;
pub use workload::Workload;
