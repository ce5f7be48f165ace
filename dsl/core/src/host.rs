//! The typed host API: what a host binds to one rank's launch of a kernel.
//!
//! Every [`kernel!`](crate::kernel!) declaration also generates an argument struct
//! (`GemvInt4AllreduceRmsnormArgs<'a>` for `gemv_int4_allreduce_rmsnorm`) with one field per
//! parameter. The field types carry what the declaration says, so that a mismatch is a Rust type
//! error rather than a silent misread:
//!
//! - the element type: an `f16[batch, k]` input is an [`Input<'a, f16, _>`](Input), so binding a
//!   `&[f32]` does not compile;
//! - the weight format: a `gptq…` weight is a [`Gptq`] view, an `f16_nk` weight an [`F16Weight`];
//! - the sharding, as a type parameter: a `row_parallel` weight is a `Gptq<'a, RowParallel>`, so
//!   passing the column-parallel shard an engine loaded for another layer does not compile. State
//!   the sharding where the weight is sharded: `Gptq::<RowParallel>::new(…)`.
//!
//! What only the built kernel knows — per-rank lengths, the exact quantisation layout, the TP
//! size — is checked by the generated `check(&kernel)`, which returns an [`ArgError`] naming the
//! parameter before anything is launched. Kernels with an allreduce have a `peers` field: the
//! TP group's exchange buffers in the order of [`peer_order`](crate::peer_order), built by
//! [`Peers::new`] from addresses indexed by rank, so the host never orders peers by hand.

use std::fmt;
use std::marker::PhantomData;

pub use half::{bf16, f16};
use thiserror::Error;
use wavefuse_ir::reference::{HostData, HostTensor, PackedInt4, RankInputs, RankOutputs};
use wavefuse_ir::{
    AwqLayout, BufferData, BufferType, GptqLayout, Kernel, Role, ScalarType, Sharding, Weight,
    WeightFormat, ZeroPoint,
};

mod sealed {
    pub trait Sealed {}
}

/// A sharding over the TP group, as a type (the parameter `S` of the argument views).
pub trait ShardingKind: sealed::Sealed + fmt::Debug {
    /// The DSL keyword.
    const NAME: &'static str;
    /// Whether a parameter declared with sharding `s` has this sharding.
    fn matches(s: Sharding) -> bool;
}

macro_rules! sharding_kinds {
    ($($(#[$doc:meta])* $name:ident = $kw:literal if $pat:pat,)*) => {$(
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq)]
        pub struct $name;
        impl sealed::Sealed for $name {}
        impl ShardingKind for $name {
            const NAME: &'static str = $kw;
            fn matches(s: Sharding) -> bool {
                matches!(s, $pat)
            }
        }
    )*};
}

sharding_kinds! {
    /// Every rank holds the whole tensor.
    Replicated = "replicated" if Sharding::Replicated,
    /// Split along N (weights) or the feature axis (activations).
    ColParallel = "col_parallel" if Sharding::ColumnParallel { .. },
    /// A weight split along K.
    RowParallel = "row_parallel" if Sharding::RowParallel { .. },
    /// Per-rank partial sums.
    Partial = "partial" if Sharding::Partial { .. },
}

/// An element type of a tensor parameter.
pub trait Element: sealed::Sealed + Copy + fmt::Debug {
    /// The IR's scalar type.
    const DTYPE: ScalarType;
    /// The value, exactly, as the reference semantics hold it.
    fn to_f64(self) -> f64;
    /// A value of this type from one the reference semantics or a device produced (already
    /// representable in the type: read back from a buffer of it).
    fn from_f64(v: f64) -> Self;
}

macro_rules! elements {
    ($($t:ty = $d:ident, $to:expr, $from:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: ScalarType = ScalarType::$d;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
        }
    )*};
}

elements!(
    f16 = F16, f16::to_f64, f16::from_f64;
    bf16 = Bf16, bf16::to_f64, bf16::from_f64;
    f32 = F32, f64::from, |v: f64| v as f32;
    i8 = I8, f64::from, |v: f64| v as i8;
    i32 = I32, f64::from, |v: f64| v as i32;
    u32 = U32, f64::from, |v: f64| v as u32;
);

