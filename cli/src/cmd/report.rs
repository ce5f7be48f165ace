//! `wavefuse report`: the f64 reference over the kernel set.

use std::io::IsTerminal;
use std::process::ExitCode;

use wavefuse_harness::report::{row, table};
use wavefuse_harness::{KernelId, Shapes};

/// `wavefuse report`: every kernel of the set validated and evaluated with the f64 reference
/// semantics on the default workload, at each TP size.
pub fn run(tps: Vec<u32>, seed: u64) -> ExitCode {
    println!("wavefuse reference report: Qwen 3.5 27B decode shapes, batch 1, seed {seed:#x}");
    println!("(f64 reference semantics on the CPU; no code generation or GPU involved yet)\n");
    let progress = std::io::stderr().is_terminal();
    let mut rows = Vec::new();
    let mut failed = false;
    for tp in tps {
        for id in KernelId::ALL {
            if progress {
                eprint!(
                    "\r{:<60}",
                    format!("evaluating {} at tp={tp} ...", id.name())
                );
            }
            match row(id, &Shapes::qwen27b(tp), seed) {
                Ok(r) => rows.push(r),
                Err(e) => {
                    eprintln!("\nerror: {e}");
                    failed = true;
                }
            }
        }
    }
    if progress {
        eprint!("\r{:<60}\r", "");
    }
    print!("{}", table(&rows));
    let bad = rows
        .iter()
        .filter(|r| r.non_finite > 0 || !r.ranks_agree)
        .count();
    if failed || bad > 0 {
        eprintln!("{bad} kernel(s) produced non-finite or rank-inconsistent outputs");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
