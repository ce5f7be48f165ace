//! Block-absmax INT8 quantisation of activations (the payload format of compressed allreduce).
//!
//! `codes, scales = quantize_int8 x, block=B`: per batch row and block of B features,
//! `s = max|x| / 127` (f32), `q = clamp(round_half_away(x / s), −127, 127)` (0 where s = 0);
//! codes are i8 `[.., F]`, scales f32 `[.., F/B]`.
//! `y = dequantize_int8 codes, scales, block=B`: `y = q · s`, f32.

use crate::entities::Value;
use crate::error::OpError;
use crate::types::ScalarType;
use crate::value::ValueType;

use super::collective::check_block;
use super::{TypeCtx, expect_float};

/// `codes, scales = quantize_int8 x, block=B`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeInt8 {
    /// Operand.
    pub x: Value,
    /// Features per block.
    pub block: usize,
}

impl QuantizeInt8 {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<Vec<ValueType>, OpError> {
        let x = cx.value(self.x)?;
        expect_float("x", x)?;
        check_block(self.block, x.features())?;
        let mut scale_shape = x.shape.clone();
        if let Some(last) = scale_shape.last_mut() {
            *last /= self.block;
        }
        let codes = ValueType {
            dtype: ScalarType::I8,
            ..x.clone()
        };
        let scales = ValueType {
            dtype: ScalarType::F32,
            shape: scale_shape,
            dist: x.dist,
        };
        Ok(vec![codes, scales])
    }
}

/// `y = dequantize_int8 codes, scales, block=B`.
#[derive(Clone, Debug, PartialEq)]
pub struct DequantizeInt8 {
    /// i8 codes.
    pub codes: Value,
    /// f32 scales, one per block.
    pub scales: Value,
    /// Features per block.
    pub block: usize,
}

impl DequantizeInt8 {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let q = cx.value(self.codes)?;
        let s = cx.value(self.scales)?;
        if q.dtype != ScalarType::I8 {
            return Err(OpError::Dtype {
                operand: "codes",
                expected: "i8",
                found: q.dtype,
                hint: "",
            });
        }
        if s.dtype != ScalarType::F32 {
            return Err(OpError::Dtype {
                operand: "scales",
                expected: "f32",
                found: s.dtype,
                hint: "",
            });
        }
        check_block(self.block, q.features())?;
        let mut expected = q.shape.clone();
        if let Some(last) = expected.last_mut() {
            *last /= self.block;
        }
        if s.dist != q.dist {
            let hint = ": codes and scales must be distributed the same way";
            return Err(OpError::Dist {
                operand: "scales",
                expected: q.dist.name(),
                found: s.dist,
                hint,
            });
        }
        if s.shape != expected {
            return Err(OpError::Shape {
                operand: "scales",
                expected,
                found: s.shape.clone(),
            });
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            ..q.clone()
        })
    }
}
