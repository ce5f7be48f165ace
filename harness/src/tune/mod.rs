//! `wavefuse tune` (issue 7): search the schedule of a kernel at a shape, keep the winner.
//!
//! 1. The space ([`space`]): [`Schedule`](wavefuse_codegen::lower::Schedule) values around [`Schedule::default_for`](wavefuse_codegen::lower::Schedule::default_for), in priority
//!    order, cut at `--budget` distinct sources ([`candidates::build`]: what `lower` accepts,
//!    every rank's grid co-resident when the kernel has a grid barrier, identical sources once).
//! 2. Compile ([`candidates::compile_all`]) on several threads through the compile cache, and the
//!    resource filter: no spills, occupancy at least the default's (sm_90) or the hand-written
//!    kernel's (gfx906). The report gives the compile rate (candidates per second).
//! 3. Choose: on an sm_90 GPU by event timing with cold rotating inputs ([`gpu`]), every candidate
//!    checked against the f64 reference first; for gfx906 by a documented static model
//!    ([`statics`]) with a simulator check. Without a GPU, for sm_90: compile and filter only,
//!    and it says that no timing was possible.
//! 4. Keep ([`store`]): the winner per (kernel, shape, arch, device) in `tuned.toml` in the cache
//!    directory and in `--store PATH`; `--schedule tuned` ([`select`]) reads them and the
//!    committed `kernels-gen/tuned/tuned.toml`.
//! 5. Report ([`report`]): table, JSON, Markdown.

pub mod candidates;
pub mod gpu;
pub mod report;
pub mod select;
pub mod space;
pub mod statics;
pub mod store;

use std::sync::{Arc, mpsc};
use std::time::Instant;

use indicatif::ProgressBar;
use wavefuse::ir::Kernel;
use wavefuse_codegen::Arch;
use wavefuse_runtime::Cache;
use wavefuse_runtime::compile::Bounds;
use wavefuse_runtime::exec;

use crate::Workload;
use crate::ab::handwritten::{Found, find_reference, reference_dir};
use crate::ab::{shape_name, usage_of};
use crate::policy::{Placement, Ranks, SchedulePolicy, communicates, run_placement};
use crate::provenance::{Provenance, compiler_version};
use crate::suite::{self, CaseSpec, ShapeKind};

use candidates::{Compiled, Space};
use report::{Basis, Candidate, CaseReport, Header, TuneReport, pick_winner};
use store::{ANY_DEVICE, Entry, Key, Method};

/// Default candidates per kernel and shape.
pub const DEFAULT_BUDGET: usize = 200;
/// Candidates per kernel and shape with `--quick`.
pub const QUICK_BUDGET: usize = 32;

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Candidates per kernel and shape.
    pub budget: usize,
    /// The quick space.
    pub quick: bool,
    /// Timed launches per series.
    pub iters: usize,
    /// Untimed launches per series.
    pub warmup: usize,
    /// Compiler threads.
    pub threads: usize,
    /// Workload seed.
    pub seed: u64,
    /// Commit of the binary.
    pub commit: String,
    /// `--min-occupancy`.
    pub min_occupancy: Option<u32>,
    /// `--deadline`, from the start of the run.
    pub deadline: Option<Instant>,
    /// How a TP case's ranks run and are timed on the one GPU (no explicit placement).
    pub ranks: Ranks,
    /// Where a TP case's ranks run (`--placement`); None: [`run_placement`]'s default — one
    /// rank per device without a GPU.
    pub placement: Option<Placement>,
    /// The GPU runtime timed on.
    pub runtime: crate::suite::GpuRuntime,
}

/// One kernel at one shape.
#[derive(Clone, Debug)]
pub struct Target {
    /// The case (model shapes).
    pub spec: CaseSpec,
    /// Its op-level kernel.
    pub ir: Kernel,
}

impl Target {
    /// `kernel@shape`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.spec.kernel.name(), shape_name(&self.spec))
    }
}

/// `wavefuse tune` as a library call: search the schedule space of each of `targets` (the set's
/// kernels or a user's, [`suite::UserKernel::case`]) for `arch`. On sm_90 with a GPU and
/// `use_gpu`, the candidates are timed on it; otherwise (and always on gfx906) they are compiled
/// and ranked by the static model, and the report says why. The winners are not stored:
/// [`entries`] gives them as tuned-store entries ([`store::Store`]).
pub fn run(targets: &[Target], o: &Settings, arch: Arch, use_gpu: bool) -> TuneReport {
    let no_gpu = (!use_gpu).then_some("not asked to use a GPU");
    search(targets, o, arch, no_gpu, &ProgressBar::hidden())
}

