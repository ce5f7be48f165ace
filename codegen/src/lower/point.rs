//! The elementwise stages: every lane walks points (batch row, column) of its workgroup's tile
//! and evaluates the op-level values of one phase there, ending in stores.

use std::collections::HashMap;

use wavefuse_ir::ops::{BinaryOp, Compression, UnaryOp};
use wavefuse_ir::{OpKind, Value};

use crate::lowered::{Base, BinOp, Expr, Reg, Special, Stmt, Ty, UnOp};

use super::LowerError;
use super::build::*;
use super::lowering::{Lowering, ty_of};
use super::plan::Phase;

/// One point of the tile: batch row `b`, tile column `c`, root column `col = tile0 + c`.
pub(super) struct Point {
    pub b: Expr,
    pub c: Expr,
    pub col: Expr,
    /// Values already computed at this point, by (value, coordinate offset).
    memo: HashMap<(Value, i64), Expr>,
    /// The allreduce's value here when a lane already holds it (one rank, INT8: see
    /// [`Lowering::allreduce_in_registers`]).
    pub allreduce: Option<Expr>,
    /// The batch row's `1/rms` of the GEMV prologue's norm (prologue points only).
    inv_rms: Option<Expr>,
}

impl Point {
    /// Record that value `v` at this point's own coordinate is already held by `e`.
    pub(super) fn seed(&mut self, v: Value, e: Expr) {
        self.memo.insert((v, 0), e);
    }

    pub(super) fn new(b: Expr, c: Expr, col: Expr, inv_rms: Option<Expr>) -> Point {
        Point {
            b,
            c,
            col,
            memo: HashMap::new(),
            allreduce: None,
            inv_rms,
        }
    }

    fn coord(&self, off: i64) -> Expr {
        if off >= 0 {
            sub(self.col.clone(), u(off as usize))
        } else {
            add(self.col.clone(), u((-off) as usize))
        }
    }
}

/// A stage's body for one batch row and sweep: `(lowering, b, cb, out)`.
pub(super) type TileBody<'f, L> =
    dyn FnMut(&mut L, Expr, Expr, &mut Vec<Stmt>) -> Result<(), LowerError> + 'f;

