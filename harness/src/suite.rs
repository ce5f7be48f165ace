//! The GPU suite (DESIGN.md §7, issue 5): every kernel of the set at TP = 1, 2, 4, 8 with all ranks
//! on one device, at the §1 shapes and odd shapes, against the f64 reference on fresh random inputs
//! with outputs poisoned first; 10,000 back-to-back launches of every synchronising kernel; a JSON
//! results file and a Markdown table. Also execution on a device, which `wavefuse run` shares.
//! Cases and the tolerance table are [`crate::case`]'s, the generation step
//! [`crate::pipeline`]'s (re-exported here for the callers that name them through this module).
//!
//! With `--placement per-device` ([`SuitePlacement::PerDevice`]) rank r runs on GPU r instead: the
//! communicating kernels at TP 2 and 4 (TP ≤ visible GPUs, refused otherwise), cross-device flags
//! and peer buffers, with a deliberate launch skew between the GPUs ([`Skew`]) on every launch,
//! including the 10,000-launch stress run.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Value as Json, json};
use wavefuse_codegen::Arch;
use wavefuse_runtime::exec::{self, ArtifactSource, OpKernel, OutputMetrics};
use wavefuse_runtime::rank::{Skew, per_device_ordinals};
use wavefuse_runtime::{
    Cache, CudaDevice, Device, DeviceError, Error as RtError, HipDevice, RankGroup, SameDeviceMode,
};

pub use crate::case::{
    CaseKernel, CaseSpec, Data, PrepError, ShapeKind, TOLERANCES, UserKernel, cases, cases_at, mix,
    op_kernel, tolerance,
};
use crate::pipeline;
pub use crate::pipeline::{
    Generated, Prepared, Purpose, artifact, compiler, generate, prepare, request, request_named,
    synchronises,
};
use crate::policy::{Placement, SchedulePolicy};
use crate::provenance::Provenance;
use crate::shapes::TP_SIZES;
use crate::{KernelId, Workload};

// ---------------------------------------------------------------------------------------------
// Execution on a device
// ---------------------------------------------------------------------------------------------

/// Loads a CUDA toolkit's NVRTC when `$WAVEFUSE_NVRTC_LIB` is unset and NVRTC is not on the
/// loader's path ([`wavefuse_runtime::compile::load_nvrtc`]); the library it found. Call before
/// the first NVRTC use.
pub fn locate_nvrtc() -> Option<std::path::PathBuf> {
    let path = exec::artifacts::nvrtc_fallback()?;
    // A library that does not load is reported by every NVRTC use, where a missing compiler is.
    let _ = wavefuse_runtime::compile::load_nvrtc(&path);
    Some(path)
}

/// The NVIDIA GPU, or why there is none (the message says what to run instead).
pub fn open_cuda() -> Result<CudaDevice, GpuError> {
    CudaDevice::new(0).map_err(|e| match e {
        e if absent(&e) => GpuError::NoNvidia(e),
        e => GpuError::Open {
            vendor: "NVIDIA",
            source: e,
        },
    })
}

/// Why no GPU could be opened or counted.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// [`open_cuda`]: no NVIDIA GPU or driver.
    #[error("no NVIDIA GPU/driver found: {0}; run with --device cpu-ref or --device sim")]
    NoNvidia(DeviceError),
    /// No GPU or driver of the one runtime tried.
    #[error("no GPU found: {0}")]
    Absent(DeviceError),
    /// No GPU or driver of either runtime ([`GpuRuntime::Auto`]).
    #[error("no GPU found: {cuda}; {hip}")]
    AbsentBoth {
        /// What CUDA said.
        cuda: DeviceError,
        /// What HIP said.
        hip: DeviceError,
    },
    /// A GPU is there but could not be opened.
    #[error("opening the {vendor} GPU: {source}")]
    Open {
        /// `NVIDIA` or `AMD`.
        vendor: &'static str,
        /// Why.
        source: DeviceError,
    },
    /// The GPUs could not be counted.
    #[error("{0}")]
    Count(DeviceError),
}

/// Where a caller still words errors as text.
impl From<GpuError> for String {
    fn from(e: GpuError) -> String {
        e.to_string()
    }
}

