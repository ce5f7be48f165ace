//! `wavefuse ab`: generated against hand-written kernels (the set's references or a user's
//! `--manual`), checked against the f64 reference, then timed; the table, JSON, Markdown, chart.

use std::path::PathBuf;
use std::process::ExitCode;

use wavefuse_harness::ab::handwritten::{self, Hand, HandError};
use wavefuse_harness::ab::report::{self, TimingMode};
use wavefuse_harness::ab::{
    Choice, LaunchMode, Options, ShapeSet, cpu, model_shapes, parametric, parse_shape, plot,
    run_on, shape_name,
};
use wavefuse_harness::outputs::{atomic_write, atomic_write_all, check_report_path};
use wavefuse_harness::policy::{Placement, Ranks, SchedulePolicy, run_placement};
use wavefuse_harness::suite::{self, CaseSpec, GpuRuntime};
use wavefuse_harness::{KernelId, Workload};

fn parse_tp(s: &str) -> Result<u32, String> {
    parse_shape(&format!("qwen27b-tp{s}"))
        .map(|x| x.tp)
        .map_err(|e| e.to_string())
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
    /// (-b1 … -b64). Default: qwen27b-tp4,qwen27b-tp1.
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
    /// Where a TP case's ranks run, which its schedule is fitted for: `per-device` (one rank per
    /// GPU, as TP is deployed and as `wavefuse emit` prints it) or `same-device` (every rank on
    /// one GPU). Default: per-device without a GPU (the simulator models one device per rank)
    /// or with a GPU per rank; on fewer GPUs, as `--ranks` says.
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
    /// How a TP case's ranks run on one GPU (without `--placement`, on fewer GPUs than ranks):
    /// `alone` (default) times a kernel that does not communicate as rank 0 alone, its schedule
    /// resolved for one rank per GPU, as TP deploys it (the ranks are checked one after
    /// another); `all` runs every rank at once, sharing the GPU. A kernel with an allreduce runs
    /// all ranks at once; where they do not fit on the GPU together it is reported as needing a
    /// GPU per rank, not run.
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
    /// stream.
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

/// `wavefuse ab`: the A/B table printed, the JSON, Markdown and chart written; exit 1 when a
/// version failed its check, 2 on bad arguments.
pub fn run(a: &AbArgs, policy: SchedulePolicy) -> ExitCode {
    // Before any work: a report that cannot be written would lose every timing.
    for (flag, p) in [("--json", &a.json), ("--md", &a.md)] {
        if let Some(p) = p {
            if let Err(e) = check_report_path(flag, p) {
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
        placement: a.placement,
        timing: a.timing,
        launch: a.launch,
        runtime: a.runtime,
        ..Options::new(choice)
    };
    if a.prebuild {
        return prebuild(&cases, &o);
    }
    if o.iters < 100 {
        eprintln!(
            "note: {} timed launches per series; at least 100 give a stable median and p10/p90",
            o.iters
        );
    }
    // The signal thread waits for this guard: an interrupted run's reports go beside the previous
    // ones, marked, before the process exits 130.
    let _guard = wavefuse_runtime::compile::child::cooperate();
    let bar = super::progress_bar(Some(cases.len() as u64));
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

/// The cases and the hand-written side; a `--manual` kernel is checked against its ABI here, at
/// every shape, before anything is compiled or launched.
fn plan(a: &AbArgs, policy: &SchedulePolicy) -> Result<(Vec<CaseSpec>, Choice), String> {
    if let Some(path) = &a.kernel_file {
        let user = std::sync::Arc::new(suite::UserKernel::read(path)?);
        let case = user.case();
        let choice = match (&a.manual, &a.abi) {
            (Some(src), Some(abi)) => {
                let hand = Hand::load_for(abi, Some(src), Some(&user.ir))?;
                check_manual(&hand, std::slice::from_ref(&case), policy, a)?;
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
        check_manual(hand, &cases, policy, a)?;
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
        return Ok(Hand::load(abi, Some(src))?);
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
    let g = suite::generate(&c, arch, policy, placement(a, &c))
        .map_err(|e| format!("{}: {e}", c.label()))?;
    Ok(Hand::load_for(abi, Some(src), Some(&g.ir))?)
}

/// The placement case `c` runs at ([`run_placement`]): the GPUs are counted here (none with
/// `--no-gpu`), as the run will count them.
fn placement(a: &AbArgs, c: &CaseSpec) -> Placement {
    let gpus = if a.no_gpu {
        0
    } else {
        suite::gpu_count(a.runtime).unwrap_or(0)
    };
    match suite::op_kernel(c) {
        Ok(Some(ir)) => run_placement(a.placement, a.ranks, &ir, gpus),
        _ => a.placement.unwrap_or(Placement::PerDevice),
    }
}

/// A user's kernel against the generated one at every case: all disagreements, or Ok.
fn check_manual(
    hand: &Hand,
    cases: &[CaseSpec],
    policy: &SchedulePolicy,
    a: &AbArgs,
) -> Result<(), String> {
    for c in cases {
        let g = suite::generate(c, hand.arch, policy, placement(a, c))
            .map_err(|e| format!("{}: {e}", c.label()))?;
        let problems = match hand.for_kernel(&g.ir) {
            Ok(h) => h.check(&g.lowered),
            // Outside the description's batches: the row reports the hand-written side absent.
            Err(HandError::BatchOutside { .. }) => continue,
            Err(e) => return Err(e.to_string()),
        };
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

/// The reports, the JSON and Markdown written as one group (`atomic_write_all`). After an
/// interrupt they go beside the previous ones (`NAME.interrupted.EXT`), marked, and never
/// replace them (docs/errors.md).
fn write_outputs(a: &AbArgs, report: &report::AbReport) -> Result<(), String> {
    let interrupted = wavefuse_runtime::compile::child::interrupted();
    let dest = |p: &PathBuf| {
        if interrupted {
            super::tune::interrupted_path(p)
        } else {
            p.clone()
        }
    };
    let write = |p: &PathBuf, text: String| {
        atomic_write(p, text.as_bytes()).map_err(|e| format!("writing {}: {e}", p.display()))?;
        eprintln!("wrote {}", p.display());
        Ok::<(), String>(())
    };
    let mut json = report.to_json();
    let mut md = report.markdown();
    if interrupted {
        json["interrupted"] = serde_json::Value::Bool(true);
        md = format!("**INTERRUPTED: the run did not finish; these results are partial.**\n\n{md}");
    }
    let json = a.json.as_ref().map(|p| {
        let text = serde_json::to_string_pretty(&json).expect("JSON serialises");
        (dest(p), text)
    });
    let md = a.md.as_ref().map(|p| (dest(p), md));
    let group: Vec<(&std::path::Path, &[u8])> = [&json, &md]
        .into_iter()
        .flatten()
        .map(|(p, t)| (p.as_path(), t.as_bytes()))
        .collect();
    if !group.is_empty() {
        atomic_write_all(&group).map_err(|e| format!("writing the reports: {e}"))?;
        for (p, _) in &group {
            eprintln!("wrote {}", p.display());
        }
    }
    let a = &AbArgs {
        plot: a.plot.as_ref().map(dest),
        ..a.clone()
    };
    if let Some(p) = &a.plot {
        match plot::svg(report) {
            Ok(svg) => write(p, svg)?,
            Err(why) => eprintln!("note: no chart written to {}: {why}", p.display()),
        }
    }
    Ok(())
}

/// `wavefuse ab --prebuild`: a line per source on stderr; exit 1 when any failed.
fn prebuild(cases: &[CaseSpec], o: &Options) -> ExitCode {
    let built = cpu::prebuild(cases, o);
    for b in &built {
        match &b.result {
            Ok(()) => eprintln!("{:<44} {:<13} ok", b.case, b.side),
            Err(e) => eprintln!("{:<44} {:<13} {e}", b.case, b.side),
        }
    }
    let failed = built.iter().filter(|b| b.result.is_err()).count();
    eprintln!(
        "{} sources for sm90 into {}; {failed} failed",
        built.iter().filter(|b| b.side != "error").count(),
        wavefuse_runtime::Cache::from_env().dir().display()
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
