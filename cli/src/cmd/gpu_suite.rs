//! `wavefuse gpu-suite`: every kernel of the set (or a user's) on the GPU against the f64
//! reference, back-to-back launches of the synchronising ones; or `--prebuild`, the suite's
//! sources compiled into the cache.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wavefuse_codegen::Arch;
use wavefuse_harness::KernelId;
use wavefuse_harness::ab::LaunchMode;
use wavefuse_harness::outputs::atomic_write;
use wavefuse_harness::policy::SchedulePolicy;
use wavefuse_harness::suite::{
    COMMUNICATING, GpuRuntime, PrepError, Purpose, Status, SuiteError, SuiteOptions,
    SuitePlacement, UserKernel, artifact_name, compiler, default_per_device_skew, gpu_count,
    locate_nvrtc, per_device_tps, request, run_suite, sources_to_prebuild,
};
use wavefuse_runtime::rank::Skew;
use wavefuse_runtime::{Cache, exec};

/// The arguments of `wavefuse gpu-suite`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SuiteArgs {
    /// Write the JSON results here (and the Markdown table beside it, with `.md`).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// The quick suite: model shapes at batch 1 and odd N at batch 3, 1,000 back-to-back
    /// launches.
    #[arg(long)]
    pub quick: bool,
    /// Run the suite at this model's dimensions (a Hugging Face `config.json`) instead of Qwen
    /// 3.5 27B's: its shapes at batch 1, 3 and 8 (quick: 1); the odd shapes are Qwen's and are
    /// left out. Not with --prebuild.
    #[arg(long, conflicts_with = "prebuild")]
    pub model_config: Option<std::path::PathBuf>,
    /// The commit the binary was built from (default: `$WAVEFUSE_COMMIT`, else `unknown`).
    #[arg(long, env = "WAVEFUSE_COMMIT")]
    pub commit: Option<String>,
    /// Only these kernels (comma-separated).
    #[arg(long = "kernel", value_delimiter = ',')]
    pub kernels: Vec<KernelId>,
    /// Only these TP sizes (comma-separated).
    #[arg(long = "tp", value_delimiter = ',', value_parser = wavefuse_harness::shapes::parse_tp)]
    pub tps: Vec<u32>,
    /// Base seed (case i uses a seed derived from it and i).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Back-to-back launches per synchronising kernel (default 10,000; quick: 1,000).
    #[arg(long)]
    pub stress_launches: Option<u32>,
    /// Report cases not started within this many seconds as skipped (the results file is still
    /// written).
    #[arg(long)]
    pub deadline: Option<f64>,
    /// Compile every source of the suite and of scripts/gpu-suite.sh for sm_90 into the cache
    /// (`$WAVEFUSE_CACHE_DIR`) instead of running: no GPU needed.
    #[arg(long)]
    pub prebuild: bool,
    /// Where the ranks run: `same-device` (every rank on GPU 0) or `per-device` (rank r on GPU r;
    /// default kernels: the four that communicate; default TP: 2 and 4 as far as the visible GPUs
    /// allow; an explicit TP above the GPU count is refused).
    #[arg(long, value_enum, default_value_t = SuitePlacement::SameDevice)]
    pub placement: SuitePlacement,
    /// The GPU runtime: `auto` (CUDA when an NVIDIA GPU is there, else HIP), `cuda` or `hip`.
    #[arg(long, value_enum, default_value_t = GpuRuntime::Auto)]
    pub runtime: GpuRuntime,
    /// Launch skew `STEP_US[:asc|desc|alt]`: rank r's launch is held back by a multiple of the
    /// step before every launch (default: none on one device, `20:alt` per device; `0`: none).
    #[arg(long)]
    pub skew: Option<Skew>,
    /// `stream` (default) or `dependent`: launch every kernel whose ABI allows it (every generated
    /// sm_90 kernel without a grid barrier or flags) as a programmatic dependent of the previous launch of its stream, so the
    /// back-to-back run overlaps each launch's start with the previous one's end.
    #[arg(long, value_enum, default_value_t = LaunchMode::Stream)]
    pub launch: LaunchMode,
    /// Kernels of your own (textual IR; repeat the flag) instead of the set: each one case at
    /// the shapes and TP it is written with, checked like the set's, and — when it synchronises
    /// and its batch is 1 — run back to back (`--stress-launches`) too.
    #[arg(long = "kernel-file", conflicts_with_all = ["kernels", "tps", "model_config", "prebuild"])]
    pub kernel_files: Vec<std::path::PathBuf>,
}

