//! Grid barriers and flags expand into elected, epoch-stamped, bounded primitives.

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{MemorySpace, Ordering, Scope};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::*;

fn kernel_with_sync() -> LoweredKernel {
    let mut k = LoweredKernel::new("k", Arch::Gfx906, 2, 64, 4);
    let counter = k.param(
        "counter",
        ParamKind::Array {
            elem: Ty::U32,
            len: 1,
            space: MemorySpace::Global,
            access: Access::ReadWrite,
            purpose: Purpose::Counter,
        },
    );
    let flags = k.param(
        "flags",
        ParamKind::PeerArrays {
            elem: Ty::U32,
            len: 4,
            access: Access::ReadWrite,
            purpose: Purpose::Flags,
        },
    );
    let at = |p, i| MemRef {
        base: Base::Param(p),
        index: Expr::u32(i),
    };
    let peer = |r| MemRef {
        base: Base::Peer {
            param: flags,
            rank: Expr::u32(r),
        },
        index: Expr::Special(Special::WorkgroupId),
    };
    k.body = vec![
        Stmt::GridBarrier {
            counter: at(counter, 0),
            index: 0,
        },
        Stmt::PublishFlag {
            flag: peer(0),
            round: 0,
        },
        Stmt::WaitFlag {
            flag: peer(1),
            round: 0,
        },
        Stmt::GridBarrier {
            counter: at(counter, 0),
            index: 1,
        },
    ];
    k
}

fn flatten(block: &[Stmt], out: &mut Vec<Stmt>) {
    for s in block {
        out.push(s.clone());
        match s {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                flatten(then_body, out);
                flatten(else_body, out);
            }
            Stmt::For { body, .. } => flatten(body, out),
            _ => {}
        }
    }
}

#[test]
fn expansion_counts_barriers_and_adds_epoch_and_error_word() {
    let mut k = kernel_with_sync();
    expand_sync(&mut k);
    assert_eq!(k.barriers_per_launch, 2);
    assert_eq!(k.flag_rounds_per_launch, 1);
    assert_eq!(k.coresidency, Some(CoResidency { workgroups: 4 }));
    // The epoch lives on the device (§5.4): no host-passed scalar, a state array and a register.
    assert!(k.epoch.is_none() && k.error_word.is_some());
    let (state, epoch) = (k.epoch_state.unwrap(), k.epoch_reg.unwrap());
    let mut all = Vec::new();
    flatten(&k.body, &mut all);
    assert!(!all.iter().any(|s| matches!(
        s,
        Stmt::GridBarrier { .. } | Stmt::PublishFlag { .. } | Stmt::WaitFlag { .. }
    )));
    let text = k.to_string();
    // A kernel with flags has the epoch anyway, so its grid barriers (§5.4, weighted rounds of
    // Q = 4: 4 workgroups, every weight 1) arrive without a returned ticket and wait for the
    // round's end from the epoch: barrier i of 2 in launch e ends at ((e − 1)·2 + i + 1)·4.
    let arrivals = all
        .iter()
        .filter(|s| {
            matches!(s, Stmt::Atomic { dst: None, op: AtomicOp::Add, value: Some(v), ordering: Ordering::Release, .. } if *v == Expr::u32(1))
        })
        .count();
    assert_eq!(arrivals, 2, "{text}");
    for i in 1..=2 {
        assert!(
            text.contains(&format!(
                "wait_ge arg0[0u32], (((({epoch} - 1u32) * 2u32) + {i}u32) * 4u32) acquire agent"
            )),
            "{text}"
        );
    }
    // The flag value is (epoch − 1)·1 + 1, released at system scope by lane 0 only.
    assert!(
        text.contains(&format!(
            "atomic.store arg1@peer(0u32)[wg_id], ((({epoch} - 1u32) * 1u32) + 1u32) release system"
        )),
        "{text}"
    );
    // Every lane loads its workgroup's epoch word at entry; lane 0 advances it at exit.
    assert!(
        text.contains(&format!("{epoch} = load.x1 {state}[wg_id]")),
        "{text}"
    );
    assert!(
        text.contains(&format!("atomic.add {state}[wg_id], 1u32 relaxed agent")),
        "{text}"
    );
}

