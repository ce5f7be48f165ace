//! `wavefuse ab` on a GPU (CUDA or HIP, [`crate::suite::GpuRuntime`]): correctness of both versions on the device at the model shapes,
//! then event timing with rotating inputs, repeated twice.
//!
//! Per kernel and shape, in this order:
//! 1. Setup (pipelined with the host threads that build the inputs and the f64 reference): both
//!    versions compiled (through the cache), bound to their own arrays on a rank group of `tp`
//!    ranks on the one device, launched once on the workload's inputs with the outputs poisoned,
//!    and compared with the reference. A hand-written kernel is checked against its description
//!    first, and the loaded kernel's parameter sizes against it too. Then each version's rotation
//!    sets, encoded as its own parameters take them (FP16 zero points, quantised activations): `k`
//!    copies of every input array of every rank, the same data uploaded k times, `k` such that
//!    the sets total ≥ 4 × L2 (at most [`MAX_SETS`]; below 4 × L2 at that cap, L2 is also flushed
//!    before every launch by writing a 2 × L2 buffer, outside the timed window).
//! 2. Timing, the whole of it twice (repeat 1 over every row, then repeat 2), each repeat opened
//!    by a measurement of the copy bandwidth: per version, [`super::Options::warmup`] untimed and
//!    [`super::Options::iters`] timed launches, each of one launch of every rank between two
//!    events behind a gate ([`wavefuse_runtime::timing::GroupTimer`]), the inputs rebound to the
//!    next set before each, the error words checked after each.
//! 3. The outputs of the last timed launch are compared with the reference again.

use std::time::Instant;

use indicatif::ProgressBar;
use wavefuse::ir::Kernel;
use wavefuse::ir::reference::{RankInputs, RankOutputs};
use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::Abi;
use wavefuse_codegen::lowered::DataArrayRef;
use wavefuse_runtime::exec::{self, EncodedInput, OpKernel, SharedScratch};
use wavefuse_runtime::timing::{self, GroupGraphs, GroupTimer};
use wavefuse_runtime::{
    Artifact, Cache, Device, Error as RtError, MemKind, RankGroup, SameDeviceMode,
};

use super::handwritten::{Found, Hand, find_reference};
use super::report::{
    AbReport, Check, CopyBw, GRAPH_CALLS, Header, LaunchMode, Manual, Mode, Row, Stats, Timing,
    TimingMode, Version,
};
use super::{Choice, Options, base_row, check_of, prepare_all, usage_of};
use crate::pipeline;
use crate::policy::{Placement, communicates, needs_gpus};
use crate::provenance::Provenance;
use crate::suite::{self, CaseSpec, Prepared};

/// Rotation sets at most (a few-KB allreduce would otherwise need thousands).
pub const MAX_SETS: usize = 64;
/// Repeats of the whole timing.
pub const REPEATS: usize = 2;
/// Bytes of one copy of the copy-bandwidth measurement (far larger than L2).
pub(crate) const COPY_BYTES: usize = 1 << 30;
/// Timed copies per copy-bandwidth measurement.
pub(crate) const COPIES: usize = 20;

/// Copies of one input array: `by_set[set][rank]`.
struct Copies<D: Device> {
    buffer: String,
    part: &'static str,
    by_set: Vec<Vec<D::Buffer>>,
}

/// Every input array of every rank, `sets` times over (also used by `examples/qwen_ffn_block`).
pub struct Rotation<D: Device> {
    arrays: Vec<Copies<D>>,
    /// Copies of the inputs.
    pub sets: usize,
    /// Bytes of all sets together (of the timed ranks).
    pub bytes: u64,
    /// Whether the sets total less than 4 × L2 (L2 must then be flushed before each launch).
    pub flush: bool,
}

