//! Several GEMV stages in one kernel, separated by grid barriers.
//!
//! A GEMV whose activation is computed from synchronised values — another GEMV's results
//! (`round_f16(silu(gate)·up)` in front of the FFN's down projection) or an allreduce's — cannot
//! be a prologue (every workgroup would need every column of the earlier GEMV). The kernel is
//! cut in front of that GEMV into *stage kernels*, each of the shape [`Plan`] accepts, and each
//! is lowered by the ordinary [`Lowering`] into one [`LoweredKernel`]:
//!
//! 1. **Cut** ([`split`]). The activation `a` of the first such GEMV is the cut. Stage 1 holds
//!    every op that does not depend on `a`, plus `store a → stage1_act`: the activation written
//!    once, with the IR's roundings, to a kernel-internal global array `[B, K]`
//!    ([`Purpose::Scratch`](crate::lowered::Purpose::Scratch), like the RMSNorm's partials:
//!    the ABI, the runtime and the simulator allocate it as any scratch). Stage 2 starts with
//!    `load stage1_act` and holds every op that depends on `a` (its GEMV group, the allreduce,
//!    residual and RMSNorm after it, their stores), plus copies of the loads they read that
//!    stage 1 read too (the residual stream input). Any other stage-1 value a stage-2 op reads
//!    (the residual stream after an attention allreduce, added again after the FFN) crosses the
//!    barrier the same way, in a scratch array of its own (`stage1_v6`): stored once by stage 1,
//!    loaded by stage 2. Stage 2 is cut again if it holds another such GEMV.
//! 2. **Lower**. One schedule for all stages (its GEMV fields apply to every GEMV group); each
//!    stage has its own column tiles and tile parts `ceil(N_s / C) · k_split`. The parameters of
//!    the kernel's buffers are declared once, in the kernel's order, then the stage activations;
//!    later stages continue the same kernel (registers, LDS, the rank parameter, the one grid
//!    counter). LDS is not shared between stages: the kernel declares the sum.
//! 3. **Join**. The kernel's grid is the largest stage's tile parts — or, with
//!    [`Schedule::max_grid`] (a persistent grid, set by the co-residency fit), at most that many
//!    workgroups but at least the parts of every stage that waits for other workgroups inside
//!    (an allreduce's flags, an RMSNorm's barrier): a stage without such a wait that has more
//!    parts than workgroups loops over them, workgroup `w` taking parts `w, w + grid, …` through
//!    a virtual id its tiles and K parts read (`stage_body`); split-K's arrivals then count one
//!    per virtual workgroup, and the validator refuses any wait inside such a loop (§5.9: the
//!    awaited arrival could be a later iteration of the waiting workgroup). Between stage `s` and `s + 1` a
//!    [`Stmt::GridBarrier`] on the launch's one `grid_counter` (the RMSNorm's barrier, if any,
//!    is another index of the same counter). A stage whose grid is smaller runs its statements
//!    under `if wg_id < grid_s` — uniform over the workgroup, so the workgroup barriers inside
//!    stay in uniform control flow (§5.8) — but every workgroup passes every grid barrier, the
//!    stage's own included, outside the guard: the barrier counts the whole grid (§5.1, §5.9).
//!
//! Why the boundary is safe (DESIGN.md §5): every lane of a workgroup has stored its part of
//! the activation before the workgroup barrier that opens the barrier's expansion; lane 0 then
//! arrives once with a release at agent scope (§5.1: one elected arrival per workgroup), which
//! publishes the whole workgroup's stores (the workgroup barrier made them lane 0's); the
//! bounded (§5.10) acquire wait for this launch's generation of the never-reset counter (§5.4)
//! and the workgroup barrier after it order every later load of the activation, in every lane,
//! after all workgroups' stores. The activation lives in global memory, never LDS (§5.2), and is
//! written before and read after the barrier of the same launch, and a rank's launches run in
//! stream order, so it needs no zeroing or epoch stamp (§5.11). The grid barrier needs the
//! whole grid resident: [`expand_sync`](crate::lowered::expand::expand_sync) records it and
//! [`lower`](super::lower) refuses a grid that cannot be (§5.9).

