//! The schedule fitted where the kernel is lowered: the schedule's inputs (where it starts, the
//! explicit overrides, the placement) in, the lowered kernel and the schedule it was lowered with
//! out ([`fit`], which [`crate::generate`] calls). Nothing lowers twice: every lowering of one
//! fit goes through one table of trials, keyed by schedule, and the kernel kept is the one the
//! search lowered.
//!
//! Co-residency (DESIGN.md §5.9) is judged here and in [`LoweredKernel::coresident`] only: a
//! kernel with a grid barrier whose ranks' grids would not all be resident on one device is
//! refitted ([`fit_coresident`]), and refused with the numbers ([`LowerError::NotCoResident`])
//! when no register count could hold them. The real compiler's occupancy is checked against the
//! same [`LoweredKernel::coresident`] once it is known (`wavefuse check`), and the runtime asks
//! the driver before launch.

use serde::{Deserialize, Serialize};
use wavefuse_ir::Kernel;

use super::schedule::assumed_waves_per_simd;
use super::{Int4Dot, LowerError, Schedule, defaults, has_gemv_prologue, lower_validated};
use crate::lowered::{LoweredInfo, LoweredKernel, Occupancy};
use crate::target::Arch;

/// A co-residency requirement: all `workgroups` of a rank's grid must be resident at once (the
/// kernel has a grid barrier, DESIGN.md §5.9). The one such type: the lowered kernel records it
/// ([`LoweredKernel::coresidency`]), the ABI describes it
/// ([`Abi::coresidency`](crate::abi::Abi::coresidency), with [`CoResidency::RULE`] in words) and
/// the fit judges it. The runtime's `LaunchSpec` carries only whether a launch needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Described", from = "Described")]
pub struct CoResidency {
    /// Workgroups that must be resident together (the whole grid).
    pub workgroups: u32,
}

impl CoResidency {
    /// What a launcher must do, as the ABI says it.
    pub const RULE: &str = "launch cooperatively, or check grid <= co-resident capacity (compiled occupancy x CUs) before launch";
}

/// [`CoResidency`] as an ABI description writes it: with the rule in words (read back, the words
/// are the reader's to ignore).
#[derive(Serialize, Deserialize)]
struct Described {
    workgroups: u32,
    #[serde(default)]
    rule: String,
}

impl From<CoResidency> for Described {
    fn from(c: CoResidency) -> Described {
        Described {
            workgroups: c.workgroups,
            rule: CoResidency::RULE.to_owned(),
        }
    }
}

impl From<Described> for CoResidency {
    fn from(d: Described) -> CoResidency {
        CoResidency {
            workgroups: d.workgroups,
        }
    }
}

/// Where a kernel's schedule starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleSource {
    /// The target's default for the placement ([`defaults`]).
    Default,
    /// A schedule from elsewhere (a tuned store's entry): used when it lowers on its own, the
    /// default otherwise ([`Origin`] says which and why).
    Preferred(Schedule),
    /// Exactly this schedule: no overrides, no fit — lowered as given and refused when one rank's
    /// grid cannot be resident ([`lower`](super::lower)'s rule): a tuner's candidate, the
    /// simulator's small-shape schedule.
    Exact(Schedule),
}

/// An explicit override of schedule fields (`field=value,...`, [`Schedule::with_overrides`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// Where it came from, for messages (`$WAVEFUSE_SCHEDULE`, `--set`).
    pub origin: String,
    /// The `field=value,...` text.
    pub spec: String,
}

/// Everything a kernel's schedule is made of, resolved by the caller (the harness's schedule
/// policy: default, tuned store, explicit overrides, placement) and fitted by [`fit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInputs {
    /// Where it starts.
    pub source: ScheduleSource,
    /// Applied in order on top (kernels with a GEMV only: the others have no field they would
    /// change).
    pub overrides: Vec<Override>,
    /// Ranks of the TP group sharing one device (1: one rank per device, as TP is deployed).
    pub ranks_per_device: u32,
}

impl ScheduleInputs {
    /// The target's default, one rank per device: what the snapshots hold.
    pub fn per_device() -> ScheduleInputs {
        ScheduleInputs::default_for(1)
    }

    /// The target's default with `ranks_per_device` ranks sharing each device.
    pub fn default_for(ranks_per_device: u32) -> ScheduleInputs {
        ScheduleInputs {
            source: ScheduleSource::Default,
            overrides: Vec::new(),
            ranks_per_device,
        }
    }

    /// Exactly `schedule` ([`ScheduleSource::Exact`]).
    pub fn exact(schedule: Schedule) -> ScheduleInputs {
        ScheduleInputs::exact_placed(schedule, 1)
    }

