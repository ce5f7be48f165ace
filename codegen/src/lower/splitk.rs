//! Split-K across workgroups with a last-arriver finish (DESIGN.md §3; §5.1, §5.2, §5.4, §5.11).
//!
//! With `k_split = P > 1` a GPTQ GEMV kernel runs `tiles · P` workgroups: workgroup `w` owns
//! column tile `w mod tiles` and K part `p = w / tiles`, the units `[p·U/P, (p+1)·U/P)` of the
//! GEMV's `U` K units (its K slices take them round robin, as without split-K). Consecutive
//! workgroups share a part, so the workgroups that run together read the same K rows across
//! adjacent columns. More, smaller workgroups keep more loads in flight per SM and leave a
//! shorter tail than one workgroup per tile when the tiles alone do not fill the GPU (N = 5120:
//! 160 tiles of 32 columns for 132 SMs).
//!
//! After its in-workgroup reduction each workgroup
//! 1. writes its per-column sums to `splitk_partials[((p·M + m)·B + b)·N + n]` (f32, global:
//!    LDS cannot reach other workgroups, §5.2). Every element is written by exactly one
//!    workgroup before the same launch reads it, so the scratch needs no initialisation (§5.11);
//! 2. passes a workgroup barrier (every lane's partials are written), then one elected lane adds
//!    its weight (step 3) to `splitk_counter[tile]` with acq_rel ordering at agent scope: the release half
//!    publishes the workgroup's partials (cumulatively, through the barrier), the acquire half
//!    makes every earlier arrival's partials visible to the last arriver (an RMW continues the
//!    release sequence). One arrival per workgroup, by an elected lane after a barrier (§5.1);
//! 3. never resets the counter (§5.4) and needs no epoch: the arrivals are weighted tickets
//!    (`lowered/ticket.rs`): part 0 adds `Q − P + 1`, the others 1, `Q` the power of two at or
//!    above `P`, so every launch takes the counter from one multiple of `Q` to the next and the
//!    arrival whose returned value plus its weight is a multiple of `Q` is the launch's last —
//!    replayed any number of times, across the 2³² wrap. The elected lane stores that
//!    verdict in LDS; a second workgroup barrier hands the verdict, and what the elected lane
//!    acquired, to every lane of the workgroup;
//! 4. if it is the last arriver, adds the P parts in part order (deterministic: the sum does not
//!    depend on which workgroup arrived last) and runs the elementwise epilogue. The others are
//!    done.
//!
//! Without an allreduce or norm stage nothing waits, so no co-residency is needed (§5.9 does not
//! apply), and a workgroup that arrives late only delays the finish.
//!
//! **With an allreduce and an RMSNorm (the fused kernel).** The tile's last arriver is the only
//! workgroup that has the tile's sums, so it alone runs every later stage of the tile: it writes
//! the tile's allreduce payload, publishes the tile's flag (`ar_flags[tile]`: indexed by tile, so
//! exactly one workgroup per rank releases it, after its payload), waits on the peers' flags of
//! the tile, and writes the tile's norm partials (`norm_partials[tile]`). The verdict `last` is
//! loaded from LDS at a constant index after a barrier, hence uniform over the workgroup, and the
//! finisher's block may hold barriers and flag handshakes (§5.8). The grid barrier is passed by
//! *every* workgroup, finisher or not: it counts the whole grid, and the finishers' partials are
//! released by it (§5.1, §5.2). After it only the finishers normalise. Every workgroup arrives
//! on its tile's counter before anything waits, and each finisher publishes before it waits, so
//! the flag waits cannot form a cycle; the grid barrier needs all `tiles · P` workgroups
//! co-resident, which `expand_sync` records (§5.9). Mutations caught in the simulator: a flag
//! published by every part, the grid barrier passed by the finishers only
//! (`harness/tests/sim_splitk.rs`); on gfx906's fused default (K split at TP 1 and 2 so each
//! part's activations fit the LDS stage, `defaults.rs` `floor_split`), the arrival without its
//! release or its acquire half, by every lane, and a verdict that assumes a counter reset every
//! launch (`harness/tests/sim_floor.rs`).

