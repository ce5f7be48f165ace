//! Analysis of an op-level kernel (of one GEMV stage) into the shape the lowering supports.
//!
//! The lowering handles kernels of this form, which covers the kernel set of DESIGN.md §3:
//! at most one group of GEMVs sharing one activation and one weight shape and format; at most one
//! allreduce, of a value computed before it; at most one RMSNorm, over the whole feature axis; and
//! elementwise ops, slices, FP16 roundings and stores around them. Anything else is
//! [`LowerError::Unsupported`].
//!
//! A kernel with several such parts in sequence — a GEMV whose activation is computed from GEMV
//! or allreduce results (`round_f16(silu(gate)·up)` in front of the down projection) — is first
//! cut into *GEMV stages* (`stages.rs`), each of this form, separated by grid barriers, the
//! activation materialised once in global scratch between them; this module plans each stage.
//! So the whole FFN block lowers as one kernel: pre-norm prologue, gate/up GEMVs, silu·mul,
//! grid barrier, down GEMV, allreduce, residual add, RMSNorm (and a whole decoder layer's
//! projections: other values a later stage reads cross in scratch too). Refused there: a GEMV
//! depending on GEMV results that do not lead to the next stage's activation.
//!
//! The GEMVs' activation is either a loaded input or a *prologue* ([`ProloguePlan`]): a
//! replicated `[B, K]` FP16 value computed from loaded inputs by loads, elementwise unary and
//! binary ops, `round_f16` and at most one RMSNorm over the whole K axis whose weight is a loaded
//! input (`h = round_f16(rmsnorm(x, w))`, `h = round_f16(x + r)`). Every workgroup recomputes it
//! into LDS. An activation that depends on a GEMV or an allreduce is not a prologue: it starts a
//! new GEMV stage (`stages.rs`). Refused: an activation that depends on anything else that is
//! not elementwise (`reduce`, INT8 (de)quantisation), a slice inside the prologue, K not a
//! multiple of 8, and a prologue value used by
//! anything but the prologue and the GEMVs (a store of `h`, an epilogue reading `h`). The values
//! of a prologue belong to no root column; its loads stay `Free` and may be used elsewhere too.
//!
//! Every value gets a *view*: how its feature coordinate relates to the kernel's *root* column
//! space (the GEMV's N, or the allreduced vector's features), which is what workgroups tile.
//! A slice of the root at `start` has view `Root(start)`; a loaded input is `Free` (it takes the
//! coordinate of whatever it is combined with). And a *phase*: the earliest synchronisation
//! stage after which it can be computed.

use std::collections::{BTreeSet, HashMap, HashSet};

use wavefuse_ir::ops::{Compression, GemvQ8};
use wavefuse_ir::{
    Buffer, BufferType, Kernel, KernelInfo, MemorySpace, OpKind, ScalarType, Value, Weight,
    WeightFormat,
};

use super::LowerError;

/// The synchronisation stage a value belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Phase {
    /// Computable from inputs and the workgroup's GEMV results.
    Pre,
    /// Needs the allreduce (after the peer flags).
    Post,
    /// Needs the RMSNorm's grid-wide sum of squares (after the grid barrier).
    Norm,
}

impl Phase {
    /// A name for comments in the generated code.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Pre => "elementwise",
            Phase::Post => "post-allreduce",
            Phase::Norm => "normalise",
        }
    }
}

/// How a value's feature coordinate maps to root columns.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum View {
    /// Coordinate `j` is root column `offset + j`.
    Root(i64),
    /// Takes the coordinate of the value it is combined with (a loaded input).
    Free,
}

/// Where the GEMVs' activation `[B, K]` (FP16) comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Activation {
    /// A loaded input buffer.
    Input(Buffer),
    /// A value the kernel computes from loaded inputs: the [`ProloguePlan`]'s.
    Prologue(Value),
}

/// The GEMVs of the kernel: all read the same activation and weights of one shape and format.
pub(super) struct GemvPlan {
    /// Each GEMV's result and weight buffer, in program order.
    pub gemvs: Vec<(Value, Buffer)>,
    /// The activation.
    pub x: Activation,
    /// The per-rank weight shape and format.
    pub weight: Weight,
    /// `gemv_q8`: the activation (a loaded FP16 input) is quantised by `quantize_int8.rne` with
    /// these parameters, in the kernel, and the GEMVs sum integer products.
    pub q8: Option<Q8Plan>,
}

