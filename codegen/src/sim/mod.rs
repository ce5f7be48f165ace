//! The CPU protocol simulator: the executable definition of the lowered level (see
//! [`lowered`](crate::lowered) for the execution and memory model it implements).
//!
//! [`simulate`] runs a [`LoweredKernel`] on every rank of its TP group at once, launch after
//! launch, under a seeded random schedule, and reports what went wrong as [`Finding`]s: deadlocks
//! and wait timeouts, reads of memory no protocol made visible, write races, barriers reached by
//! part of a workgroup, out-of-bounds accesses, and outputs that differ from the f64 reference.
//!
//! # Execution
//! The structured body is compiled once into a flat instruction list with jumps. Every lane is a
//! green thread: a program counter, its registers, its clock. Memory is one instance of each array
//! parameter per rank (a peer-arrays parameter is one array per rank, reached through the rank's
//! peer table, which the host fills with [`peer_slot`](crate::lowered::peer_slot) or, to test the
//! host side, rotated), LDS is one instance per workgroup and starts undefined at every launch,
//! registers are per lane. Values are 32-bit patterns; an `f16` is held as the `f32` of its exact
//! value and every f16 operation rounds (the `half` crate), so results match the device bit for
//! bit up to the order of FP32 sums.
//!
//! The scheduler (ChaCha8, seeded) picks the next lane at every *scheduling point*: each access to
//! memory another lane may write (LDS, written or peer arrays), each atomic, fence, wait, barrier
//! and wave reduction. Reads of a rank's read-only arrays, register arithmetic and control flow run
//! without a switch, as their order cannot change any outcome. The choice is hierarchical (a rank,
//! one of its workgroups with a ready lane, a ready lane of it); with [`Granularity::Wave`] every
//! ready lane of the chosen lane's wave steps together, as a wave does in hardware. [`Skew`] holds
//! back a whole rank or one workgroup for a random number of steps at random times, so one rank
//! runs far ahead of another, or one workgroup lags all others.
//!
//! A workgroup barrier is a rendezvous of all lanes of the workgroup at the same barrier; a lane
//! that finishes, or arrives at a different barrier, while others wait is a
//! [`FindingKind::PartialBarrier`] (and ends the run: what follows is undefined). A wave reduction
//! is a rendezvous of the wave. A `wait_ge` that is not yet satisfied parks its lane until the
//! location is written (equivalent to spinning, without the cost); when no lane can run, that is
//! a [`FindingKind::Deadlock`] — the parked waits then run out of budget, write their code into
//! the error word and continue, exactly as the kernel would, and the host reports the error word
//! after the launch. Deadlocks on barriers alone end the run.
//!
//! Each rank runs its launches back to back, with epoch = `first_epoch` + launch index, on the
//! same counters, flags and scratch (zeroed once, never reset), independently of the other ranks
//! (a rank may start launch e + 1 while a peer is still in launch e). Inputs are written by the
//! host before each launch of that rank; outputs are poisoned with NaN before it and read back
//! after it.
//!
//! # Visibility (happens-before)
//! Memory itself is sequentially consistent in the simulation: a read returns the latest write.
//! What the simulator checks is whether that write was *guaranteed* to be visible, using
//! happens-before with vector clocks (`clock.rs`):
//! - program order within a lane;
//! - a workgroup barrier joins the clocks of all lanes of the workgroup (it orders their LDS and
//!   global accesses, cumulatively: what a lane knew before the barrier every lane knows after);
//! - the kernel boundary: everything a rank's launch did happens before its next launch, and the
//!   host's writes before a launch happen before it;
//! - release → acquire: an atomic write with ordering ≥ release (or any atomic write after a
//!   release fence) publishes the writer's clock at that location; an atomic read with ordering ≥
//!   acquire (or a relaxed one followed by an acquire fence) that reads the location joins what is
//!   published there. A `wait_ge` synchronises through the load that satisfies it (the spin's
//!   earlier loads are not credited: stricter than crediting them, never more lenient). An atomic store starts a
//!   new release sequence (earlier releases are no longer reachable through that location); an
//!   RMW continues it, so an acquire of a counter joins every release-add before it. The pair
//!   synchronises only when both lanes are within the narrower of the two scopes: `wave` (one
//!   wave), `workgroup` (one workgroup), `agent` (one rank), `system` (all ranks). A
//!   workgroup-scope release never reaches another workgroup; an agent-scope one never reaches
//!   another rank.
//!
//! Every element remembers its last writer and the writer's time. A plain read (or atomic read) of
//! an element whose last write is by another lane and not covered by the reader's clock is a
//! [`FindingKind::StaleRead`]: without the missing release, acquire, fence or barrier, the
//! hardware may return an older value. A plain write over such a write is a
//! [`FindingKind::WriteRace`]. LDS never written in the current launch by the workgroup is
//! [`FindingKind::UninitRead`] — which is how LDS used to pass values between workgroups shows up.
//! Atomics are sequentially consistent per location (the modification order is the simulation's
//! order); atomics never race with each other. Not checked: a write after another lane's unordered
//! read (write-after-read); when it matters, the schedule where the read comes second is a stale
//! read or a mismatch.

