//! `wavefuse fuzz --seed S --kernels N [--budget-s T] [--first I] [--ci] [--findings DIR]`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use wavefuse_harness::fuzz::{FuzzConfig, FuzzReport, Progress, fuzz};

/// The command's arguments (parsed by the CLI).
#[derive(Clone, Debug, clap::Args)]
pub struct FuzzArgs {
    /// Seed of the run (kernel i is generated from the seed and i alone).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Kernels to generate (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub kernels: u64,
    /// Index of the first kernel: `--first I --kernels 1` reruns kernel I of a run alone.
    #[arg(long, default_value_t = 0)]
    pub first: u64,
    /// Stop generating after this many seconds and report what was done.
    #[arg(long = "budget-s", value_parser = parse_budget)]
    pub budget_s: Option<f64>,
    /// CI's cheaper per-kernel work (one random schedule per target, one simulation of two
    /// interleavings) instead of the soak's (three, three of six).
    #[arg(long)]
    pub ci: bool,
    /// Also print which generator features the kernels had, and how many of those simulated.
    #[arg(long)]
    pub coverage: bool,
    /// Write every finding as a `.wfir` file (with the header the regression test reads) into
    /// this directory.
    #[arg(long)]
    pub findings: Option<PathBuf>,
}

fn parse_budget(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e7 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds (positive, at most 1e7)"
        )),
    }
}

impl FuzzArgs {
    /// The run these arguments ask for.
    pub fn config(&self) -> FuzzConfig {
        let base = if self.ci {
            FuzzConfig::ci(self.seed, self.kernels)
        } else {
            FuzzConfig::soak(self.seed, self.kernels)
        };
        FuzzConfig {
            first: self.first,
            budget: self.budget_s.map(Duration::from_secs_f64),
            ..base
        }
    }
}

/// Run it, print the summary, the refusal table and the findings; exit 1 on any finding or
/// invalid generated kernel, 130 when interrupted, 2 when `--findings` cannot be written (checked
/// before any kernel is generated).
pub fn run(args: &FuzzArgs) -> ExitCode {
    if let Some(dir) = &args.findings {
        if let Err(e) = check_findings_dir(dir) {
            eprintln!(
                "error: --findings {}: {e}; nothing was fuzzed",
                dir.display()
            );
            return ExitCode::from(2);
        }
    }
    let config = args.config();
    println!(
        "fuzzing kernels {}..{} from seed {} ({} per-kernel work)",
        config.first,
        config.first.saturating_add(config.kernels),
        config.seed,
        if args.ci { "CI's" } else { "the soak's" }
    );
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    let mut progress = |p: &Progress| {
        let due = last.elapsed() >= Duration::from_millis(if tty { 200 } else { 10_000 });
        if due || p.done == p.total {
            last = Instant::now();
            let end = if tty { "\r" } else { "\n" };
            eprint!(
                "{end}{}/{} kernels, {} simulated, {} findings, {:.0} s",
                p.done, p.total, p.simulated, p.findings, p.seconds
            );
            let _ = std::io::stderr().flush();
        }
    };
    let guard = wavefuse_runtime::compile::child::cooperate();
    let report = fuzz(&config, &mut progress);
    eprintln!();
    let interrupted = wavefuse_runtime::compile::child::interrupted();
    print_report(args, &report, interrupted);
    if let Some(dir) = &args.findings {
        match report.write_findings(dir) {
            Ok(paths) if !paths.is_empty() => {
                println!("{} findings written to {}", paths.len(), dir.display())
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: --findings {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let _ = std::io::stdout().flush();
    drop(guard);
    if interrupted {
        return ExitCode::from(130);
    }
    if report.findings.is_empty() && report.invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--findings DIR` can take files: it is created if missing, must be a directory, and a file
/// can be created in it (and is removed again).
fn check_findings_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if !dir.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    tempfile::NamedTempFile::new_in(dir).map(drop)
}

fn print_report(args: &FuzzArgs, r: &FuzzReport, interrupted: bool) {
    print!("{}", r.summary());
    println!("\nrefusals by reason (numbers and names stripped):\n");
    print!("{}", r.refusal_table());
    if args.coverage {
        println!("\ngenerator features:\n");
        print!("{}", r.coverage_table());
    }
    for (i, f) in r.all_findings().enumerate() {
        println!("\nfinding {} (kernel {}): {f}", i + 1, f.index);
    }
    if r.all_findings().next().is_some() {
        println!(
            "reproduce one: wavefuse fuzz --seed {} --first INDEX --kernels 1{}",
            r.seed,
            if args.ci { " --ci" } else { "" }
        );
    }
    let found = format!(
        "{} findings, {} invalid generated kernels",
        r.findings.len(),
        r.invalid
    );
    let verdict = if interrupted {
        // Never "clean": the kernels not generated were not checked.
        format!(
            "interrupted after {} of {} kernels ({found} so far)",
            r.generated, args.kernels
        )
    } else if r.findings.is_empty() && r.invalid == 0 {
        "clean".to_owned()
    } else {
        found
    };
    println!("verdict: {verdict}");
}
