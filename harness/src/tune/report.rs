//! The search's report: per kernel and shape, every candidate (schedule, compile time, resources,
//! filter verdict, correctness, timing), the winner against the default; terminal table, JSON and
//! Markdown. Also the one rule that picks a winner ([`pick_winner`]).

use std::fmt::Write as _;

use serde::Serialize;
use wavefuse_codegen::lower::Schedule;

use crate::ab::report::{NO_TIMING, Stats};
use crate::provenance::Provenance;

/// How candidates are ranked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// By event-timed median (the finals' when there were finals).
    Timed,
    /// By the static model's cost ([`super::statics`]).
    StaticModel,
}

/// Timing of one series (or of the finals' series together).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// Timed launches.
    pub samples: usize,
    /// Median, µs.
    pub median_us: f64,
    /// 10th percentile, µs.
    pub p10_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
}

impl Timing {
    /// From per-launch times in ms (the percentiles of `wavefuse ab`).
    pub fn from_ms(samples_ms: &[f64]) -> Timing {
        let s = Stats::from_ms(samples_ms);
        Timing {
            samples: s.samples,
            median_us: s.median_us,
            p10_us: s.p10_us,
            p90_us: s.p90_us,
        }
    }
}

/// One candidate of one search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    /// Index in the search (0 is the default).
    pub index: usize,
    /// The schedule in a few words.
    pub summary: String,
    /// The schedule.
    pub schedule: Schedule,
    /// Compile (or cache read) wall time, ms.
    pub compile_ms: Option<f64>,
    /// Whether the artifact came from the cache.
    pub cached: bool,
    /// Registers (NVIDIA, per thread) or VGPRs (AMD).
    pub registers: Option<u32>,
    /// Spills (bytes on NVIDIA, registers on AMD).
    pub spills: Option<u32>,
    /// Occupancy (warps per SM sub-partition, or waves per SIMD).
    pub occupancy: Option<u32>,
    /// Whether it passed the resource filter (compiled, no spills, occupancy ≥ the floor).
    pub resources_ok: bool,
    /// Why not, when it did not.
    pub rejected: Option<String>,
    /// Against the f64 reference (None: not checked).
    pub correct: Option<bool>,
    /// Largest relative L2 error, when checked.
    pub rel_l2: Option<f64>,
    /// Where it was checked, or why it failed.
    pub check_detail: String,
    /// The first timed series.
    pub timing: Option<Timing>,
    /// The finals' series together (finalists only).
    pub finals: Option<Timing>,
    /// Achieved bandwidth at the best known median, GB/s.
    pub gbps: Option<f64>,
    /// That as a fraction of the copy bandwidth of the same run.
    pub copy_fraction: Option<f64>,
    /// The static model's cost (static searches).
    pub static_cost: Option<f64>,
    /// gfx906: the MI50 time model's prediction for it, µs (modelled, not measured: hipcc's code
    /// counted, [`wavefuse_codegen::model`]); what `tune --arch gfx906` ranks by when every
    /// candidate has one.
    pub modelled_us: Option<f64>,
    /// A failure after compiling (binding, launch, timing).
    pub error: Option<String>,
}

impl Candidate {
    /// A candidate with nothing measured yet.
    pub fn new(index: usize, summary: String, schedule: Schedule) -> Candidate {
        Candidate {
            index,
            summary,
            schedule,
            compile_ms: None,
            cached: false,
            registers: None,
            spills: None,
            occupancy: None,
            resources_ok: false,
            rejected: None,
            correct: None,
            rel_l2: None,
            check_detail: String::new(),
            timing: None,
            finals: None,
            gbps: None,
            copy_fraction: None,
            static_cost: None,
            modelled_us: None,
            error: None,
        }
    }

    /// The median the ranking uses: the finals' when it was a finalist, else its one series.
    pub fn best_median_us(&self) -> Option<f64> {
        self.finals
            .as_ref()
            .or(self.timing.as_ref())
            .map(|t| t.median_us)
            .filter(|m| m.is_finite())
    }