/// Why `ab` or `tune` timed nothing on a GPU (their reports then say why, and run without one).
#[derive(Debug, thiserror::Error)]
pub enum NoGpuRun {
    /// No GPU could be opened.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// GPU 0 is not a wavefuse target.
    #[error("{0} is not a wavefuse target (gfx906 or sm_90)")]
    NotATarget(String),
    /// GPU 0 is a target, but not the one asked for.
    #[error("{0}")]
    WrongTarget(String),
    /// The devices or rank groups of the run could not be set up.
    #[error(transparent)]
    Runtime(#[from] RtError),
    /// A device call failed while setting up.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Whether `e` says there is no GPU or driver (rather than one that failed).
fn absent(e: &DeviceError) -> bool {
    matches!(
        e,
        DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. }
    )
}

/// What one back-to-back run found.
#[derive(Clone, Debug)]
pub struct Stress {
    /// Back-to-back launches completed (the burst; the launch on fresh data follows it).
    pub launches: u32,
    /// The epoch of the last launch.
    pub last_epoch: u32,
    /// Wall time of the burst.
    pub seconds: f64,
    /// Burst launches per second (all ranks of a launch count once).
    pub launches_per_s: f64,
    /// A timeout or launch failure, if any.
    pub error: Option<String>,
    /// The burst's last outputs against the reference of the unchanged inputs.
    pub burst: Vec<OutputMetrics>,
    /// The last launch (fresh inputs, outputs poisoned) against its reference.
    pub last: Vec<OutputMetrics>,
}

/// The outcome of running a prepared case on a device.
#[derive(Clone, Debug)]
pub struct Executed {
    /// Where the artifact came from.
    pub artifact: ArtifactSource,
    /// The compiler's version string.
    pub compiler: String,
    /// Per output and rank.
    pub metrics: Vec<OutputMetrics>,
    /// Wall time of the launch, including the wait.
    pub run_ms: f64,
    /// The stress run, when asked for and the kernel synchronises.
    pub stress: Option<Stress>,
}

/// Compile (through the cache), bind, upload, poison, launch, read back and compare; then, when
/// `stress_launches > 0` and the case has fresh data, the back-to-back run. All ranks on `device`.
pub fn execute<D: Device>(
    device: D,
    p: &Prepared,
    cache: &Cache,
    stress_launches: u32,
) -> Result<Executed, RtError> {
    let group = RankGroup::on_one_device(device, p.g.lowered.tp, SameDeviceMode::Streams)?;
    execute_on(
        &group,
        p,
        cache,
        stress_launches,
        crate::ab::report::LaunchMode::Stream,
    )
}

/// As [`execute`] without the stress run, the ranks launched one after another, each alone on
/// `device` (a kernel that does not communicate, fitted for one rank per device: how TP deploys
/// it where its ranks do not fit on one device together).
pub fn execute_alone<D: Device>(
    device: D,
    p: &Prepared,
    cache: &Cache,
) -> Result<Executed, RtError> {
    let group = RankGroup::on_one_device(device, p.g.lowered.tp, SameDeviceMode::Streams)?;
    let g = &p.g;
    let (artifact, source) = pipeline::artifact(cache, g)?;
    let mut k = OpKernel::new(&group, &g.ir, &g.abi, &artifact)?;
    let start = Instant::now();
    let outputs = k.run_each_alone(&p.data.inputs)?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(Executed {
        artifact: source,
        compiler: artifact.compiler_version.clone(),
        metrics: exec::compare(&g.ir, &outputs, &p.data.reference),
        run_ms,
        stress: None,
    })
}

/// As [`execute`], on a rank group built by the caller (one rank per device, skewed, …).
pub fn execute_on<D: Device>(
    group: &RankGroup<D>,
    p: &Prepared,
    cache: &Cache,
    stress_launches: u32,
    launch: crate::ab::report::LaunchMode,
) -> Result<Executed, RtError> {
    let g = &p.g;
    let (artifact, source) = pipeline::artifact(cache, g)?;
    let mut k = OpKernel::new(group, &g.ir, &g.abi, &artifact)?;
    if launch == crate::ab::report::LaunchMode::Dependent && g.abi.dependent_launch {
        k.instance().set_dependent_launch(true)?;
    }
    let start = Instant::now();
    let outputs = k.run(&p.data.inputs)?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    let metrics = exec::compare(&g.ir, &outputs, &p.data.reference);
    let stress = match &p.fresh {
        Some(fresh) if stress_launches > 0 => Some(stress(&mut k, g, p, fresh, stress_launches)),
        _ => None,
    };
    Ok(Executed {
        artifact: source,
        compiler: artifact.compiler_version.clone(),
        metrics,
        run_ms,
        stress,
    })
}

/// Launches `n` times back to back on unchanged inputs (checking the error words after chunks of
/// growing size, so a broken protocol costs a few timed-out launches, not thousands), compares
/// the last outputs (no drift), then uploads fresh inputs, poisons the outputs and launches once
/// more.
fn stress<D: Device>(
    k: &mut OpKernel<'_, D>,
    g: &Generated,
    p: &Prepared,
    fresh: &Data,
    n: u32,
) -> Stress {
    let mut s = Stress {
        launches: 0,
        last_epoch: 0,
        seconds: 0.0,
        launches_per_s: 0.0,
        error: None,
        burst: Vec::new(),
        last: Vec::new(),
    };
    let burst = n;
    let start = Instant::now();
    let mut done = 0u32;
    let mut chunk = 1u32;
    while done < burst {
        let todo = chunk.min(burst - done);
        let r = (0..todo).try_for_each(|_| k.instance().launch().map(drop));
        if let Err(e) = r.and_then(|()| k.instance().wait()) {
            s.error = Some(e.to_string());
            break;
        }
        done += todo;
        chunk = (chunk * 10).min(1000);
    }
    s.seconds = start.elapsed().as_secs_f64();
    s.launches = done;
    s.launches_per_s = f64::from(done) / s.seconds.max(1e-9);
    if s.error.is_some() {
        return s;
    }
    match k.read_outputs() {
        Ok(out) => s.burst = exec::compare(&g.ir, &out, &p.data.reference),
        Err(e) => s.error = Some(e.to_string()),
    }
    match k.run(&fresh.inputs) {
        Ok(out) => s.last = exec::compare(&g.ir, &out, &fresh.reference),
        Err(e) => s.error = Some(e.to_string()),
    }
    s.last_epoch = k.instance().last_epoch();
    s
}

/// The worst of a set of metrics: max relative L2 (NaN if any is NaN), max |error|, min cosine,
/// total non-finite, total cross-rank differences.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Worst {
    /// Largest relative L2 error.
    pub rel_l2: f64,
    /// Largest absolute error.
    pub max_abs: f64,
    /// Smallest cosine similarity.
    pub cosine: f64,
    /// Non-finite elements, summed.
    pub non_finite: usize,
    /// Elements of replicated outputs differing from rank 0, summed.
    pub rank_diffs: usize,
}

