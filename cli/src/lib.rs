//! `wavefuse`: the command-line face of the compiler, as a library so that a crate can run the
//! `wavefuse` commands on kernels of its own.
//!
//! The `wavefuse` binary is [`main`]. A crate with kernels of its own gives them names the
//! commands accept in place of the set's with [`main_with`] and a [`Registry`]:
//!
//! ```no_run
//! wavefuse::kernel! {
//!     pub fn double(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     // `my-wavefuse emit double --target gfx906`, `my-wavefuse sim double`, …
//!     match wavefuse_cli::Registry::new().with(double(4096)) {
//!         Ok(registry) => wavefuse_cli::main_with(&registry),
//!         Err(e) => {
//!             eprintln!("error: {e}");
//!             std::process::ExitCode::from(2)
//!         }
//!     }
//! }
//! ```

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::AllreduceProtocol;
use wavefuse_harness::Workload;
use wavefuse_harness::policy::{Override, SchedulePolicy};
use wavefuse_harness::shapes::TP_SIZES;
use wavefuse_harness::shapes::parse_tp;
use wavefuse_harness::tune::select::{ScheduleChoice, detect_device, tuned_for};
use wavefuse_harness::tune::store::StoreError;

mod cmd;
mod registry;

pub use registry::Registry;

#[derive(Parser)]
#[command(
    name = "wavefuse",
    version,
    about = "A kernel-generating compiler for LLM decode"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the kernel set.
    List,
    /// Print a kernel of the set: its textual IR (--ir), or its generated code (--target).
    Emit(cmd::emit::EmitArgs),
    /// Compile every kernel of the set for a target with the real compiler and check the
    /// resource report against kernels-gen/budgets.toml (or, with `--kernel-file`, one kernel of
    /// your own: its resources, co-residency at the compiled occupancy, the MI50 model).
    Check(cmd::check::CheckArgs),
    /// Run the CPU protocol simulator on a small-shape version of a kernel over many seeded
    /// schedules (interleavings, rank skew, back-to-back launches); print what it found and exit
    /// non-zero on any finding.
    Sim(cmd::sim::SimArgs),
    /// Generate seeded random valid op-level kernels; check print/parse, compile each for gfx906
    /// and sm90 under the default, the simulator's and random schedules, and run some in the
    /// protocol simulator against the f64 reference; print the refusals by reason and every
    /// finding (with the kernel's IR, seed and schedule); exit non-zero on any finding.
    Fuzz(cmd::fuzz::FuzzArgs),
    /// The on-disk compile cache ($WAVEFUSE_CACHE_DIR, default ~/.cache/wavefuse): print where it
    /// is, or clear it.
    Cache {
        /// Remove every cached artifact.
        #[arg(long)]
        clear: bool,
    },
    /// The main job: validate every kernel and evaluate it with the f64 reference semantics on the
    /// embedded default workload; print a table.
    Report {
        /// TP group sizes to report (default: all of 1, 2, 4, 8).
        #[arg(long, allow_negative_numbers = true, value_parser = parse_tp, value_delimiter = ',')]
        tp: Vec<u32>,
        /// Seed of the synthetic workload.
        #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
        seed: u64,
    },
    /// Run one kernel on the default workload (on the GPU, in the simulator, or as the f64
    /// reference alone) and compare it with the f64 reference; exit non-zero when outside
    /// tolerance or when the device is missing.
    Run {
        #[command(flatten)]
        args: cmd::run::RunArgs,
        #[command(flatten)]
        schedule: ScheduleArgs,
    },
    /// The GPU suite: every kernel at TP 1, 2, 4, 8 (ranks on one device; `--placement
    /// per-device`: rank r on GPU r, the communicating kernels, with launch skew), model and odd
    /// shapes, against the f64 reference; back-to-back launches of synchronising kernels; JSON +
    /// Markdown.
    GpuSuite(cmd::gpu_suite::SuiteArgs),
    /// One rank per GPU: CUDA-graph time per call of the generated allreduce (10 KB, 32 KB), the
    /// fused kernel and the unfused wavefuse chain at TP 2 and 4, checked against the f64
    /// reference; JSON + Markdown (NCCL's side: bench/torch/nccl_allreduce.py).
    MgpuBench(cmd::mgpu_bench::BenchArgs),
    /// A/B the generated kernels against the hand-written ones (kernels-gen/reference, or your own
    /// with --manual/--abi) and the f64 reference: correctness, then event timing with rotating
    /// inputs, bandwidth against the copy bandwidth of the same run; table, verdicts, JSON,
    /// Markdown, SVG chart. Without a GPU: the simulator and the compilers' resource reports.
    Ab {
        #[command(flatten)]
        args: cmd::ab::AbArgs,
        #[command(flatten)]
        schedule: ScheduleArgs,
    },
    /// Search a kernel's schedule at the given shapes (workgroup size, tile, K slices, words per
    /// load, accumulators, INT4 decode and scaling, allreduce protocol): compile the candidates
    /// (in parallel, through the cache; the compile rate is reported), drop those that spill or
    /// lose occupancy, check each against the f64 reference and time it like `wavefuse ab`
    /// (cold rotating inputs, events, median of ≥ 100 launches), and store the winner per
    /// (kernel, shape, arch, device) for `--schedule tuned`. gfx906: a static model instead of
    /// timing. Without a GPU: compile and filter only, and it says so.
    Tune(cmd::tune::TuneArgs),
    /// The LLVM back end's differential run on an NVIDIA GPU: every kernel at TP 1 and 4 through
    /// the C++ path (NVRTC) and through the LLVM-built PTX of `wavefuse llvm ptx`, both against
    /// the f64 reference; compile times of both paths; JSON + Markdown.
    LlvmDiff(cmd::llvm_diff::LlvmDiffArgs),
    /// The LLVM back end (built with `--features llvm`).
    #[cfg(feature = "llvm")]
    #[command(subcommand)]
    Llvm(cmd::llvm::LlvmCommand),
}