use std::collections::{HashMap, HashSet};

use cranelift_entity::EntityRef;
use wavefuse_ir::{
    Buffer, BufferDecl, BufferType, Builder, Dist, Kernel, OpKind, Sharding, Tensor, Value,
};

use crate::lowered::{Base, Expr, LoweredKernel, Param, ParamKind, Reg, Special, Stmt, Ty};

use super::build::*;
use super::lowering::{BufParams, Lowering};
use super::plan::Plan;
use super::{LowerError, Schedule};
use crate::target::Arch;

/// A kernel cut at a stage boundary.
pub(super) struct Split {
    /// Everything that does not depend on the activation, plus its store to the scratch.
    pub first: Kernel,
    /// The GEMV of the materialised activation and everything after it (reading what crossed the
    /// barrier from scratch).
    pub rest: Kernel,
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, LowerError> {
    Err(LowerError::Unsupported(what.into()))
}

/// The values that are a GEMV's or an allreduce's result or are computed from one.
pub(super) fn synchronised(kernel: &Kernel) -> HashSet<Value> {
    let mut sync = HashSet::new();
    for (_, op) in kernel.ops() {
        let from_sync = matches!(
            op.kind,
            OpKind::Gemv(_) | OpKind::GemvQ8(_) | OpKind::AllReduce(_)
        ) || op.kind.args().iter().any(|a| sync.contains(a));
        if from_sync {
            sync.extend(op.results.iter().copied());
        }
    }
    sync
}

/// The activation of the first GEMV whose activation depends on a GEMV or an allreduce — or,
/// with `materialise` ([`Schedule::materialise_prologue`]), of the first whose activation is
/// computed at all (not a loaded input): a prologue materialised by a stage of its own.
fn cut(kernel: &Kernel, materialise: bool) -> Option<Value> {
    let sync = synchronised(kernel);
    let computed = |v: Value| {
        kernel
            .value_def(v)
            .and_then(|d| kernel.op(d.op))
            .is_some_and(|op| !matches!(op.kind, OpKind::Load(_)))
    };
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) if sync.contains(&g.x) || (materialise && computed(g.x)) => Some(g.x),
        _ => None,
    })
}

/// Whether [`Schedule::materialise_prologue`] changes how `kernel` is cut: it has a GEMV whose
/// activation is computed from loaded inputs.
pub(super) fn materialises_a_prologue(kernel: &Kernel) -> bool {
    cut(kernel, true) != cut(kernel, false)
}

/// `kind` with its values renamed by `map` (every argument must be in it).
fn renamed(kind: &OpKind, map: &HashMap<Value, Value>) -> OpKind {
    let m = |v: &Value| map[v];
    let mut k = kind.clone();
    match &mut k {
        OpKind::Load(_) => {}
        OpKind::Store(s) => s.value = m(&s.value),
        OpKind::Gemv(g) => g.x = m(&g.x),
        OpKind::GemvQ8(g) => {
            g.codes = m(&g.codes);
            g.scales = m(&g.scales);
        }
        OpKind::Binary(b) => {
            b.a = m(&b.a);
            b.b = m(&b.b);
        }
        OpKind::Unary(u) => u.x = m(&u.x),
        OpKind::RoundF16(r) => r.x = m(&r.x),
        OpKind::Slice(s) => s.x = m(&s.x),
        OpKind::RmsNorm(n) => {
            n.x = m(&n.x);
            n.weight = m(&n.weight);
        }
        OpKind::Reduce(r) => r.x = m(&r.x),
        OpKind::AllReduce(a) => a.x = m(&a.x),
        OpKind::QuantizeInt8(q) => q.x = m(&q.x),
        OpKind::QuantizeRne(q) => q.x = m(&q.x),
        OpKind::DequantizeInt8(d) => {
            d.codes = m(&d.codes);
            d.scales = m(&d.scales);
        }
    }
    k
}

