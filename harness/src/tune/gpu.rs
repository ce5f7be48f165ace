//! The timed search on a GPU of the target's arch (CUDA or HIP), with `wavefuse ab`'s method and code
//! ([`crate::ab::gpu`]): every TP rank on the one device, each launch of the group between two
//! events behind a gate, inputs rotating over sets totalling ≥ 4 × L2 (L2 also flushed when the
//! sets cannot reach that), [`super::Settings::iters`] timed launches per series after
//! [`super::Settings::warmup`] untimed ones.
//!
//! Per kernel and shape: the default is compiled first (its occupancy is the filter's floor), then
//! the other candidates compile on worker threads while this thread checks and times those
//! already compiled. Every candidate within budget is launched once on the workload's inputs and
//! compared with the f64 reference before it is timed; a wrong one is never timed. Then the
//! fastest [`FINALISTS`] and the default are re-timed [`FINAL_REPEATS`] times, interleaved, and
//! their outputs after timing compared with the reference again. [`super::report::pick_winner`]
//! then picks among the candidates known to be correct.

use std::sync::mpsc;
use std::time::Instant;

use indicatif::ProgressBar;
use wavefuse_codegen::Arch;
use wavefuse_codegen::lowered::{LoweredKernel, ParamKind, Purpose};
use wavefuse_runtime::exec::{self, OpKernel};
use wavefuse_runtime::timing::{self, GroupTimer};
use wavefuse_runtime::{Cache, Device, MemKind, RankGroup, SameDeviceMode};

use super::candidates::{self, Compiled, Generated};
use super::report::{Basis, CaseReport, Header, Timing, TuneReport};
use super::{Settings, Target};
use crate::ab::check_of;
use crate::ab::gpu::{Binding, COPIES, COPY_BYTES, Rotation, check_once, empty_version, series};
use crate::provenance::Provenance;
use crate::suite::{self, Data};

/// Candidates re-timed in the finals, besides the default.
pub const FINALISTS: usize = 4;
/// Series per finalist in the finals.
pub const FINAL_REPEATS: usize = 2;

/// Runs every target's search on GPU 0 of `o.runtime`, which must be `arch`. `Err`: why there
/// is no usable GPU (nothing ran).
pub fn run(
    targets: &[Target],
    o: &Settings,
    arch: Arch,
    bar: &ProgressBar,
) -> Result<TuneReport, suite::NoGpuRun> {
    struct Tune<'a>(&'a [Target], &'a Settings, Arch, &'a ProgressBar);
    impl suite::OnGpu for Tune<'_> {
        type Out = Result<TuneReport, suite::NoGpuRun>;
        fn on<D: Device>(self, dev: D) -> Self::Out {
            run_on(dev, self.0, self.1, self.2, self.3)
        }
    }
    suite::with_gpu(o.runtime, Tune(targets, o, arch, bar))?
}

fn run_on<D: Device>(
    dev: D,
    targets: &[Target],
    o: &Settings,
    arch: Arch,
    bar: &ProgressBar,
) -> Result<TuneReport, suite::NoGpuRun> {
    let start = Instant::now();
    let info = dev.info().clone();
    if info.arch != Some(arch) {
        let is = info.arch.map_or("not a wavefuse target", |a| a.name());
        let why = format!("the GPU ({}) is {is}, the target is {arch}", info.name);
        return Err(suite::NoGpuRun::WrongTarget(if arch == Arch::Gfx906 {
            format!("{why}: ranked by the static model")
        } else {
            why
        }));
    }
    let l2 = timing::l2_bytes(&dev)?;
    let flush = dev.alloc(2 * l2 as usize, MemKind::Device)?;
    let mut header = super::header(o, arch, Basis::Timed);
    header.provenance = Provenance::of_device(&dev, arch, &o.commit)?;
    header.finalists = FINALISTS;
    header.final_repeats = FINAL_REPEATS;
    copy(&dev, &mut header);
    let cache = Cache::from_env();
    let mut cases = Vec::new();
    for t in targets {
        if wavefuse_runtime::compile::child::interrupted() {
            break;
        }
        bar.set_message(format!("{}: lowering the space", t.label()));
        cases.push(search::<D>(t, o, arch, &cache, l2, &flush, bar));
    }
    copy(&dev, &mut header);
    let mut report = TuneReport {
        header,
        cases,
        stored_in: Vec::new(),
        seconds: start.elapsed().as_secs_f64(),
        warnings: super::report::cache_warnings(&cache),
        interrupted: false,
    };
    let copy_gbps = report.copy_gbps();
    for c in &mut report.cases {
        super::bandwidth(c, copy_gbps);
    }
    Ok(report)
}