mod bind;
mod clock;
mod engine;
mod eval;
mod finding;
mod memory;
mod program;

use wavefuse_ir::Kernel;
use wavefuse_ir::reference::{EvalError, RankInputs, RankOutputs, evaluate};

use crate::lowered::LoweredKernel;

pub use bind::{INT8_TOLERANCE, OutputError, tolerance, tolerance_for};
pub use engine::RunStats;
pub use finding::{Finding, FindingKind};
pub use memory::HostView;

/// Why a simulation could not run (as opposed to what it found).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// A statement is ill-typed.
    #[error("ill-typed statement `{stmt}`: {what}")]
    Type {
        /// The statement.
        stmt: String,
        /// What is wrong.
        what: String,
    },
    /// A grid barrier or flag was not expanded into primitives.
    #[error("`{0}` must be expanded by expand_sync before simulation")]
    NotExpanded(String),
    /// The lowered kernel's parameters do not match the op-level kernel or its inputs.
    #[error("binding: {0}")]
    Binding(String),
    /// The reference evaluation failed.
    #[error("reference: {0}")]
    Reference(#[from] EvalError),
    /// The run would exceed one of the simulator's budgets ([`SimOptions::memory_budget`],
    /// [`SimOptions::max_steps`]) and was not started: nothing is known about the kernel — a
    /// limit of the simulator, never a verdict on the kernel.
    #[error("too large to simulate (needs {0})")]
    TooLarge(Limit),
}

/// A budget of the simulator that a run needs more of than it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Bytes of simulator memory ([`footprint`]) against [`SimOptions::memory_budget`].
    Memory {
        /// The estimate of what the run needs.
        needs: u64,
        /// The budget.
        budget: u64,
    },
    /// Scheduling steps against [`SimOptions::max_steps`], known before the run: `needs` is a
    /// lower bound (every lane of every launch takes at least one step; one per wave at
    /// [`Granularity::Wave`]).
    Steps {
        /// Steps at least needed.
        needs: u64,
        /// The budget.
        budget: u64,
    },
    /// The run reached [`SimOptions::max_steps`] unfinished, with nothing found.
    Stopped {
        /// The budget it stopped at.
        budget: u64,
    },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        match *self {
            Limit::Memory { needs, budget } => write!(
                f,
                "about {:.1} GiB of simulator memory; its budget is {:.1} GiB",
                gib(needs),
                gib(budget)
            ),
            Limit::Stopped { budget } => write!(
                f,
                "more than its budget of {budget} scheduling steps: it stopped there unfinished, \
                 with nothing found"
            ),
            Limit::Steps { needs, budget } => write!(
                f,
                "at least {needs} scheduling steps; its budget is {budget}"
            ),
        }
    }
}

/// The simulator's memory budget by default: 4 GiB ([`SimOptions::memory_budget`]).
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

/// Bytes of simulator state per element of an array: its 32-bit value and its write stamp.
const BYTES_PER_ELEMENT: u64 = 4 + std::mem::size_of::<clock::Stamp>() as u64;

