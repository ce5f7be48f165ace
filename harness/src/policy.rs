//! The schedule policy: where a case's [`Schedule`] comes from, resolved by ONE function,
//! [`SchedulePolicy::resolve`], and passed on as a value.
//!
//! A policy is built at the edge (the `wavefuse` command parses `--schedule`, `--tuned-store`
//! and the `WAVEFUSE_SCHEDULE*` overrides into it); this crate reads no environment and keeps no
//! global selector. The same policy and placement give the same schedule, so `wavefuse emit`,
//! the snapshots, `check`, `ab`, the GPU suite and the tuner see the same kernel:
//!
//! 1. small shapes (the simulator's): the small-shape schedule;
//! 2. model shapes: the tuned store's entry for the kernel, shape, target and device when the
//!    policy has a store with one that still lowers; otherwise the target's default
//!    ([`Schedule::default_for`]), with the push allreduce protocol for a fused GEMV + allreduce
//!    when each rank has its own device;
//! 3. the explicit overrides, in order (kernels with a GEMV only: the others have no field they
//!    would change);
//! 4. the co-residency fit for the placement ([`fit_coresident`]): a kernel with a grid barrier
//!    whose ranks' grids would not all be resident on one device is refitted.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use wavefuse::ir::{Kernel, OpKind};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{AllreduceProtocol, Int4Dot, LowerError, Schedule, lower_any_grid};
use wavefuse_codegen::lowered::{LoweredKernel, Occupancy};

use crate::suite::{CaseSpec, ShapeKind};
use crate::tune::store::Store;

/// How many ranks of a TP group share one device: what the co-residency fit and the allreduce
/// protocol depend on. What is emitted and snapshotted is [`Placement::PerDevice`], as TP is
/// deployed; the commands that run ranks (`ab`, `tune`, `run`, `gpu-suite`) take
/// `--placement` and default to it where there is no GPU or one GPU per rank
/// ([`run_placement`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// All ranks on one device (a correctness placement: the ranks share its bandwidth and
    /// CUs/SMs, and every workgroup of every rank of a kernel with a grid barrier or flags must
    /// be resident at once).
    #[default]
    SameDevice,
    /// One rank per device (how TP is deployed; what the snapshots, `check` and `emit` show, and
    /// what runs without a GPU or with one GPU per rank).
    PerDevice,
}

impl Placement {
    /// Ranks sharing each device at TP `tp`.
    pub fn ranks_per_device(self, tp: u32) -> u32 {
        match self {
            Placement::SameDevice => tp,
            Placement::PerDevice => 1,
        }
    }

    /// The placement of `ranks_per_device` ranks per device.
    pub fn of(ranks_per_device: u32) -> Placement {
        if ranks_per_device == 1 {
            Placement::PerDevice
        } else {
            Placement::SameDevice
        }
    }

    /// `same-device` or `per-device`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::SameDevice => "same-device",
            Placement::PerDevice => "per-device",
        }
    }
}

/// Whether a kernel exchanges data between ranks (has an allreduce): such a kernel's ranks must
/// all run at once, so it cannot be run one rank alone.
pub fn communicates(ir: &Kernel) -> bool {
    ir.tp() > 1
        && ir
            .ops()
            .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_)))
}

/// Where a command that runs ranks (`ab`, `tune`, `run`) puts the ranks of kernel `ir`, given
/// its `--placement` (`explicit`), its `--ranks` and the GPUs it runs on (`gpus`: 0 without one).
///
/// - `explicit` wins.
/// - No GPU, or one GPU per rank (`gpus >= tp`): [`Placement::PerDevice`], how TP is deployed.
///   Without a GPU the checks run in the simulator, which models one device per rank.
/// - Fewer GPUs than ranks: [`Ranks::placement_of`] — a kernel that does not communicate is run
///   one rank alone ([`Placement::PerDevice`]), one that does runs all ranks on the GPU at once
///   ([`Placement::SameDevice`]); when those do not fit together the run reports that the kernel
///   needs `tp` GPUs ([`needs_gpus`]), never an error of the kernel.
pub fn run_placement(
    explicit: Option<Placement>,
    ranks: Ranks,
    ir: &Kernel,
    gpus: usize,
) -> Placement {
    match explicit {
        Some(p) => p,
        None if gpus == 0 || gpus >= ir.tp() as usize => Placement::PerDevice,
        None => ranks.placement_of(ir),
    }
}

