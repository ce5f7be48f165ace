//! The q8-activation INT4 GEMV (`gemv_q8` of `quantize_int8.rne x`, issue 19 item 2): integer
//! dot products of the packed weights and the quantised activations.
//!
//! # Where the quantisation happens, and why
//! Every workgroup quantises the K part it reads of the loaded FP16 activation into LDS (a
//! prologue, like the GEMV prologues of `prologue.rs`): it needs no grid barrier, no
//! co-residency and no second launch, and the codes never exist outside the workgroup (the IR's
//! codes and scales feed only the GEMV; the plan refuses any other use). What it costs is a
//! re-read of `x` from L2 and `B·K/k_split` quantisations per workgroup: the default schedule
//! takes 256 columns per workgroup (one per lane) so that this is small against the workgroup's
//! `256·K/k_split` weights (counted from the ISA in `tests/tests/q8.rs`: at 5120 → 17408,
//! batch 8, it adds 8 % to the hot loop's VALU). The alternative — quantise once into global
//! memory behind a grid barrier, or in a launch of its own — would save that but needs the
//! whole grid co-resident (DESIGN.md §5.9) or a second launch (~12 µs on an MI50); not built.
//!
//! Lane `i` of the prologue takes blocks `i, i + wg, …` of the part (batch row `i / blocks`),
//! each whole: `m = max|x|` over the block (one 16-byte load per 8 rows), then, as the op
//! says, `s = m / C`, `r = C / m` (0 where m = 0, by a select) and per element
//! `q = clamp(rne(x · r), −C, C)` where `rne(x · r)` is `fma(x, r, 1.5·2^23) − 1.5·2^23`: the
//! fma rounds the exact product once, in `[2^23, 2^24)` where the ulp is 1, so it is the
//! product rounded half to even (|x·r| ≤ C + 1 < 2^22); the subtraction is exact. The codes go to
//! LDS as two words per 8 K rows: the even rows' four bytes and the odd rows'. Next to them the
//! block's `s` (f32, `[block][B]`) and `Σq` (i32); after a workgroup barrier a second pass
//! sums per weight group `X = Σ_blocks s·Σq` (f32, in block order, `[group][B]`), then another
//! barrier (§5.2: the stage is this workgroup's only).
//!
//! # The loop
//! Lane `(col, slice)` as in the GPTQ path (`gemv.rs`); per group: the scale `s` and zero point
//! `z` of the lane's column words; per block of the group, per packed word `w` (rows 8k…8k+7)
//! `lo = w & 0x0F0F0F0F` (nibbles 0, 2, 4, 6 as bytes: the even rows) and
//! `hi = (w >> 4) & 0x0F0F0F0F` (the odd rows) — unsigned 0…15, so also valid signed bytes —
//! and per batch row `a = dot4(lo, x_even, a)`, `a = dot4(hi, x_odd, a)` from `a = 0`: `a` is
//! `Σ q·code` exactly (|a| ≤ 15·127·block < 2^31). Then `g = fma(f32(a), s_x, g)` per block
//! (rounded once; `f32(a)` exact below 2^24, i.e. for blocks of up to 8808 rows), and per group
//! the zero point once: `Σ_blocks s_x·Σ (q − z)·code = g − z·X`, so
//! `acc = fma(s, fma(−z, X, g), acc)` (no 32-bit integer multiply per block, which is quarter
//! rate on gfx906). The result's error against the f64 semantics is at the f32 level: a few
//! roundings per block and group (rel L2 ~1e-7 in `codegen/tests/q8.rs`). A group of up to 16
//! K-words is unrolled with all its words loaded first; longer groups (per-channel) loop over
//! their blocks.

use wavefuse_ir::GptqLayout;

use crate::lowered::{Base, BinOp, Expr, Lds, Reg, Special, Stmt, Ty, UnOp};

use super::super::LowerError;
use super::super::plan::Q8Plan;
use super::super::schedule::Int4Scaling;
use super::{BufParams, Gptq};
use super::{Lowering, add, assign, at, bin, cast, comment, div, f, fma, for_loop, load, lt, mul};
use super::{r, rem, sel, sp, store, sub, u, un, when};

/// `1.5 · 2^23`: adding it to a value of magnitude below `2^22` rounds it to an integer, half to
/// even, and subtracting it again is exact.
const RNE_MAGIC: f64 = 12_582_912.0;

