//! `wavefuse`: the command-line face of the compiler.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::AllreduceProtocol;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate;
use wavefuse_harness::policy::{Override, Placement, SchedulePolicy};
use wavefuse_harness::report::{row, table};
use wavefuse_harness::run::parse_tp;
use wavefuse_harness::shapes::TP_SIZES;
use wavefuse_harness::sim;
use wavefuse_harness::suite::{CaseSpec, ShapeKind};
use wavefuse_harness::tune::select::ScheduleArgs;
use wavefuse_harness::{KernelId, Shapes, Workload};

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
    Emit {
        /// Kernel name (see `wavefuse list`).
        #[arg(required_unless_present = "kernel_file")]
        kernel: Option<KernelId>,
        /// A kernel of your own in the textual IR (`.wfir`, docs/ir-format.md) instead of a kernel
        /// of the set; its TP size and shapes are the file's.
        #[arg(long, conflicts_with_all = ["kernel", "tp", "batch"])]
        kernel_file: Option<PathBuf>,
        /// Print the textual IR.
        #[arg(long, conflicts_with = "target")]
        ir: bool,
        /// Generate code for this target (gfx906 → HIP, sm90 → CUDA).
        #[arg(long)]
        target: Option<Arch>,
        /// Write `<kernel>.hip|.cu` and `<kernel>.abi.toml` into this directory instead of
        /// printing the source.
        #[arg(long, requires = "target")]
        out: Option<PathBuf>,
        /// Print the lowered kernel instead of the source.
        #[arg(long, requires = "target", conflicts_with = "out")]
        lowered: bool,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
        /// Tokens decoded at once (1–8).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
        batch: u16,
        /// Build the kernel at this model's dimensions (a Hugging Face `config.json`: hidden,
        /// intermediate, heads, KV heads, head dim, RMSNorm epsilon) instead of Qwen 3.5 27B's.
        #[arg(long, conflicts_with = "kernel_file")]
        model_config: Option<PathBuf>,
        /// Where the ranks run, which the schedule is fitted for: per-device (one rank per GPU,
        /// as TP is deployed: the snapshots, `check`, `gpu-suite --placement per-device`,
        /// `mgpu-bench`) or same-device (all ranks on one GPU: what `ab`, `run` and the default
        /// GPU suite run).
        #[arg(long, value_enum, default_value_t = Placement::PerDevice)]
        placement: Placement,
        #[command(flatten)]
        schedule: ScheduleArgs,
    },
    /// Compile every kernel of the set for a target with the real compiler and check the
    /// resource report against kernels-gen/budgets.toml (or, with `--kernel-file`, one kernel of
    /// your own: its resources, co-residency at the compiled occupancy, the MI50 model).
    Check {
        /// gfx906 (hipcc) or sm90 (nvcc).
        #[arg(long)]
        target: Arch,
        /// A kernel of your own in the textual IR (`.wfir`) instead of the set: compiled at the
        /// file's shapes with the default schedule (and `WAVEFUSE_SCHEDULE*` overrides); fails
        /// when it spills or when its grids, with a grid barrier, are not co-resident at the
        /// compiled occupancy for `--placement`.
        #[arg(long, conflicts_with = "tp")]
        kernel_file: Option<PathBuf>,
        /// With `--kernel-file`: where the ranks run (per-device: one rank per GPU;
        /// same-device: all ranks' grids share one GPU).
        #[arg(long, value_enum, default_value_t = Placement::PerDevice, requires = "kernel_file")]
        placement: Placement,
        /// Compile the set at this model's dimensions (a Hugging Face `config.json`) instead of
        /// Qwen 3.5 27B's.
        #[arg(long, conflicts_with = "kernel_file")]
        model_config: Option<PathBuf>,
        /// TP group sizes (default: all of 1, 2, 4, 8).
        #[arg(long, allow_negative_numbers = true, value_parser = parse_tp, value_delimiter = ',')]
        tp: Vec<u32>,
        /// Compiler processes at once (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Seconds one compiler process may run before it is stopped (with its children).
        #[arg(long, default_value_t = 300.0, value_parser = parse_seconds)]
        compile_timeout: f64,
    },
    /// Run the CPU protocol simulator on a small-shape version of a kernel over many seeded
    /// schedules (interleavings, rank skew, back-to-back launches); print what it found and exit
    /// non-zero on any finding.
    Sim {
        /// Kernel name (see `wavefuse list`).
        #[arg(required_unless_present = "kernel_file")]
        kernel: Option<KernelId>,
        /// A kernel of your own in the textual IR (`.wfir`) instead of a kernel of the set,
        /// simulated at the file's own shapes and TP size (write small shapes: every lane runs).
        #[arg(long, conflicts_with_all = ["kernel", "tp", "batch"])]
        kernel_file: Option<PathBuf>,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
        /// Number of seeded schedules (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        schedules: u64,
        /// Seed of the schedules and of the data.
        #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
        seed: u64,
        /// Target whose lowering is simulated.
        #[arg(long, default_value_t = Arch::Gfx906)]
        target: Arch,
        /// Tokens decoded at once (1–8).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
        batch: u16,
        /// Allreduce protocol: pull or push (default: the schedule's).
        #[arg(long, value_parser = parse_protocol)]
        protocol: Option<AllreduceProtocol>,
        /// Fill the simulated host's peer tables rotated instead of by rank (plants the host-side
        /// defect of DESIGN.md §5.5, to see what the simulator reports).
        #[arg(long)]
        rotate_peers: bool,
    },
    /// Generate seeded random valid op-level kernels; check print/parse, compile each for gfx906
    /// and sm90 under the default, the simulator's and random schedules, and run some in the
    /// protocol simulator against the f64 reference; print the refusals by reason and every
    /// finding (with the kernel's IR, seed and schedule); exit non-zero on any finding.
    Fuzz(wavefuse_harness::fuzz::FuzzArgs),
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
        args: wavefuse_harness::run::RunArgs,
        #[command(flatten)]
        schedule: ScheduleArgs,
    },
    /// The GPU suite: every kernel at TP 1, 2, 4, 8 (ranks on one device; `--placement
    /// per-device`: rank r on GPU r, the communicating kernels, with launch skew), model and odd
    /// shapes, against the f64 reference; back-to-back launches of synchronising kernels; JSON +
    /// Markdown.
    GpuSuite(wavefuse_harness::suite::SuiteArgs),
    /// One rank per GPU: CUDA-graph time per call of the generated allreduce (10 KB, 32 KB), the
    /// fused kernel and the unfused wavefuse chain at TP 2 and 4, checked against the f64
    /// reference; JSON + Markdown (NCCL's side: bench/torch/nccl_allreduce.py).
    MgpuBench(wavefuse_harness::mgpu::BenchArgs),
    /// A/B the generated kernels against the hand-written ones (kernels-gen/reference, or your own
    /// with --manual/--abi) and the f64 reference: correctness, then event timing with rotating
    /// inputs, bandwidth against the copy bandwidth of the same run; table, verdicts, JSON,
    /// Markdown, SVG chart. Without a GPU: the simulator and the compilers' resource reports.
    Ab {
        #[command(flatten)]
        args: wavefuse_harness::ab::AbArgs,
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
    Tune(wavefuse_harness::tune::TuneArgs),
    /// The LLVM back end's differential run on an NVIDIA GPU: every kernel at TP 1 and 4 through
    /// the C++ path (NVRTC) and through the LLVM-built PTX of `wavefuse llvm ptx`, both against
    /// the f64 reference; compile times of both paths; JSON + Markdown.
    LlvmDiff(wavefuse_harness::llvm_diff::LlvmDiffArgs),
    /// The LLVM back end (built with `--features llvm`).
    #[cfg(feature = "llvm")]
    #[command(subcommand)]
    Llvm(LlvmCommand),
}

