//! Buffers: the kernel's parameters, with shape, element type, memory space, index space and
//! sharding.

use std::fmt;

use crate::types::{IndexSpace, MemorySpace, ScalarType, Sharding, WeightFormat, ZeroPoint};

/// Whether a buffer is read or written by the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Read-only for the whole launch.
    Input,
    /// Written exactly once by the launch and never read by it.
    Output,
}

/// A dense tensor type: element type and shape. Activations are `[batch, features]`; per-feature
/// parameters (RMSNorm weights) are `[features]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tensor {
    /// Element type.
    pub dtype: ScalarType,
    /// Shape, outermost axis first; the last axis is the feature axis.
    pub shape: Vec<usize>,
}

impl Tensor {
    /// A `[batch, features]` activation.
    pub fn activation(dtype: ScalarType, batch: usize, features: usize) -> Self {
        Tensor {
            dtype,
            shape: vec![batch, features],
        }
    }

    /// A one-dimensional `[len]` tensor (e.g. RMSNorm weights).
    pub fn vector(dtype: ScalarType, len: usize) -> Self {
        Tensor {
            dtype,
            shape: vec![len],
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A weight matrix of logical shape `[K, N]` in some storage format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Weight {
    /// Storage format.
    pub format: WeightFormat,
    /// Reduction length.
    pub k: usize,
    /// Output length.
    pub n: usize,
}

/// What a buffer holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BufferType {
    /// A dense tensor.
    Tensor(Tensor),
    /// A (possibly quantised) weight matrix; expands to several device arrays in the ABI.
    Weight(Weight),
}

impl From<Tensor> for BufferType {
    fn from(t: Tensor) -> Self {
        BufferType::Tensor(t)
    }
}

impl From<Weight> for BufferType {
    fn from(w: Weight) -> Self {
        BufferType::Weight(w)
    }
}

/// The definition of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferData {
    /// Parameter name, unique within the kernel.
    pub name: String,
    /// Element type and shape, expressed in `index_space`.
    pub ty: BufferType,
    /// Where it lives.
    pub space: MemorySpace,
    /// Whether `ty`'s shape is the per-rank shard or the whole tensor.
    pub index_space: IndexSpace,
    /// Distribution over the TP group.
    pub sharding: Sharding,
    /// Input or output.
    pub role: Role,
}

impl BufferData {
    /// The buffer's type as one rank sees it. Assumes divisibility (checked by the validator).
    pub fn local_type(&self) -> BufferType {
        if self.index_space == IndexSpace::Local {
            return self.ty.clone();
        }
        let tp = self.sharding.tp() as usize;
        match (&self.ty, self.sharding) {
            (BufferType::Weight(w), Sharding::ColumnParallel { .. }) => {
                BufferType::Weight(Weight { n: w.n / tp, ..*w })
            }
            (BufferType::Weight(w), Sharding::RowParallel { .. }) => {
                BufferType::Weight(Weight { k: w.k / tp, ..*w })
            }
            (BufferType::Tensor(t), Sharding::ColumnParallel { .. }) => {
                let mut shape = t.shape.clone();
                if let Some(last) = shape.last_mut() {
                    *last /= tp;
                }
                BufferType::Tensor(Tensor {
                    dtype: t.dtype,
                    shape,
                })
            }
            (ty, _) => ty.clone(),
        }
    }
}

impl Weight {
    /// Bytes of every device array of this weight (codes, scales, zero points, g_idx).
    pub fn bytes(&self) -> usize {
        let (k, n) = (self.k, self.n);
        match self.format {
            WeightFormat::F16 => k * n * 2,
            WeightFormat::Gptq(l) => {
                let groups = k / l.group.rows(k).max(1);
                let zeros = if l.zero == ZeroPoint::Symmetric {
                    0
                } else {
                    groups * n / 8 * 4
                };
                let g_idx = if l.act_order { k * 4 } else { 0 };
                k * n / 2 + groups * n * l.scale.bytes() + zeros + g_idx
            }
            WeightFormat::Awq(l) => {
                let groups = k / l.group.rows(k).max(1);
                k * n / 2 + groups * n * l.scale.bytes() + groups * n / 8 * 4
            }
        }
    }
}

impl BufferType {
    /// Bytes the buffer occupies in memory.
    pub fn bytes(&self) -> usize {
        match self {
            BufferType::Tensor(t) => t.len() * t.dtype.bytes(),
            BufferType::Weight(w) => w.bytes(),
        }
    }
}

impl fmt::Display for BufferType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferType::Tensor(t) => {
                write!(f, "{}[", t.dtype)?;
                for (i, d) in t.shape.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str("]")
            }
            BufferType::Weight(w) => write!(f, "{}[k={}, n={}]", w.format, w.k, w.n),
        }
    }
}
