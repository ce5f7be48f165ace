//! `wavefuse tune`: search the schedule space of kernels of the set or of a user's, store the
//! winners, print and write the report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use wavefuse_codegen::Arch;
use wavefuse_harness::ab::{ShapeSet, model_shapes, parse_shape};
use wavefuse_harness::outputs::{atomic_write_all, check_report_path};
use wavefuse_harness::policy::{Placement, Ranks};
use wavefuse_harness::suite::{self, CaseSpec, GpuRuntime};
use wavefuse_harness::tune::report::TuneReport;
use wavefuse_harness::tune::store::Store;
use wavefuse_harness::tune::{DEFAULT_BUDGET, QUICK_BUDGET, Settings, Target, entries, search};
use wavefuse_harness::{KernelId, Workload};

/// The arguments of `wavefuse tune`.
#[derive(Clone, Debug, clap::Args)]
pub struct TuneArgs {
    /// Kernels to tune (see `wavefuse list`).
    #[arg(required_unless_present = "kernel_file")]
    pub kernels: Vec<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`) instead of the set's, tuned at the shapes
    /// it is written with; the winner is stored for that exact text (`wavefuse emit --kernel-file
    /// … --schedule tuned` reads it back).
    #[arg(long, conflicts_with_all = ["kernels", "shapes", "model_config"])]
    pub kernel_file: Option<PathBuf>,
    /// Shape sets, comma-separated (qwen27b-tp1 … -tp8, optionally -b1 … -b64). Default:
    /// qwen27b-tp4.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub shapes: Vec<ShapeSet>,
    /// Tune at this model's dimensions (a Hugging Face `config.json`) instead of Qwen 3.5
    /// 27B's; the winners are stored under the model's shape-set names.
    #[arg(long)]
    pub model_config: Option<PathBuf>,
    /// Target: sm90 or gfx906, timed on a GPU of that arch when `--runtime` opens one (an MI50
    /// through HIP for gfx906); otherwise compiled and filtered only (gfx906: ranked by the
    /// static model).
    #[arg(long, default_value_t = Arch::Sm90)]
    pub arch: Arch,
    /// Candidates per kernel and shape at most (distinct sources); default 200, 32 with --quick.
    #[arg(long)]
    pub budget: Option<usize>,
    /// The quick space: the default, its neighbours and the tiles (no random fill).
    #[arg(long)]
    pub quick: bool,
    /// Timed launches per series (at least 100 for a stable median and p10/p90).
    #[arg(long, default_value_t = 100)]
    pub iters: usize,
    /// Untimed launches before each series.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Compiler threads (default: the number of cores, at most 12).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
    pub seed: u64,
    /// The commit the binary was built from (default: `$WAVEFUSE_COMMIT`, else `unknown`).
    #[arg(long, env = "WAVEFUSE_COMMIT")]
    pub commit: Option<String>,
    /// Also write the winners into this store file (TOML; created or updated).
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Do not write the cache directory's store.
    #[arg(long)]
    pub no_cache_store: bool,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the Markdown report here.
    #[arg(long)]
    pub md: Option<PathBuf>,
    /// Do not use a GPU even when there is one: compile and filter only.
    #[arg(long)]
    pub no_gpu: bool,
    /// Stop checking and timing new candidates this many seconds after the start (the finals and
    /// the reports still run): a run under a time limit keeps what it measured.
    #[arg(long)]
    pub deadline: Option<f64>,
    /// The resource filter's occupancy floor (warps per SM sub-partition on sm90, waves per SIMD
    /// on gfx906) instead of the default's (sm90) or the hand-written kernel's (gfx906).
    #[arg(long)]
    pub min_occupancy: Option<u32>,
    /// Where a TP case's ranks run, which the candidates are fitted for, as for `wavefuse ab`:
    /// `per-device` (one rank per GPU, as TP is deployed) or `same-device`. Default: per-device
    /// without a GPU to time on; on one GPU, as `--ranks` says.
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
    /// How a TP case's ranks run on the one GPU (without `--placement`), as for `wavefuse ab`:
    /// `alone` (default) times a kernel without an allreduce as rank 0 alone, its schedules
    /// resolved for one rank per GPU; `all` runs every rank at once.
    #[arg(long, value_enum, default_value_t = Ranks::Alone)]
    pub ranks: Ranks,
    /// The GPU runtime: `auto` (CUDA when an NVIDIA GPU is there, else HIP), `cuda` or `hip`.
    /// A GPU of another arch than `--arch` is not timed on (gfx906 is then ranked by the model).
    #[arg(long, value_enum, default_value_t = GpuRuntime::Auto)]
    pub runtime: GpuRuntime,
}