impl Worst {
    /// Over `ms`.
    pub fn of(ms: &[OutputMetrics]) -> Worst {
        let mut w = Worst {
            cosine: 1.0,
            ..Worst::default()
        };
        for m in ms {
            if m.rel_l2.is_nan() || m.rel_l2 > w.rel_l2 {
                w.rel_l2 = if w.rel_l2.is_nan() {
                    w.rel_l2
                } else {
                    m.rel_l2
                };
            }
            w.max_abs = w.max_abs.max(m.max_abs);
            if m.cosine.is_nan() || m.cosine < w.cosine {
                w.cosine = if w.cosine.is_nan() {
                    w.cosine
                } else {
                    m.cosine
                };
            }
            w.non_finite += m.non_finite;
            w.rank_diffs += m.differs_from_rank0;
        }
        w
    }

    /// Whether everything passes at tolerance `tol`.
    pub fn passes(&self, tol: f64) -> bool {
        self.non_finite == 0 && self.rank_diffs == 0 && self.rel_l2 <= tol
    }
}

// ---------------------------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------------------------

/// What to run.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Fewer shapes and 1,000 instead of 10,000 back-to-back launches.
    pub quick: bool,
    /// Kernels (default: all).
    pub kernels: Vec<KernelId>,
    /// TP sizes (default: 1, 2, 4, 8).
    pub tps: Vec<u32>,
    /// Base seed; case i uses `mix(seed, i)`.
    pub seed: u64,
    /// Back-to-back launches per synchronising kernel (model shapes, batch 1), followed by one
    /// launch on fresh inputs.
    pub stress_launches: u32,
    /// The commit the binary was built from.
    pub commit: String,
    /// Threads preparing data (inputs and reference) while the GPU runs.
    pub threads: usize,
    /// Cases not started by this many seconds into the run are reported as skipped, so the
    /// results file is written within a time budget even when launches time out.
    pub deadline_s: Option<f64>,
    /// Where the ranks run.
    pub placement: SuitePlacement,
    /// The launch skew between ranks (applied before every launch, stress runs included).
    pub skew: Skew,
    /// Where the cases' schedules come from.
    pub policy: SchedulePolicy,
    /// The model shapes: Qwen 3.5 27B's ([`ShapeKind::Model`], with the odd shapes) or a model's
    /// own ([`ShapeKind::Of`]: its shapes at batch 1, 3 and 8).
    pub shape: ShapeKind,
    /// Kernels of one's own (`--kernel-file`), each one case at its own shapes (stress-run like
    /// the set's at batch 1 when it synchronises): the only cases when given.
    pub own: Vec<Arc<UserKernel>>,
    /// The GPU runtime the suite drives.
    pub runtime: GpuRuntime,
    /// How kernels are launched: in stream order, or as programmatic dependents where their ABI
    /// allows it (the check and the back-to-back run alike).
    pub launch: crate::ab::report::LaunchMode,
}

/// Where the suite's ranks run.
pub use crate::policy::Placement as SuitePlacement;

/// The kernels of the set that communicate across ranks: the per-device suite's default.
pub const COMMUNICATING: [KernelId; 4] = [
    KernelId::AllreduceResidual,
    KernelId::AllreduceResidualRmsnorm,
    KernelId::GemvInt4AllreduceRmsnorm,
    KernelId::AllreduceInt8,
];