    /// What a search may pick: it compiled within budget, it is known to be correct, and nothing
    /// failed after.
    pub fn eligible(&self) -> bool {
        self.resources_ok && self.correct == Some(true) && self.error.is_none()
    }

    fn score(&self, basis: Basis) -> Option<f64> {
        match basis {
            Basis::Timed => self.best_median_us(),
            // The MI50 model's µs when the ranking has them (all or none: `rank_statically`),
            // else the instruction count.
            Basis::StaticModel => self.modelled_us.or(self.static_cost),
        }
    }
}

/// The winner: the eligible candidate with the lowest time (or static cost), the lower index on
/// ties. A candidate that is not known correct never wins, however fast.
pub fn pick_winner(cands: &[Candidate], basis: Basis) -> Option<usize> {
    cands
        .iter()
        .filter(|c| c.eligible())
        .filter_map(|c| c.score(basis).map(|s| (s, c.index)))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .map(|(_, i)| i)
}

/// The search of one kernel at one shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CaseReport {
    /// Kernel name.
    pub kernel: String,
    /// Shape set name.
    pub shape: String,
    /// The tuned store's key (kernel, shape) its winner is stored under: the kernel and shape set
    /// for the set's kernels, the fingerprint of the text for a user's; `None`: not stored.
    pub store_key: Option<(String, String)>,
    /// Whether the committed budgets applied to its candidates ([`super::budgeted`]).
    pub budgeted: bool,
    /// Per-rank weight shapes.
    pub dims: String,
    /// Bytes one timed launch must move (rank 0's when it is timed alone, the group's
    /// otherwise).
    pub bytes_per_group: u64,
    /// Whether rank 0 was timed alone ([`crate::policy::Ranks::Alone`]).
    pub alone: bool,
    /// Schedules enumerated.
    pub enumerated: usize,
    /// Schedules looked at before the budget was reached.
    pub considered: usize,
    /// Rejected by the lowering or the writer.
    pub rejected_by_lower: usize,
    /// Examples of rejections: (schedule, why).
    pub rejected_examples: Vec<(String, String)>,
    /// Rejected because every rank's grid would not fit on one device at once.
    pub not_coresident: usize,
    /// Schedules whose source equals an earlier candidate's.
    pub duplicates: usize,
    /// Seconds spent lowering and writing.
    pub lowering_s: f64,
    /// Candidates compiled by the compiler (not from the cache).
    pub compiled_fresh: usize,
    /// Candidates read from the cache.
    pub cached: usize,
    /// Candidates that did not compile.
    pub compile_failed: usize,
    /// Wall time of all compiles, s.
    pub compile_s: f64,
    /// Candidates per second through the compile stage (wall time, all threads).
    pub compile_rate: f64,
    /// Compiler threads.
    pub compile_threads: usize,
    /// The occupancy floor of the resource filter, and whose it is.
    pub occupancy_floor: Option<u32>,
    /// `default` or `hand-written`.
    pub floor_from: String,
    /// Rejected by the resource filter.
    pub resource_rejected: usize,
    /// Candidates timed.
    pub timed: usize,
    /// Wall time of the timing stage, s.
    pub timing_s: f64,
    /// Candidates per second through correctness check and timing.
    pub timing_rate: f64,
    /// The candidates.
    pub candidates: Vec<Candidate>,
    /// The winner's index.
    pub winner: Option<usize>,
    /// Default time / winner time (timed searches).
    pub speedup: Option<f64>,
    /// Anything that stopped the search early.
    pub note: String,
}