fn copy<D: Device>(dev: &D, header: &mut Header) {
    match timing::copy_bandwidth(dev, COPY_BYTES, COPIES) {
        Ok(c) => header.copy_gbps.push(c.gbps),
        Err(e) => eprintln!("warning: copy bandwidth: {e}"),
    }
}

/// A candidate bound on the device and correct: kept for the finals while among the fastest.
struct Bound<'g, D: Device> {
    index: usize,
    kernel: OpKernel<'g, D>,
    median_us: f64,
    /// Its data arrays ([`signature`]): it can only be re-timed on rotation sets built for them.
    signature: Vec<String>,
}

/// The search of one kernel at one shape.
fn search<D: Device>(
    t: &Target,
    o: &Settings,
    arch: Arch,
    cache: &Cache,
    l2: u64,
    flush: &D::Buffer,
    bar: &ProgressBar,
) -> CaseReport {
    // Timed on GPU 0: every rank there (one after another when alone).
    let (mut case, space) = match super::lowered_space(t, arch, o, 1) {
        Ok(x) => x,
        Err(report) => return *report,
    };
    let group = match D::new(0).map_err(|e| e.to_string()).and_then(|d| {
        RankGroup::on_one_device(d, t.spec.tp, SameDeviceMode::FusedGrid).map_err(|e| e.to_string())
    }) {
        Ok(g) => g,
        Err(e) => {
            case.note = format!("rank group: {e}");
            return case;
        }
    };
    let timer = match GroupTimer::new(&group) {
        Ok(t) => t,
        Err(e) => {
            case.note = format!("events: {e}");
            return case;
        }
    };
    bar.set_length(bar.length().unwrap_or(0) + space.kept.len() as u64);
    let compile_start = Instant::now();
    // The default first: its occupancy is the floor of the resource filter.
    let (tx, rx) = mpsc::channel::<Compiled>();
    candidates::compile_all(&space.kept[..1], arch, 1, cache, tx);
    let first = rx.recv().ok();
    let mut live = Live {
        t,
        o,
        group: &group,
        timer: &timer,
        flush,
        l2,
        data: None,
        rotation: None,
        signature: Vec::new(),
        bound: Vec::new(),
        timing_s: 0.0,
        alone: case.alone,
    };
    // Compiling runs on its own threads while this one checks and times: the compile stage's
    // wall time is measured where it ends, not where its last result is picked up.
    let compile_s = std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Compiled>();
        let rest = &space.kept[1..];
        let threads = o.threads;
        let compiling = scope.spawn(move || {
            candidates::compile_all(rest, arch, threads, cache, tx);
            compile_start.elapsed().as_secs_f64()
        });
        let rest = rx.iter().map(|mut c| {
            c.index += 1;
            c
        });
        for mut c in first.into_iter().chain(rest) {
            bar.set_message(format!("{}: candidate {}", t.label(), c.index));
            super::record_compile(&mut case, &mut c, arch, &t.spec);
            if o.deadline.is_some_and(|d| Instant::now() >= d) {
                case.candidates[c.index].check_detail = "not timed: --deadline passed".into();
                if !case.note.contains("deadline") {
                    case.note = "--deadline passed: later candidates were not timed".into();
                }
            } else {
                let start = Instant::now();
                live.check_and_time(&mut case, &space.kept[c.index], &c);
                live.timing_s += start.elapsed().as_secs_f64();
            }
            bar.inc(1);
        }
        compiling
            .join()
            .unwrap_or_else(|_| compile_start.elapsed().as_secs_f64())
    });
    super::compile_rates(&mut case, compile_s, o.threads);
    bar.set_message(format!("{}: finals", t.label()));
    live.finals(&mut case);
    case.timing_s = live.timing_s;
    case.timing_rate = case.timed as f64 / live.timing_s.max(1e-9);
    super::conclude(&mut case, Basis::Timed);
    case
}

/// The device side of one search.
struct Live<'a, 'g, D: Device> {
    t: &'a Target,
    o: &'a Settings,
    group: &'g RankGroup<D>,
    timer: &'a GroupTimer<D>,
    flush: &'a D::Buffer,
    l2: u64,
    data: Option<Result<Data, String>>,
    rotation: Option<Rotation<D>>,
    signature: Vec<String>,
    bound: Vec<Bound<'g, D>>,
    timing_s: f64,
    /// Rank 0 timed alone (the case's placement is one rank per device).
    alone: bool,
}

/// The data arrays of a lowered kernel: candidates with the same list share the rotation sets.
fn signature(k: &LoweredKernel) -> Vec<String> {
    k.params
        .values()
        .filter(|p| {
            matches!(
                &p.kind,
                ParamKind::Array {
                    purpose: Purpose::Data { .. },
                    ..
                } | ParamKind::PeerArrays {
                    purpose: Purpose::Data { .. },
                    ..
                }
            )
        })
        .map(|p| format!("{}: {:?}", p.name, p.kind))
        .collect()
}