/// A positive number of seconds.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e7 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds (positive, at most 1e7)"
        )),
    }
}

fn parse_protocol(s: &str) -> Result<AllreduceProtocol, String> {
    match s {
        "pull" => Ok(AllreduceProtocol::Pull),
        "push" => Ok(AllreduceProtocol::Push),
        _ => Err(format!(
            "`{s}` is not an allreduce protocol; use pull or push"
        )),
    }
}

/// Exit status after SIGINT or SIGTERM (128 + SIGINT, what shells report for Ctrl-C).
const INTERRUPTED: i32 = 130;

/// SIGINT, SIGTERM and SIGHUP go to one thread, which stops every compiler child (their process
/// groups: they run in their own, so a Ctrl-C at the terminal does not reach them), waits for
/// them to be reaped and their scratch directories removed, says so and exits 130. Called first
/// in `main`, before any other thread exists, so every thread inherits the blocked mask (children
/// do not: `Command` resets it). A SIGINT or SIGHUP the parent set to be ignored (a background
/// job of a non-interactive shell, `nohup`) stays ignored: it is not blocked, so it is never
/// delivered to `sigwait` (Linux queues a blocked signal even when its action is to ignore it).
fn handle_interrupts() {
    let mut signals = vec![libc::SIGTERM];
    signals.extend(
        [libc::SIGINT, libc::SIGHUP]
            .into_iter()
            .filter(|&s| !inherited_as_ignored(s)),
    );
    // SAFETY: plain libc calls on a local, zero-initialised signal set; `pthread_sigmask` on the
    // only thread so far.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in &signals {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    std::thread::spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is an initialised signal set blocked in every thread; `sig` is ours.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        wavefuse_runtime::compile::child::interrupt_all();
        // Compilers stop within ~50 ms; a cooperating loop (`sim`) after its current step.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while (wavefuse_runtime::compile::child::live_children() > 0
            || wavefuse_runtime::compile::child::cooperating() > 0)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The callers of the stopped children drop their scratch directories as they return.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let name = match sig {
            libc::SIGTERM => "SIGTERM",
            libc::SIGHUP => "SIGHUP",
            _ => "SIGINT",
        };
        eprintln!(
            "wavefuse: interrupted ({name}): compilers stopped and their scratch removed; files \
             named on the command line are replaced whole or not at all"
        );
        std::process::exit(INTERRUPTED);
    });
}