/// The tuner, its progress on `bar`: each of `targets` searched for `arch`, timed on a GPU
/// unless `no_gpu` gives why not (then compiled and ranked by the static model).
pub fn search(
    targets: &[Target],
    o: &Settings,
    arch: Arch,
    no_gpu: Option<&str>,
    bar: &ProgressBar,
) -> TuneReport {
    let timed = match no_gpu {
        None => gpu::run(targets, o, arch, bar).map_err(|e| e.to_string()),
        Some(why) => Err(why.into()),
    };
    let mut report = match timed {
        Ok(r) => r,
        Err(reason) => without_timing(targets, o, arch, reason, bar),
    };
    // A signal stops the compilers (their candidates fail as interrupted) and the loop over
    // targets: whatever won among the rest is not a result.
    report.interrupted = wavefuse_runtime::compile::child::interrupted();
    report
}

impl Settings {
    /// `wavefuse tune`'s defaults: [`DEFAULT_BUDGET`] candidates per case, the full space, 100
    /// timed launches after 10, the default workload seed, no occupancy floor or deadline.
    pub fn new() -> Settings {
        Settings {
            budget: DEFAULT_BUDGET,
            quick: false,
            iters: 100,
            warmup: 10,
            threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(1, 12),
            seed: Workload::DEFAULT_SEED,
            commit: "unknown".into(),
            min_occupancy: None,
            deadline: None,
            ranks: Ranks::default(),
            placement: None,
            runtime: crate::suite::GpuRuntime::Auto,
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::new()
    }
}

impl Target {
    /// A user's kernel at its own shapes.
    pub fn user(kernel: Arc<suite::UserKernel>) -> Target {
        Target {
            spec: kernel.case(),
            ir: kernel.ir.clone(),
        }
    }
}

/// The kernels at the shapes, validated.
/// The report's header before anything ran.
pub fn header(o: &Settings, arch: Arch, basis: Basis) -> Header {
    Header {
        mode: if basis == Basis::Timed {
            "timed"
        } else {
            "static"
        }
        .into(),
        no_timing: None,
        arch: arch.name().into(),
        provenance: Provenance::without_gpu(compiler_version(arch), &o.commit),
        copy_gbps: Vec::new(),
        seed: o.seed,
        warmup: o.warmup,
        iters: o.iters,
        finalists: 0,
        final_repeats: 0,
        budget: o.budget,
        quick: o.quick,
        basis: Some(basis),
    }
}

/// The effective default (as `wavefuse ab` lowers it at the same placement: tiles widened when
/// the ranks sharing a device would not fit on it) and the space after lowering, with `gpus`
/// GPUs (0: none, [`run_placement`]); a report of why not otherwise.
pub fn lowered_space(
    t: &Target,
    arch: Arch,
    o: &Settings,
    gpus: usize,
) -> Result<(CaseReport, Space), Box<CaseReport>> {
    let mut case = CaseReport {
        kernel: t.spec.kernel.name().into(),
        shape: shape_name(&t.spec),
        store_key: t.spec.store_key(),
        budgeted: budgeted(&t.spec),
        floor_from: "default".into(),
        ..CaseReport::default()
    };
    // The baseline is the default policy's schedule: what `ab` and the suite time untuned, at
    // the placement its candidates are timed at.
    let placement = run_placement(o.placement, o.ranks, &t.ir, gpus);
    case.alone = placement == Placement::PerDevice && t.spec.tp > 1 && !communicates(&t.ir);
    let base = match SchedulePolicy::default().resolve(&t.spec, arch, &t.ir, placement) {
        Ok(r) => r.code,
        Err(e) => {
            case.note = format!("the default schedule does not lower: {e}");
            return Err(Box::new(case));
        }
    };
    let schedules: Vec<_> = space::enumerate(arch, &t.ir, o.quick)
        .into_iter()
        .filter(|s| *s != base.schedule)
        .collect();
    let space = candidates::build_after(
        &t.ir,
        arch,
        Some(base),
        &schedules,
        o.budget,
        placement.ranks_per_device(t.spec.tp),
    );
    case.enumerated = space.enumerated;
    case.considered = space.considered;
    case.rejected_by_lower = space.rejected;
    case.rejected_examples = space.rejected_examples.clone();
    case.not_coresident = space.not_coresident;
    case.duplicates = space.duplicates;
    case.lowering_s = space.seconds;
    let Some(first) = space.kept.first() else {
        case.note = "no candidate lowers".into();
        return Err(Box::new(case));
    };
    let bytes: u64 =
        t.ir.buffers()
            .map(|(_, d)| d.local_type().bytes() as u64)
            .sum();
    case.bytes_per_group = bytes * u64::from(if case.alone { 1 } else { t.spec.tp });
    case.dims = suite::Generated {
        spec: t.spec.clone(),
        ir: t.ir.clone(),
        placement,
        code: first.clone(),
    }
    .dims();
    let family = space::Family::of(&t.ir);
    case.candidates = space
        .kept
        .iter()
        .enumerate()
        .map(|(i, g)| Candidate::new(i, space::summary(&g.schedule, family), g.schedule.clone()))
        .collect();
    if let Some(f) = o.min_occupancy {
        case.occupancy_floor = Some(f);
        case.floor_from = "command line".into();
    } else if arch == Arch::Gfx906 {
        hand_floor(&mut case, &first.lowered, &t.ir);
    }
    Ok((case, space))
}

/// gfx906: the hand-written kernel's occupancy as the floor, when there is one.
fn hand_floor(
    case: &mut CaseReport,
    lowered: &wavefuse_codegen::lowered::LoweredKernel,
    ir: &Kernel,
) {
    let Found::Hand(h) = find_reference(reference_dir(None).as_deref(), lowered, ir) else {
        return;
    };
    let Ok(req) = h.request() else { return };
    let cache = Cache::from_env();
    let compiler = crate::pipeline::compiler(Arch::Gfx906, crate::pipeline::Purpose::Run);
    let Ok((a, _)) = exec::artifact_for(&cache, compiler.as_ref(), &req) else {
        return;
    };
    if let Ok(u) = usage_of(
        &a,
        &h.abi.symbol,
        h.workgroup_size(),
        h.abi.dynamic_lds_bytes,
    )
    .usage
    {
        case.occupancy_floor = Some(u.occupancy);
        case.floor_from = "hand-written".into();
    }
}

/// Whether the committed budgets (`kernels-gen/budgets.toml`) apply to `spec`: they are written
/// for the set's kernels at the model's shapes at batch 1 (what `wavefuse check` and the CI
/// budget tests compile). At a larger batch the default itself needs more registers (the gfx906
/// `gemv_int4` default: 73 VGPRs at batch 8, 62 at batch 1), and a batch-1 budget there would reject it and
/// every candidate near it; a user's kernel has no committed budget.
pub fn budgeted(spec: &CaseSpec) -> bool {
    spec.kernel.set_id().is_some() && spec.batch == 1 && spec.shape == ShapeKind::Model
}

/// Records a compile result on its candidate, and the resource filter's verdict: no spills,
/// occupancy at least the floor (the default's unless something else set it), and — for a kernel
/// of the set at the shapes the committed budgets are for ([`budgeted`]) — within the committed
/// budget (`kernels-gen/budgets.toml`) for this kernel, arch and TP size.
pub fn record_compile(case: &mut CaseReport, c: &mut Compiled, arch: Arch, spec: &CaseSpec) {
    let tp = spec.tp;
    let budgeted = budgeted(spec);
    let floor = match (case.occupancy_floor, c.index, &c.resources.usage) {
        (None, 0, Ok(u)) => {
            case.occupancy_floor = Some(u.occupancy);
            Some(u.occupancy)
        }
        (f, _, _) => f,
    };
    let cand = &mut case.candidates[c.index];
    cand.compile_ms = Some(c.ms);
    cand.cached = c.cached;
    match (&c.artifact, &c.resources.usage) {
        (Err(e), _) => {
            case.compile_failed += 1;
            cand.rejected = Some(format!("compile: {e}"));
        }
        (Ok(_), Err(e)) => {
            cand.rejected = Some(format!("no resource report: {e}"));
        }
        (Ok(_), Ok(u)) => {
            cand.registers = Some(u.registers);
            cand.spills = Some(u.spills);
            cand.occupancy = Some(u.occupancy);
            let over = c
                .usage
                .as_ref()
                .filter(|_| budgeted)
                .zip(crate::generate::budgets().ok())
                .map(|(r, b)| b.check(arch, &case.kernel, tp, r, c.workgroup_size))
                .filter(|v| !v.violations.is_empty());
            cand.rejected = if u.spills > 0 {
                Some(format!("{} spilled", u.spills))
            } else if floor.is_some_and(|f| u.occupancy < f) {
                Some(format!(
                    "occupancy {} < {}",
                    u.occupancy,
                    floor.unwrap_or(0)
                ))
            } else {
                over.map(|v| format!("budget: {}", v.violations.join(", ")))
            };
        }
    }
    if c.artifact.is_ok() {
        if c.cached {
            case.cached += 1;
        } else {
            case.compiled_fresh += 1;
        }
    }
    cand.resources_ok = cand.rejected.is_none();
    if !cand.resources_ok && c.artifact.is_ok() {
        case.resource_rejected += 1;
    }
}

/// The compile stage's rate.
pub fn compile_rates(case: &mut CaseReport, seconds: f64, threads: usize) {
    case.compile_s = seconds;
    case.compile_threads = threads;
    case.compile_rate = case.candidates.len() as f64 / seconds.max(1e-9);
}

/// Bandwidth of every timed candidate against the copy bandwidth.
pub fn bandwidth(case: &mut CaseReport, copy_gbps: Option<f64>) {
    for c in &mut case.candidates {
        if let Some(m) = c.best_median_us() {
            let gbps = case.bytes_per_group as f64 / (m * 1e-6) / 1e9;
            c.gbps = Some(gbps);
            c.copy_fraction = copy_gbps.map(|b| gbps / b);
        }
    }
}

/// The winner and its ratio to the default.
pub fn conclude(case: &mut CaseReport, basis: Basis) {
    case.winner = pick_winner(&case.candidates, basis);
    let default = case.candidates.first().and_then(Candidate::best_median_us);
    let win = case
        .winner
        .and_then(|w| case.candidates[w].best_median_us());
    case.speedup = match (default, win) {
        (Some(d), Some(w)) if basis == Basis::Timed => Some(d / w),
        _ => None,
    };
}

/// Compile and filter every target; for gfx906 also rank by the static model.
fn without_timing(
    targets: &[Target],
    o: &Settings,
    arch: Arch,
    reason: String,
    bar: &ProgressBar,
) -> TuneReport {
    let start = Instant::now();
    let basis = Basis::StaticModel;
    let mut header = header(o, arch, basis);
    header.no_timing = Some(reason);
    if arch == Arch::Sm90 {
        header.basis = None;
        header.mode = "compile only".into();
    }
    let cache = Cache::from_env();
    let mut cases = Vec::new();
    for t in targets {
        if wavefuse_runtime::compile::child::interrupted() {
            break;
        }
        bar.set_message(format!("{}: lowering the space", t.label()));
        let (mut case, space) = match lowered_space(t, arch, o, 0) {
            Ok(x) => x,
            Err(c) => {
                cases.push(*c);
                continue;
            }
        };
        bar.set_length(bar.length().unwrap_or(0) + space.kept.len() as u64);
        let compile_start = Instant::now();
        let (tx, rx) = mpsc::channel::<Compiled>();
        let mut results = Vec::new();
        std::thread::scope(|scope| {
            let kept = &space.kept;
            let cache = &cache;
            scope.spawn(move || candidates::compile_all(kept, arch, o.threads, cache, tx));
            for c in rx {
                bar.set_message(format!("{}: compiled candidate {}", t.label(), c.index));
                bar.inc(1);
                results.push(c);
            }
        });
        compile_rates(&mut case, compile_start.elapsed().as_secs_f64(), o.threads);
        results.sort_by_key(|c| c.index);
        let mut unread = None;
        for mut c in results {
            record_compile(&mut case, &mut c, arch, &t.spec);
            if let (Ok(a), Some(occ)) = (&c.artifact, case.candidates[c.index].occupancy) {
                let modelled = crate::generate::modelled_mi50_image(
                    &space.kept[c.index].lowered,
                    &a.image,
                    t.spec.batch,
                    occ,
                    &Bounds::default(),
                );
                case.candidates[c.index].modelled_us = match modelled {
                    Ok(m) => m.map(|m| m.us),
                    Err(e) => {
                        unread.get_or_insert(e.to_string());
                        None
                    }
                };
            }
        }
        if arch == Arch::Gfx906 {
            rank_statically(&mut case, t, o, unread.as_deref());
        } else {
            case.note = "nothing timed: no winner without a GPU".into();
        }
        cases.push(case);
    }
    TuneReport {
        header,
        cases,
        stored_in: Vec::new(),
        seconds: start.elapsed().as_secs_f64(),
        warnings: report::cache_warnings(&cache),
        interrupted: false,
    }
}

/// gfx906: the static model's cost of every candidate within budget; the cheapest are checked
/// in the simulator, in order, until one passes; that one wins.
/// `unread`: why a candidate's code object could not be disassembled, if one could not.
fn rank_statically(case: &mut CaseReport, t: &Target, o: &Settings, unread: Option<&str>) {
    let family = space::Family::of(&t.ir);
    let k = gemv_k(&t.ir);
    for c in &mut case.candidates {
        c.static_cost = statics::cost(&c.schedule, family, t.spec.batch, k);
    }
    if case.candidates.iter().all(|c| c.static_cost.is_none()) {
        case.note = "the static model covers INT4 GEMVs only: the default stays".into();
        return;
    }
    // Rank by the MI50 time model when every candidate in the running has its prediction (hipcc's
    // code counted); else by the instruction-count model for all, and say why.
    let by_time = case
        .candidates
        .iter()
        .filter(|c| c.resources_ok)
        .all(|c| c.modelled_us.is_some());
    if by_time {
        case.note = "ranked by the MI50 time model (modelled, not measured)".into();
    } else {
        let why = unread.unwrap_or("a candidate without a countable INT4 hot loop");
        case.note = format!(
            "ranked by instructions per weight: the MI50 time model could not read every \
             candidate's hot loop ({why})"
        );
        for c in &mut case.candidates {
            c.modelled_us = None;
        }
    }
    let mut order: Vec<usize> = (0..case.candidates.len())
        .filter(|&i| case.candidates[i].resources_ok)
        .collect();
    let key = |c: &Candidate| {
        (
            c.modelled_us.unwrap_or(f64::INFINITY),
            c.static_cost.unwrap_or(f64::INFINITY),
            c.registers.unwrap_or(u32::MAX),
        )
    };
    order.sort_by(|&a, &b| {
        let (ka, kb) = (key(&case.candidates[a]), key(&case.candidates[b]));
        ka.0.total_cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.cmp(&kb.2))
            .then(a.cmp(&b))
    });
    for i in order.into_iter().take(16) {
        let c = &mut case.candidates[i];
        let (ok, detail) = statics::sim_check(&t.spec, Arch::Gfx906, &c.schedule, o.seed);
        c.correct = ok;
        c.check_detail = detail;
        if ok == Some(true) {
            break;
        }
    }
    // Among equal scores the tie-breaks (instruction count, then registers) must hold too: fold
    // them into the score the winner is picked by.
    for c in &mut case.candidates {
        if let (Some(cost), Some(r)) = (c.static_cost, c.registers) {
            c.static_cost = Some(cost + f64::from(r) * 1e-6);
        }
        if let (Some(us), Some(cost)) = (c.modelled_us, c.static_cost) {
            c.modelled_us = Some(us + cost * 1e-6);
        }
    }
    conclude(case, Basis::StaticModel);
}