impl<D: Device> Rotation<D> {
    /// Sets of `g`'s input arrays filled with `inputs`: enough for the timed ranks' sets to total
    /// `4 × l2` bytes (rank 0's alone with `alone`, every rank's otherwise), at most [`MAX_SETS`].
    pub fn new(
        group: &RankGroup<D>,
        g: &Abi,
        ir: &Kernel,
        inputs: &[RankInputs],
        l2: u64,
        alone: bool,
    ) -> Result<Rotation<D>, RtError> {
        let params = g.param_data().map_err(|m| RtError::Binding {
            kernel: g.symbol.clone(),
            message: format!("its ABI description: {m}"),
        })?;
        let mut encoded: Vec<EncodedInput> = Vec::new();
        for p in &params {
            let Some(DataArrayRef {
                elem,
                len,
                buffer,
                part,
            }) = p.data_array()
            else {
                continue;
            };
            let Some(b) = ir.buffer_by_name(buffer) else {
                continue;
            };
            if ir
                .buffer(b)
                .is_some_and(|d| d.role != wavefuse::ir::Role::Input)
                || encoded.iter().any(|e| e.buffer == buffer && e.part == part)
            {
                continue;
            }
            let per_rank: Vec<Vec<u8>> = inputs
                .iter()
                .map(|r| exec::encode(&r[&b], part, elem, len))
                .collect::<Result<_, _>>()
                .map_err(|m| RtError::Binding {
                    kernel: g.symbol.clone(),
                    message: m,
                })?;
            encoded.push(EncodedInput {
                buffer: buffer.to_owned(),
                part,
                per_rank,
            });
        }
        Self::from_encoded(group, encoded, inputs.len(), l2, alone)
    }

    /// Sets of `k`'s own input arrays, encoded as its parameters take them
    /// ([`OpKernel::encoded_inputs`]: FP16 zero points, host-quantised activations), so that
    /// every version is timed on the bytes it was checked on; sized as [`Rotation::new`].
    pub fn for_kernel(
        group: &RankGroup<D>,
        k: &OpKernel<'_, D>,
        inputs: &[RankInputs],
        l2: u64,
        alone: bool,
    ) -> Result<Rotation<D>, RtError> {
        Self::from_encoded(group, k.encoded_inputs(inputs)?, inputs.len(), l2, alone)
    }

    /// `encoded` uploaded `sets` times, enough for the timed ranks' sets (rank 0's alone with
    /// `alone`, all `ranks` otherwise) to total `4 × l2` bytes, at most [`MAX_SETS`].
    fn from_encoded(
        group: &RankGroup<D>,
        encoded: Vec<EncodedInput>,
        ranks: usize,
        l2: u64,
        alone: bool,
    ) -> Result<Rotation<D>, RtError> {
        let timed = if alone { 1 } else { ranks };
        let set_bytes: u64 = encoded
            .iter()
            .flat_map(|e| e.per_rank.iter().take(timed).map(|b| b.len() as u64))
            .sum();
        let target = 4 * l2;
        let sets = (target.div_ceil(set_bytes.max(1)) as usize).clamp(2, MAX_SETS);
        let mut arrays = Vec::new();
        for e in encoded {
            let mut by_set = Vec::with_capacity(sets);
            for _ in 0..sets {
                let bufs = e
                    .per_rank
                    .iter()
                    .enumerate()
                    .map(|(r, bytes)| {
                        let d = group.device(r as u32);
                        let buf = d.alloc(bytes.len(), MemKind::Device)?;
                        d.upload(&buf, 0, bytes)?;
                        Ok(buf)
                    })
                    .collect::<Result<Vec<_>, RtError>>()?;
                by_set.push(bufs);
            }
            arrays.push(Copies {
                buffer: e.buffer,
                part: e.part,
                by_set,
            });
        }
        let bytes = set_bytes * sets as u64;
        Ok(Rotation {
            arrays,
            sets,
            bytes,
            flush: bytes < target,
        })
    }

    /// Binds set `i` (mod the number of sets).
    pub fn bind(&self, k: &mut OpKernel<'_, D>, i: usize) -> Result<(), RtError> {
        for c in &self.arrays {
            let refs: Vec<_> = c.by_set[i % self.sets].iter().collect();
            k.bind_input(&c.buffer, c.part, &refs)?;
        }
        Ok(())
    }
}

/// One version on the device, between setup and the end of timing.
struct Side<'g, D: Device> {
    version: Version,
    kernel: Option<OpKernel<'g, D>>,
    repeats: Vec<Stats>,
    /// Its own input sets, encoded as its parameters take them.
    rotation: Option<Rotation<D>>,
    /// Its tolerance where it differs from the kernel's (a W4A8 version's quantisation).
    tolerance: Option<f64>,
}