/// The workgroup's K part of the q8 activations in LDS.
struct Q8Stage {
    /// u32 `[B][words][2]`: the even and odd rows' codes of K-word `w` of the part.
    codes: Lds,
    /// f32 `[B][blocks]`: the blocks' scales.
    scales: Lds,
    /// i32 `[B][blocks]`: the blocks' `Σq`.
    sums: Lds,
    /// f32 `[B][groups]`: per weight group of the part, `X = Σ_blocks s_x · Σq` (in block
    /// order), the zero point's factor.
    xsum: Lds,
    /// Weight groups of the part, and blocks per group.
    groups: usize,
    bpg: usize,
    /// K-words and blocks of the part, per batch row.
    words: usize,
    blocks: usize,
    /// K-words per block.
    wpb: usize,
}

/// LDS bytes of the q8 stage of a K part of `k_part` rows (codes, per block a scale and `Σq`,
/// per group `X`) and the cross-slice sums.
pub(in crate::lower) fn q8_lds_bytes(
    batch: usize,
    k_part: usize,
    (block, group): (usize, usize),
    slices: usize,
    cols: usize,
) -> usize {
    batch * k_part
        + 8 * batch * (k_part / block.max(1))
        + 4 * batch * (k_part / group.max(1))
        + 4 * slices * batch * cols
}