/// A builder with `kernel`'s buffers (role Output where `stores` has the buffer, else Input)
/// and then the scratch buffers `extra` (the stage activation, then the other values that cross
/// the barrier).
fn builder(
    kernel: &Kernel,
    stores: &HashSet<Buffer>,
    extra: &[BufferDecl],
) -> (Builder, HashMap<Buffer, Buffer>, Vec<Buffer>) {
    let mut b = Builder::new(kernel.name(), kernel.tp());
    let mut bufs = HashMap::new();
    for (buf, d) in kernel.buffers() {
        let decl = match stores.contains(&buf) {
            true => BufferDecl::output(&d.name, d.ty.clone(), d.sharding),
            false => BufferDecl::input(&d.name, d.ty.clone(), d.sharding),
        };
        bufs.insert(buf, b.param(decl.space(d.space).index_space(d.index_space)));
    }
    let extra = extra.iter().map(|d| b.param(d.clone())).collect();
    (b, bufs, extra)
}

/// The scratch buffer of value `v` (its per-rank type and distribution), as an output of the
/// stage that writes it and an input of the one that reads it.
fn scratch_decls(
    info: &wavefuse_ir::KernelInfo,
    tp: u32,
    v: Value,
    name: &str,
) -> (BufferDecl, BufferDecl) {
    let t = info.value_type(v);
    let sharding = match t.dist {
        Dist::Replicated => Sharding::Replicated,
        Dist::Sharded => Sharding::ColumnParallel { tp },
        Dist::Partial => Sharding::Partial { tp },
    };
    let ty = BufferType::Tensor(Tensor {
        dtype: t.dtype,
        shape: t.shape.clone(),
    });
    (
        BufferDecl::output(name, ty.clone(), sharding),
        BufferDecl::input(name, ty, sharding),
    )
}

fn stored(kernel: &Kernel, ops: &[usize]) -> HashSet<Buffer> {
    let all: Vec<_> = kernel.ops().collect();
    ops.iter()
        .filter_map(|&i| match &all[i].1.kind {
            OpKind::Store(s) => Some(s.buffer),
            _ => None,
        })
        .collect()
}

fn with_buffers(kind: OpKind, bufs: &HashMap<Buffer, Buffer>) -> OpKind {
    let mut k = kind;
    match &mut k {
        OpKind::Load(l) => l.buffer = bufs[&l.buffer],
        OpKind::Store(s) => s.buffer = bufs[&s.buffer],
        OpKind::Gemv(g) => g.weight = bufs[&g.weight],
        OpKind::GemvQ8(g) => g.weight = bufs[&g.weight],
        _ => {}
    }
    k
}

