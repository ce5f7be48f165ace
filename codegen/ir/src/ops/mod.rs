//! Op-level operations, one family per file. Each family documents its semantics and its typing
//! rule (`infer`), which the validator applies; the f64 reference evaluator implements the same
//! semantics independently in [`crate::reference`].

pub mod collective;
pub mod elementwise;
pub mod linalg;
pub mod memory;
pub mod norm;
pub mod quant;
pub mod reduce;

use crate::buffer::BufferData;
use crate::entities::{Buffer, Value};
use crate::error::OpError;
use crate::value::{Dist, ValueType};

pub use collective::{AllReduce, Compression};
pub use elementwise::{Binary, BinaryOp, RoundF16, Slice, Unary, UnaryOp};
pub use linalg::{Gemv, GemvQ8, Parallelism};
pub use memory::{Load, Store};
pub use norm::RmsNorm;
pub use quant::{DequantizeInt8, QuantizeInt8, QuantizeRne};
pub use reduce::{Reduce, ReduceOp};

/// What typing rules can ask about the kernel.
pub trait TypeCtx {
    /// The inferred type of an earlier value.
    fn value(&self, v: Value) -> Result<&ValueType, OpError>;
    /// A buffer's declaration.
    fn buffer(&self, b: Buffer) -> Result<&BufferData, OpError>;
    /// The kernel's TP group size.
    fn tp(&self) -> u32;
}

/// One op of the op level.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// Read a whole input buffer.
    Load(Load),
    /// Write a whole output buffer.
    Store(Store),
    /// Matrix-vector product.
    Gemv(Gemv),
    /// INT4 matrix-vector product with q8 (i8 codes + f32 block scales) activations.
    GemvQ8(GemvQ8),
    /// Elementwise binary arithmetic.
    Binary(Binary),
    /// Elementwise unary function.
    Unary(Unary),
    /// Explicit FP16 rounding point.
    RoundF16(RoundF16),
    /// A column range of the feature axis.
    Slice(Slice),
    /// RMS normalisation over the feature axis.
    RmsNorm(RmsNorm),
    /// Reduction over the feature axis.
    Reduce(Reduce),
    /// Sum over the TP group.
    AllReduce(AllReduce),
    /// Block-absmax INT8 quantisation.
    QuantizeInt8(QuantizeInt8),
    /// Inverse of [`OpKind::QuantizeInt8`].
    DequantizeInt8(DequantizeInt8),
    /// Block-absmax INT8 quantisation, round half to even (q8 GEMV activations).
    QuantizeRne(QuantizeRne),
}

