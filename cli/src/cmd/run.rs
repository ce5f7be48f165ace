//! `wavefuse run KERNEL`: one kernel of the set on the default workload, on a GPU, in the CPU
//! simulator, or as the f64 reference alone; compared with the f64 reference per output and rank.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wavefuse::ir::reference::RankOutputs;
use wavefuse::ir::{Kernel, Sharding};
use wavefuse_codegen::Arch;
use wavefuse_codegen::sim::{Case, Granularity, SimError, SimOptions, simulate_case};
use wavefuse_runtime::exec::{self, OutputMetrics};
use wavefuse_runtime::{Cache, Device, DeviceError, Error as RtError, HipDevice, RankGroup};

use wavefuse::ir::{GroupSize, ZeroPoint};
use wavefuse_harness::checkpoint::{self, QuantOverrides};
use wavefuse_harness::policy::{Placement, SchedulePolicy, communicates, needs_gpus};
use wavefuse_harness::shapes::{MAX_BATCH, parse_tp};
use wavefuse_harness::suite::{
    self, CaseSpec, Data, Generated, PrepError, ShapeKind, artifact_name, tolerance,
};
use wavefuse_harness::{KernelId, Workload};

/// Where `wavefuse run` executes the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceKind {
    /// The GPU present (CUDA → sm_90; HIP with `--target gfx906`).
    Gpu,
    /// Only the f64 reference: print its output statistics.
    CpuRef,
    /// The CPU protocol simulator on the lowered kernel.
    Sim,
}

