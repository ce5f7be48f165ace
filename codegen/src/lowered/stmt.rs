//! Statements of the lowered level, and the synchronisation invariants they cite.

use wavefuse_ir::{Ordering, Scope};

use super::{Expr, Lds, Param, Reg};

/// A sequence of statements executed in order by every lane that reaches it.
pub type Block = Vec<Stmt>;

/// The invariants of DESIGN.md §5. Every synchronisation statement names the one it upholds, and
/// the C++ writer prints it next to the code.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Invariant {
    /// §5.1: one arrival per workgroup, by one elected lane after a workgroup barrier.
    OneArrivalPerWorkgroup,
    /// §5.2: LDS is workgroup-local; cross-workgroup data goes through global memory.
    LdsIsWorkgroupLocal,
    /// §5.3: every cross-device read follows an acquire of the peer's flag for this epoch; every
    /// publish ends with a release store of the flag.
    PeerFlagHandshake,
    /// §5.4: counters and flags are monotonic epoch counters, never reset inside a kernel.
    MonotonicEpochs,
    /// §5.5: peers are addressed by one rank rule shared by host and device.
    OnePeerOrder,
    /// §5.7: two results go to two outputs; nothing another workgroup may read is overwritten.
    NoOverwriteOfShared,
    /// §5.8: no barrier in divergent control flow; tails are masked, not returned.
    UniformBarriers,
    /// §5.9: a kernel with a grid barrier runs with all its workgroups co-resident.
    CoResidentGrid,
    /// §5.10: every spin is bounded and reports a timeout through the error word.
    BoundedSpin,
    /// §5.11: scratch that must start zeroed is initialised by the op or epoch-stamped.
    ScratchInitialised,
    /// §5.12: no read-modify-write atomics on peer memory; flags live in uncached memory.
    NoPeerRmw,
}

impl Invariant {
    /// The section number in DESIGN.md §5.
    pub fn number(self) -> u32 {
        match self {
            Invariant::OneArrivalPerWorkgroup => 1,
            Invariant::LdsIsWorkgroupLocal => 2,
            Invariant::PeerFlagHandshake => 3,
            Invariant::MonotonicEpochs => 4,
            Invariant::OnePeerOrder => 5,
            Invariant::NoOverwriteOfShared => 7,
            Invariant::UniformBarriers => 8,
            Invariant::CoResidentGrid => 9,
            Invariant::BoundedSpin => 10,
            Invariant::ScratchInitialised => 11,
            Invariant::NoPeerRmw => 12,
        }
    }

    /// One line for the generated code's comments.
    pub fn summary(self) -> &'static str {
        match self {
            Invariant::OneArrivalPerWorkgroup => {
                "one arrival per workgroup, by an elected lane after a workgroup barrier"
            }
            Invariant::LdsIsWorkgroupLocal => {
                "LDS is workgroup-local; cross-workgroup data goes through global memory"
            }
            Invariant::PeerFlagHandshake => {
                "peer data is read only after acquiring the peer's flag for this epoch"
            }
            Invariant::MonotonicEpochs => {
                "epoch counters only grow; nothing is reset inside the kernel"
            }
            Invariant::OnePeerOrder => "peer slot = peer rank, the same rule on host and device",
            Invariant::NoOverwriteOfShared => {
                "no buffer another workgroup or rank may still read is overwritten"
            }
            Invariant::UniformBarriers => "barrier in uniform control flow; tails are masked",
            Invariant::CoResidentGrid => {
                "all workgroups co-resident (checked by the runtime before launch)"
            }
            Invariant::BoundedSpin => {
                "bounded spin; a timeout sets the error word instead of hanging"
            }
            Invariant::ScratchInitialised => {
                "scratch is initialised by this launch or epoch-stamped"
            }
            Invariant::NoPeerRmw => "no read-modify-write on peer memory; flags in uncached memory",
        }
    }
}

/// The array a memory access addresses.
#[derive(Clone, Debug, PartialEq)]
pub enum Base {
    /// An array parameter of the executing rank.
    Param(Param),
    /// Entry `rank` of a [`ParamKind::PeerArrays`](super::ParamKind::PeerArrays) parameter: that
    /// rank's array (the executing rank's own when `rank` is its rank).
    Peer {
        /// The peer-arrays parameter.
        param: Param,
        /// The peer's rank (u32).
        rank: Expr,
    },
    /// A workgroup-local array.
    Lds(Lds),
}

/// An element of an array: `base[index]` (index in elements, u32).
#[derive(Clone, Debug, PartialEq)]
pub struct MemRef {
    /// The array.
    pub base: Base,
    /// Element index.
    pub index: Expr,
}

/// Atomic operations.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Atomic load into `dst`.
    Load,
    /// Atomic store of `value`.
    Store,
    /// Fetch-and-add of `value`; the old value into `dst` if given.
    Add,
    /// Fetch-and-max of `value`.
    Max,
}