/// Why arguments do not fit a kernel.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArgError {
    /// The kernel is not the one these arguments were declared for.
    #[error("these arguments are for kernel `{expected}`, not `{found}`")]
    WrongKernel {
        /// The declaration's kernel.
        expected: String,
        /// The kernel given.
        found: String,
    },
    /// The kernel's parameters are not the declaration's.
    #[error("kernel `{kernel}` has parameters {found:?}, but these arguments bind {expected:?}")]
    Params {
        /// The kernel.
        kernel: String,
        /// Parameter names of the declaration.
        expected: Vec<String>,
        /// Parameter names of the kernel.
        found: Vec<String>,
    },
    /// A parameter bound with the wrong role.
    #[error("`{name}` is an {found} of the kernel, bound as an {bound}")]
    Role {
        /// The parameter.
        name: String,
        /// Its role in the kernel.
        found: &'static str,
        /// The role it was bound as.
        bound: &'static str,
    },
    /// A parameter bound with the wrong sharding.
    #[error("`{name}` is declared {declared} but bound as {bound}")]
    Sharding {
        /// The parameter.
        name: String,
        /// Its sharding in the kernel.
        declared: Sharding,
        /// The sharding of the bound view.
        bound: &'static str,
    },
    /// A tensor bound with the wrong element type.
    #[error("`{name}` holds {expected} elements, bound with {bound}")]
    Dtype {
        /// The parameter.
        name: String,
        /// Its element type.
        expected: ScalarType,
        /// The bound element type.
        bound: ScalarType,
    },
    /// A weight bound in another format or quantisation layout (a layout is never guessed).
    #[error("weight `{name}` is {expected} in the kernel, bound as {bound}")]
    Format {
        /// The parameter.
        name: String,
        /// The kernel's format.
        expected: String,
        /// The bound view's format.
        bound: String,
    },
    /// An array of the wrong length for this rank.
    #[error("`{name}`: {array} has {found} elements, the kernel's per-rank shape needs {expected}")]
    Length {
        /// The parameter.
        name: String,
        /// Which array (`data`, `qweight`, `scales`, `qzeros`, `g_idx`).
        array: &'static str,
        /// Required length.
        expected: usize,
        /// Bound length.
        found: usize,
    },
    /// The wrong number of peers for the kernel's TP group.
    #[error("the kernel's TP group has {expected} ranks but {found} peers are bound")]
    PeerCount {
        /// The kernel's TP size.
        expected: u32,
        /// Peers bound.
        found: u32,
    },
    /// A rank outside its TP group.
    #[error("rank {rank} is not in a TP group of {tp} ranks")]
    Rank {
        /// The rank.
        rank: u32,
        /// The group size.
        tp: u32,
    },
}

/// How one parameter is checked against a built kernel (implemented by every argument view).
pub trait Bind {
    /// Check this view against the parameter `name` of `kernel`.
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError>;

    /// An input's data as a launch binds it (the reference semantics' [`HostData`], per rank),
    /// for the parameter `name` of `kernel` (checked first); `None` for an output.
    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        self.check(kernel, name).map(|()| None)
    }

    /// Write a launch's result for this output (the parameter `name`) into the bound memory;
    /// nothing for an input.
    fn write(&mut self, _name: &str, _result: &HostTensor) -> Result<(), ArgError> {
        Ok(())
    }
}

/// One rank's arguments of a kernel, as a launcher takes them: implemented by every generated
/// `…Args` struct. `wavefuse_harness::launch` binds them to a device (or the simulator), runs
/// the generated kernel and writes the outputs back into the bound slices.
pub trait KernelArgs {
    /// [`check`](Bind::check) every argument against `kernel`.
    fn check_all(&self, kernel: &Kernel) -> Result<(), ArgError>;
    /// Every input's data, keyed by the kernel's buffer (checked first).
    fn inputs(&self, kernel: &Kernel) -> Result<RankInputs, ArgError>;
    /// Write every output of `outputs` (a launch's, for this rank) into the bound memory.
    fn write_outputs(&mut self, kernel: &Kernel, outputs: &RankOutputs) -> Result<(), ArgError>;
}

