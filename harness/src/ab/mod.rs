//! `wavefuse ab`: the main job (issue 6). For each kernel and shape, the generated kernel against
//! the hand-written one and both against the f64 reference, then how fast each is: one command that
//! says whether a change to a kernel kept it correct and whether it beats the hand-written code.
//!
//! - On an NVIDIA sm_90 GPU ([`gpu`]): correctness on the device at the model shapes (relative L2
//!   error, max abs error, cosine), then event timing: warm-up, ≥ 100 timed launches, median with
//!   p10/p90, inputs rotating over sets larger than L2, the whole timing repeated twice and the
//!   spread reported; bytes moved per launch, achieved GB/s, that as a fraction of the copy
//!   bandwidth measured in the same run, and the generated / hand-written time ratio.
//! - Without one ([`cpu`]): the generated code in the CPU protocol simulator at small shapes against
//!   the reference, and the compilers' resource reports of both versions side by side (hipcc for
//!   gfx906, NVRTC for sm_90); it says plainly that no timing was possible and exits 0 (1 only
//!   when something is wrong).
//!
//! The hand-written versions are the reference kernels of `kernels-gen/reference/`, found through
//! their ABI descriptions, or a user's own with `--manual FILE --abi FILE.toml`
//! ([`handwritten`]). Reports: a table and a verdict line per kernel and shape on stdout, JSON,
//! Markdown and an SVG chart ([`report`], [`plot`]).

pub mod cpu;
pub mod gpu;
pub mod handwritten;
pub mod parametric;
pub mod plot;
pub mod report;
pub use report::LaunchMode;
pub mod signature;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wavefuse_codegen::Arch;
use wavefuse_runtime::Artifact;
use wavefuse_runtime::compile::{Compiler, Nvrtc, default_compiler};
use wavefuse_runtime::exec::OutputMetrics;

use crate::policy::{Placement, Ranks, SchedulePolicy};
use crate::shapes::TP_SIZES;
use crate::suite::{self, CaseSpec, Generated, GpuRuntime, PrepError, Prepared, ShapeKind, Worst};
use crate::{KernelId, Workload};

use handwritten::Hand;
use report::{Check, Manual, Resources, Row, TimingMode, Usage, Version};

/// A shape set: the Qwen 3.5 27B decode shapes at one TP size and batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ShapeSet {
    /// TP size (all ranks on one device).
    pub tp: u32,
    /// Tokens per launch.
    pub batch: usize,
}

impl ShapeSet {
    /// `qwen27b-tp4`, `qwen27b-tp4-b8`.
    pub fn name(&self) -> String {
        let mut s = format!("qwen27b-tp{}", self.tp);
        if self.batch != 1 {
            s.push_str(&format!("-b{}", self.batch));
        }
        s
    }
}

/// `qwen27b-tpN` or `qwen27b-tpN-bB` (TP 1, 2, 4, 8; batch 1–8).
pub fn parse_shape(s: &str) -> Result<ShapeSet, String> {
    let bad =
        || format!("`{s}` is not a shape set; use qwen27b-tp1|tp2|tp4|tp8, optionally -b1..-b8");
    let rest = s.strip_prefix("qwen27b-tp").ok_or_else(bad)?;
    let (tp, batch) = match rest.split_once("-b") {
        Some((tp, b)) => (tp, b.parse::<usize>().map_err(|_| bad())?),
        None => (rest, 1),
    };
    let tp: u32 = tp.parse().map_err(|_| bad())?;
    if !TP_SIZES.contains(&tp) || !(1..=8).contains(&batch) {
        return Err(bad());
    }
    Ok(ShapeSet { tp, batch })
}

fn parse_tp(s: &str) -> Result<u32, String> {
    parse_shape(&format!("qwen27b-tp{s}")).map(|x| x.tp)
}

