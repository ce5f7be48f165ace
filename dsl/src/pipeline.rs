//! The pipeline in one call per step (cargo feature `pipeline`): what `wavefuse emit`, `check`,
//! `sim`, `run` and `ab` do, for a kernel built by your own code at your own shapes.
//!
//! Every call generates the kernel through the same pipeline step as the `wavefuse` commands and
//! the snapshots ([`generate`]: the default schedule policy, one rank per GPU), so the source you
//! review is the one that is compiled, simulated, launched and timed. Compiled artifacts are
//! cached in `$WAVEFUSE_CACHE_DIR` (default: `wavefuse-cache` in the temporary directory).
//!
//! ```
//! use wavefuse::pipeline::{self, On, Target};
//!
//! wavefuse::kernel! {
//!     /// `y = round_f16(x · w + r)`: an FP16 GEMV with the residual folded in.
//!     pub fn gemv_add(k: usize, n: usize) {
//!         in w: f16_nk[k, n];
//!         in x: f16[1, k];
//!         in r: f16[1, n];
//!         out y: f16[1, n];
//!         y = round_f16(gemv.rep(w, x) + r);
//!     }
//! }
//!
//! let kernel = gemv_add(256, 128);
//! // Source, ABI and schedule for both targets, without a compiler.
//! for target in [Target::Gfx906, Target::Sm90] {
//!     let g = pipeline::generate(&kernel, target)?;
//!     assert!(g.source.text.contains(&g.abi.symbol));
//! }
//! // The protocol simulator against the f64 oracle: 4 seeded interleavings of the workgroups.
//! let sim = pipeline::simulate(&kernel, Target::Gfx906, 4)?;
//! assert!(sim.findings.is_empty(), "{:?}", sim.findings);
//! // One launch on the workload's inputs, checked against the f64 oracle.
//! let checked = pipeline::check(&kernel, Target::Sm90, On::Simulator { seed: 7 })?;
//! assert!(checked.passed(), "{checked}");
//! # Ok::<(), pipeline::Error>(())
//! ```

use std::sync::Arc;

pub use wavefuse_codegen::Arch as Target;
pub use wavefuse_codegen::model::Modelled;
pub use wavefuse_harness::ab::handwritten::Hand;
pub use wavefuse_harness::ab::report::{AbReport, Resources, Usage};
pub use wavefuse_harness::policy::{Placement, SchedulePolicy};
pub use wavefuse_harness::sim::Sweep;
pub use wavefuse_harness::suite::Generated;
pub use wavefuse_harness::tune::Settings as TuneSettings;
pub use wavefuse_harness::tune::report::TuneReport;
pub use wavefuse_runtime::exec::OutputMetrics;

use wavefuse_codegen::lowered::Occupancy;
use wavefuse_harness::ab::{self, Choice, Options};
use wavefuse_harness::suite::{self, PrepError, UserKernel};
use wavefuse_runtime::{Cache, Device, DeviceError, RankGroup, SameDeviceMode};

use crate::host::KernelArgs;
use crate::ir::Kernel;

/// Why a step of the pipeline did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel does not validate.
    #[error("{0}")]
    Invalid(String),
    /// The lowering does not compile this composition (the message says why).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Its grid has a grid barrier and cannot be resident at once on the target.
    #[error("{0}")]
    NotCoResident(String),
    /// The target's compiler is missing or refused the source.
    #[error("{0}")]
    Compile(String),
    /// There is no GPU of the target's kind (or no driver for it).
    #[error("{0}")]
    NoDevice(String),
    /// The GPU refused or failed a step (allocation, load, launch, copy).
    #[error("{0}")]
    Device(String),
    /// The simulator cannot run the kernel within its budgets (memory, scheduling steps): it
    /// is not checked — a limit of the simulator, no verdict on the kernel.
    #[error("not checked: {0}")]
    NotChecked(wavefuse_codegen::sim::SimError),
    /// Anything else (a reference-semantics or simulator error).
    #[error("{0}")]
    Failed(String),
}

