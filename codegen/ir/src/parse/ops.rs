//! What each op's line looks like: its operands, attributes and results, and how the parsed
//! pieces become an [`OpKind`]. The table mirrors `OpKind::mnemonic`, `args`, `buffer` and
//! `attributes`, which the printer writes in that order.

use crate::entities::{Buffer, Value};
use crate::ops::*;

/// One operand slot of an op line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// A value (`v3`).
    Value,
    /// A buffer (`buf1`).
    Buffer,
}

/// An attribute's kind of number.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum AttrKind {
    /// A size or index (capped like a dimension).
    Size,
    /// A TP group size.
    Tp,
    /// A float (`eps`).
    Float,
}

/// The shape of one op's line.
pub(super) struct Signature {
    pub mnemonic: &'static str,
    pub results: usize,
    pub operands: &'static [Slot],
    pub attrs: &'static [(&'static str, AttrKind)],
    /// The line's form, for error notes.
    pub usage: &'static str,
}

use AttrKind::{Float, Size, Tp};
use Slot::{Buffer as B, Value as V};

const fn sig(
    mnemonic: &'static str,
    results: usize,
    operands: &'static [Slot],
    attrs: &'static [(&'static str, AttrKind)],
    usage: &'static str,
) -> Signature {
    Signature {
        mnemonic,
        results,
        operands,
        attrs,
        usage,
    }
}

/// Every op the printer can write.
pub(super) const SIGNATURES: &[Signature] = &[
    sig("load", 1, &[B], &[], "v = load buf"),
    sig("store", 0, &[V, B], &[], "store v, buf"),
    sig("gemv.rep", 1, &[B, V], &[], "v = gemv.rep weight_buf, x"),
    sig("gemv.col", 1, &[B, V], &[], "v = gemv.col weight_buf, x"),
    sig("gemv.row", 1, &[B, V], &[], "v = gemv.row weight_buf, x"),
    sig(
        "gemv_q8.rep",
        1,
        &[B, V, V],
        &[("block", Size)],
        "v = gemv_q8.rep weight_buf, codes, scales, block=B",
    ),
    sig(
        "gemv_q8.col",
        1,
        &[B, V, V],
        &[("block", Size)],
        "v = gemv_q8.col weight_buf, codes, scales, block=B",
    ),
    sig(
        "gemv_q8.row",
        1,
        &[B, V, V],
        &[("block", Size)],
        "v = gemv_q8.row weight_buf, codes, scales, block=B",
    ),
    sig("add", 1, &[V, V], &[], "v = add a, b"),
    sig("mul", 1, &[V, V], &[], "v = mul a, b"),
    sig("silu", 1, &[V], &[], "v = silu x"),
    sig("round_f16", 1, &[V], &[], "v = round_f16 x"),
    sig(
        "slice",
        1,
        &[V],
        &[("start", Size), ("len", Size)],
        "v = slice x, start=S, len=L",
    ),
    sig(
        "rmsnorm",
        1,
        &[V, V],
        &[("eps", Float)],
        "v = rmsnorm x, weight, eps=E",
    ),
    sig("reduce.sum", 1, &[V], &[], "v = reduce.sum x"),
    sig("reduce.sumsq", 1, &[V], &[], "v = reduce.sumsq x"),
    sig("reduce.absmax", 1, &[V], &[], "v = reduce.absmax x"),
    sig("allreduce", 1, &[V], &[("tp", Tp)], "v = allreduce x, tp=T"),
    sig(
        "allreduce.int8",
        1,
        &[V],
        &[("tp", Tp), ("block", Size)],
        "v = allreduce.int8 x, tp=T, block=B",
    ),
    sig(
        "quantize_int8",
        2,
        &[V],
        &[("block", Size)],
        "codes, scales = quantize_int8 x, block=B",
    ),
    sig(
        "quantize_int8.rne",
        2,
        &[V],
        &[("block", Size), ("clamp", Size)],
        "codes, scales = quantize_int8.rne x, block=B, clamp=C",
    ),
    sig(
        "dequantize_int8",
        1,
        &[V, V],
        &[("block", Size)],
        "v = dequantize_int8 codes, scales, block=B",
    ),
];

/// A parsed operand.
#[derive(Copy, Clone, Debug)]
pub(super) enum Operand {
    Value(Value),
    Buffer(Buffer),
}

/// A parsed attribute.
#[derive(Copy, Clone, Debug)]
pub(super) enum Attr {
    Int(u64),
    Float(f64),
}

