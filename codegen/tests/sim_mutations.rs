//! The six planted protocol bugs of issue 4, each caught by the simulator, and the correct
//! protocol clean on the same seeds.
//!
//! Two hand-built protocols, each lowered by hand from an op-level kernel and checked against the
//! f64 reference:
//! - `rmsnorm` over 4 workgroups of one rank: a wave reduction and an LDS step per workgroup,
//!   per-workgroup partial sums in global scratch, a grid barrier (expanded by `expand_sync`), then
//!   every workgroup sums the partials and normalises its slice. A masked tail (480 of 512 lanes).
//! - `allreduce_residual` over 2 or 4 ranks: each workgroup publishes its slice of the partial into
//!   its rank's peer-visible buffer (double-buffered by epoch parity), releases its flag, waits
//!   for every peer's flag for this epoch and sums the peers' slices in rank order.
//!
//! Planted bugs (DESIGN.md §5.1–§5.5, §5.8): the grid barrier's arrival by every lane; the partials
//! passed through LDS; the peers' buffers read without waiting for their flags; the counter reset
//! at the end of the kernel; an early return of the tail lanes before the barriers; the host's
//! peer table rotated against the device's ascending rule. One more: the publish buffer not
//! double-buffered, so the next launch overwrites it while a slow peer still reads.

mod sim_support;

use sim_support::*;
use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{Builder, Kernel, Ordering, ScalarType, Scope, Sharding, Tensor};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::*;
use wavefuse_codegen::sim::*;

const F: usize = 480;
const G: u32 = 4;
const WG: u32 = 128;

fn rmsnorm_ir() -> Kernel {
    let mut b = Builder::new("rmsnorm", 1);
    let x = b.input(
        "x",
        Tensor::activation(ScalarType::F16, 1, F),
        Sharding::Replicated,
    );
    let w = b.input(
        "w",
        Tensor::vector(ScalarType::F16, F),
        Sharding::Replicated,
    );
    let y = b.output(
        "y",
        Tensor::activation(ScalarType::F16, 1, F),
        Sharding::Replicated,
    );
    let (xv, wv) = (b.load(x), b.load(w));
    let n = b.rmsnorm(xv, wv, 1e-6);
    let n16 = b.round_f16(n);
    b.store(n16, y);
    b.finish()
}

#[derive(Copy, Clone, Default)]
struct RmsBugs {
    every_lane_arrives: bool,
    partials_in_lds: bool,
    counter_reset: bool,
    early_return: bool,
}

fn rmsnorm_lowered(bugs: RmsBugs) -> LoweredKernel {
    let mut k = LoweredKernel::new("rmsnorm", Arch::Gfx906, 1, WG, G);
    let x = array(&mut k, "x", Ty::F16, F, Access::Read, data("x", "data"));
    let w = array(&mut k, "w", Ty::F16, F, Access::Read, data("w", "data"));
    let y = array(&mut k, "y", Ty::F16, F, Access::Write, data("y", "data"));
    let part = array(
        &mut k,
        "part",
        Ty::F32,
        G as usize,
        Access::ReadWrite,
        Purpose::Scratch,
    );
    let counter = array(
        &mut k,
        "counter",
        Ty::U32,
        1,
        Access::ReadWrite,
        Purpose::Counter,
    );
    let red = k.lds(Ty::F32, 2);
    let part_lds = k.lds(Ty::F32, G as usize);
    let (i, p) = (k.reg(Ty::U32, "i"), k.reg(Ty::U32, "p"));
    let (xv, wv) = (k.reg(Ty::F16, "x"), k.reg(Ty::F16, "w"));
    let [xf, s, a, b, tot, inv] = ["xf", "s", "a", "b", "tot", "inv"].map(|h| k.reg(Ty::F32, h));
    let partial = |idx: Expr| {
        if bugs.partials_in_lds {
            lds_at(part_lds, idx)
        } else {
            at(part, idx)
        }
    };
    let in_range = lt(r(i), u(F as u32));
    let rest = vec![
        assign(xf, f(0.0)),
        if_(
            in_range.clone(),
            vec![
                load(xv, at(x, r(i))),
                assign(xf, Expr::cast(Ty::F32, r(xv))),
            ],
        ),
        Stmt::WaveReduce {
            dst: s,
            op: ReduceKind::Sum,
            value: mul(r(xf), r(xf)),
        },
        if_(
            eq(Expr::Special(Special::LaneId), u(0)),
            vec![store(lds_at(red, Expr::Special(Special::WaveId)), r(s))],
        ),
        Stmt::WorkgroupBarrier,
        if_(
            eq(lid(), u(0)),
            vec![
                load(a, lds_at(red, u(0))),
                load(b, lds_at(red, u(1))),
                store(partial(wg()), add(r(a), r(b))),
            ],
        ),
        Stmt::GridBarrier {
            counter: at(counter, u(0)),
            index: 0,
        },
        assign(tot, f(0.0)),
        Stmt::For {
            var: p,
            start: u(0),
            end: Expr::Special(Special::NumWorkgroups),
            step: u(1),
            body: vec![load(a, partial(r(p))), assign(tot, add(r(tot), r(a)))],
        },
        assign(
            inv,
            Expr::Un(
                UnOp::Rsqrt,
                Box::new(add(Expr::bin(BinOp::Div, r(tot), f(F as f32)), f(1e-6))),
            ),
        ),
        if_(
            in_range.clone(),
            vec![
                load(wv, at(w, r(i))),
                store(
                    at(y, r(i)),
                    Expr::cast(Ty::F16, mul(mul(r(xf), r(inv)), Expr::cast(Ty::F32, r(wv)))),
                ),
            ],
        ),
    ];
    k.body = vec![assign(i, add(mul(wg(), u(WG)), lid()))];
    if bugs.early_return {
        // `if (i >= F) return;` — the tail lanes skip every barrier that follows.
        k.body.push(if_(in_range, rest));
    } else {
        k.body.extend(rest);
    }
    expand_sync(&mut k);
    if bugs.every_lane_arrives {
        k.body = unelect(std::mem::take(&mut k.body));
    }
    if bugs.counter_reset {
        k.body = reset_after_arrival(std::mem::take(&mut k.body), counter);
    }
    k
}

