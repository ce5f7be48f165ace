//! The GEMV main loop: each workgroup computes its tile of columns for every batch row, leaving
//! per-slice partial sums in LDS for the elementwise stage to add up in a fixed order.

use wavefuse_ir::{Buffer, GptqLayout, WeightFormat, ZeroPoint};

use crate::lowered::{Base, Expr, Param, ReduceKind, Reg, Special, Stmt, Ty, UnOp};

use super::LowerError;
use super::build::*;
use super::lowering::{BufParams, Lowering};

fn sched<T>(what: String) -> Result<T, LowerError> {
    Err(LowerError::Schedule(what))
}

/// The GPTQ tiling: `lanes_per_row` lanes read `v` adjacent column words each of one K-row;
/// `slices` such rows of lanes split the groups of K between them.
struct Gptq {
    l: GptqLayout,
    k: usize,
    n: usize,
    groups: usize,
    words_per_group: usize,
    v: usize,
    lanes_per_row: usize,
    slices: usize,
    accs: usize,
    batch: usize,
    x: Param,
    weights: Vec<Buffer>,
}

impl Gptq {
    /// First accumulator of (weight `mi`, batch row `bi`, column word `j`).
    fn acc(&self, mi: usize, bi: usize, j: usize) -> usize {
        ((mi * self.batch + bi) * self.v + j) * self.accs
    }
}