/// `wavefuse tune`: the search with a progress bar, the winners stored, the report printed and
/// written; exit 1 when every candidate of a case failed, 2 on bad arguments.
pub fn run(a: &TuneArgs) -> ExitCode {
    // Before any work: a report that cannot be written would lose the whole search.
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
    let o = Settings {
        budget: a
            .budget
            .unwrap_or(if a.quick {
                QUICK_BUDGET
            } else {
                DEFAULT_BUDGET
            })
            .max(1),
        quick: a.quick,
        iters: a.iters.max(1),
        warmup: a.warmup,
        threads: a.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(1, 12)
        }),
        seed: a.seed,
        commit: a.commit.clone().unwrap_or_else(|| "unknown".into()),
        min_occupancy: a.min_occupancy,
        deadline: a
            .deadline
            .map(|s| Instant::now() + std::time::Duration::from_secs_f64(s.max(0.0))),
        ranks: a.ranks,
        placement: a.placement,
        runtime: a.runtime,
    };
    let targets = match plan(a) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The signal thread waits for this guard: an interrupted search is reported beside the
    // previous reports, never stored, before the process exits 130.
    let _guard = wavefuse_runtime::compile::child::cooperate();
    let bar = super::progress_bar(Some(0));
    let mut report = search(&targets, &o, a.arch, a.no_gpu.then_some("--no-gpu"), &bar);
    bar.finish_and_clear();
    if report.interrupted {
        return interrupted(a, &report);
    }
    match store_winners(a, &report) {
        Ok(paths) => report.stored_in = paths,
        Err(e) => {
            eprintln!("error: {e}");
            print!("{}", report.terminal());
            return ExitCode::FAILURE;
        }
    }
    print!("{}", report.terminal());
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for p in &report.stored_in {
        eprintln!("winners stored in {p}");
    }
    if let Err(e) = write_outputs(a, &report) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    if let Some((case, why)) = report.all_failed() {
        eprintln!("error: {case}: every candidate failed; the first: {why}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// An interrupted search: no winner stored, the previous `--json`/`--md` left as they were, the
/// partial report written beside them (`NAME.interrupted.EXT`), marked; exit 130.
fn interrupted(a: &TuneArgs, report: &TuneReport) -> ExitCode {
    print!("{}", report.terminal());
    let beside = TuneArgs {
        json: a.json.as_deref().map(interrupted_path),
        md: a.md.as_deref().map(interrupted_path),
        ..a.clone()
    };
    if let Err(e) = write_outputs(&beside, report) {
        eprintln!("error: {e}");
    }
    eprintln!("tune interrupted: no winner stored");
    ExitCode::from(130)
}

/// `DIR/NAME.interrupted.EXT` beside `DIR/NAME.EXT`.
pub fn interrupted_path(p: &std::path::Path) -> PathBuf {
    let stem = p.file_stem().unwrap_or_default().to_string_lossy();
    let name = match p.extension() {
        Some(ext) => format!("{stem}.interrupted.{}", ext.to_string_lossy()),
        None => format!("{stem}.interrupted"),
    };
    p.with_file_name(name)
}

fn plan(a: &TuneArgs) -> Result<Vec<Target>, String> {
    if let Some(path) = &a.kernel_file {
        return Ok(vec![Target::user(Arc::new(suite::UserKernel::read(path)?))]);
    }
    let mut shapes = a.shapes.clone();
    if shapes.is_empty() {
        shapes.push(ShapeSet { tp: 4, batch: 1 });
    }
    shapes.dedup();
    let tps: Vec<u32> = shapes.iter().map(|s| s.tp).collect();
    let shape = model_shapes(a.model_config.as_deref(), &tps)?;
    let mut out = Vec::new();
    for &id in &a.kernels {
        for s in &shapes {
            let spec = CaseSpec::of(id, s.tp, s.batch, shape);
            let ir = suite::op_kernel(&spec)
                .map_err(|e| format!("{}: {e}", spec.label()))?
                .ok_or_else(|| format!("{}: no model shapes", spec.label()))?;
            out.push(Target { spec, ir });
        }
    }
    Ok(out)
}

/// Writes the winners into the cache directory's store and `--store`; the paths written.
fn store_winners(a: &TuneArgs, report: &TuneReport) -> Result<Vec<String>, String> {
    let entries = entries(report);
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let mut paths = Vec::new();
    if !a.no_cache_store {
        paths.push(Store::cache_path());
    }
    paths.extend(a.store.clone());
    let mut written = Vec::new();
    for p in paths {
        let mut s = Store::load(&p).map_err(|e| e.to_string())?;
        for e in &entries {
            s.insert(e.clone());
        }
        s.save(&p).map_err(|e| e.to_string())?;
        written.push(p.display().to_string());
    }
    Ok(written)
}

/// The JSON and Markdown reports, written as one group (`atomic_write_all`: both complete before
/// either is renamed, the renames under the directories' locks), so two runs never leave one's
/// JSON beside the other's Markdown.
fn write_outputs(a: &TuneArgs, report: &TuneReport) -> Result<(), String> {
    let json = a.json.as_ref().map(|p| {
        let text = serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises");
        (p, text)
    });
    let md = a.md.as_ref().map(|p| (p, report.markdown()));
    let files: Vec<(&std::path::Path, &[u8])> = [&json, &md]
        .into_iter()
        .flatten()
        .map(|(p, t)| (p.as_path(), t.as_bytes()))
        .collect();
    if files.is_empty() {
        return Ok(());
    }
    atomic_write_all(&files).map_err(|e| {
        let names: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
        format!("writing {}: {e}", names.join(" and "))
    })?;
    for (p, _) in &files {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
