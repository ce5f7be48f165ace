//! Lowering from the op level to the lowered level: one rank's kernel, the same code on every
//! rank (the rank is a scalar parameter with [`Purpose::Rank`](crate::lowered::Purpose::Rank)).
//!
//! # Passes
//! 0. *Stages* (`stages.rs`): cut the kernel in front of every GEMV whose activation is computed
//!    from GEMV or allreduce results into GEMV stages, the activation (and any other value a
//!    later stage reads) written once to global scratch and read after a grid barrier; each
//!    stage is planned and lowered as below, into
//!    one kernel (its grid the largest stage's; see that module for the barrier's §5 argument).
//! 1. *Plan* (`plan.rs`): validate the op-level kernel (stage) and recognise its shape — at most
//!    one group of GEMVs sharing an activation (a loaded input or a *prologue* computed from
//!    loaded inputs), at most one allreduce, at most one RMSNorm, elementwise ops, slices and
//!    stores around them — and give each value a column *view* and a *phase*.
//! 2. *Structured lowering* ([`lower_structured`]): emit the body with grid barriers and flags
//!    still as [`Stmt::GridBarrier`](crate::lowered::Stmt::GridBarrier) /
//!    `PublishFlag` / `WaitFlag`. The result passes [`validate`].
//! 3. *Sync expansion* ([`expand_sync`]): elected, epoch-stamped, bounded primitives. [`lower`]
//!    runs all three and validates again.
//!
//! # The kernels it produces
//! Workgroup `w` owns the root columns `[w·C, w·C + C)` (the GEMV's N, or the allreduced vector's
//! features) for every batch row; the grid is `ceil(N / C)` workgroups. The body is a sequence of
//! stages, each ending where a synchronisation is needed:
//! - **GEMV prologue** (if the GEMVs' activation is computed in the kernel; `prologue.rs`): every
//!   workgroup recomputes the activation `h [B, K]` from the loaded inputs (`round_f16(x + r)`,
//!   `round_f16(silu(g)·u)`, `round_f16(rmsnorm(x, w))`), with the IR's roundings exactly, and
//!   writes it to LDS — into the GEMV's own LDS activation stage (`x_in_lds`, the default with a
//!   prologue on both targets; only the workgroup's K part) or, for the paths that read the
//!   activations per lane, a plain `[B, K]` FP16 array the GEMV reads instead of global memory —
//!   then a workgroup barrier (§5.2). An RMSNorm there is workgroup-local: the sum of squares
//!   over K per batch row (lane `l` takes `k ≡ l` modulo the workgroup, wave reduction, the
//!   waves' partials through LDS behind a workgroup barrier, added by every lane in wave order), so
//!   every workgroup gets a bit-identical `1/rms` with no grid barrier. The activation must fit
//!   one workgroup's static LDS ([`Arch::max_static_lds_per_workgroup`]) next to the GEMV's
//!   reduction arrays; otherwise [`LowerError::Schedule`] says how many bytes and up to which
//!   batch it fits.
//!
//!   *The cost rule* (issue #18): an activation computed in the kernel can be recomputed by every
//!   workgroup (a prologue: it re-reads its inputs, `bytes(inputs) × workgroups` from L2, and needs
//!   no synchronisation beyond the workgroup) or materialised once in global memory behind a grid
//!   barrier (one read of the inputs, but a grid barrier, co-residency of the whole grid (§5.9)
//!   and a second stage). The rule is to choose by bytes re-read × workgroups against the cost of
//!   one grid barrier, overridable in the [`Schedule`]. Only the prologue is implemented (there is
//!   no such schedule field yet). What it costs, counted from the generated code (not measured):
//!   at the TP = 4 FFN shape (K = 5120, batch 1, `rmsnorm_gate_up_silu`) a workgroup reads `x`
//!   once for the sum of squares (10 KB) and `x` and the norm weight for its K part of `h` — on
//!   gfx906 136 workgroups, 30 KB each next to 164 KB of packed weights; on sm_90 544 split-K
//!   workgroups, 15 KB each next to 41 KB of weights — all of it from L2 (the inputs are 20 KB in
//!   all), against a grid barrier and a co-resident grid for the alternative. An activation that
//!   depends on a GEMV or an allreduce cannot be a prologue and is materialised: a new GEMV stage
//!   (`stages.rs`). One that does not fit LDS is refused.
//! - **GEMV** (if any). GPTQ INT4 (`qweight` `[K/8, N]`, DESIGN.md §2): lane `l` reads the words
//!   of columns `w·C + (l mod C/v)·v ..+v` (`v` = words per iteration) of one K-row, so adjacent
//!   lanes read adjacent words (coalesced); the `T = workgroup / (C/v)` rows of lanes split K by
//!   whole groups (slice `s` takes groups `s, s + T, …`), loading each group's scales and zero
//!   points once. FP16 (`[N, K]` row-major): `T` lanes (a multiple of the wave) per column read
//!   consecutive 16-byte runs of one row. Accumulation is f32 with `accumulators` independent
//!   chains; columns past N are masked with `if`, never returned from (§5.8).
//! - **Two-level reduction**: INT4 lanes of one slice already hold whole per-column sums, so each
//!   slice writes them to LDS; FP16 lanes first reduce in the wave ([`ReduceKind::Sum`](crate::lowered::ReduceKind::Sum)), lane 0 of
//!   each wave writes to LDS. After a workgroup barrier every point adds the `T` partials in slice
//!   order (deterministic).
//! - **Elementwise stages**: lane `l` walks points (batch row, column `l·p + j`) of the tile,
//!   evaluates the op-level values of the stage there (silu, mul, add, slices to several outputs,
//!   one FP16 rounding where the IR has `round_f16`) and stores.
//! - **Allreduce** (if any; see below), then a post-allreduce elementwise stage.
//! - **RMSNorm** (if any): the stage before it stashes the norm's input per point in LDS; each
//!   workgroup reduces its tile's sum of squares per batch row (wave reduction, then LDS), lane 0
//!   writes it to a global `norm_partials[tile]` (never LDS, §5.2), a grid barrier on a
//!   `grid_counter` ([`Purpose::Counter`](crate::lowered::Purpose::Counter)) follows, and every
//!   workgroup then adds all partials in the same fixed order, so every workgroup (and every
//!   rank) gets the same `1/rms`. Kernels with a grid barrier need all their workgroups resident:
//!   [`expand_sync`] records it in `coresidency` (§5.9). `norm_partials` is written before and read
//!   after the barrier of the same launch, and a rank's launches run in stream order, so it needs
//!   no epoch stamp (§5.11).
//!
//! # Dequantisation (GPTQ)
//! Per group and column: `s = f32(scales[g, n])`, `z = bfe(qzeros[g, n/8], 4·(n mod 8), 4)` (+1
//! for GPTQ v1; 8 for symmetric weights), `nzs = −(f32(z)·s)`. Per K-row word and nibble `i`:
//! `w = fma(f32(bfe(word, 4i, 4)), s, nzs)` then `acc = fma(w, f32(x), acc)`: a bfe, a u32→f32
//! convert and two FMAs per weight and batch row. `q·s` and `z·s` are exact in f32 (an 11-bit
//! mantissa times a 5-bit integer), so `w` is exactly `(q − z)·s`. On gfx906 the writer may emit
//! `v_bfe_u32`, `v_cvt_f32_u32`, `v_fma_f32` and `v_fma_mix_f32` (the FP16 x operand); the
//! v_dot8/v_dot2 variants are not used (future work: they need integer activations or packed
//! FP16 weights).
//!
//! # Allreduce protocol (§5.3, §5.5, §5.12)
//! [`AllreduceProtocol::Pull`] (default): the workgroup of tile `t` (with split-K: the tile's
//! last arriver) of every rank writes the allreduce operand for its tile into its own slot of a peer-visible scratch (`ar_payload`, a
//! [`ParamKind::PeerArrays`](crate::lowered::ParamKind::PeerArrays) with
//! [`Purpose::Scratch`](crate::lowered::Purpose::Scratch)), then publishes `ar_flags[t]`
//! (release, system scope, value = epoch); it then waits (acquire, system, bounded) on every
//! peer's `ar_flags[t]` and reads the peers' slices of its tile, summing all ranks in f32 in
//! ascending rank order (peer slot = rank, [`peer_slot`](crate::lowered::peer_slot)), so
//! replicated results are bit-identical on every rank. Every rank publishes before it waits, so
//! no cycle of waits can form. [`AllreduceProtocol::Push`]: each rank writes its slice into its
//! slot of every peer's inbox and releases a flag in each peer's memory (a plain atomic store);
//! each rank then polls only its local flags and reads its local inbox (cheap over PCIe). Neither
//! protocol performs a read-modify-write on peer memory. For the allreduce kernels whose operand
//! is an input buffer, the operand is copied into the scratch (10 KB of local writes) rather than
//! registering the input itself as a peer array: that keeps the reuse argument below entirely
//! inside this kernel's own epochs, instead of depending on when the engine overwrites its input.
//! With one rank a plain allreduce is the identity and emits nothing.
//!
//! **Reuse across launches.** The scratch is double-buffered by epoch parity (`2 × len`, half
//! `epoch & 1`). Rank A's launch e+1 writes the other half, so it cannot disturb a slow rank B
//! still reading A's launch-e data. A's launch e+2 writes the same half again, but only after
//! A's launch e+1 completed, and every workgroup of that launch acquired B's flag of epoch e+1;
//! B releases that flag only in its launch e+1, which starts after B's launch e (and all its reads
//! of A's half) finished. The same holds per peer and in the push variant (A's e+1 acquired, in
//! its own memory, the flag B pushed during B's e+1).
//!
//! **INT8 compression** (`allreduce.int8`): the operand is quantised per batch row and block
//! (one wave covers one block: `s = wave_max(|x|) / 127`, `q = clamp(round_half_away(x/s), ±127)`
//! computed exactly via `trunc` and the exact fraction), codes (`ar_codes`, i8) and scales
//! (`ar_scales`, f32) are exchanged by the same protocol, and every rank sums `f32(q)·s` in rank
//! order. With one rank the round trip still happens (the IR says so: the output is the
//! dequantised code, one INT8 rounding), but in each lane's registers: the lane that quantises a
//! point finishes it (`Lowering::allreduce_in_registers`), with no scratch, flag or barrier — as
//! the hand-written kernel does (1.25× faster than the scratch round trip in
//! `bench/results/2026-11-29-h200-ab-4/`).
//!
//! # q8 activations
//! `gemv_q8` of `quantize_int8.rne x` (a loaded FP16 input): every workgroup quantises its K part
//! into LDS and sums the integer products with `v_dot4_i32_i8` / `dp4a`; see `gemv/q8.rs`.
//!
//! # Unsupported (returned as [`LowerError::Unsupported`], never a panic)
//! AWQ weights, GPTQ act-order (`g_idx`), non-FP16 scales, bf16 data, `k_split > 1` for FP16
//! GEMVs or kernels without a GEMV (split-K: `splitk.rs`), reductions and (de)quantisation ops outside an
//! allreduce, more than one allreduce or norm per GEMV stage (plus at most one norm in a GEMV
//! prologue), GEMVs with different activations or shapes in one stage (unless one's activation
//! is computed from the other's results: then they are two stages), a norm or allreduce over
//! a column slice, and ops that combine different column ranges. Between GEMV stages: a GEMV
//! depending on GEMV results that do not lead to the next stage's activation. GEMV activations
//! computed in the kernel that are not a prologue nor a stage: depending
//! on `reduce` or INT8 (de)quantisation, with a slice inside, with K not a multiple of 8, a prologue value used by anything but the
//! prologue and the GEMVs (a store of the activation, an epilogue reading it), and a prologue norm
//! whose weight is not a loaded input. An activation that does not fit LDS is a
//! [`LowerError::Schedule`] with the numbers.

