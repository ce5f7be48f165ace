//! `wavefuse mgpu-bench`: one rank per GPU (or, with `--same-device`, every rank on GPU 0),
//! CUDA-graph timing per call of the generated communicating kernels (DESIGN.md §8, issue 9), to
//! set beside NCCL on the same machine (`bench/torch/nccl_allreduce.py`):
//!
//! - `allreduce_residual` at N = 5120 (10 KB of FP16) and N = 16384 (32 KB);
//! - `allreduce_residual_rmsnorm` at N = 5120 (the wavefuse side of "NCCL allreduce + residual +
//!   RMSNorm");
//! - the fused `gemv_int4_allreduce_rmsnorm` at the Qwen 3.5 27B down-projection shape per rank
//!   (K = 17408 / TP → N = 5120);
//! - the unfused wavefuse chain: a row-parallel `gemv_int4` writing the FP16 partial, then
//!   `allreduce_residual_rmsnorm` reading it (two launches per rank and call).
//!
//! Per sample, every rank's launches of `calls` consecutive calls are captured into one graph per
//! GPU ([`GroupGraphs`]; a graph holds fixed epochs, so each is replayed exactly once, DESIGN.md
//! §5.4), all GPUs are released together behind gates, and one call's time is the slowest rank's
//! window over `calls`. Kernels that read weights rotate over enough copies of them that the
//! copies together exceed 4 × L2, so no call finds its weights in L2 (§8). After timing, every
//! rank's error word is checked and the outputs are compared with the f64 reference (the inputs do
//! not change between calls, so the last call's outputs are the reference's).

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::{Value as Json, json};
use wavefuse::ir::reference::{HostData, RankInputs, RankOutputs, evaluate};
use wavefuse::ir::{GptqLayout, Kernel, validate};
use wavefuse_codegen::Arch;
use wavefuse_runtime::exec::{self, OpKernel, OutputMetrics};
use wavefuse_runtime::rank::per_device_ordinals;
use wavefuse_runtime::timing::GroupGraphs;
use wavefuse_runtime::{Cache, Device, RankGroup, SameDeviceMode};

use crate::pipeline::{self, Purpose};
use crate::policy::{Placement, SchedulePolicy};
use crate::provenance::Provenance;
use crate::shapes::HIDDEN;
use crate::suite::{self, Worst};
use crate::{KernelId, Shapes, Workload};

wavefuse::kernel! {
    /// `allreduce_residual` at any width `n` (the set's kernel is this at n = 5120).
    pub fn allreduce_residual_n(tp: u32, batch: usize, n: usize) across tp {
        in partial: f16[batch, n] partial;
        in residual: f16[batch, n];
        out residual_out: f16[batch, n];

        residual_out = round_f16(allreduce(partial) + residual);
    }

    /// The first half of the unfused chain: the down projection's row-parallel INT4 GEMV, its
    /// FP16 partial sums written out for a separate allreduce.
    pub fn gemv_int4_row(tp: u32, batch: usize, k: usize, gptq: GptqLayout) across tp {
        in w_down: gptq(gptq)[k, HIDDEN] row_parallel;
        in x: f16[batch, k] col_parallel;
        out partial: f16[batch, HIDDEN] partial;

        partial = round_f16(gemv.row(w_down, x));
    }
}

/// What one benchmark row measures.
#[derive(Clone, Debug, PartialEq)]
pub enum BenchCase {
    /// `allreduce_residual` of `n` FP16 per rank.
    Allreduce {
        /// Elements per rank.
        n: usize,
    },
    /// `allreduce_residual_rmsnorm` at 5120.
    AllreduceRmsnorm,
    /// The fused kernel at the down-projection shape.
    Fused,
    /// `gemv_int4` (row-parallel) then `allreduce_residual_rmsnorm`.
    Chain,
    /// Kernels of one's own (`--kernel-file`, at their own shapes), launched in this order per
    /// call; an input of one named like an output of the one before reads that output.
    Own(std::sync::Arc<Vec<crate::suite::UserKernel>>),
}

