//! RMS normalisation.
//!
//! `y = rmsnorm x, w, eps`: for each batch row b,
//! `y[b, i] = x[b, i] · w[i] / sqrt(mean_j(x[b, j]²) + eps)` over the whole feature axis. The
//! weights are applied as given (Gemma-style `1 + w` is folded in at load). x must be replicated:
//! a norm of a shard or of partial sums would normalise the wrong vector. After an allreduce this
//! needs a reduction over every workgroup of the launch, which the lowering provides.

use crate::entities::Value;
use crate::error::OpError;
use crate::types::ScalarType;
use crate::value::{Dist, ValueType};

use super::{TypeCtx, expect_dist, expect_float};

/// `y = rmsnorm x, weight, eps`.
#[derive(Clone, Debug, PartialEq)]
pub struct RmsNorm {
    /// Input `[B, F]`, replicated.
    pub x: Value,
    /// Weights `[F]`, FP16, replicated.
    pub weight: Value,
    /// Added to the mean square; positive.
    pub eps: f64,
}

impl RmsNorm {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let x = cx.value(self.x)?;
        let w = cx.value(self.weight)?;
        expect_float("x", x)?;
        let hint = match x.dist {
            Dist::Partial => ": allreduce the partial sums before normalising",
            _ => ": a norm over one shard would normalise the wrong vector",
        };
        expect_dist("x", x, Dist::Replicated, hint)?;
        if w.dtype != ScalarType::F16 {
            return Err(OpError::Dtype {
                operand: "weight",
                expected: "f16",
                found: w.dtype,
                hint: "",
            });
        }
        expect_dist("weight", w, Dist::Replicated, "")?;
        if w.shape != [x.features()] {
            let (expected, found) = (vec![x.features()], w.shape.clone());
            return Err(OpError::Shape {
                operand: "weight",
                expected,
                found,
            });
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            let what = format!("must be positive and finite, found {}", self.eps);
            return Err(OpError::Attribute {
                operand: "eps",
                what,
            });
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            ..x.clone()
        })
    }
}