/// The arguments of `wavefuse ab`.
#[derive(Clone, Debug, clap::Args)]
pub struct AbArgs {
    /// Kernels (default: the whole set; see `wavefuse list`).
    pub kernels: Vec<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`, see docs/ir-format.md) instead of the
    /// set's, A/B-tested at the shapes it is written with (its TP, its batch); its hand-written
    /// side is `--manual`/`--abi`.
    #[arg(long, conflicts_with_all = ["kernels", "shapes", "tps", "model_config", "reference_dir"])]
    pub kernel_file: Option<PathBuf>,
    /// Shape sets, comma-separated: qwen27b-tp1, -tp2, -tp4, -tp8, each optionally with a batch
    /// (-b1 … -b8). Default: qwen27b-tp4,qwen27b-tp1.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub shapes: Vec<ShapeSet>,
    /// TP sizes (the qwen27b shapes at batch 1), in addition to --shapes.
    #[arg(long = "tp", value_delimiter = ',', value_parser = parse_tp)]
    pub tps: Vec<u32>,
    /// Write the JSON results here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the Markdown report here.
    #[arg(long)]
    pub md: Option<PathBuf>,
    /// Write the chart here (SVG): achieved bandwidth per kernel and shape, generated vs
    /// hand-written, with the copy bandwidth. Only a timed run has one.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// A hand-written kernel (.cu for sm90, .hip for gfx906) to A/B against the generated one of
    /// KERNEL (one kernel), instead of the reference kernels; needs --abi.
    #[arg(long, requires = "abi")]
    pub manual: Option<PathBuf>,
    /// The ABI description of --manual (TOML; the format of `wavefuse emit --out`, plus
    /// `[build] defines`). A mismatch with the kernel's parameters is an error before any launch.
    #[arg(long, requires = "manual")]
    pub abi: Option<PathBuf>,
    /// Timed launches per series (at least 100 for a stable median and p10/p90).
    #[arg(long, default_value_t = 100)]
    pub iters: usize,
    /// Untimed launches before each series.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
    pub seed: u64,
    /// The commit the binary was built from (default: `$WAVEFUSE_COMMIT`, else `unknown`).
    #[arg(long, env = "WAVEFUSE_COMMIT")]
    pub commit: Option<String>,
    /// Build the kernels at this model's dimensions (a Hugging Face `config.json`: hidden,
    /// intermediate, heads, KV heads, head dim, RMSNorm epsilon) instead of Qwen 3.5 27B's; TP
    /// and batch from --shapes / --tp. The reference kernels are written for Qwen's shapes, so
    /// give your own with --manual.
    #[arg(long)]
    pub model_config: Option<PathBuf>,
    /// Where the hand-written reference kernels are (default: kernels-gen/reference).
    #[arg(long)]
    pub reference_dir: Option<PathBuf>,
    /// Do not use a GPU even when there is one: correctness in the simulator and resources only.
    #[arg(long)]
    pub no_gpu: bool,
    /// How a TP case's ranks run on the one GPU: `alone` (default) times a kernel that does not
    /// communicate as rank 0 alone, its schedule resolved for one rank per GPU, as TP deploys it
    /// (the ranks are checked one after another); `all` runs every rank at once, sharing the GPU.
    /// A kernel with an allreduce always runs all ranks at once.
    #[arg(long, value_enum, default_value_t = Ranks::Alone)]
    pub ranks: Ranks,
    /// `events` (default): CUDA events around each launch, a sample per launch; `graphs`: CUDA
    /// graphs of 20 back-to-back launches, a sample per replay (its window / 20) — the time per
    /// call in a captured decode step.
    #[arg(long, value_enum, default_value_t = TimingMode::Events)]
    pub timing: TimingMode,
    /// `stream` (default): every launch in plain stream order; `dependent` (needs `--timing
    /// graphs`): a kernel whose ABI allows it (every generated sm_90 kernel without a grid
    /// barrier or flags) is launched as a programmatic dependent of the previous launch of its
    /// stream, and every graph of the run is replayed behind a fill instead of the host gate.
    /// Measured slower than stream order on the H200.
    #[arg(long, value_enum, default_value_t = LaunchMode::Stream)]
    pub launch: LaunchMode,
    /// Compile every generated and hand-written source of the run for sm_90 into the cache
    /// (`$WAVEFUSE_CACHE_DIR`) and stop: a GPU machine without NVRTC then uses them prebuilt.
    #[arg(long)]
    pub prebuild: bool,
    /// The GPU runtime: `auto` (CUDA when an NVIDIA GPU is there, else HIP), `cuda` or `hip`.
    #[arg(long, value_enum, default_value_t = GpuRuntime::Auto)]
    pub runtime: GpuRuntime,
}

