//! The simulator on tiny hand-built lowered kernels, one feature at a time: arithmetic and control
//! flow, f16 rounding, wave reductions, barriers and LDS, grid barriers over launches, scopes,
//! fences, bounded waits and the error word, deadlock and residency, races, bounds, typing.

mod sim_support;

use sim_support::*;
use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{Ordering, Scope};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::*;
use wavefuse_codegen::sim::*;

fn opts(seed: u64) -> SimOptions {
    SimOptions::new(seed)
}

fn run(k: &LoweredKernel, host: &mut RawHost, launches: u32, o: &SimOptions) -> RawReport {
    simulate_with_host(k, host, launches, o).expect("simulates")
}

fn kinds(rep: &RawReport) -> Vec<FindingKind> {
    rep.findings.iter().map(|f| f.kind).collect()
}

/// out[gid] = f(gid) with loops, ifs, selects, casts, bfe, fma and f16 rounding.
#[test]
fn arithmetic_control_flow_and_f16_rounding_match_a_host_computation() {
    let mut k = LoweredKernel::new("arith", Arch::Gfx906, 1, 64, 2);
    let out = array(&mut k, "out", Ty::F32, 128, Access::Write, Purpose::Scratch);
    let out16 = array(
        &mut k,
        "out16",
        Ty::F16,
        128,
        Access::Write,
        Purpose::Scratch,
    );
    let (gid, i, acc, h) = (
        k.reg(Ty::U32, "gid"),
        k.reg(Ty::U32, "i"),
        k.reg(Ty::F32, "acc"),
        k.reg(Ty::F16, "h"),
    );
    k.body = vec![
        assign(gid, add(mul(wg(), u(64)), lid())),
        assign(acc, f(0.0)),
        Stmt::For {
            var: i,
            start: u(0),
            end: bin(BinOp::Rem, r(gid), u(7)),
            step: u(1),
            body: vec![assign(
                acc,
                Expr::Fma(
                    Box::new(Expr::cast(Ty::F32, r(i))),
                    Box::new(f(0.5)),
                    Box::new(r(acc)),
                ),
            )],
        },
        Stmt::If {
            cond: eq(
                Expr::Bfe {
                    value: Box::new(r(gid)),
                    offset: Box::new(u(1)),
                    width: 2,
                },
                u(3),
            ),
            then_body: vec![assign(acc, Expr::Un(UnOp::Neg, Box::new(r(acc))))],
            else_body: vec![assign(
                acc,
                add(
                    r(acc),
                    Expr::Select(
                        Box::new(lt(r(gid), u(100))),
                        Box::new(f(1.0)),
                        Box::new(f(2.0)),
                    ),
                ),
            )],
        },
        store(at(out, r(gid)), r(acc)),
        // 1/3 in f16 is 0.333251953125; the f16 add rounds again.
        assign(
            h,
            add(
                Expr::cast(Ty::F16, Expr::bin(BinOp::Div, f(1.0), f(3.0))),
                Expr::cast(Ty::F16, Expr::cast(Ty::F32, r(gid))),
            ),
        ),
        store(at(out16, r(gid)), r(h)),
    ];
    let mut host = RawHost::default().output(out).output(out16);
    let rep = run(&k, &mut host, 1, &opts(1));
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    for g in 0..128u32 {
        let mut acc: f32 = (0..g % 7).map(|i| i as f32 * 0.5).sum();
        acc = if (g >> 1) & 3 == 3 {
            -acc
        } else {
            acc + if g < 100 { 1.0 } else { 2.0 }
        };
        assert_eq!(host.get(0, 0, out)[g as usize], f64::from(acc), "gid {g}");
        let third = half::f16::from_f32(1.0 / 3.0);
        let want = half::f16::from_f32(third.to_f32() + half::f16::from_f32(g as f32).to_f32());
        assert_eq!(host.get(0, 0, out16)[g as usize], want.to_f64(), "gid {g}");
    }
}

