//! The builder: the only way to construct a [`Kernel`].
//!
//! The builder records what it is told and checks nothing; [`validate`](crate::validate) is the one
//! gate. That keeps the builder usable for hand-built invalid IR in tests and lets the DSL report
//! every error of a kernel at once.

use crate::buffer::{BufferData, BufferType, Role};
use crate::entities::{Buffer, Op, Value};
use std::sync::Arc;

use crate::kernel::{Kernel, OpData, SourceLoc, ValueDef};
use crate::ops::*;
use crate::types::{IndexSpace, MemorySpace, Sharding};

/// Builds one kernel, op by op, in program order.
#[derive(Debug)]
pub struct Builder {
    kernel: Kernel,
    /// Where the ops pushed from now on were written ([`Builder::located`]).
    loc: Option<SourceLoc>,
}

/// A full buffer declaration, for parameters that need a non-default memory or index space.
#[derive(Clone, Debug)]
pub struct BufferDecl {
    data: BufferData,
}

impl BufferDecl {
    /// An input in global memory whose shape is the per-rank shard.
    pub fn input(name: &str, ty: impl Into<BufferType>, sharding: Sharding) -> Self {
        Self::new(name, ty.into(), sharding, Role::Input)
    }

    /// An output in global memory whose shape is the per-rank shard.
    pub fn output(name: &str, ty: impl Into<BufferType>, sharding: Sharding) -> Self {
        Self::new(name, ty.into(), sharding, Role::Output)
    }

    fn new(name: &str, ty: BufferType, sharding: Sharding, role: Role) -> Self {
        let data = BufferData {
            name: name.to_owned(),
            ty,
            space: MemorySpace::Global,
            index_space: IndexSpace::Local,
            sharding,
            role,
        };
        BufferDecl { data }
    }

    /// Set the memory space.
    pub fn space(mut self, space: MemorySpace) -> Self {
        self.data.space = space;
        self
    }

    /// Set the index space in which the shape is given.
    pub fn index_space(mut self, index_space: IndexSpace) -> Self {
        self.data.index_space = index_space;
        self
    }
}

impl Builder {
    /// Start a kernel for a TP group of `tp` ranks (1 for no tensor parallelism).
    pub fn new(name: &str, tp: u32) -> Self {
        let kernel = Kernel {
            name: name.to_owned(),
            tp,
            buffers: Default::default(),
            values: Default::default(),
            ops: Default::default(),
        };
        Builder { kernel, loc: None }
    }

    /// Declare a parameter.
    pub fn param(&mut self, decl: BufferDecl) -> Buffer {
        self.kernel.buffers.push(decl.data)
    }

    /// Declare an input in global memory, shape given per rank.
    pub fn input(&mut self, name: &str, ty: impl Into<BufferType>, sharding: Sharding) -> Buffer {
        self.param(BufferDecl::input(name, ty, sharding))
    }

    /// Declare an output in global memory, shape given per rank.
    pub fn output(&mut self, name: &str, ty: impl Into<BufferType>, sharding: Sharding) -> Buffer {
        self.param(BufferDecl::output(name, ty, sharding))
    }

    /// The ops pushed from now on were written at `file:line:column` (the `kernel!` macro calls
    /// this before each statement with the statement's token; a parser with the line).
    pub fn located(&mut self, file: &str, line: u32, column: u32) {
        let file: Arc<str> = match &self.loc {
            Some(l) if &*l.file == file => l.file.clone(),
            _ => file.into(),
        };
        self.loc = Some(SourceLoc { file, line, column });
    }

    /// The ops pushed from now on were written at `loc` (none: unknown) — for passes that
    /// rebuild a kernel from another's ops and keep where they were written.
    pub fn at(&mut self, loc: Option<SourceLoc>) {
        self.loc = loc;
    }

    /// The TP group size given to [`Builder::new`].
    pub fn tp(&self) -> u32 {
        self.kernel.tp
    }

    fn push(&mut self, kind: OpKind) -> Vec<Value> {
        let op = self.kernel.ops.next_key();
        let results: Vec<Value> = (0..kind.num_results() as u32)
            .map(|index| self.kernel.values.push(ValueDef { op, index }))
            .collect();
        let pushed: Op = self.kernel.ops.push(OpData {
            kind,
            results: results.clone(),
            loc: self.loc.clone(),
        });
        debug_assert_eq!(pushed, op);
        results
    }

    fn push1(&mut self, kind: OpKind) -> Value {
        self.push(kind)[0]
    }