/// One row on the device.
struct Live<'g, D: Device> {
    index: usize,
    row: Row,
    group: &'g RankGroup<D>,
    ir: Option<Kernel>,
    reference: Vec<RankOutputs>,
    sides: Vec<Side<'g, D>>,
    timer: Option<GroupTimer<D>>,
    /// Rank 0 timed alone.
    alone: bool,
}

/// Runs every case on GPU 0 of `o.runtime`. `Err` carries why there is no usable GPU (nothing
/// ran).
pub fn run(
    cases: &[CaseSpec],
    o: &Options,
    bar: &ProgressBar,
) -> Result<AbReport, suite::NoGpuRun> {
    struct Ab<'a>(&'a [CaseSpec], &'a Options, &'a ProgressBar);
    impl suite::OnGpu for Ab<'_> {
        type Out = Result<AbReport, suite::NoGpuRun>;
        fn on<D: Device>(self, dev: D) -> Self::Out {
            run_on(dev, self.0, self.1, self.2)
        }
    }
    suite::with_gpu(o.runtime, Ab(cases, o, bar))?
}

fn run_on<D: Device>(
    dev: D,
    cases: &[CaseSpec],
    o: &Options,
    bar: &ProgressBar,
) -> Result<AbReport, suite::NoGpuRun> {
    let start = Instant::now();
    let info = dev.info().clone();
    let Some(arch) = info.arch else {
        return Err(suite::NoGpuRun::NotATarget(info.name));
    };
    let provenance = Provenance::of_device(&dev, arch, &o.commit)?;
    let l2 = provenance.device.l2_bytes;
    let mut header = Header {
        mode: Mode::Gpu,
        provenance,
        seed: o.seed,
        warmup: o.warmup,
        iters: o.iters,
        timing: o.timing,
        launch: o.launch,
        copy: Vec::new(),
    };
    let cache = Cache::from_env();
    let visible = D::count()?.max(1);
    let placements: Vec<Placement> = cases.iter().map(|c| o.placement(c, visible)).collect();
    let groups = cases
        .iter()
        .zip(&placements)
        .map(|(c, &p)| {
            // One rank per GPU where the kernel communicates and there is a GPU per rank (how
            // TP is deployed); otherwise every rank on GPU 0 (one after another when alone).
            if spread(c, p, visible) {
                return RankGroup::per_device(c.tp).map_err(suite::NoGpuRun::from);
            }
            let d = D::new(0)?;
            Ok(RankGroup::on_one_device(
                d,
                c.tp,
                SameDeviceMode::FusedGrid,
            )?)
        })
        .collect::<Result<Vec<_>, suite::NoGpuRun>>()?;
    let flush = dev.alloc(2 * l2 as usize, MemKind::Device)?;
    // The gate on the device that every graph replay waits behind (`graph_series`); where it
    // does not compile, graph timing fails per version with the reason, not the run.
    let spin: Result<Artifact, String> = match o.timing {
        TimingMode::Graphs => exec::artifact_for(
            &cache,
            pipeline::compiler(arch, pipeline::Purpose::Run).as_ref(),
            &timing::spin_request(arch),
        )
        .map(|(a, _)| a)
        .map_err(|e| e.to_string()),
        TimingMode::Events => Err("event timing has no spin kernel".into()),
    };
    let mut live: Vec<Live<'_, D>> = Vec::with_capacity(cases.len());
    prepare_all(cases, &placements, o, arch, |i, p| {
        bar.set_message(format!("setting up {}", cases[i].label()));
        let (c, group) = (&cases[i], &groups[i]);
        live.push(match p {
            // The ranks' grids do not fit on one GPU together: the kernel needs a GPU per rank
            // (not an error of the kernel).
            Err(suite::PrepError::NotCoResident(why)) if c.tp > 1 => {
                Live::not_run(i, c, group, needs_gpus(c.tp, visible, &why))
            }
            p => setup(i, c, group, p, o, &cache, l2, arch),
        });
        bar.inc(1);
    });
    live.sort_by_key(|l| l.index);
    for rep in 0..REPEATS {
        bar.set_message(format!("repeat {}: copy bandwidth", rep + 1));
        match timing::copy_bandwidth(&dev, COPY_BYTES, COPIES) {
            Ok(c) => header.copy.push(CopyBw {
                bytes: c.bytes as u64,
                median_ms: c.median_ms,
                gbps: c.gbps,
            }),
            Err(e) => eprintln!("warning: copy bandwidth, repeat {}: {e}", rep + 1),
        }
        for l in &mut live {
            bar.set_message(format!("repeat {}: timing {}", rep + 1, l.row.label()));
            l.time(o, &flush, spin.as_ref());
            bar.inc(1);
        }
    }
    let rows = live.into_iter().map(|l| l.finish(o.timing)).collect();
    Ok(AbReport {
        header,
        rows,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Compile, bind, check both versions; allocate the rotation sets.
fn setup<'g, D: Device>(
    index: usize,
    spec: &CaseSpec,
    group: &'g RankGroup<D>,
    prepared: Result<Prepared, suite::PrepError>,
    o: &Options,
    cache: &Cache,
    l2: u64,
    arch: Arch,
) -> Live<'g, D> {
    let p = match prepared {
        Ok(p) => p,
        Err(e) => return Live::failed(index, spec, group, e.to_string()),
    };
    let mut row = base_row(spec, &p.g);
    let mut sides = Vec::new();
    let (g_version, g_kernel) = bind_generated(group, &p, o, cache, arch);
    sides.push(Side {
        version: g_version,
        kernel: g_kernel,
        repeats: Vec::new(),
        rotation: None,
        tolerance: None,
    });
    let hand = match &o.choice {
        Choice::User(h) => match h.for_kernel(&p.g.ir) {
            Ok(h) => Found::Hand(Box::new(h)),
            Err(e) => Found::Absent(e.to_string()),
        },
        Choice::Reference(dir) => find_reference(dir.as_deref(), &p.g.lowered, &p.g.ir),
    };
    match hand {
        Found::Absent(why) => row.manual = Manual::Absent(why),
        Found::Hand(h) => {
            let (v, k, tolerance) = bind_hand(group, &p, &h, o, cache, arch);
            sides.push(Side {
                version: v,
                kernel: k,
                repeats: Vec::new(),
                rotation: None,
                tolerance,
            });
        }
    }
    for s in &mut sides {
        let Some(k) = &s.kernel else { continue };
        match Rotation::for_kernel(group, k, &p.data.inputs, l2, alone(&p)) {
            Ok(r) => s.rotation = Some(r),
            Err(e) => {
                s.kernel = None;
                s.version.note = format!("not timed: input sets: {e}");
            }
        }
    }
    let timer = match GroupTimer::new(group) {
        Ok(t) => Some(t),
        Err(e) => {
            for s in sides.iter_mut().filter(|s| s.kernel.is_some()) {
                s.kernel = None;
                s.version.note = format!("not timed: events: {e}");
            }
            None
        }
    };
    row.generated = sides[0].version.clone();
    let alone = alone(&p);
    Live {
        index,
        row,
        group,
        alone,
        ir: Some(p.g.ir),
        reference: p.data.reference,
        sides,
        timer,
    }
}

/// The generated version: compiled, bound, run once, compared.
fn bind_generated<'g, D: Device>(
    group: &'g RankGroup<D>,
    p: &Prepared,
    o: &Options,
    cache: &Cache,
    arch: Arch,
) -> (Version, Option<OpKernel<'g, D>>) {
    let g = &p.g;
    let mut v = empty_version(&format!("generated ({arch})"), &g.lowered.name);
    let artifact = match pipeline::artifact(cache, g) {
        Ok((a, _)) => a,
        Err(e) => {
            v.error = Some(format!("compiling: {e}"));
            return (v, None);
        }
    };
    v.resources.push(usage_of(
        &artifact,
        &g.lowered.name,
        g.lowered.workgroup_size,
        g.abi.dynamic_lds_bytes,
    ));
    let k = run_once(
        &mut v,
        group,
        &g.ir,
        Binding::one(&g.abi),
        &artifact,
        p,
        o.launch,
    );
    (v, k)
}