    /// [`ScheduleInputs::exact`] for a kernel whose `ranks_per_device` ranks share each device
    /// (what its source holds: with several, the ranks entry too, as the pipeline writes it).
    pub fn exact_placed(schedule: Schedule, ranks_per_device: u32) -> ScheduleInputs {
        ScheduleInputs {
            source: ScheduleSource::Exact(schedule),
            overrides: Vec::new(),
            ranks_per_device,
        }
    }
}

/// Which source a fitted schedule started from.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// The target's default.
    Default,
    /// The preferred schedule.
    Preferred,
    /// The default, because the preferred schedule does not lower (why).
    PreferredRefused(LowerError),
    /// The exact schedule given.
    Exact,
}

/// A kernel lowered with the schedule fitted for it.
#[derive(Clone, Debug)]
pub struct Fitted {
    /// The schedule it was lowered with.
    pub schedule: Schedule,
    /// The lowered kernel (the fit's own: not lowered again).
    pub lowered: LoweredKernel,
    /// The lowered validator's facts about `lowered`, for the back ends.
    pub info: LoweredInfo,
    /// How the schedule was found.
    pub report: FitReport,
}

/// How a schedule was found: where it started and what was said about it.
#[derive(Clone, Debug, PartialEq)]
pub struct FitReport {
    /// Where the schedule started from.
    pub origin: Origin,
    /// Warnings about overrides without effect, one line each.
    pub warnings: Vec<String>,
    /// Lowerings the fit made, each of a different schedule (the search's trials, the kept one
    /// among them).
    pub lowerings: usize,
}

/// Why no schedule could be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// An explicit override does not parse or does not fit the kernel.
    #[error("{origin}: {source}")]
    Override {
        /// Where the override came from.
        origin: String,
        /// What is wrong with it.
        source: LowerError,
    },
    /// The kernel does not lower with the fitted schedule (or is refused: not co-resident).
    #[error(transparent)]
    Lower(#[from] LowerError),
}

/// One lowering's result: the kernel and the lowered validator's facts about it.
type Lowered = Result<(LoweredKernel, LoweredInfo), LowerError>;

/// The lowerings of one fit, by schedule: a schedule tried twice (the default's prologue rule,
/// then the fit from the same schedule) is lowered once.
pub(super) struct Trials<'k> {
    kernel: &'k Kernel,
    arch: Arch,
    done: Vec<(Schedule, Lowered)>,
    /// Whether a lowering with dynamic LDS ([`LoweredKernel::lds_is_dynamic`]: sm_90 past
    /// 48 KiB) counts as lowering. Only for a schedule asked for — exact, preferred (a tuned
    /// entry) or overridden — that is dynamic itself; the defaults and the fit's own steps keep
    /// to static LDS, so the kernels they give stay the ones measured.
    dynamic_lds: bool,
}

impl<'k> Trials<'k> {
    pub(super) fn new(kernel: &'k Kernel, arch: Arch) -> Trials<'k> {
        Trials {
            kernel,
            arch,
            done: Vec::new(),
            dynamic_lds: false,
        }
    }

    /// `kernel` lowered with `s` ([`lower_any_grid`](super::lower_any_grid): no co-residency
    /// refusal), once per `s`; with dynamic LDS, refused unless this fit takes it.
    pub(super) fn lower(&mut self, s: &Schedule) -> Result<LoweredKernel, LowerError> {
        let r = match self.done.iter().find(|(d, _)| d == s) {
            Some((_, r)) => r.clone(),
            None => {
                let r = lower_validated(self.kernel, self.arch, s);
                self.done.push((s.clone(), r.clone()));
                r
            }
        };
        match r {
            Ok((k, _)) if k.lds_is_dynamic() && !self.dynamic_lds => {
                Err(LowerError::Schedule(format!(
                    "{} bytes of LDS exceed the {} one {} workgroup declares statically: dynamic shared memory is for a schedule asked for (an override, a tuned or exact schedule), not the defaults' or the fit's",
                    k.lds_bytes(),
                    self.arch.max_static_lds_per_workgroup(),
                    self.arch
                )))
            }
            r => r.map(|(k, _)| k),
        }
    }

    /// Take dynamic LDS from here on where `s`, a schedule asked for, lowers with it.
    fn take_dynamic_lds_of(&mut self, s: &Schedule) {
        self.dynamic_lds = true;
        self.dynamic_lds = self.lower(s).is_ok_and(|k| k.lds_is_dynamic());
    }

    /// The validator's facts about `k`, the kernel these trials lowered with `s` (kept from its
    /// lowering; derived again only if `s` was never lowered here, which [`fit`] never does).
    fn info(&self, s: &Schedule, k: &LoweredKernel) -> LoweredInfo {
        self.done
            .iter()
            .find_map(|(d, r)| match r {
                Ok((_, info)) if d == s => Some(info.clone()),
                _ => None,
            })
            .unwrap_or_else(|| LoweredInfo::derive(k))
    }

    pub(super) fn kernel(&self) -> &'k Kernel {
        self.kernel
    }

