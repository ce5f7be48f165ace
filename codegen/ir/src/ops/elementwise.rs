//! Elementwise arithmetic, explicit FP16 rounding, and column slices.
//!
//! Arithmetic is exact in the reference semantics and at least FP32 on a device; results are f32
//! and unrounded. `round_f16` is the only way a value becomes f16: it rounds to nearest-even, and
//! it is where the IR records a rounding point (DESIGN.md §2).

use crate::entities::Value;
use crate::error::OpError;
use crate::types::ScalarType;
use crate::value::{Dist, ValueType};

use super::{TypeCtx, expect_float};

/// Binary operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a · b`.
    Mul,
}

impl BinaryOp {
    /// The textual-IR mnemonic.
    pub fn mnemonic(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Mul => "mul",
        }
    }
}

/// `c = add|mul a, b`: same shape, same distribution; f32 result.
#[derive(Clone, Debug, PartialEq)]
pub struct Binary {
    /// Operator.
    pub op: BinaryOp,
    /// Left operand.
    pub a: Value,
    /// Right operand.
    pub b: Value,
}

impl Binary {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let a = cx.value(self.a)?;
        let b = cx.value(self.b)?;
        expect_float("lhs", a)?;
        expect_float("rhs", b)?;
        if a.shape != b.shape {
            let (expected, found) = (a.shape.clone(), b.shape.clone());
            return Err(OpError::Shape {
                operand: "rhs",
                expected,
                found,
            });
        }
        if self.op == BinaryOp::Mul && (a.dist == Dist::Partial || b.dist == Dist::Partial) {
            let (operand, found) = if a.dist == Dist::Partial {
                ("lhs", a.dist)
            } else {
                ("rhs", b.dist)
            };
            let hint = ": a product involving partial sums is not a partial sum; allreduce first";
            let expected = "replicated or sharded";
            return Err(OpError::Dist {
                operand,
                expected,
                found,
                hint,
            });
        }
        if a.dist != b.dist {
            let hint = ": both operands must be distributed the same way over the TP group";
            return Err(OpError::Dist {
                operand: "rhs",
                expected: a.dist.name(),
                found: b.dist,
                hint,
            });
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            ..a.clone()
        })
    }
}

/// Unary functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `silu(x) = x / (1 + e^(−x))`.
    Silu,
}

impl UnaryOp {
    /// The textual-IR mnemonic.
    pub fn mnemonic(self) -> &'static str {
        match self {
            UnaryOp::Silu => "silu",
        }
    }
}

/// `y = silu x`: f32 result; a partial value is rejected (silu is not linear).
#[derive(Clone, Debug, PartialEq)]
pub struct Unary {
    /// Function.
    pub op: UnaryOp,
    /// Operand.
    pub x: Value,
}

impl Unary {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let x = cx.value(self.x)?;
        expect_float("x", x)?;
        if x.dist == Dist::Partial {
            let hint = ": a nonlinear function of partial sums; allreduce first";
            let expected = "replicated or sharded";
            return Err(OpError::Dist {
                operand: "x",
                expected,
                found: x.dist,
                hint,
            });
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            ..x.clone()
        })
    }
}

/// `y = round_f16 x`: round to the nearest FP16 (ties to even); the IR's rounding point.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundF16 {
    /// Operand.
    pub x: Value,
}

impl RoundF16 {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let x = cx.value(self.x)?;
        if x.dtype != ScalarType::F32 {
            let hint = ": only an unrounded f32 value can be rounded";
            return Err(OpError::Dtype {
                operand: "x",
                expected: "f32",
                found: x.dtype,
                hint,
            });
        }
        Ok(ValueType {
            dtype: ScalarType::F16,
            ..x.clone()
        })
    }
}

/// `y = slice x, start, len`: feature columns `start .. start + len` of x (same dtype and
/// distribution). Used to split one fused GEMV into several outputs (Q, K, V).
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// Operand.
    pub x: Value,
    /// First column.
    pub start: usize,
    /// Number of columns.
    pub len: usize,
}

impl Slice {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let x = cx.value(self.x)?;
        let f = x.features();
        if self.len == 0 || self.start.checked_add(self.len).is_none_or(|end| end > f) {
            let what = format!(
                "{} column(s) from column {} do not fit in the {f} features of x (a slice is non-empty and in bounds)",
                self.len, self.start
            );
            return Err(OpError::Attribute {
                operand: "range",
                what,
            });
        }
        let mut shape = x.shape.clone();
        *shape.last_mut().expect("features() saw an axis") = self.len;
        Ok(ValueType { shape, ..x.clone() })
    }
}