impl Lowering<'_> {
    pub(super) fn gemv_gptq_q8(
        &mut self,
        l: GptqLayout,
        q8: Q8Plan,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let mut t = self.gptq_tiling(l)?;
        // The integer path scales once per block and group; the tiling's other INT4 knobs
        // (nibble decode, per-weight scaling, dot2) do not apply.
        t.scaling = Int4Scaling::PerUnit;
        t.dot2 = false;
        let group = t.words_per_group * 8;
        if q8.block % 8 != 0 || group % q8.block != 0 {
            return Err(LowerError::Unsupported(format!(
                "gemv_q8 with activation blocks of {} rows and weight groups of {group}: the kernel needs blocks of whole packed words (a multiple of 8 rows) that divide the group",
                q8.block
            )));
        }
        let parts = self.s.k_split.max(1) as usize;
        let (begin, end) = self.split_units(t.groups)?;
        let k_part = t.k / parts;
        let slots = match self.s.reduction {
            super::Reduction::Slices => t.slices,
            super::Reduction::Serial => 1,
        };
        let lds = q8_lds_bytes(t.batch, k_part, (q8.block, group), slots, self.cols);
        let max = self.arch.max_static_lds_per_workgroup() as usize;
        if lds > max {
            return Err(LowerError::Schedule(format!(
                "gemv_q8: the q8 activations of a K part ({} x {k_part} codes, {} blocks of {}) and the cross-slice sums take {lds} bytes of LDS, more than {}'s {max} per workgroup: a larger k_split or fewer columns per workgroup",
                t.batch,
                t.batch * k_part / q8.block,
                q8.block,
                self.arch
            )));
        }
        self.reduction_arrays(t.slices);
        let wpb = q8.block / 8;
        let st = Q8Stage {
            codes: self.k.lds(Ty::U32, t.batch * (k_part / 8) * 2),
            scales: self.k.lds(Ty::F32, t.batch * (k_part / q8.block)),
            sums: self.k.lds(Ty::I32, t.batch * (k_part / q8.block)),
            xsum: self.k.lds(Ty::F32, t.batch * (k_part / group)),
            groups: k_part / group,
            bpg: group / q8.block,
            words: k_part / 8,
            blocks: k_part / q8.block,
            wpb,
        };
        let word0 = mul(begin.clone(), u(t.words_per_group));
        self.q8_quantise(&st, &t, q8.clamp, &word0, out);

        out.push(comment(format!(
            "q8 GEMV: lane (local_id % {lpr}) reads {v} adjacent packed column word(s) of one K-row; K slice local_id / {lpr} of {s} takes groups slice, slice + {s}, ...; \
             per block of {wpb} K-words a = dot4(w & 0x0F0F0F0F, x_even) + dot4((w >> 4) & 0x0F0F0F0F, x_odd) (exact integers), g = fma(f32(a), s_x, g); per group acc = fma(s, fma(-z, X, g), acc) with X = sum of s_x * sum(q) over the group's blocks",
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
        // Accumulators [weight][batch row][column word].
        let nacc = t.weights.len() * t.batch * t.v;
        let acc = self.zeros(nacc, "acc", out);

        let gi = self.k.reg(Ty::U32, "group");
        let mut body = Vec::new();
        let (sf, zf, _) = self.gptq_group_constants(&t, gi, n0, &mut body);
        let gacc = self.zeros(nacc, "group_acc", &mut body);
        let bpg = group / q8.block;
        // The block's index in the part: (group - first group of the part) * bpg + blk. The
        // blocks of a group of up to 16 K-words are unrolled (one loop iteration per group, so
        // hipcc can issue the group's loads together); longer groups loop over their blocks.
        let kb = |blk: Expr| add(mul(sub(r(gi), begin.clone()), u(bpg)), blk);
        if bpg * wpb <= 16 {
            let mut words = vec![];
            for b in 0..bpg {
                let (loads, w) = self.q8_block_loads(&t, &st, gi, u(b), bpg, n0);
                body.extend(loads);
                words.push(w);
            }
            body.push(Stmt::SchedBarrier);
            for (b, w) in words.iter().enumerate() {
                body.extend(self.q8_block_sums(&t, &st, kb(u(b)), w, &gacc));
            }
        } else {
            let blk = self.k.reg(Ty::U32, "block");
            let block_body = self.q8_block(&t, &st, kb(r(blk)), gi, r(blk), bpg, n0, &gacc);
            body.push(for_loop(blk, u(0), u(bpg), u(1), block_body));
        }
        // The zero point once per group: Σ_blocks s_x·Σ(q − z)·code = g − z·X.
        for bi in 0..t.batch {
            let xs = self.k.reg(Ty::F32, "group_xsum");
            let gp = add(mul(sub(r(gi), begin.clone()), u(t.batch)), u(bi));
            body.push(load(vec![xs], self.lds_at(st.xsum, gp)));
            for mi in 0..t.weights.len() {
                for j in 0..t.v {
                    let i = (mi * t.batch + bi) * t.v + j;
                    let (a, g, z) = (acc[i], gacc[i], zf[mi * t.v + j]);
                    let folded = fma(un(UnOp::Neg, r(z)), r(xs), r(g));
                    body.push(assign(a, fma(r(sf[mi * t.v + j]), folded, r(a))));
                }
            }
        }
        let groups_loop = for_loop(gi, add(begin, r(slice)), end, u(t.slices), body);
        when(lt(r(n0), u(t.n)), vec![groups_loop], out);

        let sum = |mi: usize, bi: usize, j: usize| r(acc[(mi * t.batch + bi) * t.v + j]);
        self.slice_sums_to_lds(
            (t.weights.len(), t.batch, t.v),
            None,
            slice,
            col_l,
            &sum,
            out,
        );
        Ok(())
    }

    /// The prologue: the part's activations quantised into the stage (module docs), then a
    /// workgroup barrier (§5.2: the stage is read by every lane of this workgroup only).
    fn q8_quantise(
        &mut self,
        st: &Q8Stage,
        t: &Gptq,
        clamp: usize,
        word0: &Expr,
        out: &mut Vec<Stmt>,
    ) {
        let c = clamp as f64;
        out.push(comment(format!(
            "quantize_int8.rne of this K part into LDS: lane i takes blocks i, i + {wg}, ...: m = max|x|, s = m / {c}, r = {c} / m (0 if m = 0), \
             q = clamp(fma(x, r, 1.5*2^23) - 1.5*2^23, -{c}, {c}) (the exact product rounded half to even); per 8 K rows the even rows' and the odd rows' codes as two words",
            wg = self.wg()
        )));
        let x = t.xb();
        let i = self.k.reg(Ty::U32, "qblock");
        let (bi, bk) = (self.k.reg(Ty::U32, "qrow"), self.k.reg(Ty::U32, "qblk"));
        let src0 = self.k.reg(Ty::U32, "qsrc");
        let mut body = vec![
            assign(bi, div(r(i), u(st.blocks))),
            assign(bk, rem(r(i), u(st.blocks))),
            // Element index of the block's first row: b·K + 8·(part's first word + bk·wpb).
            assign(
                src0,
                add(
                    mul(r(bi), u(t.k)),
                    mul(add(word0.clone(), mul(r(bk), u(st.wpb))), u(8)),
                ),
            ),
        ];
        let m = self.k.reg(Ty::F32, "absmax");
        body.push(assign(m, f(0.0)));
        let tw = self.k.reg(Ty::U32, "qword");
        let xh: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "xh")).collect();
        let mut max_body = vec![load(
            xh.clone(),
            at(x.clone(), add(r(src0), mul(r(tw), u(8)))),
        )];
        for &h in &xh {
            let a = un(UnOp::Abs, cast(Ty::F32, r(h)));
            max_body.push(assign(m, bin(BinOp::Max, r(m), a)));
        }
        body.push(for_loop(tw, u(0), u(st.wpb), u(1), max_body));
        let (s, rr) = (self.k.reg(Ty::F32, "qscale"), self.k.reg(Ty::F32, "qrecip"));
        let pos = bin(BinOp::Gt, r(m), f(0.0));
        body.push(assign(s, sel(pos.clone(), div(r(m), f(c)), f(0.0))));
        body.push(assign(rr, sel(pos, div(f(c), r(m)), f(0.0))));
        let qsum = self.k.reg(Ty::I32, "qsum");
        body.push(assign(qsum, Expr::i32(0)));
        let tw2 = self.k.reg(Ty::U32, "qword");
        let xh2: Vec<Reg> = (0..8).map(|_| self.k.reg(Ty::F16, "xh")).collect();
        let mut q_body = vec![load(xh2.clone(), at(x, add(r(src0), mul(r(tw2), u(8)))))];
        let mut codes = vec![];
        for &h in &xh2 {
            let q = self.k.reg(Ty::I32, "q");
            let rounded = sub(fma(cast(Ty::F32, r(h)), r(rr), f(RNE_MAGIC)), f(RNE_MAGIC));
            let clamped = bin(BinOp::Max, bin(BinOp::Min, rounded, f(c)), f(-c));
            q_body.push(assign(q, cast(Ty::I32, clamped)));
            q_body.push(assign(qsum, add(r(qsum), r(q))));
            codes.push(q);
        }
        let pack = |parity: usize| {
            (0..4)
                .map(|j| {
                    let byte = bin(
                        BinOp::And,
                        Expr::bitcast(Ty::U32, r(codes[2 * j + parity])),
                        u(0xFF),
                    );
                    if j == 0 {
                        byte
                    } else {
                        bin(BinOp::Shl, byte, u(8 * j))
                    }
                })
                .reduce(|a, b| bin(BinOp::Or, a, b))
                .expect("four bytes")
        };
        let dst = mul(
            add(mul(r(bi), u(st.words)), add(mul(r(bk), u(st.wpb)), r(tw2))),
            u(2),
        );
        q_body.push(store(self.lds_at(st.codes, dst), vec![pack(0), pack(1)]));
        body.push(for_loop(tw2, u(0), u(st.wpb), u(1), q_body));
        body.push(store(
            self.lds_at(st.scales, add(mul(r(bk), u(t.batch)), r(bi))),
            vec![r(s)],
        ));
        body.push(store(self.lds_at(st.sums, r(i)), vec![r(qsum)]));
        out.push(for_loop(
            i,
            sp(Special::LocalId),
            u(t.batch * st.blocks),
            u(self.wg()),
            body,
        ));
        out.push(Stmt::WorkgroupBarrier);
        out.push(comment(
            "per weight group of the part: X = sum over its blocks, in order, of s_x * sum(q)",
        ));
        let gi = self.k.reg(Ty::U32, "qgroup");
        let xs = self.k.reg(Ty::F32, "xsum");
        let (row, g) = (self.k.reg(Ty::U32, "qrow"), self.k.reg(Ty::U32, "qg"));
        let mut body = vec![
            assign(row, div(r(gi), u(st.groups))),
            assign(g, rem(r(gi), u(st.groups))),
            assign(xs, f(0.0)),
        ];
        for blk in 0..st.bpg {
            let (s, q) = (self.k.reg(Ty::F32, "qs"), self.k.reg(Ty::I32, "qq"));
            let kb = add(mul(r(g), u(st.bpg)), u(blk));
            let si = add(mul(kb.clone(), u(t.batch)), r(row));
            body.push(load(vec![s], self.lds_at(st.scales, si)));
            let qi = add(mul(r(row), u(st.blocks)), kb);
            body.push(load(vec![q], self.lds_at(st.sums, qi)));
            body.push(assign(xs, fma(r(s), cast(Ty::F32, r(q)), r(xs))));
        }
        let xi = add(mul(r(g), u(t.batch)), r(row));
        body.push(store(self.lds_at(st.xsum, xi), vec![r(xs)]));
        // Entry gi is (batch row gi / groups, group gi % groups).
        out.push(for_loop(
            gi,
            sp(Special::LocalId),
            u(t.batch * st.groups),
            u(self.wg()),
            body,
        ));
        out.push(Stmt::WorkgroupBarrier);
    }

    /// One block of group `gi` (the part's block `kb`): its packed words, the exact integer sums
    /// per weight, batch row and column word, then `g = fma(f32(a), s_x, g)`.
    #[allow(clippy::too_many_arguments)]
    fn q8_block(
        &mut self,
        t: &Gptq,
        st: &Q8Stage,
        kb: Expr,
        gi: Reg,
        blk: Expr,
        bpg: usize,
        n0: Reg,
        gacc: &[Reg],
    ) -> Vec<Stmt> {
        let (mut out, words) = self.q8_block_loads(t, st, gi, blk, bpg, n0);
        out.push(Stmt::SchedBarrier);
        out.extend(self.q8_block_sums(t, st, kb, &words, gacc));
        out
    }

    /// The packed words of one block of group `gi`: `[weight][K-word][column word]`.
    #[allow(clippy::type_complexity)]
    fn q8_block_loads(
        &mut self,
        t: &Gptq,
        st: &Q8Stage,
        gi: Reg,
        blk: Expr,
        bpg: usize,
        n0: Reg,
    ) -> (Vec<Stmt>, Vec<Vec<Vec<Reg>>>) {
        let mut out = vec![];
        let row0 = self.k.reg(Ty::U32, "krow0");
        out.push(assign(row0, mul(add(mul(r(gi), u(bpg)), blk), u(st.wpb))));
        let mut words = vec![]; // [mi][kw][j]
        for &w in &t.weights {
            let BufParams::Gptq { qweight, .. } = self.bufs[&w] else {
                unreachable!("a GPTQ weight")
            };
            let mut per_w = vec![];
            for kw in 0..st.wpb {
                let row = super::krow(row0, kw);
                let ws: Vec<Reg> = (0..t.v).map(|_| self.k.reg(Ty::U32, "qword")).collect();
                out.push(load(
                    ws.clone(),
                    at(Base::Param(qweight), add(mul(row, u(t.n)), r(n0))),
                ));
                per_w.push(ws);
            }
            words.push(per_w);
        }
        (out, words)
    }

    /// The block's exact integer sums `Σ q·code` from its words, then `g = fma(f32(a), s_x, g)`.
    fn q8_block_sums(
        &mut self,
        t: &Gptq,
        st: &Q8Stage,
        kb: Expr,
        words: &[Vec<Vec<Reg>>],
        gacc: &[Reg],
    ) -> Vec<Stmt> {
        let mut out = vec![];
        let kbr = self.k.reg(Ty::U32, "part_block");
        out.push(assign(kbr, kb));
        // The block's integer sums Σ q·code per (weight, batch row, column word).
        let ia: Vec<Reg> = (0..gacc.len())
            .map(|_| self.k.reg(Ty::I32, "int_acc"))
            .collect();
        for &a in &ia {
            out.push(assign(a, Expr::i32(0)));
        }
        for kw in 0..st.wpb {
            let mut halves = vec![]; // [mi][j] → (lo, hi)
            for per_w in words {
                for &word in &per_w[kw] {
                    let (lo, hi) = (self.k.reg(Ty::U32, "q_even"), self.k.reg(Ty::U32, "q_odd"));
                    out.push(assign(lo, bin(BinOp::And, r(word), u(0x0F0F_0F0F))));
                    let shifted = bin(BinOp::Shr, r(word), u(4));
                    out.push(assign(hi, bin(BinOp::And, shifted, u(0x0F0F_0F0F))));
                    halves.push((lo, hi));
                }
            }
            for bi in 0..t.batch {
                let xs = [self.k.reg(Ty::U32, "x_even"), self.k.reg(Ty::U32, "x_odd")];
                let idx = mul(add(mul(r(kbr), u(st.wpb)), u(bi * st.words + kw)), u(2));
                out.push(load(xs.to_vec(), self.lds_at(st.codes, idx)));
                for mi in 0..t.weights.len() {
                    for j in 0..t.v {
                        let a = ia[(mi * t.batch + bi) * t.v + j];
                        let (lo, hi) = halves[mi * t.v + j];
                        let d = Expr::Dot4I8(Box::new(r(lo)), Box::new(r(xs[0])), Box::new(r(a)));
                        out.push(assign(a, d));
                        let d = Expr::Dot4I8(Box::new(r(hi)), Box::new(r(xs[1])), Box::new(r(a)));
                        out.push(assign(a, d));
                    }
                }
            }
        }
        for bi in 0..t.batch {
            let sx = self.k.reg(Ty::F32, "block_scale");
            out.push(load(
                vec![sx],
                self.lds_at(st.scales, add(mul(r(kbr), u(t.batch)), u(bi))),
            ));
            for mi in 0..t.weights.len() {
                for j in 0..t.v {
                    let i = (mi * t.batch + bi) * t.v + j;
                    let g = gacc[i];
                    out.push(assign(g, fma(cast(Ty::F32, r(ia[i])), r(sx), r(g))));
                }
            }
        }
        out
    }
}