/// Workgroup 0's elected lane stores 0 to the barrier's counter right after its own arrival
/// (the hand-written "reset for the next use" while others still arrive and wait).
fn reset_after_arrival(body: Block, counter: Param) -> Block {
    let mut out = Vec::new();
    for s in body {
        match s {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::If {
                cond,
                then_body: reset_after_arrival(then_body, counter),
                else_body: reset_after_arrival(else_body, counter),
            }),
            s @ Stmt::Atomic {
                op: AtomicOp::Add,
                why: Invariant::OneArrivalPerWorkgroup,
                ..
            } => {
                out.push(s);
                out.push(if_(
                    eq(wg(), u(0)),
                    vec![atomic(
                        AtomicOp::Store,
                        at(counter, u(0)),
                        Some(u(0)),
                        Ordering::Relaxed,
                        Scope::Agent,
                    )],
                ));
            }
            other => out.push(other),
        }
    }
    out
}

/// Hoist the grid barrier's elected arrival out of its `if local_id == 0`: every lane arrives.
fn unelect(body: Block) -> Block {
    let mut out = Vec::new();
    for s in body {
        match s {
            Stmt::If { then_body, .. }
                if then_body.iter().any(|t| {
                    matches!(
                        t,
                        Stmt::Atomic {
                            why: Invariant::OneArrivalPerWorkgroup,
                            ..
                        }
                    )
                }) =>
            {
                out.extend(then_body)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::If {
                cond,
                then_body: unelect(then_body),
                else_body: unelect(else_body),
            }),
            other => out.push(other),
        }
    }
    out
}

const H: usize = 256;
const AR_G: u32 = 2;
const AR_WG: u32 = 64;

fn allreduce_ir(tp: u32) -> Kernel {
    let mut b = Builder::new("allreduce_residual", tp);
    let act = |f| Tensor::activation(ScalarType::F16, 1, f);
    let partial = b.input("partial", act(H), Sharding::Partial { tp });
    let residual = b.input("residual", act(H), Sharding::Replicated);
    let out = b.output("residual_out", act(H), Sharding::Replicated);
    let pv = b.load(partial);
    let sum = b.allreduce(pv);
    let rv = b.load(residual);
    let rr = b.add(sum, rv);
    let r16 = b.round_f16(rr);
    b.store(r16, out);
    b.finish()
}

#[derive(Copy, Clone, Default)]
struct ArBugs {
    no_wait: bool,
    single_buffer: bool,
}