/// An estimate of the memory a simulated run of `k` takes: every array of every rank and the
/// LDS of every workgroup of every rank (a value and a write stamp per element), and per lane
/// its state, registers and a vector clock of one entry per workgroup. What
/// [`SimOptions::memory_budget`] is checked against before anything is allocated.
pub fn footprint(k: &LoweredKernel, registers: usize) -> u64 {
    let tp = u64::from(k.tp);
    let arrays: u64 = k
        .params
        .values()
        .map(|d| match &d.kind {
            crate::lowered::ParamKind::Array { len, .. }
            | crate::lowered::ParamKind::PeerArrays { len, .. } => *len as u64,
            crate::lowered::ParamKind::Scalar { .. } => 0,
        })
        .sum();
    let lds: u64 = k.lds.values().map(|l| l.len as u64).sum();
    let slots = tp * u64::from(k.grid);
    let lanes = slots * u64::from(k.workgroup_size);
    let per_lane = engine::LANE_BYTES + 4 * registers as u64 + 4 * (slots + tp);
    (arrays * tp + lds * slots) * BYTES_PER_ELEMENT + lanes * per_lane
}

/// Whether a run of `k` over `launches` launches fits the budgets of `opts`
/// ([`SimOptions::memory_budget`], and at least one step per lane — per wave at
/// [`Granularity::Wave`] — per launch within [`SimOptions::max_steps`]): what [`simulate`]
/// checks before allocating anything, for a caller that would build large inputs first.
pub fn fits(k: &LoweredKernel, launches: u32, opts: &SimOptions) -> Result<(), SimError> {
    let prog = program::Program::compile(k)?;
    check_budgets(k, prog.num_regs, launches, opts)
}

/// [`fits`] with the program's registers per lane known.
fn check_budgets(
    k: &LoweredKernel,
    registers: usize,
    launches: u32,
    opts: &SimOptions,
) -> Result<(), SimError> {
    let needs = footprint(k, registers);
    if needs > opts.memory_budget {
        return Err(SimError::TooLarge(Limit::Memory {
            needs,
            budget: opts.memory_budget,
        }));
    }
    let lanes = u64::from(k.tp) * u64::from(k.grid) * u64::from(k.workgroup_size);
    let steps = match opts.granularity {
        Granularity::Lane => lanes,
        Granularity::Wave => lanes / u64::from(k.wave_size()).max(1),
    } * u64::from(launches);
    if steps > opts.max_steps {
        return Err(SimError::TooLarge(Limit::Steps {
            needs: steps,
            budget: opts.max_steps,
        }));
    }
    Ok(())
}

/// The unit the scheduler steps.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// One lane at a time: the finest interleaving, including within a wave.
    Lane,
    /// Every ready lane of a wave, in lockstep.
    Wave,
}

/// Holding back ranks and workgroups, in scheduling steps. A held-back unit still runs when nothing
/// else can.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Skew {
    /// Longest hold of a whole rank (also applied, with probability ½, at the start).
    pub max_rank_delay: u64,
    /// Longest hold of one workgroup.
    pub max_wg_delay: u64,
    /// Mean steps between two holds (0: never).
    pub mean_gap: u64,
}

impl Skew {
    /// No skew: uniform random interleaving.
    pub const NONE: Skew = Skew {
        max_rank_delay: 0,
        max_wg_delay: 0,
        mean_gap: 0,
    };
    /// Ranks held up to 4000 steps, workgroups up to 1000, a hold every ~500 steps.
    pub const DEFAULT: Skew = Skew {
        max_rank_delay: 4000,
        max_wg_delay: 1000,
        mean_gap: 500,
    };
}

/// How the host fills each rank's peer table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PeerTable {
    /// Slot [`peer_slot`](crate::lowered::peer_slot)`(p)` holds rank p's array: the rule the
    /// device assumes (DESIGN.md §5.5).
    Shared,
    /// Slot s on rank r holds rank (r + s) mod tp's array: a host that rotates (a defect, for
    /// mutation tests).
    Rotated,
}

