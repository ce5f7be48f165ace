//! One module per subcommand: its arguments, the harness call, what it prints. (`ab`, `tune`,
//! `run` and `gpu-suite` still parse and print in the harness.)

pub mod cache;
pub mod check;
pub mod emit;
pub mod fuzz;
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod llvm_diff;
pub mod mgpu_bench;
pub mod report;
pub mod sim;