impl BenchCase {
    /// Every case, in report order.
    pub const ALL: [BenchCase; 5] = [
        BenchCase::Allreduce { n: HIDDEN },
        BenchCase::Allreduce { n: 16384 },
        BenchCase::AllreduceRmsnorm,
        BenchCase::Fused,
        BenchCase::Chain,
    ];

    /// Its name in reports.
    pub fn name(&self) -> String {
        match self {
            BenchCase::Own(ks) => ks
                .iter()
                .map(|k| k.name().to_owned())
                .collect::<Vec<_>>()
                .join(" + "),
            BenchCase::Allreduce { n } => format!("allreduce_residual n={n}"),
            BenchCase::AllreduceRmsnorm => "allreduce_residual_rmsnorm n=5120".into(),
            BenchCase::Fused => "gemv_int4_allreduce_rmsnorm (fused)".into(),
            BenchCase::Chain => "gemv_int4 + allreduce_residual_rmsnorm (unfused)".into(),
        }
    }

    /// The op-level kernels it launches per call, in order (validated).
    pub fn kernels(&self, tp: u32) -> Result<Vec<Kernel>, BenchError> {
        let s = Shapes::qwen27b(tp);
        let ks = match self {
            BenchCase::Own(ks) => {
                if let Some(k) = ks.iter().find(|k| k.ir.tp() != tp) {
                    return Err(BenchError::WrongTp {
                        kernel: k.name().to_owned(),
                        origin: k.origin.clone(),
                        written: k.ir.tp(),
                        tp,
                    });
                }
                ks.iter().map(|k| k.ir.clone()).collect()
            }
            BenchCase::Allreduce { n } if *n == HIDDEN => {
                vec![KernelId::AllreduceResidual.build(&s)]
            }
            BenchCase::Allreduce { n } => vec![allreduce_residual_n(tp, 1, *n)],
            BenchCase::AllreduceRmsnorm => vec![KernelId::AllreduceResidualRmsnorm.build(&s)],
            BenchCase::Fused => vec![KernelId::GemvInt4AllreduceRmsnorm.build(&s)],
            BenchCase::Chain => vec![
                gemv_int4_row(tp, 1, s.ffn_local(), s.gptq),
                KernelId::AllreduceResidualRmsnorm.build(&s),
            ],
        };
        for k in &ks {
            validate(k).map_err(|e| BenchError::Invalid {
                kernel: k.name().to_owned(),
                source: Box::new(e),
            })?;
        }
        Ok(ks)
    }

    /// Weight bytes per rank and call of `kernels` (every weight buffer's per-rank bytes: for
    /// GPTQ the packed codes, scales and zero points): what is rotated over copies of, so that no
    /// call finds its weights in L2; 0 for the pure allreduces.
    pub fn weight_bytes(kernels: &[Kernel]) -> usize {
        kernels
            .iter()
            .flat_map(|k| k.buffers())
            .filter_map(|(_, d)| match d.local_type() {
                t @ wavefuse::ir::BufferType::Weight(_) => Some(t.bytes()),
                wavefuse::ir::BufferType::Tensor(_) => None,
            })
            .sum()
    }
}

/// One generated kernel of a case: its op-level kernel and what [`wavefuse_codegen::compile`]
/// made of it with the schedule the policy resolved for the placement (one rank per device: the
/// push protocol for the fused kernel; all ranks on one device: every rank's grid co-resident).
/// It dereferences to the [`wavefuse_codegen::Generated`].
pub struct Built {
    /// The op-level kernel.
    pub ir: Kernel,
    /// Lowered kernel, source, ABI and schedule.
    pub code: wavefuse_codegen::Generated,
}

impl std::ops::Deref for Built {
    type Target = wavefuse_codegen::Generated;
    fn deref(&self) -> &wavefuse_codegen::Generated {
        &self.code
    }
}