/// Options of one simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimOptions {
    /// Seed of the scheduler.
    pub seed: u64,
    /// What one scheduling step runs.
    pub granularity: Granularity,
    /// Holding back ranks and workgroups.
    pub skew: Skew,
    /// The host's peer tables.
    pub peer_table: PeerTable,
    /// Upper bound on the loads of a wait, applied on top of the kernel's budget; a parked wait
    /// spends one per scheduling step of the whole simulation.
    pub spin_budget: u32,
    /// Scheduling steps after which the run stops unfinished ([`RunStats::step_limit`]). Every
    /// run ends by itself — loops are counted and every wait is bounded, and when no lane can
    /// run that is a [`FindingKind::Deadlock`] — so this only bounds the time a run takes: a run
    /// that reaches it is not checked, never a finding.
    pub max_steps: u64,
    /// Bytes the run may take ([`footprint`]); a larger run is refused before anything is
    /// allocated ([`SimError::TooLarge`]). Default [`DEFAULT_MEMORY_BUDGET`].
    pub memory_budget: u64,
    /// Workgroups of a rank resident at once; None: as many as the target holds at its
    /// hardware-maximum occupancy ([`LoweredKernel::device_capacity`](crate::lowered::LoweredKernel::device_capacity)),
    /// the rest starting as earlier ones finish, as on a GPU. A grid barrier needs all.
    pub resident_workgroups: Option<u32>,
    /// The epoch of the first launch (1 on fresh counters).
    pub first_epoch: u32,
    /// Before each rank's first launch, every element of that rank's array parameter of this
    /// name holds this value (else zero): synchronisation state as a history of launches would
    /// have left it, e.g. counters just short of the 2³² wrap (harness/tests/sim_replay.rs).
    pub preset: Vec<(String, u32)>,
}

impl SimOptions {
    /// Defaults with this seed: lane granularity, default skew, the shared peer rule.
    pub fn new(seed: u64) -> Self {
        SimOptions {
            seed,
            granularity: Granularity::Lane,
            skew: Skew::DEFAULT,
            peer_table: PeerTable::Shared,
            spin_budget: u32::MAX,
            max_steps: 20_000_000,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            resident_workgroups: None,
            first_epoch: 1,
            preset: Vec::new(),
        }
    }

    /// Schedule `i` of a sweep from `seed`: alternates lane and wave granularity, and uses no
    /// skew, mild skew and strong skew in turn.
    pub fn sweep(seed: u64, i: u64) -> Self {
        let mut o = SimOptions::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i));
        o.granularity = if i % 2 == 0 {
            Granularity::Lane
        } else {
            Granularity::Wave
        };
        o.skew = match i % 3 {
            0 => Skew::NONE,
            1 => Skew::DEFAULT,
            _ => Skew {
                max_rank_delay: 20_000,
                max_wg_delay: 5000,
                mean_gap: 200,
            },
        };
        o
    }
}

