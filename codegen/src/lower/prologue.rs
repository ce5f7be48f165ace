//! The GEMV prologue: the activation `h [B, K]` (FP16) computed from loaded inputs by every
//! workgroup, into LDS, before its GEMV reads it (see [`ProloguePlan`](super::plan::ProloguePlan)
//! and the module docs of [`super`] for the cost rule).
//!
//! 1. With an RMSNorm in the prologue: the sum of squares of its input over K per batch row —
//!    lane `l` takes `k = l, l + wg, …`, each wave reduces, lane 0 of each wave writes the wave's
//!    partial to LDS, a workgroup barrier, then every lane adds the partials in wave order. The
//!    order is fixed, so every workgroup (and every rank: same data) gets bit-identical `1/rms`
//!    without a grid barrier.
//! 2. `h` itself, 8 halves per lane step, evaluated with the op-level semantics at each
//!    `(b, k)` (the IR's roundings exactly: `round_f16` is the FP16 conversion) and written to
//!    LDS — either into the GEMV's LDS activation stage ([`Schedule::x_in_lds`](super::Schedule::x_in_lds),
//!    in its B-fragment order, only the workgroup's K part) or, for the GEMV paths that read the
//!    activations per lane, into a plain `[B, K]` array the GEMV then reads instead of global
//!    memory. A workgroup barrier follows.
//!
//! Both barriers are workgroup barriers in uniform control flow (§5.8): the loops before them
//! have lane-dependent trip counts but the barriers sit after the loops.

use wavefuse_ir::OpKind;

use crate::lowered::{Base, BinOp, Expr, Lds, Reg, Special, Stmt, Ty, UnOp};

use super::LowerError;
use super::build::*;
use super::lowering::{Lowering, ty_of};
use super::plan::Activation;
use super::point::Point;

/// Halves of `h` one lane computes per step (one 16-byte LDS store).
const HALVES: usize = 8;