/// The per-device suite's TP sizes by default: 2 and 4, as far as `visible` GPUs allow.
pub fn per_device_tps(visible: usize) -> Vec<u32> {
    [2, 4]
        .into_iter()
        .filter(|&t| t as usize <= visible)
        .collect()
}

/// The default launch skew of a per-device run: 20 µs steps, alternating which GPU starts first.
pub fn default_per_device_skew() -> Skew {
    "20:alt".parse().expect("a valid skew")
}

impl SuiteOptions {
    /// The full suite (or the quick one) over every kernel and TP size.
    pub fn new(quick: bool) -> SuiteOptions {
        SuiteOptions {
            quick,
            kernels: KernelId::ALL.to_vec(),
            tps: TP_SIZES.to_vec(),
            seed: Workload::DEFAULT_SEED,
            stress_launches: if quick { 1_000 } else { 10_000 },
            commit: "unknown".into(),
            threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .saturating_sub(2)
                .clamp(1, 12),
            deadline_s: None,
            placement: SuitePlacement::SameDevice,
            skew: Skew::none(),
            launch: crate::ab::report::LaunchMode::Stream,
            policy: SchedulePolicy::default(),
            shape: ShapeKind::Model,
            own: Vec::new(),
            runtime: GpuRuntime::Auto,
        }
    }
}

/// A case's status.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Ran; every output of every rank within tolerance; the stress run (if any) clean.
    Pass,
    /// Ran and failed, or failed to generate, compile or launch.
    Fail,
    /// Refused at compile time or by the runtime before launch: all ranks' workgroups cannot be
    /// resident on one device at once (DESIGN.md §5.9) — a capacity limit of one-device TP, not
    /// a wrong result.
    Refused,
    /// The lowering or writer does not support the case yet.
    Unsupported,
    /// The shape does not apply to the kernel.
    NotApplicable,
    /// Not run: the time budget (`--deadline`) was spent.
    Skipped,
}

impl Status {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Refused => "refused",
            Status::Unsupported => "unsupported",
            Status::NotApplicable => "n/a",
            Status::Skipped => "skipped",
        }
    }
}

/// One case's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case.
    pub spec: CaseSpec,
    /// Per-rank shapes.
    pub dims: String,
    /// Workload seed.
    pub seed: u64,
    /// Status.
    pub status: Status,
    /// Why, when not a pass.
    pub detail: String,
    /// Relative-L2 tolerance.
    pub tolerance: f64,
    /// Per output and rank (empty when it did not run).
    pub metrics: Vec<OutputMetrics>,
    /// The stress run.
    pub stress: Option<Stress>,
    /// Where the artifact came from, and the compiler version.
    pub artifact: String,
    /// Launch wall time (ms).
    pub run_ms: f64,
}

/// The suite's results.
pub struct Report {
    /// Device and toolchain.
    pub header: Provenance,
    /// The options it ran with.
    pub options: SuiteOptions,
    /// Every case.
    pub cases: Vec<CaseResult>,
    /// Wall time.
    pub seconds: f64,
}

/// Why the suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// No GPU or driver: nothing ran.
    #[error("{0}")]
    NoGpu(String),
    /// The placement asks for more GPUs than are visible: nothing ran.
    #[error("{0}")]
    Placement(String),
}

/// Which GPU runtime a command drives.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuRuntime {
    /// CUDA when an NVIDIA GPU is there, else HIP.
    #[default]
    Auto,
    /// The CUDA driver API (NVIDIA).
    Cuda,
    /// The HIP runtime (AMD; or any libamdhip64 on the library path, such as the test double of
    /// `tests/hip-double`, which drives an NVIDIA GPU through the HIP entry points).
    Hip,
}

/// Work generic over the device type, run by [`with_gpu`] on the device it opens.
pub trait OnGpu {
    /// What the work returns.
    type Out;
    /// Runs on `dev`, GPU 0 of the chosen runtime.
    fn on<D: Device>(self, dev: D) -> Self::Out;
}

/// Opens GPU 0 of `runtime` (with [`GpuRuntime::Auto`]: CUDA, else HIP when no NVIDIA GPU or
/// driver is there) and runs `work` on it; `Err` says why no GPU could be opened.
pub fn with_gpu<W: OnGpu>(runtime: GpuRuntime, work: W) -> Result<W::Out, GpuError> {
    let hip = |work: W, cuda: Option<DeviceError>| match HipDevice::new(0) {
        Ok(dev) => Ok(work.on(dev)),
        Err(hip) if absent(&hip) => Err(match cuda {
            Some(cuda) => GpuError::AbsentBoth { cuda, hip },
            None => GpuError::Absent(hip),
        }),
        Err(e) => Err(GpuError::Open {
            vendor: "AMD",
            source: e,
        }),
    };
    match runtime {
        GpuRuntime::Hip => hip(work, None),
        GpuRuntime::Cuda | GpuRuntime::Auto => match CudaDevice::new(0) {
            Ok(dev) => Ok(work.on(dev)),
            Err(cuda) if runtime == GpuRuntime::Auto && absent(&cuda) => hip(work, Some(cuda)),
            Err(e) if absent(&e) => Err(GpuError::Absent(e)),
            Err(e) => Err(GpuError::Open {
                vendor: "NVIDIA",
                source: e,
            }),
        },
    }
}

