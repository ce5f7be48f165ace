//! Binding op-level data to a lowered kernel's parameters, and outputs back to host tensors.
//!
//! Parameters are bound by [`Purpose`]: `Data { buffer, part }` names an op-level buffer and the
//! array of it (`data` for a dense tensor or an FP16 weight, `qweight`, `scales`, `qzeros`,
//! `g_idx` for a packed INT4 weight); inputs are written by the host before every launch, outputs
//! are poisoned (NaN) before every launch and read back after it. Scratch, counters, flags and the
//! error word are zeroed once, at allocation, and never reset (DESIGN.md §5.4, §5.11); the rank
//! and epoch scalars are set by the simulator (epoch = `first_epoch` + launch index).

use wavefuse_ir::ops::Compression;
use wavefuse_ir::reference::{HostData, HostTensor, RankInputs, RankOutputs};
use wavefuse_ir::{Buffer, BufferType, Kernel, OpKind, Role, ScalarType, Sharding};

use crate::lowered::{LoweredKernel, Param, ParamKind, Purpose, Ty};

use super::eval;
use super::finding::{FindingKind, Findings};
use super::memory::HostView;
use super::{Host, SimError};

struct Input {
    param: Param,
    buffer: Buffer,
    part: &'static str,
}

struct Output {
    param: Param,
    buffer: Buffer,
    dtype: ScalarType,
    shape: Vec<usize>,
}

/// The host of an op-level kernel's run: per-launch inputs in, outputs out.
pub(super) struct OpHost<'a> {
    launches: &'a [Vec<RankInputs>],
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    /// Per launch, per rank.
    pub results: Vec<Vec<RankOutputs>>,
}

/// The device bits of one array of an input, for an array of element type `elem`.
fn part_bits(data: &HostData, part: &str, elem: Ty) -> Option<Vec<u32>> {
    let ints = |v: &[i32]| v.iter().map(|&x| x as u32).collect();
    let floats = |v: &[f64]| v.iter().map(|&x| eval::from_f64(elem, x)).collect();
    Some(match (data, part) {
        (HostData::Tensor(t), "data") => floats(&t.data),
        (HostData::F16Weight(v), "data") => floats(v),
        (HostData::Int4(p), "qweight") => ints(&p.qweight),
        (HostData::Int4(p), "scales") => floats(&p.scales),
        (HostData::Int4(p), "qzeros") => ints(&p.qzeros),
        (HostData::Int4(p), "g_idx") => ints(p.g_idx.as_deref()?),
        _ => return None,
    })
}

fn bind_err(what: String) -> SimError {
    SimError::Binding(what)
}

impl<'a> OpHost<'a> {
    pub(super) fn new(
        ir: &Kernel,
        k: &LoweredKernel,
        launches: &'a [Vec<RankInputs>],
    ) -> Result<Self, SimError> {
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        for (param, d) in k.params.iter() {
            let (elem, len, purpose) = match &d.kind {
                ParamKind::Array {
                    elem, len, purpose, ..
                }
                | ParamKind::PeerArrays {
                    elem, len, purpose, ..
                } => (*elem, *len, purpose),
                ParamKind::Scalar {
                    purpose: Purpose::Data { buffer, .. },
                    ..
                } => {
                    return Err(bind_err(format!(
                        "scalar parameter `{}` bound to buffer `{buffer}`",
                        d.name
                    )));
                }
                ParamKind::Scalar { .. } => continue,
            };
            let Purpose::Data { buffer, part } = purpose else {
                continue;
            };
            let b = ir
                .buffer_by_name(buffer)
                .ok_or_else(|| bind_err(format!("parameter `{}`: no buffer `{buffer}`", d.name)))?;
            let decl = ir.buffer(b).expect("found by name");
            match decl.role {
                Role::Input => {
                    for (l, ranks) in launches.iter().enumerate() {
                        for (r, inp) in ranks.iter().enumerate() {
                            let data = inp.get(&b).ok_or_else(|| {
                                bind_err(format!("launch {l} rank {r}: no data for `{buffer}`"))
                            })?;
                            let bits = part_bits(data, part, elem).ok_or_else(|| {
                                bind_err(format!(
                                    "parameter `{}`: `{buffer}` has no `{part}` array",
                                    d.name
                                ))
                            })?;
                            if bits.len() != len {
                                return Err(bind_err(format!(
                                    "parameter `{}` has {len} elements, `{buffer}`.{part} has {}",
                                    d.name,
                                    bits.len()
                                )));
                            }
                        }
                    }
                    inputs.push(Input {
                        param,
                        buffer: b,
                        part,
                    });
                }
                Role::Output => {
                    let BufferType::Tensor(t) = decl.local_type() else {
                        return Err(bind_err(format!("output `{buffer}` is not a tensor")));
                    };
                    if *part != "data" || t.len() != len {
                        return Err(bind_err(format!(
                            "parameter `{}` ({part}, {len} elements) does not match output `{buffer}` ({} elements)",
                            d.name,
                            t.len()
                        )));
                    }
                    outputs.push(Output {
                        param,
                        buffer: b,
                        dtype: t.dtype,
                        shape: t.shape.clone(),
                    });
                }
            }
        }
        for b in ir.outputs() {
            if !outputs.iter().any(|o| o.buffer == b) {
                let name = &ir.buffer(b).expect("own buffer").name;
                return Err(bind_err(format!(
                    "output `{name}` has no parameter in the lowered kernel"
                )));
            }
        }
        if launches.iter().any(|l| l.len() != k.tp as usize) {
            return Err(bind_err(format!(
                "inputs must be given for each of the {} ranks",
                k.tp
            )));
        }
        let results = vec![vec![RankOutputs::new(); k.tp as usize]; launches.len()];
        Ok(OpHost {
            launches,
            inputs,
            outputs,
            results,
        })
    }
}