/// Where the hand-written side comes from.
#[derive(Clone, Debug)]
pub enum Choice {
    /// The reference kernels in this directory (None: no directory found).
    Reference(Option<PathBuf>),
    /// The user's own (`--manual`).
    User(Box<Hand>),
}

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Workload seed.
    pub seed: u64,
    /// Timed launches per series.
    pub iters: usize,
    /// Untimed launches before each series.
    pub warmup: usize,
    /// Commit of the binary.
    pub commit: String,
    /// The hand-written side.
    pub choice: Choice,
    /// Threads building inputs and references (GPU) or compiling (no GPU).
    pub threads: usize,
    /// Where the generated side's schedules come from.
    pub policy: SchedulePolicy,
    /// How the ranks of a TP case run and are timed on the one GPU.
    pub ranks: Ranks,
    /// Events around each launch, or graphs of launches.
    pub timing: TimingMode,
    /// Stream-order or programmatic dependent launches.
    pub launch: LaunchMode,
    /// The GPU runtime timed on.
    pub runtime: GpuRuntime,
}

impl Options {
    /// `wavefuse ab`'s defaults (the default workload seed, 100 timed launches after 10, the
    /// default schedule policy) with `choice` as the hand-written side.
    pub fn new(choice: Choice) -> Options {
        Options {
            seed: Workload::DEFAULT_SEED,
            iters: 100,
            warmup: 10,
            commit: "unknown".into(),
            choice,
            threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(1, 12),
            policy: SchedulePolicy::default(),
            ranks: Ranks::default(),
            timing: TimingMode::default(),
            launch: LaunchMode::default(),
            runtime: GpuRuntime::Auto,
        }
    }

    /// The placement case `c` is generated, run and timed at ([`Ranks::placement`]).
    pub fn placement(&self, c: &CaseSpec) -> Placement {
        self.ranks.placement(c)
    }

    /// The compiler of hand-written code for `arch`: NVRTC without include paths for the reference
    /// kernels (they need no header; the same cache keys as the generated code), with
    /// `$WAVEFUSE_CUDA_INCLUDE` for a user's own kernel.
    pub fn hand_compiler(&self, arch: Arch) -> Box<dyn Compiler> {
        match (arch, &self.choice) {
            (Arch::Sm90, Choice::User(_)) => Box::new(Nvrtc::from_env()),
            (Arch::Sm90, Choice::Reference(_)) => Box::new(Nvrtc::with_includes(Vec::new())),
            (Arch::Gfx906, _) => default_compiler(arch),
        }
    }
}

