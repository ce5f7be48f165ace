//! Validation errors. Every error names the offending entity and says what is wrong in a user's
//! words; errors nest (`Op { op, source }`) so the printer can point at the op.

use thiserror::Error;

use crate::entities::{Buffer, Op, Value};
use crate::kernel::SourceLoc;
use crate::types::{ScalarType, Sharding};
use crate::value::Dist;

/// Why a kernel is not valid.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ValidationError {
    /// A kernel-wide rule is broken.
    #[error("kernel `{kernel}`: {source}")]
    Kernel {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        source: KernelError,
    },
    /// A buffer declaration is wrong.
    #[error("kernel `{kernel}`, {buffer} `{name}`: {source}")]
    Buffer {
        /// Kernel name.
        kernel: String,
        /// The buffer.
        buffer: Buffer,
        /// Its name.
        name: String,
        /// What is wrong.
        source: BufferError,
    },
    /// An op is wrong.
    #[error("{}kernel `{kernel}`, {op} ({mnemonic}): {source}", at_prefix(.at))]
    Op {
        /// Kernel name.
        kernel: String,
        /// The op.
        op: Op,
        /// Its mnemonic in the textual IR.
        mnemonic: &'static str,
        /// Where the op was written, when known (printed first, `file:line:column: `).
        at: Option<SourceLoc>,
        /// What is wrong.
        source: OpError,
    },
}

/// `file:line:column: ` for an op whose source is known.
fn at_prefix(at: &Option<SourceLoc>) -> String {
    at.as_ref().map(|l| format!("{l}: ")).unwrap_or_default()
}

/// Kernel-wide rules.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum KernelError {
    /// The TP group has no ranks.
    #[error("the TP group size must be at least 1")]
    EmptyTpGroup,
    /// An output is never stored.
    #[error("output {buffer} `{name}` is never written; every output must be stored exactly once")]
    OutputNotWritten {
        /// The output.
        buffer: Buffer,
        /// Its name.
        name: String,
    },
    /// The kernel has no outputs.
    #[error("the kernel has no outputs")]
    NoOutputs,
}

/// Buffer declaration rules.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BufferError {
    /// Two buffers share a name.
    #[error("duplicate parameter name (also used by {first})")]
    DuplicateName {
        /// The first buffer with this name.
        first: Buffer,
    },
    /// A kernel parameter cannot live in this space.
    #[error(
        "a kernel parameter cannot live in `{space}`: registers and LDS are private to one \
         workgroup (DESIGN.md §5.2) and peer memory is created by the allreduce lowering; declare \
         it global or host-visible"
    )]
    MemorySpace {
        /// The declared space.
        space: &'static str,
    },
    /// A dimension is zero.
    #[error("{name} is zero")]
    EmptyDim {
        /// Axis index (K = 0, N = 1 for weights).
        axis: usize,
        /// The axis in words.
        name: &'static str,
    },
    /// A weight declared as an output.
    #[error("a weight matrix cannot be an output; declare it as an input")]
    WeightOutput,
    /// A tensor has an unsupported rank.
    #[error("tensors are [features] or [batch, features]; found rank {rank}")]
    Rank {
        /// Its rank.
        rank: usize,
    },
    /// Sharding over a different TP group than the kernel's.
    #[error("sharded over tp={found} but the kernel's TP group has {expected} ranks")]
    TpMismatch {
        /// The kernel's TP size.
        expected: u32,
        /// The buffer's.
        found: u32,
    },
    /// A global dimension does not split evenly.
    #[error("{axis} has length {len}, which does not split evenly over tp={tp}")]
    ShardNotDivisible {
        /// Axis name.
        axis: &'static str,
        /// Global length.
        len: usize,
        /// TP size.
        tp: u32,
    },
    /// A sharding that does not apply to this kind of buffer.
    #[error("{sharding} does not apply to {what}")]
    ShardingKind {
        /// The sharding.
        sharding: Sharding,
        /// What the buffer is.
        what: &'static str,
    },
    /// The packed INT4 layout does not fit the shape.
    #[error("{0}")]
    Packing(String),
    /// The group size does not divide K.
    #[error("{}", if *group == 0 { "the group size must be positive".to_owned() } else { format!("group size {group} does not divide the per-rank K = {k}{hint}") })]
    GroupSize {
        /// Group size.
        group: usize,
        /// Per-rank K.
        k: usize,
        /// Extra advice.
        hint: &'static str,
    },
    /// Scales must be a float type.
    #[error("scales must be f16, bf16 or f32, not {0}")]
    ScaleType(ScalarType),
}