impl From<PrepError> for Error {
    fn from(e: PrepError) -> Error {
        match e {
            PrepError::Unsupported(m) => Error::Unsupported(m),
            PrepError::NotCoResident(m) => Error::NotCoResident(m),
            e => Error::Failed(e.to_string()),
        }
    }
}

/// Where [`check`] and [`launch`] run the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum On {
    /// The CPU protocol simulator: every lane of the lowered kernel executed, the workgroups
    /// interleaved by one seeded schedule (`seed`); a protocol defect is an error.
    Simulator {
        /// The interleaving's seed.
        seed: u64,
    },
    /// GPU 0 of the target's kind (sm90: NVIDIA, through the CUDA driver; gfx906: AMD, through
    /// HIP), every rank of the TP group on it.
    Gpu,
}

fn user_case(kernel: &Kernel) -> Result<suite::CaseSpec, Error> {
    let u = UserKernel::new(kernel.clone(), kernel.name())
        .map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(Arc::new(u).case())
}

/// The kernel's source, ABI and resolved schedule for `target`, as `wavefuse emit` prints it for
/// one rank per GPU, with the default schedule policy. No compiler runs.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, Target};
/// let g = pipeline::generate(&scale2(512), Target::Gfx906)?;
/// assert_eq!(g.abi.language, "hip");
/// println!("{}", g.source.text); // what a snapshot test would hold
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn generate(kernel: &Kernel, target: Target) -> Result<Generated, Error> {
    generate_with(
        kernel,
        target,
        &SchedulePolicy::default(),
        Placement::PerDevice,
    )
}

/// [`generate`] with a schedule policy (explicit overrides, the tuned store) and a placement (all
/// ranks sharing one GPU: [`Placement::SameDevice`]).
pub fn generate_with(
    kernel: &Kernel,
    target: Target,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<Generated, Error> {
    Ok(suite::generate(
        &user_case(kernel)?,
        target,
        policy,
        placement,
    )?)
}

/// A kernel generated and compiled by the target's real compiler.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// What was compiled: source, ABI, schedule, lowered kernel.
    pub generated: Generated,
    /// The compiler's resource report (registers, spills, LDS, occupancy) and, for a gfx906 INT4
    /// kernel, the MI50 time model's prediction from the compiled code (modelled, not measured).
    pub resources: Resources,
    /// The code object (AMD) or cubin (NVIDIA).
    pub image: Vec<u8>,
}

/// [`generate`], then compile with the target's compiler (hipcc for gfx906, NVRTC for sm90):
/// the resource report, co-residency judged at the occupancy the compiler reports (a kernel with
/// a grid barrier whose grid the target cannot hold at once is an error here, not at launch),
/// and the MI50 time model for gfx906 INT4 kernels.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, Target};
/// let c = pipeline::compile(&scale2(512), Target::Gfx906)?;
/// let usage = c.resources.usage.as_ref().expect("hipcc reports resources");
/// assert_eq!(usage.spills, 0);
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn compile(kernel: &Kernel, target: Target) -> Result<Compiled, Error> {
    let generated = generate(kernel, target)?;
    let artifact = artifact(&generated)?;
    let wg = generated.lowered.workgroup_size;
    let mut resources = ab::usage_of(
        &artifact,
        &generated.abi.symbol,
        wg,
        generated.abi.dynamic_lds_bytes,
    );
    if let Ok(u) = &resources.usage {
        let occupancy = Occupancy::Compiled {
            waves_per_simd: u.occupancy,
            registers: u.registers,
        };
        generated
            .lowered
            .coresident(1, occupancy)
            .map_err(|e| Error::NotCoResident(e.to_string()))?;
        resources.modelled = wavefuse_harness::generate::modelled_mi50_image(
            &generated.lowered,
            &artifact.image,
            generated.spec.batch,
            u.occupancy,
            &wavefuse_runtime::compile::Bounds::default(),
        )
        .ok()
        .flatten();
    }
    Ok(Compiled {
        generated,
        resources,
        image: artifact.image,
    })
}