/// The kernel's buffer named `name` (for generated code).
pub fn buffer_named(kernel: &Kernel, name: &str) -> Option<wavefuse_ir::Buffer> {
    kernel
        .buffers()
        .find(|(_, d)| d.name == name)
        .map(|(b, _)| b)
}

/// Check that `kernel` is the declaration's kernel `name` with exactly these parameters.
pub fn check_kernel(kernel: &Kernel, name: &str, params: &[&str]) -> Result<(), ArgError> {
    if kernel.name() != name {
        return Err(ArgError::WrongKernel {
            expected: name.into(),
            found: kernel.name().into(),
        });
    }
    let found: Vec<String> = kernel.buffers().map(|(_, d)| d.name.clone()).collect();
    if found != params {
        let expected = params.iter().map(|p| p.to_string()).collect();
        return Err(ArgError::Params {
            kernel: name.into(),
            expected,
            found,
        });
    }
    Ok(())
}

fn param<'k, S: ShardingKind>(
    kernel: &'k Kernel,
    name: &str,
    role: Role,
) -> Result<&'k BufferData, ArgError> {
    let missing = || ArgError::Params {
        kernel: kernel.name().into(),
        expected: vec![name.into()],
        found: kernel.buffers().map(|(_, d)| d.name.clone()).collect(),
    };
    let b = kernel.buffer_by_name(name).ok_or_else(missing)?;
    let d = kernel.buffer(b).ok_or_else(missing)?;
    if d.role != role {
        let (found, bound) = (d.role.name(), role.name());
        return Err(ArgError::Role {
            name: name.into(),
            found,
            bound,
        });
    }
    if !S::matches(d.sharding) {
        return Err(ArgError::Sharding {
            name: name.into(),
            declared: d.sharding,
            bound: S::NAME,
        });
    }
    Ok(d)
}

fn length(name: &str, array: &'static str, expected: usize, found: usize) -> Result<(), ArgError> {
    if expected == found {
        Ok(())
    } else {
        Err(ArgError::Length {
            name: name.into(),
            array,
            expected,
            found,
        })
    }
}

fn check_tensor<T: Element>(d: &BufferData, name: &str, len: usize) -> Result<(), ArgError> {
    match d.local_type() {
        BufferType::Tensor(t) if t.dtype == T::DTYPE => length(name, "data", t.len(), len),
        BufferType::Tensor(t) => Err(ArgError::Dtype {
            name: name.into(),
            expected: t.dtype,
            bound: T::DTYPE,
        }),
        BufferType::Weight(w) => Err(ArgError::Format {
            name: name.into(),
            expected: w.format.to_string(),
            bound: "a dense tensor".into(),
        }),
    }
}

/// One rank's view of an input tensor: `data` holds the per-rank shard, row-major.
#[derive(Debug)]
pub struct Input<'a, T, S> {
    data: &'a [T],
    sharding: PhantomData<S>,
}

impl<'a, T: Element, S: ShardingKind> Input<'a, T, S> {
    /// Bind this rank's data.
    pub fn new(data: &'a [T]) -> Self {
        Input {
            data,
            sharding: PhantomData,
        }
    }

    /// The bound data.
    pub fn data(&self) -> &'a [T] {
        self.data
    }
}

impl<T: Element, S: ShardingKind> Bind for Input<'_, T, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        check_tensor::<T>(
            param::<S>(kernel, name, Role::Input)?,
            name,
            self.data.len(),
        )
    }

    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        self.check(kernel, name)?;
        let BufferType::Tensor(t) = param::<S>(kernel, name, Role::Input)?.local_type() else {
            unreachable!("checked: a tensor")
        };
        Ok(Some(HostData::Tensor(HostTensor {
            dtype: T::DTYPE,
            shape: t.shape.to_vec(),
            data: self.data.iter().map(|&v| v.to_f64()).collect(),
        })))
    }
}