/// Wave sums and maxima reach every lane; sm90 has two waves of 32 in a workgroup of 64.
#[test]
fn wave_reductions_give_every_lane_the_result_sm90() {
    let mut k = LoweredKernel::new("reduce", Arch::Sm90, 1, 64, 1);
    let out = array(&mut k, "out", Ty::F32, 128, Access::Write, Purpose::Scratch);
    let (s, m) = (k.reg(Ty::F32, "s"), k.reg(Ty::U32, "m"));
    k.body = vec![
        Stmt::WaveReduce {
            dst: s,
            op: ReduceKind::Sum,
            value: Expr::cast(Ty::F32, lid()),
        },
        Stmt::WaveReduce {
            dst: m,
            op: ReduceKind::Max,
            value: bin(BinOp::Xor, lid(), u(5)),
        },
        store(at(out, lid()), r(s)),
        store(at(out, add(lid(), u(64))), Expr::cast(Ty::F32, r(m))),
    ];
    for g in [Granularity::Lane, Granularity::Wave] {
        let mut host = RawHost::default().output(out);
        let rep = run(
            &k,
            &mut host,
            1,
            &SimOptions {
                granularity: g,
                ..opts(3)
            },
        );
        assert!(rep.findings.is_empty(), "{:?}", rep.findings);
        let o = host.get(0, 0, out);
        for l in 0..64 {
            let (lo, hi) = if l < 32 { (0, 32) } else { (32, 64) };
            assert_eq!(o[l], (lo..hi).sum::<usize>() as f64);
            assert_eq!(o[64 + l], (lo..hi).map(|x| x ^ 5).max().unwrap() as f64);
        }
    }
}

/// lds[local] = local; barrier; read the neighbour's slot. Without the barrier the read races.
fn lds_neighbour(with_barrier: bool) -> (LoweredKernel, Param) {
    let mut k = LoweredKernel::new("lds", Arch::Gfx906, 1, 128, 2);
    let out = array(&mut k, "out", Ty::U32, 256, Access::Write, Purpose::Scratch);
    let l = k.lds(Ty::U32, 128);
    let v = k.reg(Ty::U32, "v");
    let mut body = vec![store(lds_at(l, lid()), add(lid(), mul(wg(), u(1000))))];
    if with_barrier {
        body.push(Stmt::WorkgroupBarrier);
    }
    body.push(load(
        v,
        lds_at(l, bin(BinOp::Rem, add(lid(), u(1)), u(128))),
    ));
    body.push(store(at(out, add(mul(wg(), u(128)), lid())), r(v)));
    k.body = body;
    (k, out)
}

#[test]
fn a_barrier_makes_lds_writes_visible_to_the_workgroup() {
    let (k, out) = lds_neighbour(true);
    for seed in 0..20 {
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 2, &opts(seed));
        assert!(rep.findings.is_empty(), "{:?}", rep.findings);
        let o = host.get(1, 0, out);
        assert!((0..256).all(|i| o[i] == ((i / 128) * 1000 + (i % 128 + 1) % 128) as f64));
    }
}

#[test]
fn invalid_lds_read_without_barrier_is_a_race_or_uninitialised() {
    let (k, out) = lds_neighbour(false);
    let mut host = RawHost::default().output(out);
    let rep = run(&k, &mut host, 1, &opts(0));
    let ks = kinds(&rep);
    assert!(
        ks.contains(&FindingKind::StaleRead) || ks.contains(&FindingKind::UninitRead),
        "{:?}",
        rep.findings
    );
}