/// Device, toolchain, settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Header {
    /// `timed` or `static`.
    pub mode: String,
    /// Why nothing was timed (static mode).
    pub no_timing: Option<String>,
    /// Target.
    pub arch: String,
    /// Device (`none` without a GPU), driver, runtime, the compiler, commit, date.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// Copy bandwidth measurements of the run, GB/s (read + write).
    pub copy_gbps: Vec<f64>,
    /// Workload seed.
    pub seed: u64,
    /// Untimed launches per series.
    pub warmup: usize,
    /// Timed launches per series.
    pub iters: usize,
    /// Finalists re-timed (besides the default).
    pub finalists: usize,
    /// Final repeats per finalist.
    pub final_repeats: usize,
    /// Candidate budget per kernel and shape.
    pub budget: usize,
    /// Whether the quick space was searched.
    pub quick: bool,
    /// How winners are ranked.
    pub basis: Option<Basis>,
}

/// A whole `wavefuse tune` run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TuneReport {
    /// Device, toolchain, settings.
    pub header: Header,
    /// One per kernel and shape.
    pub cases: Vec<CaseReport>,
    /// Where the winners were stored.
    pub stored_in: Vec<String>,
    /// Wall time, s.
    pub seconds: f64,
    /// What went wrong without stopping the run (a compile cache that could not be written, an
    /// entry stored under another key), once per kind with a count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The run was interrupted (SIGINT, SIGTERM, SIGHUP) before its search finished: the cases
    /// cover only what was done, and no winner is stored ([`super::entries`] gives none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// What an interrupted report says first.
pub const INTERRUPTED: &str = "INTERRUPTED: the search did not finish; these results are \
     partial and no winner was stored";

/// The compile cache's warnings, one line per distinct message head with how often it came.
pub fn cache_warnings(cache: &wavefuse_runtime::Cache) -> Vec<String> {
    let mut lines: Vec<(String, usize)> = Vec::new();
    for w in cache.take_warnings() {
        let text = w.to_string();
        // Entries differ only by their key: group by the kind of warning.
        let head = match &w {
            wavefuse_runtime::CacheWarning::NotWritten(e) => format!(
                "compile cache at {} could not be written ({}: {}); compiled without it",
                cache.dir().display(),
                e.what,
                e.source
            ),
            wavefuse_runtime::CacheWarning::Stale { .. }
            | wavefuse_runtime::CacheWarning::Corrupt { .. } => text,
        };
        match lines.iter_mut().find(|(h, _)| *h == head) {
            Some((_, n)) => *n += 1,
            None => lines.push((head, 1)),
        }
    }
    lines
        .into_iter()
        .map(|(h, n)| if n > 1 { format!("{h} ({n} times)") } else { h })
        .collect()
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

fn us(t: &Option<Timing>) -> String {
    t.as_ref().map_or_else(
        || "–".into(),
        |t| format!("{:.2} [{:.2}, {:.2}]", t.median_us, t.p10_us, t.p90_us),
    )
}

fn correct(c: &Candidate) -> &'static str {
    match c.correct {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "–",
    }
}

impl CaseReport {
    /// `kernel@shape (dims)`, with `; timed: rank 0 alone` when it was.
    pub fn title(&self) -> String {
        format!(
            "{}@{} ({}{})",
            self.kernel,
            self.shape,
            self.dims,
            if self.alone {
                "; timed: rank 0 alone"
            } else {
                ""
            }
        )
    }

    /// When candidates were compiled and not one succeeded: the first candidate's reason.
    pub fn all_failed(&self) -> Option<&str> {
        let compiled = self.compiled_fresh + self.cached;
        if self.compile_failed == 0 || compiled > 0 {
            return None;
        }
        self.candidates
            .iter()
            .find_map(|c| c.rejected.as_deref().filter(|r| r.starts_with("compile")))
    }
}

impl TuneReport {
    /// The first case in which every candidate failed to compile, with that case's first reason:
    /// the run found nothing there, and says so with a non-zero exit.
    pub fn all_failed(&self) -> Option<(String, String)> {
        self.cases.iter().find_map(|c| {
            c.all_failed()
                .map(|why| (format!("{} {}", c.kernel, c.shape), why.to_owned()))
        })
    }