/// The GPUs `runtime` sees (with [`GpuRuntime::Auto`]: NVIDIA's when there are any, else AMD's).
pub fn gpu_count(runtime: GpuRuntime) -> Result<usize, GpuError> {
    match runtime {
        GpuRuntime::Cuda => CudaDevice::count().map_err(GpuError::Count),
        GpuRuntime::Hip => HipDevice::count().map_err(GpuError::Count),
        GpuRuntime::Auto => match CudaDevice::count() {
            Ok(n) if n > 0 => Ok(n),
            _ => HipDevice::count().map_err(GpuError::Count),
        },
    }
}

/// Run the suite on GPU 0: an NVIDIA GPU through CUDA when there is one, else an AMD GPU
/// through HIP (gfx906: the kernels compiled by hipcc or hiprtc), or the runtime `o.runtime`
/// names. Cases are prepared (inputs, reference) on `threads` threads while the GPU runs earlier
/// ones.
pub fn run_suite(o: &SuiteOptions) -> Result<Report, SuiteError> {
    struct Suite<'a>(&'a SuiteOptions);
    impl OnGpu for Suite<'_> {
        type Out = Result<Report, SuiteError>;
        fn on<D: Device>(self, dev: D) -> Self::Out {
            run_suite_on(dev, self.0)
        }
    }
    with_gpu(o.runtime, Suite(o)).unwrap_or_else(|why| {
        Err(SuiteError::NoGpu(format!(
            "{why}; run with --device cpu-ref or --device sim"
        )))
    })
}

/// [`run_suite`] on `dev` (GPU 0) and, with [`SuitePlacement::PerDevice`], the GPUs after it
/// of the same kind.
fn run_suite_on<D: Device>(dev: D, o: &SuiteOptions) -> Result<Report, SuiteError> {
    let arch = dev.info().arch.ok_or_else(|| {
        SuiteError::NoGpu(format!(
            "{} is not a wavefuse target (gfx906 or sm_90)",
            dev.info().name
        ))
    })?;
    let mut header = Provenance::of_device(&dev, arch, &o.commit)
        .map_err(|e| SuiteError::NoGpu(e.to_string()))?;
    // Kept open to the end: they hold the GPUs' primary contexts, which every case's devices then
    // share instead of creating and destroying one per case.
    let mut _primary = vec![dev];
    if o.placement == SuitePlacement::PerDevice {
        let visible = D::count().map_err(|e| SuiteError::NoGpu(e.to_string()))?;
        let most = o.tps.iter().copied().max().unwrap_or(1);
        per_device_ordinals(most, visible).map_err(|e| SuiteError::Placement(e.to_string()))?;
        for ordinal in 1..most as usize {
            let d = D::new(ordinal).map_err(|e| SuiteError::NoGpu(e.to_string()))?;
            if d.info().arch != Some(arch) {
                let why = format!("GPU {ordinal} ({}) is not {}", d.info().name, arch.name());
                return Err(SuiteError::Placement(why));
            }
            _primary.push(d);
        }
        header = header.with_devices(most);
    }
    let open = |ordinal: usize| D::new(ordinal);
    Ok(run_cases(o, arch, header, &Cache::from_env(), open))
}