/// lds[local] = local; barrier; v = lds[local + 1]; [barrier]; lds[local] = v: each lane
/// overwrites the slot its neighbour read. Without the second barrier the write may land before
/// the neighbour's read (which would then see the new value): a write after read, whichever
/// order the scheduler picks — the write is found racing the read, or the read stale.
fn lds_overwrite_after_read(with_barrier: bool) -> (LoweredKernel, Param) {
    let mut k = LoweredKernel::new("lds_war", Arch::Gfx906, 1, 64, 1);
    let out = array(&mut k, "out", Ty::U32, 64, Access::Write, Purpose::Scratch);
    let l = k.lds(Ty::U32, 64);
    let v = k.reg(Ty::U32, "v");
    let mut body = vec![
        store(lds_at(l, lid()), lid()),
        Stmt::WorkgroupBarrier,
        load(v, lds_at(l, bin(BinOp::Rem, add(lid(), u(1)), u(64)))),
    ];
    if with_barrier {
        body.push(Stmt::WorkgroupBarrier);
    }
    body.push(store(lds_at(l, lid()), add(r(v), u(100))));
    body.push(store(at(out, lid()), r(v)));
    k.body = body;
    (k, out)
}

#[test]
fn a_barrier_between_reads_and_overwrites_keeps_lds_reads_whole() {
    let (k, out) = lds_overwrite_after_read(true);
    for seed in 0..10 {
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 1, &opts(seed));
        assert!(rep.findings.is_empty(), "{:?}", rep.findings);
        let o = host.get(0, 0, out);
        assert!((0..64).all(|i| o[i] == ((i + 1) % 64) as f64), "{o:?}");
    }
}

/// Every seed reports the write after read (whether or not some lane also read a value written
/// too early, a stale read): the check is of happens-before, not of the values a lane happens
/// to read, so it does not depend on a lane lagging.
#[test]
fn invalid_lds_overwrite_after_read_without_barrier_is_a_race_on_every_schedule() {
    let (k, out) = lds_overwrite_after_read(false);
    for seed in 0..10 {
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 1, &opts(seed));
        assert!(
            rep.findings
                .iter()
                .any(|f| f.kind == FindingKind::WriteRace && f.message.contains("read by")),
            "seed {seed}: {:?}",
            rep.findings
        );
    }
}

/// The write-after-read check on a global data array (not only LDS): workgroup 0 reads a
/// scratch word that workgroup 1 overwrites with nothing ordering the two. Reported on every
/// seed, as a write racing the read (or, where the write came first, the read stale). With the
/// overwrite ordered after the read by a release→acquire chain (workgroup 0 releases a counter
/// after its read, workgroup 1 waits for it), clean.
fn scratch_overwrite_after_read(ordered: bool) -> (LoweredKernel, Param) {
    let mut k = LoweredKernel::new("global_war", Arch::Gfx906, 1, 64, 2);
    let scratch = array(
        &mut k,
        "scratch",
        Ty::U32,
        1,
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
    let out = array(&mut k, "out", Ty::U32, 1, Access::Write, Purpose::Scratch);
    let v = k.reg(Ty::U32, "v");
    let mut reader = vec![load(v, at(scratch, u(0))), store(at(out, u(0)), r(v))];
    let mut writer = vec![];
    if ordered {
        reader.push(atomic(
            AtomicOp::Add,
            at(counter, u(0)),
            Some(u(1)),
            Ordering::Release,
            Scope::Agent,
        ));
        writer.push(wait_ge(
            &mut k,
            at(counter, u(0)),
            u(1),
            Ordering::Acquire,
            Scope::Agent,
            1 << 20,
            1,
        ));
    }
    writer.push(store(at(scratch, u(0)), u(7)));
    k.body = vec![if_(
        eq(lid(), u(0)),
        vec![if_(eq(wg(), u(0)), reader), if_(eq(wg(), u(1)), writer)],
    )];
    (k, out)
}

#[test]
fn invalid_global_overwrite_after_read_is_a_race_and_ordered_is_clean() {
    for seed in 0..10 {
        let (k, out) = scratch_overwrite_after_read(false);
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 1, &opts(seed));
        let war = rep
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::WriteRace && f.message.contains("read by"));
        assert!(
            war || kinds(&rep).contains(&FindingKind::StaleRead),
            "seed {seed}: {:?}",
            rep.findings
        );
        let (k, out) = scratch_overwrite_after_read(true);
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 1, &opts(seed));
        assert!(rep.findings.is_empty(), "seed {seed}: {:?}", rep.findings);
    }
}

