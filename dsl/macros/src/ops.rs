//! The op table of the kernel language: names (the textual IR's mnemonics), operands,
//! attributes and results. `valid` checks calls against it; `expand` maps each op to a builder
//! call. Loads and stores are not here: an input is loaded at its first use and an output is
//! stored by `output = …;`.

/// How a GEMV is split over the TP group (must match the weight's sharding).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Mode {
    /// `gemv.rep`: replicated weight.
    Rep,
    /// `gemv.col`: column-parallel weight.
    Col,
    /// `gemv.row`: row-parallel weight.
    Row,
}

/// `reduce.*` variants.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Reduce {
    /// `reduce.sum`.
    Sum,
    /// `reduce.sumsq`.
    SumSquares,
    /// `reduce.absmax`.
    AbsMax,
}

/// One op of the language.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Op {
    /// `gemv.MODE(weight, x)`.
    Gemv(Mode),
    /// `gemv_q8.MODE(weight, codes, scales, block = B)`: INT4 weight, q8 activations.
    GemvQ8(Mode),
    /// `add(a, b)` or `a + b`.
    Add,
    /// `mul(a, b)` or `a * b`.
    Mul,
    /// `silu(x)`.
    Silu,
    /// `round_f16(x)`.
    RoundF16,
    /// `slice(x, start = S, len = L)`.
    Slice,
    /// `rmsnorm(x, weight, eps = E)`.
    RmsNorm,
    /// `reduce.OP(x)`.
    Reduce(Reduce),
    /// `allreduce(x)`.
    AllReduce,
    /// `allreduce.int8(x, block = B)`.
    AllReduceInt8,
    /// `let (codes, scales) = quantize_int8(x, block = B)`.
    QuantizeInt8,
    /// `dequantize_int8(codes, scales, block = B)`.
    DequantizeInt8,
    /// `let (codes, scales) = quantize_int8.rne(x, block = B, clamp = C)`.
    QuantizeRne,
}

/// The Rust type an attribute's expression must have.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum AttrType {
    /// `f64`.
    F64,
    /// `usize`.
    Usize,
}

/// Every op, for "did you mean".
pub const ALL: [Op; 20] = [
    Op::Gemv(Mode::Rep),
    Op::Gemv(Mode::Col),
    Op::Gemv(Mode::Row),
    Op::GemvQ8(Mode::Rep),
    Op::GemvQ8(Mode::Col),
    Op::GemvQ8(Mode::Row),
    Op::Add,
    Op::Mul,
    Op::Silu,
    Op::RoundF16,
    Op::Slice,
    Op::RmsNorm,
    Op::Reduce(Reduce::Sum),
    Op::Reduce(Reduce::SumSquares),
    Op::Reduce(Reduce::AbsMax),
    Op::AllReduce,
    Op::AllReduceInt8,
    Op::QuantizeInt8,
    Op::DequantizeInt8,
    Op::QuantizeRne,
];

impl Op {
    /// The name, as written in the DSL and printed in the textual IR.
    pub fn name(self) -> &'static str {
        match self {
            Op::Gemv(Mode::Rep) => "gemv.rep",
            Op::Gemv(Mode::Col) => "gemv.col",
            Op::Gemv(Mode::Row) => "gemv.row",
            Op::GemvQ8(Mode::Rep) => "gemv_q8.rep",
            Op::GemvQ8(Mode::Col) => "gemv_q8.col",
            Op::GemvQ8(Mode::Row) => "gemv_q8.row",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Silu => "silu",
            Op::RoundF16 => "round_f16",
            Op::Slice => "slice",
            Op::RmsNorm => "rmsnorm",
            Op::Reduce(Reduce::Sum) => "reduce.sum",
            Op::Reduce(Reduce::SumSquares) => "reduce.sumsq",
            Op::Reduce(Reduce::AbsMax) => "reduce.absmax",
            Op::AllReduce => "allreduce",
            Op::AllReduceInt8 => "allreduce.int8",
            Op::QuantizeInt8 => "quantize_int8",
            Op::DequantizeInt8 => "dequantize_int8",
            Op::QuantizeRne => "quantize_int8.rne",
        }
    }

    /// The op with this name.
    pub fn from_name(name: &str) -> Option<Op> {
        ALL.into_iter().find(|op| op.name() == name)
    }

    /// Operand names, in order (the first operand of a GEMV is a weight parameter).
    pub fn operands(self) -> &'static [&'static str] {
        match self {
            Op::Gemv(_) => &["weight", "x"],
            Op::GemvQ8(_) => &["weight", "codes", "scales"],
            Op::Add | Op::Mul => &["a", "b"],
            Op::RmsNorm => &["x", "weight"],
            Op::DequantizeInt8 => &["codes", "scales"],
            _ => &["x"],
        }
    }

    /// Attribute names and types, in the order the builder takes them.
    pub fn attrs(self) -> &'static [(&'static str, AttrType)] {
        match self {
            Op::Slice => &[("start", AttrType::Usize), ("len", AttrType::Usize)],
            Op::RmsNorm => &[("eps", AttrType::F64)],
            Op::AllReduceInt8 | Op::QuantizeInt8 | Op::DequantizeInt8 | Op::GemvQ8(_) => {
                &[("block", AttrType::Usize)]
            }
            Op::QuantizeRne => &[("block", AttrType::Usize), ("clamp", AttrType::Usize)],
            _ => &[],
        }
    }

    /// How many values the op defines.
    pub fn results(self) -> usize {
        if matches!(self, Op::QuantizeInt8 | Op::QuantizeRne) {
            2
        } else {
            1
        }
    }

    /// Whether the first operand is a weight parameter (the GEMVs).
    pub fn has_weight(self) -> bool {
        matches!(self, Op::Gemv(_) | Op::GemvQ8(_))
    }

    /// Whether the op communicates over the TP group (and so needs `across` and peers).
    pub fn collective(self) -> bool {
        matches!(self, Op::AllReduce | Op::AllReduceInt8)
    }

    /// What to write instead of a bare family name (`gemv`, `reduce`), if `name` is one.
    pub fn family_hint(name: &str) -> Option<&'static str> {
        match name {
            "gemv" => Some(
                "say how the GEMV is split over the TP group: `gemv.col` (column-parallel \
                 weight), `gemv.row` (row-parallel weight, partial sums) or `gemv.rep` \
                 (replicated weight)",
            ),
            "gemv_q8" => Some(
                "say how the GEMV is split over the TP group: `gemv_q8.col`, `gemv_q8.row` or \
                 `gemv_q8.rep`",
            ),
            "reduce" => {
                Some("say which reduction: `reduce.sum`, `reduce.sumsq` or `reduce.absmax`")
            }
            _ => None,
        }
    }
}