/// Cut `kernel` in front of the first GEMV whose activation depends on a GEMV or an allreduce
/// (module docs, step 1); `None` when there is none. `name` names the activation's scratch.
pub(super) fn split(
    kernel: &Kernel,
    name: &str,
    materialise: bool,
) -> Result<Option<Split>, LowerError> {
    let info = wavefuse_ir::validate(kernel)?;
    let Some(a) = cut(kernel, materialise) else {
        return Ok(None);
    };
    let ops: Vec<_> = kernel.ops().collect();
    // Ops that depend on the activation (a store of the activation itself stays in stage 1).
    let mut late_values = HashSet::from([a]);
    let (mut early, mut late) = (Vec::new(), Vec::new());
    for (i, (_, op)) in ops.iter().enumerate() {
        let store_of_a = matches!(&op.kind, OpKind::Store(s) if s.value == a);
        if !store_of_a && op.kind.args().iter().any(|v| late_values.contains(v)) {
            late_values.extend(op.results.iter().copied());
            late.push(i);
        } else {
            early.push(i);
        }
    }
    // Values of stage 1 other than the activation that stage 2 reads: each materialised in a
    // scratch array of its own next to the activation (loaded inputs are loaded again instead).
    let mut crossing = Vec::new();
    for &i in &late {
        for v in ops[i].1.kind.args() {
            let def = kernel.value_def(v).expect("validated");
            let load = matches!(kernel.op(def.op).expect("validated").kind, OpKind::Load(_));
            if !late_values.contains(&v) && !load && !crossing.contains(&v) {
                crossing.push(v);
            }
        }
    }
    let mut names = vec![name.to_owned()];
    for v in &crossing {
        names.push(fresh(
            kernel,
            &format!("{}_{v}", name.trim_end_matches("_act")),
        ));
    }
    let values: Vec<Value> = std::iter::once(a).chain(crossing.iter().copied()).collect();
    let (outs, ins): (Vec<_>, Vec<_>) = values
        .iter()
        .zip(&names)
        .map(|(&v, n)| scratch_decls(&info, kernel.tp(), v, n))
        .unzip();

    // Stage 1: the ops before the cut, then the stores of what crosses the barrier.
    let (mut b1, bufs1, scratch1) = builder(kernel, &stored(kernel, &early), &outs);
    let mut map = HashMap::new();
    for &i in &early {
        let op = ops[i].1;
        b1.at(op.loc.clone()); // a refusal in the stage points at the user's op
        let results = b1.op(with_buffers(renamed(&op.kind, &map), &bufs1));
        map.extend(op.results.iter().copied().zip(results));
    }
    for (v, &buf) in values.iter().zip(&scratch1) {
        b1.store(map[v], buf);
    }

    // Stage 2: what crossed loaded from the scratch, the loads stage 1 shares re-issued.
    let (mut b2, bufs2, scratch2) = builder(kernel, &stored(kernel, &late), &ins);
    let mut map2 = HashMap::new();
    for (&v, &buf) in values.iter().zip(&scratch2) {
        map2.insert(v, b2.load(buf));
    }
    for &i in &late {
        let op = ops[i].1;
        for v in op.kind.args() {
            if map2.contains_key(&v) {
                continue;
            }
            let def = kernel.value_def(v).expect("validated");
            let OpKind::Load(l) = &kernel.op(def.op).expect("validated").kind else {
                unreachable!("a stage-1 value read by stage 2 crosses in scratch")
            };
            let copy = b2.load(bufs2[&l.buffer]);
            map2.insert(v, copy);
        }
        b2.at(op.loc.clone());
        let results = b2.op(with_buffers(renamed(&op.kind, &map2), &bufs2));
        map2.extend(op.results.iter().copied().zip(results));
    }
    Ok(Some(Split {
        first: b1.finish(),
        rest: b2.finish(),
    }))
}

/// The stage kernels of `kernel` (one when it has no stage boundary) and the name of each
/// boundary's activation scratch.
pub(super) fn stage_kernels(kernel: &Kernel, materialise: bool) -> Result<Vec<Kernel>, LowerError> {
    let mut stages = Vec::new();
    let mut rest = kernel.clone();
    loop {
        let name = scratch_name(&rest, stages.len() + 1);
        match split(&rest, &name, materialise)? {
            None => {
                stages.push(rest);
                return Ok(stages);
            }
            Some(s) => {
                if cut(&s.first, materialise).is_some() {
                    return unsupported(
                        "a GEMV whose activation depends on a GEMV or allreduce that does not lead to the next \
                         stage's activation (each grid barrier between GEMV stages materialises one activation)",
                    );
                }
                stages.push(s.first);
                rest = s.rest;
            }
        }
    }
}

/// `stage{i}_act`, with underscores added until no buffer of `kernel` has the name.
fn scratch_name(kernel: &Kernel, i: usize) -> String {
    fresh(kernel, &format!("stage{i}_act"))
}

