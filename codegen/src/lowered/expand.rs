//! Expansion of grid barriers and cross-rank flags into primitives.
//!
//! Grid barriers count weighted tickets ([`ticket`], DESIGN.md §5.4): each workgroup's elected
//! lane adds its weight to the barrier's counter and waits until the counter reaches the end of
//! its ticket's round. The counter is never reset and needs no epoch, so the same launch,
//! replayed, is correct (split-K arrivals count the same way, `lower/splitk.rs`). A kernel with
//! flags has the epoch anyway: its barriers wait for the round's end computed from the epoch,
//! `((epoch − 1)·B + i + 1)·Q` for barrier `i` of `B`, and arrive without a returned ticket.
//!
//! Cross-rank flags do need an epoch: a rank cannot tell from a peer's flag alone which launch
//! published it. `epoch` is 1 for the first launch on zeroed flags and grows by one per launch;
//! nothing is ever reset by a kernel. The epoch lives on the device: the `epoch_state` counter
//! array holds one word per workgroup, the launches that workgroup completed. Every lane loads
//! its workgroup's word + 1 at entry (a plain load: the word was last written by this workgroup
//! in the previous launch, before the kernel boundary), and after a workgroup barrier at exit
//! lane 0 adds 1 to it (relaxed: nobody else reads it in this launch). Every workgroup runs once
//! per launch, so all hold the same epoch; the same launch with the same arguments, replayed (a
//! captured CUDA/HIP graph), counts on by itself, with no cross-workgroup traffic and no wait. A
//! kernel built with the hand-written ABI's host-passed `epoch` scalar keeps that instead.
//! Flag round `j` of `R` per launch publishes the value `(epoch − 1)·R + j + 1`.
//!
//! Comparisons are wrap-safe (`(i32)(value − target) >= 0`), so counters may wrap at 2³².

use wavefuse_ir::{Ordering, Scope};

use super::{
    AtomicOp, BinOp, Block, Expr, Invariant, LoweredKernel, MemRef, Special, Stmt, ticket,
};

/// Spin budget of a wait, in atomic loads (≈ seconds on a real GPU before the error is reported).
pub const SPIN_BUDGET: u32 = 1 << 26;

/// Rewrite every [`Stmt::GridBarrier`], [`Stmt::PublishFlag`] and [`Stmt::WaitFlag`] into
/// primitives, adding the epoch and error-word parameters when needed and counting barriers and
/// flag rounds for the epoch arithmetic.
pub fn expand_sync(k: &mut LoweredKernel) {
    let body = std::mem::take(&mut k.body);
    let (mut barriers, mut rounds) = (0, 0);
    count(&body, &mut barriers, &mut rounds);
    k.barriers_per_launch = barriers;
    k.flag_rounds_per_launch = rounds;
    if barriers > 0 {
        k.coresidency = Some(super::CoResidency { workgroups: k.grid });
    }
    let mut cx = Expander { k, next_code: 1 };
    let body = cx.block(body);
    k.body = with_device_epoch(k, body);
}

/// The body between the device epoch's entry load and exit advance (unchanged without one).
fn with_device_epoch(k: &mut LoweredKernel, body: Block) -> Block {
    let (Some(state), Some(epoch)) = (k.epoch_state, k.epoch_reg) else {
        return body;
    };
    // One word per workgroup: only workgroup w reads and advances word w, once per launch.
    if let super::ParamKind::Array { len, .. } = &mut k.params[state].kind {
        *len = k.grid as usize;
    }
    let own = || MemRef {
        base: super::Base::Param(state),
        index: Expr::Special(Special::WorkgroupId),
    };
    let mut out = vec![
        Stmt::Comment(
            "this launch's epoch: one more than the launches this workgroup completed (§5.4); \
             written only by this workgroup, at the end of the previous launch"
                .into(),
        ),
        Stmt::Load {
            dst: vec![epoch],
            mem: own(),
        },
        Stmt::Assign {
            dst: epoch,
            value: Expr::add(Expr::Reg(epoch), Expr::u32(1)),
        },
    ];
    out.extend(body);
    out.push(Stmt::Comment(
        "the epoch advances on the device: every lane of this workgroup has loaded it".into(),
    ));
    // §5.4: lane 0 advances the word only once every lane of its workgroup has loaded it (a
    // lagging lane would read the next launch's epoch). The validator refuses the advance without
    // this barrier (§5.1's elected add); harness/tests/sim_replay.rs plants that mutant.
    out.push(Stmt::WorkgroupBarrier);
    let advance = Stmt::Atomic {
        dst: None,
        op: AtomicOp::Add,
        mem: own(),
        value: Some(Expr::u32(1)),
        ordering: Ordering::Relaxed,
        scope: Scope::Agent,
        why: Invariant::MonotonicEpochs,
    };
    out.push(Stmt::If {
        cond: lane0(),
        then_body: vec![advance],
        else_body: vec![],
    });
    out
}

