//! `wavefuse fuzz`: seeded random op-level kernels through the whole chain.
//!
//! For each kernel ([`generator::generate`], valid by construction): the print ∘ parse round trip must
//! be the identity; the kernel is compiled ([`wavefuse_codegen::compile`]: lower, expand, validate,
//! C++, ABI) for gfx906 and sm_90 under the target's default schedule, the simulator's small
//! schedule and random valid ones ([`schedules`]); some of the lowered kernels run in the
//! protocol simulator against the f64 oracle with rank skew and adversarial interleavings
//! ([`crate::sim::sweep`], its tolerance policy). A refusal (`LowerError::Unsupported`,
//! `LowerError::Schedule`, the writer's `Unsupported`) is counted by its reason with numbers and
//! names stripped ([`bucket`]). Anything else is a [`FuzzFinding`], printed with the kernel's
//! textual IR, its seed, target and schedule: a panic anywhere, a round trip that changes the
//! kernel, a lowered kernel the lowered validator rejects, a malformed kernel at the writer, a
//! lowering that calls a validated kernel invalid, a simulation that cannot bind or evaluate, and
//! every simulator finding (mismatch, deadlock, stale read, …).
//!
//! Everything is a function of the seed: kernel `i` is generated from [`kernel_seed`]`(seed, i)`,
//! its schedules and simulations from the same number, so a finding is reproduced by
//! `wavefuse fuzz --seed S --first I --kernels 1`.

pub mod generator;
pub mod schedules;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use wavefuse::ir::{Kernel, parse, validate};
use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::LowerError;
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_codegen::{Arch, CompileError, compile};

use crate::sim::{Prepared, sweep};

/// The targets every kernel is compiled for.
pub const TARGETS: [Arch; 2] = [Arch::Gfx906, Arch::Sm90];

/// What to do per kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct FuzzConfig {
    /// Seed of the whole run.
    pub seed: u64,
    /// Index of the first kernel (kernel `i` depends only on the seed and `i`).
    pub first: u64,
    /// Kernels to generate.
    pub kernels: u64,
    /// Stop generating after this long (the kernels done so far are reported).
    pub budget: Option<Duration>,
    /// Random schedules per kernel and target, besides the default and the small one.
    pub random_schedules: usize,
    /// Lowered (target, schedule) pairs simulated per kernel.
    pub simulations: usize,
    /// Interleavings (seeded simulator schedules, `sim::sweep`) per simulation.
    pub interleavings: u64,
    /// Largest lowered kernel simulated, in lanes over all ranks (`tp · grid · workgroup`), times
    /// `ceil(batch / 8)` past batch 8 (a lane computes every batch row).
    pub max_lanes: u64,
    /// A kernel that computes longer than this (CPU time of the worker thread) is a finding (a
    /// hang) and ends the run.
    pub kernel_timeout: Duration,
}

impl FuzzConfig {
    /// CI's per-kernel work: one random schedule per target, one simulation of two
    /// interleavings (one lane-granular without skew, one wave-granular with rank skew).
    pub fn ci(seed: u64, kernels: u64) -> Self {
        FuzzConfig {
            seed,
            first: 0,
            kernels,
            budget: None,
            random_schedules: 1,
            simulations: 1,
            interleavings: 2,
            max_lanes: 2048,
            kernel_timeout: Duration::from_secs(30),
        }
    }

    /// The soak's (and the CLI's default) per-kernel work: three random schedules per target,
    /// three simulations of six interleavings each (every granularity × skew combination of
    /// `SimOptions::sweep`).
    pub fn soak(seed: u64, kernels: u64) -> Self {
        FuzzConfig {
            random_schedules: 3,
            simulations: 3,
            interleavings: 6,
            max_lanes: 8192,
            ..FuzzConfig::ci(seed, kernels)
        }
    }
}