/// The suite's cases on the devices `open` returns (by ordinal: GPU 0 for every rank, or GPU r
/// for rank r with [`SuitePlacement::PerDevice`]; opened per case), for `arch`: prepared on
/// `o.threads` threads while this thread runs earlier ones.
pub fn run_cases<D: Device>(
    o: &SuiteOptions,
    arch: Arch,
    header: Provenance,
    cache: &Cache,
    open: impl Fn(usize) -> Result<D, DeviceError>,
) -> Report {
    let start = Instant::now();
    let specs = if o.own.is_empty() {
        cases_at(o.quick, &o.kernels, &o.tps, o.shape)
    } else {
        o.own.iter().map(|k| k.case()).collect()
    };
    let total = specs.len();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<Prepared, PrepError>)>(2);
    let mut results: Vec<(usize, CaseResult)> = Vec::with_capacity(total);
    std::thread::scope(|scope| {
        for _ in 0..o.threads.max(1) {
            let tx = tx.clone();
            let (specs, next) = (&specs, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = specs.get(i) else { break };
                    let stress = matches!(
                        c.shape,
                        ShapeKind::Model | ShapeKind::Of(_) | ShapeKind::Own
                    ) && c.batch == 1;
                    let seed = mix(o.seed, i as u64);
                    let p = prepare(c, arch, &o.policy, o.placement, seed, stress);
                    if tx.send((i, p)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, p) in rx {
            let seed = mix(o.seed, i as u64);
            let late = o
                .deadline_s
                .is_some_and(|d| start.elapsed().as_secs_f64() > d);
            let r = if late {
                skipped(&specs[i], seed)
            } else {
                run_case(&specs[i], p, cache, &open, o, seed)
            };
            eprintln!("[{:>3}/{total}] {}", results.len() + 1, progress_line(&r));
            results.push((i, r));
        }
    });
    results.sort_by_key(|(i, _)| *i);
    Report {
        header,
        options: o.clone(),
        cases: results.into_iter().map(|(_, r)| r).collect(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn skipped(c: &CaseSpec, seed: u64) -> CaseResult {
    CaseResult {
        spec: c.clone(),
        dims: String::new(),
        seed,
        status: Status::Skipped,
        detail: "time budget spent".into(),
        tolerance: c.kernel.tolerance().0,
        metrics: Vec::new(),
        stress: None,
        artifact: String::new(),
        run_ms: 0.0,
    }
}

fn run_case<D: Device>(
    c: &CaseSpec,
    p: Result<Prepared, PrepError>,
    cache: &Cache,
    open: &dyn Fn(usize) -> Result<D, DeviceError>,
    o: &SuiteOptions,
    seed: u64,
) -> CaseResult {
    let (tol, _) = c.kernel.tolerance();
    let mut r = CaseResult {
        spec: c.clone(),
        dims: String::new(),
        seed,
        status: Status::Fail,
        detail: String::new(),
        tolerance: tol,
        metrics: Vec::new(),
        stress: None,
        artifact: String::new(),
        run_ms: 0.0,
    };
    let p = match p {
        Ok(p) => p,
        Err(e) => {
            r.status = match e {
                PrepError::NotApplicable(_) => Status::NotApplicable,
                PrepError::Unsupported(_) => Status::Unsupported,
                PrepError::NotCoResident(_) | PrepError::Limit(_) => Status::Refused,
                PrepError::Failed(_) => Status::Fail,
            };
            r.detail = e.to_string();
            return r;
        }
    };
    r.dims = p.g.dims();
    let group = match open_group(c.tp, o.placement, open) {
        Ok(g) => g.with_skew(o.skew),
        Err(e) => {
            r.detail = e.to_string();
            return r;
        }
    };
    match execute_on(&group, &p, cache, o.stress_launches, o.launch) {
        Ok(x) => judge(&mut r, x),
        Err(e @ RtError::NotCoResident { .. }) => {
            r.status = Status::Refused;
            r.detail = e.to_string();
        }
        Err(e) => r.detail = e.to_string(),
    }
    r
}

/// The rank group of one case: `tp` ranks on GPU 0, or rank r on GPU r.
fn open_group<D: Device>(
    tp: u32,
    placement: SuitePlacement,
    open: &dyn Fn(usize) -> Result<D, DeviceError>,
) -> Result<RankGroup<D>, RtError> {
    match placement {
        SuitePlacement::SameDevice => {
            RankGroup::on_one_device(open(0)?, tp, SameDeviceMode::Streams)
        }
        SuitePlacement::PerDevice => {
            let devices = (0..tp as usize).map(open).collect::<Result<Vec<_>, _>>()?;
            RankGroup::one_per_device(devices)
        }
    }
}

fn judge(r: &mut CaseResult, x: Executed) {
    r.artifact = format!("{} ({})", x.compiler, artifact_name(&x.artifact));
    r.run_ms = x.run_ms;
    let w = Worst::of(&x.metrics);
    let mut problems = Vec::new();
    if !w.passes(r.tolerance) {
        problems.push(failure_text(&x.metrics, r.tolerance));
    }
    if let Some(s) = &x.stress {
        if let Some(e) = &s.error {
            problems.push(format!("stress after {} launches: {e}", s.launches));
        } else if !Worst::of(&s.burst).passes(r.tolerance) {
            problems.push(format!(
                "drift after {} launches: {}",
                s.launches,
                failure_text(&s.burst, r.tolerance)
            ));
        } else if !Worst::of(&s.last).passes(r.tolerance) {
            problems.push(format!(
                "last launch (epoch {}): {}",
                s.last_epoch,
                failure_text(&s.last, r.tolerance)
            ));
        }
    }
    r.metrics = x.metrics;
    r.stress = x.stress;
    r.status = if problems.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    r.detail = problems.join("; ");
}

/// The first failing output, in words.
fn failure_text(ms: &[OutputMetrics], tol: f64) -> String {
    match ms.iter().find(|m| !m.passes(tol)) {
        Some(m) => format!(
            "rank {} `{}`: rel L2 {:.3e} (tol {tol:.0e}), {} of {} non-finite, {} differ from rank 0; \
             worst [{}] {} vs {}",
            m.rank,
            m.output,
            m.rel_l2,
            m.non_finite,
            m.elements,
            m.differs_from_rank0,
            m.worst,
            m.worst_values.0,
            m.worst_values.1
        ),
        None => "no outputs".into(),
    }
}

/// `cached`, `compiled` or `prebuilt`.
pub fn artifact_name(s: &ArtifactSource) -> &'static str {
    match s {
        ArtifactSource::Cached => "cached",
        ArtifactSource::Compiled => "compiled",
        ArtifactSource::Prebuilt { .. } => "prebuilt",
    }
}

fn progress_line(r: &CaseResult) -> String {
    let mut line = format!("{:<44} {:<11}", r.spec.label(), r.status.name());
    if !r.metrics.is_empty() {
        let _ = write!(line, " rel L2 {:.2e}", Worst::of(&r.metrics).rel_l2);
    }
    if let Some(s) = &r.stress {
        let _ = write!(line, "; {} launches, {:.0}/s", s.launches, s.launches_per_s);
    }
    if r.status != Status::Pass && !r.detail.is_empty() {
        let _ = write!(line, " — {}", clip(&r.detail, 300));
    }
    line
}

// ---------------------------------------------------------------------------------------------
// Results: JSON and Markdown
// ---------------------------------------------------------------------------------------------

impl Report {
    /// Cases per status.
    pub fn count(&self, s: Status) -> usize {
        self.cases.iter().filter(|c| c.status == s).count()
    }

    /// The results file.
    pub fn to_json(&self) -> Json {
        self.header.json_with(json!({
            "schema": "wavefuse-gpu-suite/1",
            "mode": if self.options.quick { "quick" } else { "full" },
            "seed": self.options.seed,
            "stress_launches": self.options.stress_launches,
            "same_device_mode": "streams",
            "placement": self.options.placement.name(),
            "skew": self.options.skew.to_string(),
            "launch": self.options.launch.name(),
            "seconds": self.seconds,
            "summary": {
                "cases": self.cases.len(),
                "pass": self.count(Status::Pass),
                "fail": self.count(Status::Fail),
                "refused": self.count(Status::Refused),
                "unsupported": self.count(Status::Unsupported),
                "not_applicable": self.count(Status::NotApplicable),
                "skipped": self.count(Status::Skipped),
            },
            "tolerances": TOLERANCES
                .iter()
                .map(|(k, t, why)| json!({"kernel": k.name(), "rel_l2": t, "why": why}))
                .collect::<Vec<_>>(),
            "cases": self.cases.iter().map(case_json).collect::<Vec<_>>(),
        }))
    }

    /// The Markdown tables: correctness per case, then the back-to-back runs.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## wavefuse GPU suite ({})\n\n{}; {}; {}; launch skew {}; {:.0} s\n",
            if self.options.quick { "quick" } else { "full" },
            self.header.line(),
            self.header.origin(),
            match self.options.placement {
                SuitePlacement::SameDevice => "all ranks on one device",
                SuitePlacement::PerDevice => "one rank per device",
            },
            if self.options.skew.is_none() {
                "none".to_string()
            } else {
                format!(
                    "{} µs steps ({})",
                    self.options.skew.step.as_micros(),
                    self.options.skew
                )
            },
            self.seconds
        );
        let _ = writeln!(
            out,
            "| kernel | tp | shape | batch | per-rank K→N | status | rel L2 (worst) | tol | max abs \
             | min cosine | non-finite |"
        );
        let _ = writeln!(out, "|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|");
        for c in &self.cases {
            let w = Worst::of(&c.metrics);
            let ran = !c.metrics.is_empty();
            let num = |v: f64, f: &dyn Fn(f64) -> String| if ran { f(v) } else { "–".into() };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {:.0e} | {} | {} | {} |",
                c.spec.kernel.name(),
                c.spec.tp,
                c.spec.shape.name(),
                c.spec.batch,
                c.dims,
                status_cell(c),
                num(w.rel_l2, &|v| format!("{v:.2e}")),
                c.tolerance,
                num(w.max_abs, &|v| format!("{v:.2e}")),
                num(w.cosine, &|v| format!("{v:.6}")),
                if ran {
                    w.non_finite.to_string()
                } else {
                    "–".into()
                },
            );
        }
        let stressed: Vec<&CaseResult> = self.cases.iter().filter(|c| c.stress.is_some()).collect();
        if !stressed.is_empty() {
            let _ = writeln!(
                out,
                "\n| kernel | tp | launches | last epoch | launches/s | timeouts \
                 | drift (rel L2 after burst) | last launch rel L2 |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|---:|");
            for c in stressed {
                let s = c.stress.as_ref().expect("filtered");
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {:.0} | {} | {:.2e} | {:.2e} |",
                    c.spec.kernel.name(),
                    c.spec.tp,
                    s.launches,
                    s.last_epoch,
                    s.launches_per_s,
                    s.error.as_deref().unwrap_or("none"),
                    Worst::of(&s.burst).rel_l2,
                    Worst::of(&s.last).rel_l2,
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{} cases: {} pass, {} FAIL, {} refused (not co-resident on one device), \
             {} unsupported, {} n/a, {} skipped (time budget)",
            self.cases.len(),
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Refused),
            self.count(Status::Unsupported),
            self.count(Status::NotApplicable),
            self.count(Status::Skipped)
        );
        out
    }
}