/// Each workgroup writes a partial, a grid barrier, then every workgroup sums all partials.
fn grid_sum(tp: u32) -> (LoweredKernel, Param, Param) {
    grid_sum_of(tp, 4)
}

/// [`grid_sum`] over a grid of `grid` workgroups.
fn grid_sum_of(tp: u32, grid: u32) -> (LoweredKernel, Param, Param) {
    let n = grid as usize;
    let mut k = LoweredKernel::new("grid_sum", Arch::Gfx906, tp, 64, grid);
    let x = array(&mut k, "x", Ty::F32, n, Access::Read, Purpose::Scratch);
    let part = array(
        &mut k,
        "part",
        Ty::F32,
        n,
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
    let out = array(&mut k, "out", Ty::F32, n, Access::Write, Purpose::Scratch);
    let (v, s, i) = (
        k.reg(Ty::F32, "v"),
        k.reg(Ty::F32, "s"),
        k.reg(Ty::U32, "i"),
    );
    k.body = vec![
        if_(
            eq(lid(), u(0)),
            vec![
                load(v, at(x, wg())),
                store(at(part, wg()), mul(r(v), f(2.0))),
            ],
        ),
        Stmt::GridBarrier {
            counter: at(counter, u(0)),
            index: 0,
        },
        assign(s, f(0.0)),
        Stmt::For {
            var: i,
            start: u(0),
            end: Expr::Special(Special::NumWorkgroups),
            step: u(1),
            body: vec![load(v, at(part, r(i))), assign(s, add(r(s), r(v)))],
        },
        Stmt::GridBarrier {
            counter: at(counter, u(0)),
            index: 1,
        },
        if_(eq(lid(), u(0)), vec![store(at(out, wg()), r(s))]),
    ];
    expand_sync(&mut k);
    (k, x, out)
}

#[test]
fn grid_barriers_with_epochs_hold_over_back_to_back_launches() {
    let (k, x, out) = grid_sum(2);
    for seed in 0..30 {
        let o = SimOptions::sweep(7, seed);
        let mut host = RawHost::default()
            .fill(x, |l, r, i| (l * 100 + r * 10 + i as u32) as f64)
            .output(out);
        let rep = run(&k, &mut host, 4, &o);
        assert!(rep.findings.is_empty(), "seed {seed}: {:?}", rep.findings);
        assert_eq!(rep.stats.launches_completed, 8);
        for l in 0..4 {
            for r in 0..2 {
                let want = 2.0 * (0..4).map(|i| (l * 100 + r * 10 + i) as f64).sum::<f64>();
                assert!(
                    host.get(l, r, out).iter().all(|&v| v == want),
                    "launch {l} rank {r}"
                );
            }
        }
    }
}

/// By default the simulator starts only the workgroups the target holds at once (here LDS bounds
/// gfx906 to one 40 KB workgroup per CU, 60 in all) and the next as one finishes: a grid barrier
/// over 61 workgroups never completes, as on an MI50, while the same kernel with room for all of
/// them does.
#[test]
fn the_default_residency_is_the_devices_capacity() {
    for (lds_floats, completes) in [(0, true), (10 * 1024, false)] {
        let (mut k, x, out) = grid_sum_of(1, 61);
        if lds_floats > 0 {
            k.lds(Ty::F32, lds_floats);
        }
        assert_eq!(
            k.device_capacity(wavefuse_codegen::lowered::Occupancy::HardwareMax) >= 61,
            completes
        );
        let mut host = RawHost::default().fill(x, |_, _, i| i as f64).output(out);
        let rep = run(&k, &mut host, 1, &opts(0));
        if completes {
            assert!(rep.findings.is_empty(), "{:?}", rep.findings);
            let want = 2.0 * (0..61).map(f64::from).sum::<f64>();
            assert!(host.get(0, 0, out).iter().all(|&v| v == want));
        } else {
            assert!(rep.has(FindingKind::Deadlock), "{:?}", rep.findings);
        }
    }
}

#[test]
fn invalid_grid_barrier_without_co_residency_deadlocks() {
    let (k, x, out) = grid_sum(1);
    let mut host = RawHost::default().fill(x, |_, _, i| i as f64).output(out);
    let o = SimOptions {
        resident_workgroups: Some(2),
        ..opts(0)
    };
    let rep = run(&k, &mut host, 1, &o);
    assert!(
        rep.has(FindingKind::Deadlock)
            && rep.has(FindingKind::Timeout)
            && rep.has(FindingKind::ErrorWord),
        "{:?}",
        rep.findings
    );
    let text = rep
        .findings
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("wait_ge") && text.contains("barrier timeout in kernel grid_sum, epoch 1"),
        "{text}"
    );
}

