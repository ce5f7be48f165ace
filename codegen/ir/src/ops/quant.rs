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

/// `codes, scales = quantize_int8.rne x, block=B, clamp=C`: the q8 activations of
/// [`GemvQ8`](super::GemvQ8), with their rounding point spelled out. Per batch row and block of
/// B features: `m = max|x|` (exact), `s = m / C` and `r = C / m` (f32 divisions, correctly
/// rounded; both 0 where m = 0), `q = clamp(rne(x · r), −C, C)` where the product is exact and
/// `rne` rounds it to an integer, half to even (one f32 `fma(x, r, 1.5·2^23) − 1.5·2^23` in a
/// kernel). `x` must be FP16 so that a kernel reproduces the codes bit for bit. Codes i8 `[.., F]`, scales f32
/// `[.., F/B]`; the pair dequantises to `q · s` (a relative error of at most `1/(2C)` of the
/// block's absmax per element).
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeRne {
    /// Operand, FP16.
    pub x: Value,
    /// Features per block.
    pub block: usize,
    /// The largest code magnitude (1..=127): codes lie in `[−C, C]`.
    pub clamp: usize,
}

impl QuantizeRne {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<Vec<ValueType>, OpError> {
        let x = cx.value(self.x)?;
        if x.dtype != ScalarType::F16 {
            let hint =
                ": round_f16 it first (the codes are reproducible bit for bit only from FP16)";
            return Err(OpError::Dtype {
                operand: "x",
                expected: "f16",
                found: x.dtype,
                hint,
            });
        }
        check_block(self.block, x.features())?;
        if !(1..=127).contains(&self.clamp) {
            return Err(OpError::Attribute {
                operand: "clamp",
                what: format!("{} is not in 1..=127 (codes are signed 8-bit)", self.clamp),
            });
        }
        Ok(vec![
            ValueType {
                dtype: ScalarType::I8,
                ..x.clone()
            },
            scales_type(x, self.block),
        ])
    }
}

/// The f32 scales `[.., F/B]` of a value `[.., F]` quantised in blocks of B.
pub(crate) fn scales_type(x: &ValueType, block: usize) -> ValueType {
    let mut shape = x.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last /= block;
    }
    ValueType {
        dtype: ScalarType::F32,
        shape,
        dist: x.dist,
    }
}
