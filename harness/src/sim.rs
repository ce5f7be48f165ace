//! `wavefuse sim`: the protocol simulator (`wavefuse_codegen::sim`) on small-shape versions of the
//! kernel set, over many seeded schedules.
//!
//! The small kernels are the set's own kernels ([`KernelId::build`]) with every feature dimension
//! mapped to a small one ([`shrink`]): the structure, names, shardings, weight formats, GPTQ group
//! and INT8 block stay exactly as in the set, only the sizes change. A dimension the map does not
//! know is an error, so a new dimension in the set cannot slip through unshrunk.

use std::time::Instant;

use wavefuse::ir::reference::RankInputs;
use wavefuse::ir::{
    BufferDecl, BufferType, Builder, Kernel, OpKind, Tensor, Weight, ops::Slice, validate,
};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{AllreduceProtocol, LowerError, Schedule, lower};
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::sim::{
    Case, Finding, FindingKind, Limit, PeerTable, SimError, SimOptions, simulate_case,
    tolerance_for,
};

use crate::shapes::Model;
use crate::{KernelId, Shapes, Workload};

/// Per-rank feature sizes of the small shapes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SmallShapes {
    /// Hidden size (5120 in the model).
    pub hidden: usize,
    /// FFN width per rank, also the K-shard of the fused kernel (17408 / tp).
    pub ffn: usize,
    /// Q + gate width per rank (12288 / tp).
    pub q: usize,
    /// K (= V) width per rank (max(1024 / tp, 256)).
    pub kv: usize,
}

impl SmallShapes {
    /// The sizes the simulator runs by default: two GPTQ groups of 128 along the hidden size, one
    /// along the FFN shard, two INT8 blocks per row.
    pub const DEFAULT: SmallShapes = SmallShapes {
        hidden: 128,
        ffn: 128,
        q: 16,
        kv: 16,
    };

    /// One line for reports.
    pub fn describe(&self, s: &Shapes) -> String {
        format!(
            "hidden {}, ffn/rank {}, q/rank {}, kv/rank {} (model: {}, {}, {}, {}), batch {}, GPTQ group {} {}",
            self.hidden,
            self.ffn,
            self.q,
            self.kv,
            s.model.hidden,
            s.ffn_local(),
            s.q_local(),
            s.kv_local(),
            s.batch,
            s.gptq.group,
            s.gptq.zero.name()
        )
    }

    fn map(&self, s: &Shapes) -> Vec<(usize, usize)> {
        let (q, kv) = (s.q_local(), s.kv_local());
        vec![
            (s.model.hidden, self.hidden),
            (s.ffn_local(), self.ffn),
            (q, self.q),
            (kv, self.kv),
            (q + kv, self.q + self.kv),
            (q + 2 * kv, self.q + 2 * self.kv),
            (0, 0),
        ]
    }
}

/// The set's kernel `id` at `s`, with every feature dimension mapped by `small`.
pub fn small_kernel(id: KernelId, s: &Shapes, small: &SmallShapes) -> Result<Kernel, ShrinkError> {
    shrink(&id.build(s), &small.map(s))
}

/// Rebuild `k` with every feature dimension (last axis of tensors, K and N of weights, slice
/// bounds) replaced through `map`. Batch axes, groups and blocks are kept.
pub fn shrink(k: &Kernel, map: &[(usize, usize)]) -> Result<Kernel, ShrinkError> {
    let dim = |d: usize, what: &dyn Fn() -> String| {
        map.iter()
            .find(|(from, _)| *from == d)
            .map(|(_, to)| *to)
            .ok_or_else(|| ShrinkError::NoSmallSize {
                what: what(),
                dim: d,
            })
    };
    let mut b = Builder::new(k.name(), k.tp());
    for (_, d) in k.buffers() {
        let what = || format!("buffer `{}`", d.name);
        let ty = match &d.ty {
            BufferType::Tensor(t) => {
                let mut shape = t.shape.clone();
                let last = shape
                    .last_mut()
                    .ok_or_else(|| ShrinkError::Scalar(what()))?;
                *last = dim(*last, &what)?;
                BufferType::Tensor(Tensor {
                    dtype: t.dtype,
                    shape,
                })
            }
            BufferType::Weight(w) => BufferType::Weight(Weight {
                format: w.format,
                k: dim(w.k, &what)?,
                n: dim(w.n, &what)?,
            }),
        };
        let decl = match d.role {
            wavefuse::ir::Role::Input => BufferDecl::input(&d.name, ty, d.sharding),
            wavefuse::ir::Role::Output => BufferDecl::output(&d.name, ty, d.sharding),
        };
        b.param(decl.space(d.space).index_space(d.index_space));
    }
    for (op, data) in k.ops() {
        let what = || format!("op {op}");
        let kind = match &data.kind {
            OpKind::Slice(sl) => OpKind::Slice(Slice {
                x: sl.x,
                start: dim(sl.start, &what)?,
                len: dim(sl.len, &what)?,
            }),
            other => other.clone(),
        };
        b.op(kind);
    }
    let small = b.finish();
    validate(&small).map_err(|e| ShrinkError::Invalid {
        kernel: k.name().to_owned(),
        source: Box::new(e),
    })?;
    Ok(small)
}

