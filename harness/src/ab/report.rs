//! What `wavefuse ab` found, and how it is shown: the terminal table with one verdict line per
//! kernel and shape, the JSON results file and the Markdown report. The chart is [`super::plot`].
//!
//! Everything here is plain data filled in by the GPU harness ([`super::gpu`]) or the no-GPU path
//! ([`super::cpu`]), so a result set can be built by hand and rendered (the tests do).

use std::fmt::Write as _;

use serde_json::{Value as Json, json};
use wavefuse_codegen::resources::ResourceUsage;

use crate::provenance::Provenance;

/// Whether anything was timed.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// On a GPU: correctness on the device at the model shapes, then timing.
    Gpu,
    /// No usable GPU: correctness in the CPU simulator at small shapes and the compilers'
    /// resource reports only.
    NoGpu {
        /// Why there is no GPU (the driver's answer).
        reason: String,
        /// Where the ranks were placed for the checks (one rank per device unless asked
        /// otherwise: the simulator models one device per rank).
        placement: crate::policy::Placement,
    },
}

/// The device, toolchain and settings of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// GPU or not.
    pub mode: Mode,
    /// Device, driver, runtime, compiler of the timed code, commit, date.
    pub provenance: Provenance,
    /// Workload seed.
    pub seed: u64,
    /// Untimed launches before each timed series.
    pub warmup: usize,
    /// Timed launches per series.
    pub iters: usize,
    /// How launches were timed.
    pub timing: TimingMode,
    /// How kernels were launched.
    pub launch: LaunchMode,
    /// The copy bandwidth measured at the start of each repeat.
    pub copy: Vec<CopyBw>,
}

/// How `wavefuse ab` times a series (`--timing`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TimingMode {
    /// CUDA events around one launch (of every timed rank) behind a gate: a sample per launch.
    #[default]
    Events,
    /// CUDA graphs of 20 back-to-back launches (of every timed rank, each on the next input
    /// set), replayed once each behind a gate on the device: a sample is one replay's window over its
    /// launches — the time per call of a decode step captured in a graph, launch gaps included
    /// and launch starts overlapped.
    Graphs,
}

/// Launches per captured graph in [`TimingMode::Graphs`].
pub const GRAPH_CALLS: usize = 20;

impl TimingMode {
    /// `events` or `graphs`.
    pub fn name(self) -> &'static str {
        match self {
            TimingMode::Events => "events",
            TimingMode::Graphs => "graphs",
        }
    }
}

/// How `wavefuse ab` launches the kernels it times (`--launch`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchMode {
    /// In plain stream order: a kernel starts when the previous one of its stream has completed.
    #[default]
    Stream,
    /// As a programmatic dependent of the previous kernel of its stream (CUDA's programmatic
    /// dependent launch) where the kernel's ABI allows it (`dependent_launch`: every generated
    /// sm_90 kernel without a grid barrier or flags; a hand-written one that says so), else in stream order: its workgroups may
    /// be scheduled during the previous kernel's last ones and wait there for it to complete.
    /// Overlaps only launches that follow each other in a stream (graphs); HIP launches in stream
    /// order.
    Dependent,
}

impl LaunchMode {
    /// `stream` or `dependent`.
    pub fn name(self) -> &'static str {
        match self {
            LaunchMode::Stream => "stream",
            LaunchMode::Dependent => "dependent",
        }
    }
}

/// One measurement of the device-to-device copy bandwidth.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyBw {
    /// Bytes of one copy (read once, written once).
    pub bytes: u64,
    /// Median time of one copy.
    pub median_ms: f64,
    /// Read plus written bytes per second at the median, GB/s.
    pub gbps: f64,
}

/// One kernel at one shape: the generated version against the hand-written one, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Kernel name.
    pub kernel: String,
    /// Shape set (`qwen27b-tp4`).
    pub shape: String,
    /// TP size.
    pub tp: u32,
    /// Tokens per launch.
    pub batch: usize,
    /// Per-rank weight shapes, `K→N`.
    pub dims: String,
    /// Bytes one rank must move per launch: every input read once, every output written once.
    pub bytes_per_rank: u64,
    /// The same over all ranks of the group (what one launch of the group moves on the device).
    pub bytes_per_group: u64,
    /// Whether rank 0 is timed alone on the GPU (a kernel that does not communicate, as TP
    /// deploys it: [`crate::policy::Ranks::Alone`]) rather than every rank of the group at once.
    pub alone: bool,
    /// Relative-L2 tolerance against the f64 reference.
    pub tolerance: f64,
    /// The generated kernel.
    pub generated: Version,
    /// The hand-written kernel.
    pub manual: Manual,
}

/// The hand-written side of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Manual {
    /// None to compare with, and why.
    Absent(String),
    /// One was found (or given with `--manual`).
    Present(Box<Version>),
}