/// The q8 activations of a `gemv_q8` group: `quantize_int8.rne x, block, clamp` of its `x`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Q8Plan {
    /// K rows per activation block.
    pub block: usize,
    /// The largest code magnitude.
    pub clamp: usize,
}

/// The kernel's allreduce.
pub(super) struct AllreducePlan {
    pub x: Value,
    pub compression: Compression,
}

/// The kernel's RMSNorm.
pub(super) struct NormPlan {
    pub x: Value,
    pub eps: f64,
}

/// The RMSNorm of a GEMV prologue: over the whole K axis of a value computed from loads.
pub(super) struct PrologueNorm {
    /// Its input `[B, K]`.
    pub x: Value,
    pub eps: f64,
}

/// A GEMV *prologue*: the activation is a replicated vector computed from loaded inputs — a DAG
/// of loads, elementwise unary and binary ops, `round_f16` and at most one RMSNorm over the full
/// K axis (its weight a loaded input). Every workgroup recomputes it into LDS before its GEMV
/// (see the module docs of [`super`] for the cost rule and the alternative that is refused).
pub(super) struct ProloguePlan {
    /// The GEMVs' activation `[B, K]`, FP16.
    pub act: Value,
    pub norm: Option<PrologueNorm>,
    /// The computed values of the prologue (its loads are not in it: they are `Free` inputs).
    values: HashSet<Value>,
    /// The loads the prologue reads, in value order.
    pub loads: BTreeSet<Value>,
}

impl ProloguePlan {
    /// Whether `v` is computed in the prologue (a load is not).
    pub fn computes(&self, v: Value) -> bool {
        self.values.contains(&v)
    }
}

/// What the lowering needs to know about an op-level kernel.
pub(super) struct Plan<'a> {
    pub kernel: &'a Kernel,
    pub info: KernelInfo,
    /// Batch rows.
    pub batch: usize,
    /// Root columns (per rank).
    pub n: usize,
    pub gemv: Option<GemvPlan>,
    pub allreduce: Option<AllreducePlan>,
    pub norm: Option<NormPlan>,
    /// The GEMVs' prologue, when their activation is computed in the kernel.
    pub prologue: Option<ProloguePlan>,
    /// `(value, buffer)` of every store, in program order.
    pub stores: Vec<(Value, Buffer)>,
    views: HashMap<Value, View>,
    phases: HashMap<Value, Phase>,
    batch_seen: Option<usize>,
    /// The codes and scales of `quantize_int8.rne` ops: they feed only `gemv_q8`.
    q8_values: HashSet<Value>,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, LowerError> {
    Err(LowerError::Unsupported(what.into()))
}

/// A refusal of `op` said as a user can act on it: where the op was written (`file:line:column`,
/// when known), its mnemonic, and the nearest composition that lowers.
fn refused_at(e: LowerError, op: &wavefuse_ir::OpData) -> LowerError {
    let LowerError::Unsupported(what) = e else {
        return e;
    };
    let at = op
        .loc
        .as_ref()
        .map(|l| format!("{l}: "))
        .unwrap_or_default();
    let hint = nearest_that_lowers(&what);
    LowerError::Unsupported(format!(
        "{at}`{}`: {what}{}",
        op.kind.mnemonic(),
        hint.map(|h| format!("; {h}")).unwrap_or_default()
    ))
}