impl Host for OpHost<'_> {
    fn before_launch(&mut self, launch: u32, mem: &mut HostView<'_>) {
        let rank = mem.rank() as usize;
        for i in &self.inputs {
            let data = &self.launches[launch as usize][rank][&i.buffer];
            let bits = part_bits(data, i.part, mem.elem(i.param)).expect("checked when binding");
            for (e, b) in bits.into_iter().enumerate() {
                mem.write_bits(i.param, e, b);
            }
        }
        for o in &self.outputs {
            mem.poison(o.param);
        }
    }

    fn after_launch(&mut self, launch: u32, mem: &mut HostView<'_>) {
        let rank = mem.rank() as usize;
        for o in &self.outputs {
            let data = (0..mem.len(o.param))
                .map(|e| mem.read(o.param, e))
                .collect();
            let t = HostTensor {
                dtype: o.dtype,
                shape: o.shape.clone(),
                data,
            };
            self.results[launch as usize][rank].insert(o.buffer, t);
        }
    }
}

/// The tolerance on relative L2 error for an output of this type. FP16 outputs: 1e-3 (DESIGN.md
/// §7): the reference rounds at the same points, so what remains is FP32-vs-f64 accumulation
/// flipping an occasional rounding by one ulp (2⁻¹¹ relative) — well below 1e-3 in L2 over a
/// vector. FP32 outputs: 1e-5. Integer outputs: exact.
pub fn tolerance(dtype: ScalarType) -> f64 {
    match dtype {
        ScalarType::F16 | ScalarType::Bf16 => 1e-3,
        ScalarType::F32 => 1e-5,
        ScalarType::I8 | ScalarType::I32 | ScalarType::U32 => 0.0,
    }
}

/// Float outputs of a kernel with an INT8-compressed allreduce: 5e-3. The device divides
/// `x / s` in FP32 where the reference divides in f64, so a quotient within an FP32 ulp of a
/// half-integer can round to the neighbouring code: one code is `s = max|x|/127` (≈ 2.5 % of the
/// block's largest value) on one element, ≈ 1.1e-3 relative L2 on a 128-feature row, well inside
/// the op's own bound of `tp · s / 2` per element. A protocol defect (a stale or missing
/// payload) is off by whole values, ≫ 5e-3. The GPU suite, `run` and `ab` judge the set's
/// `allreduce_int8` by this same gate (the harness's tolerance table reads it).
pub const INT8_TOLERANCE: f64 = 5e-3;

/// The tolerance for an output of `ir` of this type.
pub fn tolerance_for(ir: &Kernel, dtype: ScalarType) -> f64 {
    let int8 = ir.ops().any(|(_, o)| {
        matches!(&o.kind, OpKind::AllReduce(a) if matches!(a.compression, Compression::Int8 { .. }))
    });
    if int8 && dtype.is_float() {
        INT8_TOLERANCE
    } else {
        tolerance(dtype)
    }
}