/// What a run says of a kernel that needs more GPUs than it has: one rank per GPU is how it is
/// deployed, and its ranks do not fit on one device together (`why`).
pub fn needs_gpus(tp: u32, gpus: usize, why: &str) -> String {
    format!(
        "not run: needs {tp} GPUs (one rank per GPU, as TP is deployed; {gpus} here), and its \
         {tp} ranks do not fit on one GPU together: {why}"
    )
}

/// How the ranks of a TP case are run when they are timed on one GPU (`--ranks`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Ranks {
    /// A kernel that does not communicate (no allreduce) runs one rank at a time, alone on the
    /// GPU, and is timed as rank 0 alone, with its schedule resolved for one rank per device: how
    /// TP deploys it. A kernel that communicates runs all ranks on the GPU at once.
    #[default]
    Alone,
    /// All ranks on the GPU at once, every kernel (a correctness placement: the ranks share the
    /// device's bandwidth and SMs).
    All,
}

impl Ranks {
    /// The placement case kernel `ir` is resolved, run and timed at on one GPU:
    /// [`Placement::PerDevice`] (rank 0 timed alone) for a kernel without an allreduce at TP > 1
    /// under [`Ranks::Alone`], [`Placement::SameDevice`] otherwise.
    pub fn placement_of(self, ir: &Kernel) -> Placement {
        if self == Ranks::Alone && ir.tp() > 1 && !communicates(ir) {
            Placement::PerDevice
        } else {
            Placement::SameDevice
        }
    }

    /// [`Ranks::placement_of`] for case `c` (SameDevice when its kernel cannot be built: the
    /// error comes when it is generated).
    pub fn placement(self, c: &CaseSpec) -> Placement {
        match crate::suite::op_kernel(c) {
            Ok(Some(ir)) => self.placement_of(&ir),
            _ => Placement::SameDevice,
        }
    }

    /// `alone` or `all`.
    pub fn name(self) -> &'static str {
        match self {
            Ranks::Alone => "alone",
            Ranks::All => "all",
        }
    }
}

/// An explicit schedule override (`field=value,...`, see [`Schedule::with_overrides`]), with
/// where it came from (for messages) and the target it applies to (None: every target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// Where it came from, e.g. `$WAVEFUSE_SCHEDULE` or `--set`.
    pub origin: String,
    /// Only for this target (None: all).
    pub arch: Option<Arch>,
    /// The `field=value,...` text.
    pub spec: String,
}

/// A tuned-schedule store and the device it is consulted for.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// The merged stores.
    pub store: Store,
    /// The device name to look entries up for (None: unknown).
    pub device: Option<String>,
}

impl Tuned {
    /// A store consulted for `device`.
    pub fn new(store: Store, device: Option<String>) -> Tuned {
        Tuned { store, device }
    }
}

/// Where schedules come from: the target's default, or a tuned store, plus explicit overrides.
/// [`SchedulePolicy::default`] is the target's default with no overrides (what the snapshots
/// hold).
#[derive(Clone, Debug, Default)]
pub struct SchedulePolicy {
    /// The tuned store consulted at model shapes (None: the target's default).
    pub tuned: Option<Tuned>,
    /// Explicit overrides, applied in order after the default or tuned schedule.
    pub overrides: Vec<Override>,
    /// The notes already said (each note is said once per policy: a suite resolves the same
    /// override for every case).
    said: Arc<Mutex<HashSet<String>>>,
}