/// Wave-wide reductions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Sum (f32).
    Sum,
    /// Maximum.
    Max,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `dst = value`.
    Assign {
        /// Destination.
        dst: Reg,
        /// Value.
        value: Expr,
    },
    /// Plain load of `dst.len()` consecutive elements (the vector width) starting at `mem`.
    Load {
        /// One register per element.
        dst: Vec<Reg>,
        /// First element.
        mem: MemRef,
    },
    /// Plain store of `values.len()` consecutive elements starting at `mem`.
    Store {
        /// First element.
        mem: MemRef,
        /// One value per element.
        values: Vec<Expr>,
    },
    /// A hint, no access: bring the cache line holding `mem` (a global array's element) into the
    /// L2 cache (sm_90 `prefetch.global.L2`). It reads no value and orders nothing, so it upholds
    /// no invariant and needs none; gfx906 has no such instruction (the HIP writer emits nothing).
    /// Used before a grid barrier for the next GEMV stage's weights, which do not depend on it
    /// ([`Schedule::prefetch_next_stage`](crate::lower::Schedule::prefetch_next_stage)).
    PrefetchL2 {
        /// An element of the line.
        mem: MemRef,
    },
    /// An asynchronous copy by the executing lane of `words` 32-bit words (1, 2 or 4: 4, 8 or 16
    /// bytes, aligned to their size) of consecutive elements from a global array of this rank into
    /// an LDS array, both of one 16-bit type or both of 32-bit types (bits are copied: a u32
    /// word may land in an f32 array) (sm_80 and later: `cp.async`). The copy joins the lane's open group
    /// ([`Stmt::AsyncCommit`] closes it); its LDS words are written at some point before the
    /// [`Stmt::AsyncWait`] that completes the group, so until then no lane may read or write
    /// them, and after it only the copying lane may read them until a workgroup barrier orders
    /// the copy before other lanes' accesses (§5.2). The source is read asynchronously too: it
    /// must not be written during the launch (the lowering copies only read-only weights). The
    /// HIP writer and the LLVM back end copy synchronously (a load and a store), which is one of
    /// the executions these rules allow.
    AsyncCopy {
        /// First LDS element written.
        dst: MemRef,
        /// First global element read.
        src: MemRef,
        /// 32-bit words copied (1, 2 or 4).
        words: u32,
    },
    /// Close the executing lane's open group of [`Stmt::AsyncCopy`]s (an empty group if it has
    /// none): `cp.async.commit_group`.
    AsyncCommit,
    /// Wait until at most `pending` of the executing lane's committed groups are incomplete
    /// (`cp.async.wait_group pending`): the copies of all older groups are in LDS and readable
    /// by this lane (§5.2: by others after a workgroup barrier).
    AsyncWait {
        /// Most recent groups that may still be in flight.
        pending: u32,
    },
    /// Where a kernel with [`Schedule::prefetch_before_wait`](crate::lower::Schedule::prefetch_before_wait)
    /// waits for its stream predecessor and then lets its own successor be scheduled (sm_90:
    /// `griddepcontrol.wait; griddepcontrol.launch_dependents;`), instead of the writer's
    /// default prologue (the wait first, the signal last). §5.7 across launches: nothing before
    /// it reads or writes a value — the validator admits it once, at the top level of the body,
    /// after L2 prefetches only (and the loops and index arithmetic around them). The simulator,
    /// the HIP writer and the LLVM back end have no stream predecessor to wait for: nothing.
    StreamWait,
    /// `for (var = start; var < end; var += step) body` (u32).
    For {
        /// Induction register.
        var: Reg,
        /// First value.
        start: Expr,
        /// Exclusive bound.
        end: Expr,
        /// Positive step.
        step: Expr,
        /// Loop body.
        body: Block,
    },
    /// `if (cond) then_body else else_body`.
    If {
        /// Condition (Bool).
        cond: Expr,
        /// Taken when true.
        then_body: Block,
        /// Taken when false.
        else_body: Block,
    },
    /// All lanes of the workgroup wait here; orders their LDS and global accesses at workgroup
    /// scope. Must be reached in uniform control flow (§5.8).
    WorkgroupBarrier,
    /// An atomic access with an explicit ordering and scope.
    Atomic {
        /// Old value (Add, Max) or loaded value (Load).
        dst: Option<Reg>,
        /// Operation.
        op: AtomicOp,
        /// Location.
        mem: MemRef,
        /// Operand (Store, Add, Max).
        value: Option<Expr>,
        /// Memory ordering.
        ordering: Ordering,
        /// Scope.
        scope: Scope,
        /// The invariant this access upholds.
        why: Invariant,
    },
    /// A fence.
    Fence {
        /// Memory ordering.
        ordering: Ordering,
        /// Scope.
        scope: Scope,
        /// The invariant this fence upholds.
        why: Invariant,
    },
    /// Bounded spin: atomically load `mem` (with `ordering`, `scope`) until
    /// `(i32)(value − target) >= 0` (wrap-safe) or `budget` loads have been made; on timeout,
    /// atomically store `code` into `error` (relaxed, system scope) and continue.
    WaitGe {
        /// The counter or flag.
        mem: MemRef,
        /// Value to reach (u32).
        target: Expr,
        /// Ordering of each load (acquire).
        ordering: Ordering,
        /// Scope of each load.
        scope: Scope,
        /// Maximum number of loads.
        budget: u32,
        /// The error word.
        error: MemRef,
        /// Code written on timeout (identifies the wait site).
        code: u32,
        /// The invariant this wait upholds.
        why: Invariant,
    },
    /// Warp-wide FP16 matrix multiply-accumulate with f32 accumulation, `acc += A·B` for a
    /// 16×16 A, a 16×8 B and a 16×8 accumulator D, each spread over the 32 lanes in the fragment
    /// layout of PTX's `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (sm_80 and later):
    /// lane `l` (group `g = l / 4`, `t = l % 4`) holds the packed FP16 pairs (low half first)
    /// `a = [(A[g][2t], A[g][2t+1]), (A[g+8][2t], A[g+8][2t+1]), (A[g][2t+8], A[g][2t+9]),
    /// (A[g+8][2t+8], A[g+8][2t+9])]`, `b = [(B[2t][g], B[2t+1][g]), (B[2t+8][g], B[2t+9][g])]`
    /// and `acc = [D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]]`. FP16 products are exact in
    /// f32. Every lane of the wave executes it (wave-uniform control flow, like a reduction).
    MmaF16 {
        /// The accumulator fragment (f32), read and written.
        acc: [Reg; 4],
        /// The A fragment (u32, packed FP16 pairs).
        a: [Reg; 4],
        /// The B fragment (u32, packed FP16 pairs).
        b: [Reg; 2],
    },
    /// Reduce `value` over the lanes of the wave; every lane receives the result in `dst`.
    WaveReduce {
        /// Result.
        dst: Reg,
        /// Operator.
        op: ReduceKind,
        /// Per-lane operand.
        value: Expr,
    },
    /// Grid barrier number `index` of this launch over the rank's workgroups, on a monotonic
    /// counter. Expanded by [`expand_sync`](super::expand::expand_sync).
    GridBarrier {
        /// The counter (u32, agent-visible, never reset).
        counter: MemRef,
        /// Which barrier of the launch (0-based).
        index: u32,
    },
    /// Release-store this launch's value of flag round `round` into `flag` (system scope), after
    /// the workgroup's writes. Expanded by [`expand_sync`](super::expand::expand_sync).
    PublishFlag {
        /// The executing rank's flag slot.
        flag: MemRef,
        /// Which flag round of the launch (0-based).
        round: u32,
    },
    /// Wait (acquire, system scope, bounded) until `flag` holds this launch's value of `round`;
    /// the whole workgroup may then read what the flag's owner published. Expanded by
    /// [`expand_sync`](super::expand::expand_sync).
    WaitFlag {
        /// A peer's flag slot.
        flag: MemRef,
        /// Which flag round of the launch (0-based).
        round: u32,
    },
    /// Several flag waits at once, one per lane: every lane `l < lanes` for which `cond` holds
    /// waits (acquire, system scope, bounded) until `flag` — whose index and peer rank may use
    /// `local_id` — holds this launch's value of `round`; then a workgroup barrier hands what
    /// they acquired to the whole workgroup. The waits poll in parallel (no lane waits for
    /// another's flag), where [`Stmt::WaitFlag`] would wait for one peer after the other.
    /// Expanded by [`expand_sync`](super::expand::expand_sync).
    WaitFlagPerLane {
        /// The flag slot lane `local_id` waits on.
        flag: MemRef,
        /// Lanes `0 .. lanes` may wait (at most one wave).
        lanes: u32,
        /// Which of them do (Bool; may use `local_id`).
        cond: Expr,
        /// Which flag round of the launch (0-based).
        round: u32,
    },
    /// A comment for readers of the generated code.
    Comment(String),
    /// An instruction-scheduling boundary for the target compiler: it may not move instructions
    /// across this point. No effect on values, memory or lanes (the simulator and the LLVM back
    /// end ignore it). The INT4 dot2 path puts one after a unit's weight loads, so that they are
    /// all issued before the unit's arithmetic: hipcc otherwise interleaves them with it to save
    /// registers, leaving one or two 16-byte loads in flight per wave instead of the unit's.
    SchedBarrier,
}