/// How far one output of one rank and launch is from the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputError {
    /// Launch index.
    pub launch: u32,
    /// Rank.
    pub rank: u32,
    /// Output buffer name.
    pub output: String,
    /// ‖y − ref‖₂ / ‖ref‖₂ (NaN when any element is not finite).
    pub rel_l2: f64,
    /// The tolerance it is held to.
    pub tolerance: f64,
    /// Elements that are NaN or infinite (unwritten elements stay NaN).
    pub non_finite: usize,
}

impl OutputError {
    /// Whether it passes: finite everywhere and within tolerance.
    pub fn passes(&self) -> bool {
        self.non_finite == 0 && self.rel_l2 <= self.tolerance
    }
}

fn rel_l2(y: &[f64], r: &[f64]) -> (f64, usize, usize) {
    let non_finite = y.iter().filter(|v| !v.is_finite()).count();
    let (mut num, mut den, mut worst, mut worst_i) = (0.0, 0.0, -1.0, 0);
    for (i, (a, b)) in y.iter().zip(r).enumerate() {
        let d = (a - b).abs();
        num += d * d;
        den += b * b;
        // NaN differences count as the worst.
        if d.is_nan() || d > worst {
            worst = d;
            worst_i = i;
        }
    }
    let rel = if non_finite > 0 {
        f64::NAN
    } else {
        num.sqrt() / den.sqrt().max(f64::MIN_POSITIVE)
    };
    (rel, non_finite, worst_i)
}

/// Compare every completed launch's outputs with the reference; check replicated outputs agree
/// bit for bit across ranks.
pub(super) fn compare(
    ir: &Kernel,
    results: &[Vec<RankOutputs>],
    reference: &[Vec<RankOutputs>],
    completed: &[Vec<bool>],
    findings: &mut Findings,
) -> Vec<OutputError> {
    let mut errors = Vec::new();
    for (l, (ranks, refs)) in results.iter().zip(reference).enumerate() {
        for (r, (outs, refo)) in ranks.iter().zip(refs).enumerate() {
            if !completed[l][r] {
                continue;
            }
            for (b, y) in outs {
                let name = &ir.buffer(*b).expect("own buffer").name;
                let want = &refo[b];
                let (rel, non_finite, worst) = rel_l2(&y.data, &want.data);
                let e = OutputError {
                    launch: l as u32,
                    rank: r as u32,
                    output: name.clone(),
                    rel_l2: rel,
                    tolerance: tolerance_for(ir, y.dtype),
                    non_finite,
                };
                if !e.passes() {
                    let (got, exp) = (y.data[worst], want.data[worst]);
                    findings.add(FindingKind::Mismatch, format!("output `{name}`"), || {
                        format!(
                            "launch {l} rank {r} output `{name}`: relative L2 error {rel:.3e} (tolerance {:.0e}); \
                             {non_finite} of {} elements NaN/Inf; worst element {worst}: {got} vs reference {exp}",
                            e.tolerance,
                            y.data.len()
                        )
                    });
                }
                errors.push(e);
            }
        }
        agree(ir, l, ranks, &completed[l], findings);
    }
    errors
}

fn agree(
    ir: &Kernel,
    l: usize,
    ranks: &[RankOutputs],
    completed: &[bool],
    findings: &mut Findings,
) {
    let Some(first) = (0..ranks.len()).find(|&r| completed[r]) else {
        return;
    };
    for (b, y0) in &ranks[first] {
        let decl = ir.buffer(*b).expect("own buffer");
        if decl.sharding != Sharding::Replicated {
            continue;
        }
        for r in first + 1..ranks.len() {
            if !completed[r] {
                continue;
            }
            let y = &ranks[r][b];
            let diff: Vec<usize> = (0..y.data.len())
                .filter(|&i| y.data[i].to_bits() != y0.data[i].to_bits())
                .collect();
            if let Some(&i) = diff.first() {
                let name = decl.name.clone();
                let (a, c) = (y0.data[i], y.data[i]);
                findings.add(FindingKind::RanksDisagree, format!("output `{name}`"), || {
                    format!(
                        "launch {l}: replicated output `{name}` differs between rank {first} and rank {r} in {} elements (first [{i}]: {a} vs {c})",
                        diff.len()
                    )
                });
            }
        }
    }
}