mod build;
pub mod defaults;
pub mod fit;
mod gemv;
mod lds_fit;
mod limits;
mod lowering;
mod plan;
mod point;
mod prologue;
mod schedule;
mod splitk;
mod stages;
mod sync;

pub use fit::{
    CoResidency, FitError, FitReport, Fitted, Origin, Override, ScheduleInputs, ScheduleSource, fit,
};
pub use limits::{MAX_INDEXED_ELEMENTS, MAX_OP_DEPTH};
pub use schedule::{
    AllreduceProtocol, Int4Dot, Int4Scaling, MAX_ACCUMULATORS, MAX_ASYNC_STAGES,
    MAX_COLUMNS_PER_LANE, MAX_K_SPLIT, MAX_K_UNIT_WORDS, MAX_L2_PREFETCH_UNITS, MAX_PIPELINE_DEPTH,
    MAX_STRIPE_WORKGROUPS, MmaDecode, MmaScale, NibbleDecode, Reduction, Schedule,
    assumed_waves_per_simd, batch_of, prologue_input_bytes,
};
pub use stages::PREFETCH_BEFORE_WAIT_BYTES;

use thiserror::Error;
use wavefuse_ir::{Kernel, ValidationError};

use crate::lowered::expand::expand_sync;
use crate::lowered::validate::{LoweredError, validate};
use crate::lowered::{LoweredInfo, LoweredKernel, NotCoResident, Occupancy};
use crate::target::Arch;

