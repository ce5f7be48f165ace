//! One module per subcommand: its arguments, the harness call, what it prints. (`run` still
//! parses and prints in the harness.)

pub mod ab;
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

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar of `len` steps on stderr when it is a terminal, hidden otherwise (a log or a
/// pipe gets the results only).
pub fn progress_bar(len: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {wide_msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    bar.set_style(style);
    bar
}