#[test]
fn arrivals_are_elected_and_bracketed_by_workgroup_barriers() {
    let mut k = kernel_with_sync();
    expand_sync(&mut k);
    // Top level: every atomic write and wait sits inside `if local_id == 0`, never at the top
    // level (every lane may load the device epoch).
    for s in &k.body {
        assert!(
            !matches!(
                s,
                Stmt::Atomic {
                    op: AtomicOp::Add | AtomicOp::Store | AtomicOp::Max,
                    ..
                } | Stmt::WaitGe { .. }
            ),
            "unelected sync: {s:?}"
        );
    }
    let mut all = Vec::new();
    flatten(&k.body, &mut all);
    // The grid barriers' arrivals (release); the exit arrival on the device epoch (acq_rel) and
    // the epoch's advance are checked by `expansion_counts_barriers_and_adds_epoch_and_error_word`.
    let arrivals: Vec<_> = all
        .iter()
        .filter(|s| {
            matches!(
                s,
                Stmt::Atomic {
                    op: AtomicOp::Add,
                    ordering: Ordering::Release,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(arrivals.len(), 2);
    for a in arrivals {
        let Stmt::Atomic {
            ordering,
            scope,
            why,
            ..
        } = a
        else {
            unreachable!()
        };
        assert_eq!(
            (*ordering, *scope, *why),
            (
                Ordering::Release,
                Scope::Agent,
                Invariant::OneArrivalPerWorkgroup
            )
        );
    }
    let waits: Vec<_> = all
        .iter()
        .filter_map(|s| match s {
            Stmt::WaitGe {
                ordering,
                scope,
                code,
                ..
            } => Some((*ordering, *scope, *code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        waits,
        [
            (Ordering::Acquire, Scope::Agent, 1),
            (Ordering::Acquire, Scope::System, 2),
            (Ordering::Acquire, Scope::Agent, 3),
        ]
    );
}

/// `WaitFlagPerLane`: lane p (below `lanes`, where `cond` holds) polls its own flag, all lanes in
/// one divergent `if`, then one workgroup barrier; the result validates, and the structured form
/// is refused in divergent control flow and with more lanes than a wave (§5.8).
#[test]
fn per_lane_flag_waits_poll_in_parallel_then_one_barrier() {
    use wavefuse_codegen::lowered::validate::validate;
    let mut k = kernel_with_sync();
    let flags = k.params.iter().find(|(_, d)| d.name == "flags").unwrap().0;
    let lane = Expr::Special(Special::LocalId);
    let wait = |lanes| Stmt::WaitFlagPerLane {
        flag: MemRef {
            base: Base::Peer {
                param: flags,
                rank: lane.clone(),
            },
            index: Expr::Special(Special::WorkgroupId),
        },
        lanes,
        cond: Expr::bin(BinOp::Ne, lane.clone(), Expr::u32(0)),
        round: 0,
    };
    k.body = vec![wait(2)];
    validate(&k).expect("structured form validates");
    let mut bad = k.clone();
    bad.body = vec![Stmt::If {
        cond: Expr::bin(BinOp::Lt, lane.clone(), Expr::u32(7)),
        then_body: vec![wait(2)],
        else_body: vec![],
    }];
    assert!(validate(&bad).is_err(), "a per-lane wait in divergent flow");
    bad.body = vec![wait(65)];
    assert!(validate(&bad).is_err(), "more lanes than a wave");
    expand_sync(&mut k);
    validate(&k).expect("expanded form validates");
    assert_eq!(k.flag_rounds_per_launch, 1);
    let text = k.to_string();
    assert!(
        text.contains("if ((local_id < 2u32) & (local_id != 0u32))")
            && text.contains("wait_ge arg1@peer(local_id)[wg_id]"),
        "{text}"
    );
    let mut all = Vec::new();
    flatten(&k.body, &mut all);
    let waits = all
        .iter()
        .filter(|s| {
            matches!(
                s,
                Stmt::WaitGe {
                    ordering: Ordering::Acquire,
                    scope: Scope::System,
                    ..
                }
            )
        })
        .count();
    let barriers = all
        .iter()
        .filter(|s| matches!(s, Stmt::WorkgroupBarrier))
        .count();
    // One barrier after the waits, one before the exit arrival on the device epoch.
    assert_eq!((waits, barriers), (1, 2), "{text}");
    // The wait sits directly in the divergent `if`, followed by the barrier at the top level.
    let pos = k
        .body
        .iter()
        .position(|s| matches!(s, Stmt::If { then_body, .. } if matches!(then_body.as_slice(), [Stmt::WaitGe { .. }])))
        .expect("the lane-guarded wait");
    assert!(
        k.body[pos + 1..]
            .iter()
            .find(|s| !matches!(s, Stmt::Comment(_)))
            .is_some_and(|s| matches!(s, Stmt::WorkgroupBarrier)),
        "{text}"
    );
}

/// Over a grid that is not a power of two, workgroup 0's arrival weighs Q − G + 1 (G = 3, Q = 4:
/// 2) so that each barrier's round still advances the counter by Q.
#[test]
fn grid_barrier_arrivals_are_weighted_to_a_power_of_two() {
    let mut k = barriers_only();
    k.grid = 3;
    expand_sync(&mut k);
    let text = k.to_string();
    assert!(
        text.contains("((wg_id == 0u32) ? 2u32 : 1u32) release agent"),
        "{text}"
    );
    assert!(
        text.contains("& 4294967292u32) + 4u32) acquire agent"),
        "{text}"
    );
}

/// The kernel's grid barriers without its flags.
fn barriers_only() -> LoweredKernel {
    let mut k = kernel_with_sync();
    k.body.retain(|s| matches!(s, Stmt::GridBarrier { .. }));
    k
}

/// Without flags a kernel has no epoch (§5.4): each workgroup's elected lane takes a ticket and
/// waits for the end of its round, the next multiple of Q = 4 after it (!3 = 4294967292); no
/// epoch state, no entry load.
#[test]
fn grid_barriers_without_flags_count_tickets_and_keep_no_epoch() {
    let mut k = barriers_only();
    expand_sync(&mut k);
    assert!(k.epoch_state.is_none() && k.epoch_reg.is_none() && k.epoch.is_none());
    let mut all = Vec::new();
    flatten(&k.body, &mut all);
    let text = k.to_string();
    let tickets: Vec<_> = all
        .iter()
        .filter_map(|s| match s {
            Stmt::Atomic {
                dst: Some(t),
                op: AtomicOp::Add,
                value: Some(v),
                ..
            } if *v == Expr::u32(1) => Some(*t),
            _ => None,
        })
        .collect();
    assert_eq!(tickets.len(), 2, "{text}");
    for t in tickets {
        assert!(
            text.contains(&format!(
                "wait_ge arg0[0u32], (({t} & 4294967292u32) + 4u32) acquire agent"
            )),
            "{text}"
        );
    }
}
