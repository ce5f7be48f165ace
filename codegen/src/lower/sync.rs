//! The stages that synchronise: the allreduce exchange between ranks and the grid-wide sum of
//! squares of an RMSNorm. See the module docs of [`super`] for the protocol and why it is safe.

use wavefuse_ir::ops::Compression;
use wavefuse_ir::{ScalarType, Value};

use crate::lowered::{
    Base, BinOp, Expr, Lds, MemRef, ParamKind, Purpose, ReduceKind, Reg, Special, Stmt, Ty, UnOp,
};

use super::build::*;
use super::lowering::{Exchange, Lowering, NormArrays, ty_of};
use super::plan::Phase;
use super::point::Point;
use super::{AllreduceProtocol, LowerError};

/// The next accumulator value of a row sum: `(lowering, i, batch row, acc, out) -> acc'`.
type RowTerm<'f, L> = dyn FnMut(&mut L, Expr, usize, Reg, &mut Vec<Stmt>) -> Expr + 'f;

impl Lowering<'_> {
    /// Declare the exchange's and the norm's parameters and arrays, and compute the parity.
    pub(super) fn declare_sync(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let (b, n, tp, tiles) = (self.plan.batch, self.plan.n, self.tp() as usize, self.tiles);
        if let Some(a) = self
            .plan
            .allreduce
            .as_ref()
            .filter(|_| !self.allreduce_is_identity() && !self.allreduce_in_registers())
        {
            let push = self.s.protocol == AllreduceProtocol::Push;
            // A later GEMV stage's exchange reuses the rank of an earlier stage's.
            if tp > 1 && self.rank.is_none() {
                let kind = ParamKind::Scalar {
                    ty: Ty::U32,
                    purpose: Purpose::Rank,
                };
                self.rank = Some(self.k.param("rank", kind));
            }
            let senders = if push { tp } else { 1 };
            let elems = b * n;
            let payload: Vec<(&str, Ty, usize)> = match a.compression {
                Compression::None => vec![(
                    "ar_payload",
                    ty_of(self.plan.dtype(a.x), "the allreduce")?,
                    elems,
                )],
                Compression::Int8 { block } => {
                    vec![
                        ("ar_codes", Ty::I8, elems),
                        ("ar_scales", Ty::F32, elems / block),
                    ]
                }
            };
            let payload = payload
                .into_iter()
                .map(|(name, elem, per)| {
                    let len = 2 * senders * per;
                    let kind = ParamKind::PeerArrays {
                        elem,
                        len,
                        access: crate::lowered::Access::ReadWrite,
                        purpose: Purpose::Scratch,
                    };
                    (self.k.param(name, kind), per)
                })
                .collect();
            let kind = ParamKind::PeerArrays {
                elem: Ty::U32,
                len: senders * tiles,
                access: crate::lowered::Access::ReadWrite,
                purpose: Purpose::Flags,
            };
            let flags = self.k.param("ar_flags", kind);
            let epoch = self.k.epoch_value();
            let parity = self.k.reg(Ty::U32, "parity");
            out.push(comment(
                "scratch is double-buffered by epoch parity: a peer may still read this rank's previous launch's half (§5.7)",
            ));
            out.push(assign(parity, Expr::bin(BinOp::And, epoch, u(1))));
            self.exchange = Some(Exchange {
                payload,
                flags,
                parity,
            });
        }
        if self.plan.norm.is_some() {
            let waves = self.wg() / self.wave();
            let xs = self.k.lds(Ty::F32, b * self.cols);
            let wl = self.k.lds(Ty::F32, waves * b);
            // batch 1: 1/rms stays in registers (`grid_inv_rms`)
            let inv = (b > 1).then(|| self.k.lds(Ty::F32, b));
            self.norm = Some(NormArrays {
                xs,
                waves: wl,
                inv,
                inv_reg: None,
                partials: None,
            });
        }
        Ok(())
    }

    fn push(&self) -> bool {
        self.s.protocol == AllreduceProtocol::Push
    }

    /// Where this rank writes element `idx` of payload array `pi`: its own slot (pull) or its
    /// slot in every rank's inbox (push).
    fn slot_writes(&self, pi: usize, idx: Expr) -> Vec<MemRef> {
        let ex = self.exchange.as_ref().expect("an exchange");
        let (param, per) = ex.payload[pi];
        let tp = self.tp();
        if self.push() {
            let half = tp as usize * per;
            let base = add(mul(r(ex.parity), u(half)), mul(self.rank_expr(), u(per)));
            (0..tp)
                .map(|q| {
                    at(
                        Base::Peer {
                            param,
                            rank: Expr::u32(q),
                        },
                        add(base.clone(), idx.clone()),
                    )
                })
                .collect()
        } else {
            vec![at(
                Base::Peer {
                    param,
                    rank: self.rank_expr(),
                },
                add(mul(r(ex.parity), u(per)), idx),
            )]
        }
    }

    /// Where this rank reads rank `p`'s element `idx` of payload array `pi`.
    fn slot_read(&self, pi: usize, p: u32, idx: Expr) -> MemRef {
        let ex = self.exchange.as_ref().expect("an exchange");
        let (param, per) = ex.payload[pi];
        if self.push() {
            let half = self.tp() as usize * per;
            let base = add(mul(r(ex.parity), u(half)), u(p as usize * per));
            at(
                Base::Peer {
                    param,
                    rank: self.rank_expr(),
                },
                add(base, idx),
            )
        } else {
            at(
                Base::Peer {
                    param,
                    rank: Expr::u32(p),
                },
                add(mul(r(ex.parity), u(per)), idx),
            )
        }
    }

    /// Store the allreduce operand `e` at `pt` into this rank's payload slot(s).
    pub(super) fn publish_payload(
        &mut self,
        e: Expr,
        pt: &Point,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let shape = [self.plan.batch, self.plan.n];
        let idx = self.index(&shape, pt, 0);
        for m in self.slot_writes(0, idx) {
            out.push(store(m, vec![e.clone()]));
        }
        Ok(())
    }

    /// The flag handshake between the payload stage and the stage that reads peers.
    pub(super) fn exchange(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let tp = self.tp();
        if tp == 1 {
            out.push(comment(
                "one rank: the payload was written by other lanes of this workgroup",
            ));
            out.push(Stmt::WorkgroupBarrier);
            return Ok(());
        }
        let flags = self.exchange.as_ref().expect("an exchange").flags;
        let (tiles, rank, tile) = (self.tiles, self.rank_expr(), self.tile.clone());
        if self.push() {
            out.push(comment(
                "push: this workgroup's slice is in every peer's inbox; release a flag into each peer's memory \
                 (a plain store, never a read-modify-write on peer memory, §5.12)",
            ));
            for q in 0..tp {
                let flag = at(
                    Base::Peer {
                        param: flags,
                        rank: Expr::u32(q),
                    },
                    add(mul(rank.clone(), u(tiles)), tile.clone()),
                );
                when(
                    ne(rank.clone(), Expr::u32(q)),
                    vec![Stmt::PublishFlag { flag, round: 0 }],
                    out,
                );
            }
            out.push(comment(
                "poll the local flags: each peer's slice of this tile has arrived (§5.3); lane p polls peer p's",
            ));
            let lane = sp(Special::LocalId);
            out.push(Stmt::WaitFlagPerLane {
                flag: at(
                    Base::Peer {
                        param: flags,
                        rank: rank.clone(),
                    },
                    add(mul(lane.clone(), u(tiles)), tile.clone()),
                ),
                lanes: tp,
                cond: ne(lane, rank.clone()),
                round: 0,
            });
        } else {
            out.push(comment(
                "pull: this workgroup's slice is in this rank's scratch; release its flag (§5.3)",
            ));
            let flag = at(
                Base::Peer {
                    param: flags,
                    rank: rank.clone(),
                },
                tile.clone(),
            );
            out.push(Stmt::PublishFlag { flag, round: 0 });
            out.push(comment(
                "publish before waiting: no rank waits on a peer before releasing its own slice, so the ranks cannot deadlock",
            ));
            // Lane p waits on peer p's flag (slot p is rank p, §5.5), all peers at once.
            let lane = sp(Special::LocalId);
            out.push(Stmt::WaitFlagPerLane {
                flag: at(
                    Base::Peer {
                        param: flags,
                        rank: lane.clone(),
                    },
                    tile.clone(),
                ),
                lanes: tp,
                cond: ne(lane, rank.clone()),
                round: 0,
            });
        }
        Ok(())
    }

    /// The allreduce result at `pt`: every rank's payload, summed in f32 in ascending rank order
    /// (§5.5), so every rank computes bit-identical replicated values.
    pub(super) fn allreduce_value(
        &mut self,
        v: Value,
        pt: &Point,
        out: &mut Vec<Stmt>,
    ) -> Result<Expr, LowerError> {
        let a = self.plan.allreduce.as_ref().expect("an allreduce");
        let (x, compression) = (a.x, a.compression);
        let shape = [self.plan.batch, self.plan.n];
        let idx = self.index(&shape, pt, 0);
        let sum = self.k.reg(Ty::F32, "sum");
        debug_assert_eq!(self.plan.dtype(v), ScalarType::F32);
        for p in 0..self.tp() {
            let term = match compression {
                Compression::None => {
                    let elem = ty_of(self.plan.dtype(x), "the allreduce")?;
                    let t = self.k.reg(elem, "peer");
                    out.push(load(vec![t], self.slot_read(0, p, idx.clone())));
                    if elem == Ty::F32 {
                        r(t)
                    } else {
                        cast(Ty::F32, r(t))
                    }
                }
                Compression::Int8 { block } => {
                    let (q, s) = (
                        self.k.reg(Ty::I8, "peer_code"),
                        self.k.reg(Ty::F32, "peer_scale"),
                    );
                    out.push(load(vec![q], self.slot_read(0, p, idx.clone())));
                    out.push(load(
                        vec![s],
                        self.slot_read(1, p, div(idx.clone(), u(block))),
                    ));
                    Expr::mul(cast(Ty::F32, r(q)), r(s))
                }
            };
            let value = if p == 0 {
                term
            } else {
                Expr::add(r(sum), term)
            };
            out.push(assign(sum, value));
        }
        Ok(r(sum))
    }

    /// INT8 payload: per batch row and block of `block` columns, `s = max|x| / 127` (one wave
    /// covers one block, so the absmax is a wave reduction) and `q = clamp(round_half_away(x /
    /// s), −127, 127)`.
    pub(super) fn int8_publish(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let a = self.plan.allreduce.as_ref().expect("an allreduce");
        let (x, Compression::Int8 { block }) = (a.x, a.compression) else {
            unreachable!("INT8 allreduce")
        };
        let (per_lane, _) = self.lane_columns();
        if per_lane * self.wave() != block || self.cols % block != 0 {
            return Err(LowerError::Schedule(format!(
                "INT8 allreduce: one wave must cover one block of {block} columns (columns per lane {per_lane} x wave {})",
                self.wave()
            )));
        }
        out.push(comment(format!(
            "INT8 payload: one wave quantises one block of {block} columns per batch row"
        )));
        // Not row-spread: the absmax is a wave reduction over one row's block.
        self.tile_loops(out, false, &mut |this, b, cb, body| {
            let mut xs = Vec::new();
            let mut points = Vec::new();
            for j in 0..per_lane {
                let (mut pt, valid) = this.point(b.clone(), cb.clone(), j, false, body);
                let xr = this.k.reg(Ty::F32, "xq");
                body.push(assign(xr, f(0.0)));
                let mut inner = Vec::new();
                let e = this.eval(x, 0, &mut pt, &mut inner)?;
                inner.push(assign(xr, this.to_f32(x, e)));
                when(valid.clone(), inner, body);
                xs.push(xr);
                points.push((pt, valid));
            }
            let m = xs.iter().skip(1).fold(un(UnOp::Abs, r(xs[0])), |e, &xr| {
                Expr::bin(BinOp::Max, e, un(UnOp::Abs, r(xr)))
            });
            let (amax, s) = (this.k.reg(Ty::F32, "absmax"), this.k.reg(Ty::F32, "qscale"));
            body.push(Stmt::WaveReduce {
                dst: amax,
                op: ReduceKind::Max,
                value: m,
            });
            body.push(assign(s, Expr::bin(BinOp::Div, r(amax), f(127.0))));
            let in_registers = this.allreduce_in_registers();
            for (xr, (pt, valid)) in xs.iter().zip(points.iter_mut()) {
                let mut inner = Vec::new();
                let q = this.quantise(*xr, s, &mut inner);
                if in_registers {
                    // One rank: the allreduce is this lane's own dequantised code; finish the
                    // point here (the same lane, the same rounding as through the scratch).
                    let dq = this.k.reg(Ty::F32, "dequant");
                    inner.push(assign(
                        dq,
                        Expr::mul(cast(Ty::F32, cast(Ty::I8, r(q))), r(s)),
                    ));
                    pt.allreduce = Some(r(dq));
                    this.visit(Phase::Post, pt, &mut inner)?;
                } else {
                    let idx = this.index(&[this.plan.batch, this.plan.n], pt, 0);
                    for mem in this.slot_writes(0, idx) {
                        inner.push(store(mem, vec![cast(Ty::I8, r(q))]));
                    }
                }
                when(valid.clone(), inner, body);
            }
            if in_registers {
                return Ok(());
            }
            let (pt0, valid0) = &points[0];
            let sidx = div(
                this.index(&[this.plan.batch, this.plan.n], pt0, 0),
                u(block),
            );
            let stores = this
                .slot_writes(1, sidx)
                .into_iter()
                .map(|m| store(m, vec![r(s)]))
                .collect();
            when(
                and(eq(sp(Special::LaneId), u(0)), valid0.clone()),
                stores,
                body,
            );
            Ok(())
        })
    }

    /// `clamp(round_half_away(x / s), −127, 127)` as i32, 0 where `s = 0`; exact (the
    /// fraction `y − trunc(y)` is exact in f32).
    fn quantise(&mut self, x: Reg, s: Reg, out: &mut Vec<Stmt>) -> Reg {
        let (y, t, q) = (
            self.k.reg(Ty::F32, "y"),
            self.k.reg(Ty::I32, "trunc"),
            self.k.reg(Ty::I32, "code"),
        );
        let pos = Expr::bin(BinOp::Gt, r(s), f(0.0));
        out.push(assign(
            y,
            sel(pos.clone(), Expr::bin(BinOp::Div, r(x), r(s)), f(0.0)),
        ));
        out.push(assign(t, cast(Ty::I32, r(y))));
        let frac = Expr::bin(BinOp::Sub, r(y), cast(Ty::F32, r(t)));
        let up = sel(
            Expr::bin(BinOp::Ge, frac.clone(), f(0.5)),
            Expr::i32(1),
            Expr::i32(0),
        );
        let down = sel(
            Expr::bin(BinOp::Le, frac, f(-0.5)),
            Expr::i32(1),
            Expr::i32(0),
        );
        let rounded = Expr::bin(BinOp::Sub, Expr::add(r(t), up), down);
        let clamped = Expr::bin(
            BinOp::Min,
            Expr::bin(BinOp::Max, rounded, Expr::i32(-127)),
            Expr::i32(127),
        );
        out.push(assign(q, clamped));
        q
    }

    /// Two-level sum of `count` values `value(i)` for every batch row (lane `l` takes
    /// `i ≡ l` modulo the workgroup size, each wave reduces, the wave results go to LDS), then a
    /// workgroup barrier; [`Self::waves_total`] adds them up in wave order.
    pub(super) fn workgroup_row_sums(
        &mut self,
        wl: Lds,
        count: usize,
        mask: Option<usize>,
        value: &mut RowTerm<'_, Self>,
        out: &mut Vec<Stmt>,
    ) {
        let b = self.plan.batch;
        for bi in 0..b {
            let (acc, i) = (self.k.reg(Ty::F32, "acc"), self.k.reg(Ty::U32, "i"));
            out.push(assign(acc, f(0.0)));
            let mut inner = Vec::new();
            let e = value(self, r(i), bi, acc, &mut inner);
            inner.push(assign(acc, e));
            let body = match mask {
                Some(n) => {
                    let mut masked = Vec::new();
                    when(lt(add(r(self.tile0), r(i)), u(n)), inner, &mut masked);
                    masked
                }
                None => inner,
            };
            out.push(for_loop(
                i,
                sp(Special::LocalId),
                u(count),
                u(self.wg()),
                body,
            ));
            let ws = self.k.reg(Ty::F32, "wave_sum");
            out.push(Stmt::WaveReduce {
                dst: ws,
                op: ReduceKind::Sum,
                value: r(acc),
            });
            let idx = add(mul(sp(Special::WaveId), u(b)), u(bi));
            when(
                eq(sp(Special::LaneId), u(0)),
                vec![store(self.lds_at(wl, idx), vec![r(ws)])],
                out,
            );
        }
        out.push(Stmt::WorkgroupBarrier);
    }

    /// The sum of row `bi` over the waves' partials in `wl`, in wave order.
    pub(super) fn waves_total(&mut self, wl: Lds, bi: usize, out: &mut Vec<Stmt>) -> Reg {
        let b = self.plan.batch;
        let total = self.k.reg(Ty::F32, "total");
        for w in 0..self.wg() / self.wave() {
            let t = self.k.reg(Ty::F32, "wave_part");
            out.push(load(vec![t], self.lds_at(wl, u(w * b + bi))));
            out.push(assign(
                total,
                if w == 0 {
                    r(t)
                } else {
                    Expr::add(r(total), r(t))
                },
            ));
        }
        total
    }

    /// The RMSNorm's first half: this tile's sum of squares per batch row, which lane 0 writes to
    /// the global `norm_partials[tile]` (§5.2: never LDS). With split-K only the tile's last
    /// arriver runs it, so every tile's partials are written exactly once.
    pub(super) fn tile_sum_of_squares(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let (b, n, cols, tiles) = (self.plan.batch, self.plan.n, self.cols, self.tiles);
        let xs = self.norm.as_ref().expect("norm arrays").xs;
        let partials = self.global_array("norm_partials", Ty::F32, tiles * b, Purpose::Scratch);
        self.norm.as_mut().expect("norm arrays").partials = Some(partials);

        out.push(comment("RMSNorm: this tile's sum of squares per batch row (the stash is complete after the barrier)"));
        out.push(Stmt::WorkgroupBarrier);
        let mask = (n % cols != 0).then_some(n);
        let wl = self.norm.as_ref().expect("norm arrays").waves;
        self.workgroup_row_sums(
            wl,
            cols,
            mask,
            &mut |this, i, bi, acc, body| {
                let x = this.k.reg(Ty::F32, "x");
                body.push(load(vec![x], this.lds_at(xs, add(u(bi * cols), i))));
                fma(r(x), r(x), r(acc))
            },
            out,
        );
        let mut lane0 = Vec::new();
        for bi in 0..b {
            let total = self.waves_total(wl, bi, &mut lane0);
            let idx = add(mul(self.tile.clone(), u(b)), u(bi));
            lane0.push(store(at(Base::Param(partials), idx), vec![r(total)]));
        }
        out.push(comment("lane 0 writes the tile's partials; the grid barrier's release publishes them (§5.2: not LDS)"));
        when(eq(sp(Special::LocalId), u(0)), lane0, out);
        Ok(())
    }

    /// The grid barrier between the tiles' partials and their total: passed by every workgroup
    /// of the grid (with split-K also by the parts that did not finish their tile), so its
    /// all-workgroup count is right (§5.1, §5.9).
    pub(super) fn grid_barrier(&mut self, out: &mut Vec<Stmt>) {
        // §5.4: one never-reset counter for all the launch's barriers; barrier `index` of the
        // launch waits for its own generation of it (`expand_sync`).
        let counter = match self.grid_counter {
            Some(c) => c,
            None => {
                let c = self.global_array("grid_counter", Ty::U32, 1, Purpose::Counter);
                self.grid_counter = Some(c);
                c
            }
        };
        let index = self.next_barrier;
        self.next_barrier += 1;
        out.push(Stmt::GridBarrier {
            counter: at(Base::Param(counter), u(0)),
            index,
        });
    }

    /// The RMSNorm's second half, after the grid barrier: every workgroup adds all tiles'
    /// partials in the same order, so all workgroups (and all ranks) get the same `1 / rms`.
    pub(super) fn grid_inv_rms(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let eps = self.plan.norm.as_ref().expect("a norm").eps;
        let (b, n, tiles) = (self.plan.batch, self.plan.n, self.tiles);
        let arrays = self.norm.as_ref().expect("norm arrays");
        let inv = arrays.inv;
        let partials = arrays
            .partials
            .expect("norm partials declared before the barrier");
        if b == 1 {
            // Every wave adds all partials itself: lane l takes partials l, l + wave, … and the
            // wave's butterfly sum (commutative at each step, so every lane of every wave of every
            // workgroup and rank gets the same bits) gives the total in registers — no LDS round
            // trip and no second workgroup barrier (the hand-written kernels do the same).
            out.push(comment(format!(
                "every wave adds all {tiles} tiles' partials in the same order, so every lane of every workgroup gets the same 1/rms (and all ranks: same data)"
            )));
            let wave = self.wave();
            let (acc, i, p, total, inv_r) = (
                self.k.reg(Ty::F32, "acc"),
                self.k.reg(Ty::U32, "i"),
                self.k.reg(Ty::F32, "p"),
                self.k.reg(Ty::F32, "total"),
                self.k.reg(Ty::F32, "inv_rms"),
            );
            out.push(assign(acc, f(0.0)));
            let body = vec![
                load(vec![p], at(Base::Param(partials), r(i))),
                assign(acc, Expr::add(r(acc), r(p))),
            ];
            out.push(for_loop(i, sp(Special::LaneId), u(tiles), u(wave), body));
            out.push(Stmt::WaveReduce {
                dst: total,
                op: ReduceKind::Sum,
                value: r(acc),
            });
            let mean = Expr::bin(BinOp::Div, r(total), f(n as f64));
            out.push(assign(
                inv_r,
                un(UnOp::Rsqrt, Expr::add(mean, f(f64::from(eps as f32)))),
            ));
            self.norm.as_mut().expect("norm arrays").inv_reg = Some(inv_r);
            return Ok(());
        }
        out.push(comment(format!(
            "every workgroup adds all {tiles} tiles' partials in the same order, so all get the same 1/rms (and all ranks: same data)"
        )));
        let wl = self.norm.as_ref().expect("norm arrays").waves;
        self.workgroup_row_sums(
            wl,
            tiles,
            None,
            &mut |this, i, bi, acc, body| {
                let p = this.k.reg(Ty::F32, "p");
                body.push(load(
                    vec![p],
                    at(Base::Param(partials), add(mul(i, u(b)), u(bi))),
                ));
                Expr::add(r(acc), r(p))
            },
            out,
        );
        let mut lane0 = Vec::new();
        for bi in 0..b {
            let total = self.waves_total(wl, bi, &mut lane0);
            let mean = Expr::bin(BinOp::Div, r(total), f(n as f64));
            let value = un(UnOp::Rsqrt, Expr::add(mean, f(f64::from(eps as f32))));
            let inv = inv.expect("the 1/rms array at batch > 1");
            lane0.push(store(self.lds_at(inv, u(bi)), vec![value]));
        }
        when(eq(sp(Special::LocalId), u(0)), lane0, out);
        out.push(Stmt::WorkgroupBarrier);
        Ok(())
    }
}
