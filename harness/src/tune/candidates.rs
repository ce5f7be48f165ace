//! From schedules to compiled candidates: lowered and written (identical sources kept once),
//! then compiled through the compile cache on several threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::time::Instant;

use wavefuse::ir::Kernel;
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::fit::fits_coresident_for;
use wavefuse_codegen::lower::{LowerError, Schedule, ScheduleInputs};
use wavefuse_runtime::compile::CompileError;
use wavefuse_runtime::exec::{self, ArtifactSource};
use wavefuse_runtime::{Artifact, Cache, Error as RtError, ResourceUsage};

use super::space;
use crate::ab::report::Resources;
use crate::ab::usage_of;
use crate::pipeline::{self, Purpose};

/// A candidate schedule generated: the pipeline's one artifact ([`wavefuse_codegen::generate`]).
pub use wavefuse_codegen::Generated;

/// The space of one kernel and shape after lowering.
#[derive(Clone, Debug, Default)]
pub struct Space {
    /// Schedules enumerated (before the budget).
    pub enumerated: usize,
    /// Schedules looked at (enumeration order, until the budget of distinct sources was reached).
    pub considered: usize,
    /// Rejected by `lower` or the C++ writer: how many, and a few examples (schedule, why).
    pub rejected: usize,
    /// Up to five rejections, for the report.
    pub rejected_examples: Vec<(String, String)>,
    /// Whose grids would not all be resident at once with every rank on one device.
    pub not_coresident: usize,
    /// Whose source equals an earlier candidate's (a field the lowering ignores, or does not
    /// change for this kernel).
    pub duplicates: usize,
    /// The candidates, the default first.
    pub kept: Vec<Generated>,
    /// Seconds spent lowering and writing.
    pub seconds: f64,
}

/// Lowers `schedules` for `arch` in order (the first is the baseline and always kept when it
/// lowers), keeping at most `budget` distinct sources.
pub fn build(
    ir: &Kernel,
    arch: Arch,
    schedules: &[Schedule],
    budget: usize,
    ranks_per_device: u32,
) -> Space {
    build_after(ir, arch, None, schedules, budget, ranks_per_device)
}

/// [`build`] with the baseline already generated (`baseline`, the pipeline's kernel: not
/// lowered again), then `schedules` in order.
pub fn build_after(
    ir: &Kernel,
    arch: Arch,
    baseline: Option<Generated>,
    schedules: &[Schedule],
    budget: usize,
    ranks_per_device: u32,
) -> Space {
    let start = Instant::now();
    let family = space::Family::of(ir);
    let mut out = Space {
        enumerated: schedules.len() + usize::from(baseline.is_some()),
        ..Space::default()
    };
    let mut sources: HashMap<String, usize> = HashMap::new();
    let mut baseline = baseline;
    let mut rest = schedules.iter();
    for i in 0.. {
        if out.kept.len() >= budget.max(1) {
            break;
        }
        let g = match baseline.take() {
            Some(g) => Ok(g),
            None => match rest.next() {
                // Exactly `s`, written for the placement the candidates are timed at (ranks on
                // one device: with the ranks entry, as the pipeline writes the baseline).
                Some(s) => wavefuse_codegen::generate(
                    ir,
                    arch,
                    &ScheduleInputs::exact_placed(s.clone(), ranks_per_device),
                )
                .map_err(|e| (s, e)),
                None => break,
            },
        };
        out.considered += 1;
        let g = match g {
            Ok(g) => g,
            // A grid no register count lets the device hold (the lowering's own refusal).
            Err((_, wavefuse_codegen::CompileError::Lower(LowerError::NotCoResident(_)))) => {
                out.not_coresident += 1;
                continue;
            }
            Err((s, e)) => {
                out.rejected += 1;
                if out.rejected_examples.len() < 5 {
                    out.rejected_examples
                        .push((space::summary(s, family), e.to_string()));
                }
                continue;
            }
        };
        if i > 0 && !fits_coresident_for(ir, &g.lowered, arch, ranks_per_device) {
            out.not_coresident += 1;
            continue;
        }
        if sources.contains_key(&g.source.text) {
            out.duplicates += 1;
            continue;
        }
        sources.insert(g.source.text.clone(), out.kept.len());
        out.kept.push(g);
    }
    out.seconds = start.elapsed().as_secs_f64();
    out
}

