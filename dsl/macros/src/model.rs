//! The checked kernel: what `valid` produces from the AST and `expand` turns into builder calls.
//! Keywords are resolved; every value has a number in creation order; steps are in program
//! order (loads where an input is first used, stores where an output is assigned).

use proc_macro2::TokenStream;
use syn::Ident;

use crate::ast::{KernelDef, Role};
use crate::ops::Op;

/// A kernel that passed every token-level check.
pub struct Kernel<'a> {
    /// The declaration.
    pub def: &'a KernelDef,
    /// Buffer parameters, in declaration order.
    pub buffers: Vec<Buffer<'a>>,
    /// Program order.
    pub steps: Vec<Step<'a>>,
    /// Whether an op communicates over the TP group.
    pub collective: bool,
}

/// A resolved parameter declaration.
pub struct Buffer<'a> {
    /// Its name.
    pub name: &'a Ident,
    /// Input or output.
    pub role: Role,
    /// Its type.
    pub ty: BufType<'a>,
    /// Its sharding.
    pub sharding: Sharding,
    /// `@host`, if given.
    pub host: bool,
    /// `index = global`, if given.
    pub global_index: bool,
}

/// A resolved parameter type.
pub enum BufType<'a> {
    /// A dense tensor.
    Tensor {
        /// Element type.
        dtype: Dtype,
        /// Dimensions (Rust `usize` expressions).
        dims: &'a [syn::Expr],
    },
    /// A weight matrix `[K, N]`.
    Weight {
        /// Storage format.
        format: Format<'a>,
        /// Reduction length.
        k: &'a syn::Expr,
        /// Output length.
        n: &'a syn::Expr,
    },
}

/// A weight's storage format.
pub enum Format<'a> {
    /// `f16_nk`.
    F16,
    /// `gptq<…>`.
    GptqLit(GptqLit),
    /// `gptq(EXPR)`: a `GptqLayout` value.
    GptqExpr(&'a syn::Expr),
    /// `awq<…>`.
    AwqLit(AwqLit),
    /// `awq(EXPR)`: an `AwqLayout` value.
    AwqExpr(&'a syn::Expr),
    /// `weight(EXPR)`: a `WeightFormat` value.
    Any(&'a syn::Expr),
}

/// A GPTQ layout written out in the declaration.
#[derive(Copy, Clone)]
pub struct GptqLit {
    /// Group size.
    pub group: Group,
    /// Zero-point convention.
    pub zero: Zero,
    /// Scale type.
    pub scale: Dtype,
    /// Whether a `g_idx` tensor is present.
    pub act_order: bool,
}

/// An AWQ layout written out in the declaration.
#[derive(Copy, Clone)]
pub struct AwqLit {
    /// Group size.
    pub group: Group,
    /// Scale type.
    pub scale: Dtype,
}

/// A group size.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Group {
    /// `group = 128`.
    Rows(u32),
    /// `group = per_channel`.
    PerChannel,
}

/// A zero-point convention.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Zero {
    /// `zero = v1`: stored z − 1.
    V1,
    /// `zero = v2`: stored z.
    V2,
    /// `zero = sym`: no qzeros, z = 8.
    Sym,
}

/// An element type.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Dtype {
    /// `f16`.
    F16,
    /// `bf16`.
    Bf16,
    /// `f32`.
    F32,
    /// `i8`.
    I8,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
}

/// Every element type, by name.
pub const DTYPES: [(&str, Dtype); 6] = [
    ("f16", Dtype::F16),
    ("bf16", Dtype::Bf16),
    ("f32", Dtype::F32),
    ("i8", Dtype::I8),
    ("i32", Dtype::I32),
    ("u32", Dtype::U32),
];

impl Dtype {
    /// The name, as written.
    pub fn name(self) -> &'static str {
        DTYPES
            .iter()
            .find(|(_, d)| *d == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::Bf16 | Dtype::F32)
    }
}

/// A buffer's distribution over the TP group.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Sharding {
    /// `replicated` (the default).
    Replicated,
    /// `col_parallel`.
    Col,
    /// `row_parallel`.
    Row,
    /// `partial`.
    Partial,
}

/// Every sharding, by name.
pub const SHARDINGS: [(&str, Sharding); 4] = [
    ("replicated", Sharding::Replicated),
    ("col_parallel", Sharding::Col),
    ("row_parallel", Sharding::Row),
    ("partial", Sharding::Partial),
];

impl Sharding {
    /// The name, as written.
    pub fn name(self) -> &'static str {
        SHARDINGS
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("?", |(n, _)| n)
    }
}

/// One step of the program.
pub enum Step<'a> {
    /// `value = load buffer` (an input's first use).
    Load {
        /// The input.
        buf: usize,
        /// The value defined.
        value: usize,
    },
    /// An op.
    Op {
        /// Which op.
        op: Op,
        /// The weight parameter of a GEMV.
        weight: Option<usize>,
        /// Value operands.
        args: Vec<usize>,
        /// Attribute expressions, in the op table's order.
        attrs: Vec<&'a syn::Expr>,
        /// Values defined.
        results: Vec<usize>,
        /// The call's tokens, for spans.
        tokens: TokenStream,
    },
    /// `store value, buffer` (an output assignment).
    Store {
        /// The value stored.
        value: usize,
        /// The output.
        buf: usize,
    },
}