/// Why a kernel could not be rebuilt at other feature dimensions ([`shrink`]).
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// A dimension the map has no size for.
    #[error("{what}: no small size for dimension {dim}")]
    NoSmallSize {
        /// The buffer or op that has it.
        what: String,
        /// The dimension.
        dim: usize,
    },
    /// A tensor without axes.
    #[error("{0}: scalar tensor")]
    Scalar(String),
    /// The rebuilt kernel does not validate.
    #[error("the small `{kernel}` is invalid: {source}")]
    Invalid {
        /// The kernel's name.
        kernel: String,
        /// What the validator found.
        source: Box<wavefuse::ir::ValidationError>,
    },
}

/// The schedule the simulator uses: the target's default with two-wave workgroups (so cross-wave
/// LDS reductions run): INT4 GEMVs keep their 32-column tiles with fewer K slices, FP16 GEMVs keep
/// one wave per column, and kernels without a GEMV take half a column per lane, so every kernel
/// has at least two workgroups per rank at the small shapes (a grid barrier that synchronises
/// something, one flag per workgroup).
pub fn small_schedule(arch: Arch, kernel: &Kernel) -> Schedule {
    let mut s = Schedule::default_for(arch, kernel);
    let wg = 2 * arch.wave_size();
    let has_gemv = kernel
        .ops()
        .any(|(_, o)| matches!(o.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)));
    let int8 = kernel.ops().any(|(_, o)| matches!(&o.kind, OpKind::AllReduce(a) if a.compression != wavefuse::ir::ops::Compression::None));
    if !has_gemv && !int8 {
        s.workgroup_size = wg;
        s.columns_per_workgroup = wg / 2;
        return s;
    }
    if s.workgroup_size > wg {
        let ratio = s.workgroup_size / wg;
        s.workgroup_size = wg;
        if s.threads_per_column > 1 && s.threads_per_column < arch.wave_size() {
            // INT4: fewer K slices, the same 32-column tile.
            s.threads_per_column = (s.threads_per_column / ratio).max(1);
        } else {
            s.columns_per_workgroup = (s.columns_per_workgroup / ratio).max(1);
        }
    }
    s
}

/// A kernel ready to simulate.
pub struct Prepared {
    /// The small op-level kernel.
    pub ir: Kernel,
    /// Its lowering.
    pub lowered: LoweredKernel,
    /// The set's shapes it was built from (None: a kernel from a file, at its own shapes).
    pub shapes: Option<Shapes>,
    /// How the host fills the peer tables.
    pub peer_table: PeerTable,
}

/// Why a kernel could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The small kernel could not be built.
    #[error(transparent)]
    Shrink(#[from] ShrinkError),
    /// The lowering failed or does not support the kernel yet.
    #[error("lowering: {0}")]
    Lower(#[from] LowerError),
}

impl PrepareError {
    /// Whether the lowering does not support the kernel yet (as opposed to failing).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, PrepareError::Lower(LowerError::Unsupported(_)))
    }
}

/// What to simulate besides the kernel: TP size, target, batch, allreduce protocol.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// TP group size.
    pub tp: u32,
    /// Target whose lowering runs.
    pub arch: Arch,
    /// Tokens decoded at once.
    pub batch: usize,
    /// Allreduce protocol (None: the schedule's default).
    pub protocol: Option<AllreduceProtocol>,
    /// How the simulated host fills the peer tables ([`PeerTable::Rotated`] plants the host-side
    /// defect of DESIGN.md §5.5, to see what the simulator reports).
    pub peer_table: PeerTable,
    /// The model whose kernel is shrunk (its GPTQ layout and RMSNorm epsilon are kept; its
    /// dimensions become the small ones): Qwen 3.5 27B's by default.
    pub model: Model,
}