/// One version of a kernel: where it comes from, whether it is right, how fast it is, what it
/// costs in registers.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    /// `generated` or the hand-written source's path.
    pub origin: String,
    /// Its `extern "C"` symbol.
    pub symbol: String,
    /// Against the f64 reference.
    pub check: Check,
    /// Event timing (GPU only).
    pub timing: Option<Timing>,
    /// Why it was not timed, when it was not.
    pub note: String,
    /// Compiler resource reports, per target.
    pub resources: Vec<Resources>,
    /// It could not be built, checked, compiled, bound or launched.
    pub error: Option<String>,
}

/// Correctness against the f64 reference: the worst output of the worst rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Where it ran (`H200, model shapes`, `simulator sm90+gfx906, small shapes`, or why not).
    pub on: String,
    /// Whether it ran at all.
    pub ran: bool,
    /// Within tolerance, every element finite, replicated outputs equal on every rank.
    pub pass: bool,
    /// Largest relative L2 error.
    pub rel_l2: f64,
    /// Largest absolute error.
    pub max_abs: f64,
    /// Smallest cosine similarity.
    pub cosine: f64,
    /// Non-finite output elements.
    pub non_finite: usize,
    /// The first failure, in words.
    pub detail: String,
}

impl Check {
    /// Not run, and why.
    pub fn not_run(why: impl Into<String>) -> Check {
        Check {
            on: why.into(),
            ran: false,
            pass: false,
            rel_l2: f64::NAN,
            max_abs: f64::NAN,
            cosine: f64::NAN,
            non_finite: 0,
            detail: String::new(),
        }
    }
}

/// The timed series of one version.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// One per repeat of the whole timing (DESIGN.md §8: the spread of a repeated run).
    pub repeats: Vec<Stats>,
    /// Input sets cycled through.
    pub sets: usize,
    /// Bytes of all sets together.
    pub rotation_bytes: u64,
    /// Whether L2 was also flushed before every launch (the sets alone did not reach 4 × L2).
    pub flushed: bool,
}

impl Timing {
    /// The first repeat's median, in µs.
    pub fn median_us(&self) -> f64 {
        self.repeats.first().map_or(f64::NAN, |s| s.median_us)
    }

    /// |median₂ − median₁| / min(median₁, median₂): how far two repeats of the same series
    /// disagree (NaN with one repeat).
    pub fn spread(&self) -> f64 {
        match self.repeats.as_slice() {
            [a, b, ..] => (a.median_us - b.median_us).abs() / a.median_us.min(b.median_us),
            _ => f64::NAN,
        }
    }
}

/// Order statistics of one timed series.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Timed launches.
    pub samples: usize,
    /// Median, µs.
    pub median_us: f64,
    /// 10th percentile, µs.
    pub p10_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
}

impl Stats {
    /// From per-launch times in milliseconds (nearest-rank percentiles, median of two middles).
    pub fn from_ms(samples_ms: &[f64]) -> Stats {
        let mut s: Vec<f64> = samples_ms.iter().map(|ms| ms * 1e3).collect();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let rank = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        let median = match n {
            0 => f64::NAN,
            n if n % 2 == 1 => s[n / 2],
            n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
        };
        Stats {
            samples: n,
            median_us: median,
            p10_us: if n == 0 { f64::NAN } else { rank(0.1) },
            p90_us: if n == 0 { f64::NAN } else { rank(0.9) },
        }
    }
}

/// A compiler's resource report for one target.
#[derive(Clone, Debug, PartialEq)]
pub struct Resources {
    /// `sm90` or `gfx906`.
    pub arch: String,
    /// The compiler (`nvrtc`, `hipcc`) and its version.
    pub compiler: String,
    /// The report, or why there is none.
    pub usage: Result<Usage, String>,
    /// gfx906 INT4 kernels: the MI50 time model's prediction from the compiled code (modelled,
    /// not measured; [`wavefuse_codegen::model`]).
    pub modelled: Option<wavefuse_codegen::model::Modelled>,
}

/// The numbers of a resource report ([`ResourceUsage`]) that the side-by-side table and the
/// JSON show.
#[derive(Clone, Debug, PartialEq)]
pub struct Usage {
    /// VGPRs (AMD) or registers per thread (NVIDIA).
    pub registers: u32,
    /// Spilled registers (AMD) or spill bytes (NVIDIA), plus scratch / stack-frame bytes per lane
    /// ([`ResourceUsage::spilled`] + [`ResourceUsage::scratch_bytes`]); 0 is the budget.
    pub spills: u32,
    /// LDS / shared memory per workgroup, bytes: the compiler's static figure plus the
    /// launch's dynamic LDS.
    pub lds_bytes: u32,
    /// Waves per SIMD (AMD, from the compiler, capped by the LDS with the dynamic part) or warps
    /// per SM sub-partition (NVIDIA, computed from registers, shared memory and the block size).
    pub occupancy: u32,
}

impl Usage {
    /// The table's numbers of `u` for blocks of `workgroup_size` lanes that each get
    /// `dynamic_lds` bytes of dynamic LDS at launch (the ABI's `dynamic_lds_bytes`).
    pub fn of(u: &ResourceUsage, workgroup_size: u32, dynamic_lds: u32) -> Usage {
        Usage {
            registers: u.registers(),
            spills: u.spilled() + u.scratch_bytes(),
            lds_bytes: u.lds_bytes().saturating_add(dynamic_lds),
            occupancy: u.occupancy_with_dynamic_lds(workgroup_size, dynamic_lds),
        }
    }
}

