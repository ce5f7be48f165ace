//! The op-level reference semantics in f64: the oracle every test compares against.
//!
//! [`evaluate`] takes a validated kernel and, per rank of its TP group, the data bound to every
//! input; it returns, per rank, every output. Arithmetic is f64 throughout; the only roundings are
//! the ones the IR spells out (`round_f16`, stores into f32 buffers, the INT8 payload of a
//! compressed allreduce). Nothing here is shared with code generation.

mod data;
pub mod quant;

use std::collections::BTreeMap;

use cranelift_entity::EntityRef;

use thiserror::Error;

use crate::buffer::BufferType;
use crate::entities::{Buffer, Value};
use crate::error::ValidationError;
use crate::kernel::Kernel;
use crate::ops::*;
use crate::types::{ScalarType, WeightFormat, ZeroPoint};
use crate::validate::{KernelInfo, validate};

pub use data::{HostData, HostTensor, PackedInt4, round_to};

/// The data bound to one rank's inputs.
pub type RankInputs = BTreeMap<Buffer, HostData>;
/// One rank's outputs.
pub type RankOutputs = BTreeMap<Buffer, HostTensor>;

/// Why evaluation could not run.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EvalError {
    /// The kernel is not valid.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// Inputs were given for the wrong number of ranks.
    #[error("the kernel runs on {expected} ranks but inputs were given for {found}")]
    RankCount {
        /// The kernel's TP size.
        expected: u32,
        /// Ranks given.
        found: usize,
    },
    /// Bad input data.
    #[error("rank {rank}, input `{name}`: {what}")]
    Input {
        /// Rank.
        rank: usize,
        /// Input name.
        name: String,
        /// What is wrong.
        what: String,
    },
}

/// A value during evaluation: row-major f64 data.
#[derive(Clone, Debug)]
struct Val {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Val {
    fn features(&self) -> usize {
        *self.shape.last().expect("values have an axis")
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Val {
        Val {
            shape: self.shape.clone(),
            data: self.data.iter().map(|&x| f(x)).collect(),
        }
    }
}

/// Evaluate `kernel` on per-rank inputs. See the module docs.
pub fn evaluate(kernel: &Kernel, inputs: &[RankInputs]) -> Result<Vec<RankOutputs>, EvalError> {
    let info = validate(kernel)?;
    if inputs.len() != kernel.tp as usize {
        return Err(EvalError::RankCount {
            expected: kernel.tp,
            found: inputs.len(),
        });
    }
    for (rank, inp) in inputs.iter().enumerate() {
        for b in kernel.inputs() {
            check_input(kernel, rank, b, inp.get(&b))?;
        }
    }
    let mut ev = Evaluator {
        kernel,
        info,
        inputs,
        vals: vec![Vec::new(); inputs.len()],
    };
    for rank_vals in &mut ev.vals {
        rank_vals.resize(kernel.values.len(), None);
    }
    let mut outputs = vec![RankOutputs::new(); inputs.len()];
    for (_, op) in kernel.ops.iter() {
        ev.step(&op.kind, &op.results, &mut outputs);
    }
    Ok(outputs)
}

struct Evaluator<'a> {
    kernel: &'a Kernel,
    info: KernelInfo,
    inputs: &'a [RankInputs],
    vals: Vec<Vec<Option<Val>>>,
}

impl Evaluator<'_> {
    fn get(&self, rank: usize, v: Value) -> &Val {
        self.vals[rank][v.index()]
            .as_ref()
            .expect("validated: defined before use")
    }