/// One rank's view of an output tensor: `data` receives the per-rank shard, row-major.
#[derive(Debug)]
pub struct Output<'a, T, S> {
    data: &'a mut [T],
    sharding: PhantomData<S>,
}

impl<'a, T: Element, S: ShardingKind> Output<'a, T, S> {
    /// Bind this rank's output memory.
    pub fn new(data: &'a mut [T]) -> Self {
        Output {
            data,
            sharding: PhantomData,
        }
    }

    /// The bound memory.
    pub fn data(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: Element, S: ShardingKind> Bind for Output<'_, T, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        check_tensor::<T>(
            param::<S>(kernel, name, Role::Output)?,
            name,
            self.data.len(),
        )
    }

    fn write(&mut self, name: &str, result: &HostTensor) -> Result<(), ArgError> {
        length(name, "data", self.data.len(), result.data.len())?;
        for (d, &v) in self.data.iter_mut().zip(&result.data) {
            *d = T::from_f64(v);
        }
        Ok(())
    }
}

fn weight_of(d: &BufferData, name: &str, bound: &str) -> Result<Weight, ArgError> {
    match d.local_type() {
        BufferType::Weight(w) => Ok(w),
        BufferType::Tensor(t) => Err(ArgError::Format {
            name: name.into(),
            expected: format!("a dense {} tensor", t.dtype),
            bound: bound.into(),
        }),
    }
}

fn format_error(name: &str, expected: WeightFormat, bound: impl fmt::Display) -> ArgError {
    ArgError::Format {
        name: name.into(),
        expected: expected.to_string(),
        bound: bound.to_string(),
    }
}

/// One rank's shard of an FP16 weight, stored `[N, K]` row-major (the `f16_nk` format).
#[derive(Debug)]
pub struct F16Weight<'a, S> {
    data: &'a [f16],
    sharding: PhantomData<S>,
}

impl<'a, S: ShardingKind> F16Weight<'a, S> {
    /// Bind this rank's shard.
    pub fn new(data: &'a [f16]) -> Self {
        F16Weight {
            data,
            sharding: PhantomData,
        }
    }
}

impl<S: ShardingKind> Bind for F16Weight<'_, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        let w = weight_of(param::<S>(kernel, name, Role::Input)?, name, "f16_nk")?;
        if w.format != WeightFormat::F16 {
            return Err(format_error(name, w.format, WeightFormat::F16));
        }
        length(name, "data", w.k * w.n, self.data.len())
    }

    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        self.check(kernel, name)?;
        let data = self.data.iter().map(|v| v.to_f64()).collect();
        Ok(Some(HostData::F16Weight(data)))
    }
}

/// Quantisation scales, in the layout's scale type.
#[derive(Copy, Clone, Debug)]
pub enum Scales<'a> {
    /// FP16 scales (every GPTQ checkpoint we know).
    F16(&'a [f16]),
    /// BF16 scales.
    Bf16(&'a [bf16]),
    /// FP32 scales.
    F32(&'a [f32]),
}

impl Scales<'_> {
    fn dtype(&self) -> ScalarType {
        match self {
            Scales::F16(_) => ScalarType::F16,
            Scales::Bf16(_) => ScalarType::Bf16,
            Scales::F32(_) => ScalarType::F32,
        }
    }

    fn len(&self) -> usize {
        match self {
            Scales::F16(s) => s.len(),
            Scales::Bf16(s) => s.len(),
            Scales::F32(s) => s.len(),
        }
    }

    fn to_f64(self) -> Vec<f64> {
        match self {
            Scales::F16(s) => s.iter().map(|v| v.to_f64()).collect(),
            Scales::Bf16(s) => s.iter().map(|v| v.to_f64()).collect(),
            Scales::F32(s) => s.iter().map(|&v| f64::from(v)).collect(),
        }
    }
}

macro_rules! scales_from {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a> From<&'a [$t]> for Scales<'a> {
            fn from(s: &'a [$t]) -> Self {
                Scales::$v(s)
            }
        }

        impl<'a> From<&'a Vec<$t>> for Scales<'a> {
            fn from(s: &'a Vec<$t>) -> Self {
                Scales::$v(s)
            }
        }
    )*};
}

