//! Host-side data for the reference evaluator: dense tensors and packed INT4 weights.

use crate::types::ScalarType;

/// A dense tensor on the host. Values are held as f64; for an f16/bf16/f32/integer tensor every
/// value must be exactly representable in that type (the evaluator checks f16 and f32).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// Element type the values are representable in.
    pub dtype: ScalarType,
    /// Shape, outermost axis first.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f64>,
}

impl HostTensor {
    /// A tensor from f64 values, each rounded to `dtype` (nearest-even for f16).
    pub fn rounded(
        dtype: ScalarType,
        shape: Vec<usize>,
        data: impl IntoIterator<Item = f64>,
    ) -> Self {
        let data = data.into_iter().map(|x| round_to(dtype, x)).collect();
        HostTensor { dtype, shape, data }
    }
}

/// Round an f64 to the nearest value of `dtype` (ties to even for floats; integers saturate).
pub fn round_to(dtype: ScalarType, x: f64) -> f64 {
    match dtype {
        ScalarType::F16 => half::f16::from_f64(x).to_f64(),
        ScalarType::Bf16 => half::bf16::from_f64(x).to_f64(),
        ScalarType::F32 => x as f32 as f64,
        ScalarType::I8 => x.round().clamp(-128.0, 127.0),
        ScalarType::I32 => x.round().clamp(i32::MIN as f64, i32::MAX as f64),
        ScalarType::U32 => x.round().clamp(0.0, u32::MAX as f64),
    }
}

/// The device arrays of a packed INT4 weight (GPTQ or AWQ), exactly as stored in a checkpoint.
/// Shapes follow the weight's [`WeightFormat`](crate::WeightFormat) docs.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedInt4 {
    /// Packed codes.
    pub qweight: Vec<i32>,
    /// Scales `[groups, N]`, representable in the layout's scale type.
    pub scales: Vec<f64>,
    /// Packed zero points `[groups, N/8]`; empty for symmetric GPTQ.
    pub qzeros: Vec<i32>,
    /// Act-order group index per row of K, when the layout has one.
    pub g_idx: Option<Vec<i32>>,
}

/// The data bound to one buffer of one rank.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// A dense tensor (activations, norm weights).
    Tensor(HostTensor),
    /// An FP16 weight stored `[N, K]` row-major.
    F16Weight(Vec<f64>),
    /// A packed INT4 weight.
    Int4(PackedInt4),
}