    fn step(&mut self, kind: &OpKind, results: &[Value], outputs: &mut [RankOutputs]) {
        if let OpKind::AllReduce(a) = kind {
            let summed = self.allreduce(a);
            for rank in 0..self.vals.len() {
                self.vals[rank][results[0].index()] = Some(summed.clone());
            }
            return;
        }
        if let OpKind::Store(s) = kind {
            let dtype = tensor_dtype(self.kernel, s.buffer);
            for (rank, out) in outputs.iter_mut().enumerate() {
                let v = self.get(rank, s.value);
                let data = v.data.iter().map(|&x| round_to(dtype, x)).collect();
                out.insert(
                    s.buffer,
                    HostTensor {
                        dtype,
                        shape: v.shape.clone(),
                        data,
                    },
                );
            }
            return;
        }
        for rank in 0..self.vals.len() {
            let rs = self.eval(rank, kind);
            for (&r, val) in results.iter().zip(rs) {
                self.vals[rank][r.index()] = Some(val);
            }
        }
    }

    fn eval(&self, rank: usize, kind: &OpKind) -> Vec<Val> {
        let one = |v| vec![v];
        match kind {
            OpKind::Load(l) => one(self.load(rank, l.buffer)),
            OpKind::Gemv(g) => one(self.gemv_of(rank, g.weight, self.get(rank, g.x))),
            OpKind::Binary(b) => one(binary(b.op, self.get(rank, b.a), self.get(rank, b.b))),
            OpKind::Unary(u) => one(match u.op {
                UnaryOp::Silu => self.get(rank, u.x).map(|x| x / (1.0 + (-x).exp())),
            }),
            OpKind::RoundF16(r) => one(self.get(rank, r.x).map(|x| round_to(ScalarType::F16, x))),
            OpKind::Slice(s) => one(slice(self.get(rank, s.x), s.start, s.len)),
            OpKind::RmsNorm(n) => one(rmsnorm(
                self.get(rank, n.x),
                self.get(rank, n.weight),
                n.eps,
            )),
            OpKind::Reduce(r) => one(reduce(r.op, self.get(rank, r.x))),
            OpKind::GemvQ8(g) => {
                let x = dequantize(self.get(rank, g.codes), self.get(rank, g.scales), g.block);
                one(self.gemv_of(rank, g.weight, &x))
            }
            OpKind::QuantizeInt8(q) => quantize(self.get(rank, q.x), q.block, quant::int8_quantize),
            OpKind::QuantizeRne(q) => quantize(self.get(rank, q.x), q.block, |b| {
                quant::q8_rne_quantize(b, q.clamp)
            }),
            OpKind::DequantizeInt8(d) => one(dequantize(
                self.get(rank, d.codes),
                self.get(rank, d.scales),
                d.block,
            )),
            OpKind::Store(_) | OpKind::AllReduce(_) => unreachable!("handled in step"),
        }
    }

    fn load(&self, rank: usize, b: Buffer) -> Val {
        match &self.inputs[rank][&b] {
            HostData::Tensor(t) => Val {
                shape: t.shape.clone(),
                data: t.data.clone(),
            },
            _ => unreachable!("validated: only tensors are loaded"),
        }
    }

    /// `Σ_k W[k, n] · x[b, k]` (the f64 semantics of `gemv` and, with `x = codes · scales`, of
    /// `gemv_q8`).
    fn gemv_of(&self, rank: usize, weight: Buffer, x: &Val) -> Val {
        let BufferType::Weight(w) = self.kernel.buffers[weight].local_type() else {
            unreachable!("validated: gemv reads a weight")
        };
        let data = &self.inputs[rank][&weight];
        let batch = x.shape[0];
        let mut y = vec![0.0; batch * w.n];
        if let HostData::F16Weight(nk) = data {
            // Stored [N, K]: walk it in memory order.
            for (col, wrow) in nk.chunks(w.k).enumerate() {
                for b in 0..batch {
                    let xb = &x.data[b * w.k..(b + 1) * w.k];
                    y[b * w.n + col] = wrow.iter().zip(xb).map(|(a, c)| a * c).sum();
                }
            }
            return Val {
                shape: vec![batch, w.n],
                data: y,
            };
        }
        let mut row = vec![0.0; w.n];
        for k in 0..w.k {
            weight_row(&w.format, w.k, w.n, data, k, &mut row);
            for b in 0..batch {
                let xk = x.data[b * w.k + k];
                for (acc, &wk) in y[b * w.n..(b + 1) * w.n].iter_mut().zip(&row) {
                    *acc += wk * xk;
                }
            }
        }
        Val {
            shape: vec![batch, w.n],
            data: y,
        }
    }