/// Workgroup 0 writes data and releases a flag at `rel` scope; workgroup 1 of the same rank (or
/// rank 1 for system scope) acquires at `acq` scope and reads.
fn message(
    rel: Scope,
    acq: Scope,
    fence: bool,
    release: bool,
    acquire: bool,
    tp: u32,
) -> (LoweredKernel, Param) {
    let mut k = LoweredKernel::new("message", Arch::Gfx906, tp, 64, 2);
    let d = peers(&mut k, "data", Ty::F32, 64, Purpose::Scratch);
    let flag = peers(&mut k, "flag", Ty::U32, 1, Purpose::Flags);
    let out = array(&mut k, "out", Ty::F32, 64, Access::Write, Purpose::Scratch);
    let rank = rank_param(&mut k);
    let v = k.reg(Ty::F32, "v");
    let (st_ord, ld_ord) = (
        if release && !fence {
            Ordering::Release
        } else {
            Ordering::Relaxed
        },
        if acquire && !fence {
            Ordering::Acquire
        } else {
            Ordering::Relaxed
        },
    );
    // Producer: rank 0 wg 0. Consumer: wg 1 of the last rank.
    let producer = bin(BinOp::And, eq(Expr::Param(rank), u(0)), eq(wg(), u(0)));
    let consumer = bin(BinOp::And, eq(Expr::Param(rank), u(tp - 1)), eq(wg(), u(1)));
    let mut produce = vec![
        store(
            peer(d, u(0), lid()),
            add(Expr::cast(Ty::F32, lid()), f(0.5)),
        ),
        Stmt::WorkgroupBarrier,
    ];
    let mut elected = vec![];
    if fence && release {
        elected.push(Stmt::Fence {
            ordering: Ordering::Release,
            scope: rel,
            why: Invariant::PeerFlagHandshake,
        });
    }
    elected.push(atomic(
        AtomicOp::Store,
        peer(flag, u(0), u(0)),
        Some(u(1)),
        st_ord,
        rel,
    ));
    produce.push(if_(eq(lid(), u(0)), elected));
    let mut waiter = vec![wait_ge(
        &mut k,
        peer(flag, u(0), u(0)),
        u(1),
        ld_ord,
        acq,
        u32::MAX,
        9,
    )];
    if fence && acquire {
        waiter.push(Stmt::Fence {
            ordering: Ordering::Acquire,
            scope: acq,
            why: Invariant::PeerFlagHandshake,
        });
    }
    let consume = vec![
        if_(eq(lid(), u(0)), waiter),
        Stmt::WorkgroupBarrier,
        load(v, peer(d, u(0), lid())),
        store(at(out, lid()), r(v)),
    ];
    // Every workgroup takes part in both barriers so they stay uniform.
    k.body = vec![
        Stmt::If {
            cond: producer,
            then_body: produce,
            else_body: vec![],
        },
        Stmt::If {
            cond: consumer,
            then_body: consume,
            else_body: vec![],
        },
    ];
    (k, out)
}