/// Whether `p`'s ranks run one after another and rank 0 is timed alone: resolved for one rank
/// per device, and not communicating (a kernel that does runs all its ranks at once, on a GPU
/// each or together on one).
fn alone(p: &Prepared) -> bool {
    p.g.placement == Placement::PerDevice && p.g.spec.tp > 1 && !communicates(&p.g.ir)
}

/// Whether case `c` at placement `p` runs one rank per GPU: it communicates and there is a GPU
/// per rank.
fn spread(c: &CaseSpec, p: Placement, visible: usize) -> bool {
    p == Placement::PerDevice
        && c.tp > 1
        && visible >= c.tp as usize
        && matches!(suite::op_kernel(c), Ok(Some(ir)) if communicates(&ir))
}

/// The hand-written version: its description checked, compiled, its loaded parameters checked,
/// bound, run once, compared.
fn bind_hand<'g, D: Device>(
    group: &'g RankGroup<D>,
    p: &Prepared,
    h: &Hand,
    o: &Options,
    cache: &Cache,
    arch: Arch,
) -> (Version, Option<OpKernel<'g, D>>, Option<f64>) {
    let mut v = empty_version(&h.origin(), &h.symbols());
    if h.arch != arch {
        v.error = Some(format!(
            "{} targets {}, the GPU is {arch}",
            h.origin(),
            h.arch
        ));
        return (v, None, None);
    }
    let problems = h.check(&p.g.lowered);
    if !problems.is_empty() {
        v.error = Some(format!("ABI mismatch: {}", problems.join("; ")));
        return (v, None, None);
    }
    let compiled = h.request().map_err(String::from).and_then(|req| {
        exec::artifact_for(cache, o.hand_compiler(arch).as_ref(), &req)
            .map_err(|e| format!("compiling: {e}"))
    });
    let artifact = match compiled {
        Ok((a, _)) => a,
        Err(e) => {
            v.error = Some(e);
            return (v, None, None);
        }
    };
    let main = h.main_stage();
    v.resources.push(usage_of(
        &artifact,
        &main.abi.symbol,
        main.workgroup_size(),
        main.abi.dynamic_lds_bytes,
    ));
    for st in h.stages() {
        if let Err(e) = check_loaded(group, &artifact, &st) {
            v.error = Some(e.to_string());
            return (v, None, None);
        }
    }
    let abis = h.launch_abis(p.g.lowered.tp);
    let shared = match h.shared_scratch() {
        Ok(s) => s,
        Err(e) => {
            v.error = Some(format!("ABI mismatch: {}", e.join("; ")));
            return (v, None, None);
        }
    };
    let tolerance = h.tolerance(p.g.spec.kernel.tolerance().0, &p.g.ir, &p.data);
    if let Some(t) = tolerance {
        v.note = format!(
            "W4A8: activations quantised to INT8 per token; tolerance rel L2 {t:.2e} (docs/abi.md)"
        );
    }
    let bound = Binding {
        abis: &abis,
        shared: &shared,
        tolerance,
    };
    let k = run_once(&mut v, group, &p.g.ir, bound, &artifact, p, o.launch);
    (v, k, tolerance)
}