scales_from!(f16 => F16, bf16 => Bf16, f32 => F32);

/// One rank's shard of a GPTQ INT4 weight, exactly as stored in the checkpoint,
/// with the layout the checkpoint declares (zero-point convention, group size, act-order).
#[derive(Debug)]
pub struct Gptq<'a, S> {
    layout: GptqLayout,
    qweight: &'a [i32],
    scales: Scales<'a>,
    qzeros: &'a [i32],
    g_idx: Option<&'a [i32]>,
    sharding: PhantomData<S>,
}

impl<'a, S: ShardingKind> Gptq<'a, S> {
    /// Bind this rank's shard: `qweight` i32 `[K/8, N]`, `scales` `[K/G, N]`, `qzeros` i32
    /// `[K/G, N/8]` (empty for symmetric layouts), `g_idx` i32 `[K]` for act-order layouts.
    pub fn new(
        layout: GptqLayout,
        qweight: &'a [i32],
        scales: impl Into<Scales<'a>>,
        qzeros: &'a [i32],
        g_idx: Option<&'a [i32]>,
    ) -> Self {
        let scales = scales.into();
        Gptq {
            layout,
            qweight,
            scales,
            qzeros,
            g_idx,
            sharding: PhantomData,
        }
    }
}

impl<S: ShardingKind> Bind for Gptq<'_, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        let w = weight_of(param::<S>(kernel, name, Role::Input)?, name, "gptq")?;
        let l = self.layout;
        if w.format != WeightFormat::Gptq(l) || self.scales.dtype() != l.scale {
            return Err(format_error(name, w.format, WeightFormat::Gptq(l)));
        }
        let (k, n) = (w.k, w.n);
        let groups = k / l.group.rows(k).max(1);
        let zeros = if l.zero == ZeroPoint::Symmetric {
            0
        } else {
            groups * n / 8
        };
        length(name, "qweight", k / 8 * n, self.qweight.len())?;
        length(name, "scales", groups * n, self.scales.len())?;
        length(name, "qzeros", zeros, self.qzeros.len())?;
        let g_idx = if l.act_order { k } else { 0 };
        length(name, "g_idx", g_idx, self.g_idx.map_or(0, <[i32]>::len))
    }

    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        self.check(kernel, name)?;
        Ok(Some(HostData::Int4(PackedInt4 {
            qweight: self.qweight.to_vec(),
            scales: self.scales.to_f64(),
            qzeros: self.qzeros.to_vec(),
            g_idx: self.g_idx.map(<[i32]>::to_vec),
        })))
    }
}

/// One rank's shard of an AutoAWQ "GEMM" INT4 weight (`qweight` i32 `[K, N/8]`, `scales`
/// `[K/G, N]`, `qzeros` i32 `[K/G, N/8]`).
#[derive(Debug)]
pub struct Awq<'a, S> {
    layout: AwqLayout,
    qweight: &'a [i32],
    scales: Scales<'a>,
    qzeros: &'a [i32],
    sharding: PhantomData<S>,
}

impl<'a, S: ShardingKind> Awq<'a, S> {
    /// Bind this rank's shard.
    pub fn new(
        layout: AwqLayout,
        qweight: &'a [i32],
        scales: impl Into<Scales<'a>>,
        qzeros: &'a [i32],
    ) -> Self {
        let scales = scales.into();
        Awq {
            layout,
            qweight,
            scales,
            qzeros,
            sharding: PhantomData,
        }
    }
}