fn allreduce_lowered(tp: u32, bugs: ArBugs) -> LoweredKernel {
    let mut k = LoweredKernel::new("allreduce_residual", Arch::Gfx906, tp, AR_WG, AR_G);
    let partial = array(
        &mut k,
        "partial",
        Ty::F16,
        H,
        Access::Read,
        data("partial", "data"),
    );
    let residual = array(
        &mut k,
        "residual",
        Ty::F16,
        H,
        Access::Read,
        data("residual", "data"),
    );
    let out = array(
        &mut k,
        "out",
        Ty::F16,
        H,
        Access::Write,
        data("residual_out", "data"),
    );
    let publ = peers(&mut k, "publish", Ty::F16, 2 * H, Purpose::Scratch);
    let flags = peers(&mut k, "flags", Ty::U32, AR_G as usize, Purpose::Flags);
    let rank = Expr::Param(rank_param(&mut k));
    let epoch = Expr::Param(k.epoch_param());
    let (i, p, base) = (
        k.reg(Ty::U32, "i"),
        k.reg(Ty::U32, "p"),
        k.reg(Ty::U32, "base"),
    );
    let (v, q) = (k.reg(Ty::F16, "v"), k.reg(Ty::F16, "q"));
    let acc = [k.reg(Ty::F32, "acc0"), k.reg(Ty::F32, "acc1")];
    let col = |j: u32| add(r(i), u(j * AR_WG));
    // Double buffering: launch e publishes into half e mod 2, so a peer still reading launch e − 1
    // is never overwritten (it cannot be two launches behind: launch e waits for its flag).
    let parity = if bugs.single_buffer {
        u(0)
    } else {
        mul(bin(BinOp::And, epoch, u(1)), u(H as u32))
    };
    let mut body = vec![
        assign(i, add(mul(wg(), u(2 * AR_WG)), lid())),
        assign(base, parity),
    ];
    for j in 0..2 {
        body.push(load(v, at(partial, col(j))));
        body.push(store(peer(publ, rank.clone(), add(r(base), col(j))), r(v)));
    }
    body.push(Stmt::PublishFlag {
        flag: peer(flags, rank.clone(), wg()),
        round: 0,
    });
    body.extend(acc.map(|a| assign(a, f(0.0))));
    let mut per_peer = Vec::new();
    if !bugs.no_wait {
        per_peer.push(Stmt::WaitFlag {
            flag: peer(flags, r(p), wg()),
            round: 0,
        });
    }
    for j in 0..2 {
        per_peer.push(load(q, peer(publ, r(p), add(r(base), col(j)))));
        per_peer.push(assign(
            acc[j as usize],
            add(r(acc[j as usize]), Expr::cast(Ty::F32, r(q))),
        ));
    }
    body.push(Stmt::For {
        var: p,
        start: u(0),
        end: u(tp),
        step: u(1),
        body: per_peer,
    });
    for j in 0..2 {
        body.push(load(v, at(residual, col(j))));
        let sum = add(r(acc[j as usize]), Expr::cast(Ty::F32, r(v)));
        body.push(store(at(out, col(j)), Expr::cast(Ty::F16, sum)));
    }
    k.body = body;
    expand_sync(&mut k);
    k
}

const SEEDS: u64 = 24;
const LAUNCHES: u32 = 3;

/// Run `seeds` schedules; return the runs that found something, with their findings.
fn sweep(
    lowered: &LoweredKernel,
    ir: &Kernel,
    seeds: u64,
    tweak: impl Fn(&mut SimOptions),
) -> Vec<(u64, Vec<Finding>)> {
    let mut caught = Vec::new();
    for seed in 0..seeds {
        let mut o = SimOptions::sweep(0xB06, seed);
        tweak(&mut o);
        let rep = simulate(lowered, ir, &launches(ir, seed, LAUNCHES), &o).expect("simulates");
        if !rep.findings.is_empty() {
            caught.push((seed, rep.findings));
        }
    }
    caught
}