    /// The copy bandwidth of the run (median of its measurements), GB/s.
    pub fn copy_gbps(&self) -> Option<f64> {
        let mut v = self.header.copy_gbps.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// The lines printed at the end of a run.
    pub fn terminal(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "wavefuse tune: {} on {} ({}), {}, commit {}",
            h.arch,
            h.provenance.device.name,
            h.provenance.compiler,
            h.provenance.date,
            h.provenance.commit
        );
        if self.interrupted {
            let _ = writeln!(s, "{INTERRUPTED}");
        }
        if let Some(why) = &h.no_timing {
            let _ = writeln!(s, "{NO_TIMING} ({why})");
        }
        for c in &self.cases {
            let _ = writeln!(s, "\n{}", c.title());
            let _ = writeln!(s, "  {}", funnel(c));
            if !c.note.is_empty() {
                let _ = writeln!(s, "  note: {}", c.note);
            }
            let mut shown: Vec<&Candidate> = c.candidates.iter().collect();
            match h.basis {
                Some(Basis::Timed) => shown.sort_by(|a, b| {
                    let m = |x: &Candidate| x.best_median_us().unwrap_or(f64::INFINITY);
                    m(a).total_cmp(&m(b))
                }),
                Some(Basis::StaticModel) => shown.sort_by(|a, b| {
                    let m =
                        |x: &Candidate| x.modelled_us.or(x.static_cost).unwrap_or(f64::INFINITY);
                    m(a).total_cmp(&m(b))
                }),
                None => {}
            }
            let _ = writeln!(
                s,
                "  {:>4} {:<48} {:>8} {:>5} {:>6} {:>4} {:>7} {:>26} {:>8}",
                "#",
                "schedule",
                "compile",
                "regs",
                "spills",
                "occ",
                "correct",
                "µs median [p10, p90]",
                "GB/s"
            );
            for x in shown.iter().take(12) {
                let mark = if Some(x.index) == c.winner { "*" } else { " " };
                let _ = writeln!(
                    s,
                    " {mark}{:>4} {:<48} {:>8} {:>5} {:>6} {:>4} {:>7} {:>26} {:>8}{}",
                    x.index,
                    x.summary,
                    x.compile_ms.map_or("–".into(), |m| format!("{m:.0} ms")),
                    opt(x.registers),
                    opt(x.spills),
                    opt(x.occupancy),
                    correct(x),
                    us(if x.finals.is_some() {
                        &x.finals
                    } else {
                        &x.timing
                    }),
                    x.gbps.map_or("–".into(), |g| format!("{g:.0}")),
                    x.static_cost
                        .map_or(String::new(), |c| format!("  cost {c:.3}"))
                        + &x.modelled_us
                            .map_or(String::new(), |m| format!("  modelled (MI50) {m:.1} µs")),
                );
            }
            if shown.len() > 12 {
                let _ = writeln!(
                    s,
                    "  … {} more in the JSON/Markdown report",
                    shown.len() - 12
                );
            }
            let _ = writeln!(s, "  {}", verdict(c));
        }
        let _ = writeln!(s, "\n{:.1} s in all", self.seconds);
        s
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("the report serialises")
    }

    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        let _ = writeln!(s, "# wavefuse tune\n");
        if self.interrupted {
            let _ = writeln!(s, "**{INTERRUPTED}.**\n");
        }
        let _ = writeln!(
            s,
            "- target {}, device {}, driver {}, compiler {}\n- commit {}, {}, seed {:#x}\n- {} candidates at most per kernel and shape{}; {} warm-up + {} timed launches per series, inputs rotating over ≥ 4 × L2; top {} and the default re-timed {} times",
            h.arch,
            h.provenance.device.name,
            h.provenance.driver,
            h.provenance.compiler,
            h.provenance.commit,
            h.provenance.date,
            h.seed,
            h.budget,
            if h.quick { " (quick space)" } else { "" },
            h.warmup,
            h.iters,
            h.finalists,
            h.final_repeats
        );
        if let Some(c) = self.copy_gbps() {
            let _ = writeln!(s, "- copy bandwidth {c:.0} GB/s (read + write)");
        }
        if let Some(why) = &h.no_timing {
            let _ = writeln!(s, "- **{NO_TIMING}** ({why})");
        }
        for c in &self.cases {
            let _ = writeln!(s, "\n## {}\n", c.title());
            let _ = writeln!(s, "{}\n\n{}\n", funnel(c), verdict(c));
            if !c.note.is_empty() {
                let _ = writeln!(s, "Note: {}\n", c.note);
            }
            for (sched, why) in &c.rejected_examples {
                let _ = writeln!(s, "- rejected by lower: `{sched}`: {why}");
            }
            let _ = writeln!(
                s,
                "\n| # | schedule | compile ms | regs | spills | occ | filter | correct | µs median | p10 | p90 | GB/s | % copy | static cost |\n|---:|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"
            );
            for x in &c.candidates {
                let t = if x.finals.is_some() {
                    &x.finals
                } else {
                    &x.timing
                };
                let f = |v: Option<f64>, p: usize| v.map_or("–".into(), |v| format!("{v:.p$}"));
                let _ = writeln!(
                    s,
                    "| {}{} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    x.index,
                    if Some(x.index) == c.winner {
                        " ★"
                    } else {
                        ""
                    },
                    x.summary,
                    f(x.compile_ms, 0),
                    opt(x.registers),
                    opt(x.spills),
                    opt(x.occupancy),
                    x.rejected.as_deref().unwrap_or("ok"),
                    correct(x),
                    f(t.as_ref().map(|t| t.median_us), 2),
                    f(t.as_ref().map(|t| t.p10_us), 2),
                    f(t.as_ref().map(|t| t.p90_us), 2),
                    f(x.gbps, 0),
                    f(x.copy_fraction.map(|v| v * 100.0), 0),
                    f(x.static_cost, 3),
                );
            }
        }
        s
    }
}

