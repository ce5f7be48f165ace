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

use crate::buffer::BufferType;
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
        let wb = cx.buffer(self.weight)?;
        let BufferType::Weight(w) = wb.local_type() else {
            return Err(OpError::NotAWeight {
                name: wb.name.clone(),
            });
        };
        if !self.parallel.accepts(wb.sharding) {
            return Err(OpError::WeightSharding {
                parallel: self.parallel.short(),
                expected: self.parallel.expected(),
                name: wb.name.clone(),
                found: wb.sharding,
            });
        }
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
        if x.shape.len() != 2 || x.shape[1] != w.k {
            let batch = if x.shape.len() == 2 { x.shape[0] } else { 1 };
            let expected = vec![batch, w.k];
            return Err(OpError::Shape {
                operand: "x",
                expected,
                found: x.shape.clone(),
            });
        }
        let (x_dist, y_dist) = self.parallel.dists();
        let hint = match self.parallel {
            Parallelism::Row => ": a row-parallel GEMV reads the rank's K-shard of x",
            _ => "",
        };
        super::expect_dist("x", x, x_dist, hint)?;
        Ok(ValueType {
            dtype: ScalarType::F32,
            shape: vec![x.shape[0], w.n],
            dist: y_dist,
        })
    }
}
