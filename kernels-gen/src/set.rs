//! The kernel set of DESIGN.md §3, built with the builder API.

use std::fmt;
use std::str::FromStr;

use wavefuse::ir::{
    Builder, Kernel, Parallelism, ScalarType, Sharding, Tensor, Weight, WeightFormat,
};

use crate::shapes::{HIDDEN, INT8_BLOCK, RMS_EPS, Shapes};

/// One kernel of the set.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelId {
    /// y = W·x, FP16 weights (attention Q + gate, column-parallel).
    GemvF16,
    /// GPTQ INT4 GEMV (FFN up, column-parallel).
    GemvInt4,
    /// silu(gate·x) · (up·x), one read of x.
    GemvInt4DualSilu,
    /// One launch writing Q, K and V by column range.
    GemvInt4Qkv,
    /// TP allreduce of a partial vector plus residual add.
    AllreduceResidual,
    /// As `AllreduceResidual`, then RMSNorm; two outputs.
    AllreduceResidualRmsnorm,
    /// Row-parallel INT4 GEMV, allreduce, residual add, RMSNorm: the fused kernel.
    GemvInt4AllreduceRmsnorm,
    /// Allreduce with a block-absmax INT8 payload.
    AllreduceInt8,
}

impl KernelId {
    /// Every kernel, in DESIGN.md order.
    pub const ALL: [KernelId; 8] = [
        KernelId::GemvF16,
        KernelId::GemvInt4,
        KernelId::GemvInt4DualSilu,
        KernelId::GemvInt4Qkv,
        KernelId::AllreduceResidual,
        KernelId::AllreduceResidualRmsnorm,
        KernelId::GemvInt4AllreduceRmsnorm,
        KernelId::AllreduceInt8,
    ];

    /// The kernel's name.
    pub fn name(self) -> &'static str {
        match self {
            KernelId::GemvF16 => "gemv_f16",
            KernelId::GemvInt4 => "gemv_int4",
            KernelId::GemvInt4DualSilu => "gemv_int4_dual_silu",
            KernelId::GemvInt4Qkv => "gemv_int4_qkv",
            KernelId::AllreduceResidual => "allreduce_residual",
            KernelId::AllreduceResidualRmsnorm => "allreduce_residual_rmsnorm",
            KernelId::GemvInt4AllreduceRmsnorm => "gemv_int4_allreduce_rmsnorm",
            KernelId::AllreduceInt8 => "allreduce_int8",
        }
    }

    /// One line on what it computes.
    pub fn summary(self) -> &'static str {
        match self {
            KernelId::GemvF16 => "y = W·x, FP16 weights (attention Q+gate, column-parallel)",
            KernelId::GemvInt4 => "y = W·x, GPTQ INT4 weights (FFN up, column-parallel)",
            KernelId::GemvInt4DualSilu => "y = silu(Wg·x) · (Wu·x), one read of x",
            KernelId::GemvInt4Qkv => "q, k, v = column ranges of Wqkv·x, one launch",
            KernelId::AllreduceResidual => "r' = Σ_ranks p + r",
            KernelId::AllreduceResidualRmsnorm => "r' = Σ_ranks p + r; y = rmsnorm(r')",
            KernelId::GemvInt4AllreduceRmsnorm => {
                "r' = Σ_ranks W_rank·x_rank + r; y = rmsnorm(r') (row-parallel, fused)"
            }
            KernelId::AllreduceInt8 => "y = Σ_ranks int8_roundtrip(p) (compressed payload)",
        }
    }

    /// Build the kernel for these shapes.
    pub fn build(self, s: &Shapes) -> Kernel {
        match self {
            KernelId::GemvF16 => gemv(self, s, WeightFormat::F16, s.q_local()),
            KernelId::GemvInt4 => gemv(self, s, WeightFormat::Gptq(s.gptq), s.ffn_local()),
            KernelId::GemvInt4DualSilu => gemv_dual_silu(s),
            KernelId::GemvInt4Qkv => gemv_qkv(s),
            KernelId::AllreduceResidual => allreduce_residual(s, false),
            KernelId::AllreduceResidualRmsnorm => allreduce_residual(s, true),
            KernelId::GemvInt4AllreduceRmsnorm => gemv_allreduce_rmsnorm(s),
            KernelId::AllreduceInt8 => allreduce_int8(s),
        }
    }
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown kernel name.
#[derive(Debug, thiserror::Error)]
#[error("unknown kernel `{0}`; the kernel set is: {names}", names = KernelId::ALL.map(KernelId::name).join(", "))]
pub struct UnknownKernel(pub String);

impl FromStr for KernelId {
    type Err = UnknownKernel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KernelId::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| UnknownKernel(s.into()))
    }
}

fn f16(batch: usize, features: usize) -> Tensor {
    Tensor::activation(ScalarType::F16, batch, features)
}

fn col(s: &Shapes) -> Sharding {
    Sharding::ColumnParallel { tp: s.tp }
}

fn weight(format: WeightFormat, k: usize, n: usize) -> Weight {
    Weight { format, k, n }
}