/// `base`, with underscores added until no buffer of `kernel` has the name.
fn fresh(kernel: &Kernel, base: &str) -> String {
    let mut name = base.to_owned();
    while kernel.buffer_by_name(&name).is_some() {
        name.push('_');
    }
    name
}

/// Name the stage in a refusal.
fn in_stage(i: usize, n: usize, e: LowerError) -> LowerError {
    let at = |m: String| format!("GEMV stage {} of {n}: {m}", i + 1);
    match e {
        LowerError::Unsupported(m) => LowerError::Unsupported(at(m)),
        LowerError::Schedule(m) => LowerError::Schedule(at(m)),
        other => other,
    }
}

/// One lowered GEMV stage before the join.
struct Part {
    /// Its tile parts: `tiles · k_split`.
    grid: usize,
    /// What its work computes the same in every tile part (the GEMV prologue's `1/rms`,
    /// [`Lowering::part_invariant`]): run once per workgroup, in front of the part loop.
    invariant: Vec<Stmt>,
    /// Its work.
    body: Vec<Stmt>,
    /// The grid barrier after it (none after the last stage).
    barrier: Vec<Stmt>,
    /// The register holding its virtual workgroup id (with [`Schedule::max_grid`]).
    id: Option<Reg>,
    /// Its GEMV weights' arrays (with [`Schedule::prefetch_next_stage`], from the second stage
    /// on): prefetched into L2 before the grid barrier in front of it ([`prefetch`]).
    weights: Vec<Param>,
}

