//! The kernel: buffers, values and ops in primary maps, in program order.

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

/// An op and the values it defines.
#[derive(Clone, Debug, PartialEq)]
pub struct OpData {
    /// What the op does.
    pub kind: OpKind,
    /// The values it defines, in result order.
    pub results: Vec<Value>,
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