/// Column-parallel GEMV `[HIDDEN] → [n]` with one FP16 rounding.
fn gemv(id: KernelId, s: &Shapes, format: WeightFormat, n: usize) -> Kernel {
    let mut b = Builder::new(id.name(), s.tp);
    let w = b.input("w", weight(format, HIDDEN, n), col(s));
    let x = b.input("x", f16(s.batch, HIDDEN), Sharding::Replicated);
    let y = b.output("y", f16(s.batch, n), col(s));
    let xv = b.load(x);
    let acc = b.gemv(w, xv, Parallelism::Column);
    let out = b.round_f16(acc);
    b.store(out, y);
    b.finish()
}

fn gemv_dual_silu(s: &Shapes) -> Kernel {
    let n = s.ffn_local();
    let mut b = Builder::new(KernelId::GemvInt4DualSilu.name(), s.tp);
    let wg = b.input("w_gate", weight(WeightFormat::Gptq(s.gptq), HIDDEN, n), col(s));
    let wu = b.input("w_up", weight(WeightFormat::Gptq(s.gptq), HIDDEN, n), col(s));
    let x = b.input("x", f16(s.batch, HIDDEN), Sharding::Replicated);
    let y = b.output("y", f16(s.batch, n), col(s));
    let xv = b.load(x);
    let gate = b.gemv(wg, xv, Parallelism::Column);
    let up = b.gemv(wu, xv, Parallelism::Column);
    let act = b.silu(gate);
    let prod = b.mul(act, up);
    let out = b.round_f16(prod);
    b.store(out, y);
    b.finish()
}

fn gemv_qkv(s: &Shapes) -> Kernel {
    let (nq, nkv) = (s.q_local(), s.kv_local());
    let mut b = Builder::new(KernelId::GemvInt4Qkv.name(), s.tp);
    let w = b.input("w_qkv", weight(WeightFormat::Gptq(s.gptq), HIDDEN, nq + 2 * nkv), col(s));
    let x = b.input("x", f16(s.batch, HIDDEN), Sharding::Replicated);
    let outs = [("q", 0, nq), ("k", nq, nkv), ("v", nq + nkv, nkv)]
        .map(|(name, start, len)| (b.output(name, f16(s.batch, len), col(s)), start, len));
    let xv = b.load(x);
    let acc = b.gemv(w, xv, Parallelism::Column);
    for (buf, start, len) in outs {
        let part = b.slice(acc, start, len);
        let rounded = b.round_f16(part);
        b.store(rounded, buf);
    }
    b.finish()
}

/// Declares `residual_out` (and `normed` with `norm`), adds `sum` to the residual, rounds, and
/// optionally normalises. Shared tail of the allreduce kernels.
fn residual_tail(b: &mut Builder, s: &Shapes, sum: wavefuse::ir::Value, norm: bool) {
    let residual = b.input("residual", f16(s.batch, HIDDEN), Sharding::Replicated);
    let norm_w = norm
        .then(|| b.input("norm_w", Tensor::vector(ScalarType::F16, HIDDEN), Sharding::Replicated));
    let residual_out = b.output("residual_out", f16(s.batch, HIDDEN), Sharding::Replicated);
    let normed = norm.then(|| b.output("normed", f16(s.batch, HIDDEN), Sharding::Replicated));
    let rv = b.load(residual);
    let r = b.add(sum, rv);
    let r16 = b.round_f16(r);
    b.store(r16, residual_out);
    if let (Some(norm_w), Some(normed)) = (norm_w, normed) {
        let wv = b.load(norm_w);
        let n = b.rmsnorm(r16, wv, RMS_EPS);
        let n16 = b.round_f16(n);
        b.store(n16, normed);
    }
}

fn allreduce_residual(s: &Shapes, norm: bool) -> Kernel {
    let id = if norm { KernelId::AllreduceResidualRmsnorm } else { KernelId::AllreduceResidual };
    let mut b = Builder::new(id.name(), s.tp);
    let partial = b.input("partial", f16(s.batch, HIDDEN), Sharding::Partial { tp: s.tp });
    let pv = b.load(partial);
    let sum = b.allreduce(pv);
    residual_tail(&mut b, s, sum, norm);
    b.finish()
}

fn gemv_allreduce_rmsnorm(s: &Shapes) -> Kernel {
    let k = s.ffn_local();
    let mut b = Builder::new(KernelId::GemvInt4AllreduceRmsnorm.name(), s.tp);
    let row = Sharding::RowParallel { tp: s.tp };
    let w = b.input("w_down", weight(WeightFormat::Gptq(s.gptq), k, HIDDEN), row);
    let x = b.input("x", f16(s.batch, k), col(s));
    let xv = b.load(x);
    let partial = b.gemv(w, xv, Parallelism::Row);
    // The published partial is FP16 (10 KB at hidden 5120): a rounding point.
    let partial16 = b.round_f16(partial);
    let sum = b.allreduce(partial16);
    residual_tail(&mut b, s, sum, true);
    b.finish()
}

fn allreduce_int8(s: &Shapes) -> Kernel {
    let mut b = Builder::new(KernelId::AllreduceInt8.name(), s.tp);
    let partial = b.input("partial", f16(s.batch, HIDDEN), Sharding::Partial { tp: s.tp });
    let y = b.output("y", f16(s.batch, HIDDEN), Sharding::Replicated);
    let pv = b.load(partial);
    let sum = b.allreduce_int8(pv, INT8_BLOCK);
    let out = b.round_f16(sum);
    b.store(out, y);
    b.finish()
}