impl Lowering<'_> {
    /// Columns each lane handles per sweep of the tile, and the sweeps.
    pub(super) fn lane_columns(&self) -> (usize, usize) {
        let (c, wg) = (self.cols, self.wg());
        let per_lane = if c % wg == 0 { c / wg } else { 1 };
        (per_lane, c.div_ceil(wg * per_lane))
    }

    /// Batch rows one sweep of a row-spread stage covers ([`Lowering::tile_loops`] with
    /// `spread`): with fewer tile columns than lanes at batch ≥ 4, lane `l` takes row
    /// `b0 + l / C` and column `l mod C`, so every lane has a point instead of `C` of them, and a
    /// lane's loads (a split-K finish's partials) are `B · C / lanes` rounds deep instead of `B`.
    /// 1 where the tile's columns already occupy the lanes, and at batch 2 and 3.
    ///
    /// Measured on the H200 (CUDA graphs, bench/results/2026-12-03-h200-row-spread, run 2): at
    /// batch 4 and 8 every INT4 kernel gained or held (`gemv_int4` 5120 → 17408 b8 19.7 → 18.5 µs,
    /// the TP 4 rank b8 10.1 → 8.6, `gemv_int4_qkv` TP 4 b8 0.86×, the fused kernel 0.95–0.97×);
    /// at batch 2, where the finish was 2 rounds deep anyway, three rows lost 3–15 % to nvcc's
    /// register choices for the hot loop (fused TP 1 b2 21.1 → 24.2 µs at 64 → 56 registers).
    pub(super) fn rows_per_sweep(&self) -> usize {
        let (c, wg) = (self.cols, self.wg());
        if self.plan.batch >= 4 && c < wg && wg % c == 0 {
            wg / c
        } else {
            1
        }
    }

    /// `for b in 0..B { for cb in 0..C step span { body(b, cb) } }` with the sweep loop omitted
    /// when one sweep covers the tile. Loop bounds are uniform, so bodies may hold wave
    /// reductions — except with `spread` ([`Lowering::rows_per_sweep`] rows per sweep: the
    /// lanes of a wave may then hold different rows), which only stages without wave
    /// reductions ask for; their points go through [`Lowering::point`] with the same `spread`.
    pub(super) fn tile_loops(
        &mut self,
        out: &mut Vec<Stmt>,
        spread: bool,
        body: &mut TileBody<'_, Self>,
    ) -> Result<(), LowerError> {
        let (per_lane, sweeps) = self.lane_columns();
        let span = self.wg() * per_lane;
        let rows = if spread { self.rows_per_sweep() } else { 1 };
        // At batch 1 the row is the constant 0, which keeps every index foldable.
        let rb = (self.plan.batch > 1).then(|| self.k.reg(Ty::U32, "b"));
        let mut inner = Vec::new();
        let b = match rb {
            None => u(0),
            Some(rb) if rows == 1 => r(rb),
            Some(rb) => {
                // This lane's row of the sweep: `rb` steps over the rows `rows` at a time.
                let row = self.k.reg(Ty::U32, "brow");
                inner.push(assign(
                    row,
                    add(r(rb), div(sp(Special::LocalId), u(self.cols))),
                ));
                r(row)
            }
        };
        if sweeps == 1 {
            body(self, b, u(0), &mut inner)?;
        } else {
            let cb = self.k.reg(Ty::U32, "cb");
            let mut sweep = Vec::new();
            body(self, b, r(cb), &mut sweep)?;
            inner.push(for_loop(cb, u(0), u(self.cols), u(span), sweep));
        }
        match rb {
            Some(rb) => out.push(for_loop(rb, u(0), u(self.plan.batch), u(rows), inner)),
            None => out.extend(inner),
        }
        Ok(())
    }

    /// The point of lane column `j` of sweep `cb`, with its validity condition; with `spread`
    /// (the loop's [`Lowering::tile_loops`] flag) the lane's column of a row-spread sweep.
    pub(super) fn point(
        &mut self,
        b: Expr,
        cb: Expr,
        j: usize,
        spread: bool,
        out: &mut Vec<Stmt>,
    ) -> (Point, Expr) {
        let (per_lane, sweeps) = self.lane_columns();
        let rows = if spread { self.rows_per_sweep() } else { 1 };
        let (c, col) = (self.k.reg(Ty::U32, "c"), self.k.reg(Ty::U32, "col"));
        // A lane's columns are adjacent (`local_id · per_lane + j`): one wave covers an INT8 block,
        // and the back end's compiler merges a lane's adjacent f16 accesses into one dword.
        let offset = if rows > 1 {
            rem(sp(Special::LocalId), u(self.cols))
        } else {
            add(mul(sp(Special::LocalId), u(per_lane)), u(j))
        };
        out.push(assign(c, add(cb, offset)));
        out.push(assign(col, add(r(self.tile0), r(c))));
        let mut valid = truth();
        if rows == 1 && sweeps * self.wg() * per_lane != self.cols {
            valid = and(valid, lt(r(c), u(self.cols)));
        }
        if self.plan.batch % rows != 0 {
            valid = and(valid, lt(b.clone(), u(self.plan.batch)));
        }
        if self.plan.n % self.cols != 0 {
            valid = and(valid, lt(r(col), u(self.plan.n)));
        }
        (Point::new(b, r(c), r(col), None), valid)
    }

    /// The elementwise stage of `phase`.
    pub(super) fn phase_loop(
        &mut self,
        phase: Phase,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let int8_publish = phase == Phase::Pre
            && (self.exchange.is_some() || self.allreduce_in_registers())
            && matches!(
                self.plan.allreduce.as_ref().map(|a| a.compression),
                Some(Compression::Int8 { .. })
            );
        if self.has_work(phase) {
            out.push(comment(format!(
                "{} stage: every lane walks its points (batch row, column) of the tile",
                phase.name()
            )));
            // Row-spread: no stage here holds a wave reduction (the INT8 payload's is
            // `int8_publish`, below), and every later reader of what a point stores (the
            // exchange, the norm's stash) reads it behind a workgroup or grid barrier.
            self.tile_loops(out, true, &mut |this, b, cb, body| {
                let (per_lane, _) = this.lane_columns();
                for j in 0..per_lane {
                    let (mut pt, valid) = this.point(b.clone(), cb.clone(), j, true, body);
                    let mut inner = Vec::new();
                    this.visit(phase, &mut pt, &mut inner)?;
                    when(valid, inner, body);
                }
                Ok(())
            })?;
        }
        if int8_publish {
            self.int8_publish(out)?;
        }
        Ok(())
    }

    fn has_work(&self, phase: Phase) -> bool {
        let stores = self
            .plan
            .stores
            .iter()
            .any(|&(v, _)| self.stage(self.plan.phase(v)) == phase);
        let payload = phase == Phase::Pre
            && self.exchange.is_some()
            && self
                .plan
                .allreduce
                .as_ref()
                .is_some_and(|a| a.compression == Compression::None);
        let stash = self
            .plan
            .norm
            .as_ref()
            .is_some_and(|n| self.stage(self.plan.phase(n.x)) == phase);
        stores || payload || stash
    }

    /// At one point: the stores of `phase`, and the allreduce payload and the norm's stash
    /// when their operands are computed in `phase`.
    pub(super) fn visit(
        &mut self,
        phase: Phase,
        pt: &mut Point,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let stores: Vec<_> = self
            .plan
            .stores
            .iter()
            .copied()
            .filter(|&(v, _)| self.stage(self.plan.phase(v)) == phase)
            .collect();
        for (v, buf) in stores {
            let off = self.plan.store_offset(v);
            let shape = self.plan.shape(v).to_vec();
            let f = *shape.last().expect("an axis");
            let mut guard = truth();
            if off > 0 {
                guard = and(guard, Expr::bin(BinOp::Ge, pt.col.clone(), u(off as usize)));
            }
            if (off as usize) + f < self.plan.n {
                guard = and(guard, lt(pt.col.clone(), u(off as usize + f)));
            }
            let saved = (guard != truth()).then(|| pt.memo.clone());
            let mut inner = Vec::new();
            let e = self.eval(v, off, pt, &mut inner)?;
            let index = self.index(&shape, pt, off);
            inner.push(store(at(Base::Param(self.dense(buf)), index), vec![e]));
            when(guard, inner, out);
            if let Some(m) = saved {
                pt.memo = m;
            }
        }
        if phase == Phase::Pre && self.exchange.is_some() {
            if let Some(a) = self
                .plan
                .allreduce
                .as_ref()
                .filter(|a| a.compression == Compression::None)
            {
                let x = a.x;
                let e = self.eval(x, 0, pt, out)?;
                self.publish_payload(e, pt, out)?;
            }
        }
        if let Some(n) = self.plan.norm.as_ref() {
            if self.stage(self.plan.phase(n.x)) == phase {
                let x = n.x;
                let e = self.eval(x, 0, pt, out)?;
                let xs = self.norm.as_ref().expect("norm arrays").xs;
                let idx = add(mul(pt.b.clone(), u(self.cols)), pt.c.clone());
                out.push(store(self.lds_at(xs, idx), vec![self.to_f32(x, e)]));
            }
        }
        Ok(())
    }

    /// Element index of a value's coordinate at `pt`: `b · F + coord` for `[B, F]`, `coord` for `[F]`.
    pub(super) fn index(&self, shape: &[usize], pt: &Point, off: i64) -> Expr {
        let coord = pt.coord(off);
        match shape {
            [_, f] => add(mul(pt.b.clone(), u(*f)), coord),
            _ => coord,
        }
    }

    /// `e` (of value `v`'s type) as f32.
    pub(super) fn to_f32(&self, v: Value, e: Expr) -> Expr {
        if self.plan.dtype(v) == wavefuse_ir::ScalarType::F32 {
            e
        } else {
            cast(Ty::F32, e)
        }
    }

    fn fresh(&mut self, v: Value, hint: &'static str) -> Result<Reg, LowerError> {
        let ty = ty_of(self.plan.dtype(v), "a value")?;
        Ok(self.k.reg(ty, hint))
    }

    /// Compute value `v` at `pt`, whose coordinate is root column `col − off`. Returns an
    /// expression (a register) holding it in `v`'s type.
    pub(super) fn eval(
        &mut self,
        v: Value,
        off: i64,
        pt: &mut Point,
        out: &mut Vec<Stmt>,
    ) -> Result<Expr, LowerError> {
        if let Some(e) = pt.memo.get(&(v, off)) {
            return Ok(e.clone());
        }
        let e = match self.plan.def(v) {
            OpKind::Load(l) => {
                let dst = self.fresh(v, "in")?;
                let index = self.index(self.plan.shape(v), pt, off);
                out.push(load(
                    vec![dst],
                    at(Base::Param(self.dense(l.buffer)), index),
                ));
                r(dst)
            }
            OpKind::Gemv(_) | OpKind::GemvQ8(_) => self.gemv_value(v, pt, out),
            OpKind::Binary(bin) => {
                let (a, b) = (
                    self.eval(bin.a, off, pt, out)?,
                    self.eval(bin.b, off, pt, out)?,
                );
                let (a, b) = (self.to_f32(bin.a, a), self.to_f32(bin.b, b));
                let dst = self.fresh(v, "t")?;
                let value = match bin.op {
                    BinaryOp::Add => Expr::add(a, b),
                    BinaryOp::Mul => Expr::mul(a, b),
                };
                out.push(assign(dst, value));
                r(dst)
            }
            OpKind::Unary(un_op) => {
                let x = self.eval(un_op.x, off, pt, out)?;
                let x = self.to_f32(un_op.x, x);
                let dst = self.fresh(v, "t")?;
                let value = match un_op.op {
                    // silu(x) = x / (1 + e^(−x))
                    UnaryOp::Silu => Expr::bin(
                        BinOp::Div,
                        x.clone(),
                        Expr::add(f(1.0), un(UnOp::Exp, un(UnOp::Neg, x))),
                    ),
                };
                out.push(assign(dst, value));
                r(dst)
            }
            OpKind::RoundF16(rd) => {
                let x = self.eval(rd.x, off, pt, out)?;
                let dst = self.fresh(v, "h")?;
                out.push(assign(dst, cast(Ty::F16, x)));
                r(dst)
            }
            OpKind::Slice(s) => self.eval(s.x, off - s.start as i64, pt, out)?,
            OpKind::AllReduce(a) if self.allreduce_is_identity() => {
                let x = self.eval(a.x, off, pt, out)?;
                let dst = self.fresh(v, "sum")?;
                out.push(assign(dst, self.to_f32(a.x, x)));
                r(dst)
            }
            OpKind::AllReduce(_) => match pt.allreduce.clone() {
                Some(e) => e,
                // One rank, INT8: the allreduce lives in the lane's registers during the
                // elementwise stage only (no exchange to read it from again).
                None if self.allreduce_in_registers() => {
                    return Err(LowerError::Unsupported(
                        "a one-rank INT8 allreduce's result read again after the RMSNorm (it is \
                         held in registers, not exchanged): store it, or read only the norm's \
                         output after the norm"
                            .into(),
                    ));
                }
                None => self.allreduce_value(v, pt, out)?,
            },
            OpKind::RmsNorm(n) if self.plan.prologue.as_ref().is_some_and(|p| p.computes(v)) => {
                // The GEMV prologue's norm: its input recomputed here, the row's 1/rms from
                // `prologue_inv_rms`; (x · s) · w as the reference evaluates it.
                let x = self.eval(n.x, off, pt, out)?;
                let x = self.to_f32(n.x, x);
                let w = self.eval(n.weight, off, pt, out)?;
                let w = self.to_f32(n.weight, w);
                let s = pt
                    .inv_rms
                    .clone()
                    .expect("a prologue point carries its row's 1/rms");
                let dst = self.fresh(v, "normed")?;
                out.push(assign(dst, Expr::mul(Expr::mul(x, s), w)));
                r(dst)
            }
            OpKind::RmsNorm(n) => {
                let w = self.eval(n.weight, off, pt, out)?;
                let w = self.to_f32(n.weight, w);
                let norm = self.norm.as_ref().expect("norm arrays");
                let (xs, inv, inv_reg) = (norm.xs, norm.inv, norm.inv_reg);
                let x = self.k.reg(Ty::F32, "xn");
                let idx = add(mul(pt.b.clone(), u(self.cols)), pt.c.clone());
                out.push(load(vec![x], self.lds_at(xs, idx)));
                let s = match inv_reg {
                    Some(s) => s,
                    None => {
                        let s = self.k.reg(Ty::F32, "inv_rms");
                        let inv = inv.expect("the 1/rms array at batch > 1");
                        out.push(load(vec![s], self.lds_at(inv, pt.b.clone())));
                        s
                    }
                };
                let dst = self.fresh(v, "normed")?;
                out.push(assign(dst, Expr::mul(Expr::mul(r(x), r(s)), w)));
                r(dst)
            }
            other => {
                return Err(LowerError::Unsupported(format!(
                    "op `{}` in an elementwise stage",
                    other.mnemonic()
                )));
            }
        };
        pt.memo.insert((v, off), e.clone());
        Ok(e)
    }

    /// A GEMV result at `pt`: the slices' partial sums added in slice order (or, in split-K's
    /// finish, the K parts' sums from `splitk_partials` in part order).
    fn gemv_value(&mut self, v: Value, pt: &Point, out: &mut Vec<Stmt>) -> Expr {
        let mi = self
            .plan
            .gemv
            .as_ref()
            .expect("a GEMV")
            .gemvs
            .iter()
            .position(|g| g.0 == v)
            .expect("a GEMV result");
        match &self.split {
            Some(s) if s.finishing => self.split_sum(mi, pt, out),
            _ => self.slice_sum(mi, pt, out),
        }
    }

    /// GEMV `mi` at `pt`: this workgroup's slices' partial sums in LDS, added in slice order
    /// (with [`Reduction::Serial`](super::Reduction::Serial) the slices added them already: one
    /// value).
    pub(super) fn slice_sum(&mut self, mi: usize, pt: &Point, out: &mut Vec<Stmt>) -> Expr {
        let red = self.red[mi];
        if self.s.reduction == super::Reduction::Serial {
            let sum = self.k.reg(Ty::F32, "dot");
            let bc = add(mul(pt.b.clone(), u(self.cols)), pt.c.clone());
            out.push(load(vec![sum], self.lds_at(red, bc)));
            return r(sum);
        }
        let (sum, t, part) = (
            self.k.reg(Ty::F32, "dot"),
            self.k.reg(Ty::U32, "t"),
            self.k.reg(Ty::F32, "part"),
        );
        let bc = add(mul(pt.b.clone(), u(self.cols)), pt.c.clone());
        let idx = add(mul(r(t), u(self.plan.batch * self.cols)), bc);
        out.push(assign(sum, f(0.0)));
        let body = vec![
            load(vec![part], self.lds_at(red, idx)),
            assign(sum, Expr::add(r(sum), r(part))),
        ];
        out.push(for_loop(t, u(0), u(self.t_red), u(1), body));
        r(sum)
    }
}