/// What lowers instead of the refused composition `what` (docs/lowering.md lists them).
fn nearest_that_lowers(what: &str) -> Option<&'static str> {
    Some(match what {
        w if w.starts_with("more than one allreduce") => {
            "one allreduce per GEMV stage: a GEMV between two allreduces makes them two stages of one kernel, or split the kernel after the first"
        }
        w if w.starts_with("more than one rmsnorm") => {
            "one RMSNorm per GEMV stage (plus one in a GEMV's prologue): a GEMV between them, or a kernel each"
        }
        w if w.starts_with("an rmsnorm over a column slice") => {
            "normalise the whole feature axis, then slice the result"
        }
        w if w.starts_with("rmsnorm weights that are not a loaded input") => {
            "load the norm weight from an input buffer (`in norm_w: f16[hidden]`)"
        }
        w if w.starts_with("an allreduce of a column slice") => {
            "allreduce the whole GEMV partial, before any norm; slice after it"
        }
        w if w.starts_with("op `") && w.ends_with("outside an allreduce") => {
            "reductions and INT8 (de)quantisation lower only inside an allreduce: `allreduce.int8(x, block = …)`"
        }
        w if w.starts_with("AWQ weight") => {
            "convert the checkpoint to GPTQ (the INT4 kernels read GPTQ's layout)"
        }
        w if w.starts_with("act-order") => {
            "reorder the checkpoint's rows (desc_act = false) before loading: act-order weights are not lowered yet"
        }
        _ => return None,
    })
}

impl<'a> Plan<'a> {
    /// Validate `kernel` and analyse it.
    pub fn new(kernel: &'a Kernel) -> Result<Self, LowerError> {
        let info = wavefuse_ir::validate(kernel)?;
        let mut plan = Plan {
            kernel,
            info,
            batch: 1,
            n: 0,
            gemv: None,
            allreduce: None,
            norm: None,
            prologue: None,
            stores: Vec::new(),
            views: HashMap::new(),
            phases: HashMap::new(),
            batch_seen: None,
            q8_values: HashSet::new(),
        };
        plan.prologue = plan.find_prologue()?;
        let mut roots = Vec::new();
        for (_, op) in kernel.ops() {
            plan.check_prologue_uses(&op.kind, &op.results)?;
            if let Some(&v) = op.results.first().filter(|&&v| plan.in_prologue(v)) {
                // Computed per K coordinate by the prologue; never part of the root column space.
                plan.check_shape(v)?;
                plan.set(v, View::Free, Phase::Pre);
                continue;
            }
            plan.op(&op.kind, &op.results, &mut roots)
                .map_err(|e| refused_at(e, op))?;
        }
        plan.settle_root(&roots)?;
        plan.batch = plan.batch_seen.unwrap_or(1);
        Ok(plan)
    }

    /// The root column of a stored value's first feature (a stored input copy starts at 0).
    pub fn store_offset(&self, v: Value) -> i64 {
        match self.views[&v] {
            View::Root(o) => o,
            View::Free => 0,
        }
    }

    pub fn view(&self, v: Value) -> View {
        self.views[&v]
    }

    pub fn phase(&self, v: Value) -> Phase {
        self.phases[&v]
    }

    /// The per-rank shape of a value.
    pub fn shape(&self, v: Value) -> &[usize] {
        &self.info.value_type(v).shape
    }

    /// The element type of a value.
    pub fn dtype(&self, v: Value) -> ScalarType {
        self.info.value_type(v).dtype
    }