/// Why no schedule could be resolved.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ResolveError {
    /// An explicit override does not parse or does not fit the kernel.
    #[error("{origin}: {source}")]
    Override {
        /// Where the override came from.
        origin: String,
        /// What is wrong with it.
        source: LowerError,
    },
    /// The kernel does not lower with the resolved schedule.
    #[error("lowering: {0}")]
    Lower(#[from] LowerError),
}

/// A resolved schedule and what was said about it.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The schedule to compile with.
    pub schedule: Schedule,
    /// Lines on where it came from when it is not the plain default, and warnings about
    /// overrides without effect (each said once per policy: None when all were already said).
    pub note: Option<String>,
}

impl SchedulePolicy {
    /// A policy from a tuned store (None: the target's default) and explicit overrides.
    pub fn new(tuned: Option<Tuned>, overrides: Vec<Override>) -> SchedulePolicy {
        SchedulePolicy {
            tuned,
            overrides,
            said: Arc::default(),
        }
    }

    /// The lines of `lines` not said before by this policy, joined; None when there are none.
    fn once(&self, lines: Vec<String>) -> Option<String> {
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        let fresh: Vec<String> = lines
            .into_iter()
            .filter(|l| said.insert(l.clone()))
            .collect();
        (!fresh.is_empty()).then(|| fresh.join("\n"))
    }

    /// The schedule of case `c` (op-level kernel `ir`) on `arch` at `placement`: the one function
    /// that decides a schedule (see the module docs for the order).
    pub fn resolve(
        &self,
        c: &CaseSpec,
        arch: Arch,
        ir: &Kernel,
        placement: Placement,
    ) -> Result<Resolved, ResolveError> {
        if c.shape == ShapeKind::Small {
            let lines = self
                .overrides
                .iter()
                .map(|o| {
                    format!(
                        "warning: {} is ignored at the small shapes (the simulator's schedule is used)",
                        o.origin
                    )
                })
                .collect();
            return Ok(Resolved {
                schedule: crate::sim::small_schedule(arch, ir),
                note: self.once(lines),
            });
        }
        // The store's entries are per shape set, named after the model (`qwen27b-tp4`,
        // `h2048-f5632-q2048-kv256-d64-tp2`): a model's own shapes have their own entries, and a
        // user's kernel has entries for its exact text ([`CaseSpec::store_key`]).
        let key = c.store_key();
        let key = key.as_ref().map(|(k, s)| (k.as_str(), s.as_str()));
        self.resolve_kernel(ir, arch, placement, key)
    }

    /// [`SchedulePolicy::resolve`] for any kernel at its own shapes (a user's kernel, a
    /// checkpoint's, a benchmark's): steps 2–4, the tuned store consulted under `tuned_key`
    /// (kernel name, shape-set name) when there is one.
    pub fn resolve_kernel(
        &self,
        ir: &Kernel,
        arch: Arch,
        placement: Placement,
        tuned_key: Option<(&str, &str)>,
    ) -> Result<Resolved, ResolveError> {
        let rpd = placement.ranks_per_device(ir.tp());
        let (tuned, note) = match (&self.tuned, tuned_key) {
            (Some(t), Some((name, shape))) => self.tuned_schedule(t, name, shape, arch, ir),
            _ => (None, None),
        };
        let mut lines: Vec<String> = note.into_iter().collect();
        let mut s = match tuned {
            Some(s) => s,
            None => prologue_by_cost(ir, arch, default_schedule(arch, ir, rpd), rpd),
        };
        if has_gemv(ir) {
            for o in self
                .overrides
                .iter()
                .filter(|o| o.arch.is_none_or(|a| a == arch))
            {
                s = s
                    .with_overrides(&o.spec)
                    .map_err(|source| ResolveError::Override {
                        origin: o.origin.clone(),
                        source,
                    })?;
                let ignored = s.ignored_fields(ir);
                for field in override_fields(&o.spec).filter(|f| ignored.contains(f)) {
                    lines.push(format!(
                        "warning: {}: `{field}` has no effect on {} at {arch} with this schedule",
                        o.origin,
                        ir.name()
                    ));
                }
            }
        } else {
            lines.extend(self.overrides.iter().map(|o| {
                format!(
                    "warning: {} is ignored for {} (no GEMV: its default schedule is used)",
                    o.origin,
                    ir.name()
                )
            }));
        }
        let (_, s) = fit_coresident(ir, arch, s, rpd)?;
        Ok(Resolved {
            schedule: s,
            note: self.once(lines),
        })
    }