impl Lowering<'_> {
    /// Where the GEMV lanes read the activations `[B, K]`: the input parameter, the prologue's
    /// LDS array, or `None` when the prologue writes them straight into the LDS stage.
    pub(super) fn activations(&self) -> Option<Base> {
        match self.plan.gemv.as_ref().expect("a GEMV").x {
            Activation::Input(b) => Some(Base::Param(self.dense(b))),
            Activation::Prologue(_) => self.prologue_lds.map(Base::Lds),
        }
    }

    /// Whether the GEMV path stages the activations in LDS itself (`XStage`): then the prologue
    /// writes into that stage instead of an array of its own.
    fn gemv_stages_x(&self) -> bool {
        use super::schedule::Int4Dot;
        let gptq = matches!(
            self.plan.gemv.as_ref().expect("a GEMV").weight.format,
            wavefuse_ir::WeightFormat::Gptq(_)
        );
        gptq && self.s.x_in_lds && matches!(self.s.int4_dot, Int4Dot::Dot2 | Int4Dot::Mma)
    }

    /// K of the GEMVs.
    fn prologue_k(&self) -> usize {
        self.plan.gemv.as_ref().expect("a GEMV").weight.k
    }

    /// The prologue's first part (the norm's `1/rms`), then — unless the GEMV stages the
    /// activations itself — `h` into its own LDS array. Both depend on no tile and no K part: with
    /// [`Lowering::part_invariant`] set they go there (once per workgroup in front of a GEMV
    /// stage's part loop) instead of `out`; a stage's K part is packed per part
    /// ([`Lowering::prologue_stage`]).
    pub(super) fn prologue(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let p = self.plan.prologue.as_ref().expect("a prologue");
        let mut hoisted = self.part_invariant.take();
        let once = hoisted.is_some();
        let dst = match hoisted.as_mut() {
            Some(v) => v,
            None => out,
        };
        dst.push(comment(format!(
            "GEMV prologue: every workgroup computes the activation {} [{}, {}] (FP16) from the loaded inputs into LDS (recomputed per workgroup: no grid barrier{})",
            p.act,
            self.plan.batch,
            self.prologue_k(),
            if once {
                "; what depends on no tile or K part is computed once, in front of the stage's loop over its tile parts"
            } else {
                ""
            }
        )));
        if p.norm.is_some() {
            self.prologue_inv_rms(dst)?;
        }
        if !self.gemv_stages_x() {
            self.prologue_to_lds(dst)?;
        }
        self.part_invariant = hoisted;
        Ok(())
    }

    /// The prologue norm's `1/rms` per batch row, in every lane's registers.
    fn prologue_inv_rms(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let n = self.plan.prologue.as_ref().and_then(|p| p.norm.as_ref());
        let (x, eps) = n.map(|n| (n.x, n.eps)).expect("a prologue norm");
        let (b, kdim) = (self.plan.batch, self.prologue_k());
        let waves = self.k.lds(Ty::F32, self.wg() / self.wave() * b);
        out.push(comment(format!(
            "RMSNorm of the prologue: sum of squares over K per batch row, lane l taking the {HALVES} consecutive k of steps l, l + {}, ... \
             (one 16-byte load per input and step); each wave's partial to LDS, \
             then after the workgroup barrier (§5.2: LDS is workgroup-local, so the partials are read only after every wave wrote its own) \
             every lane adds them in wave order: the same 1/rms in every lane and workgroup",
            self.wg()
        )));
        let mut failed = None;
        self.workgroup_row_sums(
            waves,
            kdim / HALVES,
            None,
            &mut |this, c, bi, acc, body| {
                let k0 = mul(c, u(HALVES));
                match this.prologue_eval(x, bi, &k0, None, body) {
                    Ok(xs) => xs.into_iter().fold(r(acc), |sum, e| {
                        let xf = this.k.reg(Ty::F32, "xn");
                        body.push(assign(xf, this.to_f32(x, e)));
                        fma(r(xf), r(xf), sum)
                    }),
                    Err(e) => {
                        failed = Some(e);
                        r(acc)
                    }
                }
            },
            out,
        );
        if let Some(e) = failed {
            return Err(e);
        }
        let mut inv = Vec::with_capacity(b);
        for bi in 0..b {
            let total = self.waves_total(waves, bi, out);
            let mean = Expr::bin(BinOp::Div, r(total), f(kdim as f64));
            let s = self.k.reg(Ty::F32, "inv_rms");
            out.push(assign(
                s,
                un(UnOp::Rsqrt, Expr::add(mean, f(f64::from(eps as f32)))),
            ));
            inv.push(s);
        }
        self.prologue_inv = inv;
        Ok(())
    }

    /// `h` at batch row `bi`, K coordinates `k0 .. k0 + 8`: eight FP16 expressions.
    fn prologue_halves(
        &mut self,
        bi: usize,
        k0: &Expr,
        out: &mut Vec<Stmt>,
    ) -> Result<Vec<Expr>, LowerError> {
        let act = self.plan.prologue.as_ref().expect("a prologue").act;
        let inv = self.prologue_inv.get(bi).map(|&s| r(s));
        self.prologue_eval(act, bi, k0, inv, out)
    }

    /// Value `v` of the prologue (`h`, or the norm's input) at batch row `bi`, K coordinates
    /// `k0 .. k0 + 8`, with the row's `1/rms` where it is known: eight expressions. The
    /// loaded inputs it depends on are read with one 16-byte load each.
    fn prologue_eval(
        &mut self,
        v: wavefuse_ir::Value,
        bi: usize,
        k0: &Expr,
        inv: Option<Expr>,
        out: &mut Vec<Stmt>,
    ) -> Result<Vec<Expr>, LowerError> {
        let loads = self.prologue_loads_under(v);
        let mut points: Vec<Point> = (0..HALVES)
            .map(|j| Point::at(u(bi), add(k0.clone(), u(j)), inv.clone()))
            .collect();
        // Each loaded input's 8 consecutive elements with one vector load (16 bytes of FP16),
        // instead of one load per point.
        for input in loads {
            let OpKind::Load(l) = self.plan.def(input) else {
                unreachable!("the prologue's loads are loads")
            };
            let ty = ty_of(self.plan.dtype(input), "a prologue input")?;
            let regs: Vec<Reg> = (0..HALVES).map(|_| self.k.reg(ty, "in")).collect();
            let index = self.index(self.plan.shape(input), &points[0], 0);
            out.push(load(
                regs.clone(),
                at(Base::Param(self.dense(l.buffer)), index),
            ));
            for (pt, &reg) in points.iter_mut().zip(&regs) {
                pt.seed(input, r(reg));
            }
        }
        points
            .iter_mut()
            .map(|pt| self.eval(v, 0, pt, out))
            .collect()
    }

    /// The prologue's loads that `v` depends on, in value order (the norm's input does not need
    /// the norm's weight).
    fn prologue_loads_under(&self, v: wavefuse_ir::Value) -> Vec<wavefuse_ir::Value> {
        let p = self.plan.prologue.as_ref().expect("a prologue");
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            if seen.insert(v) && !p.loads.contains(&v) {
                stack.extend(self.plan.def(v).args());
            }
        }
        p.loads.intersection(&seen).copied().collect()
    }

    /// `h [B, K]` into a plain LDS array for the GEMV paths that read the activations per lane.
    fn prologue_to_lds(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let (b, kdim) = (self.plan.batch, self.prologue_k());
        let h = self.k.lds(Ty::F16, b * kdim);
        out.push(comment(format!(
            "the activation to LDS [{b}][{kdim}] FP16, {HALVES} halves per lane step; the GEMV reads it there instead of global memory"
        )));
        for bi in 0..b {
            let c = self.k.reg(Ty::U32, "hc");
            let k0 = mul(r(c), u(HALVES));
            let mut body = Vec::new();
            let vals = self.prologue_halves(bi, &k0, &mut body)?;
            body.push(store(self.lds_at(h, add(u(bi * kdim), k0)), vals));
            out.push(for_loop(
                c,
                sp(Special::LocalId),
                u(kdim / HALVES),
                u(self.wg()),
                body,
            ));
        }
        self.prologue_barrier(out);
        self.prologue_lds = Some(h);
        Ok(())
    }

    /// `h` into the GEMV's LDS activation stage `lds` (u32 `[B][words][4]`, entry `(b, w)` = the
    /// FP16 pairs `(h0, h4), (h1, h5), (h2, h6), (h3, h7)` of row `b` at K-word `begin + w`): only
    /// the workgroup's K part, in the stage's own order.
    pub(super) fn prologue_stage(
        &mut self,
        batch: usize,
        lds: Lds,
        begin: &Expr,
        words: usize,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        out.push(comment(
            "the activation of this K part straight into the LDS stage, in B-fragment order: entry (b, w) = (h0,h4), (h1,h5), (h2,h6), (h3,h7) of batch row b at the part's K-word w",
        ));
        for bi in 0..batch {
            let w = self.k.reg(Ty::U32, "hw");
            let k0 = mul(add(begin.clone(), r(w)), u(HALVES));
            let mut body = Vec::new();
            let h = self.prologue_halves(bi, &k0, &mut body)?;
            let packs = (0..4)
                .map(|j| Expr::PackHalf2(Box::new(h[j].clone()), Box::new(h[j + 4].clone())))
                .collect();
            let entry = add(u(bi * words), r(w));
            body.push(store(self.lds_at(lds, mul(entry, u(4))), packs));
            out.push(for_loop(
                w,
                sp(Special::LocalId),
                u(words),
                u(self.wg()),
                body,
            ));
        }
        self.prologue_barrier(out);
        Ok(())
    }

    /// The barrier between the prologue's LDS writes and the GEMV's reads of them.
    fn prologue_barrier(&mut self, out: &mut Vec<Stmt>) {
        out.push(comment(
            "§5.2: LDS is workgroup-local and each lane wrote only its part of the activation: the GEMV's lanes read it only after this workgroup barrier",
        ));
        out.push(Stmt::WorkgroupBarrier);
    }
}