use wavefuse_ir::{Ordering, Scope, WeightFormat};

use crate::lowered::{
    AtomicOp, Base, Expr, Invariant, Lds, Param, Purpose, Reg, Special, Stmt, Ty, ticket,
};

use super::LowerError;
use super::build::*;
use super::lowering::Lowering;
use super::point::Point;
use super::schedule::Int4Dot;

/// The split-K state of one lowering.
pub(super) struct SplitK {
    /// `P`: workgroups per column tile (with a stripe grid the most of any tile).
    pub parts: usize,
    /// `wg_id / tiles`: this workgroup's K part (uniform); with a stripe grid its place among
    /// the tile's contributors, set per segment.
    pub part: Reg,
    /// A stripe grid ([`Schedule::stripe_workgroups`](super::Schedule::stripe_workgroups)):
    /// the segment's tile's contributors (a register, set per segment) and the K units
    /// `[begin, end)` of the segment.
    pub stripe: Option<StripeRegs>,
    /// f32 `[P][M][B][N]`: every part's per-column sums.
    pub partials: Param,
    /// u32 `[tiles]`: arrivals per tile, monotonic over launches.
    pub counter: Param,
    /// u32 `[1]` in LDS: 1 when this workgroup is its tile's last arriver of this launch.
    pub verdict: Lds,
    /// Whether GEMV values are being read from `partials` (the last arriver's epilogue).
    pub finishing: bool,
}

/// The registers of a stripe grid's segment (set at the top of each segment).
pub(super) struct StripeRegs {
    /// How many workgroups contribute to the segment's tile (its `P`).
    pub arrivals: Reg,
    /// The segment's K units `[begin, end)` of its tile.
    pub begin: Reg,
    pub end: Reg,
}

/// The shape of a stripe grid ([`Schedule::stripe_workgroups`](super::Schedule::stripe_workgroups)),
/// fixed when the kernel is lowered. The GEMV's work is `total = tiles · per_tile` granules in
/// tile order (tile `t`'s K granules `t · per_tile ..`); workgroup `w` takes the stripe
/// `[⌊w · total / G⌋, ⌊(w + 1) · total / G⌋)`, whose lengths differ by at most one granule.
/// Granule `x` is in the stripe of [`StripePlan::owner`]`(x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StripePlan {
    /// `G`: the grid's workgroups.
    pub workgroups: usize,
    /// K units per granule (`x_phase_units` where the activations are staged in phases: a
    /// segment is whole phases).
    pub granule: usize,
    /// Granules per column tile.
    pub per_tile: usize,
    /// Column tiles.
    pub tiles: usize,
    /// The most workgroups that contribute to one tile (the partials' parts).
    pub max_parts: usize,
    /// The most tiles one workgroup's stripe touches (its segments).
    pub max_segments: usize,
}

impl StripePlan {
    /// The plan of `workgroups` stripes over `tiles` tiles of `per_tile` granules; `None` where
    /// `total · G` does not fit the kernel's 32-bit arithmetic (`⌊w · total / G⌋` is computed
    /// in `u32`).
    pub fn new(workgroups: usize, granule: usize, per_tile: usize, tiles: usize) -> Option<Self> {
        let total = tiles.checked_mul(per_tile)?;
        if workgroups == 0 || total == 0 || total.checked_mul(workgroups + 1)? > u32::MAX as usize {
            return None;
        }
        let mut plan = StripePlan {
            workgroups,
            granule,
            per_tile,
            tiles,
            max_parts: 0,
            max_segments: 0,
        };
        plan.max_parts = (0..tiles)
            .map(|t| plan.owner(t * per_tile + per_tile - 1) - plan.owner(t * per_tile) + 1)
            .max()
            .unwrap_or(1);
        plan.max_segments = (0..workgroups)
            .map(|w| plan.range(w))
            .filter(|(lo, hi)| lo < hi)
            .map(|(lo, hi)| (hi - 1) / per_tile - lo / per_tile + 1)
            .max()
            .unwrap_or(1);
        Some(plan)
    }