impl Lowering<'_> {
    pub(super) fn gemv(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let g = self.plan.gemv.as_ref().expect("called with a GEMV");
        match g.weight.format {
            WeightFormat::Gptq(l) => self.gemv_gptq(l, out),
            WeightFormat::F16 => self.gemv_f16(out),
            WeightFormat::Awq(_) => Err(LowerError::Unsupported("AWQ weights".into())),
        }
    }

    /// Zero-initialised f32 accumulators.
    fn zeros(&mut self, n: usize, hint: &'static str, out: &mut Vec<Stmt>) -> Vec<Reg> {
        (0..n)
            .map(|_| {
                let a = self.k.reg(Ty::F32, hint);
                out.push(assign(a, f(0.0)));
                a
            })
            .collect()
    }

    /// One LDS array `[t_red · B · C]` per GEMV for the cross-slice reduction.
    fn reduction_arrays(&mut self, t_red: usize) {
        let len = t_red * self.plan.batch * self.cols;
        let m = self.plan.gemv.as_ref().expect("a GEMV").gemvs.len();
        self.t_red = t_red;
        self.red = (0..m).map(|_| self.k.lds(Ty::F32, len)).collect();
    }

    /// Sum of the independent accumulators `acc[base .. base + a]`.
    fn sum_accs(accs: &[Reg]) -> Expr {
        accs.iter()
            .skip(1)
            .fold(r(accs[0]), |e, &a| Expr::add(e, r(a)))
    }

    /// The GPTQ tiling of this kernel, checked against the schedule.
    fn gptq_tiling(&self, l: GptqLayout) -> Result<Gptq, LowerError> {
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let (kdim, n) = (g.weight.k, g.weight.n);
        let group = l.group.rows(kdim);
        if kdim % 8 != 0 || group % 8 != 0 || kdim % group != 0 || n % 8 != 0 {
            return Err(LowerError::Unsupported(format!(
                "GPTQ shape K={kdim}, N={n}, group {group} (K must be whole groups of whole words, N whole zero-point words)"
            )));
        }
        let v = self.s.words_per_iteration as usize;
        let (c, wg) = (self.cols, self.wg());
        if c % v != 0 || n % v != 0 {
            return sched(format!(
                "{v} words per lane do not divide {c} columns per workgroup and N={n}"
            ));
        }
        let lanes_per_row = c / v;
        if wg % lanes_per_row != 0 || wg / lanes_per_row != self.s.threads_per_column as usize {
            return sched(format!(
                "INT4: {wg} lanes = threads per column ({}) x columns ({c}) / words per lane ({v}) does not hold",
                self.s.threads_per_column
            ));
        }
        Ok(Gptq {
            l,
            k: kdim,
            n,
            groups: kdim / group,
            words_per_group: group / 8,
            v,
            lanes_per_row,
            slices: wg / lanes_per_row,
            accs: self.s.accumulators as usize,
            batch: self.plan.batch,
            x: self.dense(g.x),
            weights: g.gemvs.iter().map(|&(_, w)| w).collect(),
        })
    }

    fn gemv_gptq(&mut self, l: GptqLayout, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let t = self.gptq_tiling(l)?;
        self.reduction_arrays(t.slices);
        out.push(comment(format!(
            "GPTQ INT4 GEMV: lane (local_id % {lpr}) reads {v} adjacent packed column word(s) of one K-row (coalesced); \
             K slice local_id / {lpr} of {s} takes groups slice, slice + {s}, ...",
            lpr = t.lanes_per_row,
            v = t.v,
            s = t.slices
        )));
        let (col_l, slice, n0) = (
            self.k.reg(Ty::U32, "lane_col"),
            self.k.reg(Ty::U32, "slice"),
            self.k.reg(Ty::U32, "n0"),
        );
        out.push(assign(col_l, rem(sp(Special::LocalId), u(t.lanes_per_row))));
        out.push(assign(slice, div(sp(Special::LocalId), u(t.lanes_per_row))));
        out.push(assign(n0, add(r(self.tile0), mul(r(col_l), u(t.v)))));
        let acc = self.zeros(t.weights.len() * t.batch * t.v * t.accs, "acc", out);

        let gi = self.k.reg(Ty::U32, "group");
        let mut group_body = Vec::new();
        let (sf, nzs) = self.gptq_group_constants(&t, gi, n0, &mut group_body);
        let kw = self.k.reg(Ty::U32, "kword");
        let word_body = self.gptq_word(&t, gi, kw, n0, &sf, &nzs, &acc);
        group_body.push(for_loop(kw, u(0), u(t.words_per_group), u(1), word_body));
        let groups_loop = for_loop(gi, r(slice), u(t.groups), u(t.slices), group_body);
        out.push(comment(
            "dequantise: w = fma(f32(bfe(word, 4i, 4)), s, -z*s), which is (q - z)*s exactly in f32; acc = fma(w, f32(x), acc)",
        ));
        when(lt(r(n0), u(t.n)), vec![groups_loop], out);

        out.push(comment("cross-slice reduction: each slice's sums to LDS, added in slice order after the barrier"));
        for mi in 0..t.weights.len() {
            for bi in 0..t.batch {
                let base = t.acc(mi, bi, 0);
                let vals = (0..t.v)
                    .map(|j| Self::sum_accs(&acc[base + j * t.accs..base + (j + 1) * t.accs]))
                    .collect();
                let idx = add(
                    mul(add(mul(r(slice), u(t.batch)), u(bi)), u(self.cols)),
                    mul(r(col_l), u(t.v)),
                );
                out.push(store(self.lds_at(self.red[mi], idx), vals));
            }
        }
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }

    /// Once per group (DESIGN.md §2): the scale `s` as f32 and `−z·s` for every weight and
    /// column word, from `scales[g, n]` and nibble `n % 8` of `qzeros[g, n / 8]`.
    fn gptq_group_constants(
        &mut self,
        t: &Gptq,
        gi: Reg,
        n0: Reg,
        out: &mut Vec<Stmt>,
    ) -> (Vec<Reg>, Vec<Reg>) {
        let (mut sf, mut nzs) = (vec![], vec![]);
        if t.l.zero == ZeroPoint::V1 {
            out.push(comment(
                "GPTQ v1 zero points: the stored nibble is z - 1, so add 1",
            ));
        }
        for &w in &t.weights {
            let BufParams::Gptq { scales, qzeros, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let sh: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::F16, "scale_h")).collect();
            out.push(load(
                sh.clone(),
                at(Base::Param(scales), add(mul(r(gi), u(t.n)), r(n0))),
            ));
            let zw = qzeros.map(|zp| {
                let zw = self.k.reg(Ty::U32, "zero_word");
                out.push(load(
                    vec![zw],
                    at(
                        Base::Param(zp),
                        add(mul(r(gi), u(t.n / 8)), div(r(n0), u(8))),
                    ),
                ));
                zw
            });
            for (j, &h) in sh.iter().enumerate() {
                let s32 = self.k.reg(Ty::F32, "scale");
                out.push(assign(s32, cast(Ty::F32, r(h))));
                let z = match (t.l.zero, zw) {
                    (ZeroPoint::Symmetric, _) | (_, None) => f(8.0),
                    (zero, Some(zw)) => {
                        let nib = bfe(r(zw), mul(rem(add(r(n0), u(j)), u(8)), u(4)), 4);
                        let nib = if zero == ZeroPoint::V1 {
                            add(nib, u(1))
                        } else {
                            nib
                        };
                        cast(Ty::F32, nib)
                    }
                };
                let nz = self.k.reg(Ty::F32, "neg_zs");
                out.push(assign(nz, un(UnOp::Neg, Expr::mul(z, r(s32)))));
                sf.push(s32);
                nzs.push(nz);
            }
        }
        (sf, nzs)
    }

    /// One K-row word per weight and column: dequantise its 8 nibbles, then one FMA per nibble
    /// and batch row, alternating over the independent accumulators.
    #[allow(clippy::too_many_arguments)]
    fn gptq_word(
        &mut self,
        t: &Gptq,
        gi: Reg,
        kw: Reg,
        n0: Reg,
        sf: &[Reg],
        nzs: &[Reg],
        acc: &[Reg],
    ) -> Vec<Stmt> {
        let row = self.k.reg(Ty::U32, "krow");
        let mut out = vec![assign(row, add(mul(r(gi), u(t.words_per_group)), r(kw)))];
        let mut wf = vec![]; // per (weight, column word, nibble)
        for (mi, &w) in t.weights.iter().enumerate() {
            let BufParams::Gptq { qweight, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let words: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::U32, "qword")).collect();
            out.push(load(
                words.clone(),
                at(Base::Param(qweight), add(mul(r(row), u(t.n)), r(n0))),
            ));
            for (j, &word) in words.iter().enumerate() {
                for i in 0..8u32 {
                    let wr = self.k.reg(Ty::F32, "w");
                    let q = cast(Ty::F32, bfe(r(word), Expr::u32(4 * i), 4));
                    out.push(assign(
                        wr,
                        fma(q, r(sf[mi * t.v + j]), r(nzs[mi * t.v + j])),
                    ));
                    wf.push(wr);
                }
            }
        }
        for bi in 0..t.batch {
            let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "x")).collect();
            out.push(load(
                xh.clone(),
                at(Base::Param(t.x), add(u(bi * t.k), mul(r(row), u(8)))),
            ));
            for (i, &xi) in xh.iter().enumerate() {
                for mi in 0..t.weights.len() {
                    for j in 0..t.v {
                        let a = acc[t.acc(mi, bi, j) + i % t.accs];
                        let w = wf[(mi * t.v + j) * 8 + i];
                        out.push(assign(a, fma(r(w), cast(Ty::F32, r(xi)), r(a))));
                    }
                }
            }
        }
        out
    }

    fn gemv_f16(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let g = self.plan.gemv.as_ref().expect("a GEMV");
        let (kdim, n) = (g.weight.k, g.weight.n);
        let x = self.dense(g.x);
        let weights: Vec<_> = g.gemvs.iter().map(|&(_, w)| self.dense(w)).collect();
        let (c, wg, b, wave) = (self.cols, self.wg(), self.plan.batch, self.wave());
        let t = self.s.threads_per_column as usize;
        if t % wave != 0 || c * t != wg {
            return sched(format!(
                "FP16 GEMV: threads per column ({t}) must be a multiple of the wave ({wave}) and x {c} columns = {wg} lanes"
            ));
        }
        let vh = 2 * self.s.words_per_iteration as usize;
        if kdim % vh != 0 {
            return Err(LowerError::Unsupported(format!(
                "FP16 GEMV with K={kdim} not a multiple of {vh}"
            )));
        }
        let accs = self.s.accumulators as usize;
        self.reduction_arrays(t / wave);
        out.push(comment(format!(
            "FP16 GEMV, W stored [N, K]: {t} lanes per column read {vh} consecutive halves of one row each (coalesced), \
             reduce in the wave, then across the column's waves through LDS"
        )));
        let (cl, lk, nn) = (
            self.k.reg(Ty::U32, "col_l"),
            self.k.reg(Ty::U32, "lane_k"),
            self.k.reg(Ty::U32, "n"),
        );
        out.push(assign(cl, div(sp(Special::LocalId), u(t))));
        out.push(assign(lk, rem(sp(Special::LocalId), u(t))));
        out.push(assign(nn, add(r(self.tile0), r(cl))));
        let m = weights.len();
        let acc = self.zeros(m * b * accs, "acc", out);
        let kk = self.k.reg(Ty::U32, "k");
        let mut body = Vec::new();
        let mut wh_all = Vec::new();
        for &w in &weights {
            let wh: Vec<Reg> = (0..vh).map(|_| self.k.reg(Ty::F16, "w")).collect();
            body.push(load(
                wh.clone(),
                at(Base::Param(w), add(mul(r(nn), u(kdim)), r(kk))),
            ));
            wh_all.push(wh);
        }
        for bi in 0..b {
            let xh: Vec<Reg> = (0..vh).map(|_| self.k.reg(Ty::F16, "x")).collect();
            body.push(load(
                xh.clone(),
                at(Base::Param(x), add(u(bi * kdim), r(kk))),
            ));
            for (i, &xi) in xh.iter().enumerate() {
                for (mi, wh) in wh_all.iter().enumerate() {
                    let a = acc[(mi * b + bi) * accs + i % accs];
                    let prod = fma(cast(Ty::F32, r(wh[i])), cast(Ty::F32, r(xi)), r(a));
                    body.push(assign(a, prod));
                }
            }
        }
        let k_loop = for_loop(kk, mul(r(lk), u(vh)), u(kdim), u(t * vh), body);
        when(lt(r(nn), u(n)), vec![k_loop], out);
        // Wave reductions run with every lane active (outside the column mask).
        for mi in 0..m {
            for bi in 0..b {
                let base = (mi * b + bi) * accs;
                let sum = self.k.reg(Ty::F32, "wave_sum");
                out.push(Stmt::WaveReduce {
                    dst: sum,
                    op: ReduceKind::Sum,
                    value: Self::sum_accs(&acc[base..base + accs]),
                });
                let wave_in_col = div(r(lk), u(wave));
                let idx = add(mul(add(mul(wave_in_col, u(b)), u(bi)), u(c)), r(cl));
                let st = store(self.lds_at(self.red[mi], idx), vec![r(sum)]);
                when(eq(sp(Special::LaneId), u(0)), vec![st], out);
            }
        }
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }
}