fn message_findings(k: &LoweredKernel, out: Param, seeds: u64) -> Vec<FindingKind> {
    let mut all = Vec::new();
    for seed in 0..seeds {
        let mut host = RawHost::default().output(out);
        all.extend(kinds(&run(k, &mut host, 1, &SimOptions::sweep(11, seed))));
    }
    all.sort();
    all.dedup();
    all
}

#[test]
fn release_acquire_at_agent_scope_carries_data_between_workgroups() {
    let (k, out) = message(Scope::Agent, Scope::Agent, false, true, true, 1);
    assert_eq!(message_findings(&k, out, 20), []);
}

#[test]
fn release_and_acquire_fences_around_relaxed_atomics_carry_data() {
    let (k, out) = message(Scope::Agent, Scope::Agent, true, true, true, 1);
    assert_eq!(message_findings(&k, out, 20), []);
}

#[test]
fn system_scope_carries_data_between_ranks() {
    let (k, out) = message(Scope::System, Scope::System, false, true, true, 2);
    assert_eq!(message_findings(&k, out, 20), []);
}

#[test]
fn invalid_missing_release_is_a_stale_read() {
    let (k, out) = message(Scope::Agent, Scope::Agent, false, false, true, 1);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
}

#[test]
fn invalid_missing_acquire_is_a_stale_read() {
    let (k, out) = message(Scope::Agent, Scope::Agent, false, true, false, 1);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
    let (k, out) = message(Scope::Agent, Scope::Agent, true, true, false, 1);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
}

#[test]
fn invalid_workgroup_scope_does_not_reach_another_workgroup() {
    let (k, out) = message(Scope::Workgroup, Scope::Agent, false, true, true, 1);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
    let (k, out) = message(Scope::Agent, Scope::Workgroup, false, true, true, 1);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
}

#[test]
fn invalid_agent_scope_does_not_reach_another_rank() {
    let (k, out) = message(Scope::Agent, Scope::System, false, true, true, 2);
    assert_eq!(message_findings(&k, out, 5), [FindingKind::StaleRead]);
}

#[test]
fn invalid_wait_that_is_never_satisfied_deadlocks_times_out_and_sets_the_error_word() {
    let mut k = LoweredKernel::new("hang", Arch::Gfx906, 1, 64, 1);
    let flag = array(
        &mut k,
        "flag",
        Ty::U32,
        1,
        Access::ReadWrite,
        Purpose::Flags,
    );
    let w = wait_ge(
        &mut k,
        at(flag, u(0)),
        u(1),
        Ordering::Acquire,
        Scope::Agent,
        1000,
        42,
    );
    k.body = vec![if_(eq(lid(), u(0)), vec![w]), Stmt::WorkgroupBarrier];
    let mut host = RawHost::default();
    let rep = run(&k, &mut host, 2, &opts(0));
    assert_eq!(
        kinds(&rep),
        [
            FindingKind::Deadlock,
            FindingKind::Timeout,
            FindingKind::ErrorWord
        ],
        "{:?}",
        rep.findings
    );
    assert_eq!(
        rep.stats.launches_completed, 2,
        "a timed-out wait continues, as on the device"
    );
    let text = rep.findings[0].to_string();
    assert!(
        text.contains("lane 0 at pc")
            && text.contains("(holds 0, needs 1)")
            && text.contains("lanes 1-63 at pc"),
        "{text}"
    );
}

