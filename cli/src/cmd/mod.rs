//! One module per subcommand: its arguments, the harness call, what it prints.

pub mod ab;
pub mod cache;
pub mod check;
pub mod emit;
pub mod fuzz;
pub mod gpu_suite;
pub mod list;
#[cfg(feature = "llvm")]
pub mod llvm;
pub mod llvm_diff;
pub mod mgpu_bench;
pub mod report;
pub mod run;
pub mod sim;
pub mod tune;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wavefuse_harness::generate::{invalid_kernel, read_kernel_file};

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

/// The compile cache's warnings (a corrupt or stale entry recompiled, an entry not written), one
/// `warning:` line each on stderr.
pub fn print_cache_warnings(cache: &wavefuse_runtime::Cache) {
    for w in cache.take_warnings() {
        eprintln!("warning: {w}");
    }
}

/// `read_kernel_file`, validated; the exit code is 2 for a file that cannot be read or parsed.
pub fn read_valid_kernel_file(path: &Path) -> Result<wavefuse::ir::Kernel, (String, ExitCode)> {
    let kernel = read_kernel_file(path).map_err(|e| (e.to_string(), ExitCode::from(2)))?;
    wavefuse::ir::validate(&kernel).map_err(|e| {
        (
            invalid_kernel(&path.display().to_string(), &e),
            ExitCode::FAILURE,
        )
    })?;
    Ok(kernel)
}