    /// `load buffer`.
    pub fn load(&mut self, buffer: Buffer) -> Value {
        self.push1(OpKind::Load(Load { buffer }))
    }

    /// `store value, buffer`.
    pub fn store(&mut self, value: Value, buffer: Buffer) {
        self.push(OpKind::Store(Store { value, buffer }));
    }

    /// `gemv.MODE weight, x`.
    pub fn gemv(&mut self, weight: Buffer, x: Value, parallel: Parallelism) -> Value {
        self.push1(OpKind::Gemv(Gemv {
            weight,
            x,
            parallel,
        }))
    }

    /// `gemv_q8.MODE weight, codes, scales, block`: an INT4 GEMV of q8 activations.
    pub fn gemv_q8(
        &mut self,
        weight: Buffer,
        (codes, scales): (Value, Value),
        block: usize,
        parallel: Parallelism,
    ) -> Value {
        self.push1(OpKind::GemvQ8(GemvQ8 {
            weight,
            codes,
            scales,
            block,
            parallel,
        }))
    }

    /// `add a, b`.
    pub fn add(&mut self, a: Value, b: Value) -> Value {
        self.push1(OpKind::Binary(Binary {
            op: BinaryOp::Add,
            a,
            b,
        }))
    }

    /// `mul a, b`.
    pub fn mul(&mut self, a: Value, b: Value) -> Value {
        self.push1(OpKind::Binary(Binary {
            op: BinaryOp::Mul,
            a,
            b,
        }))
    }

    /// `silu x`.
    pub fn silu(&mut self, x: Value) -> Value {
        self.push1(OpKind::Unary(Unary {
            op: UnaryOp::Silu,
            x,
        }))
    }

    /// `round_f16 x`: an explicit FP16 rounding point.
    pub fn round_f16(&mut self, x: Value) -> Value {
        self.push1(OpKind::RoundF16(RoundF16 { x }))
    }

    /// `slice x, start, len`.
    pub fn slice(&mut self, x: Value, start: usize, len: usize) -> Value {
        self.push1(OpKind::Slice(Slice { x, start, len }))
    }

    /// `rmsnorm x, weight, eps`.
    pub fn rmsnorm(&mut self, x: Value, weight: Value, eps: f64) -> Value {
        self.push1(OpKind::RmsNorm(RmsNorm { x, weight, eps }))
    }

    /// `reduce.OP x`.
    pub fn reduce(&mut self, op: ReduceOp, x: Value) -> Value {
        self.push1(OpKind::Reduce(Reduce { op, x }))
    }

    /// `allreduce x` over the kernel's TP group.
    pub fn allreduce(&mut self, x: Value) -> Value {
        let tp = self.kernel.tp;
        self.push1(OpKind::AllReduce(AllReduce {
            x,
            tp,
            compression: Compression::None,
        }))
    }

    /// `allreduce.int8 x, block` over the kernel's TP group.
    pub fn allreduce_int8(&mut self, x: Value, block: usize) -> Value {
        let tp = self.kernel.tp;
        let compression = Compression::Int8 { block };
        self.push1(OpKind::AllReduce(AllReduce { x, tp, compression }))
    }

    /// An op given in full (for hand-built IR, e.g. an allreduce over another group).
    pub fn op(&mut self, kind: OpKind) -> Vec<Value> {
        self.push(kind)
    }

    /// `codes, scales = quantize_int8 x, block`.
    pub fn quantize_int8(&mut self, x: Value, block: usize) -> (Value, Value) {
        let r = self.push(OpKind::QuantizeInt8(QuantizeInt8 { x, block }));
        (r[0], r[1])
    }

    /// `codes, scales = quantize_int8.rne x, block, clamp`: q8 activations, round half to even.
    pub fn quantize_rne(&mut self, x: Value, block: usize, clamp: usize) -> (Value, Value) {
        let r = self.push(OpKind::QuantizeRne(QuantizeRne { x, block, clamp }));
        (r[0], r[1])
    }

    /// `dequantize_int8 codes, scales, block`.
    pub fn dequantize_int8(&mut self, codes: Value, scales: Value, block: usize) -> Value {
        self.push1(OpKind::DequantizeInt8(DequantizeInt8 {
            codes,
            scales,
            block,
        }))
    }

    /// Finish building. The kernel is not validated: call [`validate`](crate::validate).
    pub fn finish(self) -> Kernel {
        self.kernel
    }
}
