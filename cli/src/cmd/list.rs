//! `wavefuse list`: the kernel set, one line each (name, summary).

use std::process::ExitCode;

use wavefuse_harness::KernelId;

/// Prints the set.
pub fn run() -> ExitCode {
    let mut out = String::new();
    for id in KernelId::ALL {
        out.push_str(&format!("{:<28} {}\n", id.name(), id.summary()));
    }
    super::emit::print_out(&out)
}