#[test]
fn invalid_small_spin_budget_times_out_while_the_producer_is_slow() {
    // The producer (workgroup 1) does 200 LDS stores before releasing; a budget of 5 loads per
    // wait runs out first.
    let mut k = LoweredKernel::new("slow", Arch::Gfx906, 1, 64, 2);
    let flag = array(
        &mut k,
        "flag",
        Ty::U32,
        1,
        Access::ReadWrite,
        Purpose::Flags,
    );
    let l = k.lds(Ty::U32, 64);
    let i = k.reg(Ty::U32, "i");
    let w = wait_ge(
        &mut k,
        at(flag, u(0)),
        u(1),
        Ordering::Acquire,
        Scope::Agent,
        5,
        7,
    );
    let slow = Stmt::For {
        var: i,
        start: u(0),
        end: u(200),
        step: u(1),
        body: vec![store(lds_at(l, lid()), r(i))],
    };
    let release = atomic(
        AtomicOp::Store,
        at(flag, u(0)),
        Some(u(1)),
        Ordering::Release,
        Scope::Agent,
    );
    k.body = vec![Stmt::If {
        cond: eq(wg(), u(0)),
        then_body: vec![if_(eq(lid(), u(0)), vec![w])],
        else_body: vec![slow, if_(eq(lid(), u(0)), vec![release])],
    }];
    let rep = run(
        &k,
        &mut RawHost::default(),
        1,
        &SimOptions {
            skew: Skew::NONE,
            ..opts(0)
        },
    );
    assert_eq!(
        kinds(&rep),
        [FindingKind::Timeout, FindingKind::ErrorWord],
        "{:?}",
        rep.findings
    );
}

#[test]
fn invalid_plain_writes_from_two_workgroups_race() {
    let mut k = LoweredKernel::new("ww", Arch::Gfx906, 1, 64, 2);
    let out = array(&mut k, "out", Ty::U32, 1, Access::Write, Purpose::Scratch);
    k.body = vec![if_(eq(lid(), u(0)), vec![store(at(out, u(0)), wg())])];
    let rep = run(&k, &mut RawHost::default(), 1, &opts(0));
    assert_eq!(kinds(&rep), [FindingKind::WriteRace]);
    assert!(
        rep.findings[0]
            .message
            .contains("not ordered before this write")
    );
}

#[test]
fn invalid_out_of_bounds_and_peer_rank_outside_the_group() {
    let mut k = LoweredKernel::new("oob", Arch::Gfx906, 2, 64, 1);
    let out = array(&mut k, "out", Ty::U32, 64, Access::Write, Purpose::Scratch);
    k.body = vec![Stmt::Store {
        mem: at(out, add(lid(), u(1))),
        values: vec![u(1)],
    }];
    let rep = run(&k, &mut RawHost::default(), 1, &opts(0));
    assert_eq!(kinds(&rep), [FindingKind::OutOfBounds]);
    assert!(rep.findings[0].message.contains("lane 63: pc 0 `store.x1 arg0[(local_id + 1u32)], 1u32`: elements 64..65 of arg0 `out` of rank 0, which has 64"), "{}", rep.findings[0]);
    let mut k = LoweredKernel::new("oob_peer", Arch::Gfx906, 2, 64, 1);
    let p = peers(&mut k, "p", Ty::U32, 64, Purpose::Scratch);
    k.body = vec![store(peer(p, u(2), lid()), u(1))];
    let rep = run(&k, &mut RawHost::default(), 1, &opts(0));
    assert_eq!(kinds(&rep), [FindingKind::OutOfBounds]);
}

#[test]
fn invalid_rmw_on_peer_memory_is_reported() {
    let mut k = LoweredKernel::new("peer_rmw", Arch::Gfx906, 2, 64, 1);
    let p = peers(&mut k, "p", Ty::U32, 1, Purpose::Counter);
    let rank = rank_param(&mut k);
    let other = bin(BinOp::Sub, u(1), Expr::Param(rank));
    k.body = vec![if_(
        eq(lid(), u(0)),
        vec![atomic(
            AtomicOp::Add,
            peer(p, other, u(0)),
            Some(u(1)),
            Ordering::Relaxed,
            Scope::System,
        )],
    )];
    let rep = run(&k, &mut RawHost::default(), 1, &opts(0));
    assert_eq!(kinds(&rep), [FindingKind::PeerRmw]);
}