    fn tuned_schedule(
        &self,
        t: &Tuned,
        name: &str,
        shape: &str,
        arch: Arch,
        ir: &Kernel,
    ) -> (Option<Schedule>, Option<String>) {
        let (schedule, line) =
            crate::tune::select::choose(&t.store, name, shape, arch, t.device.as_deref(), ir);
        (schedule, Some(line))
    }
}

/// The field names of a `field=value,…` override.
fn override_fields(spec: &str) -> impl Iterator<Item = &str> {
    spec.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, _)| k.trim())
}

fn has_gemv(ir: &Kernel) -> bool {
    ir.ops()
        .any(|(_, o)| matches!(o.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)))
}

/// The target's default for `ir` with `ranks_per_device` ranks sharing each device. With one rank
/// per device a kernel that fuses a GEMV with an allreduce uses the push protocol (each rank
/// writes its slice into the peers' memory and polls only its own flags): on 2 × H200 over
/// NVLink the fused kernel took 18.2 µs with push against 19.6 µs with pull (three alternating
/// runs each, `bench/results/2026-11-30-push-per-device/`), while with four ranks on one H200
/// push was 6 µs slower (`bench/results/2026-11-30-fused-experiments/`).
fn default_schedule(arch: Arch, ir: &Kernel, ranks_per_device: u32) -> Schedule {
    let s = Schedule::default_for(arch, ir);
    let allreduce = ir
        .ops()
        .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_)));
    if ranks_per_device == 1 && ir.tp() > 1 && has_gemv(ir) && allreduce {
        s.with_protocol(AllreduceProtocol::Push)
    } else {
        s
    }
}

/// L2 bandwidth at which the workgroups of a recomputed GEMV prologue re-read its inputs, fitted
/// on the H200 (`bench/results/2026-12-02-h200-prologue-batch`: silu·mul before the INT4 down
/// GEMV 17408 → 5120, 640 workgroups, batch 1 and 2).
pub const PROLOGUE_REREAD_BYTES_PER_S: f64 = 10.9e12;
/// What materialising a prologue costs on the H200 when the GEMV stage keeps its grid: the stage
/// barrier and the activation's round trip through global memory (same fit).
pub const MATERIALISE_US: f64 = 2.6;
/// … and when the grid barrier makes the GEMV stage shrink its grid to be co-resident (RMSNorm
/// before gate/up 5120 → 2 × 17408: 2176 → 528 workgroups): recomputing won at batch 4 (111 MB
/// re-read, 0.91×), materialising at batch 8 (200 MB, 1.17×); the line between them.
pub const MATERIALISE_SHRUNK_US: f64 = 13.8;

