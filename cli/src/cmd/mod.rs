//! One module per subcommand that is not a harness command of its own.

pub mod cache;
pub mod check;
pub mod emit;
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod report;
pub mod sim;