    /// Every (tile, K granule) pair of the GEMV.
    pub fn total(&self) -> usize {
        self.tiles * self.per_tile
    }

    /// Workgroup `w`'s stripe of granules `[lo, hi)`.
    pub fn range(&self, w: usize) -> (usize, usize) {
        let (t, g) = (self.total(), self.workgroups);
        (w * t / g, (w + 1) * t / g)
    }

    /// The workgroup whose stripe holds granule `x`: the largest `w` with `⌊w · total / G⌋ ≤
    /// x`, i.e. `⌈(x + 1) · G / total⌉ − 1`.
    pub fn owner(&self, x: usize) -> usize {
        ((x + 1) * self.workgroups - 1) / self.total()
    }
}

impl Lowering<'_> {
    /// Declare split-K's arrays and this workgroup's K part when the schedule asks for
    /// `k_split > 1`; refuse the kernels it cannot serve.
    pub(super) fn declare_split(
        &mut self,
        stripe: Option<&StripePlan>,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let parts = stripe.map_or(self.s.k_split as usize, |p| p.max_parts);
        if parts == 1 && stripe.is_none() {
            return Ok(());
        }
        let unsupported =
            |why: &str| Err(LowerError::Unsupported(format!("k_split = {parts}: {why}")));
        let Some(g) = self.plan.gemv.as_ref() else {
            return unsupported("split-K needs a GEMV");
        };
        if !matches!(g.weight.format, WeightFormat::Gptq(_)) {
            return unsupported("split-K is implemented for GPTQ INT4 GEMVs only");
        }
        let m = g.gemvs.len();
        let (b, n) = (self.plan.batch, self.plan.n);
        let part = self.k.reg(Ty::U32, "kpart");
        let id = match self.wg {
            Expr::Special(Special::WorkgroupId) => "wg_id",
            _ => "stage_wg",
        };
        let stripe_regs = match stripe {
            None => {
                out.push(comment(format!(
                    "split-K: {parts} workgroups per column tile; this one sums K part {id} / {} (the last to arrive adds the parts)",
                    self.tiles
                )));
                out.push(assign(part, div(self.wg.clone(), u(self.tiles))));
                None
            }
            Some(_) => Some(StripeRegs {
                arrivals: self.k.reg(Ty::U32, "contributors"),
                begin: self.k.reg(Ty::U32, "seg_begin"),
                end: self.k.reg(Ty::U32, "seg_end"),
            }),
        };
        let partials = self.global_array(
            "splitk_partials",
            Ty::F32,
            parts * m * b * n,
            Purpose::Scratch,
        );
        let counter = self.global_array("splitk_counter", Ty::U32, self.tiles, Purpose::Counter);
        let verdict = self.k.lds(Ty::U32, 1);
        self.split = Some(SplitK {
            parts,
            part,
            stripe: stripe_regs,
            partials,
            counter,
            verdict,
            finishing: false,
        });
        Ok(())
    }

    /// The K units `[begin, end)` of this workgroup (all `units` without split-K).
    pub(super) fn split_units(&self, units: usize) -> Result<(Expr, Expr), LowerError> {
        let Some(s) = &self.split else {
            return Ok((u(0), u(units)));
        };
        if let Some(st) = &s.stripe {
            return Ok((r(st.begin), r(st.end)));
        }
        if units % s.parts != 0 {
            return Err(LowerError::Schedule(format!(
                "k_split = {} does not divide the GEMV's {units} K units",
                s.parts
            )));
        }
        let per = units / s.parts;
        let begin = mul(r(s.part), u(per));
        Ok((begin.clone(), add(begin, u(per))))
    }

    /// `splitk_partials` index of GEMV `mi` at `pt` for K part `part`.
    fn partial_index(&self, part: Expr, mi: usize, pt: &Point) -> Expr {
        let m = self.plan.gemv.as_ref().expect("a GEMV").gemvs.len();
        let row = add(
            mul(add(mul(part, u(m)), u(mi)), u(self.plan.batch)),
            pt.b.clone(),
        );
        add(mul(row, u(self.plan.n)), pt.col.clone())
    }

    /// GEMV `mi` at `pt` in the last arriver: the parts' sums added in part order.
    pub(super) fn split_sum(&mut self, mi: usize, pt: &Point, out: &mut Vec<Stmt>) -> Expr {
        let s = self.split.as_ref().expect("split-K");
        let (parts, partials) = (s.parts, s.partials);
        let contributors = s.stripe.as_ref().map(|st| st.arrivals);
        let (sum, p, part) = (
            self.k.reg(Ty::F32, "dot"),
            self.k.reg(Ty::U32, "kp"),
            self.k.reg(Ty::F32, "part"),
        );
        let idx = self.partial_index(r(p), mi, pt);
        out.push(assign(sum, f(0.0)));
        let add_part = vec![
            load(vec![part], at(Base::Param(partials), idx)),
            assign(sum, Expr::add(r(sum), r(part))),
        ];
        // A stripe tile's contributors are a register: the loop still runs to the most any tile
        // has (a constant), each part guarded, so the compiler unrolls it and the loads go out
        // together instead of one round trip after the other (timed: with the register as the
        // bound the stripe's finish cost 10-20 µs a tile at batch 64 on an H100,
        // bench/results/2026-12-08-gpu-stripe/ call 1).
        let body = match contributors {
            None => add_part,
            Some(c) => {
                let mut guarded = vec![];
                when(lt(r(p), r(c)), add_part, &mut guarded);
                guarded
            }
        };
        out.push(for_loop(p, u(0), u(parts), u(1), body));
        r(sum)
    }

    /// After the GEMV's in-workgroup reduction: publish this part's sums, arrive, and in the
    /// last arriver run the elementwise stage on the parts' sums (module docs, steps 1-4).
    pub(super) fn split_finish(&mut self, out: &mut Vec<Stmt>) -> Result<Reg, LowerError> {
        let m = self.plan.gemv.as_ref().expect("a GEMV").gemvs.len();
        let s = self.split.as_ref().expect("split-K");
        let (parts, part, partials, counter, verdict) =
            (s.parts, s.part, s.partials, s.counter, s.verdict);
        let contributors = s.stripe.as_ref().map(|st| st.arrivals);
        out.push(comment(
            "split-K: this part's sums to splitk_partials (global memory: other workgroups read them, §5.2)",
        ));
        // Not row-spread: spreading this store over the lanes too cost nvcc 8 more registers
        // (56 -> 64: 8 workgroups per SM instead of 9) for no fewer dependent rounds (stores do
        // not wait); the finish below is where the spread pays (its loads do).
        self.tile_loops(out, false, &mut |this, b, cb, body| {
            let (per_lane, _) = this.lane_columns();
            for j in 0..per_lane {
                let (pt, valid) = this.point(b.clone(), cb.clone(), j, false, body);
                let mut inner = Vec::new();
                for mi in 0..m {
                    let v = this.slice_sum(mi, &pt, &mut inner);
                    let idx = this.partial_index(r(part), mi, &pt);
                    inner.push(store(at(Base::Param(partials), idx), vec![v]));
                }
                when(valid, inner, body);
            }
            Ok(())
        })?;
        out.push(comment(
            "split-K arrival: every lane's partials are written before the one arrival (§5.1)",
        ));
        out.push(Stmt::WorkgroupBarrier);
        let old = self.k.reg(Ty::U32, "arrived");
        let tile = self.tile.clone();
        // §5.4 without an epoch (lowered/ticket.rs): K part 0 weighs Q − P + 1, the others 1, so
        // each launch takes the never-reset counter from one multiple of Q to the next. A stripe
        // tile's P is its own contributors (a register), Q the round of the most any tile has.
        let arrivals = parts as u32;
        let weight = match contributors {
            None => ticket::weight(arrivals, eq(r(part), u(0))),
            Some(p) => ticket::weight_of(arrivals, r(p), eq(r(part), u(0))),
        };
        let arrive = Stmt::Atomic {
            dst: Some(old),
            op: AtomicOp::Add,
            mem: at(Base::Param(counter), tile),
            value: Some(weight.clone()),
            ordering: Ordering::AcqRel,
            scope: Scope::Agent,
            why: Invariant::OneArrivalPerWorkgroup,
        };
        let verdict_store = store(
            self.lds_at(verdict, u(0)),
            vec![sel(
                ticket::completes_round(old, weight, arrivals),
                u(1),
                u(0),
            )],
        );
        out.push(comment(format!(
            "the arrival that completes a round of {} on the counter is this launch's last for the tile (§5.4: weighted tickets, the counter is never reset)",
            ticket::round_len(arrivals)
        )));
        out.push(Stmt::If {
            cond: eq(sp(Special::LocalId), u(0)),
            then_body: vec![arrive, verdict_store],
            else_body: vec![],
        });
        out.push(comment(
            "the verdict, and what the elected lane acquired, reach every lane of the workgroup",
        ));
        out.push(Stmt::WorkgroupBarrier);
        let last = self.k.reg(Ty::U32, "last");
        out.push(load(vec![last], self.lds_at(verdict, u(0))));
        // From here on the GEMV's values are the parts' sums (`split_sum`), read only by the
        // last arriver (`finisher_only`).
        self.split.as_mut().expect("split-K").finishing = true;
        Ok(last)
    }

    /// `stmts` run by the tile's last arriver only. `last` is loaded from LDS at a constant
    /// index after a workgroup barrier, so it is uniform over the workgroup and the stages in
    /// `stmts` may hold workgroup barriers and flag handshakes (§5.8).
    pub(super) fn finisher_only(
        &mut self,
        last: Reg,
        what: &str,
        stmts: Vec<Stmt>,
        out: &mut Vec<Stmt>,
    ) {
        out.push(comment(format!("the tile's last arriver only: {what}")));
        when(eq(r(last), u(1)), stmts, out);
    }
}

