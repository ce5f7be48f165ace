//! The types of SSA values: element type, per-rank shape, and distribution over the TP group.

use std::fmt;

use crate::types::ScalarType;

/// How a value is distributed over the ranks of the TP group.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Every rank holds the same whole value.
    Replicated,
    /// Each rank holds a contiguous slice of the feature axis (rank r holds slice r).
    Sharded,
    /// Each rank holds partial sums; the true value is their sum over ranks.
    Partial,
}

impl Dist {
    /// The textual-IR name.
    pub fn name(self) -> &'static str {
        match self {
            Dist::Replicated => "replicated",
            Dist::Sharded => "sharded",
            Dist::Partial => "partial",
        }
    }
}

/// The type of a value, as inferred by the validator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// Element type. `f32` values are unrounded intermediate results; `f16` values have been
    /// rounded (by a `round_f16` op) or loaded from FP16 memory.
    pub dtype: ScalarType,
    /// Per-rank shape; the last axis is the feature axis.
    pub shape: Vec<usize>,
    /// Distribution over ranks.
    pub dist: Dist,
}

impl ValueType {
    /// Length of the feature (last) axis.
    pub fn features(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }

    /// Number of rows (product of all but the last axis).
    pub fn rows(&self) -> usize {
        let n = self.shape.len().saturating_sub(1);
        self.shape[..n].iter().product()
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "] {}", self.dist.name())
    }
}