    pub(super) fn arch(&self) -> Arch {
        self.arch
    }

    fn count(&self) -> usize {
        self.done.len()
    }
}

/// Lower `kernel` for `arch` with the schedule made of `inputs`, fitting it: the one function that
/// decides a schedule.
///
/// 1. the source: the target's default for the placement ([`defaults::default_schedule`]); a
///    preferred schedule when it lowers and one rank's grid fits, else the default; an exact
///    schedule is lowered as given and returned (steps 2 and 3 skipped);
/// 2. the explicit overrides, in order (kernels with a GEMV only; an override of a field the
///    schedule ignores is warned about);
/// 3. the co-residency fit for the placement ([`fit_coresident`]).
pub fn fit(kernel: &Kernel, arch: Arch, inputs: &ScheduleInputs) -> Result<Fitted, FitError> {
    let rpd = inputs.ranks_per_device.max(1);
    let mut t = Trials::new(kernel, arch);
    let (mut s, origin) = match &inputs.source {
        ScheduleSource::Exact(s) => {
            t.dynamic_lds = true;
            let k = t.lower(s)?;
            k.coresident(1, Occupancy::HardwareMax)
                .map_err(LowerError::from)?;
            return Ok(Fitted {
                schedule: s.clone(),
                info: t.info(s, &k),
                lowered: k,
                report: FitReport {
                    origin: Origin::Exact,
                    warnings: Vec::new(),
                    lowerings: t.count(),
                },
            });
        }
        ScheduleSource::Preferred(s) => {
            t.take_dynamic_lds_of(s);
            let lowers = t.lower(s).and_then(|k| {
                k.coresident(1, Occupancy::HardwareMax)
                    .map_err(LowerError::from)
            });
            match lowers {
                Ok(()) => (s.clone(), Origin::Preferred),
                Err(e) => {
                    t.dynamic_lds = false;
                    (
                        defaults::default_in(&mut t, rpd),
                        Origin::PreferredRefused(e),
                    )
                }
            }
        }
        ScheduleSource::Default => (defaults::default_in(&mut t, rpd), Origin::Default),
    };
    let mut warnings = Vec::new();
    if defaults::has_gemv(kernel) {
        for o in &inputs.overrides {
            s = s
                .with_overrides(&o.spec)
                .map_err(|source| FitError::Override {
                    origin: o.origin.clone(),
                    source,
                })?;
            let ignored = s.ignored_fields(kernel);
            for field in override_fields(&o.spec).filter(|f| ignored.contains(f)) {
                warnings.push(format!(
                    "warning: {}: `{field}` has no effect on {} at {arch} with this schedule",
                    o.origin,
                    kernel.name()
                ));
            }
        }
    } else {
        warnings.extend(inputs.overrides.iter().map(|o| {
            format!(
                "warning: {} is ignored for {} (no GEMV: its default schedule is used)",
                o.origin,
                kernel.name()
            )
        }));
    }
    if !inputs.overrides.is_empty() {
        t.take_dynamic_lds_of(&s);
    }
    let (k, s) = fit_in(&mut t, s, rpd)?;
    Ok(Fitted {
        info: t.info(&s, &k),
        schedule: s,
        lowered: k,
        report: FitReport {
            origin,
            warnings,
            lowerings: t.count(),
        },
    })
}

/// The field names of a `field=value,…` override.
fn override_fields(spec: &str) -> impl Iterator<Item = &str> {
    spec.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, _)| k.trim())
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
/// SIMD the compiler is assumed to give the kernel allow fewer: [`assumed_waves_per_simd`],
/// gfx906 above batch 4), first (several GEMV stages) cap the grid at
/// [`persistent_lanes_per_cu`] (the stages without a grid-wide wait loop over their tile parts,
/// [`Schedule::max_grid`]), then halve the K split (fewer workgroups per tile), then halve
/// tensor-core workgroups above 256 lanes (half the K warps), then widen the INT4 column tiles
/// (twice the columns, twice the words per lane: the same lanes) until they do, or until the
/// next step no longer lowers. A kernel still unfitted is refused ([`LowerError::NotCoResident`],
/// with the numbers) when its grids exceed what the device holds at any register count;
/// otherwise the compiled occupancy decides (`check` compares it with the real compiler's report,
/// and the runtime checks the driver's capacity before launch, DESIGN.md §5.9). Returns the
/// lowering and the schedule it used. [`fit`] is this after the schedule's source and overrides.
pub fn fit_coresident(
    ir: &Kernel,
    arch: Arch,
    s: Schedule,
    ranks_per_device: u32,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    fit_in(&mut Trials::new(ir, arch), s, ranks_per_device)
}