/// The seed kernel `index` of a run from `seed` is generated from (SplitMix64).
pub fn kernel_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One thing that went wrong.
#[derive(Clone, Debug)]
pub struct FuzzFinding {
    /// Kernel index in the run.
    pub index: u64,
    /// The kernel's seed ([`kernel_seed`]).
    pub kernel_seed: u64,
    /// What kind of failure (`panic in lowering`, `round trip`, `simulator: mismatch` …).
    pub kind: String,
    /// The message.
    pub message: String,
    /// The target, where one was involved.
    pub target: Option<Arch>,
    /// The schedule as overrides of the target's default (`Schedule::with_overrides`), where one
    /// was involved (empty: the default).
    pub schedule: Option<String>,
    /// The simulator's seed and the first interleaving (`sim::sweep` index) that found it.
    pub sim: Option<(u64, u64)>,
    /// The kernel's textual IR.
    pub ir: String,
}

impl fmt::Display for FuzzFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.kind, self.message)?;
        writeln!(
            f,
            "  kernel {} (seed {:#018x})",
            self.index, self.kernel_seed
        )?;
        if let Some(t) = self.target {
            writeln!(f, "  target {t}")?;
        }
        if let Some(s) = &self.schedule {
            let s = if s.is_empty() { "(the default)" } else { s };
            writeln!(f, "  schedule {s}")?;
        }
        if let Some((seed, i)) = self.sim {
            writeln!(f, "  simulator seed {seed:#x}, interleaving {i}")?;
        }
        for line in self.ir.lines() {
            writeln!(f, "  | {line}")?;
        }
        Ok(())
    }
}

impl FuzzFinding {
    /// The finding as a `.wfir` file: a comment header the regression test
    /// (`harness/tests/fuzz_regressions.rs`) reads (`; fuzz target=…`, `; fuzz schedule=…`,
    /// `; fuzz sim=SEED,INDEX`), then the kernel. `run_seed` is the run's seed.
    pub fn wfir(&self, run_seed: u64) -> String {
        let mut out = String::new();
        for line in format!("{}: {}", self.kind, self.message).lines() {
            let _ = writeln!(out, "; {line}");
        }
        let _ = writeln!(
            out,
            "; fuzz run={run_seed} kernel={} kernel_seed={:#x}",
            self.index, self.kernel_seed
        );
        if let Some(t) = self.target {
            let _ = writeln!(out, "; fuzz target={t}");
        }
        if let Some(s) = &self.schedule {
            let _ = writeln!(out, "; fuzz schedule={s}");
        }
        if let Some((seed, i)) = self.sim {
            let _ = writeln!(out, "; fuzz sim={seed},{i}");
        }
        out.push_str(&self.ir);
        out
    }
}

/// The kind of an [`FuzzReport::invalid_kernels`] entry.
pub const INVALID_KERNEL: &str = "invalid generated kernel (a generator bug)";

/// A refusal reason's row of the table.
#[derive(Clone, Debug, Default)]
pub struct Refusal {
    /// Lowerings refused for it (kernels × targets × schedules).
    pub attempts: u64,
    /// Kernels with at least one such refusal.
    pub kernels: u64,
    /// The first message, verbatim.
    pub example: String,
    /// The first kernel refused for it (its index in the run).
    pub first_kernel: u64,
    last_kernel: Option<u64>,
}

/// Per target.
#[derive(Clone, Debug, Default)]
pub struct TargetCounts {
    /// Kernels that lowered with the target's default schedule.
    pub default_lowered: u64,
    /// Kernels that lowered with at least one schedule.
    pub lowered: u64,
    /// Lowerings tried.
    pub attempts: u64,
    /// Lowerings that produced a kernel.
    pub ok: u64,
    /// Simulations run.
    pub simulations: u64,
    /// Of those, lowerings with the batch rows in tiles (`Schedule::batch_tile`: the lowered
    /// kernel reads its weights more than once, `weight_passes > 1`).
    pub batch_tiled: u64,
}