/// Generates every kernel of `case` at `tp` for `arch` through the pipeline (`policy`, then
/// [`wavefuse_codegen::compile`]), for `tp` ranks on one device (`same_device`) or one rank per
/// device.
pub fn build(
    case: &BenchCase,
    tp: u32,
    arch: Arch,
    same_device: bool,
    policy: &SchedulePolicy,
) -> Result<Vec<Built>, BenchError> {
    let placement = if same_device {
        Placement::SameDevice
    } else {
        Placement::PerDevice
    };
    case.kernels(tp)?
        .into_iter()
        .map(|ir| {
            let code = policy
                .resolve_kernel(&ir, arch, placement, None)
                .map_err(|e| BenchError::Generate {
                    kernel: ir.name().to_owned(),
                    source: Box::new(e),
                })?
                .code;
            Ok(Built { ir, code })
        })
        .collect()
}

/// The measurements of one row.
#[derive(Clone, Debug)]
pub struct Row {
    /// The case.
    pub case: BenchCase,
    /// TP size (= GPUs).
    pub tp: u32,
    /// Per sample: one call's time (µs), the slowest rank's graph window over the calls.
    pub per_call_us: Vec<f64>,
    /// Per sample: every rank's window (ms), for the spread between GPUs (one window where the
    /// ranks share a GPU: they are one graph, `GroupGraphs`).
    pub rank_ms: Vec<Vec<f64>>,
    /// Calls per graph.
    pub calls: u32,
    /// Copies of the weights rotated over.
    pub rotation: usize,
    /// The outputs after timing against the f64 reference.
    pub metrics: Vec<OutputMetrics>,
    /// Why it could not run, if so.
    pub error: Option<String>,
    /// Whether rank 0 was timed alone on the GPU (`--same-device`, a chain with no allreduce:
    /// as TP deploys it), its ranks run one after another for the check.
    pub alone: bool,
}

impl Row {
    /// Percentile `p` (0–100) of the per-call samples (nearest rank).
    pub fn percentile(&self, p: f64) -> f64 {
        let mut v = self.per_call_us.clone();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)]
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// TP sizes (one GPU per rank, or all on GPU 0).
    pub tps: Vec<u32>,
    /// Every rank on GPU 0 (streams of one device) instead of one GPU per rank.
    pub same_device: bool,
    /// Timed graphs per row (after two untimed ones).
    pub samples: u32,
    /// Calls per graph.
    pub calls: u32,
    /// Workload seed.
    pub seed: u64,
    /// Commit of the binary.
    pub commit: String,
    /// Where the kernels' schedules come from.
    pub policy: SchedulePolicy,
    /// Kernels of one's own, launched in order per call (`--kernel-file`): the only row then.
    pub own: Vec<crate::suite::UserKernel>,
    /// The GPU runtime.
    pub runtime: crate::suite::GpuRuntime,
}

impl BenchOptions {
    /// The rows: one's own kernels as one chain, else every built-in case.
    pub fn cases(&self) -> Vec<BenchCase> {
        if self.own.is_empty() {
            BenchCase::ALL.to_vec()
        } else {
            vec![BenchCase::Own(std::sync::Arc::new(self.own.clone()))]
        }
    }
}

/// The case's data: inputs per kernel (the chain's second kernel reads the first's output) and
/// the reference of the last kernel's outputs.
struct CaseData {
    inputs: Vec<Vec<RankInputs>>,
    reference: Vec<RankOutputs>,
}

fn case_data(built: &[Built], seed: u64) -> Result<CaseData, BenchError> {
    let w = Workload::new(seed);
    let mut inputs: Vec<Vec<RankInputs>> = built.iter().map(|b| w.inputs(&b.ir)).collect();
    let mut reference =
        evaluate(&built[0].ir, &inputs[0]).map_err(|e| BenchError::Reference(Box::new(e)))?;
    for i in 1..built.len() {
        // A chain: an input named like an output of the kernel before reads that output, rank
        // by rank (the GEMV's FP16 `partial` is the allreduce's input).
        for (prev, next) in chained(&built[i - 1].ir, &built[i].ir) {
            for (r, rank) in inputs[i].iter_mut().enumerate() {
                rank.insert(next, HostData::Tensor(reference[r][&prev].clone()));
            }
        }
        reference =
            evaluate(&built[i].ir, &inputs[i]).map_err(|e| BenchError::Reference(Box::new(e)))?;
    }
    Ok(CaseData { inputs, reference })
}