/// Lower the stage kernels of `kernel` (at least two) into one kernel (module docs, steps 2-3).
pub(super) fn lower_stages(
    kernel: &Kernel,
    stages: &[Kernel],
    arch: Arch,
    s: &Schedule,
) -> Result<LoweredKernel, LowerError> {
    let n = stages.len();
    if s.stripe_workgroups > 0 {
        return Err(LowerError::Schedule(format!(
            "stripe_workgroups = {}: the stripe grid is lowered for a kernel of one GEMV stage; this one has {n} (their GEMVs loop over tiles on the stages' grid: stripe_workgroups = 0)",
            s.stripe_workgroups
        )));
    }
    let all = stages.last().expect("at least two stages");
    let originals = kernel.buffers().len();
    let mut carry = None;
    let mut parts: Vec<Part> = Vec::new();
    for (i, sk) in stages.iter().enumerate() {
        let plan = Plan::new(sk).map_err(|e| in_stage(i, n, e))?;
        // A stage without a GEMV (a materialised prologue) has no K to split.
        let stage_schedule = match plan.gemv {
            None => Schedule {
                k_split: 1,
                ..s.clone()
            },
            Some(_) => s.clone(),
        };
        let mut l = match carry.take() {
            None => Lowering::new(plan, arch, stage_schedule),
            Some(c) => Lowering::resume(plan, arch, stage_schedule, c),
        }
        .map_err(|e| in_stage(i, n, e))?;
        if i == 0 {
            // The kernel's own buffers with their own roles, then the stage activations.
            l.declare_buffers_of(all, &|b, _| {
                let b = b.index();
                (b < originals).then(|| {
                    let (_, d) = kernel.buffers().nth(b).expect("an original buffer");
                    d.role
                })
            })?;
        }
        let id = (s.max_grid > 0).then(|| {
            let id = l.k.reg(Ty::U32, "stage_wg");
            l.set_virtual_wg(id);
            id
        });
        l.part_invariant = Some(Vec::new());
        let body = l.body().map_err(|e| in_stage(i, n, e))?;
        let invariant = l.part_invariant.take().unwrap_or_default();
        let weights = match (
            &l.plan.gemv,
            i > 0 && s.prefetch_next_stage && arch.has_l2_prefetch(),
        ) {
            (Some(g), true) => g
                .gemvs
                .iter()
                .flat_map(|(_, w)| match &l.bufs[w] {
                    BufParams::Dense(p) => vec![*p],
                    BufParams::Gptq {
                        qweight,
                        scales,
                        qzeros,
                    } => [Some(*qweight), Some(*scales), *qzeros]
                        .into_iter()
                        .flatten()
                        .collect(),
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut barrier = Vec::new();
        if i + 1 < n {
            boundary(&mut l, i, &mut barrier);
        }
        l.check_lds().map_err(|e| in_stage(i, n, e))?;
        parts.push(Part {
            grid: l.grid,
            invariant,
            body,
            barrier,
            id,
            weights,
        });
        carry = Some(l.into_carry());
    }
    let mut k = carry.expect("stages were lowered").k;
    let grid = join_grid(&parts, s.max_grid);
    k.grid = u32::try_from(grid).map_err(|_| LowerError::Schedule("grid too large".into()))?;
    // Each stage's barrier is preceded by the prefetch of the next stage's weights.
    let mut ahead: Vec<Vec<Stmt>> = parts
        .iter()
        .skip(1)
        .map(|next| prefetch(&mut k, &next.weights, grid, s.workgroup_size as usize, 1.0))
        .collect();
    ahead.push(Vec::new());
    k.body = parts
        .into_iter()
        .zip(ahead)
        .enumerate()
        .flat_map(|(i, (p, ahead))| stage_body(i, p, grid, ahead))
        .collect();
    Ok(k)
}

/// Bytes of one L2 line (sm_90: 128-byte lines, requested in 32-byte sectors).
const L2_LINE: usize = 128;

/// Most bytes of its packed weights a kernel asks the L2 cache for before its stream-order wait
/// ([`Schedule::prefetch_before_wait`](crate::lower::Schedule::prefetch_before_wait)): half of
/// an H100's 50 MB L2, so the lines fetched ahead are not evicted by the predecessor's own
/// stream before they are read. Larger weights: the first lines of each array, in this share.
pub const PREFETCH_BEFORE_WAIT_BYTES: usize = 24 << 20;

/// With [`Schedule::prefetch_before_wait`](crate::lower::Schedule::prefetch_before_wait), on a
/// kernel with the stream-order prologue: the L2 prefetch of its packed GEMV weights (at most
/// [`PREFETCH_BEFORE_WAIT_BYTES`]) and then the [`Stmt::StreamWait`], in front of its body.
pub(super) fn prefetch_before_wait(k: &mut LoweredKernel) {
    let arrays: Vec<Param> = k
        .params
        .iter()
        .filter(|(_, d)| {
            matches!(d.kind, ParamKind::Array { .. })
                && d.data_array()
                    .is_some_and(|a| matches!(a.part, "qweight" | "scales" | "qzeros"))
        })
        .map(|(p, _)| p)
        .collect();
    let bytes: usize = arrays
        .iter()
        .filter_map(|&p| k.params[p].data_array().map(|a| a.len * a.elem.bytes()))
        .sum();
    if bytes == 0 {
        return;
    }
    let share = (PREFETCH_BEFORE_WAIT_BYTES as f64 / bytes as f64).min(1.0);
    let (grid, workgroup) = (k.grid as usize, k.workgroup_size as usize);
    let mut head = prefetch(k, &arrays, grid, workgroup, share);
    head.push(Stmt::StreamWait);
    k.body.splice(0..0, head);
}

/// [`Stmt::PrefetchL2`] of the first `share` of the lines of each of `arrays` (1.0: every
/// line), the lines split evenly over the `grid · workgroup` lanes (lane `g` of the grid takes
/// lines `g, g + grid · workgroup, …`): a hint that reads no value and orders nothing, so it
/// needs no synchronisation and no invariant of §5 (DESIGN.md). Emitted by every workgroup,
/// outside any guard or stage loop: in front of a grid barrier for the next stage's weights,
/// which do not depend on the barrier, so their DRAM reads can overlap the wait for the slowest
/// workgroup of the stage before; and in front of the stream-order wait
/// ([`prefetch_before_wait`]).
fn prefetch(
    k: &mut LoweredKernel,
    arrays: &[Param],
    grid: usize,
    workgroup: usize,
    share: f64,
) -> Vec<Stmt> {
    let mut out = Vec::new();
    for &p in arrays {
        let ParamKind::Array { elem, len, .. } = k.params[p].kind else {
            continue;
        };
        let per_line = (L2_LINE / elem.bytes()).max(1);
        let all = len.div_ceil(per_line);
        let lines = ((all as f64 * share).ceil() as usize).clamp(1, all);
        let line = k.reg(Ty::U32, "line");
        let lane = add(
            mul(sp(Special::WorkgroupId), u(workgroup)),
            sp(Special::LocalId),
        );
        let name = k.params[p].name.clone();
        let what = if share < 1.0 {
            format!("the first {lines} of the {all} lines")
        } else {
            format!("{lines} lines")
        };
        out.push(comment(format!(
            "`{name}` into L2 ahead of its reads ({what} of {L2_LINE} bytes over the grid's lanes; a hint: no value, no ordering)"
        )));
        out.push(for_loop(
            line,
            lane,
            u(lines),
            u(grid * workgroup),
            vec![Stmt::PrefetchL2 {
                mem: at(Base::Param(p), mul(r(line), u(per_line))),
            }],
        ));
    }
    out
}

/// Whether `body` waits for or signals other workgroups (a grid barrier, flags, a bounded
/// wait): such a stage needs one workgroup per tile part and cannot loop over them. Atomics
/// that do not wait (split-K's arrivals, after which only the last arriver goes on) can.
fn waits(body: &[Stmt]) -> bool {
    body.iter().any(|st| match st {
        Stmt::GridBarrier { .. }
        | Stmt::PublishFlag { .. }
        | Stmt::WaitFlag { .. }
        | Stmt::WaitFlagPerLane { .. }
        | Stmt::WaitGe { .. } => true,
        Stmt::For { body, .. } => waits(body),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => waits(then_body) || waits(else_body),
        _ => false,
    })
}

/// The kernel's grid: the largest stage's tile parts, or with `max_grid` at most that many
/// workgroups but never fewer than a stage that waits needs (it cannot loop).
fn join_grid(parts: &[Part], max_grid: u32) -> usize {
    let most = parts.iter().map(|p| p.grid).max().expect("stages");
    if max_grid == 0 {
        return most;
    }
    let fixed = parts
        .iter()
        .filter(|p| waits(&p.body))
        .map(|p| p.grid)
        .max()
        .unwrap_or(0);
    most.min((max_grid as usize).max(fixed))
}

/// Stage `i`'s statements in a kernel of `grid` workgroups: a stage with more tile parts than
/// workgroups (it does not wait: [`join_grid`]) loops over them, workgroup `w` taking parts
/// `w, w + grid, …` — the bounds are uniform over the workgroup, so its workgroup barriers stay
/// in uniform control flow (§5.8). Each iteration ends with a workgroup barrier (§5.2: LDS is
/// the workgroup's, and the next iteration writes the arrays this one read last — the FP16
/// GEMV's cross-wave sums are read after the iteration's last barrier; without it a lane of the
/// next iteration overwrote them first, `fuzz_regressions/persistent-stage-lds-reuse.wfir`). The
/// grid barrier after the stage is passed once, after the loop, by every workgroup (§5.1, §5.9).
/// A stage with fewer runs under [`guarded`].
fn stage_body(i: usize, p: Part, grid: usize, ahead: Vec<Stmt>) -> Vec<Stmt> {
    if !ahead.is_empty() {
        // The prefetch runs in every workgroup, between the stage (guarded or looped) and its
        // grid barrier, which every workgroup passes (§5.1, §5.9).
        let Part {
            grid: g,
            invariant,
            body,
            barrier,
            id,
            weights,
        } = p;
        let stage = Part {
            grid: g,
            invariant,
            body,
            barrier: Vec::new(),
            id,
            weights,
        };
        let mut out = stage_body(i, stage, grid, Vec::new());
        out.extend(ahead);
        out.extend(barrier);
        return out;
    }
    let Some(id) = p.id else {
        let mut body = p.invariant;
        body.extend(p.body);
        body.extend(p.barrier);
        return guarded(i, p.grid, grid, body);
    };
    let mut out = Vec::new();
    if p.grid > grid {
        out.push(comment(format!(
            "GEMV stage {}: {} tile parts on {grid} workgroups, each taking parts wg_id, wg_id + {grid}, ... (no grid-wide wait inside: §5.8 uniform bounds)",
            i + 1,
            p.grid
        )));
        // The part-invariant statements end with a workgroup barrier of their own (§5.2) when
        // they write LDS; they sit outside the loop, in uniform control flow (§5.8): every
        // workgroup takes at least one part here (`p.grid > grid`).
        out.extend(p.invariant);
        let mut body = p.body;
        body.push(comment(
            "§5.2: the next iteration reuses this workgroup's LDS: every lane is done with this one's first",
        ));
        body.push(Stmt::WorkgroupBarrier);
        out.push(for_loop(
            id,
            sp(Special::WorkgroupId),
            u(p.grid),
            u(grid),
            body,
        ));
        out.extend(p.barrier);
        out
    } else {
        out.push(assign(id, sp(Special::WorkgroupId)));
        let mut body = p.invariant;
        body.extend(p.body);
        body.extend(p.barrier);
        out.extend(guarded(i, p.grid, grid, body));
        out
    }
}

/// The grid barrier after stage `i`'s store of the next stage's activation.
fn boundary(l: &mut Lowering<'_>, i: usize, body: &mut Vec<Stmt>) {
    body.push(comment(format!(
        "grid barrier between GEMV stages {a} and {b}: stage {a} stored stage {b}'s activation in global scratch (§5.2: never LDS); \
         the elected arrival after a workgroup barrier (§5.1) releases every lane's stores of it, the bounded (§5.10) \
         acquire wait for this launch's generation of the never-reset counter (§5.4) and the workgroup barrier after it \
         order every lane's loads of it in stage {b} after all of them; the whole grid is co-resident (§5.9)",
        a = i + 1,
        b = i + 2,
    )));
    l.grid_barrier(body);
}

/// Stage `i`'s statements, those between its grid barriers under `if wg_id < g` when the
/// stage's grid `g` is smaller than the kernel's: the condition is uniform over the workgroup
/// (§5.8), and every workgroup still passes every grid barrier (§5.1, §5.9: it counts the whole
/// grid).
fn guarded(i: usize, g: usize, grid: usize, body: Vec<Stmt>) -> Vec<Stmt> {
    if g == grid {
        return body;
    }
    let mut out = vec![comment(format!(
        "GEMV stage {}: {g} of the {grid} workgroups; the others skip its work but pass its grid barriers",
        i + 1
    ))];
    let mut run = Vec::new();
    let flush = |run: &mut Vec<Stmt>, out: &mut Vec<Stmt>| {
        if !run.is_empty() {
            let cond = lt(Expr::Special(Special::WorkgroupId), u(g));
            when(cond, std::mem::take(run), out);
        }
    };
    for st in body {
        if matches!(st, Stmt::GridBarrier { .. }) {
            // The barrier's own comment goes with it, outside the guard.
            let said = match run.last() {
                Some(Stmt::Comment(_)) => run.pop(),
                _ => None,
            };
            flush(&mut run, &mut out);
            out.extend(said);
            out.push(st);
        } else {
            run.push(st);
        }
    }
    flush(&mut run, &mut out);
    out
}