/// What a run did and found.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    /// The configuration's seed.
    pub seed: u64,
    /// Kernels generated.
    pub generated: u64,
    /// Generated kernels the validator rejected: generator bugs (kept at 0).
    pub invalid: u64,
    /// Every one of those, with its index, the validator's message and the kernel (kind
    /// `invalid generated kernel`): printed and written by `--findings` like a finding.
    pub invalid_kernels: Vec<FuzzFinding>,
    /// Per target (in [`TARGETS`] order).
    pub targets: BTreeMap<String, TargetCounts>,
    /// Kernels that lowered for no target with any schedule.
    pub refused_everywhere: u64,
    /// Refusals by `(kind, normalised reason)`; kind is `unsupported`, `schedule` or `writer`.
    pub refused: BTreeMap<(String, String), Refusal>,
    /// Kernels simulated at least once.
    pub simulated: u64,
    /// Kernels with a lowering but none small enough to simulate.
    pub too_large: u64,
    /// Interleavings run, over all simulations.
    pub interleavings: u64,
    /// Per generator tag: (kernels generated with it, of which simulated).
    pub coverage: BTreeMap<&'static str, (u64, u64)>,
    /// Everything that went wrong.
    pub findings: Vec<FuzzFinding>,
    /// The run stopped at its time budget.
    pub stopped_by_budget: bool,
    /// The run stopped at a kernel that did not finish (the last finding).
    pub hung: bool,
    /// Wall time.
    pub seconds: f64,
    /// The slowest kernel: (index, seconds).
    pub slowest: (u64, f64),
}

impl FuzzReport {
    /// Fraction of generated kernels that lowered for no target with any schedule.
    pub fn refusal_rate(&self) -> f64 {
        self.refused_everywhere as f64 / self.generated.max(1) as f64
    }

    /// Fraction of generated kernels simulated.
    pub fn simulated_rate(&self) -> f64 {
        self.simulated as f64 / self.generated.max(1) as f64
    }

    /// The refusal table (Markdown), rows by attempts, most first.
    pub fn refusal_table(&self) -> String {
        let mut rows: Vec<_> = self.refused.iter().collect();
        rows.sort_by(|a, b| b.1.attempts.cmp(&a.1.attempts).then(a.0.cmp(b.0)));
        let mut out = String::from("| kind | reason (normalised) | lowerings | kernels |\n");
        out.push_str("|------|---------------------|----------:|--------:|\n");
        for ((kind, reason), r) in rows {
            let reason = reason.replace('|', "\\|");
            let _ = writeln!(
                out,
                "| {kind} | {reason} | {} | {} |",
                r.attempts, r.kernels
            );
        }
        out
    }

    /// The headline numbers with the run's time, then [`FuzzReport::counts`].
    pub fn summary(&self) -> String {
        format!(
            "{} kernels from seed {:#x} in {:.1} s{}{}; slowest kernel {} ({:.0} ms)\n{}",
            self.generated,
            self.seed,
            self.seconds,
            if self.stopped_by_budget {
                " (stopped at the time budget)"
            } else {
                ""
            },
            if self.hung {
                " (stopped at a kernel that did not finish)"
            } else {
                ""
            },
            self.slowest.0,
            self.slowest.1 * 1e3,
            self.counts()
        )
    }

    /// Per-target counts, refusals, simulations, findings: everything but times (the same for
    /// the same seed).
    pub fn counts(&self) -> String {
        let mut out = format!(
            "  {} invalid generated kernels (generator bugs); {} findings\n",
            self.invalid,
            self.findings.len()
        );
        for (t, c) in &self.targets {
            let _ = writeln!(
                out,
                "  {t}: {} kernels lowered with the default schedule, {} with some schedule; {} of {} lowerings ok; {} simulations ({} in batch tiles)",
                c.default_lowered, c.lowered, c.ok, c.attempts, c.simulations, c.batch_tiled
            );
        }
        let _ = writeln!(
            out,
            "  refused for every target and schedule: {} ({:.1} %); simulated: {} ({:.1} %, {} interleavings); lowered but too large to simulate: {}",
            self.refused_everywhere,
            100.0 * self.refusal_rate(),
            self.simulated,
            100.0 * self.simulated_rate(),
            self.interleavings,
            self.too_large
        );
        out
    }