/// The arguments of `wavefuse run`.
#[derive(Clone, Debug, clap::Args)]
pub struct RunArgs {
    /// Kernel name (see `wavefuse list`).
    #[arg(required_unless_present = "kernel_file")]
    pub kernel: Option<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`, see docs/ir-format.md) instead of the
    /// set's, run at the shapes it is written with (its TP, its batch).
    #[arg(long, conflicts_with_all = ["kernel", "tp", "batch", "small", "model_config", "weights"])]
    pub kernel_file: Option<PathBuf>,
    /// TP group size.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
    pub tp: u32,
    /// Where the ranks run, which the schedule is fitted for: `per-device` (one rank per GPU, as
    /// TP is deployed and as `wavefuse emit` prints it) or `same-device` (every rank on one GPU).
    /// Default: per-device in the simulator (it models one device per rank) and on a GPU per
    /// rank; on one GPU, same-device — and a kernel whose ranks do not fit on it together runs
    /// one rank at a time where it does not communicate, or is reported as needing a GPU per
    /// rank (exit 2).
    #[arg(long, value_enum)]
    pub placement: Option<Placement>,
    /// Tokens decoded at once (1–64); a batch whose kernel the lowering cannot take on the target
    /// is refused with the reason.
    #[arg(long, default_value_t = 1, value_parser = parse_batch)]
    pub batch: usize,
    /// gpu: the GPU present; cpu-ref: the f64 reference only; sim: the CPU protocol simulator.
    #[arg(long, value_enum, default_value_t = DeviceKind::Gpu)]
    pub device: DeviceKind,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
    pub seed: u64,
    /// Target arch: for gpu, gfx906 selects the HIP device (default: the GPU's own arch); for
    /// sim, the lowering simulated (default sm90).
    #[arg(long)]
    pub target: Option<Arch>,
    /// The simulator's small shapes (hidden 128, …) instead of the DESIGN.md §1 shapes: fast
    /// under the simulator and compute-sanitizer.
    #[arg(long, conflicts_with = "weights")]
    pub small: bool,
    /// The kernel at this model's dimensions (a Hugging Face `config.json`: hidden, intermediate,
    /// heads, KV heads, head dim, RMSNorm epsilon) instead of Qwen 3.5 27B's.
    #[arg(long, conflicts_with_all = ["small", "weights"])]
    pub model_config: Option<PathBuf>,
    /// Real GPTQ weights (gemv_int4 only): a .safetensors file, a sharded
    /// model.safetensors.index.json, or a directory. Quantisation settings come from
    /// quantize_config.json / config.json beside it, or from the flags below.
    #[arg(long, requires_all = ["layer", "input"], conflicts_with = "batch")]
    pub weights: Option<PathBuf>,
    /// The layer's tensor prefix (`{layer}.qweight`, `.scales`, `.qzeros`, `.g_idx`).
    #[arg(long, requires = "weights")]
    pub layer: Option<String>,
    /// Activations, .npy of f16 or f32, shape `[K]` or `[B, K]` (B = batch).
    #[arg(long, requires = "weights")]
    pub input: Option<PathBuf>,
    /// Where to write the output, .npy f16 `[N]` or `[B, N]`.
    #[arg(long, requires = "weights")]
    pub output: Option<PathBuf>,
    /// Zero-point convention, overriding the checkpoint's config: gptq (v1, stored z − 1),
    /// gptq_v2 (stored z) or sym (z = 8). Never guessed.
    #[arg(long, requires = "weights", value_parser = checkpoint::parse_checkpoint_format)]
    pub checkpoint_format: Option<ZeroPoint>,
    /// Group size overriding the config: 32, 64, 128, or -1 (per-channel).
    #[arg(long, requires = "weights", allow_negative_numbers = true, value_parser = checkpoint::parse_group_size)]
    pub group_size: Option<GroupSize>,
    /// Bits per weight overriding the config (only 4 is supported).
    #[arg(long, requires = "weights")]
    pub bits: Option<u32>,
    /// Act-order (desc_act) overriding the config.
    #[arg(long, requires = "weights")]
    pub act_order: Option<bool>,
}

fn parse_batch(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(b) if (1..=MAX_BATCH).contains(&b) => Ok(b),
        _ => Err(format!("`{s}` is not a batch size; use 1 to {MAX_BATCH}")),
    }
}

/// Exit code when the requested device does not exist.
const NO_DEVICE: u8 = 2;

/// `wavefuse run`.
pub fn run(a: &RunArgs, policy: &SchedulePolicy) -> ExitCode {
    if a.weights.is_some() {
        return checkpoint_run(a, policy);
    }
    let spec = match (&a.kernel_file, a.kernel) {
        (Some(path), _) => match suite::UserKernel::read(path) {
            Ok(u) => std::sync::Arc::new(u).case(),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        (None, Some(id)) => match set_case(a, id) {
            Ok(c) => c,
            Err(code) => return code,
        },
        (None, None) => {
            eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
            return ExitCode::from(2);
        }
    };
    match a.device {
        DeviceKind::CpuRef => cpu_ref(&spec, a.seed),
        DeviceKind::Sim => {
            let placement = a.placement.unwrap_or(Placement::PerDevice);
            sim(
                &spec,
                a.seed,
                a.target.unwrap_or(Arch::Sm90),
                policy,
                placement,
            )
        }
        DeviceKind::Gpu => gpu(&spec, a.seed, a.target, policy, a.placement),
    }
}

/// The set's kernel `id` at the flags' TP, batch and shapes.
fn set_case(a: &RunArgs, id: KernelId) -> Result<CaseSpec, ExitCode> {
    let shape = if a.small {
        ShapeKind::Small
    } else {
        match wavefuse_harness::ab::model_shapes(a.model_config.as_deref(), &[a.tp]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return Err(ExitCode::from(2));
            }
        }
    };
    Ok(CaseSpec::of(id, a.tp, a.batch, shape))
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn describe(spec: &CaseSpec, seed: u64, ir: &Kernel) {
    println!(
        "wavefuse run {}: tp={}, batch={}, {} shapes, seed {seed:#x}",
        spec.kernel.name(),
        spec.tp,
        spec.batch,
        spec.shape.name()
    );
    for (_, d) in ir.buffers() {
        println!(
            "  {:<6} {:<14} {} (per rank)",
            role(d.role),
            d.name,
            d.local_type()
        );
    }
}

fn role(r: wavefuse::ir::Role) -> &'static str {
    match r {
        wavefuse::ir::Role::Input => "in",
        wavefuse::ir::Role::Output => "out",
    }
}

// --- cpu-ref ---------------------------------------------------------------------------------

fn cpu_ref(spec: &CaseSpec, seed: u64) -> ExitCode {
    let ir = match suite::op_kernel(spec) {
        Ok(Some(k)) => k,
        Ok(None) => return fail("shape does not apply"),
        Err(e) => return fail(e),
    };
    describe(spec, seed, &ir);
    let start = Instant::now();
    let data = match Data::new(&ir, seed) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    println!(
        "inputs and the f64 reference on the CPU: {:.1} ms\n",
        start.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "{:<14} {:>4} {:>9} {:>11} {:>11} {:>11} {:>10}  ranks",
        "output", "rank", "elements", "rms", "max |y|", "mean", "non-finite"
    );
    let mut bad = 0;
    for b in ir.outputs() {
        let d = ir.buffer(b).expect("own buffer");
        for (r, outs) in data.reference.iter().enumerate() {
            let y = &outs[&b].data;
            let n = y.len().max(1) as f64;
            let rms = (y.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
            let max = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let mean = y.iter().sum::<f64>() / n;
            let non_finite = y.iter().filter(|v| !v.is_finite()).count();
            let agree = agree_with_rank0(&data.reference, b, r, d.sharding);
            bad += usize::from(non_finite > 0 || !agree);
            println!(
                "{:<14} {r:>4} {:>9} {rms:>11.4e} {max:>11.4e} {mean:>11.3e} {non_finite:>10}  {}",
                d.name,
                y.len(),
                if d.sharding != Sharding::Replicated {
                    "sharded"
                } else if agree {
                    "replicated, agree"
                } else {
                    "replicated, DIFFER"
                }
            );
        }
    }
    if bad > 0 {
        return fail(format!(
            "{bad} reference output(s) non-finite or inconsistent across ranks"
        ));
    }
    ExitCode::SUCCESS
}

fn agree_with_rank0(outs: &[RankOutputs], b: wavefuse::ir::Buffer, r: usize, s: Sharding) -> bool {
    s != Sharding::Replicated || r == 0 || outs[r][&b].data == outs[0][&b].data
}

// --- the metrics table -------------------------------------------------------------------------

/// Prints one row per output and rank; returns whether all pass at `tol`.
pub fn print_metrics(ms: &[OutputMetrics], tol: f64) -> bool {
    println!(
        "{:<14} {:>4} {:>9} {:>10} {:>10} {:>12} {:>10} {:>7} {:>6}  verdict",
        "output", "rank", "elements", "rel L2", "max abs", "cosine", "non-finite", "≠rank0", "tol"
    );
    for m in ms {
        println!(
            "{:<14} {:>4} {:>9} {:>10.3e} {:>10.3e} {:>12.9} {:>10} {:>7} {tol:>6.0e}  {}",
            m.output,
            m.rank,
            m.elements,
            m.rel_l2,
            m.max_abs,
            m.cosine,
            m.non_finite,
            m.differs_from_rank0,
            if m.passes(tol) { "ok" } else { "FAIL" }
        );
    }
    !ms.is_empty() && ms.iter().all(|m| m.passes(tol))
}

/// Prints the table and the verdict; `extra` is a failure found besides the metrics.
fn verdict(spec: &CaseSpec, ms: &[OutputMetrics], extra: Option<String>) -> ExitCode {
    let (tol, why) = spec.kernel.tolerance();
    let ok = print_metrics(ms, tol);
    let failing = ms.iter().filter(|m| !m.passes(tol)).count();
    if let Some(extra) = extra {
        println!("\nFAIL: {extra}");
        ExitCode::FAILURE
    } else if ok {
        println!(
            "\nPASS: all {} outputs (per rank) within relative L2 {tol:.0e} ({why})",
            ms.len()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "\nFAIL: {failing} of {} outputs (per rank) outside relative L2 {tol:.0e}, non-finite, or \
             differing across ranks",
            ms.len()
        );
        ExitCode::FAILURE
    }
}

// --- sim -------------------------------------------------------------------------------------

fn sim(
    spec: &CaseSpec,
    seed: u64,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
) -> ExitCode {
    let g = match suite::generate(spec, arch, policy, placement) {
        Ok(g) => g,
        Err(e) => return fail(e),
    };
    describe(spec, seed, &g.ir);
    let k = &g.lowered;
    let lanes = u64::from(k.grid) * u64::from(k.workgroup_size) * u64::from(k.tp);
    let mut opts = SimOptions::new(seed);
    if spec.shape != ShapeKind::Small {
        let hint = if spec.shape == ShapeKind::Own {
            "" // a user's kernel has only its own shapes
        } else {
            " `--small` runs the simulator's small shapes."
        };
        eprintln!(
            "warning: simulating the full shapes: {lanes} lanes ({} workgroups x {} lanes x {} \
             ranks), one launch, wave granularity, no step limit: seconds to minutes.{hint}",
            k.grid, k.workgroup_size, k.tp
        );
        opts.granularity = Granularity::Wave;
        opts.max_steps = u64::MAX;
    }
    println!(
        "simulating {}@{arch}: {} workgroups x {} lanes per rank, seed {seed:#x}",
        k.name, k.grid, k.workgroup_size
    );
    let data = match Data::new(&g.ir, seed) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let case = Case {
        inputs: vec![data.inputs],
        reference: vec![data.reference],
    };
    let report = match with_heartbeat(|| simulate_case(k, &g.ir, &case, &opts)) {
        Ok(r) => r,
        Err(e @ SimError::TooLarge(_)) => return not_checked(&e),
        Err(e) => return fail(format!("simulator: {e}")),
    };
    println!(
        "{} scheduling steps, {} lane instructions{}\n",
        report.stats.steps,
        report.stats.instructions,
        if report.stats.aborted {
            ", ABORTED"
        } else {
            ""
        }
    );
    for f in &report.findings {
        println!("finding: {f}");
    }
    if let (Some(limit), true) = (report.limit(&opts), report.findings.is_empty()) {
        return not_checked(&SimError::TooLarge(limit));
    }
    let outputs = report.outputs.first().cloned().unwrap_or_default();
    if outputs.iter().all(|o| o.is_empty()) {
        return fail("the simulated launch did not complete");
    }
    let ms = exec::compare(&g.ir, &outputs, &case.reference[0]);
    let findings = (!report.findings.is_empty())
        .then(|| format!("{} simulator finding(s) (above)", report.findings.len()));
    verdict(spec, &ms, findings)
}

/// A run the simulator could not hold within its budgets: not checked (exit 2), no verdict on
/// the kernel.
fn not_checked(e: &SimError) -> ExitCode {
    println!("\nnot checked: {e}");
    ExitCode::from(NO_DEVICE)
}

/// Runs `f` on a helper thread, printing the elapsed time every 10 s while it runs.
fn with_heartbeat<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let start = Instant::now();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || tx.send(f()));
        loop {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(v) => return v,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    eprintln!("  ... simulating, {:.0} s", start.elapsed().as_secs_f64())
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the simulator thread panicked")
                }
            }
        }
    })
}

// --- gpu -------------------------------------------------------------------------------------

fn gpu(
    spec: &CaseSpec,
    seed: u64,
    target: Option<Arch>,
    policy: &SchedulePolicy,
    placement: Option<Placement>,
) -> ExitCode {
    if target == Some(Arch::Gfx906) {
        return match HipDevice::new(0) {
            Ok(dev) => on_device(dev, spec, seed, policy, placement),
            Err(e @ (DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. })) => {
                eprintln!("error: {e}; run with --device cpu-ref or --device sim");
                ExitCode::from(NO_DEVICE)
            }
            Err(e) => fail(e),
        };
    }
    if let Some(path) = suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    match suite::open_cuda() {
        Ok(dev) => on_device(dev, spec, seed, policy, placement),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(NO_DEVICE)
        }
    }
}

fn on_device<D: Device>(
    dev: D,
    spec: &CaseSpec,
    seed: u64,
    policy: &SchedulePolicy,
    placement: Option<Placement>,
) -> ExitCode {
    let info = dev.info().clone();
    let Some(arch) = info.arch else {
        return fail(format!(
            "{} is not a wavefuse target (gfx906 or sm_90)",
            info.name
        ));
    };
    let gpus = D::count().unwrap_or(1);
    let ir = match suite::op_kernel(spec) {
        Ok(Some(ir)) => ir,
        Ok(None) => return fail("shape does not apply"),
        Err(e) => return fail(e),
    };
    // Every rank at once on this GPU unless asked otherwise, or one rank per GPU where there is
    // a GPU per rank.
    let placement = placement.unwrap_or(if gpus >= spec.tp as usize {
        Placement::PerDevice
    } else {
        Placement::SameDevice
    });
    let progress = std::io::stderr().is_terminal();
    if progress {
        eprint!("preparing inputs and the f64 reference ...");
    }
    let mut prepared = suite::prepare(spec, arch, policy, placement, seed, false);
    // The ranks do not fit on this GPU together: one rank at a time where the kernel does not
    // communicate (fitted for one rank per GPU, as TP deploys it).
    let alone = matches!(prepared, Err(PrepError::NotCoResident(_)))
        && placement == Placement::SameDevice
        && spec.tp > 1
        && !communicates(&ir);
    if alone {
        prepared = suite::prepare(spec, arch, policy, Placement::PerDevice, seed, false);
    }
    if progress {
        eprint!("\r{:<60}\r", "");
    }
    let p = match prepared {
        Ok(p) => p,
        Err(e @ PrepError::Unsupported(_)) => {
            return fail(format!(
                "{} cannot be generated for {arch} yet: {e}",
                spec.kernel
            ));
        }
        Err(PrepError::NotCoResident(why)) if spec.tp > 1 => {
            eprintln!("{}", needs_gpus(spec.tp, gpus, &why));
            return ExitCode::from(NO_DEVICE);
        }
        Err(e) => return fail(e),
    };
    let spread =
        p.g.placement == Placement::PerDevice && communicates(&p.g.ir) && gpus >= spec.tp as usize;
    let alone = p.g.placement == Placement::PerDevice && spec.tp > 1 && !communicates(&p.g.ir);
    describe(spec, seed, &p.g.ir);
    header(&p.g, &info.name, info.compute_units, spread, alone);
    let cache = Cache::from_env();
    let executed = if spread {
        RankGroup::<D>::per_device(spec.tp).and_then(|group| {
            suite::execute_on(
                &group,
                &p,
                &cache,
                0,
                wavefuse_harness::ab::LaunchMode::Stream,
            )
        })
    } else if alone {
        suite::execute_alone(dev, &p, &cache)
    } else {
        suite::execute(dev, &p, &cache, 0)
    };
    super::print_cache_warnings(&cache);
    match executed {
        Ok(x) => {
            println!(
                "compiled by {} ({}); launch at epoch 1: {:.3} ms wall, including the wait\n",
                x.compiler,
                artifact_name(&x.artifact),
                x.run_ms
            );
            verdict(spec, &x.metrics, None)
        }
        Err(e @ RtError::BarrierTimeout { .. }) => fail(format!(
            "{e}: a bounded wait ran out (DESIGN.md §5.10); under compute-sanitizer, launches of \
             different ranks may be serialised, so cross-rank flags cannot be met"
        )),
        Err(e @ RtError::NotCoResident { .. }) if spec.tp > 1 && !alone => {
            eprintln!("{}", needs_gpus(spec.tp, gpus, &e.to_string()));
            ExitCode::from(NO_DEVICE)
        }
        Err(e) => fail(e),
    }
}

fn header(g: &Generated, device: &str, sms: u32, spread: bool, alone: bool) {
    let k = &g.lowered;
    let sync = match (k.coresidency.is_some(), k.flag_rounds_per_launch > 0) {
        (true, true) => "grid barrier and cross-rank flags",
        (true, false) => "grid barrier",
        (false, true) => "cross-rank flags",
        (false, false) => "no cross-workgroup synchronisation",
    };
    let ranks = match (spread, alone) {
        (true, _) => format!("{} ranks, one per GPU from GPU 0", k.tp),
        (false, true) => format!("{} ranks on it, one at a time", k.tp),
        (false, false) => format!("all {} ranks on it, one stream each", k.tp),
    };
    println!(
        "device: {device} ({sms} SMs), {ranks}; per rank {} workgroups x {} lanes; {sync}",
        k.grid, k.workgroup_size
    );
}

// --- real weights ----------------------------------------------------------------------------

/// `wavefuse run gemv_int4 --weights FILE --layer NAME --input X.npy [--output Y.npy]`: the layer
/// from a GPTQ checkpoint, the activations from a .npy, the f64 reference always, and the GPU or
/// the simulator when asked; the result (the device's, else the reference's) written as .npy.
fn checkpoint_run(a: &RunArgs, policy: &SchedulePolicy) -> ExitCode {
    if a.kernel != Some(KernelId::GemvInt4) {
        return fail(format!(
            "--weights binds one GPTQ layer and works with gemv_int4 only, not {}",
            a.kernel.map_or("a kernel file", KernelId::name)
        ));
    }
    let (Some(weights), Some(layer), Some(input)) = (&a.weights, &a.layer, &a.input) else {
        return fail("--weights needs --layer and --input");
    };
    // Before any work: the output must be writable and must not be (or link to) an input.
    if let Some(out) = &a.output {
        let mut inputs: Vec<&Path> = vec![input, weights];
        let beside = checkpoint_files(weights);
        inputs.extend(beside.iter().map(PathBuf::as_path));
        if let Err(e) = wavefuse_harness::outputs::check_output(out, &inputs, Some("npy")) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let over = QuantOverrides {
        bits: a.bits,
        group_size: a.group_size,
        zero: a.checkpoint_format,
        act_order: a.act_order,
    };
    let case = match checkpoint::prepare_gemv(a.tp, weights, layer, input, &over) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let info = &case.layer;
    println!(
        "wavefuse run gemv_int4 on `{}` of {}: K={} N={} {:?}, tp={}",
        info.layer,
        weights.display(),
        info.k,
        info.n,
        info.layout,
        a.tp
    );
    for note in &info.notes {
        println!("note: {note}");
    }
    let reference = match wavefuse::ir::reference::evaluate(&case.kernel, &case.inputs) {
        Ok(r) => r,
        Err(e) => return fail(format!("reference: {e}")),
    };
    // A reference that overflows FP16 is the input's fault, whatever the device: said before
    // any device runs, so a simulator or GPU is never blamed for it.
    if let Err(e) = reference_finite(&case, &reference) {
        return fail(e);
    }
    let (outputs, verdict_code) = match a.device {
        DeviceKind::CpuRef => (reference.clone(), ExitCode::SUCCESS),
        DeviceKind::Sim | DeviceKind::Gpu => {
            match device_outputs(a, policy, &case.kernel, &case.inputs) {
                Ok(outs) => {
                    let ms = exec::compare(&case.kernel, &outs, &reference);
                    let (tol, _) = tolerance(KernelId::GemvInt4);
                    let ok = print_metrics(&ms, tol);
                    (
                        outs,
                        if ok {
                            ExitCode::SUCCESS
                        } else {
                            ExitCode::FAILURE
                        },
                    )
                }
                Err(code) => return code,
            }
        }
    };
    let y = match case.gather(&outputs) {
        Ok(y) => y,
        Err(e) => return fail(e),
    };
    if let Err(e) = finite(&case, &reference, &y, a.device) {
        return fail(e);
    }
    let rms = (y.data.iter().map(|v| v * v).sum::<f64>() / y.data.len().max(1) as f64).sqrt();
    println!("output {:?}: rms {rms:.4e}", y.shape);
    if let Some(path) = &a.output {
        if let Err(e) = checkpoint::write_output_npy(path, &y) {
            return fail(e);
        }
        println!("wrote {}", path.display());
    }
    verdict_code
}

/// The files of the checkpoint `weights` names (the file, or the `.safetensors` and `.json`
/// files of its directory: what a checkpoint is read from), so an output cannot replace one of
/// them through a link. A previous `--output` (a `.npy`) beside the checkpoint is not one: a
/// re-run replaces it (it used to be refused as an input).
fn checkpoint_files(weights: &Path) -> Vec<PathBuf> {
    let dir = if weights.is_dir() {
        Some(weights)
    } else {
        weights.parent()
    };
    let Some(dir) = dir.filter(|d| !d.as_os_str().is_empty()) else {
        return Vec::new();
    };
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .filter(|p| {
                    p.extension()
                        .is_some_and(|e| e == "safetensors" || e == "json")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The f64 reference's outputs are finite in FP16; else the error says the layer overflows for
/// this input (no device is run, no output written).
fn reference_finite(case: &checkpoint::GemvCase, reference: &[RankOutputs]) -> Result<(), String> {
    let want = case.gather(reference).map_err(|e| e.to_string())?;
    let bad = want.data.iter().filter(|v| !v.is_finite()).count();
    if bad == 0 {
        return Ok(());
    }
    Err(format!(
        "{bad} of {} outputs of the f64 reference are not finite: the layer overflows FP16 (|y| > 65504) for this input (check the scales and the activations); no device run, no output written",
        want.data.len()
    ))
}

/// Non-finite outputs are an error (nothing is written) that says where they came from: the
/// f64 reference itself overflowing FP16 (the checkpoint's scales times the activations), or the
/// device's output alone (a kernel mismatch).
fn finite(
    case: &checkpoint::GemvCase,
    reference: &[RankOutputs],
    y: &wavefuse::ir::reference::HostTensor,
    device: DeviceKind,
) -> Result<(), String> {
    let bad = y.data.iter().filter(|v| !v.is_finite()).count();
    if bad == 0 {
        return Ok(());
    }
    let want = case.gather(reference).map_err(|e| e.to_string())?;
    let ref_bad = want.data.iter().filter(|v| !v.is_finite()).count();
    let n = y.data.len();
    if ref_bad > 0 {
        Err(format!(
            "{ref_bad} of {n} outputs of the f64 reference are not finite: the layer overflows FP16 (|y| > 65504) for this input (check the scales and the activations); no output written"
        ))
    } else {
        Err(format!(
            "{bad} of {n} outputs of the {} are not finite where the f64 reference is finite: a kernel mismatch; no output written",
            match device {
                DeviceKind::Sim => "simulator",
                _ => "device",
            }
        ))
    }
}

/// The checkpoint kernel's outputs from the simulator or the GPU.
fn device_outputs(
    a: &RunArgs,
    policy: &SchedulePolicy,
    ir: &Kernel,
    inputs: &[wavefuse::ir::reference::RankInputs],
) -> Result<Vec<RankOutputs>, ExitCode> {
    let arch = match (a.device, a.target) {
        (_, Some(t)) => t,
        _ => Arch::Sm90,
    };
    let generated = policy
        .resolve_kernel(ir, arch, Placement::SameDevice, None)
        .map_err(|e| fail(format!("{e}")))?
        .code;
    let (lowered, source, abi) = (&generated.lowered, &generated.source, &generated.abi);
    if a.device == DeviceKind::Sim {
        let reference = wavefuse::ir::reference::evaluate(ir, inputs)
            .map_err(|e| fail(format!("reference: {e}")))?;
        let case = Case {
            inputs: vec![inputs.to_vec()],
            reference: vec![reference],
        };
        let mut opts = SimOptions::new(a.seed);
        opts.granularity = Granularity::Wave;
        opts.max_steps = u64::MAX;
        let report = with_heartbeat(|| simulate_case(lowered, ir, &case, &opts))
            .map_err(|e| fail(format!("simulator: {e}")))?;
        for f in &report.findings {
            println!("finding: {f}");
        }
        if !report.findings.is_empty() {
            return Err(fail(format!(
                "{} simulator finding(s)",
                report.findings.len()
            )));
        }
        return report
            .outputs
            .into_iter()
            .next()
            .ok_or_else(|| fail("no simulated launch"));
    }
    // The device of the target compiled for: HIP for gfx906, as the synthetic path does.
    if lowered.arch == Arch::Gfx906 {
        let dev = HipDevice::new(0).map_err(|e| match e {
            DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. } => {
                eprintln!("error: {e}; run with --device cpu-ref or --device sim");
                ExitCode::from(NO_DEVICE)
            }
            e => fail(e),
        })?;
        return checkpoint_on(dev, ir, lowered, abi, source, inputs);
    }
    if let Some(path) = suite::locate_nvrtc() {
        eprintln!("note: using NVRTC at {}", path.display());
    }
    let dev = suite::open_cuda().map_err(|m| {
        eprintln!("error: {m}");
        ExitCode::from(NO_DEVICE)
    })?;
    checkpoint_on(dev, ir, lowered, abi, source, inputs)
}

/// Compile, bind and run the checkpoint kernel on `dev`.
fn checkpoint_on<D: Device>(
    dev: D,
    ir: &Kernel,
    lowered: &wavefuse_codegen::lowered::LoweredKernel,
    abi: &wavefuse_codegen::abi::Abi,
    source: &wavefuse_codegen::cpp::Source,
    inputs: &[wavefuse::ir::reference::RankInputs],
) -> Result<Vec<RankOutputs>, ExitCode> {
    let cache = Cache::from_env();
    let compiler = suite::compiler(lowered.arch, suite::Purpose::Run);
    let req = suite::request_named(&lowered.name, source);
    let run = || -> Result<Vec<RankOutputs>, RtError> {
        let (artifact, _) = exec::artifact_for(&cache, compiler.as_ref(), &req)?;
        let group = wavefuse_runtime::RankGroup::on_one_device(
            dev,
            lowered.tp,
            wavefuse_runtime::SameDeviceMode::FusedGrid,
        )?;
        let mut k = exec::OpKernel::new(&group, ir, abi, &artifact)?;
        k.run(inputs)
    };
    let result = run();
    super::print_cache_warnings(&cache);
    result.map_err(fail)
}