impl Config {
    /// Batch 1, the default protocol, the shared peer rule.
    pub fn new(tp: u32, arch: Arch) -> Self {
        Config {
            tp,
            arch,
            batch: 1,
            protocol: None,
            peer_table: PeerTable::Shared,
            model: Model::QWEN27B,
        }
    }
}

/// Build the small kernel and lower it for `arch` with [`small_schedule`].
pub fn prepare(
    id: KernelId,
    tp: u32,
    arch: Arch,
    small: &SmallShapes,
) -> Result<Prepared, PrepareError> {
    prepare_config(id, &Config::new(tp, arch), small)
}

/// [`prepare`] with a batch size and a protocol.
pub fn prepare_config(
    id: KernelId,
    c: &Config,
    small: &SmallShapes,
) -> Result<Prepared, PrepareError> {
    let shapes = Shapes {
        batch: c.batch,
        ..Shapes::of(c.model, c.tp)
    };
    let ir = small_kernel(id, &shapes, small)?;
    let mut schedule = small_schedule(c.arch, &ir);
    if let Some(p) = c.protocol {
        schedule = schedule.with_protocol(p);
    }
    let lowered = lower(&ir, c.arch, &schedule)?;
    Ok(Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: c.peer_table,
    })
}

/// Inputs for `launches` launches of data set `i`: different data in every launch, so data left
/// from an earlier launch is a wrong answer.
pub fn schedule_inputs(ir: &Kernel, seed: u64, i: u64, launches: u32) -> Vec<Vec<RankInputs>> {
    (0..launches)
        .map(|l| Workload::new(seed ^ (i << 20) ^ (u64::from(l) << 52)).inputs(ir))
        .collect()
}

/// Data sets per sweep: schedule i runs on data set i mod DATA_SETS (the schedule seed differs on
/// every schedule; the data, and its f64 reference, are built once per set).
pub const DATA_SETS: u64 = 8;

/// A finding seen over a sweep: on how many schedules, and the first one.
#[derive(Clone, Debug)]
pub struct SweepFinding {
    /// The finding as first seen.
    pub first: Finding,
    /// The schedule it was first seen on.
    pub schedule: u64,
    /// Schedules it was seen on.
    pub schedules: u64,
}

/// The result of a sweep.
#[derive(Clone, Debug, Default)]
pub struct Sweep {
    /// Schedules run.
    pub schedules: u64,
    /// The sweep stopped early at an interrupt (SIGINT/SIGTERM).
    pub interrupted: bool,
    /// Schedules with at least one finding.
    pub failing: u64,
    /// Findings merged by kind and message site.
    pub findings: Vec<SweepFinding>,
    /// The largest relative L2 error of any output (over all schedules, launches, ranks).
    pub max_rel_l2: f64,
    /// Scheduling steps, summed.
    pub steps: u64,
    /// Lane instructions executed, summed.
    pub instructions: u64,
    /// Wall time in seconds.
    pub seconds: f64,
    /// The simulator budget that stopped the sweep (the kernel is too large to simulate within
    /// it): what was not run is not checked — no verdict on the kernel. Findings made before it
    /// stopped are still defects.
    pub not_checked: Option<Limit>,
}

/// Launches per schedule: enough to run epochs 1..3 on the same counters and flags.
pub const LAUNCHES: u32 = 3;

/// Run `schedules` schedules (indices `first..first + schedules`) of a prepared kernel, each
/// [`LAUNCHES`] launches back to back.
pub fn sweep(
    p: &Prepared,
    seed: u64,
    first: u64,
    schedules: u64,
    progress: impl FnMut(u64, u64),
) -> Result<Sweep, Box<SimError>> {
    sweep_replayed(p, seed, first, schedules, LAUNCHES, progress)
}

/// [`sweep`] with `launches` launches per schedule: a replayed graph. Every launch takes the same
/// arguments (the same arrays; the host writes new data into the inputs before each, as an engine
/// does into a captured graph's static buffers); a generated kernel's epoch advances on the device
/// (DESIGN.md §5.4), so nothing the host passes changes between launches.
pub fn sweep_replayed(
    p: &Prepared,
    seed: u64,
    first: u64,
    schedules: u64,
    launches: u32,
    progress: impl FnMut(u64, u64),
) -> Result<Sweep, Box<SimError>> {
    sweep_replayed_from(p, seed, first, schedules, launches, &[], progress)
}

