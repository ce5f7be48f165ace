//! The schedule policy: where a case's [`Schedule`](wavefuse_codegen::lower::Schedule) comes from. [`SchedulePolicy`] resolves the
//! sources — the target's default, the tuned store, the explicit overrides, the placement — into
//! one value ([`ScheduleInputs`]) and hands it to codegen ([`wavefuse_codegen::generate`]),
//! which decides the schedule while lowering (the default, the overrides, the co-residency fit:
//! `codegen/src/lower/fit.rs`) and returns the kernel it fitted. Nothing here lowers.
//!
//! A policy is built at the edge (the `wavefuse` command parses `--schedule`, `--tuned-store`
//! and the `WAVEFUSE_SCHEDULE*` overrides into it); this crate reads no environment and keeps no
//! global selector. The same policy and placement give the same kernel, so `wavefuse emit`,
//! the snapshots, `check`, `ab`, the GPU suite and the tuner see the same kernel:
//!
//! 1. small shapes (the simulator's): exactly the small-shape schedule;
//! 2. model shapes: the tuned store's entry for the kernel, shape, target and device when the
//!    policy has a store with one (codegen uses it when it still lowers); otherwise the target's
//!    default for the placement ([`wavefuse_codegen::lower::defaults`]);
//! 3. the explicit overrides for the target, in order;
//! 4. the co-residency fit for the placement ([`wavefuse_codegen::lower::fit()`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use wavefuse::ir::{Kernel, OpKind};
use wavefuse_codegen::lower::{Origin, ScheduleInputs, ScheduleSource};
use wavefuse_codegen::{Arch, CompileError, Generated};

