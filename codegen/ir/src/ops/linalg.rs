//! Matrix-vector products.
//!
//! `y = gemv.MODE W, x` computes, for every batch row b and output column n of the rank's shard,
//! `y[b, n] = Σ_k W[k, n] · x[b, k]` with W dequantised exactly as its format says
//! (DESIGN.md §2), products and sums in at least FP32, and no rounding of y (its type is f32).
//!
//! The parallel mode says how the GEMV is split over the TP group and must match the weight's
//! sharding (DESIGN.md §5.6):
//! - `gemv.rep`: replicated weight, replicated x → replicated y `[B, N]`;
//! - `gemv.col`: column-parallel weight `[K, N/tp]`, replicated x `[B, K]` → sharded y `[B, N/tp]`;
//! - `gemv.row`: row-parallel weight `[K/tp, N]`, sharded x `[B, K/tp]` → partial y `[B, N]`.

use crate::buffer::{BufferType, Weight};
use crate::entities::{Buffer, Value};
use crate::error::OpError;
use crate::types::{ScalarType, Sharding};
use crate::value::{Dist, ValueType};

use super::TypeCtx;

/// How a GEMV is split over the TP group.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Parallelism {
    /// Not split: every rank computes the whole product.
    Replicated,
    /// Split along N.
    Column,
    /// Split along K; produces partial sums.
    Row,
}

impl Parallelism {
    /// The textual-IR mnemonic.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Parallelism::Replicated => "gemv.rep",
            Parallelism::Column => "gemv.col",
            Parallelism::Row => "gemv.row",
        }
    }

    fn short(self) -> &'static str {
        &self.mnemonic()[5..]
    }

    /// Whether a weight sharded as `s` fits this mode (tp = 1 shardings are all replicated).
    fn accepts(self, s: Sharding) -> bool {
        match self {
            Parallelism::Replicated => s.tp() == 1 && !matches!(s, Sharding::Partial { .. }),
            Parallelism::Column => matches!(s, Sharding::ColumnParallel { .. }),
            Parallelism::Row => matches!(s, Sharding::RowParallel { .. }),
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Parallelism::Replicated => "replicated",
            Parallelism::Column => "col_parallel",
            Parallelism::Row => "row_parallel",
        }
    }

    /// The (x, y) distributions of this mode.
    pub fn dists(self) -> (Dist, Dist) {
        match self {
            Parallelism::Replicated => (Dist::Replicated, Dist::Replicated),
            Parallelism::Column => (Dist::Replicated, Dist::Sharded),
            Parallelism::Row => (Dist::Sharded, Dist::Partial),
        }
    }
}

/// `y = gemv.MODE weight, x`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemv {
    /// The weight buffer (a [`BufferType::Weight`]).
    pub weight: Buffer,
    /// Activations `[B, K_local]`, FP16.
    pub x: Value,
    /// How the product is split over the TP group.
    pub parallel: Parallelism,
}

impl Gemv {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let w = weight_of(cx, self.weight, self.parallel)?;
        let x = cx.value(self.x)?;
        if x.dtype != ScalarType::F16 {
            let hint = ": GEMV activations are FP16; round_f16 them first";
            return Err(OpError::Dtype {
                operand: "x",
                expected: "f16",
                found: x.dtype,
                hint,
            });
        }
        activation_type("x", self.parallel, &w, x)
    }
}