/// The whole result set.
#[derive(Clone, Debug, PartialEq)]
pub struct AbReport {
    /// Device, toolchain, settings.
    pub header: Header,
    /// One per kernel and shape.
    pub rows: Vec<Row>,
    /// Wall time of the run.
    pub seconds: f64,
}

/// The line the no-GPU path prints, word for word.
pub const NO_TIMING: &str = "no GPU: no timing was possible";

impl Row {
    /// `kernel@shape`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.kernel, self.shape)
    }

    /// The hand-written version, when there is one.
    pub fn manual_version(&self) -> Option<&Version> {
        match &self.manual {
            Manual::Present(v) => Some(v.as_ref()),
            Manual::Absent(_) => None,
        }
    }

    /// Bytes one timed launch moves: rank 0's when it is timed alone, the group's otherwise.
    pub fn timed_bytes(&self) -> u64 {
        if self.alone {
            self.bytes_per_rank
        } else {
            self.bytes_per_group
        }
    }

    /// What one timed launch runs: `rank 0 alone`, `1 rank`, `4 ranks at once`.
    pub fn timed_ranks(&self) -> String {
        match (self.alone, self.tp) {
            (true, _) => "rank 0 alone".into(),
            (false, 1) => "1 rank".into(),
            (false, tp) => format!("{tp} ranks at once"),
        }
    }

    /// Achieved bandwidth of `v` in GB/s: the timed launch's bytes ([`Row::timed_bytes`]) over
    /// its first repeat's median.
    pub fn gbps(&self, v: &Version) -> Option<f64> {
        let t = v.timing.as_ref()?.median_us();
        (t > 0.0).then(|| self.timed_bytes() as f64 / (t * 1e-6) / 1e9)
    }

    /// Generated time / hand-written time (first repeat's medians).
    pub fn ratio(&self) -> Option<f64> {
        let g = self.generated.timing.as_ref()?.median_us();
        let m = self.manual_version()?.timing.as_ref()?.median_us();
        (g > 0.0 && m > 0.0).then_some(g / m)
    }

    /// Whether the row is a failure: a version wrong, or one that could not be built or run.
    pub fn failed(&self) -> bool {
        let bad = |v: &Version| v.error.is_some() || (v.check.ran && !v.check.pass);
        bad(&self.generated) || self.manual_version().is_some_and(bad)
    }

    /// The verdict line: `correct; generated 1.07× faster than hand-written`, or `WRONG: …`.
    pub fn verdict(&self, header: &Header) -> String {
        let copy = header.copy.first().map(|c| c.gbps);
        let (mut wrong, mut errors) = (Vec::new(), Vec::new());
        for (who, v) in self.versions() {
            if let Some(e) = &v.error {
                errors.push(format!("{who}: {}", first_line(e)));
            } else if v.check.ran && !v.check.pass {
                wrong.push(format!("{who}: {}", v.check.detail));
            }
        }
        match (wrong.is_empty(), errors.is_empty()) {
            (false, _) => {
                return format!(
                    "WRONG: {}",
                    wrong
                        .into_iter()
                        .chain(errors)
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
            (true, false) => return format!("ERROR: {}", errors.join("; ")),
            (true, true) => {}
        }
        let correct = match &header.mode {
            // Not run, with the reason (a kernel that needs more GPUs than there are): no
            // verdict on the kernel.
            Mode::Gpu if !self.generated.check.ran && !self.generated.check.on.is_empty() => {
                return format!("generated {}", self.generated.check.on);
            }
            Mode::Gpu => "correct".to_owned(),
            Mode::NoGpu { .. } if self.generated.check.ran => {
                format!("generated correct on the {}", self.generated.check.on)
            }
            Mode::NoGpu { .. } => format!("generated not checked ({})", self.generated.check.on),
        };
        let speed = match (&header.mode, self.ratio(), &self.manual) {
            (Mode::NoGpu { .. }, _, Manual::Present(_)) => {
                "hand-written not run (it needs a GPU); no timing".to_owned()
            }
            (Mode::NoGpu { .. }, _, Manual::Absent(why)) => format!("{why}; no timing"),
            (Mode::Gpu, Some(r), _) => faster_or_slower(r),
            (Mode::Gpu, None, Manual::Absent(why)) => match self.gbps(&self.generated) {
                Some(bw) => format!("{why}; generated {}", bandwidth_phrase(bw, copy)),
                None => format!("{why}; generated not timed ({})", self.generated.note),
            },
            (Mode::Gpu, None, Manual::Present(m)) => {
                format!(
                    "not compared ({})",
                    [&self.generated.note, &m.note]
                        .map(|s| s.as_str())
                        .join("; ")
                        .trim_matches(&[';', ' '][..])
                )
            }
        };
        format!("{correct}; {speed}")
    }

    /// `("generated", v)` and `("hand-written", v)` when present.
    pub fn versions(&self) -> Vec<(&'static str, &Version)> {
        let mut out = vec![("generated", &self.generated)];
        if let Some(m) = self.manual_version() {
            out.push(("hand-written", m));
        }
        out
    }
}

/// `generated 1.07× faster than hand-written` for time ratio r = generated / hand-written.
pub fn faster_or_slower(r: f64) -> String {
    if (r - 1.0).abs() < 0.005 {
        "generated as fast as hand-written (within 0.5 %)".to_owned()
    } else if r < 1.0 {
        format!("generated {:.2}× faster than hand-written", 1.0 / r)
    } else {
        format!("generated {r:.2}× slower than hand-written")
    }
}

fn bandwidth_phrase(gbps: f64, copy: Option<f64>) -> String {
    match copy {
        Some(c) if c > 0.0 => format!(
            "{gbps:.0} GB/s, {:.0} % of copy bandwidth",
            100.0 * gbps / c
        ),
        _ => format!("{gbps:.0} GB/s"),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// A number, or `–` when it is not a number.
fn num(v: f64, f: impl Fn(f64) -> String) -> String {
    if v.is_nan() { "–".to_owned() } else { f(v) }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("–".to_owned(), f)
}

fn finite_or_null(v: f64) -> Json {
    if v.is_finite() { json!(v) } else { Json::Null }
}

impl AbReport {
    /// Rows that failed.
    pub fn failures(&self) -> usize {
        self.rows.iter().filter(|r| r.failed()).count()
    }

    /// The header lines shared by the terminal and the Markdown.
    fn header_lines(&self) -> Vec<String> {
        let h = &self.header;
        let mut out = Vec::new();
        match &h.mode {
            Mode::Gpu => {
                out.push(format!("device: {}", h.provenance.line()));
                let copies: Vec<String> = h
                    .copy
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("repeat {}: {:.0} GB/s", i + 1, c.gbps))
                    .collect();
                if let Some(c) = h.copy.first() {
                    out.push(format!(
                        "copy bandwidth (device-to-device copy of {:.0} MiB, read + written bytes, \
                         median of event-timed copies, measured in this run): {}",
                        c.bytes as f64 / (1 << 20) as f64,
                        copies.join(", ")
                    ));
                }
                let how = match h.timing {
                    TimingMode::Events => format!(
                        "CUDA events around one launch of the timed ranks (one stream each, \
                         released together behind a gate: device time only); {} warm-up + {} \
                         timed launches per series",
                        h.warmup, h.iters
                    ),
                    TimingMode::Graphs => format!(
                        "CUDA graphs of {GRAPH_CALLS} back-to-back launches of the timed ranks, \
                         each replayed once behind a gate on the device (a kernel sleeping \
                         0.5 ms on rank 0's stream; the other ranks' streams wait on its end), a \
                         sample = \
                         its window / \
                         {GRAPH_CALLS}; {} warm-up + {} timed launches per series (L2 is not \
                         flushed inside a graph)",
                        h.warmup, h.iters
                    ),
                };
                let how = match h.launch {
                    LaunchMode::Stream => how,
                    LaunchMode::Dependent => format!(
                        "{how}; launched as programmatic dependents of the previous launch in \
                         the stream where the kernel's ABI allows it (else in stream order)"
                    ),
                };
                out.push(format!(
                    "timing: {how}, the whole timing repeated {} times; inputs rotate over sets \
                     totalling ≥ 4 × L2 of the timed ranks' bytes (or L2 flushed before each \
                     launch where noted); bytes = every input read once + every output written \
                     once, per rank from the op-level buffers (a rank's reads of its peers' \
                     payloads are not counted); GB/s = the timed ranks' bytes / their time. At TP \
                     > 1 a kernel without an allreduce is timed as rank 0 alone on the GPU, its \
                     schedule resolved for one rank per GPU (as `wavefuse emit` prints it); a \
                     kernel with one runs all ranks on the GPU at once, resolved for ranks \
                     sharing it (`wavefuse emit KERNEL --tp N --placement same-device` prints \
                     that), and an event window then also holds each rank's launch start (several \
                     µs: most of a communicating kernel's row; compare in graphs)",
                    h.copy.len().max(1)
                ));
            }
            Mode::NoGpu { reason, placement } => {
                out.push(format!("{NO_TIMING} ({reason})"));
                out.push(
                    match placement {
                        crate::policy::Placement::PerDevice => {
                            "placement: one rank per device, as TP is deployed \
                             (`--placement per-device`; what `wavefuse emit` prints): each \
                             rank's grid is fitted to its own device"
                        }
                        crate::policy::Placement::SameDevice => {
                            "placement: all ranks on one device (`--placement same-device`): \
                             the ranks' grids are fitted to share it"
                        }
                    }
                    .to_owned(),
                );
                let s = crate::sim::SmallShapes::DEFAULT;
                // A user's kernel (`own-…` shapes) has one shape, its own, and is simulated at it.
                let own =
                    !self.rows.is_empty() && self.rows.iter().all(|r| r.shape.starts_with("own-"));
                let at = if own {
                    "at the shapes the kernel is written with".to_owned()
                } else {
                    format!(
                        "at small shapes (hidden {}, FFN/rank {}, Q/rank {}, KV/rank {}; GPTQ \
                         groups and INT8 blocks as in the model)",
                        s.hidden, s.ffn, s.q, s.kv
                    )
                };
                out.push(format!(
                    "correctness: generated code, lowered for sm90 and for gfx906, in the CPU \
                     protocol simulator against the f64 reference {at}; hand-written code needs \
                     a GPU. Resources: the compilers' reports at the {}",
                    if own { "same shapes" } else { "model shapes" }
                ));
            }
        }
        out.push(format!("{}, seed {:#x}", h.provenance.origin(), h.seed));
        out
    }

    /// Width of the first column: the longest `kernel@shape`.
    fn label_width(&self) -> usize {
        self.rows
            .iter()
            .map(|r| r.label().chars().count())
            .max()
            .unwrap_or(0)
            .max(12)
    }

    /// The terminal output: header, table, resource table, one verdict line per row.
    pub fn terminal(&self) -> String {
        let mut out = String::new();
        for l in self.header_lines() {
            let _ = writeln!(out, "{l}");
        }
        let _ = writeln!(out);
        match self.header.mode {
            Mode::Gpu => self.timing_table(&mut out),
            Mode::NoGpu { .. } => self.check_table(&mut out),
        }
        let _ = writeln!(out);
        self.resource_table(&mut out);
        let _ = writeln!(out);
        for r in &self.rows {
            let _ = writeln!(out, "{}: {}", r.label(), r.verdict(&self.header));
        }
        if let Mode::NoGpu { .. } = self.header.mode {
            let _ = writeln!(out, "\n{NO_TIMING}");
        }
        out
    }

    fn timing_table(&self, out: &mut String) {
        let w = self.label_width();
        let _ = writeln!(
            out,
            "{:<w$} {:<12} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6}",
            "kernel@shape",
            "version",
            "rel L2",
            "max abs",
            "cosine",
            "p50 µs",
            "p10 µs",
            "p90 µs",
            "rep2 µs",
            "spread",
            "GB/s",
            "%copy",
            "g/h"
        );
        let copy = self.header.copy.first().map(|c| c.gbps);
        for r in &self.rows {
            for (i, (who, v)) in r.versions().into_iter().enumerate() {
                let label = if i == 0 { r.label() } else { String::new() };
                let t = v.timing.as_ref();
                let rep = |k: usize, f: fn(&Stats) -> f64| t.and_then(|t| t.repeats.get(k)).map(f);
                let bw = r.gbps(v);
                let _ = writeln!(
                    out,
                    "{label:<w$} {who:<12} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>6}",
                    num(v.check.rel_l2, |x| format!("{x:.2e}")),
                    num(v.check.max_abs, |x| format!("{x:.2e}")),
                    num(v.check.cosine, |x| format!("{x:.8}")),
                    opt(rep(0, |s| s.median_us), |x| format!("{x:.2}")),
                    opt(rep(0, |s| s.p10_us), |x| format!("{x:.2}")),
                    opt(rep(0, |s| s.p90_us), |x| format!("{x:.2}")),
                    opt(rep(1, |s| s.median_us), |x| format!("{x:.2}")),
                    opt(t.map(Timing::spread).filter(|s| !s.is_nan()), |x| format!(
                        "{:.1}%",
                        100.0 * x
                    )),
                    opt(bw, |x| format!("{x:.0}")),
                    opt(bw.zip(copy).map(|(b, c)| b / c), |x| format!(
                        "{:.0}%",
                        100.0 * x
                    )),
                    if i == 0 {
                        opt(r.ratio(), |x| format!("{x:.2}"))
                    } else {
                        String::new()
                    },
                );
            }
            if let Manual::Absent(why) = &r.manual {
                let _ = writeln!(out, "{:<w$} {:<12} {why}", "", "hand-written");
            }
        }
        let _ = writeln!(
            out,
            "\n{:<w$} {:>10} {:>10}  {:<16} input sets (generated)",
            "bytes per launch", "MB/rank", "MB/group", "timed"
        );
        for r in &self.rows {
            let sets = r.generated.timing.as_ref().map_or_else(
                || r.generated.note.clone(),
                |t| {
                    let note = &r.generated.note;
                    format!(
                        "{} × {:.1} MB{}{}",
                        t.sets,
                        t.rotation_bytes as f64 / t.sets.max(1) as f64 / 1e6,
                        if t.flushed {
                            ", + L2 flush before each launch"
                        } else {
                            ""
                        },
                        if note.is_empty() {
                            String::new()
                        } else {
                            format!("; {note}")
                        }
                    )
                },
            );
            let _ = writeln!(
                out,
                "{:<w$} {:>10.3} {:>10.3}  {:<16} {sets}",
                r.label(),
                r.bytes_per_rank as f64 / 1e6,
                r.bytes_per_group as f64 / 1e6,
                r.timed_ranks()
            );
        }
    }

    fn check_table(&self, out: &mut String) {
        let w = self.label_width();
        let _ = writeln!(
            out,
            "{:<w$} {:<12} {:<36} {:>9} {:>9} {:>11}  result",
            "kernel@shape", "version", "checked on", "rel L2", "max abs", "cosine"
        );
        for r in &self.rows {
            for (i, (who, v)) in r.versions().into_iter().enumerate() {
                let label = if i == 0 { r.label() } else { String::new() };
                let result = if let Some(e) = &v.error {
                    clip(&format!("ERROR: {e}"), 100)
                } else if !v.check.ran {
                    "not run".to_owned()
                } else if v.check.pass {
                    format!("ok (tol {:.0e})", r.tolerance)
                } else {
                    format!("WRONG: {}", v.check.detail)
                };
                let _ = writeln!(
                    out,
                    "{label:<w$} {who:<12} {:<36} {:>9} {:>9} {:>11}  {result}",
                    clip(&v.check.on, 36),
                    num(v.check.rel_l2, |x| format!("{x:.2e}")),
                    num(v.check.max_abs, |x| format!("{x:.2e}")),
                    num(v.check.cosine, |x| format!("{x:.8}")),
                );
            }
            if let Manual::Absent(why) = &r.manual {
                let _ = writeln!(out, "{:<w$} {:<12} {why}", "", "hand-written");
            }
        }
    }

    /// Generated and hand-written resource reports side by side, per target.
    fn resource_table(&self, out: &mut String) {
        let w = self.label_width().max(33);
        let _ = writeln!(
            out,
            "{:<w$} {:<7} {:<34} hand-written",
            "resources (regs/spills/LDS B/occ)", "target", "generated"
        );
        for r in &self.rows {
            let mut archs: Vec<&str> = r
                .versions()
                .iter()
                .flat_map(|(_, v)| v.resources.iter().map(|x| x.arch.as_str()))
                .collect();
            archs.sort();
            archs.dedup();
            for (i, arch) in archs.iter().enumerate() {
                let cell = |v: Option<&Version>| match v {
                    None => "–".to_owned(),
                    Some(v) => usage_cell(v.resources.iter().find(|x| x.arch == *arch)),
                };
                let label = if i == 0 { r.label() } else { String::new() };
                let _ = writeln!(
                    out,
                    "{label:<w$} {arch:<7} {:<34} {}",
                    cell(Some(&r.generated)),
                    cell(r.manual_version())
                );
                let modelled = |v: Option<&Version>| modelled_cell(v, arch);
                if r.versions().iter().any(|(_, v)| modelled(Some(v)) != "–") {
                    let _ = writeln!(
                        out,
                        "{:<w$} {:<7} {:<34} {}",
                        "",
                        "",
                        modelled(Some(&r.generated)),
                        modelled(r.manual_version())
                    );
                }
            }
        }
        if self.rows.iter().any(|r| {
            r.versions()
                .iter()
                .any(|(_, v)| v.resources.iter().any(|x| x.modelled.is_some()))
        }) {
            let _ = writeln!(
                out,
                "modelled (MI50): the time model's prediction from hipcc's code (codegen/src/model/), \
                 not measured: no AMD GPU ran it"
            );
        }
    }

    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let mut out = String::from("## wavefuse ab: generated vs hand-written\n\n");
        for l in self.header_lines() {
            let _ = writeln!(out, "{l}  ");
        }
        let _ = writeln!(out);
        match self.header.mode {
            Mode::Gpu => self.markdown_timing(&mut out),
            Mode::NoGpu { .. } => self.markdown_check(&mut out),
        }
        let _ = writeln!(
            out,
            "\n| kernel@shape | target | generated (regs / spills / LDS B / occ) | hand-written |"
        );
        let _ = writeln!(out, "|---|---|---|---|");
        for r in &self.rows {
            for res in &r.generated.resources {
                let hand = r.manual_version().map_or("–".to_owned(), |m| {
                    usage_cell(m.resources.iter().find(|x| x.arch == res.arch))
                });
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    r.label(),
                    res.arch,
                    md(&usage_cell(Some(res))),
                    md(&hand)
                );
                if res.modelled.is_some() {
                    let _ = writeln!(
                        out,
                        "| {} | {} modelled (MI50), not measured | {} | {} |",
                        r.label(),
                        res.arch,
                        modelled_cell(Some(&r.generated), &res.arch),
                        modelled_cell(r.manual_version(), &res.arch)
                    );
                }
            }
        }
        let _ = writeln!(out, "\n### Verdicts\n");
        for r in &self.rows {
            let _ = writeln!(out, "- `{}`: {}", r.label(), md(&r.verdict(&self.header)));
        }
        if let Mode::NoGpu { .. } = self.header.mode {
            let _ = writeln!(out, "\n**{NO_TIMING}.**");
        }
        out
    }

    fn markdown_timing(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "| kernel | shape | version | rel L2 | max abs | cosine | p50 µs | p10 µs | p90 µs \
             | repeat 2 p50 µs | spread | MB/rank | MB/group | timed | GB/s | % copy | gen/hand | input sets |"
        );
        let _ = writeln!(
            out,
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"
        );
        let copy = self.header.copy.first().map(|c| c.gbps);
        for r in &self.rows {
            for (i, (who, v)) in r.versions().into_iter().enumerate() {
                let t = v.timing.as_ref();
                let rep = |k: usize, f: fn(&Stats) -> f64| t.and_then(|t| t.repeats.get(k)).map(f);
                let bw = r.gbps(v);
                let sets = t.map_or(md(&v.note), |t| {
                    format!(
                        "{} × {:.0} MB{}",
                        t.sets,
                        t.rotation_bytes as f64 / t.sets.max(1) as f64 / 1e6,
                        if t.flushed { " + L2 flush" } else { "" }
                    )
                });
                let _ = writeln!(
                    out,
                    "| {} | {} | {who} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {sets} |",
                    r.kernel,
                    r.shape,
                    num(v.check.rel_l2, |x| format!("{x:.2e}")),
                    num(v.check.max_abs, |x| format!("{x:.2e}")),
                    num(v.check.cosine, |x| format!("{x:.8}")),
                    opt(rep(0, |s| s.median_us), |x| format!("{x:.2}")),
                    opt(rep(0, |s| s.p10_us), |x| format!("{x:.2}")),
                    opt(rep(0, |s| s.p90_us), |x| format!("{x:.2}")),
                    opt(rep(1, |s| s.median_us), |x| format!("{x:.2}")),
                    opt(t.map(Timing::spread).filter(|s| !s.is_nan()), |x| format!(
                        "{:.1} %",
                        100.0 * x
                    )),
                    r.bytes_per_rank as f64 / 1e6,
                    r.bytes_per_group as f64 / 1e6,
                    r.timed_ranks(),
                    opt(bw, |x| format!("{x:.0}")),
                    opt(bw.zip(copy).map(|(b, c)| b / c), |x| format!(
                        "{:.0} %",
                        100.0 * x
                    )),
                    if i == 0 {
                        opt(r.ratio(), |x| format!("{x:.2}"))
                    } else {
                        String::new()
                    },
                );
            }
            if let Manual::Absent(why) = &r.manual {
                let _ = writeln!(
                    out,
                    "| {} | {} | hand-written | {} |  |  |  |  |  |  |  |  |  |  |  |  |  |  |",
                    r.kernel,
                    r.shape,
                    md(why)
                );
            }
        }
    }

    fn markdown_check(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "| kernel | shape | version | checked on | rel L2 | tol | max abs | cosine | MB/rank | result |"
        );
        let _ = writeln!(out, "|---|---|---|---|---:|---:|---:|---:|---:|---|");
        for r in &self.rows {
            for (who, v) in r.versions() {
                let result = if let Some(e) = &v.error {
                    format!("ERROR: {}", first_line(e))
                } else if !v.check.ran {
                    "not run".to_owned()
                } else if v.check.pass {
                    "ok".to_owned()
                } else {
                    format!("WRONG: {}", v.check.detail)
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {who} | {} | {} | {:.0e} | {} | {} | {:.3} | {} |",
                    r.kernel,
                    r.shape,
                    md(&v.check.on),
                    num(v.check.rel_l2, |x| format!("{x:.2e}")),
                    r.tolerance,
                    num(v.check.max_abs, |x| format!("{x:.2e}")),
                    num(v.check.cosine, |x| format!("{x:.8}")),
                    r.bytes_per_rank as f64 / 1e6,
                    md(&result)
                );
            }
            if let Manual::Absent(why) = &r.manual {
                let _ = writeln!(
                    out,
                    "| {} | {} | hand-written | {} |  |  |  |  |  |  |",
                    r.kernel,
                    r.shape,
                    md(why)
                );
            }
        }
    }

    /// The JSON results file.
    pub fn to_json(&self) -> Json {
        let h = &self.header;
        h.provenance.json_with(json!({
            "schema": "wavefuse-ab/1",
            "mode": match &h.mode { Mode::Gpu => "gpu", Mode::NoGpu { .. } => "no-gpu" },
            "no_gpu_reason": match &h.mode { Mode::Gpu => Json::Null, Mode::NoGpu { reason, .. } => json!(reason) },
            "placement": match &h.mode { Mode::Gpu => Json::Null, Mode::NoGpu { placement, .. } => json!(placement.name()) },
            "timing": match &h.mode { Mode::Gpu => Json::Null, Mode::NoGpu { .. } => json!(NO_TIMING) },
            "timing_mode": h.timing.name(),
            "launch": h.launch.name(),
            "seed": h.seed,
            "warmup": h.warmup,
            "iters": h.iters,
            "copy_bandwidth": h.copy.iter().map(|c| json!({
                "bytes": c.bytes, "median_ms": c.median_ms, "gbps": c.gbps,
                "counts": "bytes read + bytes written",
            })).collect::<Vec<_>>(),
            "seconds": self.seconds,
            "failures": self.failures(),
            "rows": self.rows.iter().map(|r| self.row_json(r)).collect::<Vec<_>>(),
        }))
    }

    fn row_json(&self, r: &Row) -> Json {
        let copy = self.header.copy.first().map(|c| c.gbps);
        let version = |v: &Version| {
            let bw = r.gbps(v);
            json!({
                "origin": v.origin,
                "symbol": v.symbol,
                "error": v.error,
                "note": v.note,
                "check": {
                    "on": v.check.on, "ran": v.check.ran, "pass": v.check.pass,
                    "rel_l2": finite_or_null(v.check.rel_l2), "max_abs": finite_or_null(v.check.max_abs),
                    "cosine": finite_or_null(v.check.cosine), "non_finite": v.check.non_finite,
                    "detail": v.check.detail,
                },
                "timing": v.timing.as_ref().map(|t| json!({
                    "repeats": t.repeats.iter().map(|s| json!({
                        "samples": s.samples, "median_us": s.median_us, "p10_us": s.p10_us, "p90_us": s.p90_us,
                    })).collect::<Vec<_>>(),
                    "spread": finite_or_null(t.spread()),
                    "input_sets": t.sets,
                    "rotation_bytes": t.rotation_bytes,
                    "l2_flushed": t.flushed,
                    "gbps": bw,
                    "fraction_of_copy_bandwidth": bw.zip(copy).map(|(b, c)| b / c),
                })),
                "resources": v.resources.iter().map(|x| json!({
                    "arch": x.arch, "compiler": x.compiler,
                    "usage": match &x.usage {
                        Ok(u) => json!({"registers": u.registers, "spills": u.spills, "lds_bytes": u.lds_bytes, "occupancy": u.occupancy}),
                        Err(e) => json!({"error": e}),
                    },
                    "modelled_mi50": x.modelled.as_ref().map(|m| json!({
                        "label": "modelled (MI50), not measured", "us": m.us, "gbps": m.gb_per_s(),
                        "bound": format!("{:?}", m.bound), "inputs": m.inputs,
                    })),
                })).collect::<Vec<_>>(),
            })
        };
        json!({
            "kernel": r.kernel,
            "shape": r.shape,
            "tp": r.tp,
            "batch": r.batch,
            "dims": r.dims,
            "bytes_per_rank": r.bytes_per_rank,
            "bytes_per_group": r.bytes_per_group,
            "timed_ranks": r.timed_ranks(),
            "tolerance": r.tolerance,
            "verdict": r.verdict(&self.header),
            "failed": r.failed(),
            "generated": version(&r.generated),
            "manual": match &r.manual {
                Manual::Present(v) => version(v),
                Manual::Absent(why) => json!({ "absent": why }),
            },
            "generated_over_manual_time": r.ratio(),
        })
    }
}

