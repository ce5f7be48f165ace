//! Per-lane expressions: pure, evaluated left to right, no memory access.

use super::{Param, Reg, Ty};

/// Hardware indices and sizes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// Lane index within the workgroup, `0 .. workgroup_size` (u32).
    LocalId,
    /// Workgroup index within the rank's grid, `0 .. grid` (u32, uniform).
    WorkgroupId,
    /// Workgroups in the rank's grid (u32, uniform).
    NumWorkgroups,
    /// Lane index within the wave, `0 .. wave_size` (u32).
    LaneId,
    /// Wave index within the workgroup (u32, uniform per wave).
    WaveId,
}

/// Binary operators. Arithmetic operands have equal types; comparisons yield `Bool`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b` (integers wrap).
    Add,
    /// `a − b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b` (integers: truncating; the divisor is never zero in generated code).
    Div,
    /// `a % b`.
    Rem,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
    /// Bitwise and (or logical and on `Bool`).
    And,
    /// Bitwise or (or logical or on `Bool`).
    Or,
    /// Bitwise xor.
    Xor,
    /// Shift left.
    Shl,
    /// Shift right (logical for u32, arithmetic for i32).
    Shr,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a >= b`.
    Ge,
    /// `a > b`.
    Gt,
}

impl BinOp {
    /// Whether the result is a `Bool` comparison.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Eq | BinOp::Ne | BinOp::Ge | BinOp::Gt
        )
    }
}

/// Unary operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `−a`.
    Neg,
    /// Logical / bitwise not.
    Not,
    /// `|a|`.
    Abs,
    /// `e^a` (f32).
    Exp,
    /// `1 / sqrt(a)` (f32).
    Rsqrt,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// An integer or boolean constant of the given type.
    Int(i64, Ty),
    /// A floating-point constant of the given type.
    Float(f64, Ty),
    /// A register's current value.
    Reg(Reg),
    /// A scalar parameter's value (uniform).
    Param(Param),
    /// A hardware index.
    Special(Special),
    /// A binary operation.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A unary operation.
    Un(UnOp, Box<Expr>),
    /// Numeric conversion; float → f16 rounds to nearest even, float → int truncates.
    Cast(Ty, Box<Expr>),
    /// Reinterpret the bits of a 32-bit value (u32, i32 or f32) as another 32-bit type. The
    /// INT4 "magic number" decode uses it: `bitcast<f32>(0x4B00_0000 | q)` is `2^23 + q` exactly.
    Bitcast(Ty, Box<Expr>),
    /// Two FP16 values packed into a u32, the first in the low 16 bits (an MMA operand pair).
    PackHalf2(Box<Expr>, Box<Expr>),
    /// Lane-wise FP16 subtraction of two packed pairs (u32 each), rounding to nearest even: the
    /// PTX `sub.rn.f16x2`. Exact on the small integers of the INT4 decode.
    SubHalf2(Box<Expr>, Box<Expr>),
    /// Lane-wise FP16 fused multiply-add of packed pairs (u32 each), `a·b + c` rounded once to
    /// nearest even: the PTX `fma.rn.f16x2`. The INT4 decode uses it on odd nibbles left in
    /// place: `(1024 + 16q)·(1/16) − (64 + z)` is exactly `q − z`.
    FmaHalf2(Box<Expr>, Box<Expr>, Box<Expr>),
    /// FP16 pair dot product into f32: `a.lo·b.lo + a.hi·b.hi + c` (`a`, `b` packed pairs, u32;
    /// `c` f32), the products exact and one rounding to f32 (gfx906 `v_dot2_f32_f16`). The INT4
    /// decode of the dot2 path feeds it exact `q − z` pairs.
    Dot2F16(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Signed 8-bit dot product into i32: `c + Σ_i a.i·b.i` over the four bytes of `a` and `b`
    /// (u32 each, bytes sign-extended; `c` i32, wrapping, no saturation): gfx906
    /// `v_dot4_i32_i8`, CUDA `__dp4a`. Exact: the q8 GEMV's `(q − z)·code` sums.
    Dot4I8(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `cond ? a : b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Unsigned bitfield extract: `(value >> offset) & ((1 << width) − 1)` on u32.
    Bfe {
        /// The u32 word.
        value: Box<Expr>,
        /// First bit.
        offset: Box<Expr>,
        /// Number of bits (1..=32).
        width: u32,
    },
    /// `a · b + c` with one rounding (f32).
    Fma(Box<Expr>, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// A u32 constant.
    pub fn u32(v: u32) -> Expr {
        Expr::Int(i64::from(v), Ty::U32)
    }

    /// An i32 constant.
    pub fn i32(v: i32) -> Expr {
        Expr::Int(i64::from(v), Ty::I32)
    }

    /// An f32 constant.
    pub fn f32(v: f32) -> Expr {
        Expr::Float(f64::from(v), Ty::F32)
    }

    /// A binary operation.
    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Bin(op, Box::new(a), Box::new(b))
    }

    /// `a + b`.
    pub fn add(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }

    /// `a · b`.
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }

    /// A conversion.
    pub fn cast(ty: Ty, a: Expr) -> Expr {
        Expr::Cast(ty, Box::new(a))
    }

    /// A reinterpretation of a 32-bit value's bits.
    pub fn bitcast(ty: Ty, a: Expr) -> Expr {
        Expr::Bitcast(ty, Box::new(a))
    }
}

impl From<Reg> for Expr {
    fn from(r: Reg) -> Self {
        Expr::Reg(r)
    }
}

impl From<Special> for Expr {
    fn from(s: Special) -> Self {
        Expr::Special(s)
    }
}
