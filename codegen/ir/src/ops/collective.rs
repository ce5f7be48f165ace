//! Collectives over the kernel's TP group.
//!
//! `y = allreduce x`: x is partial (rank r holds `x_r`); afterwards every rank holds
//! `y = Σ_r x_r`, summed in at least FP32, as an unrounded f32 replicated value. Which ranks take
//! part, in which order peers are addressed, and how the ranks synchronise are the lowering's job;
//! the op only says what is computed and across which group.
//!
//! `y = allreduce.int8 x, block=B`: compressed. Each rank quantises its published partial per
//! block of B consecutive features (per batch row): `s = max|x_r| / 127`,
//! `q = clamp(round_half_away(x_r / s), −127, 127)` (q = 0 where s = 0), and every rank computes
//! `y = Σ_r q_r · s_r` in FP32. The accuracy loss relative to the plain allreduce is bounded by
//! `tp · s / 2` per element, which an accuracy gate checks.

use crate::entities::Value;
use crate::error::OpError;
use crate::types::ScalarType;
use crate::value::{Dist, ValueType};

use super::{TypeCtx, expect_dist, expect_float};

/// Payload compression.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Send values as they are.
    None,
    /// Per-block absmax INT8.
    Int8 {
        /// Features per block.
        block: usize,
    },
}

/// `y = allreduce x` over the kernel's TP group.
#[derive(Clone, Debug, PartialEq)]
pub struct AllReduce {
    /// The partial value.
    pub x: Value,
    /// Ranks in the group; must equal the kernel's TP size.
    pub tp: u32,
    /// Payload compression.
    pub compression: Compression,
}

impl AllReduce {
    /// The textual-IR mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        match self.compression {
            Compression::None => "allreduce",
            Compression::Int8 { .. } => "allreduce.int8",
        }
    }

    pub(crate) fn attributes(&self) -> String {
        match self.compression {
            Compression::None => format!("tp={}", self.tp),
            Compression::Int8 { block } => format!("tp={}, block={block}", self.tp),
        }
    }

    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        if self.tp != cx.tp() {
            return Err(OpError::TpMismatch {
                expected: cx.tp(),
                found: self.tp,
            });
        }
        let x = cx.value(self.x)?;
        expect_float("x", x)?;
        let hint = ": only partial sums (a row-parallel GEMV's output) need an allreduce";
        expect_dist("x", x, Dist::Partial, hint)?;
        if let Compression::Int8 { block } = self.compression {
            check_block(block, x.features())?;
        }
        Ok(ValueType {
            dtype: ScalarType::F32,
            shape: x.shape.clone(),
            dist: Dist::Replicated,
        })
    }
}

/// A quantisation block must be non-empty and divide the feature axis.
pub(crate) fn check_block(block: usize, features: usize) -> Result<(), OpError> {
    if block == 0 || features % block != 0 {
        let what =
            format!("{block} does not divide the {features} features (blocks are non-empty)");
        return Err(OpError::Attribute {
            operand: "block",
            what,
        });
    }
    Ok(())
}
