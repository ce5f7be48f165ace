//! `wavefuse mgpu-bench`: the multi-GPU benchmark (allreduce and the fused kernels, one rank per
//! GPU or every rank on one), in CUDA or HIP graphs.

use std::process::ExitCode;

use wavefuse_codegen::Arch;
use wavefuse_harness::Workload;
use wavefuse_harness::mgpu::{BenchOptions, run_bench, sources};
use wavefuse_harness::outputs::atomic_write;
use wavefuse_harness::pipeline::Purpose;
use wavefuse_harness::policy::SchedulePolicy;
use wavefuse_harness::suite::{self, GpuRuntime};
use wavefuse_runtime::rank::per_device_ordinals;
use wavefuse_runtime::{Cache, exec};

/// The arguments of `wavefuse mgpu-bench`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BenchArgs {
    /// TP sizes, one GPU per rank (default: 2 and 4, as far as the visible GPUs allow; an
    /// explicit TP above the GPU count is refused); with `--same-device`, default 2 and 4.
    #[arg(long = "tp", value_delimiter = ',', value_parser = wavefuse_harness::shapes::parse_tp)]
    pub tps: Vec<u32>,
    /// Every rank on GPU 0, a stream each (the placement `wavefuse ab` and the suite use), with
    /// the schedules lowered for it: the same graph timing, on one GPU.
    #[arg(long)]
    pub same_device: bool,
    /// Timed graphs per row (each after two untimed ones).
    #[arg(long, default_value_t = 10)]
    pub samples: u32,
    /// Calls captured per graph.
    #[arg(long, default_value_t = 100)]
    pub calls: u32,
    /// Workload seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The commit the binary was built from (default: `$WAVEFUSE_COMMIT`, else `unknown`).
    #[arg(long, env = "WAVEFUSE_COMMIT")]
    pub commit: Option<String>,
    /// Write the JSON results here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Write the Markdown table here.
    #[arg(long)]
    pub md: Option<std::path::PathBuf>,
    /// Compile every source of the benchmark for sm_90 into the cache (`$WAVEFUSE_CACHE_DIR`)
    /// instead of running: no GPU needed.
    #[arg(long)]
    pub prebuild: bool,
    /// Time kernels of your own (textual IR) instead of the built-in cases, at their own shapes
    /// and TP: repeat the flag for a chain launched in order per call, where an input named like
    /// an output of the kernel before reads that output. TP defaults to the kernels'.
    #[arg(long = "kernel-file", conflicts_with = "prebuild")]
    pub kernel_files: Vec<std::path::PathBuf>,
    /// The GPU runtime: `auto` (CUDA when an NVIDIA GPU is there, else HIP), `cuda` or `hip`.
    #[arg(long, value_enum, default_value_t = GpuRuntime::Auto)]
    pub runtime: GpuRuntime,
}

/// `wavefuse mgpu-bench`: the report printed as Markdown, then the files; exit 1 when a row
/// failed, 2 when nothing could run.
pub fn run(a: &BenchArgs, policy: SchedulePolicy) -> ExitCode {
    if let Some(path) = suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    if a.prebuild {
        return prebuild(&policy);
    }
    if a.samples == 0 || a.calls == 0 {
        eprintln!("error: --samples and --calls must be at least 1");
        return ExitCode::from(2);
    }
    let visible = match suite::gpu_count(a.runtime) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let own = match a
        .kernel_files
        .iter()
        .map(|p| suite::UserKernel::read(p))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let tps = match (a.tps.is_empty(), a.same_device, own.first()) {
        (true, _, Some(k)) => vec![k.ir.tp()],
        (true, true, None) => vec![2, 4],
        (true, false, None) => suite::per_device_tps(visible),
        (false, _, _) => a.tps.clone(),
    };
    if let Some(k) = own.iter().find(|k| tps.iter().any(|&t| t != k.ir.tp())) {
        eprintln!(
            "error: {} is written for TP {}; --tp cannot change a kernel file's TP",
            k.origin,
            k.ir.tp()
        );
        return ExitCode::from(2);
    }
    if !a.same_device
        && let Some(e) = tps
            .iter()
            .find_map(|&t| per_device_ordinals(t, visible).err())
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if visible == 0 || tps.is_empty() {
        eprintln!(
            "error: mgpu-bench needs at least 2 GPUs ({visible} visible), or one with --same-device"
        );
        return ExitCode::from(2);
    }
    let o = BenchOptions {
        tps,
        same_device: a.same_device,
        samples: a.samples,
        calls: a.calls,
        seed: a.seed.unwrap_or(Workload::DEFAULT_SEED),
        commit: a.commit.clone().unwrap_or_else(|| "unknown".into()),
        policy,
        own,
        runtime: a.runtime,
    };
    let report = match run_bench(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let md = report.markdown();
    print!("{md}");
    let json = serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises");
    for (p, text) in [(&a.json, json), (&a.md, md)] {
        if let Some(p) = p {
            if let Err(e) = atomic_write(p, text.as_bytes()) {
                eprintln!("error: writing {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
            eprintln!("wrote {}", p.display());
        }
    }
    if report.all_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn prebuild(policy: &SchedulePolicy) -> ExitCode {
    let cache = Cache::from_env();
    let arch = Arch::Sm90;
    let compiler = suite::compiler(arch, Purpose::Run);
    let mut failed = 0;
    let mut seen = std::collections::HashSet::new();
    for s in sources(arch, policy) {
        let b = match s {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{e}");
                failed += 1;
                continue;
            }
        };
        if !seen.insert(b.source.text.clone()) {
            continue;
        }
        match exec::artifact_for(&cache, compiler.as_ref(), &suite::request(&b)) {
            Ok((_, how)) => eprintln!(
                "{:<32} tp {} {}",
                b.lowered.name,
                b.lowered.tp,
                suite::artifact_name(&how)
            ),
            Err(e) => {
                failed += 1;
                eprintln!("{}: {e}", b.lowered.name);
            }
        }
    }
    eprintln!("mgpu-bench: {} sources, {failed} failed", seen.len());
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
