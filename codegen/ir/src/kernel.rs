//! The kernel: buffers, values and ops in primary maps, in program order.

use std::fmt;
use std::sync::Arc;

use cranelift_entity::PrimaryMap;

use crate::buffer::{BufferData, Role};
use crate::entities::{Buffer, Op, Value};
use crate::ops::OpKind;

/// Where a value comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ValueDef {
    /// The defining op.
    pub op: Op,
    /// Which of its results.
    pub index: u32,
}

/// Where an op was written: the DSL token of a `kernel!` statement, or a line of a `.wfir` file.
/// Errors about the op (validation, lowering refusals) point there as `file:line:column`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    /// The source file (as `file!()` or the caller of [`parse_named`](crate::parse_named) names
    /// it).
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// An op and the values it defines.
#[derive(Clone, Debug)]
pub struct OpData {
    /// What the op does.
    pub kind: OpKind,
    /// The values it defines, in result order.
    pub results: Vec<Value>,
    /// Where it was written, when known. Not part of the op: two kernels that differ only in
    /// where their ops were written are equal (a kernel printed and parsed back is the kernel).
    pub loc: Option<SourceLoc>,
}

impl PartialEq for OpData {
    fn eq(&self, other: &OpData) -> bool {
        self.kind == other.kind && self.results == other.results
    }
}

/// A kernel of the op level: one launch per rank of a TP group of `tp` ranks. Build one with a
/// [`Builder`](crate::Builder); check it with [`validate`](crate::validate).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub(crate) name: String,
    pub(crate) tp: u32,
    pub(crate) buffers: PrimaryMap<Buffer, BufferData>,
    pub(crate) values: PrimaryMap<Value, ValueDef>,
    pub(crate) ops: PrimaryMap<Op, OpData>,
}

impl Kernel {
    /// Where op `op` was written, when known.
    pub fn loc(&self, op: Op) -> Option<&SourceLoc> {
        self.ops.get(op).and_then(|d| d.loc.as_ref())
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ranks in the TP group.
    pub fn tp(&self) -> u32 {
        self.tp
    }

    /// All buffers, in declaration order.
    pub fn buffers(&self) -> impl ExactSizeIterator<Item = (Buffer, &BufferData)> {
        self.buffers.iter()
    }

    /// A buffer's declaration, if it belongs to this kernel.
    pub fn buffer(&self, b: Buffer) -> Option<&BufferData> {
        self.buffers.get(b)
    }

    /// The buffer with this name.
    pub fn buffer_by_name(&self, name: &str) -> Option<Buffer> {
        self.buffers
            .iter()
            .find(|(_, d)| d.name == name)
            .map(|(b, _)| b)
    }

    /// Input buffers in declaration order.
    pub fn inputs(&self) -> impl Iterator<Item = Buffer> + '_ {
        self.buffers
            .iter()
            .filter(|(_, d)| d.role == Role::Input)
            .map(|(b, _)| b)
    }

    /// Output buffers in declaration order.
    pub fn outputs(&self) -> impl Iterator<Item = Buffer> + '_ {
        self.buffers
            .iter()
            .filter(|(_, d)| d.role == Role::Output)
            .map(|(b, _)| b)
    }

    /// All ops, in program order.
    pub fn ops(&self) -> impl ExactSizeIterator<Item = (Op, &OpData)> {
        self.ops.iter()
    }

    /// An op, if it belongs to this kernel.
    pub fn op(&self, op: Op) -> Option<&OpData> {
        self.ops.get(op)
    }

    /// Where a value is defined, if it belongs to this kernel.
    pub fn value_def(&self, v: Value) -> Option<ValueDef> {
        self.values.get(v).copied()
    }

    /// Number of values.
    pub fn num_values(&self) -> usize {
        self.values.len()
    }
}