/// The default's choice between recomputing a GEMV prologue in every workgroup and
/// materialising it once behind a grid barrier ([`Schedule::materialise_prologue`]), by cost, on
/// sm_90 (where it was measured): materialise when the recompute's re-reads (its grid × the
/// prologue's input bytes, at [`PROLOGUE_REREAD_BYTES_PER_S`]: each workgroup reads the inputs
/// whole once — a stage that loops over its tile parts computes the norm's `1/rms` once per
/// workgroup in front of the loop, and each part's packing of its K slice is what the GEMV
/// stages anyway) take longer than materialising
/// ([`MATERIALISE_US`], or [`MATERIALISE_SHRUNK_US`] when the barrier's co-residency shrinks the
/// grid). gfx906 keeps recomputing (not measured there); `lower_or_materialise` still
/// materialises where recomputing does not lower. Tuned and explicit schedules decide for
/// themselves (an override `materialise_prologue=false` wins).
pub fn prologue_by_cost(ir: &Kernel, arch: Arch, s: Schedule, ranks_per_device: u32) -> Schedule {
    if arch != Arch::Sm90
        || s.materialise_prologue
        || !wavefuse_codegen::lower::has_gemv_prologue(ir)
    {
        return s;
    }
    let Ok(recompute) = lower_any_grid(ir, arch, &s) else {
        return s;
    };
    let m = Schedule {
        materialise_prologue: true,
        ..s.clone()
    };
    let Ok(materialised) = lower_any_grid(ir, arch, &m) else {
        return s;
    };
    let reread_us = f64::from(recompute.grid)
        * wavefuse_codegen::lower::prologue_input_bytes(ir) as f64
        / PROLOGUE_REREAD_BYTES_PER_S
        * 1e6;
    let cost_us = if fits_coresident(&materialised, arch, ranks_per_device) {
        MATERIALISE_US
    } else {
        MATERIALISE_SHRUNK_US
    };
    if reread_us > cost_us { m } else { s }
}

/// Lanes per CU/SM of a persistent multi-stage grid ([`Schedule::max_grid`], set by
/// [`fit_coresident`]). gfx906: 512 (4 workgroups of 128 lanes), which any kernel of at most
/// 128 VGPRs (2 waves per SIMD) keeps resident. sm_90: 768 (6 of 128 lanes), which the compiler
/// is asked to keep ([`Schedule::min_resident_per_cu`]: at most 80 registers per lane, spilling
/// if it must): the one-launch FFN block at TP 1 compiled to 80 registers, 6 per SM, and on 640
/// workgroups (4.85 per SM) took 61.4 µs against 58.5 on 792 (6 per SM), the same binary in one
/// call (`bench/results/2026-12-03-h200-ffn-profile`). The runtime checks the compiled kernel's
/// capacity before launch either way (§5.9).
pub fn persistent_lanes_per_cu(arch: Arch) -> u32 {
    match arch {
        Arch::Sm90 => 768,
        _ => 512,
    }
}

/// Workgroups per CU/SM that every generated kernel fits at once (the occupancy the budgets keep,
/// with margin): the target for all ranks' grids together when they share one device.
pub const RESIDENT_PER_CU: u32 = 4;

/// Lower, and when the kernel has a grid barrier and the grids of `ranks_per_device` ranks would
/// not fit on one device at [`resident_per_cu`] workgroups per CU/SM (fewer where the waves per
/// SIMD the compiler is assumed to give the kernel allow fewer:
/// [`wavefuse_codegen::lower::assumed_waves_per_simd`], gfx906 above batch 4), first (several GEMV
/// stages) cap the grid at [`persistent_lanes_per_cu`] (the stages without a grid-wide wait loop
/// over their tile parts, [`Schedule::max_grid`]), then halve the K split
/// (fewer workgroups per tile), then halve tensor-core workgroups above 256 lanes (half the K
/// warps), then widen the INT4 column tiles (twice the columns, twice the words per lane: the
/// same lanes) until they do, or until the next step no longer lowers. A kernel still unfitted
/// is refused ([`LowerError::NotCoResident`], with the numbers) when its grids exceed what the
/// device holds at any register count; otherwise the compiled occupancy decides (`check`
/// compares it with the real compiler's report, and the runtime checks the driver's capacity
/// before launch, DESIGN.md §5.9). Returns the lowering and the schedule it used.
pub fn fit_coresident(
    ir: &Kernel,
    arch: Arch,
    s: Schedule,
    ranks_per_device: u32,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    let (k, s) = lower_or_materialise(ir, arch, s)?;
    let waves = wavefuse_codegen::lower::assumed_waves_per_simd(ir, arch);
    let unfitted = !fits_at(&k, arch, ranks_per_device, waves);
    let persistent = (unfitted && s.max_grid == 0)
        .then(|| persistent(ir, arch, &s, &k, ranks_per_device, waves))
        .flatten();
    let (mut k, mut s) = shrink_to_fit(ir, arch, k, s, ranks_per_device, waves)?;
    // The persistent grid when it keeps more tile parts than shrinking the tiles alone does
    // (several GEMV stages: the stages without a grid-wide wait loop over their parts).
    if let Some((pk, ps)) = persistent {
        let (pk, ps) = shrink_to_fit(ir, arch, pk, ps, ranks_per_device, waves)?;
        // One that fits at the assumed occupancy first (gfx906 above batch 4: the stage that
        // waits keeps its grid, so only the persistent grid's other stages can shrink).
        let parts = |s: &Schedule| s.k_split * 1024 / s.columns_per_workgroup.max(1);
        let fits = |k: &LoweredKernel| fits_at(k, arch, ranks_per_device, waves);
        let assumed = waves < arch.max_waves_per_simd();
        if (assumed && fits(&pk), parts(&ps)) > (assumed && fits(&k), parts(&s)) {
            (k, s) = (pk, ps);
        }
    }
    // Unfitted at the budgets' occupancy: refused now if no register count could hold the
    // placement's grids; otherwise the compiled occupancy decides (checked against the real
    // compiler's report by `check`, and by the runtime before launch, §5.9).
    k.coresident(ranks_per_device, Occupancy::HardwareMax)?;
    Ok((k, s))
}