    fn allreduce(&self, a: &AllReduce) -> Val {
        let first = self.get(0, a.x);
        let mut sum = vec![0.0; first.data.len()];
        for rank in 0..self.vals.len() {
            let x = self.get(rank, a.x);
            let payload: Vec<f64> = match a.compression {
                Compression::None => x.data.clone(),
                Compression::Int8 { block } => x
                    .data
                    .chunks(x.features())
                    .flat_map(|row| quant::int8_roundtrip(row, block))
                    .collect(),
            };
            for (s, p) in sum.iter_mut().zip(payload) {
                *s += p;
            }
        }
        debug_assert!(self.info.uses(a.x) >= 1);
        Val {
            shape: first.shape.clone(),
            data: sum,
        }
    }
}

fn tensor_dtype(kernel: &Kernel, b: Buffer) -> ScalarType {
    match &kernel.buffers[b].ty {
        BufferType::Tensor(t) => t.dtype,
        BufferType::Weight(_) => unreachable!("validated: only tensors are stored"),
    }
}

/// Row k of a weight `[K, N]`, dequantised.
fn weight_row(
    format: &WeightFormat,
    kdim: usize,
    n: usize,
    data: &HostData,
    k: usize,
    out: &mut [f64],
) {
    match (format, data) {
        (WeightFormat::Gptq(l), HostData::Int4(p)) => quant::gptq_row(l, kdim, n, p, k, out),
        (WeightFormat::Awq(l), HostData::Int4(p)) => quant::awq_row(l.group, kdim, n, p, k, out),
        _ => unreachable!("inputs checked against their formats"),
    }
}

fn binary(op: BinaryOp, a: &Val, b: &Val) -> Val {
    let data = a.data.iter().zip(&b.data).map(|(&x, &y)| match op {
        BinaryOp::Add => x + y,
        BinaryOp::Mul => x * y,
    });
    Val {
        shape: a.shape.clone(),
        data: data.collect(),
    }
}

fn slice(x: &Val, start: usize, len: usize) -> Val {
    let f = x.features();
    let data = x
        .data
        .chunks(f)
        .flat_map(|row| row[start..start + len].iter().copied());
    let mut shape = x.shape.clone();
    *shape.last_mut().expect("values have an axis") = len;
    Val {
        shape,
        data: data.collect(),
    }
}

fn rmsnorm(x: &Val, w: &Val, eps: f64) -> Val {
    let f = x.features();
    let mut data = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(f) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / f as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        data.extend(row.iter().zip(&w.data).map(|(v, wi)| v * inv * wi));
    }
    Val {
        shape: x.shape.clone(),
        data,
    }
}

fn reduce(op: ReduceOp, x: &Val) -> Val {
    let data = x.data.chunks(x.features()).map(|row| match op {
        ReduceOp::Sum => row.iter().sum(),
        ReduceOp::SumSquares => row.iter().map(|v| v * v).sum(),
        ReduceOp::AbsMax => row.iter().fold(0.0f64, |m, v| m.max(v.abs())),
    });
    let mut shape = x.shape.clone();
    *shape.last_mut().expect("values have an axis") = 1;
    Val {
        shape,
        data: data.collect(),
    }
}

fn quantize(x: &Val, block: usize, f: impl Fn(&[f64]) -> (Vec<f64>, f64)) -> Vec<Val> {
    let (mut codes, mut scales) = (Vec::new(), Vec::new());
    for chunk in x.data.chunks(block) {
        let (q, s) = f(chunk);
        codes.extend(q);
        scales.push(s);
    }
    let mut sshape = x.shape.clone();
    *sshape.last_mut().expect("values have an axis") /= block;
    vec![
        Val {
            shape: x.shape.clone(),
            data: codes,
        },
        Val {
            shape: sshape,
            data: scales,
        },
    ]
}