/// `y = gemv_q8.MODE weight, codes, scales, block=B`: the GEMV of an INT4 weight with q8
/// activations (from [`QuantizeRne`](super::QuantizeRne) or any i8 codes with f32 block scales):
/// `y[b, n] = Σ_k W[k, n] · codes[b, k] · scales[b, k / B]`, W dequantised exactly, the result
/// f32 and unrounded like [`Gemv`]'s. With integer codes and INT4 weights the products
/// `(q − z) · code` are exact integers: a kernel sums them exactly per block (`v_dot4_i32_i8`,
/// `dp4a`) and scales in f32. The weight must be INT4 (GPTQ or AWQ); the codes i8 `[B, K]`, the
/// scales f32 `[B, K/B]`, distributed as the mode's x.
#[derive(Clone, Debug, PartialEq)]
pub struct GemvQ8 {
    /// The weight buffer (an INT4 [`BufferType::Weight`]).
    pub weight: Buffer,
    /// Activation codes `[B, K_local]`, i8.
    pub codes: Value,
    /// Activation scales `[B, K_local / block]`, f32.
    pub scales: Value,
    /// K rows per activation block.
    pub block: usize,
    /// How the product is split over the TP group.
    pub parallel: Parallelism,
}

impl GemvQ8 {
    /// The textual-IR mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        match self.parallel {
            Parallelism::Replicated => "gemv_q8.rep",
            Parallelism::Column => "gemv_q8.col",
            Parallelism::Row => "gemv_q8.row",
        }
    }

    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let w = weight_of(cx, self.weight, self.parallel)?;
        if w.format.group().is_none() {
            return Err(OpError::Attribute {
                operand: "weight",
                what: format!(
                    "gemv_q8 multiplies INT4 weights (integer products), but `{}` is {}; use gemv with FP16 activations",
                    cx.buffer(self.weight)?.name,
                    w.format
                ),
            });
        }
        let q = cx.value(self.codes)?;
        if q.dtype != ScalarType::I8 {
            let hint = ": quantize the activation with quantize_int8.rne first";
            return Err(OpError::Dtype {
                operand: "codes",
                expected: "i8",
                found: q.dtype,
                hint,
            });
        }
        let y = activation_type("codes", self.parallel, &w, q)?;
        super::collective::check_block(self.block, w.k)?;
        let s = cx.value(self.scales)?;
        if s.dtype != ScalarType::F32 {
            return Err(OpError::Dtype {
                operand: "scales",
                expected: "f32",
                found: s.dtype,
                hint: "",
            });
        }
        let want = super::quant::scales_type(q, self.block);
        if s.shape != want.shape {
            return Err(OpError::Shape {
                operand: "scales",
                expected: want.shape,
                found: s.shape.clone(),
            });
        }
        let hint = ": codes and scales must be distributed the same way";
        super::expect_dist("scales", s, q.dist, hint)?;
        Ok(y)
    }
}

/// The weight of a GEMV, checked against its parallel mode (DESIGN.md §5.6).
fn weight_of(cx: &dyn TypeCtx, weight: Buffer, parallel: Parallelism) -> Result<Weight, OpError> {
    let wb = cx.buffer(weight)?;
    let BufferType::Weight(w) = wb.local_type() else {
        return Err(OpError::NotAWeight {
            name: wb.name.clone(),
        });
    };
    if !parallel.accepts(wb.sharding) {
        return Err(OpError::WeightSharding {
            parallel: parallel.short(),
            expected: parallel.expected(),
            name: wb.name.clone(),
            found: wb.sharding,
        });
    }
    Ok(w)
}

/// The result type of a GEMV whose activation `x` (of any element type) is `[B, K]`.
fn activation_type(
    operand: &'static str,
    parallel: Parallelism,
    w: &Weight,
    x: &ValueType,
) -> Result<ValueType, OpError> {
    if x.shape.len() != 2 || x.shape[1] != w.k {
        let batch = if x.shape.len() == 2 { x.shape[0] } else { 1 };
        let expected = vec![batch, w.k];
        return Err(OpError::Shape {
            operand,
            expected,
            found: x.shape.clone(),
        });
    }
    let (x_dist, y_dist) = parallel.dists();
    let hint = match parallel {
        Parallelism::Row => ": a row-parallel GEMV reads the rank's K-shard of x",
        _ => "",
    };
    super::expect_dist(operand, x, x_dist, hint)?;
    Ok(ValueType {
        dtype: ScalarType::F32,
        shape: vec![x.shape[0], w.n],
        dist: y_dist,
    })
}