/// [`generate`], then run the lowered kernel in the CPU protocol simulator on `schedules` seeded
/// interleavings of its workgroups (three launches each, fresh data every launch), every output
/// compared with the f64 oracle. The simulator executes every lane: simulate at small shapes.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, Target};
/// let sweep = pipeline::simulate(&scale2(512), Target::Sm90, 8)?;
/// assert_eq!(sweep.schedules, 8);
/// assert!(sweep.findings.is_empty());
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn simulate(kernel: &Kernel, target: Target, schedules: u64) -> Result<Sweep, Error> {
    let g = generate(kernel, target)?;
    let p = wavefuse_harness::sim::Prepared {
        ir: g.ir.clone(),
        lowered: g.code.lowered.clone(),
        shapes: None,
        peer_table: wavefuse_codegen::sim::PeerTable::Shared,
    };
    wavefuse_harness::sim::sweep(&p, SEED, 0, schedules, |_, _| {})
        .map_err(|e| Error::Failed(e.to_string()))
}

/// The workload seed of [`simulate`] and [`check`].
const SEED: u64 = wavefuse_harness::Workload::DEFAULT_SEED;

/// What [`check`] found: every output of every rank against the f64 oracle.
#[derive(Clone, Debug)]
pub struct Checked {
    /// One row per output and rank.
    pub metrics: Vec<OutputMetrics>,
    /// The relative-L2 tolerance of the kernel's output types.
    pub tolerance: f64,
}

impl Checked {
    /// Every output finite and within [`Checked::tolerance`].
    pub fn passed(&self) -> bool {
        self.metrics.iter().all(|m| m.passes(self.tolerance))
    }
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for m in &self.metrics {
            writeln!(
                f,
                "{} rank {}: rel L2 {:.3e} (tolerance {:.0e}), max abs {:.3e}, {} non-finite",
                m.output, m.rank, m.rel_l2, self.tolerance, m.max_abs, m.non_finite
            )?;
        }
        Ok(())
    }
}

/// One launch of the kernel on the synthetic workload's inputs, on `on`, every output compared
/// with the f64 reference semantics of the IR.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, On, Target};
/// let checked = pipeline::check(&scale2(512), Target::Gfx906, On::Simulator { seed: 1 })?;
/// assert!(checked.passed(), "{checked}");
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn check(kernel: &Kernel, target: Target, on: On) -> Result<Checked, Error> {
    let tolerance = UserKernel::new(kernel.clone(), kernel.name())
        .map_err(|e| Error::Invalid(e.to_string()))?
        .tolerance();
    let data = || {
        let inputs = wavefuse_harness::Workload::new(SEED).inputs(kernel);
        let want = crate::ir::reference::evaluate(kernel, &inputs)
            .map_err(|e| Error::Failed(format!("the f64 reference: {e}")))?;
        Ok::<_, Error>((inputs, want))
    };
    use wavefuse_codegen::sim::SimError;
    let (got, want) = match on {
        On::Simulator { seed } => {
            // Generated first: a kernel the lowering refuses (an AWQ weight, say) is refused
            // with the reason before any data is built.
            let g = generate(kernel, target)?;
            let (inputs, want) = data()?;
            let case = wavefuse_codegen::sim::Case {
                inputs: vec![inputs],
                reference: vec![want.clone()],
            };
            let opts = wavefuse_codegen::sim::SimOptions::new(seed);
            let report = wavefuse_codegen::sim::simulate_case(&g.lowered, kernel, &case, &opts)
                .map_err(|e| match e {
                    e @ SimError::TooLarge(_) => Error::NotChecked(e),
                    e => Error::Failed(e.to_string()),
                })?;
            if let Some(f) = report.findings.first() {
                return Err(Error::Failed(format!("the simulator: {f}")));
            }
            if let Some(limit) = report.limit(&opts) {
                return Err(Error::NotChecked(SimError::TooLarge(limit)));
            }
            let got = report
                .outputs
                .into_iter()
                .next()
                .ok_or_else(|| Error::Failed("the simulated launch did not complete".into()))?;
            (got, want)
        }
        On::Gpu => {
            let (inputs, want) = data()?;
            let got = match target {
                Target::Sm90 => run_on(open_cuda()?, kernel, target, &inputs)?,
                Target::Gfx906 => run_on(open_hip()?, kernel, target, &inputs)?,
            };
            (got, want)
        }
    };
    Ok(Checked {
        metrics: wavefuse_runtime::exec::compare(kernel, &got, &want),
        tolerance,
    })
}