#[test]
fn invalid_ill_typed_and_unexpanded_kernels_are_rejected() {
    let mut k = LoweredKernel::new("bad", Arch::Gfx906, 1, 64, 1);
    let out = array(&mut k, "out", Ty::F16, 64, Access::Write, Purpose::Scratch);
    let counter = array(&mut k, "c", Ty::U32, 1, Access::ReadWrite, Purpose::Counter);
    k.body = vec![store(at(out, lid()), f(1.0))];
    let err = simulate_with_host(&k, &mut RawHost::default(), 1, &opts(0)).unwrap_err();
    assert!(
        matches!(&err, SimError::Type { what, .. } if what == "stores f32 into f16 memory"),
        "{err}"
    );
    k.body = vec![Stmt::GridBarrier {
        counter: at(counter, u(0)),
        index: 0,
    }];
    let err = simulate_with_host(&k, &mut RawHost::default(), 1, &opts(0)).unwrap_err();
    assert!(matches!(err, SimError::NotExpanded(_)), "{err}");
}

#[test]
fn a_seed_determines_the_schedule() {
    let (k, out) = message(Scope::Agent, Scope::Agent, false, false, true, 1);
    let once = |seed| {
        let mut host = RawHost::default().output(out);
        let rep = run(&k, &mut host, 1, &SimOptions::sweep(5, seed));
        (rep.findings, rep.stats, host.captured)
    };
    for seed in 0..4 {
        assert_eq!(once(seed), once(seed));
    }
}

/// The simulator's budgets are limits of the simulator, never findings: a run stopped at its step
/// budget reports no finding and says it stopped ([`RunStats::step_limit`]); a run over the
/// memory budget is refused before anything is allocated ([`SimError::TooLarge`]). A real
/// deadlock of a small kernel is still a finding (`the_default_residency_is_the_devices_capacity`).
#[test]
fn a_budget_of_the_simulator_is_not_a_finding() {
    let (k, x, out) = grid_sum(2);
    let host = || RawHost::default().fill(x, |_, _, i| i as f64).output(out);
    let rep = run(&k, &mut host(), 2, &opts(1));
    assert!(rep.findings.is_empty() && !rep.stats.step_limit, "{rep:?}");
    // Stopped halfway between the lower bound checked up front (a step per lane and launch:
    // 2 ranks x 4 workgroups x 64 lanes x 2 launches) and what the run takes.
    let (bound, steps) = (1024, rep.stats.steps);
    assert!(steps > bound + 1, "{steps}");
    let mut o = opts(1);
    o.max_steps = (bound + steps) / 2;
    let rep = run(&k, &mut host(), 2, &o);
    assert!(rep.findings.is_empty(), "{:?}", rep.findings);
    assert!(
        rep.stats.step_limit && rep.stats.steps == o.max_steps,
        "{:?}",
        rep.stats
    );
    let mut o = opts(1);
    o.memory_budget = 1024;
    let needs = footprint(&k, 8);
    assert!(needs > 1024, "{needs}");
    match simulate_with_host(&k, &mut host(), 2, &o) {
        Err(SimError::TooLarge(Limit::Memory { needs, budget })) => {
            assert!(needs > budget && budget == 1024)
        }
        other => panic!("{other:?}"),
    }
    // At least one step per lane and launch: 2 ranks x 4 workgroups x 64 lanes x 2 launches.
    let mut o = opts(1);
    o.max_steps = 1000;
    assert_eq!(
        fits(&k, 2, &o),
        Err(SimError::TooLarge(Limit::Steps {
            needs: 1024,
            budget: 1000
        }))
    );
}