/// The loaded kernel's parameter sizes against the description.
fn check_loaded<D: Device>(
    group: &RankGroup<D>,
    artifact: &Artifact,
    h: &Hand,
) -> Result<(), LoadedMismatch> {
    let kernel = group
        .device(0)
        .load(artifact, &h.abi.symbol)
        .map_err(|source| LoadedMismatch::Load {
            symbol: h.abi.symbol.clone(),
            source,
        })?;
    let sizes = match timing::param_sizes(group.device(0), &kernel) {
        Ok(s) => s,
        // An older driver cannot say; the source was already checked.
        Err(_) => return Ok(()),
    };
    let declared: Vec<usize> = h
        .abi
        .params
        .iter()
        .map(|p| match p.kind {
            wavefuse_codegen::abi::AbiKind::Scalar => p.ty.bytes() as usize,
            _ => 8,
        })
        .collect();
    if sizes != declared {
        return Err(LoadedMismatch::Sizes { sizes, declared });
    }
    Ok(())
}

/// A compiled hand-written kernel that does not load as its description says.
#[derive(Debug, thiserror::Error)]
enum LoadedMismatch {
    /// The symbol does not load.
    #[error("loading `{symbol}`: {source}")]
    Load {
        /// The symbol.
        symbol: String,
        /// Why.
        source: wavefuse_runtime::DeviceError,
    },
    /// The parameter sizes differ.
    #[error(
        "ABI mismatch: the compiled kernel's parameters are {sizes:?} bytes, the ABI declares {declared:?}"
    )]
    Sizes {
        /// The compiled kernel's, in bytes.
        sizes: Vec<usize>,
        /// The description's.
        declared: Vec<usize>,
    },
}