    /// Every finding and every invalid generated kernel, in the order found: what `--findings`
    /// writes and the CLI prints, each with its kernel index.
    pub fn all_findings(&self) -> impl Iterator<Item = &FuzzFinding> {
        self.invalid_kernels.iter().chain(&self.findings)
    }

    /// Write [`FuzzReport::all_findings`] into `dir` (created if missing), one `.wfir` file each
    /// ([`FuzzFinding::wfir`]), named `seed{S}-kernel{I}-{n}.wfir`; returns the paths.
    pub fn write_findings(
        &self,
        dir: &std::path::Path,
    ) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        for (i, f) in self.all_findings().enumerate() {
            let path = dir.join(format!(
                "seed{}-kernel{}-{}.wfir",
                self.seed,
                f.index,
                i + 1
            ));
            std::fs::write(&path, f.wfir(self.seed))?;
            out.push(path);
        }
        Ok(out)
    }

    /// Generator tags: kernels generated with each, and how many of those simulated.
    pub fn coverage_table(&self) -> String {
        let mut out = String::from("| generator feature | kernels | simulated |\n");
        out.push_str("|-------------------|--------:|----------:|\n");
        for (tag, (n, s)) in &self.coverage {
            let _ = writeln!(out, "| {tag} | {n} | {s} |");
        }
        out
    }

    /// Add one kernel's counts (from the worker) to the run's.
    fn merge(&mut self, r: FuzzReport) {
        self.generated += r.generated;
        self.invalid += r.invalid;
        self.invalid_kernels.extend(r.invalid_kernels);
        for (t, c) in r.targets {
            let mine = self.targets.entry(t).or_default();
            mine.default_lowered += c.default_lowered;
            mine.lowered += c.lowered;
            mine.attempts += c.attempts;
            mine.ok += c.ok;
            mine.simulations += c.simulations;
            mine.batch_tiled += c.batch_tiled;
        }
        self.refused_everywhere += r.refused_everywhere;
        for (key, row) in r.refused {
            let mine = self.refused.entry(key).or_default();
            if mine.example.is_empty() {
                mine.example = row.example;
                mine.first_kernel = row.first_kernel;
            }
            mine.attempts += row.attempts;
            mine.kernels += row.kernels;
        }
        self.simulated += r.simulated;
        self.too_large += r.too_large;
        self.interleavings += r.interleavings;
        for (tag, (n, s)) in r.coverage {
            let mine = self.coverage.entry(tag).or_default();
            mine.0 += n;
            mine.1 += s;
        }
        self.findings.extend(r.findings);
    }

    fn refuse(&mut self, index: u64, kind: &str, message: &str) {
        let row = self
            .refused
            .entry((kind.to_owned(), bucket(message)))
            .or_default();
        row.attempts += 1;
        if row.last_kernel != Some(index) {
            row.kernels += 1;
            row.last_kernel = Some(index);
        }
        if row.example.is_empty() {
            row.example = message.to_owned();
            row.first_kernel = index;
        }
    }
}

/// How far a run has got.
#[derive(Copy, Clone, Debug)]
pub struct Progress {
    /// Kernels done.
    pub done: u64,
    /// Kernels asked for.
    pub total: u64,
    /// Findings so far.
    pub findings: usize,
    /// Kernels simulated so far.
    pub simulated: u64,
    /// Seconds since the start.
    pub seconds: f64,
}