/// `wavefuse gpu-suite`: the Markdown report printed, the JSON and Markdown files written; exit 1
/// when a case failed, 2 when nothing could run.
pub fn run(a: &SuiteArgs, policy: SchedulePolicy) -> ExitCode {
    if let Some(path) = locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    if a.prebuild {
        return prebuild(&policy);
    }
    let mut o = SuiteOptions::new(a.quick);
    o.placement = a.placement;
    o.policy = policy;
    o.runtime = a.runtime;
    o.launch = a.launch;
    if a.placement == SuitePlacement::PerDevice {
        o.kernels = COMMUNICATING.to_vec();
        o.skew = default_per_device_skew();
        if a.tps.is_empty() {
            let visible = match gpu_count(a.runtime) {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            o.tps = per_device_tps(visible);
            if o.tps.is_empty() {
                eprintln!("error: --placement per-device needs at least 2 GPUs; {visible} visible");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(skew) = a.skew {
        o.skew = skew;
    }
    if !a.kernels.is_empty() {
        o.kernels = a.kernels.clone();
    }
    if !a.tps.is_empty() {
        o.tps = a.tps.clone();
    }
    for path in &a.kernel_files {
        match UserKernel::read(path) {
            Ok(k) => o.own.push(Arc::new(k)),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if !o.own.is_empty() {
        // The TP sizes the per-device placement needs are the kernels' own.
        o.tps = o.own.iter().map(|k| k.ir.tp()).collect();
    }
    o.shape = match wavefuse_harness::ab::model_shapes(a.model_config.as_deref(), &o.tps) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    o.seed = a.seed.unwrap_or(o.seed);
    o.stress_launches = a.stress_launches.unwrap_or(o.stress_launches);
    o.deadline_s = a.deadline;
    if let Some(c) = &a.commit {
        o.commit = c.clone();
    }
    let report = match run_suite(&o) {
        Ok(r) => r,
        Err(SuiteError::NoGpu(m) | SuiteError::Placement(m)) => {
            eprintln!("error: {m}");
            return ExitCode::from(2);
        }
    };
    let md = report.markdown();
    print!("{md}");
    if let Some(path) = &a.out {
        let json = serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises");
        let md_path = path.with_extension("md");
        for (p, text) in [(path, json), (&md_path, md)] {
            if let Err(e) = atomic_write(p, text.as_bytes()) {
                eprintln!("error: writing {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
            eprintln!("wrote {}", p.display());
        }
    }
    if report.count(Status::Fail) > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `wavefuse gpu-suite --prebuild`: compile every source of the suite and of the sanitizer runs
/// for sm_90 into the cache (`$WAVEFUSE_CACHE_DIR`), so a GPU machine without NVRTC, or with the
/// same NVRTC, compiles nothing.
fn prebuild(policy: &SchedulePolicy) -> ExitCode {
    let cache = Cache::from_env();
    let arch = Arch::Sm90;
    let sources = sources_to_prebuild(arch, policy);
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    eprintln!(
        "prebuilding {} sources for {arch} into {} on {jobs} threads",
        sources.len(),
        cache.dir().display()
    );
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let (unsupported, errors): (Vec<_>, Vec<_>) = sources
        .iter()
        .filter_map(|s| s.as_ref().err())
        .partition(|(_, e)| matches!(e, PrepError::Unsupported(_)));
    for (c, e) in unsupported.iter().chain(&errors) {
        eprintln!("{}: {e}", c.label());
    }
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let compiler = compiler(arch, Purpose::Run);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(src) = sources.get(i) else { break };
                    let Ok(g) = src else { continue };
                    match exec::artifact_for(&cache, compiler.as_ref(), &request(g)) {
                        Ok((_, how)) => {
                            eprintln!("{:<44} {}", g.spec.label(), artifact_name(&how))
                        }
                        Err(e) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            eprintln!("{}: {e}", g.spec.label());
                        }
                    }
                }
            });
        }
    });
    let failed = failed.into_inner() + errors.len();
    eprintln!(
        "{} sources, {} unsupported, {failed} failed",
        sources.len(),
        unsupported.len()
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