/// [`sweep_replayed`] from the synchronisation state `preset` ([`SimOptions::preset`]: array
/// parameters by name and the value each element holds before the first launch) instead of
/// zeroed state.
pub fn sweep_replayed_from(
    p: &Prepared,
    seed: u64,
    first: u64,
    schedules: u64,
    launches: u32,
    preset: &[(String, u32)],
    mut progress: impl FnMut(u64, u64),
) -> Result<Sweep, Box<SimError>> {
    let start = Instant::now();
    let mut out = Sweep::default();
    // Before any data is built: a kernel the simulator cannot hold is not checked.
    let first_opts = SimOptions::sweep(seed, first);
    match wavefuse_codegen::sim::fits(&p.lowered, LAUNCHES, &first_opts) {
        Err(SimError::TooLarge(limit)) => {
            out.not_checked = Some(limit);
            return Ok(out);
        }
        Err(e) => return Err(Box::new(e)),
        Ok(()) => {}
    }
    let mut cases: Vec<Option<Case>> = vec![None; DATA_SETS as usize];
    for i in first..first + schedules {
        if wavefuse_runtime::compile::child::interrupted() {
            out.interrupted = true;
            break;
        }
        let set = (i % DATA_SETS) as usize;
        if cases[set].is_none() {
            let inputs = schedule_inputs(&p.ir, seed, set as u64, launches);
            cases[set] = Some(Case::new(&p.ir, inputs)?);
        }
        let case = cases[set].as_ref().expect("built");
        let opts = SimOptions {
            peer_table: p.peer_table,
            preset: preset.to_vec(),
            ..SimOptions::sweep(seed, i)
        };
        let rep = match simulate_case(&p.lowered, &p.ir, case, &opts) {
            Ok(rep) => rep,
            Err(SimError::TooLarge(limit)) => {
                out.not_checked = Some(limit);
                break;
            }
            Err(e) => return Err(Box::new(e)),
        };
        out.schedules += 1;
        out.steps += rep.stats.steps;
        out.instructions += rep.stats.instructions;
        let m = rep.max_rel_l2();
        if m.is_nan() || m > out.max_rel_l2 {
            out.max_rel_l2 = m;
        }
        if !rep.findings.is_empty() {
            out.failing += 1;
        }
        let limit = rep.limit(&opts);
        for f in rep.findings {
            match out
                .findings
                .iter_mut()
                .find(|s| s.first.kind == f.kind && s.first.site == f.site)
            {
                Some(s) => s.schedules += 1,
                None => out.findings.push(SweepFinding {
                    first: f,
                    schedule: i,
                    schedules: 1,
                }),
            }
        }
        progress(out.schedules, out.failing);
        if limit.is_some() {
            out.not_checked = limit;
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The report printed after a sweep.
pub fn summary(p: &Prepared, s: &Sweep) -> String {
    let tol =
        p.ir.outputs()
            .map(|b| tolerance_for(&p.ir, dtype(&p.ir, b)))
            .fold(f64::INFINITY, f64::min);
    let mut out = format!(
        "{} schedules in {:.1} s ({:.1} schedules/s; per schedule {:.0} scheduling steps, {:.0} lane instructions); {} with findings; max relative L2 error {:.2e} (tolerance {:.0e})\n",
        s.schedules,
        s.seconds,
        s.schedules as f64 / s.seconds.max(1e-9),
        s.steps as f64 / s.schedules.max(1) as f64,
        s.instructions as f64 / s.schedules.max(1) as f64,
        s.failing,
        s.max_rel_l2,
        tol
    );
    if let Some(limit) = &s.not_checked {
        out.push_str(&format!(
            "not checked: too large to simulate (needs {limit}); the schedules run before it \
             stopped are counted above\n"
        ));
    }
    let mut kinds: Vec<FindingKind> = s.findings.iter().map(|f| f.first.kind).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        for f in s.findings.iter().filter(|f| f.first.kind == kind) {
            out.push_str(&format!(
                "  {} [on {} schedules, first schedule {}]\n",
                f.first, f.schedules, f.schedule
            ));
        }
    }
    out
}

pub(crate) fn dtype(k: &Kernel, b: wavefuse::ir::Buffer) -> wavefuse::ir::ScalarType {
    match &k.buffer(b).expect("own buffer").ty {
        BufferType::Tensor(t) => t.dtype,
        BufferType::Weight(_) => wavefuse::ir::ScalarType::F16,
    }
}

/// A scaled-down instance of a kernel at a model's shapes, for the simulator: the same kernel
/// (ops, formats, shardings, K dimensions) with every output-feature dimension N of its weights
/// that is not also a K dimension cut to a few workgroups' columns, lowered with the same
/// schedule (the same lowering decisions, a smaller grid).
#[derive(Clone, Debug)]
pub struct ScaledDown {
    /// The op-level kernel at the smaller N.
    pub ir: Kernel,
    /// Its lowering with the full kernel's schedule.
    pub lowered: LoweredKernel,
    /// What was cut, for reports: `N 17408 → 512 (4 of 136 workgroups per rank)`.
    pub what: String,
}

/// Workgroups of columns a scaled-down instance keeps per cut dimension (at least two, so
/// workgroups still synchronise with each other).
pub const SCALED_WORKGROUPS: usize = 2;

/// [`ScaledDown`] of `ir` lowered as `full` (its lowering with `schedule`), or None when nothing
/// can be cut (no weight, or every N is also a K) or the cut kernel does not lower with the
/// same schedule.
pub fn scaled_down(
    ir: &Kernel,
    arch: Arch,
    schedule: &Schedule,
    full: &LoweredKernel,
) -> Option<ScaledDown> {
    // (global, per-rank) shapes of the weights: the map cuts the declared (global) dimensions,
    // the tile counts the per-rank ones.
    let weights: Vec<(Weight, Weight)> = ir
        .buffers()
        .filter_map(|(_, d)| match (&d.ty, d.local_type()) {
            (BufferType::Weight(g), BufferType::Weight(l)) => Some((*g, l)),
            _ => None,
        })
        .collect();
    // The cut: the fewest columns per rank, in steps of 128 (whole INT4 zero-point words and
    // INT8 blocks), that still give [`SCALED_WORKGROUPS`] workgroups per rank, lowered with the
    // same schedule.
    let want = SCALED_WORKGROUPS.min(full.grid as usize) as u32;
    let largest = weights.iter().map(|(_, l)| l.n).max().unwrap_or(0);
    let mut cut = 128;
    while cut < largest {
        let map: Vec<(usize, usize)> = weights
            .iter()
            .filter(|(g, l)| cut < l.n && !weights.iter().any(|(v, _)| v.k == g.n))
            .map(|(g, l)| (g.n, cut * (g.n / l.n.max(1))))
            .collect();
        if map.is_empty() {
            return None;
        }
        let full_map: Vec<(usize, usize)> = dims(ir)
            .into_iter()
            .map(|d| map.iter().find(|m| m.0 == d).copied().unwrap_or((d, d)))
            .collect();
        let lowered = shrink(ir, &full_map)
            .ok()
            .and_then(|small| Some((lower(&small, arch, schedule).ok()?, small)));
        if let Some((lowered, small)) = lowered.filter(|(k, _)| k.grid >= want) {
            let mut map = map;
            map.dedup();
            return Some(described(small, lowered, &map, full));
        }
        cut *= 2;
    }
    None
}

fn described(
    ir: Kernel,
    lowered: LoweredKernel,
    map: &[(usize, usize)],
    full: &LoweredKernel,
) -> ScaledDown {
    let cuts: Vec<String> = map.iter().map(|(a, b)| format!("N {a} → {b}")).collect();
    let what = format!(
        "scaled down: {} ({} of {} workgroups per rank, the same schedule)",
        cuts.join(", "),
        lowered.grid,
        full.grid
    );
    ScaledDown { ir, lowered, what }
}

/// Every feature dimension of `k`: last axes of tensors, K and N of weights, slice bounds.
fn dims(k: &Kernel) -> Vec<usize> {
    let mut out = vec![0];
    for (_, d) in k.buffers() {
        match &d.ty {
            BufferType::Tensor(t) => out.extend(t.shape.last().copied()),
            BufferType::Weight(w) => out.extend([w.k, w.n]),
        }
    }
    for (_, o) in k.ops() {
        if let OpKind::Slice(s) = &o.kind {
            out.extend([s.start, s.len]);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