/// `wavefuse llvm …`.
#[cfg(feature = "llvm")]
#[derive(Subcommand)]
enum LlvmCommand {
    /// Print a kernel's LLVM IR (after mem2reg, before optimisation).
    Emit {
        /// Kernel name (see `wavefuse list`).
        kernel: KernelId,
        /// gfx906 (AMDGPU) or sm90 (NVPTX).
        #[arg(long)]
        target: Arch,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
    },
    /// Compile the set at one TP through LLVM and, for gfx906, hipcc: resources side by side and
    /// compile times.
    Check {
        /// gfx906 or sm90.
        #[arg(long)]
        target: Arch,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
    },
    /// Write the PTX of the differential set (TP 1 and 4) and its manifest for `wavefuse llvm-diff`.
    Ptx {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
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

/// SIGINT and SIGTERM go to one thread, which stops every compiler child (their process groups:
/// they run in their own, so a Ctrl-C at the terminal does not reach them), waits for them to be
/// reaped and their scratch directories removed, says so and exits 130. Called first in `main`,
/// before any other thread exists, so every thread inherits the blocked mask (children do not:
/// `Command` resets it).
fn handle_interrupts() {
    // SAFETY: plain libc calls on a local, zero-initialised signal set; `pthread_sigmask` on the
    // only thread so far.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
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
        wavefuse_codegen::cpp::child::interrupt_all();
        // Compilers stop within ~50 ms; a cooperating loop (`sim`) after its current step.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while (wavefuse_codegen::cpp::child::live_children() > 0
            || wavefuse_codegen::cpp::child::cooperating() > 0)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The callers of the stopped children drop their scratch directories as they return.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let name = if sig == libc::SIGTERM {
            "SIGTERM"
        } else {
            "SIGINT"
        };
        eprintln!(
            "wavefuse: interrupted ({name}): compilers stopped and their scratch removed; files \
             named on the command line are replaced whole or not at all"
        );
        std::process::exit(INTERRUPTED);
    });
}