/// `wavefuse ab`.
pub fn ab_cmd(a: &AbArgs, policy: SchedulePolicy) -> ExitCode {
    // Before any work: a report that cannot be written would lose every timing.
    for (flag, p) in [("--json", &a.json), ("--md", &a.md)] {
        if let Some(p) = p {
            if let Err(e) = crate::outputs::check_report_path(flag, p) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(path) = suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    let (cases, choice) = match plan(a, &policy) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.launch == LaunchMode::Dependent && a.timing != TimingMode::Graphs {
        eprintln!(
            "error: --launch dependent overlaps a launch with the previous one in its stream: \
             time it with --timing graphs (with events every launch is timed on its own)"
        );
        return ExitCode::from(2);
    }
    let o = Options {
        seed: a.seed,
        iters: a.iters.max(1),
        warmup: a.warmup,
        commit: a.commit.clone().unwrap_or_else(|| "unknown".into()),
        policy,
        ranks: a.ranks,
        timing: a.timing,
        launch: a.launch,
        runtime: a.runtime,
        ..Options::new(choice)
    };
    if a.prebuild {
        return cpu::prebuild(&cases, &o);
    }
    if o.iters < 100 {
        eprintln!(
            "note: {} timed launches per series; at least 100 give a stable median and p10/p90",
            o.iters
        );
    }
    let bar = progress(cases.len());
    let report = run_on(
        &cases,
        &o,
        (!a.no_gpu).then_some(()).ok_or("--no-gpu"),
        &bar,
    );
    bar.finish_and_clear();
    print!("{}", report.terminal());
    if let Err(e) = write_outputs(a, &report) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    if report.failures() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `wavefuse ab` as a library call: `cases` (the set's kernels, or a user's —
/// [`suite::UserKernel::case`]) against the hand-written side of `o`, on the sm_90 GPU when there
/// is one and `use_gpu`, else checked in the simulator and compiled; the report says which, and
/// why there was no timing. Render it with [`report::AbReport::terminal`], `markdown`, `to_json`.
pub fn run(cases: &[CaseSpec], o: &Options, use_gpu: bool) -> report::AbReport {
    let why = if use_gpu {
        Ok(())
    } else {
        Err("not asked to use a GPU")
    };
    run_on(cases, o, why, &ProgressBar::hidden())
}

fn run_on(
    cases: &[CaseSpec],
    o: &Options,
    use_gpu: Result<(), &str>,
    bar: &ProgressBar,
) -> report::AbReport {
    let gpu = match use_gpu {
        Err(why) => Err(why.to_owned()),
        Ok(()) => {
            bar.set_length((cases.len() * (1 + gpu::REPEATS)) as u64);
            gpu::run(cases, o, bar)
        }
    };
    gpu.unwrap_or_else(|reason| {
        bar.set_position(0);
        cpu::run(cases, o, reason, bar)
    })
}

/// The cases and the hand-written side; a `--manual` kernel is checked against its ABI here, at
/// every shape, before anything is compiled or launched.
fn plan(a: &AbArgs, policy: &SchedulePolicy) -> Result<(Vec<CaseSpec>, Choice), String> {
    if let Some(path) = &a.kernel_file {
        let user = std::sync::Arc::new(suite::UserKernel::read(path)?);
        let case = user.case();
        let choice = match (&a.manual, &a.abi) {
            (Some(src), Some(abi)) => {
                let hand = Hand::load_for(abi, Some(src), Some(&user.ir))?;
                check_manual(&hand, std::slice::from_ref(&case), policy, a.ranks)?;
                Choice::User(Box::new(hand))
            }
            _ => Choice::Reference(None),
        };
        return Ok((vec![case], choice));
    }
    let mut shapes = a.shapes.clone();
    shapes.extend(a.tps.iter().map(|&tp| ShapeSet { tp, batch: 1 }));
    let (kernels, choice) = match (&a.manual, &a.abi) {
        (Some(src), Some(abi)) => {
            let hand = load_manual(abi, src, a, &shapes, policy)?;
            let kernel = match (a.kernels.as_slice(), hand.abi.kernel.as_deref()) {
                ([k], _) => *k,
                ([], Some(name)) => name.parse().map_err(|e| format!("{}: {e}", abi.display()))?,
                _ => return Err("--manual A/B-tests one kernel: name it (KERNEL) or set `kernel` in the ABI file".into()),
            };
            if shapes.is_empty() {
                shapes.push(ShapeSet {
                    tp: hand.abi.tp.unwrap_or(4),
                    batch: 1,
                });
            }
            (vec![kernel], Choice::User(Box::new(hand)))
        }
        _ => {
            let kernels = if a.kernels.is_empty() {
                KernelId::ALL.to_vec()
            } else {
                a.kernels.clone()
            };
            (
                kernels,
                Choice::Reference(handwritten::reference_dir(a.reference_dir.as_deref())),
            )
        }
    };
    if shapes.is_empty() {
        shapes = vec![ShapeSet { tp: 4, batch: 1 }, ShapeSet { tp: 1, batch: 1 }];
    }
    shapes.dedup();
    let tps: Vec<u32> = shapes.iter().map(|s| s.tp).collect();
    let kind = model_shapes(a.model_config.as_deref(), &tps)?;
    let cases: Vec<CaseSpec> = kernels
        .iter()
        .flat_map(|&id| {
            shapes
                .iter()
                .map(move |s| CaseSpec::of(id, s.tp, s.batch, kind))
        })
        .collect();
    if let Choice::User(hand) = &choice {
        check_manual(hand, &cases, policy, a.ranks)?;
    }
    Ok((cases, choice))
}

/// `--abi`/`--manual` for a kernel of the set; a parametric description is loaded at the
/// shapes of the named KERNEL at the first shape set (default TP 4, batch 1) and instantiated
/// again for every case.
fn load_manual(
    abi: &std::path::Path,
    src: &std::path::Path,
    a: &AbArgs,
    shapes: &[ShapeSet],
    policy: &SchedulePolicy,
) -> Result<Hand, String> {
    let text =
        std::fs::read_to_string(abi).map_err(|e| format!("reading {}: {e}", abi.display()))?;
    if !parametric::is_parametric(&text) {
        return Hand::load(abi, Some(src));
    }
    let [kernel] = a.kernels.as_slice() else {
        return Err(format!(
            "{} is parametric: name the one KERNEL it implements",
            abi.display()
        ));
    };
    let s = shapes
        .first()
        .copied()
        .unwrap_or(ShapeSet { tp: 4, batch: 1 });
    let kind = model_shapes(a.model_config.as_deref(), &[s.tp])?;
    let c = CaseSpec::of(*kernel, s.tp, s.batch, kind);
    let arch = handwritten::arch_of(src)?;
    let g = suite::generate(&c, arch, policy, a.ranks.placement(&c))
        .map_err(|e| format!("{}: {e}", c.label()))?;
    Hand::load_for(abi, Some(src), Some(&g.ir))
}

/// A user's kernel against the generated one at every case: all disagreements, or Ok.
fn check_manual(
    hand: &Hand,
    cases: &[CaseSpec],
    policy: &SchedulePolicy,
    ranks: Ranks,
) -> Result<(), String> {
    for c in cases {
        let g = suite::generate(c, hand.arch, policy, ranks.placement(c))
            .map_err(|e| format!("{}: {e}", c.label()))?;
        let problems = hand.for_kernel(&g.ir)?.check(&g.lowered);
        if !problems.is_empty() {
            return Err(format!(
                "ABI mismatch between {} and {} for `{}` at {} (nothing was launched):\n  - {}",
                hand.abi_path.display(),
                hand.source_path.display(),
                c.kernel,
                shape_name(c),
                problems.join("\n  - ")
            ));
        }
    }
    Ok(())
}

fn write_outputs(a: &AbArgs, report: &report::AbReport) -> Result<(), String> {
    let write = |p: &PathBuf, text: String| {
        crate::outputs::atomic_write(p, text.as_bytes())
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
        eprintln!("wrote {}", p.display());
        Ok::<(), String>(())
    };
    if let Some(p) = &a.json {
        write(
            p,
            serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises"),
        )?;
    }
    if let Some(p) = &a.md {
        write(p, report.markdown())?;
    }
    if let Some(p) = &a.plot {
        match plot::svg(report) {
            Ok(svg) => write(p, svg)?,
            Err(why) => eprintln!("note: no chart written to {}: {why}", p.display()),
        }
    }
    Ok(())
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
fn progress(len: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {wide_msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    bar.set_style(style);
    bar
}

/// `qwen27b-tp4` (with `-bB` past batch 1).
pub fn shape_name(c: &CaseSpec) -> String {
    let qwen = ShapeSet {
        tp: c.tp,
        batch: c.batch,
    }
    .name();
    match c.shape {
        // `h2048-f5632-q2048-kv256-d64-tp2`, `…-tp2-b8`.
        ShapeKind::Of(m) => qwen.replacen("qwen27b", &m.name(), 1),
        // A user's kernel at its own shapes: `own-tp4`, `own-tp4-b4`.
        ShapeKind::Own => qwen.replacen("qwen27b", "own", 1),
        _ => qwen,
    }
}

/// The shapes of the cases of a run: Qwen 3.5 27B's ([`ShapeKind::Model`]) without
/// `--model-config`, else the config's dimensions, checked to divide at every TP size of the run.
pub fn model_shapes(config: Option<&std::path::Path>, tps: &[u32]) -> Result<ShapeKind, String> {
    let Some(path) = config else {
        return Ok(ShapeKind::Model);
    };
    let m = crate::model_config::read(path)?;
    for &tp in tps {
        m.check_tp(tp)
            .map_err(|e| format!("{} at TP {tp}: {e}", path.display()))?;
    }
    Ok(if m == crate::shapes::Model::QWEN27B {
        ShapeKind::Model
    } else {
        ShapeKind::Of(m)
    })
}

/// A row for a case before anything ran: bytes from the op-level buffers (every input read once,
/// every output written once, per rank and over the group).
pub fn base_row(spec: &CaseSpec, g: &Generated) -> Row {
    let bytes_per_rank: u64 =
        g.ir.buffers()
            .map(|(_, d)| d.local_type().bytes() as u64)
            .sum();
    Row {
        kernel: spec.kernel.name().to_owned(),
        shape: shape_name(spec),
        tp: spec.tp,
        batch: spec.batch,
        dims: g.dims(),
        bytes_per_rank,
        bytes_per_group: bytes_per_rank * u64::from(spec.tp),
        alone: g.placement == Placement::PerDevice && spec.tp > 1,
        tolerance: spec.kernel.tolerance().0,
        generated: blank_version("generated", spec.kernel.name()),
        manual: Manual::Absent("no hand-written version".into()),
    }
}

/// A row for a case that could not even be generated.
pub fn placeholder_row(spec: &CaseSpec) -> Row {
    Row {
        kernel: spec.kernel.name().to_owned(),
        shape: shape_name(spec),
        tp: spec.tp,
        batch: spec.batch,
        dims: String::new(),
        bytes_per_rank: 0,
        bytes_per_group: 0,
        alone: false,
        tolerance: spec.kernel.tolerance().0,
        generated: blank_version("generated", spec.kernel.name()),
        manual: Manual::Absent("not looked for (the generated kernel could not be built)".into()),
    }
}

fn blank_version(origin: &str, symbol: &str) -> Version {
    Version {
        origin: origin.to_owned(),
        symbol: symbol.to_owned(),
        check: Check::not_run("not run"),
        timing: None,
        note: String::new(),
        resources: Vec::new(),
        error: None,
    }
}

/// The worst of per-output metrics as a check at tolerance `tol`.
pub fn check_of(on: &str, ms: &[OutputMetrics], tol: f64) -> Check {
    let w = Worst::of(ms);
    let pass = !ms.is_empty() && w.passes(tol);
    let detail = match ms.iter().find(|m| !m.passes(tol)) {
        _ if ms.is_empty() => "no outputs".to_owned(),
        None => String::new(),
        Some(m) => format!(
            "rank {} `{}`: rel L2 {:.3e} (tol {tol:.0e}), {} of {} non-finite, {} differ from rank 0",
            m.rank, m.output, m.rel_l2, m.non_finite, m.elements, m.differs_from_rank0
        ),
    };
    Check {
        on: on.to_owned(),
        ran: true,
        pass,
        rel_l2: w.rel_l2,
        max_abs: w.max_abs,
        cosine: w.cosine,
        non_finite: w.non_finite,
        detail,
    }
}

/// The resource report of kernel `symbol` in `artifact`, launched with `workgroup_size` lanes.
pub fn usage_of(artifact: &Artifact, symbol: &str, workgroup_size: u32) -> Resources {
    let usage = match artifact.usage_of(symbol) {
        None => Err(format!(
            "{} gave no resource report for `{symbol}`",
            artifact.compiler
        )),
        Some(u) => Ok(Usage::of(u, workgroup_size)),
    };
    Resources {
        arch: artifact.arch.name().to_owned(),
        compiler: format!(
            "{} {}",
            artifact.compiler,
            artifact.compiler_version.lines().next().unwrap_or("")
        ),
        usage,
        modelled: None,
    }
}

/// Builds every case's inputs and f64 reference on `o.threads` threads (model shapes, for `arch`)
/// and hands each to `each` on this thread as it is ready (in any order).
pub fn prepare_all(
    cases: &[CaseSpec],
    o: &Options,
    arch: Arch,
    mut each: impl FnMut(usize, Result<Prepared, PrepError>),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<Prepared, PrepError>)>(1);
    std::thread::scope(|scope| {
        for _ in 0..o.threads.min(cases.len()).max(1) {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = cases.get(i) else { break };
                    if tx
                        .send((
                            i,
                            suite::prepare(c, arch, &o.policy, o.placement(c), o.seed, false),
                        ))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, p) in rx {
            each(i, p);
        }
    });
}