/// The (output of `prev`, input of `next`) pairs of a chain: same name.
fn chained(prev: &Kernel, next: &Kernel) -> Vec<(wavefuse::ir::Buffer, wavefuse::ir::Buffer)> {
    prev.outputs()
        .filter_map(|o| {
            let name = &prev.buffer(o)?.name;
            let i = next.buffer_by_name(name)?;
            (next.buffer(i)?.role == wavefuse::ir::Role::Input).then_some((o, i))
        })
        .collect()
}

/// Runs one row on `group`; any failure is the row's error.
fn run_row<D: Device>(
    group: &RankGroup<D>,
    case: BenchCase,
    o: &BenchOptions,
    cache: &Cache,
    l2: u64,
) -> Row {
    let tp = group.tp();
    let mut row = Row {
        case,
        tp,
        per_call_us: Vec::new(),
        rank_ms: Vec::new(),
        calls: o.calls,
        rotation: 1,
        metrics: Vec::new(),
        error: None,
        alone: false,
    };
    if let Err(e) = time_row(group, &mut row, o, cache, l2) {
        row.error = Some(e.to_string());
    }
    row
}

fn time_row<D: Device>(
    group: &RankGroup<D>,
    row: &mut Row,
    o: &BenchOptions,
    cache: &Cache,
    l2: u64,
) -> Result<(), BenchError> {
    let arch = group.device(0).info().arch.ok_or(BenchError::NoTarget)?;
    let mut built = build(&row.case, row.tp, arch, o.same_device, &o.policy)?;
    // A chain that does not communicate, its ranks on one GPU: rank 0 alone is what TP deploys
    // (one rank per GPU), so its kernels are the per-device ones and rank 0 is timed alone.
    row.alone = timed_alone(&built, o.same_device);
    if row.alone {
        built = build(&row.case, row.tp, arch, false, &o.policy)?;
    }
    let data = case_data(&built, o.seed)?;
    let compiler = pipeline::compiler(arch, Purpose::Run);
    let artifacts = built
        .iter()
        .map(|b| {
            exec::artifact_for(cache, compiler.as_ref(), &pipeline::request(b)).map(|(a, _)| a)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let irs: Vec<Kernel> = built.iter().map(|b| b.ir.clone()).collect();
    let bytes = BenchCase::weight_bytes(&irs) as u64;
    if bytes > 0 {
        row.rotation = (4 * l2).div_ceil(bytes).clamp(1, 32) as usize;
    }
    // One set of kernels per weight copy; each set has its own flags and epochs.
    let mut sets: Vec<Vec<OpKernel<'_, D>>> = Vec::with_capacity(row.rotation);
    for _ in 0..row.rotation {
        let mut set = Vec::with_capacity(built.len());
        for (i, b) in built.iter().enumerate() {
            let k = OpKernel::new(group, &b.ir, &b.abi, &artifacts[i])?;
            k.upload_inputs(&data.inputs[i])?;
            set.push(k);
        }
        for i in 1..set.len() {
            let (before, after) = set.split_at_mut(i);
            for (prev, _) in chained(&built[i - 1].ir, &built[i].ir) {
                let name = &built[i - 1].ir.buffer(prev).expect("own buffer").name;
                let array = before[i - 1]
                    .array(name, "data")
                    .ok_or_else(|| BenchError::NoDeviceArray(name.to_string()))?;
                after[0].instance().bind(name, "data", &array)?;
            }
        }
        sets.push(set);
    }
    let copies = sets.len();
    if row.alone {
        // Every rank once, one after another (each alone), so every rank's outputs are checked.
        for set in sets.iter_mut() {
            for r in 0..row.tp {
                for k in set.iter_mut() {
                    k.instance().launch_alone(r)?;
                    k.instance().wait()?;
                }
            }
        }
    }
    let (ranks, alone) = (if row.alone { 1 } else { row.tp }, row.alone);
    for sample in 0..o.samples + 2 {
        let graphs = GroupGraphs::capture_ranks(group, ranks, o.calls, || {
            for call in 0..o.calls as usize {
                for k in sets[call % copies].iter_mut() {
                    if alone {
                        k.instance().launch_alone(0)?;
                    } else {
                        k.instance().launch()?;
                    }
                }
            }
            Ok(())
        })?;
        let replay = graphs.replay(group)?;
        if sample >= 2 {
            row.per_call_us.push(replay.per_call_us());
            row.rank_ms.push(replay.rank_ms);
        }
    }
    for set in sets.iter_mut() {
        for k in set.iter_mut() {
            k.instance().wait()?;
        }
    }
    let last = sets[0].last().expect("a kernel per set");
    let outputs = last.read_outputs()?;
    row.metrics = exec::compare(&built[built.len() - 1].ir, &outputs, &data.reference);
    Ok(())
}

/// Whether a chain whose ranks share one GPU (`same_device`) is timed as rank 0 alone: at TP > 1
/// when none of its kernels has an allreduce (a rank alone is then what one rank per GPU runs).
fn timed_alone(built: &[Built], same_device: bool) -> bool {
    let communicates = built.iter().any(|b| {
        b.ir.ops()
            .any(|(_, op)| matches!(op.kind, wavefuse::ir::OpKind::AllReduce(_)))
    });
    same_device && built.first().is_some_and(|b| b.ir.tp() > 1) && !communicates
}

/// Why a row or a run of `mgpu-bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A kernel of one's own written for another TP size.
    #[error("{kernel} ({origin}) is written for TP {written}, not {tp}")]
    WrongTp {
        /// The kernel.
        kernel: String,
        /// Where it came from.
        origin: String,
        /// Its TP size.
        written: u32,
        /// The row's.
        tp: u32,
    },
    /// A kernel does not validate.
    #[error("{kernel}: {source}")]
    Invalid {
        /// The kernel.
        kernel: String,
        /// What the validator found.
        source: Box<wavefuse::ir::ValidationError>,
    },
    /// A kernel did not generate.
    #[error("{kernel}: {source}")]
    Generate {
        /// The kernel.
        kernel: String,
        /// Why.
        source: Box<wavefuse_codegen::CompileError>,
    },
    /// The f64 reference failed.
    #[error("reference: {0}")]
    Reference(Box<wavefuse::ir::reference::EvalError>),
    /// A row's GPU is not a wavefuse target.
    #[error("not a wavefuse target (gfx906 or sm_90)")]
    NoTarget,
    /// GPU 0 is not a wavefuse target.
    #[error("{0} is not a wavefuse target (gfx906 or sm_90)")]
    NotATarget(String),
    /// An array the kernel names is not on the device.
    #[error("`{0}` has no device array")]
    NoDeviceArray(String),
    /// A case at a TP size did not generate (`--prebuild`).
    #[error("TP {tp} {case}: {source}")]
    Case {
        /// The TP size.
        tp: u32,
        /// The case.
        case: String,
        /// Why.
        source: Box<BenchError>,
    },
    /// No GPU could be opened.
    #[error(transparent)]
    Gpu(#[from] suite::GpuError),
    /// The runtime failed (compiling, binding, launching, reading back).
    #[error(transparent)]
    Runtime(Box<wavefuse_runtime::Error>),
    /// A device call failed.
    #[error(transparent)]
    Device(#[from] wavefuse_runtime::DeviceError),
}

impl From<wavefuse_runtime::Error> for BenchError {
    fn from(e: wavefuse_runtime::Error) -> BenchError {
        BenchError::Runtime(Box::new(e))
    }
}

/// Where a caller still words errors as text.
impl From<BenchError> for String {
    fn from(e: BenchError) -> String {
        e.to_string()
    }
}

/// Every row of a run.
pub struct BenchReport {
    /// Device and toolchain (the devices visible: the count; GPU 0: the rest).
    pub header: Provenance,
    /// Options.
    pub options: BenchOptions,
    /// Rows.
    pub rows: Vec<Row>,
    /// TP sizes refused (too few GPUs), with why.
    pub refused: Vec<(u32, String)>,
}

/// Runs every case at every TP size that fits the visible GPUs of `o.runtime`.
pub fn run_bench(o: &BenchOptions) -> Result<BenchReport, BenchError> {
    struct Bench<'a>(&'a BenchOptions);
    impl suite::OnGpu for Bench<'_> {
        type Out = Result<BenchReport, BenchError>;
        fn on<D: Device>(self, dev: D) -> Self::Out {
            run_bench_on(dev, self.0)
        }
    }
    suite::with_gpu(o.runtime, Bench(o))?
}

fn run_bench_on<D: Device>(dev0: D, o: &BenchOptions) -> Result<BenchReport, BenchError> {
    let visible = D::count()?;
    let arch = dev0
        .info()
        .arch
        .ok_or_else(|| BenchError::NotATarget(dev0.info().name.clone()))?;
    let header = Provenance::of_device(&dev0, arch, &o.commit)?.with_devices(visible as u32);
    let l2 = header.device.l2_bytes;
    drop(dev0);
    let cache = Cache::from_env();
    let mut rows = Vec::new();
    let mut refused = Vec::new();
    for &tp in &o.tps {
        let group = if o.same_device {
            let d = D::new(0)?;
            RankGroup::on_one_device(d, tp, SameDeviceMode::FusedGrid)?
        } else {
            if let Err(e) = per_device_ordinals(tp, visible) {
                eprintln!("TP {tp}: {e}");
                refused.push((tp, e.to_string()));
                continue;
            }
            RankGroup::<D>::per_device(tp)?
        };
        for case in o.cases() {
            let start = Instant::now();
            let name = case.name();
            let row = run_row(&group, case, o, &cache, l2);
            eprintln!(
                "TP {tp} {:<50} {} ({:.1} s)",
                name,
                match &row.error {
                    Some(e) => format!("ERROR {e}"),
                    None => format!(
                        "p50 {:.2} µs/call, rel L2 {:.2e}",
                        row.percentile(50.0),
                        Worst::of(&row.metrics).rel_l2
                    ),
                },
                start.elapsed().as_secs_f64()
            );
            rows.push(row);
        }
    }
    Ok(BenchReport {
        header,
        options: o.clone(),
        rows,
        refused,
    })
}

impl BenchReport {
    /// The results file.
    pub fn to_json(&self) -> Json {
        self.header.json_with(json!({
            "schema": "wavefuse-mgpu-bench/2",
            "placement": self.placement(),
            "timing": "a graph (CUDA or HIP) of `calls` back-to-back calls per rank (its own stream; ranks \
                       sharing a GPU: branches of one graph), ranks released together; per call = slowest \
                       rank's window / calls",
            "calls_per_graph": self.options.calls,
            "samples": self.options.samples,
            "seed": self.options.seed,
            "refused": self.refused.iter().map(|(tp, why)| json!({"tp": tp, "why": why})).collect::<Vec<_>>(),
            "rows": self.rows.iter().map(row_json).collect::<Vec<_>>(),
        }))
    }

    /// Where the ranks ran: `per-device` or `same-device`.
    pub fn placement(&self) -> &'static str {
        if self.options.same_device {
            "same-device"
        } else {
            "per-device"
        }
    }

    /// The Markdown table.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## wavefuse mgpu-bench ({}, CUDA graphs)\n\n{}; {}; \
             {} calls per graph, {} samples; per call = slowest rank's window / calls\n",
            if self.options.same_device {
                "every rank on GPU 0, a stream each"
            } else {
                "one rank per GPU"
            },
            self.header.line(),
            self.header.origin(),
            self.options.calls,
            self.options.samples
        );
        let _ = writeln!(
            out,
            "| case | tp | p10 µs | p50 µs | p90 µs | spread | weight copies | rel L2 (worst) | status |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for r in &self.rows {
            let w = Worst::of(&r.metrics);
            let (p10, p50, p90) = (r.percentile(10.0), r.percentile(50.0), r.percentile(90.0));
            let status = match &r.error {
                Some(e) => format!("ERROR: {}", e.replace('|', "/")),
                None if r.metrics.is_empty() => "no outputs".into(),
                None if w.passes(1e-3) && r.alone => "ok (rank 0 alone)".into(),
                None if w.passes(1e-3) => "ok".into(),
                None => "WRONG".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {p10:.2} | {p50:.2} | {p90:.2} | {:.1} % | {} | {:.2e} | {status} |",
                r.case.name(),
                r.tp,
                100.0 * (p90 - p10) / p50,
                r.rotation,
                w.rel_l2,
            );
        }
        for (tp, why) in &self.refused {
            let _ = writeln!(out, "\nTP {tp} refused: {why}");
        }
        out
    }

    /// Whether every row ran and matched the reference.
    pub fn all_ok(&self) -> bool {
        self.rows.iter().all(|r| {
            r.error.is_none() && !r.metrics.is_empty() && Worst::of(&r.metrics).passes(1e-3)
        })
    }
}