fn main() -> ExitCode {
    handle_interrupts();
    let code = dispatch(Cli::parse());
    if wavefuse_codegen::cpp::child::interrupted() {
        // The command returned because its compilers were stopped: the signal thread says so
        // and exits 130; this only guards against it being slower than us.
        std::thread::sleep(std::time::Duration::from_secs(5));
        std::process::exit(INTERRUPTED);
    }
    code
}

fn dispatch(cli: Cli) -> ExitCode {
    match cli.command {
        Command::LlvmDiff(a) => wavefuse_harness::llvm_diff::llvm_diff_cmd(&a),
        #[cfg(feature = "llvm")]
        Command::Llvm(c) => llvm_cmd(c),
        Command::List => {
            for id in KernelId::ALL {
                println!("{:<28} {}", id.name(), id.summary());
            }
            ExitCode::SUCCESS
        }
        Command::Emit {
            kernel_file: Some(path),
            target,
            ir,
            out,
            lowered,
            placement,
            schedule,
            ..
        } => {
            if target.is_none() && !ir {
                eprintln!(
                    "error: nothing to emit; pass --ir for the textual IR or --target gfx906|sm90 for code"
                );
                return ExitCode::from(2);
            }
            match schedule.policy(target.unwrap_or(Arch::Sm90), env_overrides()) {
                Ok(policy) => {
                    generate::emit_file_cmd(&path, target, &policy, placement, out, lowered)
                }
                Err(e) => store_error(e),
            }
        }
        Command::Emit {
            kernel: Some(kernel),
            target: Some(arch),
            tp,
            batch,
            out,
            lowered,
            placement,
            schedule,
            model_config,
            ..
        } => {
            let shape = match model_shapes(model_config.as_deref(), &[tp]) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            match schedule.policy(arch, env_overrides()) {
                Ok(policy) => generate::emit_cmd(
                    kernel,
                    arch,
                    (tp, batch.into(), shape),
                    &policy,
                    placement,
                    out,
                    lowered,
                ),
                Err(e) => store_error(e),
            }
        }
        Command::Emit {
            kernel: Some(kernel),
            ir,
            tp,
            batch,
            model_config,
            ..
        } => match model_shapes(model_config.as_deref(), &[tp]) {
            Ok(shape) => emit(kernel, ir, tp, batch.into(), shape),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Emit { .. } => {
            eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
            ExitCode::from(2)
        }
        Command::Check {
            target,
            kernel_file: Some(path),
            placement,
            compile_timeout,
            ..
        } => generate::check_file_cmd(
            &path,
            target,
            &env_policy(),
            placement,
            &wavefuse_codegen::cpp::child::Bounds::timeout(std::time::Duration::from_secs_f64(
                compile_timeout,
            )),
        ),
        Command::Check {
            target,
            tp,
            jobs,
            compile_timeout,
            model_config,
            ..
        } => {
            ignored_overrides("check (it compiles the default schedules the budgets are for)");
            let tps = if tp.is_empty() { TP_SIZES.to_vec() } else { tp };
            let shape = match model_shapes(model_config.as_deref(), &tps) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            generate::check_cmd(
                target,
                &tps,
                shape,
                jobs,
                &wavefuse_codegen::cpp::child::Bounds::timeout(std::time::Duration::from_secs_f64(
                    compile_timeout,
                )),
            )
        }
        Command::Sim {
            kernel,
            kernel_file,
            tp,
            schedules,
            seed,
            target,
            batch,
            protocol,
            rotate_peers,
        } => {
            let peer_table = if rotate_peers {
                PeerTable::Rotated
            } else {
                PeerTable::Shared
            };
            let config = sim::Config {
                tp,
                arch: target,
                batch: batch.into(),
                protocol,
                peer_table,
            };
            ignored_overrides("sim (it simulates the small-shape schedules)");
            match (kernel, kernel_file) {
                (_, Some(path)) => sim::sim_file_cmd(&path, config, schedules, seed),
                (Some(kernel), None) => sim::sim_cmd(kernel, config, schedules, seed),
                (None, None) => {
                    eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
                    ExitCode::from(2)
                }
            }
        }
        Command::Fuzz(args) => {
            ignored_overrides("fuzz (it draws its own schedules)");
            wavefuse_harness::fuzz::fuzz_cmd(&args)
        }
        Command::Run { args, schedule } => {
            match schedule.policy(args.target.unwrap_or(Arch::Sm90), env_overrides()) {
                Ok(policy) => wavefuse_harness::run::run_cmd(&args, &policy),
                Err(e) => store_error(e),
            }
        }
        Command::GpuSuite(args) => wavefuse_harness::suite::suite_cmd(&args, env_policy()),
        Command::Ab { args, schedule } => match schedule.policy(Arch::Sm90, env_overrides()) {
            Ok(policy) => wavefuse_harness::ab::ab_cmd(&args, policy),
            Err(e) => store_error(e),
        },
        Command::Tune(args) => wavefuse_harness::tune::tune_cmd(&args),
        Command::MgpuBench(args) => wavefuse_harness::mgpu::bench_cmd(&args, env_policy()),
        Command::Cache { clear } => cache_cmd(clear),
        Command::Report { tp, seed } => {
            report(if tp.is_empty() { TP_SIZES.to_vec() } else { tp }, seed)
        }
    }
}

/// The environment variables of explicit schedule overrides (`field=value,...`, see
/// `Schedule::with_overrides`): `$WAVEFUSE_SCHEDULE` for every target, then
/// `$WAVEFUSE_SCHEDULE_GFX906` / `_SM90` for one. Read here, at the edge, into the policy.
const SCHEDULE_ENV: &str = "WAVEFUSE_SCHEDULE";

/// The overrides the environment asks for, in the order they apply.
fn env_overrides() -> Vec<Override> {
    let mut out = Vec::new();
    let vars = [(SCHEDULE_ENV.to_owned(), None)]
        .into_iter()
        .chain(Arch::ALL.into_iter().map(|a| {
            (
                format!("{SCHEDULE_ENV}_{}", a.to_string().to_uppercase()),
                Some(a),
            )
        }));
    for (var, arch) in vars {
        if let Some(spec) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
            out.push(Override {
                origin: format!("${var}"),
                arch,
                spec: spec.to_string_lossy().into_owned(),
            });
        }
    }
    out
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

fn emit(id: KernelId, ir: bool, tp: u32, batch: usize, shape: ShapeKind) -> ExitCode {
    if !ir {
        eprintln!(
            "error: nothing to emit; pass --ir for the textual IR or --target gfx906|sm90 for code"
        );
        return ExitCode::from(2);
    }
    let c = CaseSpec {
        kernel: id.into(),
        tp,
        batch,
        shape,
    };
    let kernel = match wavefuse_harness::suite::op_kernel(&c) {
        Ok(Some(k)) => k,
        Ok(None) => unreachable!("model shapes apply to every kernel"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    generate::print_out(&kernel.to_string())
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

fn cache_cmd(clear: bool) -> ExitCode {
    let cache = wavefuse_runtime::Cache::from_env();
    if !clear {
        println!("compile cache: {}", cache.dir().display());
        return ExitCode::SUCCESS;
    }
    match cache.clear() {
        Ok(n) => {
            println!(
                "removed {n} cached artifact(s) from {}",
                cache.dir().display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: clearing {}: {e}", cache.dir().display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "llvm")]
fn llvm_cmd(c: LlvmCommand) -> ExitCode {
    use wavefuse_codegen::llvm;
    match c {
        LlvmCommand::Emit { kernel, target, tp } => {
            match generate::generate(kernel, target, tp, 1)
                .map_err(|e| e.to_string())
                .and_then(|g| llvm::emit_ir(&g.lowered).map_err(|e| e.to_string()))
            {
                Ok(ir) => {
                    print!("{ir}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        LlvmCommand::Check { target, tp } => llvm_check(target, tp),
        LlvmCommand::Ptx { out } => match wavefuse_harness::llvm_diff::write_ptx_set(&out) {
            Ok(n) => {
                println!(
                    "wrote {n} PTX files and manifest.json into {}",
                    out.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Resources and compile times: LLVM vs hipcc (gfx906) or LLVM vs nvcc (sm90).
#[cfg(feature = "llvm")]
fn llvm_check(arch: Arch, tp: u32) -> ExitCode {
    use wavefuse_codegen::cpp::toolchain::{self, Tool};
    use wavefuse_codegen::llvm;
    let native = toolchain::find(Tool::compiler(arch)).is_ok();
    let scratch = match toolchain::scratch_dir("llvm-check") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = scratch.path();
    let cname = Tool::compiler(arch).name();
    println!(
        "{:<28} | {:>5} {:>5} {:>6} {:>4} {:>8} | {cname}: {:>5} {:>5} {:>6} {:>4} {:>8}",
        format!("kernel@{arch}_tp{tp}"),
        "sgpr",
        "vgpr",
        "lds",
        "occ",
        "LLVM ms",
        "sgpr",
        "vgpr",
        "lds",
        "occ",
        "ms"
    );
    let mut ok = true;
    for id in KernelId::ALL {
        let g = match generate::generate(id, arch, tp, 1) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{id}: {e}");
                ok = false;
                continue;
            }
        };
        let c = match llvm::compile(&g.lowered, true) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{id}: {e}");
                ok = false;
                continue;
            }
        };
        let ours = match &c.asm {
            Some(asm) => match llvm::parse_amd_asm(asm, g.lowered.workgroup_size) {
                Ok(r) => format!(
                    "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                    r.sgprs,
                    r.vgprs,
                    r.lds_bytes,
                    r.occupancy,
                    c.total_ms()
                ),
                Err(e) => e,
            },
            None => format!(
                "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                "-",
                "-",
                "-",
                "-",
                c.total_ms()
            ),
        };
        let theirs = if native {
            let t = std::time::Instant::now();
            match toolchain::compile(&g.source, g.lowered.workgroup_size, &dir) {
                Ok(h) => {
                    let r = &h.resources;
                    format!(
                        "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                        r.sgprs.map_or("-".into(), |s| s.to_string()),
                        r.vgprs,
                        r.lds_bytes,
                        r.occupancy,
                        t.elapsed().as_secs_f64() * 1e3
                    )
                }
                Err(e) => format!("failed: {e}"),
            }
        } else {
            format!("skipped: {cname} not found")
        };
        println!("{:<28} | {ours} | {cname}: {theirs}", id.name());
    }
    drop(scratch);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