/// Why a kernel could not be lowered.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LowerError {
    /// The op-level kernel is not valid.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// An op pattern this lowering does not support (yet).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The schedule does not fit the kernel or the target.
    #[error("schedule: {0}")]
    Schedule(String),
    /// A device array of one rank has more elements than the generated code's 32-bit indices
    /// reach ([`MAX_INDEXED_ELEMENTS`]): its indices would wrap and the kernel would silently
    /// read and write the wrong elements.
    #[error(
        "buffer `{buffer}`: its {array} array has {elements} elements per rank, more than the generated code's 32-bit indices reach (at most {limit} elements); shard it over more ranks or split it"
    )]
    IndexWidth {
        /// The op-level buffer.
        buffer: String,
        /// Which of its device arrays (`data`, `qweight`, `scales`, `qzeros`, `g_idx`), or
        /// `scratch` for an array the lowering adds (`buffer` is then the parameter's name).
        array: &'static str,
        /// Its element count on one rank (a decimal number; it may not fit `u64`).
        elements: String,
        /// [`MAX_INDEXED_ELEMENTS`].
        limit: u64,
    },
    /// A chain of ops, each reading the previous one's result, longer than the lowering's
    /// recursion over operands is bounded to ([`MAX_OP_DEPTH`]).
    #[error(
        "{op} ends a chain of {depth} dependent ops, more than the {limit} the lowering accepts; split the kernel"
    )]
    TooDeep {
        /// The op that ends the chain: its source location when known and the value it defines
        /// (`k.wfir:260:5: the op of v256`).
        op: String,
        /// Its chain's length (the op included).
        depth: usize,
        /// [`MAX_OP_DEPTH`].
        limit: usize,
    },
    /// The lowering produced a kernel the lowered validator rejects (a bug in this module).
    #[error("the lowering produced an invalid kernel: {0}")]
    Lowered(#[from] LoweredError),
    /// The kernel has a grid barrier and its grid cannot be resident at once on the target at
    /// any register count (DESIGN.md §5.9): it would never get past the barrier. Fewer
    /// workgroups (wider tiles), or the RMSNorm — the grid barrier — in a kernel of its own.
    #[error(
        "{0}; it needs fewer workgroups: wider tiles (INT4 weights tile many columns per workgroup, FP16 weights one wave per column), or the RMSNorm, whose grid-wide sum is the barrier, in a kernel of its own"
    )]
    NotCoResident(#[from] NotCoResident),
}