/// Op mnemonics: kept in a bucket where they appear in backticks (they say which op).
const MNEMONICS: [&str; 23] = [
    "load",
    "store",
    "gemv.rep",
    "gemv.col",
    "gemv.row",
    "add",
    "mul",
    "silu",
    "round_f16",
    "slice",
    "rmsnorm",
    "reduce.sum",
    "reduce.sumsq",
    "reduce.absmax",
    "allreduce",
    "allreduce.int8",
    "quantize_int8",
    "dequantize_int8",
    "quantize_int8.rne",
    "gemv_q8.rep",
    "gemv_q8.col",
    "gemv_q8.row",
    "int4_dot",
];

/// A refusal message with what varies between kernels stripped: backticked names become `_`
/// (op mnemonics are kept), every run of digits becomes `N`, and `Root(N)`-style views stay.
pub fn bucket(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        if MNEMONICS.contains(&inner) {
            let _ = write!(out, "`{inner}`");
        } else {
            out.push_str("`_`");
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    let mut norm = String::new();
    let mut in_number = false;
    for c in out.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                norm.push('N');
            }
            in_number = true;
        } else {
            // `N.N` and `NeN` stay one number.
            if in_number && c == '.' {
                continue;
            }
            in_number = false;
            norm.push(c);
        }
    }
    norm
}

/// The payload of a caught panic, as text.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic with a non-string payload)".into()
    }
}

/// One lowered candidate of a kernel.
struct Lowered {
    arch: Arch,
    spec: String,
    kernel: LoweredKernel,
}

/// What the worker thread tells [`fuzz`].
enum Event {
    /// It starts kernel `index`.
    Start(u64),
    /// It finished a kernel: its counts, its time in seconds.
    Done(Box<FuzzReport>, f64),
    /// It stopped at the time budget.
    Budget,
}

/// Where the worker is, for the finding of a kernel that never finishes.
#[derive(Clone, Debug, Default)]
struct Stage {
    what: &'static str,
    target: Option<Arch>,
    schedule: Option<String>,
}

