//! `wavefuse ab` without a GPU: what can be known without one.
//!
//! - Correctness of the generated code: each kernel at the simulator's small shapes (the set's own
//!   kernel with every feature dimension shrunk, `crate::sim::shrink`), lowered for sm_90 and
//!   for gfx906, run once in the CPU protocol simulator against the f64 reference. The simulator
//!   runs lowered code only, so a hand-written kernel is not run; its description is still checked
//!   against the generated kernel and its source.
//! - The static part: the generated and hand-written sources at the model shapes compiled with
//!   NVRTC for sm_90 and hipcc for gfx906 (through the compile cache, on every core), their
//!   resource reports side by side.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::ProgressBar;
use wavefuse_codegen::Arch;
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::sim::{
    self as codegen_sim, Case, Granularity, SimError, SimOptions, simulate_case,
};
use wavefuse_runtime::compile::{Bounds, CompileError, Compiler};
use wavefuse_runtime::exec::{self, OutputMetrics};
use wavefuse_runtime::{Cache, CompileRequest, Error as RtError};

use super::handwritten::{Found, Hand, find_reference};
use super::report::{AbReport, Check, Header, Manual, Mode, Resources, Row, Version};
use super::{Choice, Options, base_row, check_of, placeholder_row, usage_of};
use crate::pipeline::{self, Purpose};
use crate::policy::{Placement, SchedulePolicy};
use crate::provenance::Provenance;
use crate::sim;
use crate::suite::{self, CaseSpec, Data, PrepError, ShapeKind};

/// The targets of the static part, in table order.
const TARGETS: [Arch; 2] = [Arch::Sm90, Arch::Gfx906];

/// Which side of a row a compile belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Side {
    Generated,
    Hand,
}

/// One compile of the static part.
struct Job {
    row: usize,
    side: Side,
    request: CompileRequest,
    symbol: String,
    workgroup_size: u32,
    /// Dynamic LDS per workgroup at launch (the ABI's `dynamic_lds_bytes`).
    dynamic_lds: u64,
    /// Workgroups of the launch (all dimensions).
    grid: u32,
    /// gfx906: the generated kernel (whose data parameters give the bytes and weights, which a
    /// hand-written kernel shares) and the batch, for the MI50 time model of the compiled code.
    model: Option<(LoweredKernel, usize)>,
    /// A hand-written kernel: how it runs, from its ABI (the model of its symbol).
    hand: Option<crate::generate::SymbolLaunch>,
}