pub(crate) fn empty_version(origin: &str, symbol: &str) -> Version {
    Version {
        origin: origin.to_owned(),
        symbol: symbol.to_owned(),
        check: Check::not_run("not run"),
        timing: None,
        note: String::new(),
        resources: Vec::new(),
        error: None,
    }
}

/// Binds a kernel by its ABI description (generated or hand-written alike), runs it once and
/// records the check; the bound kernel is kept for timing when it is correct, set to launch as
/// `launch` says (a programmatic dependent only where its ABI allows it; the version's note says
/// when it does not).
#[allow(clippy::too_many_arguments)]
fn run_once<'g, D: Device>(
    v: &mut Version,
    group: &'g RankGroup<D>,
    ir: &Kernel,
    bound: Binding<'_>,
    artifact: &Artifact,
    p: &Prepared,
    launch: LaunchMode,
) -> Option<OpKernel<'g, D>> {
    let dependent_allowed = bound.abis.iter().all(|a| a.dependent_launch);
    let chain = bound.abis.len() > 1;
    let mut k = check_once(
        v,
        group,
        ir,
        bound,
        artifact,
        &p.data,
        &p.g.spec.kernel,
        alone(p),
    )?;
    if launch == LaunchMode::Dependent && chain {
        v.note = "stream-order launches (an op of several launches)".into();
    } else if launch == LaunchMode::Dependent {
        if dependent_allowed {
            if let Err(e) = k.instance().set_dependent_launch(true) {
                v.error = Some(format!("dependent launch: {e}"));
                return None;
            }
        } else {
            v.note = [
                v.note.as_str(),
                "stream-order launches (its ABI has no dependent launch)",
            ]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        }
    }
    Some(k)
}

/// How a version is bound: its launches' descriptions (one, or a hand-written op's several),
/// the scratch they share, and a tolerance other than the kernel's where the version computes
/// something else by design (a W4A8 kernel's quantised activations).
#[derive(Clone, Copy)]
pub(crate) struct Binding<'a> {
    pub abis: &'a [Abi],
    pub shared: &'a [SharedScratch],
    pub tolerance: Option<f64>,
}

impl<'a> Binding<'a> {
    /// One kernel at its kernel's tolerance.
    pub fn one(abi: &'a Abi) -> Self {
        Binding {
            abis: std::slice::from_ref(abi),
            shared: &[],
            tolerance: None,
        }
    }
}

/// [`run_once`] on `data`, at `kernel`'s tolerance unless `bound` gives another (also `wavefuse
/// tune`'s per-candidate check); with `alone` the ranks run one after another, each alone on
/// the device.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_once<'g, D: Device>(
    v: &mut Version,
    group: &'g RankGroup<D>,
    ir: &Kernel,
    bound: Binding<'_>,
    artifact: &Artifact,
    data: &suite::Data,
    kernel: &crate::suite::CaseKernel,
    alone: bool,
) -> Option<OpKernel<'g, D>> {
    let mut k = match OpKernel::chain(group, ir, bound.abis, artifact, bound.shared) {
        Ok(k) => k,
        Err(e) => {
            v.error = Some(format!("binding: {e}"));
            return None;
        }
    };
    let ran = if alone {
        k.run_each_alone(&data.inputs)
    } else {
        k.run(&data.inputs)
    };
    let outputs = match ran {
        Ok(o) => o,
        Err(e @ RtError::NotCoResident { .. }) if !alone && group.tp() > 1 => {
            // The ranks share one GPU and do not fit on it together: the kernel needs a GPU
            // per rank, which is how TP deploys it — not an error of the kernel.
            let gpus = D::count().unwrap_or(1);
            v.check = Check::not_run(needs_gpus(group.tp(), gpus, &e.to_string()));
            v.note = "not run: its ranks' workgroups cannot all be resident on one GPU".into();
            return None;
        }
        Err(e @ RtError::NotCoResident { .. }) => {
            v.check = Check::not_run(format!("refused: {e}"));
            v.note = "not run: its workgroups cannot all be resident on one device".into();
            return None;
        }
        Err(e) => {
            v.error = Some(format!("launch: {e}"));
            return None;
        }
    };
    let tol = bound.tolerance.unwrap_or(kernel.tolerance().0);
    let on = format!(
        "{}, model shapes{}",
        group.device(0).info().name,
        if alone { ", ranks alone" } else { "" }
    );
    v.check = check_of(&on, &exec::compare(ir, &outputs, &data.reference), tol);
    if v.check.pass {
        Some(k)
    } else {
        v.note = "not timed: wrong result".into();
        None
    }
}