/// Reads parsed operands and attributes in signature order. The parser filled them from the
/// signature, so a mismatch is a bug of this file; it falls back to index 0 rather than panic.
struct Args<'a> {
    operands: &'a [Operand],
    attrs: &'a [Attr],
}

impl Args<'_> {
    fn value(&self, i: usize) -> Value {
        match self.operands.get(i) {
            Some(Operand::Value(v)) => *v,
            _ => Value::from_u32(0),
        }
    }

    fn buffer(&self, i: usize) -> Buffer {
        match self.operands.get(i) {
            Some(Operand::Buffer(b)) => *b,
            _ => Buffer::from_u32(0),
        }
    }

    fn int(&self, i: usize) -> u64 {
        match self.attrs.get(i) {
            Some(Attr::Int(n)) => *n,
            _ => 0,
        }
    }

    /// A size attribute; the parser capped it far below `usize::MAX`.
    fn size(&self, i: usize) -> usize {
        usize::try_from(self.int(i)).unwrap_or(usize::MAX)
    }

    fn tp(&self, i: usize) -> u32 {
        u32::try_from(self.int(i)).unwrap_or(u32::MAX)
    }

    fn float(&self, i: usize) -> f64 {
        match self.attrs.get(i) {
            Some(Attr::Float(x)) => *x,
            _ => f64::NAN,
        }
    }
}

/// The op of a line whose pieces match `mnemonic`'s signature.
pub(super) fn build(mnemonic: &str, operands: &[Operand], attrs: &[Attr]) -> Option<OpKind> {
    let a = Args { operands, attrs };
    let gemv = |parallel| {
        OpKind::Gemv(Gemv {
            weight: a.buffer(0),
            x: a.value(1),
            parallel,
        })
    };
    let gemv_q8 = |parallel| {
        OpKind::GemvQ8(GemvQ8 {
            weight: a.buffer(0),
            codes: a.value(1),
            scales: a.value(2),
            block: a.size(0),
            parallel,
        })
    };
    let binary = |op| {
        OpKind::Binary(Binary {
            op,
            a: a.value(0),
            b: a.value(1),
        })
    };
    let reduce = |op| OpKind::Reduce(Reduce { op, x: a.value(0) });
    let kind = match mnemonic {
        "load" => OpKind::Load(Load {
            buffer: a.buffer(0),
        }),
        "store" => OpKind::Store(Store {
            value: a.value(0),
            buffer: a.buffer(1),
        }),
        "gemv.rep" => gemv(Parallelism::Replicated),
        "gemv.col" => gemv(Parallelism::Column),
        "gemv.row" => gemv(Parallelism::Row),
        "gemv_q8.rep" => gemv_q8(Parallelism::Replicated),
        "gemv_q8.col" => gemv_q8(Parallelism::Column),
        "gemv_q8.row" => gemv_q8(Parallelism::Row),
        "add" => binary(BinaryOp::Add),
        "mul" => binary(BinaryOp::Mul),
        "silu" => OpKind::Unary(Unary {
            op: UnaryOp::Silu,
            x: a.value(0),
        }),
        "round_f16" => OpKind::RoundF16(RoundF16 { x: a.value(0) }),
        "slice" => OpKind::Slice(Slice {
            x: a.value(0),
            start: a.size(0),
            len: a.size(1),
        }),
        "rmsnorm" => OpKind::RmsNorm(RmsNorm {
            x: a.value(0),
            weight: a.value(1),
            eps: a.float(0),
        }),
        "reduce.sum" => reduce(ReduceOp::Sum),
        "reduce.sumsq" => reduce(ReduceOp::SumSquares),
        "reduce.absmax" => reduce(ReduceOp::AbsMax),
        "allreduce" => OpKind::AllReduce(AllReduce {
            x: a.value(0),
            tp: a.tp(0),
            compression: Compression::None,
        }),
        "allreduce.int8" => OpKind::AllReduce(AllReduce {
            x: a.value(0),
            tp: a.tp(0),
            compression: Compression::Int8 { block: a.size(1) },
        }),
        "quantize_int8" => OpKind::QuantizeInt8(QuantizeInt8 {
            x: a.value(0),
            block: a.size(0),
        }),
        "quantize_int8.rne" => OpKind::QuantizeRne(QuantizeRne {
            x: a.value(0),
            block: a.size(0),
            clamp: a.size(1),
        }),
        "dequantize_int8" => OpKind::DequantizeInt8(DequantizeInt8 {
            codes: a.value(0),
            scales: a.value(1),
            block: a.size(0),
        }),
        _ => return None,
    };
    Some(kind)
}