impl<S: ShardingKind> Bind for Awq<'_, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        let w = weight_of(param::<S>(kernel, name, Role::Input)?, name, "awq")?;
        let l = self.layout;
        if w.format != WeightFormat::Awq(l) || self.scales.dtype() != l.scale {
            return Err(format_error(name, w.format, WeightFormat::Awq(l)));
        }
        let (k, n) = (w.k, w.n);
        let groups = k / l.group.rows(k).max(1);
        length(name, "qweight", k * n / 8, self.qweight.len())?;
        length(name, "scales", groups * n, self.scales.len())?;
        length(name, "qzeros", groups * n / 8, self.qzeros.len())
    }

    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        self.check(kernel, name)?;
        Ok(Some(HostData::Int4(PackedInt4 {
            qweight: self.qweight.to_vec(),
            scales: self.scales.to_f64(),
            qzeros: self.qzeros.to_vec(),
            g_idx: None,
        })))
    }
}

/// A weight whose format is a run-time value (`weight(format)[k, n]` declarations).
#[derive(Debug)]
pub enum AnyWeight<'a, S> {
    /// FP16, stored `[N, K]`.
    F16(F16Weight<'a, S>),
    /// GPTQ INT4.
    Gptq(Gptq<'a, S>),
    /// AWQ INT4.
    Awq(Awq<'a, S>),
}

impl<S: ShardingKind> Bind for AnyWeight<'_, S> {
    fn check(&self, kernel: &Kernel, name: &str) -> Result<(), ArgError> {
        match self {
            AnyWeight::F16(w) => w.check(kernel, name),
            AnyWeight::Gptq(w) => w.check(kernel, name),
            AnyWeight::Awq(w) => w.check(kernel, name),
        }
    }

    fn host_data(&self, kernel: &Kernel, name: &str) -> Result<Option<HostData>, ArgError> {
        match self {
            AnyWeight::F16(w) => w.host_data(kernel, name),
            AnyWeight::Gptq(w) => w.host_data(kernel, name),
            AnyWeight::Awq(w) => w.host_data(kernel, name),
        }
    }
}

/// The TP group's exchange buffers as one rank's kernel addresses them: slot `i` holds the
/// buffer of rank `peer_order(tp).nth(i)` (see [`peer_order`](crate::peer_order)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peers {
    rank: u32,
    slots: Vec<u64>,
}