impl<'g, D: Device> Live<'g, D> {
    /// A case not run, with why (no verdict on the kernel: not a failure of the run).
    fn not_run(index: usize, spec: &CaseSpec, group: &'g RankGroup<D>, why: String) -> Live<'g, D> {
        let mut row = super::placeholder_row(spec);
        row.generated.check = Check::not_run(why);
        row.generated.note = "not timed".into();
        row.manual = Manual::Absent("not run (the generated kernel was not run)".into());
        Live {
            index,
            row,
            group,
            alone: false,
            ir: None,
            reference: Vec::new(),
            sides: Vec::new(),
            timer: None,
        }
    }

    fn failed(index: usize, spec: &CaseSpec, group: &'g RankGroup<D>, why: String) -> Live<'g, D> {
        let mut row = super::placeholder_row(spec);
        row.generated.error = Some(why);
        Live {
            index,
            row,
            group,
            alone: false,
            ir: None,
            reference: Vec::new(),
            sides: Vec::new(),
            timer: None,
        }
    }

    /// One repeat: a timed series of every live version.
    fn time(&mut self, o: &Options, flush: &D::Buffer, spin: Result<&Artifact, &String>) {
        let Some(timer) = &self.timer else {
            return;
        };
        let group = self.group;
        for side in &mut self.sides {
            let (Some(k), Some(rot)) = (side.kernel.as_mut(), &side.rotation) else {
                continue;
            };
            let timed = match o.timing {
                TimingMode::Events => {
                    series(group, k, rot, timer, flush, o.warmup, o.iters, self.alone)
                }
                TimingMode::Graphs => match spin {
                    Ok(spin) => graph_series(group, k, rot, o.warmup, o.iters, self.alone, spin),
                    Err(why) => Err(RtError::Device(wavefuse_runtime::DeviceError::Unsupported(
                        format!("graph timing's gate (the spin kernel) did not compile: {why}"),
                    ))),
                },
            };
            match timed {
                Ok(samples) => side.repeats.push(Stats::from_ms(&samples)),
                Err(e) => {
                    side.version.error = Some(format!("timing: {e}"));
                    side.kernel = None;
                }
            }
        }
    }

    /// The row, with timing and the check after timing filled in (L2 is flushed between
    /// launches only when they are timed with events).
    fn finish(mut self, mode: TimingMode) -> Row {
        let tol = self.row.tolerance;
        let mut versions = Vec::new();
        for mut side in std::mem::take(&mut self.sides) {
            if let (Some(k), Some(ir), Some(rot)) = (&side.kernel, &self.ir, &side.rotation) {
                let launches = side.repeats.iter().map(|s| s.samples).sum::<usize>();
                let tol = side.tolerance.unwrap_or(tol);
                match k.read_outputs() {
                    Ok(out) => {
                        let after = check_of("", &exec::compare(ir, &out, &self.reference), tol);
                        if !after.pass {
                            side.version.check.pass = false;
                            side.version.check.detail = format!(
                                "after {launches} timed launches over {} input sets: {}",
                                rot.sets, after.detail
                            );
                        }
                    }
                    Err(e) => side.version.error = Some(format!("reading back after timing: {e}")),
                }
                if rot.flush && mode == TimingMode::Graphs {
                    side.version.note = format!(
                        "in graphs: the {} input sets total less than 4 × L2 and L2 is not flushed inside a graph, so L2 may hold them",
                        rot.sets
                    );
                }
                side.version.timing = Some(Timing {
                    repeats: side.repeats.clone(),
                    sets: rot.sets,
                    rotation_bytes: rot.bytes,
                    flushed: rot.flush && mode == TimingMode::Events,
                });
            }
            versions.push(side.version);
        }
        let mut it = versions.into_iter();
        if let Some(g) = it.next() {
            self.row.generated = g;
        }
        if let Some(m) = it.next() {
            self.row.manual = Manual::Present(Box::new(m));
        }
        self.row
    }
}

/// `warmup + iters` launches of `k`, each on the next input set, the timed ones returned in ms;
/// with `alone`, of rank 0 alone ([`wavefuse_runtime::KernelInstance::launch_alone`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn series<D: Device>(
    group: &RankGroup<D>,
    k: &mut OpKernel<'_, D>,
    rot: &Rotation<D>,
    timer: &GroupTimer<D>,
    flush: &D::Buffer,
    warmup: usize,
    iters: usize,
    alone: bool,
) -> Result<Vec<f64>, RtError> {
    let mut samples = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        rot.bind(k, i)?;
        if rot.flush {
            timing::fill(group.device(0), flush, (i as u8) | 1, group.stream(0))?;
        }
        let (gate, launched, stopped) = if alone {
            let gate = timer.start_alone(group)?;
            let launched = k.launch_alone(0);
            (gate, launched, timer.stop_alone(group))
        } else {
            let gate = timer.start(group)?;
            let launched = k.launch();
            (gate, launched, timer.stop(group))
        };
        drop(gate);
        launched?;
        stopped?;
        k.wait()?;
        let ms = timer.elapsed_ms(group)?;
        if i >= warmup {
            samples.push(ms);
        }
    }
    Ok(samples)
}