/// One candidate compiled.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// Index into [`Space::kept`].
    pub index: usize,
    /// The artifact, or why there is none.
    pub artifact: Result<Artifact, String>,
    /// Whether it came from the cache (or prebuilt) rather than the compiler.
    pub cached: bool,
    /// Wall time of the compile (or cache read), ms.
    pub ms: f64,
    /// The resource report.
    pub resources: Resources,
    /// The compiler's own report of the kernel (what the committed budget,
    /// `kernels-gen/budgets.toml`, is checked against).
    pub usage: Option<ResourceUsage>,
    /// The launch's block size (NVIDIA's occupancy depends on it).
    pub workgroup_size: u32,
}

/// Compiles `kept` on `threads` threads through `cache`, sending each result as it is ready (in
/// any order). Returns when all are sent or the receiver is gone.
pub fn compile_all(
    kept: &[Generated],
    arch: Arch,
    threads: usize,
    cache: &Cache,
    tx: Sender<Compiled>,
) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, kept.len().max(1)) {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                let compiler = pipeline::compiler(arch, Purpose::Run);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(g) = kept.get(i) else { break };
                    let c = compile_one(i, g, compiler.as_ref(), cache);
                    if tx.send(c).is_err() {
                        break;
                    }
                }
            });
        }
    });
}

fn compile_one(
    index: usize,
    g: &Generated,
    compiler: &dyn wavefuse_runtime::compile::Compiler,
    cache: &Cache,
) -> Compiled {
    let start = Instant::now();
    let result = exec::artifact_for(cache, compiler, &pipeline::request(g));
    let ms = start.elapsed().as_secs_f64() * 1e3;
    match result {
        Ok((a, src)) => Compiled {
            index,
            resources: usage_of(
                &a,
                &g.source.symbol,
                g.lowered.workgroup_size,
                g.abi.dynamic_lds_bytes,
            ),
            usage: a.usage_of(&g.source.symbol).cloned(),
            workgroup_size: g.lowered.workgroup_size,
            artifact: Ok(a),
            cached: !matches!(src, ArtifactSource::Compiled),
            ms,
        },
        Err(e) => {
            let why = short_error(&e);
            Compiled {
                index,
                resources: Resources {
                    arch: g.lowered.arch.name().to_owned(),
                    compiler: compiler.id().name().to_owned(),
                    usage: Err(why.clone()),
                    modelled: None,
                },
                artifact: Err(why),
                usage: None,
                workgroup_size: g.lowered.workgroup_size,
                cached: false,
                ms,
            }
        }
    }
}

/// A compile error in one line.
pub fn short_error(e: &RtError) -> String {
    match e {
        RtError::Compile(CompileError::Missing { compiler, .. }) => format!("{compiler} not found"),
        RtError::Compile(CompileError::Failed { log, .. }) => {
            format!("failed: {}", failure_line(log))
        }
        e => e.to_string().lines().next().unwrap_or("").to_owned(),
    }
}

/// A failed compiler's log (`exit status N and printed nothing`, or `… after printing:` and what
/// it printed) in one line: its first line that mentions an error, else how it ended with the
/// last line it printed. Never "see the log": `tune` and `ab` keep no log file to see.
pub fn failure_line(log: &str) -> String {
    if let Some(l) = log.lines().find(|l| l.contains("error")) {
        return l.trim().to_owned();
    }
    let mut lines = log.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("no output");
    match lines.last() {
        Some(last) => format!("{} {last}", first.trim_end_matches(':').to_owned() + ":"),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::failure_line;

    /// A failing compiler's one-line reason names what it printed or that it printed nothing;
    /// it used to say "see the log" where `tune` and `ab` keep no log (issue 39, item 7).
    #[test]
    fn a_failure_line_never_points_at_a_log_that_does_not_exist() {
        assert_eq!(
            failure_line("exit status 1 and printed nothing"),
            "exit status 1 and printed nothing"
        );
        assert_eq!(
            failure_line("exit status 2 after printing:\nclang: warning: x\nSegmentation fault"),
            "exit status 2 after printing: Segmentation fault"
        );
        assert_eq!(
            failure_line("exit status 1 after printing:\nk.hip:3:1: error: expected ';'\n"),
            "k.hip:3:1: error: expected ';'"
        );
        assert_eq!(failure_line(""), "no output");
    }
}