impl Peers {
    /// Peers of `rank`, from every rank's exchange-buffer address indexed by rank
    /// (`by_rank[r]` is rank r's). The group size is `by_rank.len()`. The addresses are put in
    /// slot order here, by the one rule, so host code never orders peers itself.
    pub fn new(rank: u32, by_rank: &[u64]) -> Result<Self, ArgError> {
        let tp = u32::try_from(by_rank.len()).unwrap_or(u32::MAX);
        if rank >= tp {
            return Err(ArgError::Rank { rank, tp });
        }
        let slots = crate::peer_order(tp).map(|r| by_rank[r as usize]).collect();
        Ok(Peers { rank, slots })
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the group.
    pub fn tp(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The addresses in slot order, as the kernel takes them.
    pub fn slots(&self) -> &[u64] {
        &self.slots
    }

    /// Check the group size against the kernel's.
    pub fn check(&self, kernel: &Kernel) -> Result<(), ArgError> {
        if self.tp() != kernel.tp() {
            return Err(ArgError::PeerCount {
                expected: kernel.tp(),
                found: self.tp(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, GroupSize, Tensor};

    crate::kernel! {
        fn down(tp: u32, k: usize, layout: GptqLayout) across tp {
            in w: gptq(layout)[k, 256] row_parallel;
            in x: f16[1, k] col_parallel;
            out y: f16[1, 256];

            y = round_f16(allreduce(gemv.row(w, x)));
        }
    }

    fn layout(zero: ZeroPoint) -> GptqLayout {
        GptqLayout::new(GroupSize::Rows(128), zero)
    }

    struct Data {
        qweight: Vec<i32>,
        scales: Vec<f16>,
        qzeros: Vec<i32>,
        x: Vec<f16>,
        y: Vec<f16>,
    }

    fn data(k: usize) -> Data {
        Data {
            qweight: vec![0; k / 8 * 256],
            scales: vec![f16::ONE; k / 128 * 256],
            qzeros: vec![0; k / 128 * 32],
            x: vec![f16::ZERO; k],
            y: vec![f16::ZERO; 256],
        }
    }

    fn args<'a>(d: &'a mut Data, zero: ZeroPoint, peers: usize) -> DownArgs<'a> {
        DownArgs {
            w: Gptq::new(layout(zero), &d.qweight, &d.scales, &d.qzeros, None),
            x: Input::new(&d.x),
            y: Output::new(&mut d.y),
            peers: Peers::new(0, &vec![0; peers]).unwrap(),
        }
    }

    #[test]
    fn matching_arguments_pass() {
        let mut d = data(512);
        assert_eq!(
            args(&mut d, ZeroPoint::V1, 4).check(&down(4, 512, layout(ZeroPoint::V1))),
            Ok(())
        );
    }

    #[test]
    fn invalid_peer_count() {
        let mut d = data(512);
        let err = args(&mut d, ZeroPoint::V1, 2).check(&down(4, 512, layout(ZeroPoint::V1)));
        assert_eq!(
            err,
            Err(ArgError::PeerCount {
                expected: 4,
                found: 2
            })
        );
    }

    #[test]
    fn invalid_zero_point_convention() {
        let mut d = data(512);
        let err = args(&mut d, ZeroPoint::V2, 4).check(&down(4, 512, layout(ZeroPoint::V1)));
        assert!(
            matches!(err, Err(ArgError::Format { ref name, .. }) if name == "w"),
            "{err:?}"
        );
    }

    #[test]
    fn invalid_shard_length() {
        let mut d = data(512);
        let err = args(&mut d, ZeroPoint::V1, 4).check(&down(4, 1024, layout(ZeroPoint::V1)));
        let expected = ArgError::Length {
            name: "w".into(),
            array: "qweight",
            expected: 32768,
            found: 16384,
        };
        assert_eq!(err, Err(expected));
    }

    #[test]
    fn invalid_sharding_of_a_kernel_built_by_hand() {
        // Same name and parameters, but the weight is column-parallel: caught at run time too.
        let mut b = Builder::new("down", 4);
        let format = WeightFormat::Gptq(layout(ZeroPoint::V1));
        let col = Sharding::ColumnParallel { tp: 4 };
        b.input(
            "w",
            Weight {
                format,
                k: 512,
                n: 256,
            },
            col,
        );
        b.input("x", Tensor::activation(ScalarType::F16, 1, 512), col);
        b.output(
            "y",
            Tensor::activation(ScalarType::F16, 1, 256),
            Sharding::Replicated,
        );
        let mut d = data(512);
        let err = args(&mut d, ZeroPoint::V1, 4).check(&b.finish());
        assert!(
            matches!(
                err,
                Err(ArgError::Sharding {
                    bound: "row_parallel",
                    ..
                })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn invalid_kernel() {
        let mut d = data(512);
        let other = Builder::new("up", 4).finish();
        let err = args(&mut d, ZeroPoint::V1, 4).check(&other);
        assert!(matches!(err, Err(ArgError::WrongKernel { .. })), "{err:?}");
    }

    #[test]
    fn peers_follow_peer_order() {
        // Every rank sees the same table, in the device's slot order (the rule of wavefuse_ir).
        for rank in 0..4 {
            let peers = Peers::new(rank, &[10, 11, 12, 13]).unwrap();
            for p in 0..4u32 {
                assert_eq!(peers.slots()[crate::ir::peer_slot(p)], 10 + u64::from(p));
            }
        }
        assert_eq!(
            Peers::new(4, &[10, 11, 12, 13]),
            Err(ArgError::Rank { rank: 4, tp: 4 })
        );
        for tp in [1, 2, 4, 8] {
            let order: Vec<u32> = crate::peer_order(tp).collect();
            assert_eq!(
                order,
                (0..tp).collect::<Vec<_>>(),
                "every rank exactly once, by slot"
            );
        }
    }
}