/// Op rules: references, element types, shapes, distributions, buffer roles.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OpError {
    /// A value handle that this kernel did not create.
    #[error("{0} is not defined in this kernel (a handle from another builder?)")]
    UndefinedValue(Value),
    /// A value used before (or by) the op that defines it.
    #[error("{0} is used before it is defined")]
    UseBeforeDef(Value),
    /// A buffer handle that this kernel did not create.
    #[error("{0} is not defined in this kernel (a handle from another builder?)")]
    UndefinedBuffer(Buffer),
    /// Wrong element type.
    #[error("{operand}: expected {expected}, found {found}{hint}")]
    Dtype {
        /// Which operand.
        operand: &'static str,
        /// What was expected, in words.
        expected: &'static str,
        /// What was found.
        found: ScalarType,
        /// Extra advice.
        hint: &'static str,
    },
    /// Wrong shape.
    #[error("{operand}: expected shape {expected:?}, found {found:?}")]
    Shape {
        /// Which operand.
        operand: &'static str,
        /// Expected shape.
        expected: Vec<usize>,
        /// Found shape.
        found: Vec<usize>,
    },
    /// Wrong distribution over ranks.
    #[error("{operand}: expected a {expected} value, found a {} one{hint}", found.name())]
    Dist {
        /// Which operand.
        operand: &'static str,
        /// Expected distribution, in words.
        expected: &'static str,
        /// Found distribution.
        found: Dist,
        /// Extra advice.
        hint: &'static str,
    },
    /// A weight with the wrong sharding for this GEMV.
    #[error("gemv.{parallel} needs a {expected} weight, but `{name}` is {found}")]
    WeightSharding {
        /// The GEMV's parallel mode.
        parallel: &'static str,
        /// Expected sharding, in words.
        expected: &'static str,
        /// The weight's name.
        name: String,
        /// Its sharding.
        found: Sharding,
    },
    /// A store into a weight.
    #[error("`{name}` is a weight matrix; a kernel never writes weights")]
    WeightStored {
        /// The weight's name.
        name: String,
    },
    /// A weight read as a tensor.
    #[error("`{name}` is a weight matrix; only gemv reads weights")]
    WeightLoaded {
        /// The weight's name.
        name: String,
    },
    /// A tensor used as a weight.
    #[error("`{name}` is not a weight matrix")]
    NotAWeight {
        /// The buffer's name.
        name: String,
    },
    /// A store into an input.
    #[error("`{name}` is an input: a kernel never writes its inputs")]
    WriteInput {
        /// The buffer's name.
        name: String,
    },
    /// A load from an output.
    #[error(
        "`{name}` is an output of this launch: other workgroups or ranks may still be writing it \
         (DESIGN.md §5.7); use the value that was stored instead"
    )]
    ReadOutput {
        /// The buffer's name.
        name: String,
    },
    /// A second store into one output.
    #[error("`{name}` is already written by {first}; every output has exactly one producer")]
    SecondWrite {
        /// The buffer's name.
        name: String,
        /// The first store.
        first: Op,
    },
    /// A store whose value does not match the buffer's element type.
    #[error(
        "storing a value of type {found} into the {expected} buffer `{name}`{}",
        if *expected == ScalarType::F16 { ": insert an explicit round_f16 (FP16 stores are rounding points)" } else { "" }
    )]
    StoreType {
        /// The buffer's name.
        name: String,
        /// The buffer's element type.
        expected: ScalarType,
        /// The value's element type.
        found: ScalarType,
    },
    /// A collective over a different group than the kernel's.
    #[error("allreduce over tp={found} in a kernel whose TP group has {expected} ranks")]
    TpMismatch {
        /// The kernel's TP size.
        expected: u32,
        /// The op's.
        found: u32,
    },
    /// Any other bad attribute (eps, block size, slice range).
    #[error("{operand}: {what}")]
    Attribute {
        /// Which attribute.
        operand: &'static str,
        /// What is wrong.
        what: String,
    },
}