/// The no-GPU run; `reason` says why there is no GPU.
pub fn run(cases: &[CaseSpec], o: &Options, reason: String, bar: &ProgressBar) -> AbReport {
    let start = Instant::now();
    let mut rows = Vec::with_capacity(cases.len());
    let mut jobs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        bar.set_message(format!("simulating {}", c.label()));
        let (row, row_jobs) = row_without_gpu(i, c, o);
        rows.push(row);
        jobs.extend(row_jobs);
        bar.inc(1);
    }
    bar.set_length((cases.len() + jobs.len()) as u64);
    for (job, result) in compile_all(&jobs, o, bar) {
        let row: &mut Row = &mut rows[job.row];
        let v = match (job.side, &mut row.manual) {
            (Side::Generated, _) => &mut row.generated,
            (Side::Hand, Manual::Present(v)) => v.as_mut(),
            (Side::Hand, Manual::Absent(_)) => continue,
        };
        // A missing compiler is a gap in the table; a source that does not compile is an error.
        let failed = result
            .usage
            .as_ref()
            .err()
            .filter(|e| !e.contains("not found"));
        if let (Some(e), None) = (failed, &v.error) {
            v.error = Some(format!("compiling for {}: {e}", result.arch));
        }
        v.resources.push(result);
    }
    for r in &mut rows {
        let order = |x: &Resources| TARGETS.iter().position(|a| a.name() == x.arch);
        r.generated.resources.sort_by_key(order);
        if let Manual::Present(v) = &mut r.manual {
            v.resources.sort_by_key(order);
        }
    }
    AbReport {
        header: header(o, reason),
        rows,
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn header(o: &Options, reason: String) -> Header {
    let version = |c: &dyn Compiler| c.version().unwrap_or_else(|_| "not installed".into());
    let compiler = format!(
        "nvrtc {}; hipcc {}",
        version(pipeline::compiler(Arch::Sm90, Purpose::Run).as_ref()),
        version(pipeline::compiler(Arch::Gfx906, Purpose::Run).as_ref())
            .lines()
            .next()
            .unwrap_or("")
    );
    Header {
        mode: Mode::NoGpu {
            reason,
            placement: o.placement.unwrap_or(Placement::PerDevice),
        },
        provenance: Provenance::without_gpu(compiler, &o.commit),
        seed: o.seed,
        warmup: o.warmup,
        timing: o.timing,
        launch: o.launch,
        iters: o.iters,
        copy: Vec::new(),
    }
}

/// The row of one case (simulated, hand-written descriptions checked) and its compiles: its
/// ranks placed one per device unless `--placement` says otherwise (without a GPU the checks
/// run per device: the simulator models one device per rank).
fn row_without_gpu(i: usize, c: &CaseSpec, o: &Options) -> (Row, Vec<Job>) {
    let placement = o.placement(c, 0);
    let mut generated = Vec::new();
    for arch in TARGETS {
        match suite::generate(c, arch, &o.policy, placement) {
            Ok(g) => generated.push(g),
            // All ranks on one device (asked for) and they do not fit on it together: how TP
            // deploys it, one rank per device, is not what was asked; no verdict on the kernel.
            Err(PrepError::NotCoResident(why)) if c.tp > 1 => {
                let mut row = placeholder_row(c);
                row.generated.check = Check::not_run(format!(
                    "not checked for {arch} at --placement same-device: its {} ranks do not fit \
                     on one device together ({why}); one rank per device (--placement \
                     per-device) is how TP deploys it",
                    c.tp
                ));
                return (row, Vec::new());
            }
            Err(e) => {
                let mut row = placeholder_row(c);
                row.generated.error = Some(format!("generating for {arch}: {e}"));
                return (row, Vec::new());
            }
        }
    }
    let mut row = base_row(c, &generated[0]);
    row.generated.origin = "generated".into();
    row.generated.check = simulate(c, o.seed, placement);
    if row.generated.check.ran && !row.generated.check.pass && row.generated.check.detail.is_empty()
    {
        row.generated.check.detail = "simulator findings".into();
    }
    let mut jobs: Vec<Job> = generated
        .iter()
        .map(|g| Job {
            row: i,
            side: Side::Generated,
            request: pipeline::request(g),
            symbol: g.source.symbol.clone(),
            workgroup_size: g.lowered.workgroup_size,
            dynamic_lds: g.abi.dynamic_lds_bytes,
            grid: g.lowered.grid,
            model: for_model(&generated, g.lowered.arch, c.batch),
            hand: None,
        })
        .collect();
    let hands: Vec<Hand> = match &o.choice {
        Choice::User(h) => match generated.iter().find(|g| g.lowered.arch == h.arch) {
            Some(g) => match h.for_kernel(&g.ir) {
                Ok(h) => vec![h],
                Err(e) => {
                    // Outside the description's batches, say, as the GPU side reports it.
                    row.manual = Manual::Absent(e.to_string());
                    vec![]
                }
            },
            None => vec![],
        },
        Choice::Reference(dir) => {
            let mut found = Vec::new();
            let mut absent = Vec::new();
            for g in &generated {
                match find_reference(dir.as_deref(), &g.lowered, &g.ir) {
                    Found::Hand(h) => found.push(*h),
                    Found::Absent(why) => absent.push(format!("{}: {why}", g.lowered.arch)),
                }
            }
            if found.is_empty() {
                row.manual = Manual::Absent(absent.first().map_or_else(String::new, |a| {
                    a.split_once(": ").map_or(a.clone(), |(_, w)| w.to_owned())
                }));
            }
            found
        }
    };
    if !hands.is_empty() {
        let v = hand_version(&hands, &generated);
        for h in hands.iter().filter(|_| v.error.is_none()) {
            match h.request() {
                Ok(request) => jobs.push(Job {
                    row: i,
                    side: Side::Hand,
                    request,
                    // Of several launches, the one with the weight loop (its resources; the
                    // model adds the others).
                    symbol: h.main_stage().abi.symbol.clone(),
                    workgroup_size: h.main_stage().workgroup_size(),
                    dynamic_lds: h.main_stage().abi.dynamic_lds_bytes,
                    grid: h.main_stage().launch().map_or(0, |l| l.workgroups()),
                    model: for_model(&generated, h.arch, c.batch),
                    hand: Some(h.symbol_launch()),
                }),
                Err(e) => eprintln!("warning: {}: {e}", h.abi_path.display()),
            }
        }
        row.manual = Manual::Present(Box::new(v));
    }
    (row, jobs)
}

/// The hand-written side of a row without a GPU: not run; its descriptions checked.
fn hand_version(hands: &[Hand], generated: &[suite::Generated]) -> Version {
    let mut problems = Vec::new();
    for h in hands {
        let Some(g) = generated.iter().find(|g| g.lowered.arch == h.arch) else {
            continue;
        };
        problems.extend(
            h.check(&g.lowered)
                .into_iter()
                .map(|p| format!("{} ({}): {p}", h.arch, h.abi_path.display())),
        );
    }
    Version {
        origin: hands
            .iter()
            .map(Hand::origin)
            .collect::<Vec<_>>()
            .join(" + "),
        symbol: hands[0].symbols(),
        check: Check::not_run("not run (no GPU)"),
        timing: None,
        note: hand_note(&hands[0]),
        resources: Vec::new(),
        error: (!problems.is_empty()).then(|| format!("ABI mismatch: {}", problems.join("; "))),
    }
}

/// What the no-GPU row says of a hand-written kernel: not timed, and what a GPU run will do
/// differently (several launches in order; quantised activations and the tolerance that
/// accounts for them).
fn hand_note(h: &Hand) -> String {
    let mut note = "not timed: no GPU".to_owned();
    if h.stages().len() > 1 {
        note.push_str(&format!(
            "; {} launches in order on one stream: {}",
            h.stages().len(),
            h.symbols()
        ));
    }
    if let Some(q) = &h.abi.quantise {
        note.push_str(&format!(
            "; `{}` quantised to INT8 per token by {}: checked at the activation-quantisation \
             tolerance (docs/abi.md)",
            q.input,
            match (q.by, q.kernel.as_deref()) {
                (super::handwritten::QuantiseBy::Kernel, Some(k)) => format!("`{k}`"),
                _ => "the host".to_owned(),
            }
        ));
    }
    note
}

/// The generated kernel at the small shapes in the simulator, lowered for each target (at
/// `placement`), against the f64 reference: the worst over both. What the simulator cannot run
/// within its budgets (a user's kernel at model shapes) is "not checked", never a verdict.
fn simulate(c: &CaseSpec, seed: u64, placement: Placement) -> Check {
    let small = c.small();
    let own = small.shape != ShapeKind::Small;
    let mut opts = SimOptions::new(seed);
    if own {
        // A user's kernel at its own (often a model's) shapes: one schedule at wave granularity,
        // as `wavefuse run --device sim` runs the model shapes, within the simulator's budgets.
        opts.granularity = Granularity::Wave;
    }
    let mut metrics: Vec<OutputMetrics> = Vec::new();
    let mut scaled = Vec::new();
    for arch in TARGETS {
        let g = match suite::generate(&small, arch, &SchedulePolicy::default(), placement) {
            Ok(g) => g,
            Err(e) => return Check::not_run(format!("not simulated: {e}")),
        };
        // A user's kernel at a model's shapes: a scaled-down instance of it (the same schedule,
        // a smaller grid) where one exists, so the check is quick and within the budgets.
        let (ir, lowered) = match own
            .then(|| sim::scaled_down(&g.ir, arch, &g.code.schedule, &g.lowered))
            .flatten()
        {
            Some(sd) => {
                scaled.push(format!("{arch}: {}", sd.what));
                (sd.ir, sd.lowered)
            }
            None => (g.ir.clone(), g.lowered.clone()),
        };
        // Before the inputs and the reference are built: a run the simulator cannot hold is
        // not checked, whatever the kernel.
        if let Err(e) = codegen_sim::fits(&lowered, 1, &opts) {
            return not_simulated(arch, &e);
        }
        let d = match Data::new(&ir, seed) {
            Ok(d) => d,
            Err(e) => return Check::not_run(format!("not simulated: {e}")),
        };
        let case = Case {
            inputs: vec![d.inputs.clone()],
            reference: vec![d.reference.clone()],
        };
        let on = on_label(own, &scaled);
        let report = match simulate_case(&lowered, &ir, &case, &opts) {
            Ok(r) => r,
            Err(e) => return not_simulated(arch, &e),
        };
        if let Some(f) = report.findings.first() {
            let mut check = check_of(&on, &metrics, c.kernel.tolerance().0);
            check.pass = false;
            check.detail = format!("{arch}: simulator finding: {f}");
            return check;
        }
        if let Some(limit) = report.limit(&opts) {
            return not_simulated(arch, &SimError::TooLarge(limit));
        }
        let outputs = report.outputs.first().cloned().unwrap_or_default();
        metrics.extend(exec::compare(&ir, &outputs, &d.reference));
    }
    check_of(&on_label(own, &scaled), &metrics, c.kernel.tolerance().0)
}

/// Where a check ran: the simulator, at the small shapes or the kernel's own (scaled down).
fn on_label(own: bool, scaled: &[String]) -> String {
    match (own, scaled.is_empty()) {
        (false, _) => "simulator sm90+gfx906, small shapes".into(),
        (true, true) => "simulator sm90+gfx906, its own shapes".into(),
        (true, false) => format!(
            "simulator sm90+gfx906, its own shapes {}",
            scaled.join("; ")
        ),
    }
}

/// A case the simulator did not run to the end: "not checked", with why — never a verdict.
fn not_simulated(arch: Arch, e: &SimError) -> Check {
    match e {
        SimError::TooLarge(limit) => Check::not_run(format!(
            "not checked: too large to simulate for {arch} (needs {limit})"
        )),
        e => Check::not_run(format!("simulator error for {arch}: {e}")),
    }
}

/// Every job compiled (through the cache) on `o.threads` threads; results in job order.
fn compile_all<'j>(jobs: &'j [Job], o: &Options, bar: &ProgressBar) -> Vec<(&'j Job, Resources)> {
    let cache = Cache::from_env();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, Resources)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..o.threads.min(jobs.len()).max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    bar.set_message(format!("compiling {} for {}", job.symbol, job.request.arch));
                    let r = compile(&cache, job, o);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                    bar.inc(1);
                }
            });
        }
    });
    let mut out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(i, r)| (&jobs[i], r)).collect()
}

