//! # The wavefuse IR
//!
//! A kernel is one launch per rank of a tensor-parallel (TP) group of `tp` ranks. It has
//! *buffers* (its parameters), *values* (SSA tensors) and *ops*, each an entity reference into a
//! `PrimaryMap` ([`Buffer`], [`Value`], [`Op`]). Kernels are made by a [`Builder`] (or read from
//! their textual IR by [`parse`], which uses one) and checked only by [`validate`]; derived facts
//! (value types, use counts, the store that writes each output) come back in side tables of a
//! [`KernelInfo`].
//!
//! ## Evaluation
//! Ops are evaluated in program order (creation order), each on whole tensors: an op reads values
//! defined by earlier ops and defines new ones. How the work is split over workgroups, lanes and
//! ranks, and where the ranks or workgroups must synchronise, is not expressed here: the lowering
//! decides it, and must preserve exactly these semantics. The executable definition is the f64
//! evaluator in [`mod@reference`].
//!
//! ## Precision and rounding points
//! Values typed `f32` are unrounded intermediate results (the reference keeps them in f64; a device
//! computes them in at least FP32). A value becomes `f16` only through `round_f16` (nearest-even),
//! or by loading FP16 memory. Storing into an FP16 buffer requires an `f16` value, so every FP16
//! write, and therefore every FP16 value a later stage re-reads, is a rounding point visible in the
//! IR. Activations into a GEMV are FP16; accumulation is FP32; one rounding per output.
//!
//! ## Sharding
//! Every buffer carries its [`Sharding`] over the TP group and the [`IndexSpace`] its declared shape
//! is in. A weight `[K, N]` is replicated, column-parallel (split along N) or row-parallel (split
//! along K). Values carry a [`Dist`]: replicated, sharded (rank r holds feature slice r) or partial
//! (rank r holds `x_r`, the true value is `Σ_r x_r`). A GEMV's mode must match its weight's sharding
//! (DESIGN.md §5.6): `gemv.col` takes a replicated x and yields a sharded y; `gemv.row` takes the
//! rank's K-shard of x and yields partial sums of all N outputs. Nonlinear ops (silu, rmsnorm,
//! absmax) reject partial values; rmsnorm also rejects sharded ones, as the norm of a shard is not
//! the norm of the vector.
//!
//! ## What an allreduce means
//! `allreduce x` turns a partial value into the replicated value `Σ_r x_r` (summed in at least
//! FP32) on every rank of the kernel's group. The op says what is computed and across which group;
//! the lowering chooses the protocol (publish + flag, or push + local poll) and owes the
//! synchronisation invariants of DESIGN.md §5: every cross-device read follows an acquire of the
//! peer's flag for the current epoch, flags are epoch counters that never reset, and peers are
//! addressed by one rank rule shared by host and device. `allreduce.int8` additionally quantises
//! each rank's payload per block (see [`ops::collective`]).
//!
//! ## Memory semantics
//! Buffers live in an explicit [`MemorySpace`]. Registers and LDS are private to a lane and a
//! workgroup: a value can never cross workgroups through them (DESIGN.md §5.2), which is why op-level
//! parameters must be global or host-visible. The lowered level (see `wavefuse-codegen`) adds atomics
//! and fences, each with an [`Ordering`] (relaxed, acquire, release, acq_rel, seq_cst — C++ meaning)
//! and a [`Scope`] (wave, workgroup, agent = one device, system = all devices and the host). A
//! release at scope S makes this thread's earlier writes visible to any thread in S that performs an
//! acquire reading the released value; nothing weaker carries data between workgroups or ranks.
//! A grid barrier is a workgroup barrier, one release arrival per workgroup on a generation
//! counter, and an acquire wait for the generation's target; a flag is a release store of an epoch
//! that a peer acquires. Neither is ever reset inside a kernel.
//!
//! ## Buffers written by a launch
//! Inputs are read-only. Each output is written by exactly one `store` and never read in the same
//! launch: another workgroup or rank may still be writing it (DESIGN.md §5.7). Ops with two results
//! (a new residual stream and its normalised copy) therefore store to two outputs.

#![deny(missing_docs)]

mod buffer;
mod builder;
mod entities;
mod error;
mod kernel;
pub mod ops;
mod parse;
mod printer;
pub mod reference;
mod types;
mod validate;
mod value;

pub use buffer::{BufferData, BufferType, Role, Tensor, Weight};
pub use builder::{BufferDecl, Builder};
pub use entities::{Buffer, Op, Value};
pub use error::{BufferError, KernelError, OpError, ValidationError};
pub use kernel::{Kernel, OpData, SourceLoc, ValueDef};
pub use ops::{OpKind, Parallelism};
pub use parse::{Found, MAX_ELEMENTS, ParseError, parse, parse_named};
pub use types::{
    AWQ_NIBBLE_ORDER, AwqLayout, GPTQ_NIBBLE_ORDER, GptqLayout, GroupSize, IndexSpace, MemorySpace,
    Ordering, ScalarType, Scope, Sharding, WeightFormat, ZeroPoint, peer_slot,
};
pub use validate::{KernelInfo, validate};
pub use value::{Dist, ValueType};