fn status_cell(c: &CaseResult) -> String {
    match c.status {
        Status::Pass => "pass".into(),
        s => format!("{} ({})", s.name(), clip(&c.detail, 160).replace('|', "/")),
    }
}

/// The first line of `text`, at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

fn metrics_json(ms: &[OutputMetrics]) -> Vec<Json> {
    ms.iter()
        .map(|m| {
            json!({
                "output": m.output, "rank": m.rank, "elements": m.elements,
                "rel_l2": finite_or_null(m.rel_l2), "max_abs": m.max_abs,
                "cosine": finite_or_null(m.cosine), "non_finite": m.non_finite,
                "differs_from_rank0": m.differs_from_rank0,
            })
        })
        .collect()
}

/// At most `max` characters of `text` (a failed compile's message carries the whole source).
fn clip_chars(text: &str, max: usize) -> &str {
    text.char_indices()
        .nth(max)
        .map_or(text, |(i, _)| &text[..i])
}

fn finite_or_null(v: f64) -> Json {
    if v.is_finite() { json!(v) } else { Json::Null }
}

fn case_json(c: &CaseResult) -> Json {
    let w = Worst::of(&c.metrics);
    json!({
        "kernel": c.spec.kernel.name(),
        "tp": c.spec.tp,
        "shape": c.spec.shape.name(),
        "batch": c.spec.batch,
        "dims": c.dims,
        "seed": c.seed,
        "status": c.status.name(),
        "detail": clip_chars(&c.detail, 4000),
        "tolerance": c.tolerance,
        "artifact": c.artifact,
        "run_ms": c.run_ms,
        "worst": {
            "rel_l2": finite_or_null(w.rel_l2), "max_abs": w.max_abs,
            "cosine": finite_or_null(w.cosine), "non_finite": w.non_finite,
        },
        "outputs": metrics_json(&c.metrics),
        "stress": c.stress.as_ref().map(|s| json!({
            "launches": s.launches,
            "last_epoch": s.last_epoch,
            "seconds": s.seconds,
            "launches_per_s": s.launches_per_s,
            "error": s.error,
            "burst_rel_l2": finite_or_null(Worst::of(&s.burst).rel_l2),
            "last_rel_l2": finite_or_null(Worst::of(&s.last).rel_l2),
            "last_outputs": metrics_json(&s.last),
        })),
    })
}