/// The host side of a run: what happens on a rank before and after each of its launches.
pub trait Host {
    /// Before launch `launch` (0-based) of the view's rank: bind inputs, poison outputs.
    fn before_launch(&mut self, launch: u32, mem: &mut HostView<'_>);
    /// After every lane of that launch finished: read outputs.
    fn after_launch(&mut self, launch: u32, mem: &mut HostView<'_>);
}

/// What a run with a custom host found.
#[derive(Clone, Debug)]
pub struct RawReport {
    /// Findings, merged per site.
    pub findings: Vec<Finding>,
    /// Statistics.
    pub stats: RunStats,
}

impl RawReport {
    /// Whether a finding of this kind was made.
    pub fn has(&self, kind: FindingKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }
}

/// Run `k` for `launches` launches per rank with a custom host (for hand-built kernels).
pub fn simulate_with_host(
    k: &LoweredKernel,
    host: &mut dyn Host,
    launches: u32,
    opts: &SimOptions,
) -> Result<RawReport, SimError> {
    let prog = program::Program::compile(k)?;
    check_budgets(k, prog.num_regs, launches, opts)?;
    let mut engine = engine::Engine::new(k, &prog, opts, host, launches);
    let stats = engine.run();
    Ok(RawReport {
        findings: engine.findings.into_vec(),
        stats,
    })
}

/// What a run of a lowered kernel against its op-level kernel found.
#[derive(Clone, Debug)]
pub struct SimReport {
    /// Per launch, per rank: the outputs read back (empty for launches that did not complete).
    pub outputs: Vec<Vec<RankOutputs>>,
    /// Per completed launch, rank and output: the error against the reference.
    pub errors: Vec<OutputError>,
    /// Findings, merged per site, in the order first found.
    pub findings: Vec<Finding>,
    /// Statistics.
    pub stats: RunStats,
}

impl SimReport {
    /// No findings at all.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Whether a finding of this kind was made.
    pub fn has(&self, kind: FindingKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }

    /// The budget the run stopped at unfinished ([`SimOptions::max_steps`]), if it did: what it
    /// did not run is not checked (its findings, if any, are still defects).
    pub fn limit(&self, opts: &SimOptions) -> Option<Limit> {
        self.stats.step_limit.then_some(Limit::Stopped {
            budget: opts.max_steps,
        })
    }

    /// The largest relative L2 error over all outputs, ranks and launches.
    pub fn max_rel_l2(&self) -> f64 {
        self.errors
            .iter()
            .map(|e| e.rel_l2)
            .fold(0.0, |m, e| if e.is_nan() || e > m { e } else { m })
    }
}

/// Inputs of a run (per launch, per rank) and the reference outputs for them: build once, run
/// under many schedules.
#[derive(Clone, Debug)]
pub struct Case {
    /// Per launch, per rank: the inputs.
    pub inputs: Vec<Vec<RankInputs>>,
    /// Per launch, per rank: [`evaluate`] on those inputs.
    pub reference: Vec<Vec<RankOutputs>>,
}

impl Case {
    /// Evaluate the reference for each launch's inputs.
    pub fn new(ir: &Kernel, inputs: Vec<Vec<RankInputs>>) -> Result<Case, SimError> {
        let reference = inputs
            .iter()
            .map(|inp| evaluate(ir, inp))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Case { inputs, reference })
    }
}

/// Run `lowered` (one rank's kernel, lowered from `ir`) on all ranks, one launch per element of
/// `launches` (each the per-rank inputs of that launch), and compare every output of every launch
/// with [`evaluate`] on the same inputs.
pub fn simulate(
    lowered: &LoweredKernel,
    ir: &Kernel,
    launches: &[Vec<RankInputs>],
    opts: &SimOptions,
) -> Result<SimReport, SimError> {
    simulate_case(lowered, ir, &Case::new(ir, launches.to_vec())?, opts)
}

/// [`simulate`] with the reference already evaluated.
pub fn simulate_case(
    lowered: &LoweredKernel,
    ir: &Kernel,
    case: &Case,
    opts: &SimOptions,
) -> Result<SimReport, SimError> {
    if lowered.tp != ir.tp() {
        return Err(SimError::Binding(format!(
            "lowered for tp={}, op-level kernel has tp={}",
            lowered.tp,
            ir.tp()
        )));
    }
    let (launches, reference) = (&case.inputs, &case.reference);
    let prog = program::Program::compile(lowered)?;
    check_budgets(lowered, prog.num_regs, launches.len() as u32, opts)?;
    let mut host = bind::OpHost::new(ir, lowered, launches)?;
    let (mut findings, stats) = {
        let mut engine =
            engine::Engine::new(lowered, &prog, opts, &mut host, launches.len() as u32);
        let stats = engine.run();
        (engine.findings, stats)
    };
    let completed: Vec<Vec<bool>> = host
        .results
        .iter()
        .map(|ranks| {
            ranks
                .iter()
                .map(|outs| !outs.is_empty() || ir.outputs().next().is_none())
                .collect()
        })
        .collect();
    let errors = bind::compare(ir, &host.results, reference, &completed, &mut findings);
    Ok(SimReport {
        outputs: host.results,
        errors,
        findings: findings.into_vec(),
        stats,
    })
}
