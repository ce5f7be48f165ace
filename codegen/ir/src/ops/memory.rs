//! Loads and stores of whole kernel parameters.
//!
//! `load` reads an input buffer; `store` writes an output buffer. Every output is stored exactly
//! once and never loaded: within a launch, other workgroups or ranks may still be writing it, so a
//! read-back is a race (DESIGN.md §5.7). An FP16 store is a rounding point and must be preceded by
//! an explicit `round_f16`.

use crate::buffer::{BufferType, Role};
use crate::entities::{Buffer, Value};
use crate::error::OpError;
use crate::types::Sharding;
use crate::value::{Dist, ValueType};

use super::TypeCtx;

/// `v = load buf`: the rank's local view of an input tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    /// The input buffer.
    pub buffer: Buffer,
}

/// `store v, buf`: write the whole output buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Store {
    /// The value to write.
    pub value: Value,
    /// The output buffer.
    pub buffer: Buffer,
}

/// The distribution of a tensor buffer's contents.
pub fn dist_of(sharding: Sharding) -> Dist {
    match sharding {
        Sharding::Replicated => Dist::Replicated,
        Sharding::ColumnParallel { .. } | Sharding::RowParallel { .. } => Dist::Sharded,
        Sharding::Partial { .. } => Dist::Partial,
    }
}

impl Load {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<ValueType, OpError> {
        let b = cx.buffer(self.buffer)?;
        if b.role == Role::Output {
            return Err(OpError::ReadOutput {
                name: b.name.clone(),
            });
        }
        match b.local_type() {
            BufferType::Tensor(t) => Ok(ValueType {
                dtype: t.dtype,
                shape: t.shape,
                dist: dist_of(b.sharding),
            }),
            BufferType::Weight(_) => Err(OpError::WeightLoaded {
                name: b.name.clone(),
            }),
        }
    }
}

impl Store {
    pub(crate) fn infer(&self, cx: &dyn TypeCtx) -> Result<(), OpError> {
        let b = cx.buffer(self.buffer)?;
        let v = cx.value(self.value)?;
        if b.role == Role::Input {
            return Err(OpError::WriteInput {
                name: b.name.clone(),
            });
        }
        let BufferType::Tensor(t) = b.local_type() else {
            return Err(OpError::WeightStored {
                name: b.name.clone(),
            });
        };
        if v.dtype != t.dtype {
            let (expected, found) = (t.dtype, v.dtype);
            return Err(OpError::StoreType {
                name: b.name.clone(),
                expected,
                found,
            });
        }
        if v.shape != t.shape {
            let (expected, found) = (t.shape, v.shape.clone());
            return Err(OpError::Shape {
                operand: "stored value",
                expected,
                found,
            });
        }
        let want = dist_of(b.sharding);
        let hint = if v.dist == Dist::Partial {
            ": allreduce it first"
        } else {
            ""
        };
        super::expect_dist("stored value", v, want, hint)
    }
}