/// One launch with your own typed arguments (`ranks[r]` is rank r's `…Args`, from the
/// `kernel!` declaration), on `on`; the outputs are written back into the arguments.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::host::{Input, Output, f16};
/// use wavefuse::pipeline::{self, On, Target};
/// let x: Vec<f16> = (0..512).map(|i| f16::from_f32(i as f32 / 64.0)).collect();
/// let mut y = vec![f16::NAN; 512];
/// let mut ranks = [Scale2Args { x: Input::new(&x), y: Output::new(&mut y) }];
/// pipeline::launch(&scale2(512), Target::Sm90, On::Simulator { seed: 3 }, &mut ranks)?;
/// assert_eq!(y[100], f16::from_f32(2.0 * 100.0 / 64.0));
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn launch<A: KernelArgs>(
    kernel: &Kernel,
    target: Target,
    on: On,
    ranks: &mut [A],
) -> Result<(), Error> {
    match on {
        On::Simulator { seed } => {
            let g = generate(kernel, target)?;
            wavefuse_harness::launch::simulate(kernel, &g, ranks, seed)
                .map_err(|e| Error::Failed(e.to_string()))
        }
        On::Gpu => match target {
            Target::Sm90 => launch_on(open_cuda()?, kernel, target, ranks),
            Target::Gfx906 => launch_on(open_hip()?, kernel, target, ranks),
        },
    }
}

/// The A/B of `wavefuse ab --kernel-file … --manual … --abi …`: the generated kernel against
/// your hand-written one (`hand`, described by its ABI file: [`Hand::load`]), both checked
/// against the f64 oracle on the same inputs; timed side by side on the GPU when `use_gpu` and
/// one is present, else checked in the simulator and compiled (the report says which, and why
/// there is no timing). Render it with [`AbReport::terminal`], `markdown` or `to_json`.
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, Hand, Target};
/// let kernel = scale2(512);
/// // A stand-in for your own kernel: the generated one, written out with its ABI.
/// let dir = tempfile::tempdir().unwrap();
/// let g = pipeline::generate(&kernel, Target::Sm90)?;
/// std::fs::write(dir.path().join("scale2.cu"), &g.source.text).unwrap();
/// std::fs::write(dir.path().join("scale2.toml"), g.abi.to_toml().unwrap()).unwrap();
/// let hand = Hand::load(&dir.path().join("scale2.toml"), Some(&dir.path().join("scale2.cu")))
///     .map_err(|e| pipeline::Error::Failed(e.to_string()))?;
/// let report = pipeline::ab(&kernel, hand, false)?;
/// assert_eq!(report.failures(), 0, "{}", report.terminal());
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn ab(kernel: &Kernel, hand: Hand, use_gpu: bool) -> Result<AbReport, Error> {
    let case = user_case(kernel)?;
    let o = Options::new(Choice::User(Box::new(hand)));
    Ok(ab::run(&[case], &o, use_gpu))
}