// ---------------------------------------------------------------------------------------------
// Prebuilding
// ---------------------------------------------------------------------------------------------

/// Every source the suite (full mode) and the sanitizer runs of `scripts/gpu-suite.sh` (small
/// shapes, batch 1) compile for `arch`, deduplicated.
pub fn sources_to_prebuild(
    arch: Arch,
    policy: &SchedulePolicy,
) -> Vec<Result<Generated, (CaseSpec, PrepError)>> {
    let mut specs = cases(false, &KernelId::ALL, &TP_SIZES);
    for id in KernelId::ALL {
        for tp in TP_SIZES {
            specs.push(CaseSpec {
                kernel: id.into(),
                tp,
                batch: 1,
                shape: ShapeKind::Small,
            });
        }
    }
    let per_device = cases(false, &COMMUNICATING, &[2, 4]);
    let variants = specs
        .into_iter()
        .map(|c| (c, Placement::SameDevice))
        .chain(per_device.into_iter().map(|c| (c, Placement::PerDevice)));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (c, placement) in variants {
        match generate(&c, arch, policy, placement) {
            Ok(g) => {
                if seen.insert(g.source.text.clone()) {
                    out.push(Ok(g));
                }
            }
            Err(PrepError::NotApplicable(_)) => {}
            Err(e) => out.push(Err((c, e))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_keeps_nan() {
        let ok = exec::compare::metrics(&[1.0], &[1.0]);
        let bad = exec::compare::metrics(&[f64::NAN], &[1.0]);
        let w = Worst::of(&[ok.clone(), bad, ok]);
        assert!(w.rel_l2.is_nan() && w.cosine.is_nan() && w.non_finite == 1);
        assert!(!w.passes(1.0));
    }
}