fn dequantize(codes: &Val, scales: &Val, block: usize) -> Val {
    let data = codes
        .data
        .iter()
        .enumerate()
        .map(|(i, q)| q * scales.data[i / block]);
    Val {
        shape: codes.shape.clone(),
        data: data.collect(),
    }
}

/// Check one rank's data for one input against the buffer's declaration.
fn check_input(
    kernel: &Kernel,
    rank: usize,
    b: Buffer,
    data: Option<&HostData>,
) -> Result<(), EvalError> {
    let decl = &kernel.buffers[b];
    let err = |what: String| EvalError::Input {
        rank,
        name: decl.name.clone(),
        what,
    };
    let data = data.ok_or_else(|| err("no data bound".into()))?;
    match (decl.local_type(), data) {
        (BufferType::Tensor(t), HostData::Tensor(h)) => {
            if h.dtype != t.dtype || h.shape != t.shape || h.data.len() != t.len() {
                return Err(err(format!(
                    "expected {}{:?}, got {}{:?} with {} values",
                    t.dtype,
                    t.shape,
                    h.dtype,
                    h.shape,
                    h.data.len()
                )));
            }
            check_representable(t.dtype, &h.data).map_err(err)
        }
        (BufferType::Weight(w), HostData::F16Weight(v)) if w.format == WeightFormat::F16 => {
            if v.len() != w.k * w.n {
                return Err(err(format!(
                    "expected {} FP16 values [N={}, K={}], got {}",
                    w.k * w.n,
                    w.n,
                    w.k,
                    v.len()
                )));
            }
            check_representable(ScalarType::F16, v).map_err(err)
        }
        (BufferType::Weight(w), HostData::Int4(p)) => {
            check_packed(&w.format, w.k, w.n, p).map_err(err)
        }
        (ty, _) => Err(err(format!("data does not match the declared type {ty}"))),
    }
}

fn check_representable(dtype: ScalarType, data: &[f64]) -> Result<(), String> {
    match data
        .iter()
        .position(|&x| !x.is_finite() || round_to(dtype, x) != x)
    {
        Some(i) => Err(format!(
            "value {} at index {i} is not a finite {dtype}",
            data[i]
        )),
        None => Ok(()),
    }
}

fn check_packed(format: &WeightFormat, k: usize, n: usize, p: &PackedInt4) -> Result<(), String> {
    let (group, qweight_len, zeros, scale, g_idx) = match format {
        WeightFormat::Gptq(l) => (
            l.group,
            k / 8 * n,
            l.zero != ZeroPoint::Symmetric,
            l.scale,
            l.act_order,
        ),
        WeightFormat::Awq(l) => (l.group, k * n / 8, true, l.scale, false),
        WeightFormat::F16 => return Err("an FP16 weight needs F16Weight data".into()),
    };
    let groups = k / group.rows(k);
    let expect = |what: &str, want: usize, got: usize| {
        if want == got {
            Ok(())
        } else {
            Err(format!("{what}: expected {want} elements, got {got}"))
        }
    };
    expect("qweight", qweight_len, p.qweight.len())?;
    expect("scales", groups * n, p.scales.len())?;
    expect(
        "qzeros",
        if zeros { groups * n / 8 } else { 0 },
        p.qzeros.len(),
    )?;
    check_representable(scale, &p.scales).map_err(|e| format!("scales: {e}"))?;
    match (&p.g_idx, g_idx) {
        (None, false) => Ok(()),
        (Some(_), false) => Err("g_idx given but the layout has no act-order".into()),
        (None, true) => Err("the layout has act-order but no g_idx was given".into()),
        (Some(g), true) => {
            expect("g_idx", k, g.len())?;
            match g.iter().position(|&x| x < 0 || x as usize >= groups) {
                Some(i) => Err(format!(
                    "g_idx[{i}] = {} is not a group in 0..{groups}",
                    g[i]
                )),
                None => Ok(()),
            }
        }
    }
}