/// [`series`] in CUDA graphs ([`TimingMode::Graphs`]): a graph of [`GRAPH_CALLS`] launches of `k`
/// (rank 0 alone with `alone`, every rank otherwise), each launch bound to the next input set,
/// captured once and replayed for every sample, as an engine replays its decode step — for a
/// kernel whose epoch lives on the device ([`wavefuse_runtime::KernelInstance::replay_safe`]);
/// a hand-written kernel with a host-passed epoch gets a fresh graph per replay (its epochs are
/// fixed at capture, DESIGN.md §5.4). `warmup` and `iters` launches rounded up to whole graphs. A sample is one replay's slowest-rank window over its
/// launches, in ms per call; the error words are checked after every replay. Each replay waits
/// behind the spin kernel (`spin`, compiled [`timing::spin_request`]) on rank 0's stream, every
/// other rank's stream behind an event after it ([`GroupGraphs::replay_behind_spin`]): what a
/// replay's window holds is the device's work, not the host's submission of the graph nor the
/// skew of enqueuing rank after rank.
pub(crate) fn graph_series<D: Device>(
    group: &RankGroup<D>,
    k: &mut OpKernel<'_, D>,
    rot: &Rotation<D>,
    warmup: usize,
    iters: usize,
    alone: bool,
    spin: &Artifact,
) -> Result<Vec<f64>, RtError> {
    let spin = timing::Spin::load(group.device(0), spin)?;
    let graphs = |n: usize| n.div_ceil(GRAPH_CALLS);
    let ranks = if alone { 1 } else { group.tp() };
    let mut samples = Vec::with_capacity(graphs(iters));
    let mut set = 0;
    let mut capture = |k: &mut OpKernel<'_, D>| {
        GroupGraphs::capture_ranks(group, ranks, GRAPH_CALLS as u32, || {
            for _ in 0..GRAPH_CALLS {
                rot.bind(k, set)?;
                set += 1;
                if alone {
                    k.launch_alone(0)?;
                } else {
                    k.launch()?;
                }
            }
            Ok(())
        })
    };
    let replay_safe = k.instance().replay_safe();
    let mut once = if replay_safe { Some(capture(k)?) } else { None };
    for g in 0..graphs(warmup) + graphs(iters).max(1) {
        let fresh;
        let captured = match &once {
            Some(c) => c,
            None => {
                fresh = capture(k)?;
                &fresh
            }
        };
        let replay = captured.replay_behind_spin(group, &spin)?;
        k.wait()?;
        if g >= graphs(warmup) {
            samples.push(replay.per_call_us() * 1e-3);
        }
    }
    if once.take().is_some() {
        // The device epochs advanced with every replay, the host's count with the capture only:
        // start the next launches from zeroed state, as after any timed series.
        k.instance().reset()?;
    }
    Ok(samples)
}
