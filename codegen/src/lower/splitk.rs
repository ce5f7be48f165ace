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

/// The split-K state of one lowering.
pub(super) struct SplitK {
    /// `P`: workgroups per column tile.
    pub parts: usize,
    /// `wg_id / tiles`: this workgroup's K part (uniform).
    pub part: Reg,
    /// f32 `[P][M][B][N]`: every part's per-column sums.
    pub partials: Param,
    /// u32 `[tiles]`: arrivals per tile, monotonic over launches.
    pub counter: Param,
    /// u32 `[1]` in LDS: 1 when this workgroup is its tile's last arriver of this launch.
    pub verdict: Lds,
    /// Whether GEMV values are being read from `partials` (the last arriver's epilogue).
    pub finishing: bool,
}

impl Lowering<'_> {
    /// Declare split-K's arrays and this workgroup's K part when the schedule asks for
    /// `k_split > 1`; refuse the kernels it cannot serve.
    pub(super) fn declare_split(&mut self, out: &mut Vec<Stmt>) -> Result<(), LowerError> {
        let parts = self.s.k_split as usize;
        if parts == 1 {
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
        out.push(comment(format!(
            "split-K: {parts} workgroups per column tile; this one sums K part {id} / {} (the last to arrive adds the parts)",
            self.tiles
        )));
        out.push(assign(part, div(self.wg.clone(), u(self.tiles))));
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
        let (sum, p, part) = (
            self.k.reg(Ty::F32, "dot"),
            self.k.reg(Ty::U32, "kp"),
            self.k.reg(Ty::F32, "part"),
        );
        let idx = self.partial_index(r(p), mi, pt);
        out.push(assign(sum, f(0.0)));
        let body = vec![
            load(vec![part], at(Base::Param(partials), idx)),
            assign(sum, Expr::add(r(sum), r(part))),
        ];
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
        // each launch takes the never-reset counter from one multiple of Q to the next.
        let arrivals = parts as u32;
        let weight = ticket::weight(arrivals, eq(r(part), u(0)));
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