impl OpKind {
    /// The textual-IR mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        match self {
            OpKind::Load(_) => "load",
            OpKind::Store(_) => "store",
            OpKind::Gemv(g) => g.parallel.mnemonic(),
            OpKind::GemvQ8(g) => g.mnemonic(),
            OpKind::Binary(b) => b.op.mnemonic(),
            OpKind::Unary(u) => u.op.mnemonic(),
            OpKind::RoundF16(_) => "round_f16",
            OpKind::Slice(_) => "slice",
            OpKind::RmsNorm(_) => "rmsnorm",
            OpKind::Reduce(r) => r.op.mnemonic(),
            OpKind::AllReduce(a) => a.mnemonic(),
            OpKind::QuantizeInt8(_) => "quantize_int8",
            OpKind::DequantizeInt8(_) => "dequantize_int8",
            OpKind::QuantizeRne(_) => "quantize_int8.rne",
        }
    }

    /// How many values the op defines.
    pub fn num_results(&self) -> usize {
        match self {
            OpKind::Store(_) => 0,
            OpKind::QuantizeInt8(_) | OpKind::QuantizeRne(_) => 2,
            _ => 1,
        }
    }

    /// The values the op reads, in operand order.
    pub fn args(&self) -> Vec<Value> {
        match self {
            OpKind::Load(_) => vec![],
            OpKind::Gemv(g) => vec![g.x],
            OpKind::GemvQ8(g) => vec![g.codes, g.scales],
            OpKind::Store(s) => vec![s.value],
            OpKind::Binary(b) => vec![b.a, b.b],
            OpKind::Unary(u) => vec![u.x],
            OpKind::RoundF16(r) => vec![r.x],
            OpKind::Slice(s) => vec![s.x],
            OpKind::RmsNorm(n) => vec![n.x, n.weight],
            OpKind::Reduce(r) => vec![r.x],
            OpKind::AllReduce(a) => vec![a.x],
            OpKind::QuantizeInt8(q) => vec![q.x],
            OpKind::DequantizeInt8(d) => vec![d.codes, d.scales],
            OpKind::QuantizeRne(q) => vec![q.x],
        }
    }

    /// The buffer the op reads or writes, if any.
    pub fn buffer(&self) -> Option<Buffer> {
        match self {
            OpKind::Load(l) => Some(l.buffer),
            OpKind::Store(s) => Some(s.buffer),
            OpKind::Gemv(g) => Some(g.weight),
            OpKind::GemvQ8(g) => Some(g.weight),
            _ => None,
        }
    }

    /// Apply the op's typing rule.
    pub fn infer(&self, cx: &dyn TypeCtx) -> Result<Vec<ValueType>, OpError> {
        match self {
            OpKind::Load(l) => l.infer(cx).map(|t| vec![t]),
            OpKind::Store(s) => s.infer(cx).map(|()| vec![]),
            OpKind::Gemv(g) => g.infer(cx).map(|t| vec![t]),
            OpKind::GemvQ8(g) => g.infer(cx).map(|t| vec![t]),
            OpKind::Binary(b) => b.infer(cx).map(|t| vec![t]),
            OpKind::Unary(u) => u.infer(cx).map(|t| vec![t]),
            OpKind::RoundF16(r) => r.infer(cx).map(|t| vec![t]),
            OpKind::Slice(s) => s.infer(cx).map(|t| vec![t]),
            OpKind::RmsNorm(n) => n.infer(cx).map(|t| vec![t]),
            OpKind::Reduce(r) => r.infer(cx).map(|t| vec![t]),
            OpKind::AllReduce(a) => a.infer(cx).map(|t| vec![t]),
            OpKind::QuantizeInt8(q) => q.infer(cx),
            OpKind::DequantizeInt8(d) => d.infer(cx).map(|t| vec![t]),
            OpKind::QuantizeRne(q) => q.infer(cx),
        }
    }

    /// Attributes printed after the operands in the textual IR.
    pub fn attributes(&self) -> String {
        match self {
            OpKind::Slice(s) => format!("start={}, len={}", s.start, s.len),
            OpKind::RmsNorm(n) => format!("eps={:e}", n.eps),
            OpKind::AllReduce(a) => a.attributes(),
            OpKind::QuantizeInt8(q) => format!("block={}", q.block),
            OpKind::DequantizeInt8(d) => format!("block={}", d.block),
            OpKind::GemvQ8(g) => format!("block={}", g.block),
            OpKind::QuantizeRne(q) => format!("block={}, clamp={}", q.block, q.clamp),
            _ => String::new(),
        }
    }
}

/// Require a floating-point operand.
pub(crate) fn expect_float(operand: &'static str, t: &ValueType) -> Result<(), OpError> {
    if t.dtype.is_float() {
        Ok(())
    } else {
        Err(OpError::Dtype {
            operand,
            expected: "a float type",
            found: t.dtype,
            hint: "",
        })
    }
}

/// Require a given distribution.
pub(crate) fn expect_dist(
    operand: &'static str,
    t: &ValueType,
    want: Dist,
    hint: &'static str,
) -> Result<(), OpError> {
    if t.dist == want {
        Ok(())
    } else {
        Err(OpError::Dist {
            operand,
            expected: want.name(),
            found: t.dist,
            hint,
        })
    }
}