fn describe(caught: &[(u64, Vec<Finding>)]) -> String {
    caught
        .iter()
        .take(2)
        .map(|(s, f)| {
            format!(
                "seed {s}:\n  {}",
                f.iter()
                    .map(|f| f.to_string())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The mutant is caught on at least `min` of the seeds, every catch includes one of `kinds`.
fn assert_caught(caught: &[(u64, Vec<Finding>)], min: u64, kinds: &[FindingKind]) {
    assert!(
        caught.len() as u64 >= min,
        "caught on {} of {SEEDS} seeds (want ≥ {min})\n{}",
        caught.len(),
        describe(caught)
    );
    for (seed, f) in caught {
        assert!(
            f.iter().any(|f| kinds.contains(&f.kind)),
            "seed {seed}: {f:?}"
        );
    }
    eprintln!(
        "caught on {}/{SEEDS} seeds; first:\n{}",
        caught.len(),
        describe(&caught[..1])
    );
}

#[test]
fn correct_rmsnorm_with_a_grid_barrier_is_clean() {
    let (ir, k) = (rmsnorm_ir(), rmsnorm_lowered(RmsBugs::default()));
    let caught = sweep(&k, &ir, SEEDS, |_| {});
    assert!(caught.is_empty(), "{}", describe(&caught));
}

#[test]
fn correct_allreduce_is_clean_at_tp2_and_tp4() {
    for tp in [2, 4] {
        let (ir, k) = (allreduce_ir(tp), allreduce_lowered(tp, ArBugs::default()));
        let caught = sweep(&k, &ir, SEEDS, |_| {});
        assert!(caught.is_empty(), "tp={tp}: {}", describe(&caught));
    }
}

/// §5.1: every lane adds to the counter, so it reaches its target after a few lanes of one
/// workgroup, and workgroups read partials nobody has published yet.
#[test]
fn mutation_counter_incremented_by_every_lane_is_caught() {
    let bugs = RmsBugs {
        every_lane_arrives: true,
        ..RmsBugs::default()
    };
    let caught = sweep(&rmsnorm_lowered(bugs), &rmsnorm_ir(), SEEDS, |_| {});
    assert_caught(
        &caught,
        SEEDS / 2,
        &[FindingKind::StaleRead, FindingKind::Mismatch],
    );
}

/// §5.2: partials "broadcast" through LDS only reach the workgroup that wrote them.
#[test]
fn mutation_lds_between_workgroups_is_caught() {
    let bugs = RmsBugs {
        partials_in_lds: true,
        ..RmsBugs::default()
    };
    let caught = sweep(&rmsnorm_lowered(bugs), &rmsnorm_ir(), SEEDS, |_| {});
    assert_caught(&caught, SEEDS, &[FindingKind::UninitRead]);
}

/// §5.3: peers' buffers read without waiting for their flags.
#[test]
fn mutation_peer_read_without_waiting_for_the_flag_is_caught() {
    let bugs = ArBugs {
        no_wait: true,
        ..ArBugs::default()
    };
    let caught = sweep(&allreduce_lowered(4, bugs), &allreduce_ir(4), SEEDS, |_| {});
    assert_caught(
        &caught,
        SEEDS / 2,
        &[FindingKind::StaleRead, FindingKind::Mismatch],
    );
}

/// §5.4: the counter reset to 0 by workgroup 0 right after its arrival: the round's end is never
/// reached (or reached and lost while others still wait).
#[test]
fn mutation_counter_reset_inside_the_kernel_is_caught() {
    let bugs = RmsBugs {
        counter_reset: true,
        ..RmsBugs::default()
    };
    let caught = sweep(&rmsnorm_lowered(bugs), &rmsnorm_ir(), SEEDS, |_| {});
    assert_caught(&caught, SEEDS, &[FindingKind::Deadlock]);
    assert!(
        caught
            .iter()
            .all(|(_, f)| f.iter().any(|f| f.kind == FindingKind::ErrorWord))
    );
}

/// §5.8: the tail lanes return before the workgroup barriers.
#[test]
fn mutation_early_return_before_a_barrier_is_caught() {
    let bugs = RmsBugs {
        early_return: true,
        ..RmsBugs::default()
    };
    let caught = sweep(&rmsnorm_lowered(bugs), &rmsnorm_ir(), SEEDS, |_| {});
    assert_caught(&caught, SEEDS, &[FindingKind::PartialBarrier]);
}

/// §5.5: the host fills the peer table rotated (slot s of rank r = rank r + s) while the device
/// addresses peers by ascending rank.
#[test]
fn mutation_peers_rotated_on_the_host_is_caught() {
    for tp in [2, 4] {
        let k = allreduce_lowered(tp, ArBugs::default());
        let caught = sweep(&k, &allreduce_ir(tp), SEEDS, |o| {
            o.peer_table = PeerTable::Rotated
        });
        assert_caught(
            &caught,
            SEEDS,
            &[
                FindingKind::Mismatch,
                FindingKind::Deadlock,
                FindingKind::WriteRace,
            ],
        );
    }
}

/// §5.7 across launches: with one publish buffer, a rank's next launch overwrites it while a
/// slow peer still reads this launch's values.
#[test]
fn mutation_publish_buffer_reused_by_the_next_launch_is_caught() {
    let bugs = ArBugs {
        single_buffer: true,
        ..ArBugs::default()
    };
    let caught = sweep(&allreduce_lowered(4, bugs), &allreduce_ir(4), SEEDS, |_| {});
    assert_caught(
        &caught,
        1,
        &[
            FindingKind::StaleRead,
            FindingKind::WriteRace,
            FindingKind::Mismatch,
        ],
    );
}