fn row_json(r: &Row) -> Json {
    let w = Worst::of(&r.metrics);
    json!({
        "case": r.case.name(),
        "tp": r.tp,
        "calls_per_graph": r.calls,
        "weight_copies": r.rotation,
        "per_call_us": { "p10": r.percentile(10.0), "p50": r.percentile(50.0), "p90": r.percentile(90.0),
                         "samples": r.per_call_us },
        "rank_window_ms": r.rank_ms,
        "rel_l2_worst": if r.metrics.is_empty() { Json::Null } else { json!(w.rel_l2) },
        "non_finite": w.non_finite,
        "error": r.error,
        "timed_ranks": if r.alone { "rank 0 alone".to_owned() } else { format!("{} ranks", r.tp) },
    })
}

/// Every source `mgpu-bench` compiles, for `--prebuild`.
pub fn sources(arch: Arch, policy: &SchedulePolicy) -> Vec<Result<Built, BenchError>> {
    let mut out = Vec::new();
    for same_device in [false, true] {
        for tp in [2, 4] {
            for case in BenchCase::ALL {
                match build(&case, tp, arch, same_device, policy) {
                    Ok(bs) => out.extend(bs.into_iter().map(Ok)),
                    Err(e) => out.push(Err(BenchError::Case {
                        tp,
                        case: case.name(),
                        source: Box::new(e),
                    })),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_builds_for_sm90_at_tp_2_and_4() {
        for s in sources(Arch::Sm90, &SchedulePolicy::default()) {
            if let Err(e) = s {
                panic!("{e}");
            }
        }
    }

    #[test]
    fn the_chain_reference_feeds_the_gemv_partial_to_the_allreduce() {
        let built = build(
            &BenchCase::Chain,
            2,
            Arch::Sm90,
            false,
            &SchedulePolicy::default(),
        )
        .unwrap();
        let data = case_data(&built, 7).unwrap();
        let a = &built[1].ir;
        let p = a.buffer_by_name("partial").unwrap();
        let g = built[0].ir.buffer_by_name("partial").unwrap();
        let first = evaluate(&built[0].ir, &data.inputs[0]).unwrap();
        for (rank, out) in data.inputs[1].iter().zip(&first) {
            let HostData::Tensor(t) = &rank[&p] else {
                panic!("a tensor")
            };
            assert_eq!(t, &out[&g]);
        }
        assert_eq!(data.reference.len(), 2);
    }

    wavefuse::kernel! {
        fn add_then(n: usize) {
            in x: f16[1, n];
            in r: f16[1, n];
            out h: f16[1, n];
            h = round_f16(x + r);
        }
        fn then_mul(n: usize) {
            in h: f16[1, n];
            in s: f16[1, n];
            out y: f16[1, n];
            y = round_f16(h * s);
        }
        fn both(n: usize) {
            in x: f16[1, n];
            in r: f16[1, n];
            in s: f16[1, n];
            out y: f16[1, n];
            y = round_f16(round_f16(x + r) * s);
        }
    }

    /// `--kernel-file a --kernel-file b`: `b`'s input `h` reads `a`'s output `h`; the chain's
    /// reference equals the one kernel computing both (evaluated on the same inputs); a kernel
    /// file at another TP is refused.
    #[test]
    fn a_chain_of_ones_own_kernels_feeds_outputs_to_inputs_by_name() {
        let own = |k: Kernel| crate::suite::UserKernel::new(k, "test").unwrap();
        let case = BenchCase::Own(std::sync::Arc::new(vec![
            own(add_then(1024)),
            own(then_mul(1024)),
        ]));
        assert_eq!(case.name(), "add_then + then_mul");
        let built = build(&case, 1, Arch::Sm90, true, &SchedulePolicy::default()).unwrap();
        let data = case_data(&built, 3).unwrap();
        let fused = both(1024);
        let mut inputs = RankInputs::new();
        for (name, (i, from)) in [("x", (0, "x")), ("r", (0, "r")), ("s", (1, "s"))] {
            let b = built[i].ir.buffer_by_name(from).unwrap();
            inputs.insert(
                fused.buffer_by_name(name).unwrap(),
                data.inputs[i][0][&b].clone(),
            );
        }
        let want = evaluate(&fused, &[inputs]).unwrap();
        let y = |k: &Kernel| k.buffer_by_name("y").unwrap();
        assert_eq!(data.reference[0][&y(&built[1].ir)], want[0][&y(&fused)]);
        let e = case.kernels(2).unwrap_err();
        assert!(e.to_string().contains("written for TP 1, not 2"), "{e}");
    }

    #[test]
    fn a_chain_without_an_allreduce_is_timed_one_rank_alone() {
        let policy = SchedulePolicy::default();
        let fused = build(&BenchCase::Fused, 4, Arch::Sm90, true, &policy).unwrap();
        assert!(!timed_alone(&fused, true), "the fused kernel communicates");
        let own = |k: Kernel| crate::suite::UserKernel::new(k, "test").unwrap();
        let chain = |tp: u32| {
            let k = |s: &str| {
                let text = s.replace("tp=1", &format!("tp={tp}"));
                own(wavefuse::ir::parse(&text).unwrap())
            };
            let case = BenchCase::Own(std::sync::Arc::new(vec![
                k(&add_then(1024).to_string()),
                k(&then_mul(1024).to_string()),
            ]));
            build(&case, tp, Arch::Sm90, true, &policy).unwrap()
        };
        assert!(
            timed_alone(&chain(2), true),
            "no allreduce at TP 2: rank 0 alone"
        );
        assert!(!timed_alone(&chain(2), false), "one rank per GPU already");
        assert!(!timed_alone(&chain(1), true), "TP 1: the one rank");
    }

    #[test]
    fn same_device_kernels_are_lowered_for_every_rank_on_one_gpu() {
        // One rank per GPU, the fused kernel keeps its K split (its grid alone fills a GPU); all
        // four ranks on one GPU must fit co-resident together, as in the suite (§5.9).
        let fused = |same| {
            build(
                &BenchCase::Fused,
                4,
                Arch::Sm90,
                same,
                &SchedulePolicy::default(),
            )
            .unwrap()
        };
        let per_device = &fused(false)[0].lowered;
        let same_device = &fused(true)[0].lowered;
        assert!(!wavefuse_codegen::lower::fit::fits_coresident(
            per_device,
            Arch::Sm90,
            4
        ));
        assert!(wavefuse_codegen::lower::fit::fits_coresident(
            same_device,
            Arch::Sm90,
            4
        ));
        assert!(same_device.grid < per_device.grid);
        for case in BenchCase::ALL {
            for b in build(&case, 4, Arch::Sm90, true, &SchedulePolicy::default()).unwrap() {
                assert!(
                    wavefuse_codegen::lower::fit::fits_coresident(&b.lowered, Arch::Sm90, 4),
                    "{}",
                    b.lowered.name
                );
            }
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let row = Row {
            case: BenchCase::Fused,
            tp: 2,
            per_call_us: vec![5.0, 1.0, 3.0, 2.0, 4.0],
            rank_ms: vec![],
            calls: 1,
            rotation: 1,
            metrics: vec![],
            error: None,
            alone: false,
        };
        assert_eq!(
            (
                row.percentile(10.0),
                row.percentile(50.0),
                row.percentile(90.0)
            ),
            (1.0, 3.0, 5.0)
        );
    }
}