/// The search of `wavefuse tune --kernel-file …`: `settings.budget` candidate schedules of the
/// kernel for `target`, compiled, filtered by their resources and checked against the f64
/// oracle; on sm90 with a GPU and `use_gpu` timed on it, otherwise ranked by the static model
/// (the report says which). The winners are not stored: `wavefuse_harness::tune::entries` gives
/// them as tuned-store entries, which a [`SchedulePolicy`] holding that store resolves in
/// [`generate_with`].
///
/// ```
/// # wavefuse::kernel! { pub fn scale2(n: usize) { in x: f16[1, n]; out y: f16[1, n]; y = round_f16(x + x); } }
/// use wavefuse::pipeline::{self, Target, TuneSettings};
/// let settings = TuneSettings { budget: 4, quick: true, ..TuneSettings::new() };
/// let report = pipeline::tune(&scale2(512), Target::Sm90, &settings, false)?;
/// let case = &report.cases[0];
/// // Compiled and filtered by their resources; without a GPU nothing is timed, so on sm90 no
/// // candidate wins and the default schedule stays.
/// assert_eq!(case.compile_failed, 0, "{}", report.terminal());
/// assert!((1..=4).contains(&case.candidates.len()));
/// assert_eq!(case.winner, None);
/// # Ok::<(), pipeline::Error>(())
/// ```
pub fn tune(
    kernel: &Kernel,
    target: Target,
    settings: &TuneSettings,
    use_gpu: bool,
) -> Result<TuneReport, Error> {
    let u = UserKernel::new(kernel.clone(), kernel.name())
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let targets = [wavefuse_harness::tune::Target::user(Arc::new(u))];
    Ok(wavefuse_harness::tune::run(
        &targets, settings, target, use_gpu,
    ))
}

fn artifact(g: &Generated) -> Result<wavefuse_runtime::Artifact, Error> {
    suite::artifact(&Cache::from_env(), g)
        .map(|(a, _)| a)
        .map_err(|e| Error::Compile(e.to_string()))
}

fn opened<D>(device: Result<D, DeviceError>, kind: &str) -> Result<D, Error> {
    device.map_err(|e| match e {
        DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. } => {
            Error::NoDevice(format!("no {kind}: {e}"))
        }
        e => Error::Device(format!("opening the {kind}: {e}")),
    })
}

fn open_cuda() -> Result<wavefuse_runtime::CudaDevice, Error> {
    opened(wavefuse_runtime::CudaDevice::new(0), "NVIDIA GPU for sm90")
}

fn open_hip() -> Result<wavefuse_runtime::HipDevice, Error> {
    opened(wavefuse_runtime::HipDevice::new(0), "AMD GPU for gfx906")
}

/// The kernel generated for every rank sharing `device` (the placement the group runs in).
fn group_on<D: Device>(
    device: D,
    kernel: &Kernel,
    target: Target,
) -> Result<(RankGroup<D>, Generated), Error> {
    let g = generate_with(
        kernel,
        target,
        &SchedulePolicy::default(),
        Placement::SameDevice,
    )?;
    let group = RankGroup::on_one_device(device, kernel.tp(), SameDeviceMode::Streams)
        .map_err(|e| Error::Device(e.to_string()))?;
    Ok((group, g))
}

fn run_on<D: Device>(
    device: D,
    kernel: &Kernel,
    target: Target,
    inputs: &[crate::ir::reference::RankInputs],
) -> Result<Vec<crate::ir::reference::RankOutputs>, Error> {
    let (group, g) = group_on(device, kernel, target)?;
    let artifact = artifact(&g)?;
    let mut k = wavefuse_runtime::exec::OpKernel::new(&group, kernel, &g.abi, &artifact)
        .map_err(|e| Error::Device(e.to_string()))?;
    k.run(inputs).map_err(|e| Error::Device(e.to_string()))
}

fn launch_on<D: Device, A: KernelArgs>(
    device: D,
    kernel: &Kernel,
    target: Target,
    ranks: &mut [A],
) -> Result<(), Error> {
    let (group, g) = group_on(device, kernel, target)?;
    wavefuse_harness::launch::launch(&group, &Cache::from_env(), kernel, &g, ranks)
        .map_err(|e| Error::Device(e.to_string()))
}
