//! The kernel set of DESIGN.md §3, as kernels-gen builds it (`kernels-gen/src/set.rs`), rebuilt
//! here with the builder: codegen cannot depend on kernels-gen (which depends on codegen), and the
//! lowering tests must not break while the DSL rewrites the set. Keep the two in step; the
//! workspace tests lower kernels-gen's own set as well.

#![allow(dead_code)]

use wavefuse_codegen::ir::{
    Builder, GptqLayout, GroupSize, Kernel, Parallelism, ScalarType, Sharding, Tensor, Value,
    Weight, WeightFormat, ZeroPoint,
};

pub const HIDDEN: usize = 5120;
pub const FFN: usize = 17408;
pub const Q_GATE: usize = 12288;
pub const KV: usize = 1024;
pub const HEAD_DIM: usize = 256;
pub const RMS_EPS: f64 = 1e-6;
pub const INT8_BLOCK: usize = 128;
pub const TP_SIZES: [u32; 4] = [1, 2, 4, 8];
pub const NAMES: [&str; 8] = [
    "gemv_f16",
    "gemv_int4",
    "gemv_int4_dual_silu",
    "gemv_int4_qkv",
    "allreduce_residual",
    "allreduce_residual_rmsnorm",
    "gemv_int4_allreduce_rmsnorm",
    "allreduce_int8",
];

/// Shapes of one configuration; `hidden`, `ffn`, `q`, `kv` are per-rank where the set divides.
#[derive(Copy, Clone, Debug)]
pub struct Shapes {
    pub tp: u32,
    pub batch: usize,
    pub gptq: GptqLayout,
    pub hidden: usize,
    pub ffn: usize,
    pub q_gate: usize,
    pub kv: usize,
    pub head_dim: usize,
    pub block: usize,
}

impl Shapes {
    pub fn qwen27b(tp: u32, batch: usize) -> Self {
        Shapes {
            tp,
            batch,
            gptq: GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1),
            hidden: HIDDEN,
            ffn: FFN,
            q_gate: Q_GATE,
            kv: KV,
            head_dim: HEAD_DIM,
            block: INT8_BLOCK,
        }
    }

    fn split(&self, n: usize) -> usize {
        n / self.tp as usize
    }
    fn ffn_local(&self) -> usize {
        self.split(self.ffn)
    }
    fn q_local(&self) -> usize {
        self.split(self.q_gate)
    }
    fn kv_local(&self) -> usize {
        self.split(self.kv).max(self.head_dim)
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

pub fn build(name: &str, s: &Shapes) -> Kernel {
    match name {
        "gemv_f16" => gemv(name, s, WeightFormat::F16, s.q_local()),
        "gemv_int4" => gemv(name, s, WeightFormat::Gptq(s.gptq), s.ffn_local()),
        "gemv_int4_dual_silu" => gemv_dual_silu(s),
        "gemv_int4_qkv" => gemv_qkv(s),
        "allreduce_residual" => allreduce_residual(s, false),
        "allreduce_residual_rmsnorm" => allreduce_residual(s, true),
        "gemv_int4_allreduce_rmsnorm" => gemv_allreduce_rmsnorm(s),
        "allreduce_int8" => allreduce_int8(s),
        other => panic!("unknown kernel {other}"),
    }
}

fn gemv(name: &str, s: &Shapes, format: WeightFormat, n: usize) -> Kernel {
    let mut b = Builder::new(name, s.tp);
    let w = b.input("w", weight(format, s.hidden, n), col(s));
    let x = b.input("x", f16(s.batch, s.hidden), Sharding::Replicated);
    let y = b.output("y", f16(s.batch, n), col(s));
    let xv = b.load(x);
    let acc = b.gemv(w, xv, Parallelism::Column);
    let out = b.round_f16(acc);
    b.store(out, y);
    b.finish()
}

fn gemv_dual_silu(s: &Shapes) -> Kernel {
    let n = s.ffn_local();
    let mut b = Builder::new("gemv_int4_dual_silu", s.tp);
    let wg = b.input(
        "w_gate",
        weight(WeightFormat::Gptq(s.gptq), s.hidden, n),
        col(s),
    );
    let wu = b.input(
        "w_up",
        weight(WeightFormat::Gptq(s.gptq), s.hidden, n),
        col(s),
    );
    let x = b.input("x", f16(s.batch, s.hidden), Sharding::Replicated);
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
    let mut b = Builder::new("gemv_int4_qkv", s.tp);
    let w = b.input(
        "w_qkv",
        weight(WeightFormat::Gptq(s.gptq), s.hidden, nq + 2 * nkv),
        col(s),
    );
    let x = b.input("x", f16(s.batch, s.hidden), Sharding::Replicated);
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

fn residual_tail(b: &mut Builder, s: &Shapes, sum: Value, norm: bool) {
    let residual = b.input("residual", f16(s.batch, s.hidden), Sharding::Replicated);
    let norm_w = norm.then(|| {
        b.input(
            "norm_w",
            Tensor::vector(ScalarType::F16, s.hidden),
            Sharding::Replicated,
        )
    });
    let residual_out = b.output("residual_out", f16(s.batch, s.hidden), Sharding::Replicated);
    let normed = norm.then(|| b.output("normed", f16(s.batch, s.hidden), Sharding::Replicated));
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
    let name = if norm {
        "allreduce_residual_rmsnorm"
    } else {
        "allreduce_residual"
    };
    let mut b = Builder::new(name, s.tp);
    let partial = b.input(
        "partial",
        f16(s.batch, s.hidden),
        Sharding::Partial { tp: s.tp },
    );
    let pv = b.load(partial);
    let sum = b.allreduce(pv);
    residual_tail(&mut b, s, sum, norm);
    b.finish()
}

fn gemv_allreduce_rmsnorm(s: &Shapes) -> Kernel {
    let k = s.ffn_local();
    let mut b = Builder::new("gemv_int4_allreduce_rmsnorm", s.tp);
    let row = Sharding::RowParallel { tp: s.tp };
    let w = b.input(
        "w_down",
        weight(WeightFormat::Gptq(s.gptq), k, s.hidden),
        row,
    );
    let x = b.input("x", f16(s.batch, k), col(s));
    let xv = b.load(x);
    let partial = b.gemv(w, xv, Parallelism::Row);
    let partial16 = b.round_f16(partial);
    let sum = b.allreduce(partial16);
    residual_tail(&mut b, s, sum, true);
    b.finish()
}

fn allreduce_int8(s: &Shapes) -> Kernel {
    let mut b = Builder::new("allreduce_int8", s.tp);
    let partial = b.input(
        "partial",
        f16(s.batch, s.hidden),
        Sharding::Partial { tp: s.tp },
    );
    let y = b.output("y", f16(s.batch, s.hidden), Sharding::Replicated);
    let pv = b.load(partial);
    let sum = b.allreduce_int8(pv, s.block);
    let out = b.round_f16(sum);
    b.store(out, y);
    b.finish()
}