/// The MI50 model's prediction for `v` on `arch`: `modelled (MI50) 12.0 µs, 183 GB/s`, or `–`.
fn modelled_cell(v: Option<&Version>, arch: &str) -> String {
    v.and_then(|v| v.resources.iter().find(|x| x.arch == arch))
        .and_then(|x| x.modelled.as_ref())
        .map_or("–".to_owned(), |m| {
            format!("modelled (MI50) {:.1} µs, {:.0} GB/s", m.us, m.gb_per_s())
        })
}

/// `regs/spills/LDS/occ` of one resource report.
fn usage_cell(r: Option<&Resources>) -> String {
    match r {
        None => "–".to_owned(),
        Some(r) => match &r.usage {
            Ok(u) => format!(
                "{}/{}/{}/{}",
                u.registers, u.spills, u.lds_bytes, u.occupancy
            ),
            Err(e) => clip(e, 34),
        },
    }
}

/// A table cell: no pipes, one line.
fn md(text: &str) -> String {
    first_line(text).replace('|', "/")
}

/// The first line of `text`, at most `max` characters.
pub fn clip(text: &str, max: usize) -> String {
    let line = first_line(text);
    match line.char_indices().nth(max.saturating_sub(1)) {
        Some((i, _)) if line.chars().count() > max => format!("{}…", &line[..i]),
        _ => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms: Vec<f64> = (1..=100).map(|i| f64::from(i) * 1e-3).collect();
        let s = Stats::from_ms(&ms);
        assert_eq!(s.samples, 100);
        assert!((s.median_us - 50.5).abs() < 1e-9);
        assert!((s.p10_us - 10.0).abs() < 1e-9 && (s.p90_us - 90.0).abs() < 1e-9);
    }

    #[test]
    fn ratios_read_as_words() {
        assert_eq!(
            faster_or_slower(1.0 / 1.07),
            "generated 1.07× faster than hand-written"
        );
        assert_eq!(
            faster_or_slower(1.25),
            "generated 1.25× slower than hand-written"
        );
        assert!(faster_or_slower(1.001).contains("as fast as"));
    }

    #[test]
    fn clip_keeps_short_lines() {
        assert_eq!(clip("abc\ndef", 5), "abc");
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