/// Whether `sig`'s action, as the process started with it, is to ignore it.
fn inherited_as_ignored(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The `wavefuse` command on the process's arguments.
pub fn main() -> ExitCode {
    main_with(&Registry::new())
}

/// The `wavefuse` command on the process's arguments, with `registry`'s kernels accepted by name
/// wherever a command takes a kernel of the set (`emit`, `check`, `sim`, `run`, `ab`, `tune`): each
/// such name runs as `--kernel-file` with the kernel's textual IR, at the shapes it was built
/// with.
pub fn main_with(registry: &Registry) -> ExitCode {
    run(registry, std::env::args_os().collect())
}

/// [`main_with`] on `args` (the program's name first) instead of the process's: for a `main`
/// that takes flags of its own (the shapes to build its kernels at) before the command's.
pub fn run(registry: &Registry, args: Vec<std::ffi::OsString>) -> ExitCode {
    // Output into a closed pipe (`wavefuse check … | head`) ends the process quietly, as for any
    // Unix tool, instead of panicking in `println!`. Report files are written atomically (a
    // temporary file renamed into place), so none is left half-written.
    // SAFETY: restores the default disposition of one signal, before any thread is spawned.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    handle_interrupts();
    let args = match registry.resolve(args, &<Cli as clap::CommandFactory>::command()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let argv = args.args();
    let cli = match <Cli as clap::Parser>::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => match negative_value(&e, &argv) {
            Some(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    let code = dispatch(cli);
    if wavefuse_runtime::compile::child::interrupted() {
        // The command returned because its compilers were stopped: the signal thread says so
        // and exits 130; this only guards against it being slower than us.
        std::thread::sleep(std::time::Duration::from_secs(5));
        std::process::exit(INTERRUPTED);
    }
    code
}

/// A negative number given to a flag that takes none (`--batch -5`) as its own message, naming
/// the flag: clap sees an unknown argument `-5` and would advise writing `-- -5`, which only
/// makes it a stray positional argument.
fn negative_value(e: &clap::Error, argv: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let number = arg.strip_prefix('-')?;
    number.parse::<f64>().ok()?;
    let at = argv.iter().position(|a| a.to_str() == Some(arg.as_str()))?;
    let flag = argv[..at].last()?.to_string_lossy();
    if !flag.starts_with("--") {
        return None;
    }
    Some(format!(
        "{flag} {arg}: a negative number is not a value {flag} takes (see `wavefuse help`)"
    ))
}

fn dispatch(cli: Cli) -> ExitCode {
    match cli.command {
        Command::LlvmDiff(a) => cmd::llvm_diff::run(&a),
        #[cfg(feature = "llvm")]
        Command::Llvm(c) => cmd::llvm::run(c),
        Command::List => cmd::list::run(),
        Command::Emit(a) => cmd::emit::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Fuzz(args) => {
            ignored_overrides("fuzz (it draws its own schedules)");
            cmd::fuzz::run(&args)
        }
        Command::Run { args, schedule } => {
            match schedule.policy(args.target.unwrap_or(Arch::Sm90), env_overrides()) {
                Ok(policy) => cmd::run::run(&args, &policy),
                Err(e) => store_error(e),
            }
        }
        Command::GpuSuite(args) => cmd::gpu_suite::run(&args, env_policy()),
        Command::Ab { args, schedule } => match schedule.policy(Arch::Sm90, env_overrides()) {
            Ok(policy) => cmd::ab::run(&args, policy),
            Err(e) => store_error(e),
        },
        Command::Tune(args) => cmd::tune::run(&args),
        Command::MgpuBench(args) => cmd::mgpu_bench::run(&args, env_policy()),
        Command::Cache { clear } => cmd::cache::run(clear),
        Command::Report { tp, seed } => {
            cmd::report::run(if tp.is_empty() { TP_SIZES.to_vec() } else { tp }, seed)
        }
    }
}

/// The environment's schedule overrides (`$WAVEFUSE_SCHEDULE`, `_GFX906`, `_SM90`), read here,
/// at the edge, into the policy ([`Override::from_vars`]).
fn env_overrides() -> Vec<Override> {
    Override::from_vars(|v| std::env::var_os(v))
}

/// The default policy with the environment's overrides (the commands without `--schedule`).
fn env_policy() -> SchedulePolicy {
    SchedulePolicy::new(None, env_overrides())
}

/// Says that a command does not apply the environment's overrides, when some are set.
fn ignored_overrides(what: &str) {
    for o in env_overrides() {
        eprintln!("warning: {} is ignored by {what}", o.origin);
    }
}

fn store_error(e: wavefuse_harness::tune::store::StoreError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

/// `--schedule default|tuned [--tuned-store PATH]`, for the commands that generate code.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ScheduleArgs {
    /// default: `Schedule::default_for` the target; tuned: the tuned-schedule store's entry for
    /// this kernel, shape, arch and device when there is one, else the default (it says which).
    #[arg(long, value_enum, default_value_t = ScheduleChoice::Default)]
    pub schedule: ScheduleChoice,
    /// With --schedule tuned: also read this store (over the committed one and the cache
    /// directory's).
    #[arg(long, requires = "schedule")]
    pub tuned_store: Option<std::path::PathBuf>,
}

impl ScheduleArgs {
    /// The policy these arguments ask for on `arch` (the device detected for it), with the
    /// explicit `overrides` the caller parsed.
    pub fn policy(
        &self,
        arch: Arch,
        overrides: Vec<Override>,
    ) -> Result<SchedulePolicy, StoreError> {
        let device = match self.schedule {
            ScheduleChoice::Default => None,
            ScheduleChoice::Tuned => detect_device(arch),
        };
        if let (ScheduleChoice::Default, Some(p)) = (self.schedule, &self.tuned_store) {
            // A setting without effect is said (docs/errors.md), not silently dropped.
            eprintln!(
                "warning: --tuned-store {} is ignored: --schedule default reads no store (add \
                 --schedule tuned)",
                p.display()
            );
        }
        let tuned = tuned_for(self.schedule, self.tuned_store.as_deref(), device)?;
        Ok(SchedulePolicy::new(tuned, overrides))
    }
}
