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

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use indicatif::ProgressBar;
use wavefuse_codegen::Arch;
use wavefuse_runtime::Artifact;
use wavefuse_runtime::compile::Compiler;
use wavefuse_runtime::exec::OutputMetrics;

use crate::Workload;
use crate::pipeline::{self, Purpose};
use crate::policy::{Placement, Ranks, SchedulePolicy, communicates, run_placement};
use crate::shapes::{MAX_BATCH, TP_SIZES};
use crate::suite::{self, CaseSpec, Generated, GpuRuntime, PrepError, Prepared, ShapeKind, Worst};

pub use crate::case::{ShapeSet, shape_name};
use handwritten::Hand;
use report::{Check, Manual, Resources, Row, TimingMode, Usage, Version};

/// `qwen27b-tpN` or `qwen27b-tpN-bB` (TP 1, 2, 4, 8; batch 1–64, [`MAX_BATCH`]).
pub fn parse_shape(s: &str) -> Result<ShapeSet, NotAShapeSet> {
    let bad = || NotAShapeSet(s.to_owned());
    let rest = s.strip_prefix("qwen27b-tp").ok_or_else(bad)?;
    let (tp, batch) = match rest.split_once("-b") {
        Some((tp, b)) => (tp, b.parse::<usize>().map_err(|_| bad())?),
        None => (rest, 1),
    };
    let tp: u32 = tp.parse().map_err(|_| bad())?;
    if !TP_SIZES.contains(&tp) || !(1..=MAX_BATCH).contains(&batch) {
        return Err(bad());
    }
    Ok(ShapeSet { tp, batch })
}

/// A `--shapes` value that is not a shape set.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a shape set; use qwen27b-tp1|tp2|tp4|tp8, optionally -b1..-b{MAX_BATCH}")]
pub struct NotAShapeSet(pub String);

/// Why the shapes of a run could not be had from `--model-config`.
#[derive(Debug, thiserror::Error)]
pub enum ShapesError {
    /// The config gives no model.
    #[error(transparent)]
    Config(#[from] crate::model_config::ConfigError),
    /// The model cannot be split at a TP size of the run.
    #[error("{} at TP {tp}: {problem}", path.display())]
    Tp {
        /// The config.
        path: PathBuf,
        /// The TP size.
        tp: u32,
        /// Which dimension does not divide, and how.
        problem: String,
    },
}

/// Where a caller still words errors as text.
impl From<ShapesError> for String {
    fn from(e: ShapesError) -> String {
        e.to_string()
    }
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
    /// How the ranks of a TP case run and are timed on one GPU (with fewer GPUs than ranks and
    /// no explicit placement).
    pub ranks: Ranks,
    /// Where the ranks of a TP case run (`--placement`); None: the default of
    /// [`run_placement`] — one rank per device without a GPU or with one GPU per rank.
    pub placement: Option<Placement>,
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
            placement: None,
            timing: TimingMode::default(),
            launch: LaunchMode::default(),
            runtime: GpuRuntime::Auto,
        }
    }

    /// The placement case `c` is generated, run and timed at with `gpus` GPUs (0: none, the
    /// simulator), [`run_placement`]; a case whose kernel cannot be built gets the explicit
    /// placement or one rank per device (the error comes when it is generated).
    pub fn placement(&self, c: &CaseSpec, gpus: usize) -> Placement {
        match suite::op_kernel(c) {
            Ok(Some(ir)) => run_placement(self.placement, self.ranks, &ir, gpus),
            _ => self.placement.unwrap_or(Placement::PerDevice),
        }
    }

    /// The compiler of hand-written code for `arch` ([`pipeline::compiler`]): the reference
    /// kernels' as the generated code's, a user's own kernel's with its include directories.
    pub fn hand_compiler(&self, arch: Arch) -> Box<dyn Compiler> {
        let purpose = match &self.choice {
            Choice::User(_) => Purpose::UserHand,
            Choice::Reference(_) => Purpose::Run,
        };
        pipeline::compiler(arch, purpose)
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

/// [`run`] with its progress on `bar` and, where `use_gpu` is an error, why nothing is timed.
pub fn run_on(
    cases: &[CaseSpec],
    o: &Options,
    use_gpu: Result<(), &str>,
    bar: &ProgressBar,
) -> report::AbReport {
    let gpu = match use_gpu {
        Err(why) => Err(why.to_owned()),
        Ok(()) => {
            bar.set_length((cases.len() * (1 + gpu::REPEATS)) as u64);
            gpu::run(cases, o, bar).map_err(|e| e.to_string())
        }
    };
    gpu.unwrap_or_else(|reason| {
        bar.set_position(0);
        cpu::run(cases, o, reason, bar)
    })
}

/// The shapes of the cases of a run: Qwen 3.5 27B's ([`ShapeKind::Model`]) without
/// `--model-config`, else the config's dimensions, checked to divide at every TP size of the run.
pub fn model_shapes(
    config: Option<&std::path::Path>,
    tps: &[u32],
) -> Result<ShapeKind, ShapesError> {
    let Some(path) = config else {
        return Ok(ShapeKind::Model);
    };
    let m = crate::model_config::read(path)?;
    for &tp in tps {
        m.check_tp(tp).map_err(|problem| ShapesError::Tp {
            path: path.to_owned(),
            tp,
            problem,
        })?;
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
        alone: g.placement == Placement::PerDevice && spec.tp > 1 && !communicates(&g.ir),
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

/// The resource report of kernel `symbol` in `artifact`, launched with `workgroup_size` lanes
/// and `dynamic_lds` bytes of dynamic LDS per workgroup (its ABI's `dynamic_lds_bytes`).
pub fn usage_of(
    artifact: &Artifact,
    symbol: &str,
    workgroup_size: u32,
    dynamic_lds: u64,
) -> Resources {
    let usage = match artifact.usage_of(symbol) {
        None => Err(format!(
            "{} gave no resource report for `{symbol}`",
            artifact.compiler
        )),
        Some(u) => Ok(Usage::of(
            u,
            workgroup_size,
            u32::try_from(dynamic_lds).unwrap_or(u32::MAX),
        )),
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

/// Builds every case's inputs and f64 reference on `o.threads` threads (model shapes, for `arch`,
/// case i at `placements[i]`) and hands each to `each` on this thread as it is ready (in any
/// order).
pub fn prepare_all(
    cases: &[CaseSpec],
    placements: &[Placement],
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
                            suite::prepare(c, arch, &o.policy, placements[i], o.seed, false),
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