/// K of the kernel's (first) GEMV.
fn gemv_k(ir: &Kernel) -> usize {
    ir.buffers()
        .find_map(|(_, d)| match d.local_type() {
            wavefuse::ir::BufferType::Weight(w) => Some(w.k),
            wavefuse::ir::BufferType::Tensor(_) => None,
        })
        .unwrap_or(1)
}

/// The store entries of a report's winners; none for an interrupted run (nothing interrupted
/// is stored).
pub fn entries(report: &TuneReport) -> Vec<Entry> {
    if report.interrupted {
        return Vec::new();
    }
    let h = &report.header;
    let method = match h.basis {
        Some(Basis::Timed) => Method::Timed,
        Some(Basis::StaticModel) => Method::StaticModel,
        None => return Vec::new(),
    };
    let device = match method {
        Method::Timed => h.provenance.device.name.clone(),
        Method::StaticModel => ANY_DEVICE.to_owned(),
    };
    report
        .cases
        .iter()
        .filter_map(|c| {
            let w = &c.candidates[c.winner?];
            let (kernel, shape) = c.store_key.clone()?;
            Some(Entry {
                key: Key {
                    kernel,
                    shape,
                    arch: h.arch.clone(),
                    device: device.clone(),
                },
                method,
                median_us: w.best_median_us(),
                default_median_us: c.candidates.first().and_then(Candidate::best_median_us),
                commit: h.provenance.commit.clone(),
                date: h.provenance.date.clone(),
                compiler: h.provenance.compiler.clone(),
                schedule: w.schedule.clone(),
            })
        })
        .collect()
}