/// Run the fuzzer. `progress` is called after every kernel.
///
/// The kernels run on a worker thread; a kernel that takes longer than
/// [`FuzzConfig::kernel_timeout`] (a lowering or simulation that never ends) is a finding that
/// ends the run: the worker is left behind (it cannot be stopped from outside), so the caller
/// should report and exit.
pub fn fuzz(config: &FuzzConfig, progress: &mut dyn FnMut(&Progress)) -> FuzzReport {
    let start = Instant::now();
    let mut report = FuzzReport {
        seed: config.seed,
        ..FuzzReport::default()
    };
    for arch in TARGETS {
        report
            .targets
            .insert(arch.to_string(), TargetCounts::default());
    }
    let stage = Arc::new(Mutex::new(Stage::default()));
    let (tx, rx) = mpsc::channel();
    let worker = {
        let (config, stage) = (config.clone(), Arc::clone(&stage));
        std::thread::Builder::new()
            .name("fuzz".into())
            .spawn(move || work(&config, &stage, &tx))
            .expect("spawn the fuzz worker")
    };
    let clock = worker_clock(&worker);
    let mut current = None;
    let mut cpu_at_start = Duration::ZERO;
    // Poll often enough to see a timeout soon after it passes.
    let poll = config.kernel_timeout.min(Duration::from_millis(500));
    loop {
        match rx.recv_timeout(poll) {
            Ok(Event::Start(i)) => {
                current = Some(i);
                cpu_at_start = clock.now();
            }
            Ok(Event::Done(r, took)) => {
                let index = current.take().expect("started");
                report.merge(*r);
                if took > report.slowest.1 {
                    report.slowest = (index, took);
                }
                progress(&Progress {
                    done: report.generated,
                    total: config.kernels,
                    findings: report.findings.len(),
                    simulated: report.simulated,
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
            Ok(Event::Budget) => report.stopped_by_budget = true,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let Some(index) = current else { continue };
                if clock.now().saturating_sub(cpu_at_start) < config.kernel_timeout {
                    continue;
                }
                let at = stage.lock().map(|s| s.clone()).unwrap_or_default();
                report.findings.push(hang(config, index, &at));
                report.hung = true;
                report.seconds = start.elapsed().as_secs_f64();
                return report;
            }
        }
    }
    if let Err(p) = worker.join() {
        let message = format!("the fuzz worker panicked: {}", panic_message(&*p));
        report.findings.push(FuzzFinding {
            index: current.unwrap_or(0),
            kernel_seed: kernel_seed(config.seed, current.unwrap_or(0)),
            kind: "panic in the fuzzer".into(),
            message,
            target: None,
            schedule: None,
            sim: None,
            ir: String::new(),
        });
    }
    report.seconds = start.elapsed().as_secs_f64();
    report
}

/// The worker thread's CPU time: a kernel's timeout counts the time it computed, not the time it
/// waited for a core (a niced run on a loaded machine would otherwise report hangs). Where the
/// thread's clock cannot be read, wall time.
struct WorkerClock {
    clock: Option<libc::clockid_t>,
    start: Instant,
}

impl WorkerClock {
    fn now(&self) -> Duration {
        let Some(clock) = self.clock else {
            return self.start.elapsed();
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock` is the CPU-time clock of a thread that is still joinable (the caller
        // holds its JoinHandle), and `ts` is a valid, writable timespec.
        if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
            return self.start.elapsed();
        }
        Duration::new(
            ts.tv_sec.max(0) as u64,
            ts.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    }
}

fn worker_clock(worker: &std::thread::JoinHandle<()>) -> WorkerClock {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the pthread_t comes from a live JoinHandle; `clock` is a valid out pointer.
    let ok = unsafe { libc::pthread_getcpuclockid(worker.as_pthread_t(), &mut clock) } == 0;
    WorkerClock {
        clock: ok.then_some(clock),
        start: Instant::now(),
    }
}

/// The worker: every kernel of the run, one after the other.
fn work(config: &FuzzConfig, stage: &Mutex<Stage>, tx: &mpsc::Sender<Event>) {
    let start = Instant::now();
    for index in config.first..config.first.saturating_add(config.kernels) {
        if config.budget.is_some_and(|b| start.elapsed() >= b) {
            let _ = tx.send(Event::Budget);
            break;
        }
        if wavefuse_runtime::compile::child::interrupted() || tx.send(Event::Start(index)).is_err()
        {
            break;
        }
        let t0 = Instant::now();
        let mut r = FuzzReport::default();
        one(config, index, stage, &mut r);
        if tx
            .send(Event::Done(Box::new(r), t0.elapsed().as_secs_f64()))
            .is_err()
        {
            break;
        }
    }
}

/// The finding of a kernel that did not finish within the timeout.
fn hang(config: &FuzzConfig, index: u64, at: &Stage) -> FuzzFinding {
    let seed = kernel_seed(config.seed, index);
    let ir = catch_unwind(|| generator::generate(seed).kernel.to_string()).unwrap_or_default();
    FuzzFinding {
        index,
        kernel_seed: seed,
        kind: format!("hang in {}", at.what),
        message: format!(
            "kernel {index} did not finish within {:.0} s of CPU time (the run stops here)",
            config.kernel_timeout.as_secs_f64()
        ),
        target: at.target,
        schedule: at.schedule.clone(),
        sim: None,
        ir,
    }
}

/// Kernel `index` of the run: generate, check, compile, simulate; counts into `report`.
fn one(config: &FuzzConfig, index: u64, stage: &Mutex<Stage>, report: &mut FuzzReport) {
    let seed = kernel_seed(config.seed, index);
    let set_stage = |what: &'static str, target: Option<Arch>, schedule: Option<&str>| {
        if let Ok(mut s) = stage.lock() {
            *s = Stage {
                what,
                target,
                schedule: schedule.map(str::to_owned),
            };
        }
    };
    set_stage("the generator", None, None);
    report.generated += 1;
    let finding = |kind: &str, message: String, ir: &str| FuzzFinding {
        index,
        kernel_seed: seed,
        kind: kind.to_owned(),
        message,
        target: None,
        schedule: None,
        sim: None,
        ir: ir.to_owned(),
    };
    let g = match catch_unwind(|| generator::generate(seed)) {
        Ok(g) => g,
        Err(p) => {
            let f = finding("panic in the generator", panic_message(&*p), "");
            report.findings.push(f);
            return;
        }
    };
    let k = &g.kernel;
    let ir = k.to_string();
    if let Err(e) = validate(k) {
        report.invalid += 1;
        let f = finding(INVALID_KERNEL, e.to_string(), &ir);
        report.invalid_kernels.push(f);
        return;
    }
    set_stage("print/parse", None, None);
    if let Some(why) = round_trip(k, &ir) {
        report.findings.push(finding("round trip", why, &ir));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5C4E_D01E);
    let mut lowered = Vec::new();
    for arch in TARGETS {
        let (mut any, mut default) = (false, false);
        let cands = schedules::candidates(arch, k, &mut rng, config.random_schedules);
        for c in cands {
            let spec = schedules::spec(arch, k, &c.schedule);
            let counts = report.targets.entry(arch.to_string()).or_default();
            counts.attempts += 1;
            set_stage("compile", Some(arch), Some(&spec));
            let got = catch_unwind(AssertUnwindSafe(|| compile(k, arch, &c.schedule)));
            let counts = report.targets.get_mut(&arch.to_string()).expect("a target");
            let fail = |kind: &str, message: String| FuzzFinding {
                target: Some(arch),
                schedule: Some(spec.clone()),
                ..finding(kind, message, &ir)
            };
            match got {
                Ok(Ok(generated)) => {
                    counts.ok += 1;
                    any = true;
                    default |= c.label == "default";
                    lowered.push(Lowered {
                        arch,
                        spec: spec.clone(),
                        kernel: generated.lowered,
                    });
                }
                Ok(Err(CompileError::Lower(LowerError::Unsupported(m)))) => {
                    report.refuse(index, "unsupported", &m)
                }
                Ok(Err(CompileError::Lower(LowerError::Schedule(m)))) => {
                    report.refuse(index, "schedule", &m)
                }
                Ok(Err(CompileError::Write(cpp::Error::Unsupported(m)))) => {
                    report.refuse(index, "writer", &m)
                }
                // A grid no register count lets the target hold (DESIGN.md §5.9).
                Ok(Err(CompileError::Lower(LowerError::NotCoResident(n)))) => {
                    report.refuse(index, "not co-resident", &n.to_string())
                }
                // A documented limit (docs/errors.md): index width, op depth.
                Ok(Err(CompileError::Lower(
                    e @ (LowerError::IndexWidth { .. } | LowerError::TooDeep { .. }),
                ))) => report.refuse(index, "limit", &e.to_string()),
                Ok(Err(CompileError::Lower(LowerError::Lowered(e)))) => report
                    .findings
                    .push(fail("invalid lowered kernel", e.to_string())),
                Ok(Err(CompileError::Lower(LowerError::Invalid(e)))) => report.findings.push(fail(
                    "the lowering rejects a kernel the validator accepts",
                    e.to_string(),
                )),
                // An exact schedule has no overrides: a bug if it ever says so.
                Ok(Err(e @ CompileError::Override { .. })) => {
                    report.findings.push(fail("override", e.to_string()))
                }
                Ok(Err(CompileError::Write(e))) => {
                    report.findings.push(fail("C++ writer", e.to_string()))
                }
                Err(p) => report
                    .findings
                    .push(fail("panic in compile", panic_message(&*p))),
            }
        }
        let counts = report.targets.entry(arch.to_string()).or_default();
        counts.lowered += u64::from(any);
        counts.default_lowered += u64::from(default);
    }
    if lowered.is_empty() {
        report.refused_everywhere += 1;
    }
    let simulated = simulate(
        config,
        index,
        seed,
        k,
        &ir,
        lowered,
        &mut rng,
        &|a, s| set_stage("the simulator", Some(a), Some(s)),
        report,
    );
    for tag in &g.tags {
        let row = report.coverage.entry(tag).or_default();
        row.0 += 1;
        row.1 += u64::from(simulated);
    }
}

/// `None` when print ∘ parse is the identity on `k` (and printing the parsed kernel gives the
/// same text); else what differs.
fn round_trip(k: &Kernel, ir: &str) -> Option<String> {
    let parsed = match catch_unwind(|| parse(ir)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Some(format!("the printed kernel does not parse: {e}")),
        Err(p) => return Some(format!("the parser panicked: {}", panic_message(&*p))),
    };
    if &parsed != k {
        return Some("parse(print(k)) != k".into());
    }
    let again = parsed.to_string();
    (again != ir).then(|| format!("print(parse(print(k))) differs:\n{again}"))
}

/// Simulate some of the kernel's lowerings (at most `config.simulations`, each small enough);
/// whether any ran.
#[allow(clippy::too_many_arguments)]
fn simulate(
    config: &FuzzConfig,
    index: u64,
    seed: u64,
    k: &Kernel,
    ir: &str,
    mut lowered: Vec<Lowered>,
    rng: &mut ChaCha8Rng,
    set_stage: &dyn Fn(Arch, &str),
    report: &mut FuzzReport,
) -> bool {
    if lowered.is_empty() {
        return false;
    }
    let lanes =
        |l: &LoweredKernel| u64::from(l.tp) * u64::from(l.grid) * u64::from(l.workgroup_size);
    // A lane's simulated work grows with the batch rows it computes: past 8 rows a kernel
    // counts as `ceil(batch / 8)` times its lanes, so that a batch-64 kernel is simulated where
    // it costs about what one at batch 8 does (larger ones ran past the hang timeout in the
    // soak: a 30-s CPU budget per kernel is for hangs, not for slow simulations).
    let rows = (schedules::batch(k) as u64).div_ceil(8).max(1);
    lowered.retain(|l| lanes(&l.kernel) * rows <= config.max_lanes);
    if lowered.is_empty() {
        report.too_large += 1;
        return false;
    }
    lowered.shuffle(rng);
    lowered.truncate(config.simulations);
    let sim_seed = seed >> 16;
    for l in lowered {
        let tiled = l.kernel.weight_passes > 1;
        let p = Prepared {
            ir: k.clone(),
            lowered: l.kernel,
            shapes: None,
            peer_table: PeerTable::Shared,
        };
        let counts = report.targets.entry(l.arch.to_string()).or_default();
        counts.simulations += 1;
        counts.batch_tiled += u64::from(tiled);
        set_stage(l.arch, &l.spec);
        let got = catch_unwind(AssertUnwindSafe(|| {
            sweep(&p, sim_seed, 0, config.interleavings, |_, _| {})
        }));
        let fail = |kind: String, message: String, first: u64| FuzzFinding {
            index,
            kernel_seed: seed,
            kind,
            message,
            target: Some(l.arch),
            schedule: Some(l.spec.clone()),
            sim: Some((sim_seed, first)),
            ir: ir.to_owned(),
        };
        match got {
            Ok(Ok(s)) => {
                report.interleavings += s.schedules;
                for f in s.findings {
                    let kind = format!("simulator: {}", f.first.kind.name());
                    let message = format!(
                        "{} [on {} of {} interleavings]",
                        f.first, f.schedules, s.schedules
                    );
                    report.findings.push(fail(kind, message, f.schedule));
                }
            }
            Ok(Err(e)) => report
                .findings
                .push(fail("simulation error".into(), e.to_string(), 0)),
            Err(p) => {
                report
                    .findings
                    .push(fail("panic in the simulator".into(), panic_message(&*p), 0))
            }
        }
    }
    report.simulated += 1;
    true
}