/// [`fit_coresident`] over the lowerings of `t`.
fn fit_in(
    t: &mut Trials<'_>,
    s: Schedule,
    ranks_per_device: u32,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    let (ir, arch) = (t.kernel(), t.arch());
    let (k, s) = materialise_in(t, s)?;
    let waves = assumed_waves_per_simd(ir, arch);
    let unfitted = !fits_at(&k, arch, ranks_per_device, waves);
    let persistent = (unfitted && s.max_grid == 0)
        .then(|| persistent(t, &s, &k, ranks_per_device, waves))
        .flatten();
    let (mut k, mut s) = shrink_to_fit(t, k, s, ranks_per_device, waves)?;
    // The persistent grid when it keeps more tile parts than shrinking the tiles alone does
    // (several GEMV stages: the stages without a grid-wide wait loop over their parts).
    if let Some((pk, ps)) = persistent {
        let (pk, ps) = shrink_to_fit(t, pk, ps, ranks_per_device, waves)?;
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
/// activation does not fit in LDS (a long K at batch 8) lowers that way. Recomputing stays the
/// default where it lowers: it re-reads a few KB of small inputs from L2 per workgroup, where
/// materialising costs a grid barrier and a round trip of the activation through global memory.
/// The first refusal is returned when the second also fails.
pub fn lower_or_materialise(
    ir: &Kernel,
    arch: Arch,
    s: Schedule,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    materialise_in(&mut Trials::new(ir, arch), s)
}

/// [`lower_or_materialise`] over the lowerings of `t`.
fn materialise_in(
    t: &mut Trials<'_>,
    s: Schedule,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    let arch = t.arch();
    match t.lower(&s) {
        Ok(k) => Ok((k, s)),
        Err(e @ LowerError::Schedule(_))
            if (!s.materialise_prologue || s.x_in_lds) && has_gemv_prologue(t.kernel()) =>
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
                .find_map(|m| t.lower(&m).ok().map(|k| (k, m)))
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
    t: &mut Trials<'_>,
    s: &Schedule,
    k: &LoweredKernel,
    ranks_per_device: u32,
    waves: u32,
) -> Option<(LoweredKernel, Schedule)> {
    let arch = t.arch();
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
    let c = t.lower(&capped).ok()?;
    (c.grid < k.grid).then_some((c, capped))
}

/// The refitting steps of [`fit_coresident`], from `k` lowered with `s`, until the grids fit
/// or no step is left.
fn shrink_to_fit(
    t: &mut Trials<'_>,
    mut k: LoweredKernel,
    mut s: Schedule,
    ranks_per_device: u32,
    waves: u32,
) -> Result<(LoweredKernel, Schedule), LowerError> {
    let (ir, arch) = (t.kernel(), t.arch());
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
        let lowered = match t.lower(&next) {
            Err(LowerError::Schedule(_)) if next.x_in_lds => {
                t.lower(&unstaged).map(|k| (k, unstaged))
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
/// barrier): what [`fit_coresident`] refits for, and what the tuner requires of its candidates
/// so the suite keeps their schedule as is.
pub fn fits_coresident(k: &LoweredKernel, arch: Arch, ranks_per_device: u32) -> bool {
    fits_at(k, arch, ranks_per_device, arch.max_waves_per_simd())
}

/// [`fits_coresident`] of `ir`'s lowering `k` at the waves per SIMD the compiler is assumed to
/// give it ([`assumed_waves_per_simd`]: fewer on gfx906 above batch 1): what [`fit_coresident`]
/// fits for, and what the tuner requires of its candidates.
pub fn fits_coresident_for(
    ir: &Kernel,
    k: &LoweredKernel,
    arch: Arch,
    ranks_per_device: u32,
) -> bool {
    fits_at(k, arch, ranks_per_device, assumed_waves_per_simd(ir, arch))
}

/// [`fits_coresident`] at most `waves` waves per SIMD (what the compiler is assumed to give the
/// kernel: [`assumed_waves_per_simd`]).
fn fits_at(k: &LoweredKernel, arch: Arch, ranks_per_device: u32, waves: u32) -> bool {
    // A grid barrier, or flags where ranks share the device (§5.9; `LoweredKernel::coresident`).
    (k.coresidency.is_none() && (ranks_per_device == 1 || !k.waits_across_workgroups()))
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
pub(super) fn by_lds(k: &LoweredKernel, arch: Arch) -> u32 {
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
