//! Reductions over the feature axis.
//!
//! `y = reduce.OP x`: for each batch row, one f32 result (shape `[B, 1]`), same distribution as x.
//! A sum of a partial value is still partial; an absmax/max of a partial value is rejected.

use crate::entities::Value;
use crate::error::OpError;
use crate::types::ScalarType;
use crate::value::{Dist, ValueType};

use super::{TypeCtx, expect_float};

/// Reduction operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `Σ x`.
    Sum,
    /// `Σ x²`.
    SumSquares,
    /// `max |x|`.
    AbsMax,
}

impl ReduceOp {
    /// The textual-IR mnemonic.
    pub fn mnemonic(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce.sum",
            ReduceOp::SumSquares => "reduce.sumsq",
            ReduceOp::AbsMax => "reduce.absmax",
        }
    }
}

/// `y = reduce.OP x`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    /// Operator.
    pub op: ReduceOp,
    /// Operand `[B, F]`.
    pub x: Value,
}

impl Reduce {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let x = cx.value(self.x)?;
        expect_float("x", x)?;
        let linear = self.op == ReduceOp::Sum;
        if x.dist == Dist::Sharded || (x.dist == Dist::Partial && !linear) {
            let hint = if x.dist == Dist::Sharded {
                ": a reduction of one shard is not the reduction of the vector"
            } else {
                ": a nonlinear reduction of partial sums is not a partial sum; allreduce first"
            };
            return Err(OpError::Dist {
                operand: "x",
                expected: "replicated",
                found: x.dist,
                hint,
            });
        }
        let mut shape = x.shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = 1;
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            shape,
            dist: x.dist,
        })
    }
}