impl Point {
    /// A point of the prologue: batch row `b`, K coordinate `k`, with the row's `1/rms` when the
    /// prologue has a norm and it is known.
    pub(super) fn at(b: Expr, k: Expr, inv_rms: Option<Expr>) -> Point {
        Point::new(b, k.clone(), k, inv_rms)
    }
}

impl Lowering<'_> {
    /// The prologue keeps `h` in LDS: refuse, with the numbers, a kernel whose LDS (the
    /// activation plus the GEMV's reduction arrays) does not fit one workgroup's static LDS.
    /// Every LDS array of a prologue kernel is proportional to the batch (the activation, the
    /// reduction and norm partials), so the largest batch that fits is `limit / (bytes / B)`.
    pub(super) fn check_prologue_lds(&self) -> Result<(), LowerError> {
        let lds = self.k.lds_bytes();
        let limit = self.arch.max_static_lds_per_workgroup() as usize;
        if lds <= limit {
            return Ok(());
        }
        let (b, kdim) = (self.plan.batch, self.prologue_k());
        let parts = if self.gemv_stages_x() {
            self.s.k_split as usize
        } else {
            1
        };
        let act = b * kdim * 2 / parts;
        let per_row = lds.div_ceil(b);
        let fits = limit / per_row;
        let part = if parts > 1 {
            format!(" / k_split {parts}")
        } else {
            String::new()
        };
        Err(LowerError::Schedule(format!(
            "the GEMV prologue keeps its activation in LDS: B·K·2{part} = {b}·{kdim}·2{part} = {act} bytes; with the kernel's \
             other {} bytes of LDS that is {lds} bytes per workgroup, more than the {limit} a {} workgroup can declare \
             statically. At this schedule it fits up to batch {fits} ({per_row} bytes per batch row); `materialise_prologue = true` \
             computes the activation once into global memory behind a grid barrier instead",
            lds - act,
            self.arch
        )))
    }
}