/// Lower `kernel` for `arch` with `schedule`, keeping grid barriers and flags as
/// synchronisation objects (the input of [`expand_sync`]).
pub fn lower_structured(
    kernel: &Kernel,
    arch: Arch,
    schedule: &Schedule,
) -> Result<LoweredKernel, LowerError> {
    #[cfg(feature = "lowering-log")]
    log::record(kernel, schedule);
    wavefuse_ir::validate(kernel)?;
    limits::check_index_width(kernel)?;
    limits::check_depth(kernel)?;
    let stages = stages::stage_kernels(kernel, schedule.materialise_prologue)?;
    let k = match stages.as_slice() {
        [_] => {
            let plan = plan::Plan::new(kernel)?;
            lowering::Lowering::new(plan, arch, schedule.clone())?.run()?
        }
        _ => stages::lower_stages(kernel, &stages, arch, schedule)?,
    };
    limits::check_lowered_arrays(&k)?;
    validate(&k)?;
    Ok(k)
}

/// Lower `kernel` to one rank's kernel for `arch`, with only primitive synchronisation.
pub fn lower(
    kernel: &Kernel,
    arch: Arch,
    schedule: &Schedule,
) -> Result<LoweredKernel, LowerError> {
    let k = lower_any_grid(kernel, arch, schedule)?;
    // One rank's grid must fit on its own device at the most any register count allows; the
    // placement's ranks per device and the compiled occupancy are checked where they are known
    // (the schedule policy, the real compiler's resource report, the runtime before launch).
    k.coresident(1, Occupancy::HardwareMax)?;
    Ok(k)
}