use crate::case::{CaseSpec, ShapeKind};
use crate::tune::select::Choice;
pub use crate::tune::select::Tuned;

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
        match crate::case::op_kernel(c) {
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

/// An explicit schedule override (`field=value,...`, see
/// [`Schedule::with_overrides`](wavefuse_codegen::lower::Schedule::with_overrides)), with
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

/// The environment variables of explicit schedule overrides (`field=value,...`): `$WAVEFUSE_SCHEDULE`
/// for every target, then `$WAVEFUSE_SCHEDULE_GFX906` / `_SM90` for one.
pub const SCHEDULE_ENV: &str = "WAVEFUSE_SCHEDULE";

impl Override {
    /// The overrides the environment asks for ([`SCHEDULE_ENV`]), in the order they apply, with
    /// `var` looking a variable up: the CLI and the Python package look them up in the process
    /// environment at their edge and pass that lookup here (a library reads no environment,
    /// DESIGN.md §4), so a kernel generated by either under the same environment has the same
    /// schedule.
    pub fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<Override> {
        let mut out = Vec::new();
        let vars = [(SCHEDULE_ENV.to_owned(), None)]
            .into_iter()
            .chain(Arch::ALL.into_iter().map(|a| {
                (
                    format!("{SCHEDULE_ENV}_{}", a.to_string().to_uppercase()),
                    Some(a),
                )
            }));
        for (name, arch) in vars {
            if let Some(spec) = var(&name).filter(|v| !v.is_empty()) {
                out.push(Override {
                    origin: format!("${name}"),
                    arch,
                    spec: spec.to_string_lossy().into_owned(),
                });
            }
        }
        out
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

/// A kernel generated with the schedule a policy resolved, and what was said about it.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// What [`wavefuse_codegen::generate`] made of it (its schedule, fitted while lowering).
    pub code: Generated,
    /// Lines on where the schedule came from when it is not the plain default, and warnings
    /// about overrides without effect (each said once per policy: None when all were already
    /// said).
    pub note: Option<String>,
}

/// A policy's sources resolved for one kernel: what codegen is handed, and what the policy
/// knows of the tuned store's entry (for the note).
#[derive(Clone, Debug)]
pub struct Sources {
    /// The value codegen fits the schedule from.
    pub inputs: ScheduleInputs,
    /// The tuned store's answer, when the policy has a store and the kernel a key.
    tuned: Option<Choice>,
    /// Lines already known (overrides ignored at the small shapes).
    lines: Vec<String>,
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

    /// The sources of case `c` (op-level kernel `ir`) on `arch` at `placement` (see the module
    /// docs for the order).
    pub fn sources(&self, c: &CaseSpec, arch: Arch, ir: &Kernel, placement: Placement) -> Sources {
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
            return Sources {
                inputs: ScheduleInputs::exact(crate::sim::small_schedule(arch, ir)),
                tuned: None,
                lines,
            };
        }
        // The store's entries are per shape set, named after the model (`qwen27b-tp4`,
        // `h2048-f5632-q2048-kv256-d64-tp2`): a model's own shapes have their own entries, and a
        // user's kernel has entries for its exact text ([`CaseSpec::store_key`]).
        let key = c.store_key();
        let key = key.as_ref().map(|(k, s)| (k.as_str(), s.as_str()));
        self.kernel_sources(ir, arch, placement, key)
    }

    /// [`SchedulePolicy::sources`] for any kernel at its own shapes (a user's kernel, a
    /// checkpoint's, a benchmark's): the tuned store consulted under `tuned_key` (kernel name,
    /// shape-set name) when there is one.
    pub fn kernel_sources(
        &self,
        ir: &Kernel,
        arch: Arch,
        placement: Placement,
        tuned_key: Option<(&str, &str)>,
    ) -> Sources {
        let tuned = match (&self.tuned, tuned_key) {
            (Some(t), Some((name, shape))) => Some(crate::tune::select::lookup(
                &t.store,
                name,
                shape,
                arch,
                t.device.as_deref(),
            )),
            _ => None,
        };
        let source = match &tuned {
            Some(Choice::Entry { schedule, .. }) => ScheduleSource::Preferred(schedule.clone()),
            _ => ScheduleSource::Default,
        };
        let overrides = self
            .overrides
            .iter()
            .filter(|o| o.arch.is_none_or(|a| a == arch))
            .map(|o| wavefuse_codegen::lower::Override {
                origin: o.origin.clone(),
                spec: o.spec.clone(),
            })
            .collect();
        Sources {
            inputs: ScheduleInputs {
                source,
                overrides,
                ranks_per_device: placement.ranks_per_device(ir.tp()),
            },
            tuned,
            lines: Vec::new(),
        }
    }

    /// What to say, once per policy, about how `g`'s schedule was found from `sources`.
    pub fn note(&self, sources: &Sources, g: &Generated) -> Option<String> {
        let mut lines = sources.lines.clone();
        match (&sources.tuned, &g.fit.origin) {
            (Some(Choice::Missing(line)), _) => lines.push(line.clone()),
            (Some(Choice::Entry { used, .. }), Origin::Preferred) => lines.push(used.clone()),
            (Some(Choice::Entry { what, .. }), Origin::PreferredRefused(e)) => lines.push(format!(
                "schedule: default for {what} (the tuned entry no longer lowers: {e})"
            )),
            _ => {}
        }
        lines.extend(g.fit.warnings.iter().cloned());
        self.once(lines)
    }

    /// Case `c` (op-level kernel `ir`) generated on `arch` at `placement` with this policy's
    /// sources: the harness's one call into codegen's generation.
    pub fn resolve(
        &self,
        c: &CaseSpec,
        arch: Arch,
        ir: &Kernel,
        placement: Placement,
    ) -> Result<Resolved, CompileError> {
        self.generate(ir, arch, self.sources(c, arch, ir, placement))
    }

    /// [`SchedulePolicy::resolve`] for any kernel at its own shapes, the tuned store consulted
    /// under `tuned_key` (kernel name, shape-set name) when there is one.
    pub fn resolve_kernel(
        &self,
        ir: &Kernel,
        arch: Arch,
        placement: Placement,
        tuned_key: Option<(&str, &str)>,
    ) -> Result<Resolved, CompileError> {
        self.generate(
            ir,
            arch,
            self.kernel_sources(ir, arch, placement, tuned_key),
        )
    }

    fn generate(
        &self,
        ir: &Kernel,
        arch: Arch,
        sources: Sources,
    ) -> Result<Resolved, CompileError> {
        let code = wavefuse_codegen::generate(ir, arch, &sources.inputs)?;
        let note = self.note(&sources, &code);
        Ok(Resolved { code, note })
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    /// `$WAVEFUSE_SCHEDULE` first (every target), then the per-target variables; empty ones are
    /// no override; each says where it came from.
    #[test]
    fn overrides_from_variables_in_order() {
        let vars = |name: &str| match name {
            "WAVEFUSE_SCHEDULE" => Some("k_split=2".into()),
            "WAVEFUSE_SCHEDULE_SM90" => Some("prefetch_before_wait=true".into()),
            "WAVEFUSE_SCHEDULE_GFX906" => Some("".into()),
            _ => None,
        };
        let got = Override::from_vars(vars);
        assert_eq!(
            got,
            [
                Override {
                    origin: "$WAVEFUSE_SCHEDULE".into(),
                    arch: None,
                    spec: "k_split=2".into(),
                },
                Override {
                    origin: "$WAVEFUSE_SCHEDULE_SM90".into(),
                    arch: Some(Arch::Sm90),
                    spec: "prefetch_before_wait=true".into(),
                },
            ]
        );
        assert!(Override::from_vars(|_| None).is_empty());
    }
}
