//! `wavefuse`: the command-line face of the compiler.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wavefuse::ir::validate;
use wavefuse_kernels::report::{row, table};
use wavefuse_kernels::shapes::TP_SIZES;
use wavefuse_kernels::{KernelId, Shapes, Workload};

#[derive(Parser)]
#[command(name = "wavefuse", version, about = "A kernel-generating compiler for LLM decode")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the kernel set.
    List,
    /// Print a kernel of the set.
    Emit {
        /// Kernel name (see `wavefuse list`).
        kernel: KernelId,
        /// Print the textual IR.
        #[arg(long)]
        ir: bool,
        /// TP group size.
        #[arg(long, default_value_t = 4, value_parser = parse_tp)]
        tp: u32,
        /// Tokens decoded at once (1–8).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
        batch: u16,
    },
    /// The main job: validate every kernel and evaluate it with the f64 reference semantics on the
    /// embedded default workload; print a table.
    Report {
        /// TP group sizes to report (default: all of 1, 2, 4, 8).
        #[arg(long, value_parser = parse_tp, value_delimiter = ',')]
        tp: Vec<u32>,
        /// Seed of the synthetic workload.
        #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
        seed: u64,
    },
}

fn parse_tp(s: &str) -> Result<u32, String> {
    let tp: u32 = s.parse().map_err(|_| format!("`{s}` is not a TP size; use one of 1, 2, 4, 8"))?;
    if TP_SIZES.contains(&tp) {
        Ok(tp)
    } else {
        Err(format!("TP = {tp} is not supported; use one of 1, 2, 4, 8"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::List => {
            for id in KernelId::ALL {
                println!("{:<28} {}", id.name(), id.summary());
            }
            ExitCode::SUCCESS
        }
        Command::Emit { kernel, ir, tp, batch } => emit(kernel, ir, tp, batch.into()),
        Command::Report { tp, seed } => report(if tp.is_empty() { TP_SIZES.to_vec() } else { tp }, seed),
    }
}

fn emit(id: KernelId, ir: bool, tp: u32, batch: usize) -> ExitCode {
    if !ir {
        eprintln!("error: nothing to emit; pass --ir (code generation for gfx906/sm_90 is not built yet)");
        return ExitCode::from(2);
    }
    let kernel = id.build(&Shapes { batch, ..Shapes::qwen27b(tp) });
    if let Err(e) = validate(&kernel) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    print!("{kernel}");
    ExitCode::SUCCESS
}

fn report(tps: Vec<u32>, seed: u64) -> ExitCode {
    println!("wavefuse reference report: Qwen 3.5 27B decode shapes, batch 1, seed {seed:#x}");
    println!("(f64 reference semantics on the CPU; no code generation or GPU involved yet)\n");
    let progress = std::io::stderr().is_terminal();
    let mut rows = Vec::new();
    let mut failed = false;
    for tp in tps {
        for id in KernelId::ALL {
            if progress {
                eprint!("\r{:<60}", format!("evaluating {} at tp={tp} ...", id.name()));
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
    let bad = rows.iter().filter(|r| r.non_finite > 0 || !r.ranks_agree).count();
    if failed || bad > 0 {
        eprintln!("{bad} kernel(s) produced non-finite or rank-inconsistent outputs");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