    /// The op defining a value.
    pub fn def(&self, v: Value) -> &'a OpKind {
        let d = self.kernel.value_def(v).expect("validated");
        &self.kernel.op(d.op).expect("validated").kind
    }

    fn set(&mut self, v: Value, view: View, phase: Phase) {
        self.views.insert(v, view);
        self.phases.insert(v, phase);
    }

    fn join(&self, a: Value, b: Value) -> Result<View, LowerError> {
        match (self.view(a), self.view(b)) {
            (View::Free, v) | (v, View::Free) => Ok(v),
            (x, y) if x == y => Ok(x),
            (x, y) => unsupported(format!(
                "combining column ranges {x:?} and {y:?} of the root"
            )),
        }
    }

    fn check_shape(&mut self, v: Value) -> Result<(), LowerError> {
        let shape = self.shape(v).to_vec();
        match (shape.as_slice(), self.batch_seen) {
            ([_], _) => Ok(()),
            ([b, _], None) => {
                self.batch_seen = Some(*b);
                Ok(())
            }
            ([b, _], Some(seen)) if *b == seen => Ok(()),
            ([b, _], Some(seen)) => {
                unsupported(format!("batch {b} differs from the kernel's batch {seen}"))
            }
            _ => unsupported(format!(
                "a value of rank {} (only [B, F] and [F] are lowered)",
                shape.len()
            )),
        }
    }

    fn op(
        &mut self,
        kind: &OpKind,
        results: &[Value],
        roots: &mut Vec<usize>,
    ) -> Result<(), LowerError> {
        let res = results.first().copied();
        if !matches!(kind, OpKind::GemvQ8(_)) {
            if let Some(a) = kind.args().into_iter().find(|a| self.q8_values.contains(a)) {
                return unsupported(format!(
                    "q8 activation {a} used by `{}`: the codes and scales of quantize_int8.rne feed only gemv_q8 \
                     (the kernel quantises per workgroup, in LDS, and never writes them out)",
                    kind.mnemonic()
                ));
            }
        }
        match kind {
            OpKind::Load(l) => {
                let v = res.expect("a load defines a value");
                self.check_space(l.buffer)?;
                self.check_shape(v)?;
                self.set(v, View::Free, Phase::Pre);
            }
            OpKind::Gemv(g) => {
                let v = res.expect("a gemv defines a value");
                self.check_shape(v)?;
                self.gemv(v, g.weight, g.x, None)?;
                roots.push(self.shape(v)[1]);
                self.set(v, View::Root(0), Phase::Pre);
            }
            OpKind::Binary(b) => {
                let view = self.join(b.a, b.b)?;
                let phase = self.phase(b.a).max(self.phase(b.b));
                self.set(res.expect("binary result"), view, phase);
            }
            OpKind::Unary(u) => {
                self.set(res.expect("unary result"), self.view(u.x), self.phase(u.x))
            }
            OpKind::RoundF16(r) => {
                self.set(res.expect("round result"), self.view(r.x), self.phase(r.x))
            }
            OpKind::Slice(s) => {
                let view = match self.view(s.x) {
                    View::Root(o) => View::Root(o + s.start as i64),
                    View::Free => View::Free,
                };
                self.set(res.expect("slice result"), view, self.phase(s.x));
            }
            OpKind::AllReduce(a) => {
                let v = res.expect("allreduce result");
                if self.allreduce.is_some() {
                    return unsupported("more than one allreduce in a kernel");
                }
                if !matches!(self.view(a.x), View::Free | View::Root(0))
                    || self.phase(a.x) != Phase::Pre
                {
                    return unsupported(
                        "an allreduce of a column slice or of a value after a synchronisation",
                    );
                }
                roots.push(self.shape(a.x)[self.shape(a.x).len() - 1]);
                self.allreduce = Some(AllreducePlan {
                    x: a.x,
                    compression: a.compression,
                });
                self.set(v, View::Root(0), Phase::Post);
            }
            OpKind::RmsNorm(n) => {
                let v = res.expect("rmsnorm result");
                if self.norm.is_some() {
                    return unsupported("more than one rmsnorm in a kernel");
                }
                if !matches!(self.view(n.x), View::Free | View::Root(0)) {
                    return unsupported("an rmsnorm over a column slice");
                }
                if !matches!(self.def(n.weight), OpKind::Load(_)) {
                    return unsupported("rmsnorm weights that are not a loaded input");
                }
                roots.push(self.shape(n.x)[self.shape(n.x).len() - 1]);
                self.norm = Some(NormPlan { x: n.x, eps: n.eps });
                self.set(v, View::Root(0), Phase::Norm);
            }
            OpKind::Store(s) => {
                if self.view(s.value) == View::Free {
                    roots.push(self.shape(s.value)[self.shape(s.value).len() - 1]);
                }
                self.stores.push((s.value, s.buffer));
            }
            OpKind::Reduce(_) | OpKind::QuantizeInt8(_) | OpKind::DequantizeInt8(_) => {
                return unsupported(format!("op `{}` outside an allreduce", kind.mnemonic()));
            }
            OpKind::QuantizeRne(q) => {
                if !matches!(self.def(q.x), OpKind::Load(_)) {
                    return unsupported(
                        "q8 quantisation of a computed activation: quantize_int8.rne lowers on a loaded FP16 input \
                         (each workgroup quantises it into LDS before its GEMV)",
                    );
                }
                for &r in results {
                    self.check_shape(r)?;
                    self.set(r, View::Free, Phase::Pre);
                    self.q8_values.insert(r);
                }
            }
            OpKind::GemvQ8(g) => {
                let v = res.expect("a gemv defines a value");
                self.check_shape(v)?;
                let (x, q8) = self.q8_source(g)?;
                self.gemv(v, g.weight, x, Some(q8))?;
                roots.push(self.shape(v)[1]);
                self.set(v, View::Root(0), Phase::Pre);
            }
        }
        Ok(())
    }

    fn check_space(&self, b: Buffer) -> Result<(), LowerError> {
        let d = self.kernel.buffer(b).expect("validated");
        match d.space {
            MemorySpace::Global | MemorySpace::HostVisible => Ok(()),
            s => unsupported(format!(
                "parameter `{}` in memory space {}",
                d.name,
                s.name()
            )),
        }
    }

    /// The loaded activation and quantisation of a `gemv_q8`: its codes and scales must be the
    /// two results of one `quantize_int8.rne` of the same block.
    fn q8_source(&self, g: &GemvQ8) -> Result<(Value, Q8Plan), LowerError> {
        let (dc, ds) = (
            self.kernel.value_def(g.codes).expect("validated"),
            self.kernel.value_def(g.scales).expect("validated"),
        );
        let OpKind::QuantizeRne(q) = self.def(g.codes) else {
            return unsupported(
                "gemv_q8 codes that are not from quantize_int8.rne (the kernel quantises its activation itself)",
            );
        };
        if dc.op != ds.op || (dc.index, ds.index) != (0, 1) || q.block != g.block {
            return unsupported(
                "gemv_q8 codes and scales from different quantisations (or of another block size)",
            );
        }
        Ok((
            q.x,
            Q8Plan {
                block: q.block,
                clamp: q.clamp,
            },
        ))
    }

    fn gemv(
        &mut self,
        v: Value,
        weight: Buffer,
        x: Value,
        q8: Option<Q8Plan>,
    ) -> Result<(), LowerError> {
        let wd = self.kernel.buffer(weight).expect("validated");
        self.check_space(weight)?;
        let BufferType::Weight(w) = wd.local_type() else {
            unreachable!("validated: a weight")
        };
        match w.format {
            WeightFormat::F16 if q8.is_some() => unreachable!("validated: gemv_q8 of INT4"),
            WeightFormat::F16 => {}
            WeightFormat::Gptq(l) if l.act_order => {
                return unsupported(format!("act-order (g_idx) GPTQ weight `{}`", wd.name));
            }
            WeightFormat::Gptq(l) if l.scale != ScalarType::F16 => {
                return unsupported(format!("GPTQ scales of type {} in `{}`", l.scale, wd.name));
            }
            WeightFormat::Gptq(_) => {}
            WeightFormat::Awq(_) => return unsupported(format!("AWQ weight `{}`", wd.name)),
        }
        let act = match self.def(x) {
            OpKind::Load(xl) => Activation::Input(xl.buffer),
            _ => Activation::Prologue(x),
        };
        match &mut self.gemv {
            None => {
                self.gemv = Some(GemvPlan {
                    gemvs: vec![(v, weight)],
                    x: act,
                    weight: w,
                    q8,
                })
            }
            Some(g) if g.x == act && g.weight == w && g.q8 == q8 => g.gemvs.push((v, weight)),
            Some(_) => {
                return unsupported(
                    "GEMVs with different activations or weight shapes in one kernel",
                );
            }
        }
        Ok(())
    }

    /// Whether `v` is computed by the GEMV prologue.
    fn in_prologue(&self, v: Value) -> bool {
        self.prologue.as_ref().is_some_and(|p| p.computes(v))
    }

    /// The prologue of the first GEMV whose activation is not a loaded input, if any: the
    /// activation's defining DAG, checked to be loads, elementwise ops, `round_f16` and at most
    /// one RMSNorm (see [`ProloguePlan`]).
    fn find_prologue(&self) -> Result<Option<ProloguePlan>, LowerError> {
        let act = self.kernel.ops().find_map(|(_, op)| match &op.kind {
            OpKind::Gemv(g) if !matches!(self.def(g.x), OpKind::Load(_)) => Some(g.x),
            _ => None,
        });
        let Some(act) = act else {
            return Ok(None);
        };
        let k = self.shape(act)[1];
        if k % 8 != 0 {
            return unsupported(format!(
                "a GEMV prologue with K={k} (the prologue writes the activation 8 halves at a time: K must be a multiple of 8)"
            ));
        }
        let mut p = ProloguePlan {
            act,
            norm: None,
            values: HashSet::new(),
            loads: BTreeSet::new(),
        };
        let mut stack = vec![act];
        while let Some(v) = stack.pop() {
            if !p.values.insert(v) {
                continue;
            }
            match self.def(v) {
                OpKind::Load(_) => {
                    p.values.remove(&v);
                    p.loads.insert(v);
                }
                OpKind::Unary(u) => stack.push(u.x),
                OpKind::RoundF16(r) => stack.push(r.x),
                OpKind::Binary(b) => stack.extend([b.a, b.b]),
                OpKind::RmsNorm(n) => {
                    if p.norm.is_some() {
                        return unsupported(
                            "more than one rmsnorm in a GEMV prologue (the activation's computation)",
                        );
                    }
                    if !matches!(self.def(n.weight), OpKind::Load(_)) {
                        return unsupported(
                            "rmsnorm weights that are not a loaded input (in a GEMV prologue)",
                        );
                    }
                    p.norm = Some(PrologueNorm { x: n.x, eps: n.eps });
                    stack.extend([n.x, n.weight]);
                }
                OpKind::Slice(_) => {
                    return unsupported(
                        "a slice in a GEMV prologue (the activation's computation covers the whole K axis)",
                    );
                }
                other => {
                    return unsupported(format!(
                        "a GEMV whose activation depends on `{}`: a prologue (recomputed by every workgroup) holds only loads, \
                         elementwise ops, round_f16 and one rmsnorm of loaded inputs, and only an activation computed from \
                         GEMV or allreduce results is materialised behind a grid barrier (a GEMV stage)",
                        other.mnemonic()
                    ));
                }
            }
        }
        Ok(Some(p))
    }

    /// A computed prologue value feeds only the prologue itself and the GEMVs (as their
    /// activation): it exists per K coordinate, in each workgroup's LDS, not in the root column
    /// space.
    fn check_prologue_uses(&self, kind: &OpKind, results: &[Value]) -> Result<(), LowerError> {
        let Some(p) = &self.prologue else {
            return Ok(());
        };
        let inside = results.first().is_some_and(|&r| p.computes(r));
        let gemv_of_act = matches!(kind, OpKind::Gemv(g) if g.x == p.act);
        if inside || gemv_of_act {
            return Ok(());
        }
        match kind.args().into_iter().find(|&a| p.computes(a)) {
            Some(a) => unsupported(format!(
                "the GEMV prologue's value {a} is also used by `{}` (a value computed for the GEMV's activation \
                 feeds only that activation: every workgroup recomputes it per K coordinate, in LDS)",
                kind.mnemonic()
            )),
            None => Ok(()),
        }
    }

    /// All anchors of the root (GEMV N, allreduce and norm features, whole-vector stores) agree,
    /// and every slice lies within it.
    fn settle_root(&mut self, roots: &[usize]) -> Result<(), LowerError> {
        let Some(&n) = roots.first() else {
            return unsupported("a kernel with no GEMV, allreduce, norm or store");
        };
        if let Some(&m) = roots.iter().find(|&&m| m != n) {
            return unsupported(format!(
                "column spaces of {n} and {m} features in one kernel"
            ));
        }
        self.n = n;
        for &(v, _) in &self.stores {
            let o = self.store_offset(v);
            let f = *self.shape(v).last().expect("values have an axis");
            if o < 0 || o as usize + f > n {
                return unsupported(format!(
                    "a store of columns {o}..{} outside the {n} root columns",
                    o + f as i64
                ));
            }
        }
        Ok(())
    }
}