/// Whether [`Schedule::materialise_prologue`] makes a difference to `kernel`: it has a GEMV whose
/// activation is computed from loaded inputs (a prologue every workgroup would recompute).
pub fn has_gemv_prologue(kernel: &Kernel) -> bool {
    stages::materialises_a_prologue(kernel)
}

/// [`lower`] without its co-residency refusal: for a schedule search (the co-residency fit,
/// [`fit()`]) that lowers a grid too large to be resident and then tries wider or smaller tiles,
/// checking [`LoweredKernel::coresident`] itself before anything is emitted.
pub fn lower_any_grid(
    kernel: &Kernel,
    arch: Arch,
    schedule: &Schedule,
) -> Result<LoweredKernel, LowerError> {
    lower_validated(kernel, arch, schedule).map(|(k, _)| k)
}

/// [`lower_any_grid`] with the lowered validator's facts about the kernel, which the back ends
/// read ([`crate::cpp::emit_with`]).
pub(crate) fn lower_validated(
    kernel: &Kernel,
    arch: Arch,
    schedule: &Schedule,
) -> Result<(LoweredKernel, LoweredInfo), LowerError> {
    let mut k = lower_structured(kernel, arch, schedule)?;
    expand_sync(&mut k);
    // After the expansion: whether the kernel's workgroups wait for each other (its grid
    // barriers' co-residency) is known only then.
    if schedule.prefetch_before_wait && arch.has_l2_prefetch() && k.stream_order_prologue() {
        stages::prefetch_before_wait(&mut k);
    }
    let info = validate(&k)?;
    Ok((k, info))
}

/// Every lowering made on this thread, for tests that count them (feature `lowering-log`): the
/// pipeline lowers a kernel once per schedule it tries, and the kernel it hands on is the one
/// it fitted, never lowered again.
#[cfg(feature = "lowering-log")]
pub mod log {
    use std::cell::RefCell;

    use wavefuse_ir::Kernel;

    use super::Schedule;

    thread_local! {
        static LOWERED: RefCell<Vec<(String, Schedule)>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn record(kernel: &Kernel, schedule: &Schedule) {
        LOWERED.with(|l| {
            l.borrow_mut()
                .push((kernel.name().to_owned(), schedule.clone()))
        });
    }

    /// The lowerings made on this thread since the last call, oldest first: the kernel's name and
    /// the schedule of each.
    pub fn take() -> Vec<(String, Schedule)> {
        LOWERED.with(|l| std::mem::take(&mut *l.borrow_mut()))
    }
}
