//! One module per subcommand: its arguments, the harness call, what it prints. (`ab` and `run` still
//! parse and print in the harness.)

pub mod cache;
pub mod check;
pub mod emit;
pub mod fuzz;
pub mod gpu_suite;
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod llvm_diff;
pub mod mgpu_bench;
pub mod report;
pub mod sim;
pub mod tune;