fn compiler(job: &Job, o: &Options) -> Box<dyn Compiler> {
    match job.side {
        Side::Generated => pipeline::compiler(job.request.arch, Purpose::Run),
        Side::Hand => o.hand_compiler(job.request.arch),
    }
}

/// What the MI50 model needs for a job on `arch` (gfx906 only).
fn for_model(
    generated: &[suite::Generated],
    arch: Arch,
    batch: usize,
) -> Option<(LoweredKernel, usize)> {
    (arch == Arch::Gfx906)
        .then(|| generated.iter().find(|g| g.lowered.arch == arch))
        .flatten()
        .map(|g| (g.lowered.clone(), batch))
}

fn compile(cache: &Cache, job: &Job, o: &Options) -> Resources {
    let c = compiler(job, o);
    match exec::artifact_for(cache, c.as_ref(), &job.request) {
        Ok((a, _)) => {
            let mut r = usage_of(&a, &job.symbol, job.workgroup_size, job.dynamic_lds);
            if let (Some((k, batch)), Ok(u)) = (&job.model, &r.usage) {
                // A model that could not be made (llvm-objdump missing, failing or past the
                // timeout) is said, not dropped: its column is empty in the report (issue 39).
                let said = |e: crate::generate::ModelError| {
                    eprintln!("warning: {}: no MI50 model: {e}", job.symbol);
                };
                r.modelled = match job.side {
                    Side::Generated => crate::generate::modelled_mi50_image(
                        k,
                        &a.image,
                        *batch,
                        u.occupancy,
                        &Bounds::default(),
                    )
                    .map_err(said)
                    .ok()
                    .flatten(),
                    // The hand-written kernel's own symbol, at its own launch.
                    Side::Hand => crate::generate::modelled_mi50_symbol(
                        k,
                        &a.image,
                        &job.symbol,
                        &crate::generate::SymbolLaunch {
                            lds_bytes: u.lds_bytes,
                            ..job
                                .hand
                                .clone()
                                .unwrap_or_else(|| crate::generate::SymbolLaunch {
                                    grid: job.grid,
                                    workgroup_size: job.workgroup_size,
                                    ..Default::default()
                                })
                        },
                        *batch,
                        u.occupancy,
                        &Bounds::default(),
                    )
                    .map_err(said)
                    .ok(),
                };
            }
            r
        }
        Err(e) => Resources {
            arch: job.request.arch.name().to_owned(),
            compiler: c.id().name().to_owned(),
            modelled: None,
            usage: Err(match e {
                RtError::Compile(CompileError::Missing { compiler, .. }) => {
                    format!("{compiler} not found")
                }
                RtError::Compile(CompileError::Failed { log, .. }) => {
                    format!("failed: {}", crate::tune::candidates::failure_line(&log))
                }
                e => e.to_string(),
            }),
        },
    }
}