/// Barriers and flag rounds per launch: one more than the largest index used.
fn count(block: &Block, barriers: &mut u32, rounds: &mut u32) {
    for s in block {
        match s {
            Stmt::For { body, .. } => count(body, barriers, rounds),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                count(then_body, barriers, rounds);
                count(else_body, barriers, rounds);
            }
            Stmt::GridBarrier { index, .. } => *barriers = (*barriers).max(index + 1),
            Stmt::PublishFlag { round, .. }
            | Stmt::WaitFlag { round, .. }
            | Stmt::WaitFlagPerLane { round, .. } => *rounds = (*rounds).max(round + 1),
            _ => {}
        }
    }
}

struct Expander<'a> {
    k: &'a mut LoweredKernel,
    next_code: u32,
}

fn lane0() -> Expr {
    Expr::bin(BinOp::Eq, Expr::Special(Special::LocalId), Expr::u32(0))
}

fn sub1(e: Expr) -> Expr {
    Expr::bin(BinOp::Sub, e, Expr::u32(1))
}

impl Expander<'_> {
    fn block(&mut self, stmts: Block) -> Block {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            self.stmt(s, &mut out);
        }
        out
    }

    fn stmt(&mut self, s: Stmt, out: &mut Block) {
        match s {
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let body = self.block(body);
                out.push(Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                });
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let (then_body, else_body) = (self.block(then_body), self.block(else_body));
                out.push(Stmt::If {
                    cond,
                    then_body,
                    else_body,
                });
            }
            Stmt::GridBarrier { counter, index } => self.grid_barrier(counter, index, out),
            Stmt::PublishFlag { flag, round } => self.publish(flag, round, out),
            Stmt::WaitFlag { flag, round } => self.wait_flag(flag, round, out),
            Stmt::WaitFlagPerLane {
                flag,
                lanes,
                cond,
                round,
            } => self.wait_flag_per_lane(flag, lanes, cond, round, out),
            other => out.push(other),
        }
    }

    fn epoch(&mut self) -> Expr {
        self.k.epoch_value()
    }

    fn error(&mut self) -> MemRef {
        MemRef {
            base: super::Base::Param(self.k.error_param()),
            index: Expr::u32(0),
        }
    }

    fn code(&mut self) -> u32 {
        let c = self.next_code;
        self.next_code += 1;
        c
    }

    fn grid_barrier(&mut self, counter: MemRef, index: u32, out: &mut Block) {
        // A weighted ticket (lowered/ticket.rs, §5.4): a round of this barrier advances the
        // counter by exactly Q, whichever launch this is. Without flags the kernel has no epoch:
        // the round ends on the next multiple of Q after the arrival's returned ticket. With
        // flags it has the epoch anyway, and launch e's barrier i ends at ((e − 1)·B + i + 1)·Q
        // (B barriers per launch, counter and epoch both zero on fresh state, every launch
        // advancing the counter by B·Q even when a wait times out, §5.11): the arrival returns
        // nothing and the first poll goes out at once (no round trip for the ticket).
        let arrivals = self.k.grid;
        let q = ticket::round_len(arrivals);
        let first = Expr::bin(BinOp::Eq, Expr::Special(Special::WorkgroupId), Expr::u32(0));
        let weight = ticket::weight(arrivals, first);
        let (ticket, target, how) = if self.k.flag_rounds_per_launch > 0 {
            let rounds = Expr::add(
                Expr::mul(sub1(self.epoch()), Expr::u32(self.k.barriers_per_launch)),
                Expr::u32(index + 1),
            );
            let target = Expr::mul(rounds, Expr::u32(q));
            (None, target, "the round's end from the epoch")
        } else {
            let ticket = self.k.reg(super::Ty::U32, "ticket");
            let target = ticket::round_end(ticket, arrivals);
            (Some(ticket), target, "no reset, no epoch")
        };
        let (error, code) = (self.error(), self.code());
        out.push(Stmt::Comment(format!(
            "grid barrier {index}: every lane of this workgroup is done with its writes; one weighted arrival per workgroup, a round of {arrivals} advances the counter by {q} (§5.4: {how})"
        )));
        out.push(Stmt::WorkgroupBarrier);
        let arrive = Stmt::Atomic {
            dst: ticket,
            op: AtomicOp::Add,
            mem: counter.clone(),
            value: Some(weight),
            ordering: Ordering::Release,
            scope: Scope::Agent,
            why: Invariant::OneArrivalPerWorkgroup,
        };
        let wait = Stmt::WaitGe {
            mem: counter,
            target,
            ordering: Ordering::Acquire,
            scope: Scope::Agent,
            budget: SPIN_BUDGET,
            error,
            code,
            why: Invariant::MonotonicEpochs,
        };
        out.push(Stmt::If {
            cond: lane0(),
            then_body: vec![arrive, wait],
            else_body: vec![],
        });
        out.push(Stmt::WorkgroupBarrier);
    }

    fn flag_value(&mut self, round: u32) -> Expr {
        let per_launch = Expr::u32(self.k.flag_rounds_per_launch);
        let epoch = self.epoch();
        Expr::add(Expr::mul(sub1(epoch), per_launch), Expr::u32(round + 1))
    }

    fn publish(&mut self, flag: MemRef, round: u32, out: &mut Block) {
        let value = self.flag_value(round);
        out.push(Stmt::Comment(format!(
            "publish flag round {round}: this workgroup's writes are done"
        )));
        out.push(Stmt::WorkgroupBarrier);
        let store = Stmt::Atomic {
            dst: None,
            op: AtomicOp::Store,
            mem: flag,
            value: Some(value),
            ordering: Ordering::Release,
            scope: Scope::System,
            why: Invariant::PeerFlagHandshake,
        };
        out.push(Stmt::If {
            cond: lane0(),
            then_body: vec![store],
            else_body: vec![],
        });
    }

    /// The bounded acquire wait (system scope) until `flag` holds this launch's value of `round`
    /// (§5.3, §5.10), with its own wait-site code.
    fn flag_wait(&mut self, flag: MemRef, round: u32) -> Stmt {
        let target = self.flag_value(round);
        let (error, code) = (self.error(), self.code());
        Stmt::WaitGe {
            mem: flag,
            target,
            ordering: Ordering::Acquire,
            scope: Scope::System,
            budget: SPIN_BUDGET,
            error,
            code,
            why: Invariant::PeerFlagHandshake,
        }
    }

    fn wait_flag(&mut self, flag: MemRef, round: u32, out: &mut Block) {
        let wait = self.flag_wait(flag, round);
        out.push(Stmt::If {
            cond: lane0(),
            then_body: vec![wait],
            else_body: vec![],
        });
        out.push(Stmt::Comment(
            "the whole workgroup may now read what the peer published".into(),
        ));
        out.push(Stmt::WorkgroupBarrier);
    }

    /// Lane `l < lanes` with `cond` polls its own flag; all of them at once, then one barrier.
    fn wait_flag_per_lane(
        &mut self,
        flag: MemRef,
        lanes: u32,
        cond: Expr,
        round: u32,
        out: &mut Block,
    ) {
        let wait = self.flag_wait(flag, round);
        out.push(Stmt::Comment(format!(
            "lanes below {lanes} wait on one peer's flag each, in parallel (§5.3)"
        )));
        let lane_ok = Expr::bin(BinOp::Lt, Expr::Special(Special::LocalId), Expr::u32(lanes));
        out.push(Stmt::If {
            cond: Expr::bin(BinOp::And, lane_ok, cond),
            then_body: vec![wait],
            else_body: vec![],
        });
        out.push(Stmt::Comment(
            "the whole workgroup may now read what the peers published".into(),
        ));
        out.push(Stmt::WorkgroupBarrier);
    }
}
