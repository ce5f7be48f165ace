//! `wavefuse llvm-diff --ptx DIR`: the LLVM back end's PTX against the C++ path on the GPU.

use std::path::PathBuf;
use std::process::ExitCode;

use wavefuse_harness::llvm_diff::{DiffError, diff};

/// `wavefuse llvm-diff` arguments.
#[derive(clap::Args, Debug)]
pub struct LlvmDiffArgs {
    /// Folder written by `wavefuse llvm ptx --out` (PTX files and manifest.json).
    #[arg(long)]
    pub ptx: PathBuf,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the results as a Markdown table here.
    #[arg(long)]
    pub md: Option<PathBuf>,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = wavefuse_harness::Workload::DEFAULT_SEED)]
    pub seed: u64,
}

/// Runs it: a line per kernel, then the files; exit 1 when a kernel is out of tolerance on
/// either path, 2 without an NVIDIA GPU.
pub fn run(a: &LlvmDiffArgs) -> ExitCode {
    if let Some(path) = wavefuse_harness::suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    let commit = option_env!("WAVEFUSE_COMMIT").unwrap_or("see carry/COMMIT");
    let report = match diff(&a.ptx, a.seed, commit, &mut |row| {
        println!("{}", row.line())
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return match e {
                DiffError::NoGpu(_) => ExitCode::from(2),
                DiffError::Input(_) => ExitCode::FAILURE,
            };
        }
    };
    let json = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
    for (path, text) in [(&a.json, json), (&a.md, report.markdown())] {
        if let Some(p) = path {
            if let Err(e) = std::fs::write(p, text) {
                eprintln!("error: writing {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let ok = report.rows.iter().filter(|r| r.passes()).count();
    println!(
        "{ok} of {} kernels: both paths within tolerance",
        report.rows.len()
    );
    if report.passes() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