/// Lower with `s`; when that is refused for a schedule reason and the kernel has a GEMV
/// prologue that is recomputed into LDS (`s.materialise_prologue` false), try the prologue
/// materialised once in global memory behind a grid barrier instead
/// ([`Schedule::materialise_prologue`]; staged in LDS if that fits, else not): a prologue whose
/// activation does not fit in LDS (a long K at batch 8) lowers that way. Recomputing stays the default where it lowers: it re-reads a
/// few KB of small inputs from L2 per workgroup, where materialising costs a grid barrier and a
/// round trip of the activation through global memory. The first refusal is returned when the
/// second also fails.
pub fn lower_or_materialise(
    ir: &Kernel,
    arch: Arch,
    s: Schedule,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    match lower_any_grid(ir, arch, &s) {
        Ok(k) => Ok((k, s)),
        Err(e @ LowerError::Schedule(_))
            if (!s.materialise_prologue || s.x_in_lds)
                && wavefuse_codegen::lower::has_gemv_prologue(ir) =>
        {
            let m = Schedule {
                materialise_prologue: true,
                ..s.clone()
            };
            // The materialised activation is read from global memory; staged into LDS as a
            // whole it may not fit either, so without staging next (also when materialising was
            // asked for).
            let unstaged = Schedule {
                x_in_lds: false,
                ..m.clone()
            };
            let mut tries = if s.materialise_prologue {
                vec![unstaged.clone()]
            } else {
                vec![m, unstaged.clone()]
            };
            // Unstaged, the GEMV stage's cross-slice sums (K slices × columns × batch rows) may
            // still outgrow the workgroup's LDS (gfx906 at batch 16: 32 slices, 64 KiB and
            // more): half the K slices in half the lanes, down to one wave.
            let mut narrower = unstaged;
            while narrower.threads_per_column > 1
                && narrower.int4_dot != Int4Dot::Mma
                && narrower.workgroup_size > arch.wave_size()
            {
                narrower.workgroup_size /= 2;
                narrower.threads_per_column /= 2;
                tries.push(narrower.clone());
            }
            tries
                .into_iter()
                .find_map(|m| lower_any_grid(ir, arch, &m).ok().map(|k| (k, m)))
                .ok_or(e)
        }
        Err(e) => Err(e),
    }
}