impl<'g, D: Device> Live<'_, 'g, D> {
    /// Checks candidate `c` on the device and, when correct, times one series.
    fn check_and_time(&mut self, case: &mut CaseReport, g: &Generated, c: &Compiled) {
        let cand = &mut case.candidates[c.index];
        let (Ok(artifact), true) = (&c.artifact, cand.resources_ok) else {
            return;
        };
        let data = self
            .data
            .get_or_insert_with(|| Data::new(&self.t.ir, self.o.seed).map_err(|e| e.to_string()));
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                cand.error = Some(format!("reference: {e}"));
                return;
            }
        };
        let mut v = empty_version("candidate", &g.lowered.name);
        let ir = &self.t.ir;
        let kernel = check_once(
            &mut v,
            self.group,
            ir,
            Binding::one(&g.abi),
            artifact,
            data,
            &self.t.spec.kernel,
            self.alone,
        );
        cand.correct = Some(v.check.ran && v.check.pass);
        if !v.check.ran {
            cand.correct = None;
        }
        cand.rel_l2 = v.check.ran.then_some(v.check.rel_l2);
        cand.check_detail = if v.check.detail.is_empty() {
            v.check.on.clone()
        } else {
            v.check.detail.clone()
        };
        if let Some(e) = v.error {
            cand.error = Some(e);
        }
        let Some(mut kernel) = kernel else {
            return;
        };
        let sig = signature(&g.lowered);
        if self.rotation.is_none() || sig != self.signature {
            self.rotation = None;
            match Rotation::new(
                self.group,
                &g.abi,
                &self.t.ir,
                &data.inputs,
                self.l2,
                self.alone,
            ) {
                Ok(r) => {
                    self.rotation = Some(r);
                    self.signature = sig;
                }
                Err(e) => {
                    case.candidates[c.index].error = Some(format!("input sets: {e}"));
                    return;
                }
            }
        }
        let rot = self.rotation.as_ref().expect("built above");
        let cand = &mut case.candidates[c.index];
        match series(
            self.group,
            &mut kernel,
            rot,
            self.timer,
            self.flush,
            self.o.warmup,
            self.o.iters,
            self.alone,
        ) {
            Ok(samples) => {
                let timing = Timing::from_ms(&samples);
                let median_us = timing.median_us;
                cand.timing = Some(timing);
                case.timed += 1;
                let signature = self.signature.clone();
                self.keep(Bound {
                    index: c.index,
                    kernel,
                    median_us,
                    signature,
                });
            }
            Err(e) => cand.error = Some(format!("timing: {e}")),
        }
    }

    /// Keeps the default and the fastest [`FINALISTS`] bound (the others free their arrays).
    fn keep(&mut self, b: Bound<'g, D>) {
        self.bound.push(b);
        self.bound.sort_by(|a, b| {
            (a.index != 0)
                .cmp(&(b.index != 0))
                .then(a.median_us.total_cmp(&b.median_us))
        });
        let has_default = self.bound.first().is_some_and(|b| b.index == 0);
        self.bound.truncate(FINALISTS + usize::from(has_default));
    }

    /// Re-times the finalists, interleaved, then compares their outputs after timing.
    fn finals(&mut self, case: &mut CaseReport) {
        let start = Instant::now();
        let Some(rot) = &self.rotation else { return };
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); self.bound.len()];
        for _ in 0..FINAL_REPEATS {
            for (b, s) in self.bound.iter_mut().zip(&mut samples) {
                if case.candidates[b.index].error.is_some() {
                    continue;
                }
                if b.signature != self.signature {
                    // Other arrays than the last rotation's: its first series stands.
                    continue;
                }
                match series(
                    self.group,
                    &mut b.kernel,
                    rot,
                    self.timer,
                    self.flush,
                    self.o.warmup,
                    self.o.iters,
                    self.alone,
                ) {
                    Ok(x) => s.extend(x),
                    Err(e) => case.candidates[b.index].error = Some(format!("finals: {e}")),
                }
            }
        }
        let tol = self.t.spec.kernel.tolerance().0;
        for (b, s) in self.bound.iter().zip(samples) {
            let cand = &mut case.candidates[b.index];
            if !s.is_empty() {
                cand.finals = Some(Timing::from_ms(&s));
            }
            let Some(Ok(data)) = &self.data else { continue };
            match b.kernel.read_outputs() {
                Ok(out) => {
                    let after =
                        check_of("", &exec::compare(&self.t.ir, &out, &data.reference), tol);
                    if !after.pass {
                        cand.correct = Some(false);
                        cand.check_detail = format!("after timing: {}", after.detail);
                    }
                }
                Err(e) => cand.error = Some(format!("reading back after timing: {e}")),
            }
        }
        self.timing_s += start.elapsed().as_secs_f64();
    }
}