/// From enumeration to timing, in one line.
fn funnel(c: &CaseReport) -> String {
    let mut s = format!(
        "{} schedules enumerated, {} considered: {} rejected by lower, {} not co-resident, {} duplicate sources → {} candidates; compiled {} ({} fresh, {} cached, {} failed) in {:.1} s on {} threads = {:.2} candidates/s; resource filter (no spills, occupancy ≥ {} of the {}{}) rejected {}",
        c.enumerated,
        c.considered,
        c.rejected_by_lower,
        c.not_coresident,
        c.duplicates,
        c.candidates.len(),
        c.compiled_fresh + c.cached,
        c.compiled_fresh,
        c.cached,
        c.compile_failed,
        c.compile_s,
        c.compile_threads,
        c.compile_rate,
        opt(c.occupancy_floor),
        c.floor_from,
        if c.budgeted {
            ", within kernels-gen/budgets.toml"
        } else {
            "; the committed budgets are for the set at the model shapes, batch 1"
        },
        c.resource_rejected,
    );
    if c.timed > 0 {
        let _ = write!(
            s,
            "; timed {} in {:.1} s = {:.2} candidates/s",
            c.timed, c.timing_s, c.timing_rate
        );
    }
    s
}

/// The winner against the default, in one line.
fn verdict(c: &CaseReport) -> String {
    let Some(w) = c
        .winner
        .and_then(|w| c.candidates.iter().find(|x| x.index == w))
    else {
        return "no winner: no candidate is known correct and within budget (the default stays)"
            .into();
    };
    match c.speedup {
        Some(r) => format!(
            "winner #{} `{}`: {:.2} µs, {r:.3}× the default's speed",
            w.index,
            w.summary,
            w.best_median_us().unwrap_or(f64::NAN)
        ),
        None => format!("winner #{} `{}`", w.index, w.summary),
    }
}