/// A kernel of several GEMV stages on a persistent grid ([`Schedule::max_grid`]): at most
/// [`persistent_lanes_per_cu`] lanes per CU/SM (fewer where `k`'s LDS allows fewer) over the
/// ranks sharing a device, that many workgroups per SM asked of the compiler on sm_90
/// ([`Schedule::min_resident_per_cu`]). None when the cap changes nothing (one stage, or no
/// stage that could loop).
fn persistent(
    ir: &Kernel,
    arch: Arch,
    s: &Schedule,
    k: &LoweredKernel,
    ranks_per_device: u32,
    waves: u32,
) -> Option<(LoweredKernel, Schedule)> {
    let per_cu = (persistent_lanes_per_cu(arch) / k.workgroup_size.max(1))
        .min(by_lds(k, arch))
        .min(by_waves(k, arch, waves))
        .max(1);
    let cap = arch.compute_units() * per_cu / ranks_per_device.max(1);
    let capped = Schedule {
        max_grid: cap.max(1),
        min_resident_per_cu: if arch == Arch::Sm90 { per_cu } else { 0 },
        ..s.clone()
    };
    let c = lower_any_grid(ir, arch, &capped).ok()?;
    (c.grid < k.grid).then_some((c, capped))
}

/// The refitting steps of [`fit_coresident`], from `k` lowered with `s`, until the grids fit
/// or no step is left.
fn shrink_to_fit(
    ir: &Kernel,
    arch: Arch,
    mut k: LoweredKernel,
    mut s: Schedule,
    ranks_per_device: u32,
    waves: u32,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    loop {
        if fits_at(&k, arch, ranks_per_device, waves) || s.threads_per_column == 1 {
            break;
        }
        let mut next = s.clone();
        // Below the target's most waves per SIMD (gfx906 above batch 4: hipcc's VGPRs leave one
        // wave per SIMD) the waves bound the workgroups per CU too, and halving goes on down to
        // one wave per workgroup: 160 workgroups of 64 lanes fit 4 per CU where 2 of 128 do not.
        let assumed = waves < arch.max_waves_per_simd();
        let bound = lds_bound(&k, arch)
            || (assumed && by_waves(&k, arch, waves) < resident_per_cu(k.workgroup_size));
        let least = if assumed { arch.wave_size() } else { 128 };
        if bound && s.int4_dot != Int4Dot::Mma && s.workgroup_size > least {
            // The cross-slice sums in LDS (K slices × columns × batch rows) limit the
            // workgroups per CU, and wider tiles would only grow them: half the K slices in
            // half the lanes halve them, on the same tile (gfx906 at batch 8: 32 KiB, 2 per CU).
            next.workgroup_size /= 2;
            next.threads_per_column /= 2;
        } else if assumed
            && bound
            && s.int4_dot != Int4Dot::Mma
            && s.threads_per_column > 1
            && s.words_per_iteration > 1
        {
            // Already one wave (an assumed occupancy only: `least` is 128 otherwise): half the
            // K slices, each lane half the words per iteration — the same tile in the same
            // lanes, half the cross-slice sums (gfx906, gate/up at batch 16: 34 KiB → 18 KiB,
            // 3 workgroups per CU instead of 1).
            next.threads_per_column /= 2;
            next.words_per_iteration /= 2;
        } else if s.k_split > 1 {
            // Fewer K parts per tile: the grid shrinks, each workgroup keeps its warps (and
            // stages the activations in LDS only while a part's still fit).
            next = next.with_k_split(ir, s.k_split / 2);
        } else if s.int4_dot == Int4Dot::Mma && s.workgroup_size > 256 {
            // First back to 256-lane workgroups: the same tile, half the K warps.
            next.workgroup_size /= 2;
            next.threads_per_column /= 2;
        } else if s.int4_dot == Int4Dot::Mma {
            // The tensor-core tiling keeps 16-byte loads: twice the column warps, half the K ones.
            next.columns_per_workgroup *= 2;
            next.threads_per_column /= 2;
        } else if s.words_per_iteration < 8 {
            next.columns_per_workgroup *= 2;
            next.words_per_iteration *= 2;
        } else {
            break;
        }
        // A wider tile that no longer lowers (its LDS outgrew the workgroup: gfx906, TP 8,
        // batch 8) stops the search: the last one that lowered goes on.
        // A step whose staged activation no longer fits beside the rest of the LDS (fewer K
        // parts, each staging more: sm_90's 48 KiB of static LDS) goes on unstaged.
        let unstaged = Schedule {
            x_in_lds: false,
            ..next.clone()
        };
        let lowered = match lower_any_grid(ir, arch, &next) {
            Err(LowerError::Schedule(_)) if next.x_in_lds => {
                lower_any_grid(ir, arch, &unstaged).map(|k| (k, unstaged))
            }
            other => other.map(|k| (k, next)),
        };
        match lowered {
            Ok(wider) => (k, s) = wider,
            Err(LowerError::Schedule(_)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok((k, s))
}

/// Whether the grids of `ranks_per_device` ranks of `k` fit on one device at [`RESIDENT_PER_CU`]
/// workgroups per CU/SM, fewer where its LDS allows fewer (always, for a kernel without a grid
/// barrier): what [`fit_coresident`] refits for, and what the tuner requires of its candidates so the suite keeps their
/// schedule as is.
pub fn fits_coresident(k: &LoweredKernel, arch: Arch, ranks_per_device: u32) -> bool {
    fits_at(k, arch, ranks_per_device, arch.max_waves_per_simd())
}

/// [`fits_coresident`] of `ir`'s lowering `k` at the waves per SIMD the compiler is assumed to
/// give it ([`wavefuse_codegen::lower::assumed_waves_per_simd`]: fewer on gfx906 above batch 1):
/// what [`fit_coresident`] fits for, and what the tuner requires of its candidates.
pub fn fits_coresident_for(
    ir: &Kernel,
    k: &LoweredKernel,
    arch: Arch,
    ranks_per_device: u32,
) -> bool {
    fits_at(
        k,
        arch,
        ranks_per_device,
        wavefuse_codegen::lower::assumed_waves_per_simd(ir, arch),
    )
}

/// [`fits_coresident`] at most `waves` waves per SIMD (what the compiler is assumed to give the
/// kernel: [`wavefuse_codegen::lower::assumed_waves_per_simd`]).
fn fits_at(k: &LoweredKernel, arch: Arch, ranks_per_device: u32, waves: u32) -> bool {
    k.coresidency.is_none()
        || ranks_per_device * k.grid
            <= arch.compute_units()
                * resident_per_cu(k.workgroup_size)
                    .min(by_lds(k, arch))
                    .min(by_waves(k, arch, waves))
}

/// Workgroups of `k` one CU/SM holds at `waves` waves per SIMD (by its lanes alone).
fn by_waves(k: &LoweredKernel, arch: Arch, waves: u32) -> u32 {
    arch.resident_workgroups_per_cu(k.workgroup_size, waves, 0)
}

/// Workgroups of `k` one CU/SM holds by its LDS alone.
fn by_lds(k: &LoweredKernel, arch: Arch) -> u32 {
    let lds = u32::try_from(k.lds_bytes()).unwrap_or(u32::MAX);
    arch.resident_workgroups_per_cu(k.workgroup_size, arch.max_waves_per_simd(), lds)
}

/// Whether LDS, not lanes, bounds the workgroups of `k` per CU/SM below [`resident_per_cu`].
fn lds_bound(k: &LoweredKernel, arch: Arch) -> bool {
    by_lds(k, arch) < resident_per_cu(k.workgroup_size)
}

/// [`RESIDENT_PER_CU`] is for workgroups of 256 lanes: the budgets keep 1024 lanes per CU/SM
/// resident (`min_occupancy` in `budgets.toml`: 8 warps per sub-partition on sm_90), so
/// workgroups of other sizes fit in proportion — 512 lanes: 2 (the H200 refused 2 ranks × 160
/// fused workgroups of 512 lanes at 2 per SM), 128 lanes: 8 (the split-K fused kernel). Below
/// 128 lanes it stays at 8: LDS per workgroup, not lanes, may bound those.
pub fn resident_per_cu(workgroup_size: u32) -> u32 {
    (RESIDENT_PER_CU * 256 / workgroup_size.max(128)).max(1)
}