/// One source compiled by [`prebuild`].
#[derive(Debug)]
pub struct Prebuilt {
    /// The case's label.
    pub case: String,
    /// `generated` or `hand-written` (`error`: the case did not generate; `spin kernel`: the
    /// gate graph timing replays behind).
    pub side: &'static str,
    /// Compiled into the cache, or why not.
    pub result: Result<(), String>,
}

/// `wavefuse ab --prebuild`: every sm_90 source of the run (generated and hand-written) compiled
/// into the cache; one entry per source, and per case that did not generate.
pub fn prebuild(cases: &[CaseSpec], o: &Options) -> Vec<Prebuilt> {
    let mut out = Vec::new();
    let mut jobs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        // As a GPU run on one GPU places it (what a machine without NVRTC will generate).
        let g = match suite::generate(c, Arch::Sm90, &o.policy, o.placement(c, 1)) {
            Ok(g) => g,
            Err(e) => {
                out.push(Prebuilt {
                    case: c.label(),
                    side: "error",
                    result: Err(e.to_string()),
                });
                continue;
            }
        };
        jobs.push(Job {
            row: i,
            side: Side::Generated,
            request: pipeline::request(&g),
            symbol: g.source.symbol.clone(),
            workgroup_size: g.lowered.workgroup_size,
            dynamic_lds: g.abi.dynamic_lds_bytes,
            grid: g.lowered.grid,
            model: None,
            hand: None,
        });
        let hand = match &o.choice {
            Choice::User(h) => h.for_kernel(&g.ir).ok(),
            Choice::Reference(dir) => match find_reference(dir.as_deref(), &g.lowered, &g.ir) {
                Found::Hand(h) => Some(*h),
                Found::Absent(_) => None,
            },
        };
        if let Some(h) = hand.filter(|h| h.arch == Arch::Sm90) {
            match h.request() {
                Ok(request) => jobs.push(Job {
                    row: i,
                    side: Side::Hand,
                    request,
                    // Of several launches, the one with the weight loop (its resources; the
                    // model adds the others).
                    symbol: h.main_stage().abi.symbol.clone(),
                    workgroup_size: h.main_stage().workgroup_size(),
                    dynamic_lds: h.main_stage().abi.dynamic_lds_bytes,
                    grid: h.main_stage().launch().map_or(0, |l| l.workgroups()),
                    model: None,
                    hand: None,
                }),
                Err(e) => out.push(Prebuilt {
                    case: c.label(),
                    side: "hand-written",
                    result: Err(e.to_string()),
                }),
            }
        }
    }
    for (job, r) in compile_all(&jobs, o, &ProgressBar::hidden()) {
        out.push(Prebuilt {
            case: cases[job.row].label(),
            side: if job.side == Side::Generated {
                "generated"
            } else {
                "hand-written"
            },
            result: r.usage.map(|_| ()),
        });
    }
    // The gate kernel `--timing graphs` replays behind (`timing::spin_request`).
    let spin = exec::artifact_for(
        &Cache::from_env(),
        pipeline::compiler(Arch::Sm90, Purpose::Run).as_ref(),
        &wavefuse_runtime::timing::spin_request(Arch::Sm90),
    );
    out.push(Prebuilt {
        case: "graph timing's gate".into(),
        side: "spin kernel",
        result: spin.map(|_| ()).map_err(|e| e.to_string()),
    });
    out
}