impl Lowering<'_> {
    /// The stripe grid of this kernel ([`Schedule::stripe_workgroups`](super::Schedule::stripe_workgroups)),
    /// `None` without one; the kernels it does not serve are refused with the reason.
    pub(super) fn stripe_plan(&self) -> Result<Option<StripePlan>, LowerError> {
        if !super::lowering::stripe_applies(&self.plan, &self.s) {
            return Ok(None);
        }
        let workgroups = self.s.stripe_workgroups as usize;
        let refuse = |why: String| {
            Err(LowerError::Schedule(format!(
                "stripe_workgroups = {workgroups}: {why}"
            )))
        };
        if self.plan.allreduce.is_some() || self.plan.norm.is_some() {
            return refuse(
                "the stripe grid is lowered for a GEMV without an allreduce or RMSNorm stage (their flags and partials are one per tile and workgroup); stripe_workgroups = 0 there".into(),
            );
        }
        if self.plan.prologue.is_some() {
            return refuse(
                "the stripe grid needs the GEMV's activation as a loaded input, not a GEMV prologue (which fills the workgroup's whole LDS stage)".into(),
            );
        }
        // Staged in phases: a segment is whole phases. (A stage of the whole part holds the
        // whole K here, `striped`.)
        let staged = self.s.int4_dot != Int4Dot::Fma && self.s.x_in_lds && self.s.x_phase_units > 0;
        if staged && self.s.int4_dot == Int4Dot::Mma && self.s.pipeline_depth == 2 {
            return refuse(
                "phases at pipeline_depth = 2 need an even count of phases per K part; a stripe's segments have any count (pipeline_depth = 1)".into(),
            );
        }
        let g = self.plan.gemv.as_ref().expect("stripe_applies: a GEMV");
        let granule = if staged {
            self.s.x_phase_units as usize
        } else {
            1
        };
        let unit = self.s.k_unit_words.max(1) as usize;
        let words = g.weight.k / 8;
        if words % (unit * granule) != 0 {
            return refuse(format!(
                "K = {} is {words} K-words, not a whole number of granules of {granule} unit(s) of {unit} K-words",
                g.weight.k
            ));
        }
        let per_tile = words / (unit * granule);
        // More workgroups than granules would leave some stripes empty, and a tile's
        // contributors would no longer be the consecutive workgroups between the owners of its
        // first and last granule: the grid is at most the granules.
        let workgroups = workgroups.min(self.tiles * per_tile);
        match StripePlan::new(workgroups, granule, per_tile, self.tiles) {
            Some(p) => Ok(Some(p)),
            None => refuse(format!(
                "{} tiles x {per_tile} K granules times {workgroups} workgroups exceed the kernel's 32-bit stripe arithmetic",
                self.tiles
            )),
        }
    }

    /// Whether the GEMV runs on a stripe grid: its K part is a segment (`split_units`), and a
    /// stage of the whole part holds the whole K from K-word 0.
    pub(super) fn striped(&self) -> bool {
        self.split.as_ref().is_some_and(|s| s.stripe.is_some())
    }

    /// The body of a stripe grid (`plan`): workgroup `w`'s stripe of (tile, K granule) pairs, a
    /// segment per tile it touches, each segment the GEMV over the segment's K units as a K part
    /// of its tile (its sums to `splitk_partials` at the workgroup's place among the tile's
    /// contributors), the arrival on the tile's counter, and in the tile's last arriver the
    /// contributions added in stripe order and the elementwise stage. Every bound is the
    /// workgroup's (from `wg_id` alone), so the segments' barriers are in uniform control flow
    /// (§5.8).
    pub(super) fn stripe_body(
        &mut self,
        plan: StripePlan,
        out: &mut Vec<Stmt>,
    ) -> Result<(), LowerError> {
        let (g, total, per, gran) = (plan.workgroups, plan.total(), plan.per_tile, plan.granule);
        // The grid as the plan has it (at most the granules, `stripe_plan`).
        self.grid = g;
        self.k.grid = g as u32;
        out.push(comment(format!(
            "stripe grid: {g} workgroups over {} column tiles x {per} K granules of {gran} unit(s), {total} in tile order; \
             workgroup w takes granules [w*{total}/{g}, (w+1)*{total}/{g}), a segment per tile it touches (at most {}), \
             each summed as a K part of its tile (at most {} parts per tile; the last to arrive adds them)",
            plan.tiles, plan.max_segments, plan.max_parts
        )));
        self.declare_split(Some(&plan), out)?;
        self.declare_sync(out)?;
        let s = self.split.as_ref().expect("declared");
        let st = s.stripe.as_ref().expect("a stripe");
        let (part, arrivals, begin, end) = (s.part, st.arrivals, st.begin, st.end);
        let [lo, hi, seg, tile, t_lo, a, b, first, lastw] = [
            "stripe_lo",
            "stripe_hi",
            "stripe_v",
            "tile",
            "tile_lo",
            "seg_lo",
            "seg_hi",
            "first_wg",
            "last_wg",
        ]
        .map(|h| self.k.reg(Ty::U32, h));
        let wg = self.wg.clone();
        out.push(assign(lo, div(mul(wg.clone(), u(total)), u(g))));
        out.push(assign(hi, div(mul(add(wg.clone(), u(1)), u(total)), u(g))));
        // The segments as virtual workgroups (`v = wg_id + seg·G`, the loop the validator and the
        // simulator know from `stages.rs`): each iteration is one (tile, contributor) pair of its
        // own, so its one arrival on the tile's counter is that pair's (§5.1), and nothing in it
        // waits for another workgroup (§5.9).
        let mut seg_body = vec![
            assign(tile, add(div(r(lo), u(per)), div(r(seg), u(g)))),
            assign(t_lo, mul(r(tile), u(per))),
            assign(a, sel(lt(r(lo), r(t_lo)), r(t_lo), r(lo))),
        ];
        // No barrier between segments: every LDS array a segment writes was last read before
        // a barrier of the segment before (the stage in its K loop, the cross-slice sums by its
        // partial stores, both before the arrival's barrier; the verdict, read after the
        // verdict's barrier, is next written by the next arrival, behind that segment's
        // arrival barrier), §5.2.
        let mut inner = vec![];
        let t_hi = add(r(t_lo), u(per));
        inner.push(assign(b, sel(lt(r(hi), t_hi.clone()), r(hi), t_hi)));
        inner.push(assign(begin, mul(sub(r(a), r(t_lo)), u(gran))));
        inner.push(assign(end, mul(sub(r(b), r(t_lo)), u(gran))));
        inner.push(comment(
            "the tile's contributors: the workgroups owning its first and last granule (owner(x) = ((x + 1)*G - 1) / total)",
        ));
        inner.push(assign(
            first,
            div(sub(mul(add(r(t_lo), u(1)), u(g)), u(1)), u(total)),
        ));
        inner.push(assign(
            lastw,
            div(sub(mul(add(r(t_lo), u(per)), u(g)), u(1)), u(total)),
        ));
        inner.push(assign(part, sub(wg.clone(), r(first))));
        inner.push(assign(arrivals, add(sub(r(lastw), r(first)), u(1))));
        self.tile = r(tile);
        inner.push(assign(self.tile0, mul(r(tile), u(self.cols))));
        self.gemv(&mut inner)?;
        let last = self.split_finish(&mut inner)?;
        let mut tail = Vec::new();
        self.phase_loop(super::plan::Phase::Pre, &mut tail)?;
        self.finisher_only(
            last,
            "the contributors' sums added in stripe order, then the elementwise stage",
            tail,
            &mut inner,
        );
        seg_body.push(comment(
            "a segment where the stripe reaches this tile (uniform: from wg_id alone)",
        ));
        when(lt(r(a), r(hi)), inner, &mut seg_body);
        out.push(for_loop(seg, wg, u(plan.max_segments * g), u(g), seg_body));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::StripePlan;

    /// The plan's arithmetic against a brute-force walk of the stripes: every granule in
    /// exactly one stripe, `owner` the stripe that holds it, stripes of equal length (±1), a
    /// tile's contributors the consecutive workgroups between the owners of its first and last
    /// granule (none of them without a granule of the tile), and the maxima the lowering sizes
    /// the partials and the segment loop by.
    #[test]
    fn stripe_plan_matches_a_walk_of_the_stripes() {
        for tiles in 1..=7 {
            for per in 1..=9 {
                let total = tiles * per;
                for g in 1..=total {
                    let p = StripePlan::new(g, 1, per, tiles).expect("small");
                    let mut owner = vec![usize::MAX; total];
                    let mut most_segments = 0;
                    for w in 0..g {
                        let (lo, hi) = p.range(w);
                        assert!(hi > lo, "g {g} <= total {total}: no stripe is empty");
                        assert!(hi - lo == total / g || hi - lo == total / g + 1);
                        for x in lo..hi {
                            assert_eq!(owner[x], usize::MAX, "granule {x} in two stripes");
                            owner[x] = w;
                        }
                        most_segments = most_segments.max((hi - 1) / per - lo / per + 1);
                    }
                    let mut most_parts = 0;
                    for t in 0..tiles {
                        let ws: Vec<usize> = (t * per..(t + 1) * per).map(|x| owner[x]).collect();
                        let (first, last) = (ws[0], ws[per - 1]);
                        assert!((first..=last).all(|w| ws.contains(&w)), "tile {t}: {ws:?}");
                        most_parts = most_parts.max(last - first + 1);
                    }
                    for (x, &w) in owner.iter().enumerate() {
                        assert_eq!(p.owner(x), w, "tiles {tiles} per {per} g {g} granule {x}");
                    }
                    assert_eq!(p.max_parts, most_parts);
                    assert_eq!(p.max_segments, most_segments);
                }
            }
        }
        // Past the kernel's 32-bit arithmetic: refused.
        assert!(StripePlan::new(1 << 20, 1, 1 << 10, 1 << 4).is_none());
    }
}
