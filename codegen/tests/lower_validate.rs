//! The lowered validator: one `invalid_*` test per rule, on hand-built kernels, plus kernels it
//! must accept.

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{MemorySpace, Ordering, Scope};
use wavefuse_codegen::lowered::expand::expand_sync;
use wavefuse_codegen::lowered::validate::{LoweredError, StmtError, TypeError, ty, validate};
use wavefuse_codegen::lowered::*;

fn array(
    k: &mut LoweredKernel,
    name: &str,
    elem: Ty,
    len: usize,
    access: Access,
    purpose: Purpose,
) -> Param {
    k.param(
        name,
        ParamKind::Array {
            elem,
            len,
            space: MemorySpace::Global,
            access,
            purpose,
        },
    )
}

fn data(name: &str) -> Purpose {
    Purpose::Data {
        buffer: name.into(),
        part: "data",
    }
}

fn at(p: Param, index: Expr) -> MemRef {
    MemRef {
        base: Base::Param(p),
        index,
    }
}

fn local_id() -> Expr {
    Expr::Special(Special::LocalId)
}

fn lt(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Lt, a, b)
}

fn lane0() -> Expr {
    Expr::bin(BinOp::Eq, local_id(), Expr::u32(0))
}

fn when(cond: Expr, then_body: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond,
        then_body,
        else_body: vec![],
    }
}

/// A kernel with an f32 output, a counter and peer flags, and an empty body.
struct Fixture {
    k: LoweredKernel,
    out: Param,
    input: Param,
    counter: Param,
    flags: Param,
    scratch: Param,
}

fn fixture() -> Fixture {
    let mut k = LoweredKernel::new("k", Arch::Gfx906, 2, 256, 4);
    let input = array(&mut k, "x", Ty::F32, 256, Access::Read, data("x"));
    let out = array(&mut k, "y", Ty::F32, 256, Access::Write, data("y"));
    let counter = array(
        &mut k,
        "counter",
        Ty::U32,
        1,
        Access::ReadWrite,
        Purpose::Counter,
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
    let scratch = k.param(
        "scratch",
        ParamKind::PeerArrays {
            elem: Ty::F32,
            len: 256,
            access: Access::ReadWrite,
            purpose: Purpose::Scratch,
        },
    );
    Fixture {
        k,
        out,
        input,
        counter,
        flags,
        scratch,
    }
}

fn stmt_error(k: &LoweredKernel) -> (String, StmtError) {
    match validate(k) {
        Err(LoweredError::Stmt { path, source }) => (path.to_string(), source),
        other => panic!("expected a statement error, got {other:?}\n{k}"),
    }
}

#[test]
fn valid_expanded_kernel_is_accepted() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    let peer = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(1),
        },
        index: Expr::Special(Special::WorkgroupId),
    };
    let own = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(0),
        },
        index: Expr::Special(Special::WorkgroupId),
    };
    f.k.body = vec![
        Stmt::Load {
            dst: vec![x],
            mem: at(f.input, local_id()),
        },
        Stmt::Store {
            mem: at(f.out, local_id()),
            values: vec![Expr::Reg(x)],
        },
        Stmt::GridBarrier {
            counter: at(f.counter, Expr::u32(0)),
            index: 0,
        },
        Stmt::PublishFlag {
            flag: own,
            round: 0,
        },
        // A barrier under a uniform condition (a parameter) is fine.
        when(
            Expr::bin(BinOp::Ne, Expr::Special(Special::WorkgroupId), Expr::u32(1)),
            vec![Stmt::WaitFlag {
                flag: peer,
                round: 0,
            }],
        ),
        // A wave reduction under a wave-uniform condition is fine.
        when(
            Expr::bin(BinOp::Eq, Expr::Special(Special::WaveId), Expr::u32(0)),
            vec![Stmt::WaveReduce {
                dst: x,
                op: ReduceKind::Sum,
                value: Expr::Reg(x),
            }],
        ),
    ];
    validate(&f.k).unwrap_or_else(|e| panic!("{e}\n{}", f.k));
    expand_sync(&mut f.k);
    validate(&f.k).unwrap_or_else(|e| panic!("{e}\n{}", f.k));
}

#[test]
fn invalid_register_type() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    f.k.body = vec![Stmt::Assign {
        dst: x,
        value: Expr::u32(1),
    }];
    let (path, e) = stmt_error(&f.k);
    assert_eq!(path, "body[0]");
    assert!(
        matches!(
            e,
            StmtError::Mismatch {
                what: "assigned value",
                expected: "f32",
                found: "u32"
            }
        ),
        "{e}"
    );
}

#[test]
fn invalid_expression_type() {
    let f = fixture();
    let e = Expr::bin(BinOp::Add, Expr::u32(1), Expr::f32(1.0));
    assert!(matches!(
        ty(&e, &f.k),
        Err(TypeError::Binary { op: BinOp::Add, .. })
    ));
    let fma = Expr::Fma(
        Box::new(Expr::f32(1.0)),
        Box::new(Expr::Float(1.0, Ty::F16)),
        Box::new(Expr::f32(0.0)),
    );
    assert!(matches!(
        ty(&fma, &f.k),
        Err(TypeError::Operand { what: "fma b", .. })
    ));
    let bfe = Expr::Bfe {
        value: Box::new(Expr::u32(7)),
        offset: Box::new(Expr::u32(4)),
        width: 4,
    };
    assert_eq!(ty(&bfe, &f.k), Ok(Ty::U32));
}

#[test]
fn invalid_loaded_register_type() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F16, "x");
    f.k.body = vec![Stmt::Load {
        dst: vec![x],
        mem: at(f.input, Expr::u32(0)),
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::Mismatch {
            what: "loaded register",
            ..
        }
    ));
}

#[test]
fn invalid_barrier_in_divergent_if() {
    let mut f = fixture();
    f.k.body = vec![
        Stmt::Comment("tail".into()),
        when(lt(local_id(), Expr::u32(100)), vec![Stmt::WorkgroupBarrier]),
    ];
    let (path, e) = stmt_error(&f.k);
    assert_eq!(path, "body[1].then[0]");
    assert!(
        matches!(
            e,
            StmtError::DivergentBarrier {
                what: "workgroup barrier"
            }
        ),
        "{e}"
    );
}

#[test]
fn invalid_barrier_under_register_derived_from_local_id() {
    let mut f = fixture();
    let (col, ok) = (f.k.reg(Ty::U32, "col"), f.k.reg(Ty::Bool, "ok"));
    f.k.body = vec![
        Stmt::Assign {
            dst: col,
            value: Expr::add(Expr::Special(Special::WorkgroupId), local_id()),
        },
        Stmt::Assign {
            dst: ok,
            value: lt(Expr::Reg(col), Expr::u32(1000)),
        },
        when(
            Expr::Reg(ok),
            vec![Stmt::GridBarrier {
                counter: at(f.counter, Expr::u32(0)),
                index: 0,
            }],
        ),
    ];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::DivergentBarrier {
            what: "grid barrier"
        }
    ));
}

#[test]
fn invalid_register_divergent_by_control_dependence() {
    // `u` is assigned a constant, but only by some lanes: it is divergent.
    let mut f = fixture();
    let u = f.k.reg(Ty::U32, "u");
    f.k.body = vec![
        Stmt::Assign {
            dst: u,
            value: Expr::u32(0),
        },
        when(
            lt(local_id(), Expr::u32(3)),
            vec![Stmt::Assign {
                dst: u,
                value: Expr::u32(1),
            }],
        ),
        when(
            Expr::bin(BinOp::Eq, Expr::Reg(u), Expr::u32(0)),
            vec![Stmt::WorkgroupBarrier],
        ),
    ];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::DivergentBarrier { .. }
    ));
}

#[test]
fn invalid_flag_wait_in_divergent_loop() {
    let mut f = fixture();
    let i = f.k.reg(Ty::U32, "i");
    let flag = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(1),
        },
        index: Expr::u32(0),
    };
    f.k.body = vec![Stmt::For {
        var: i,
        start: local_id(),
        end: Expr::u32(4),
        step: Expr::u32(256),
        body: vec![Stmt::WaitFlag { flag, round: 0 }],
    }];
    let (path, e) = stmt_error(&f.k);
    assert_eq!(path, "body[0].loop[0]");
    assert!(matches!(
        e,
        StmtError::DivergentBarrier { what: "flag wait" }
    ));
}

#[test]
fn invalid_flag_publish_in_divergent_if() {
    let mut f = fixture();
    let flag = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(0),
        },
        index: Expr::u32(0),
    };
    f.k.body = vec![when(lane0(), vec![Stmt::PublishFlag { flag, round: 0 }])];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::DivergentBarrier {
            what: "flag publish"
        }
    ));
}

#[test]
fn invalid_wave_reduce_in_divergent_if() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    f.k.body = vec![when(
        lt(Expr::Special(Special::LaneId), Expr::u32(16)),
        vec![Stmt::WaveReduce {
            dst: x,
            op: ReduceKind::Sum,
            value: Expr::f32(1.0),
        }],
    )];
    assert_eq!(stmt_error(&f.k).1, StmtError::DivergentWaveReduce);
}

#[test]
fn invalid_rmw_atomic_on_peer_memory() {
    let mut f = fixture();
    let mem = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(1),
        },
        index: Expr::u32(0),
    };
    f.k.body = vec![when(
        lane0(),
        vec![Stmt::Atomic {
            dst: None,
            op: AtomicOp::Add,
            mem,
            value: Some(Expr::u32(1)),
            ordering: Ordering::Release,
            scope: Scope::System,
            why: Invariant::PeerFlagHandshake,
        }],
    )];
    assert_eq!(stmt_error(&f.k).1, StmtError::PeerRmw(AtomicOp::Add));
}

fn arrival(counter: Param) -> Stmt {
    Stmt::Atomic {
        dst: None,
        op: AtomicOp::Add,
        mem: at(counter, Expr::u32(0)),
        value: Some(Expr::u32(1)),
        ordering: Ordering::Release,
        scope: Scope::Agent,
        why: Invariant::OneArrivalPerWorkgroup,
    }
}

#[test]
fn invalid_counter_arrival_by_every_lane() {
    let mut f = fixture();
    f.k.body = vec![Stmt::WorkgroupBarrier, arrival(f.counter)];
    assert!(
        matches!(stmt_error(&f.k).1, StmtError::UnelectedArrival { why, .. } if why.contains("local_id == 0"))
    );
}

#[test]
fn invalid_counter_arrival_without_workgroup_barrier() {
    let mut f = fixture();
    f.k.body = vec![when(lane0(), vec![arrival(f.counter)])];
    assert!(
        matches!(stmt_error(&f.k).1, StmtError::UnelectedArrival { why, .. } if why.contains("barrier"))
    );
}

#[test]
fn invalid_counter_arrival_in_loop() {
    let mut f = fixture();
    let i = f.k.reg(Ty::U32, "i");
    let body = vec![
        Stmt::WorkgroupBarrier,
        when(lane0(), vec![arrival(f.counter)]),
    ];
    f.k.body = vec![Stmt::For {
        var: i,
        start: Expr::u32(0),
        end: Expr::u32(2),
        step: Expr::u32(1),
        body,
    }];
    assert!(
        matches!(stmt_error(&f.k).1, StmtError::UnelectedArrival { why, .. } if why.contains("loop"))
    );
}

#[test]
fn valid_elected_counter_arrival() {
    let mut f = fixture();
    f.k.body = vec![
        Stmt::WorkgroupBarrier,
        Stmt::Comment("arrive".into()),
        when(lane0(), vec![arrival(f.counter)]),
    ];
    validate(&f.k).unwrap();
}

#[test]
fn invalid_counter_reset() {
    let mut f = fixture();
    f.k.body = vec![when(
        lane0(),
        vec![Stmt::Store {
            mem: at(f.counter, Expr::u32(0)),
            values: vec![Expr::u32(0)],
        }],
    )];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::CounterWrite {
            what: "plain store",
            ..
        }
    ));
}

#[test]
fn invalid_plain_flag_store() {
    let mut f = fixture();
    let mem = MemRef {
        base: Base::Peer {
            param: f.flags,
            rank: Expr::u32(0),
        },
        index: Expr::u32(0),
    };
    f.k.body = vec![Stmt::Store {
        mem,
        values: vec![Expr::u32(1)],
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::PlainFlagAccess { what: "store", .. }
    ));
}

#[test]
fn invalid_unbounded_wait() {
    let mut f = fixture();
    let error = at(f.k.error_param(), Expr::u32(0));
    f.k.body = vec![when(
        lane0(),
        vec![Stmt::WaitGe {
            mem: at(f.counter, Expr::u32(0)),
            target: Expr::u32(4),
            ordering: Ordering::Acquire,
            scope: Scope::Agent,
            budget: 0,
            error,
            code: 1,
            why: Invariant::BoundedSpin,
        }],
    )];
    assert_eq!(stmt_error(&f.k).1, StmtError::ZeroBudget);
}

#[test]
fn invalid_lds_parameter() {
    let mut f = fixture();
    let p = f.k.param(
        "shared",
        ParamKind::Array {
            elem: Ty::F32,
            len: 64,
            space: MemorySpace::Lds,
            access: Access::ReadWrite,
            purpose: Purpose::Scratch,
        },
    );
    assert!(matches!(validate(&f.k), Err(LoweredError::Param { param, .. }) if param == p));
}

#[test]
fn invalid_lds_over_the_workgroup_limit() {
    let mut f = fixture();
    f.k.lds(Ty::F32, 16 * 1024 + 1);
    assert!(matches!(
        validate(&f.k),
        Err(LoweredError::LdsTooLarge {
            bytes: 65540,
            max: 65536,
            ..
        })
    ));
    let mut ok = fixture();
    ok.k.lds(Ty::F32, 16 * 1024);
    validate(&ok.k).unwrap();
}

#[test]
fn invalid_constant_index_out_of_bounds() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    let l = f.k.lds(Ty::F32, 8);
    f.k.body = vec![Stmt::Load {
        dst: vec![x],
        mem: MemRef {
            base: Base::Lds(l),
            index: Expr::add(Expr::u32(4), Expr::u32(4)),
        },
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::OutOfBounds {
            index: 8,
            width: 1,
            len: 8,
            ..
        }
    ));
}

#[test]
fn invalid_vector_load_past_the_end() {
    let mut f = fixture();
    let regs: Vec<Reg> = (0..4).map(|_| f.k.reg(Ty::F32, "x")).collect();
    f.k.body = vec![Stmt::Load {
        dst: regs.clone(),
        mem: at(f.input, Expr::u32(253)),
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::OutOfBounds {
            index: 253,
            width: 4,
            len: 256,
            ..
        }
    ));
    let wide: Vec<Reg> = (0..257).map(|_| f.k.reg(Ty::F32, "x")).collect();
    f.k.body = vec![Stmt::Load {
        dst: wide,
        mem: at(f.input, local_id()),
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::BadWidth {
            width: 257,
            len: 256,
            ..
        }
    ));
}

#[test]
fn invalid_peer_rank_outside_the_group() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    let mem = MemRef {
        base: Base::Peer {
            param: f.scratch,
            rank: Expr::u32(2),
        },
        index: Expr::u32(0),
    };
    f.k.body = vec![Stmt::Load { dst: vec![x], mem }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::PeerRank { rank: 2, tp: 2 }
    ));
}

#[test]
fn invalid_write_to_input_and_read_of_output() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    f.k.body = vec![Stmt::Store {
        mem: at(f.input, local_id()),
        values: vec![Expr::f32(0.0)],
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::Access {
            what: "write to",
            access: Access::Read,
            ..
        }
    ));
    f.k.body = vec![Stmt::Load {
        dst: vec![x],
        mem: at(f.out, local_id()),
    }];
    assert!(matches!(
        stmt_error(&f.k).1,
        StmtError::Access {
            what: "load from",
            access: Access::Write,
            ..
        }
    ));
}

#[test]
fn invalid_peer_arrays_addressed_without_rank() {
    let mut f = fixture();
    let x = f.k.reg(Ty::F32, "x");
    f.k.body = vec![Stmt::Load {
        dst: vec![x],
        mem: at(f.scratch, Expr::u32(0)),
    }];
    assert!(matches!(stmt_error(&f.k).1, StmtError::BadBase(_)));
}

#[test]
fn errors_name_the_statement_path() {
    let mut f = fixture();
    let (i, x) = (f.k.reg(Ty::U32, "i"), f.k.reg(Ty::F32, "x"));
    let bad = Stmt::Assign {
        dst: x,
        value: Expr::u32(0),
    };
    let inner = Stmt::If {
        cond: lt(Expr::Reg(i), Expr::u32(2)),
        then_body: vec![],
        else_body: vec![Stmt::Comment("c".into()), bad],
    };
    f.k.body = vec![
        Stmt::WorkgroupBarrier,
        Stmt::For {
            var: i,
            start: Expr::u32(0),
            end: Expr::u32(4),
            step: Expr::u32(1),
            body: vec![inner],
        },
    ];
    let err = validate(&f.k).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("body[1].loop[0].else[1]: assigned value"),
        "{err}"
    );
}

/// A tensor-core MMA is a warp collective like a wave reduction: every lane of the warp must
/// execute it (§5.8's rule for collectives), and its fragment layout exists only for 32 lanes.
fn mma_kernel(arch: Arch) -> (LoweredKernel, Stmt) {
    let mut k = LoweredKernel::new("k", arch, 1, 256, 1);
    let acc = std::array::from_fn(|_| k.reg(Ty::F32, "acc"));
    let a = std::array::from_fn(|_| k.reg(Ty::U32, "a"));
    let b = std::array::from_fn(|_| k.reg(Ty::U32, "b"));
    let mut init: Vec<Stmt> = acc
        .iter()
        .map(|&r| Stmt::Assign {
            dst: r,
            value: Expr::f32(0.0),
        })
        .collect();
    init.extend(a.iter().chain(&b).map(|&r| Stmt::Assign {
        dst: r,
        value: Expr::u32(0),
    }));
    k.body = init;
    (k, Stmt::MmaF16 { acc, a, b })
}

#[test]
fn valid_mma_in_warp_uniform_flow_is_accepted() {
    let (mut k, mma) = mma_kernel(Arch::Sm90);
    // Under a condition that is uniform per wave (the wave index), as the lowering's K slices are.
    k.body.push(when(
        lt(Expr::Special(Special::WaveId), Expr::u32(4)),
        vec![mma],
    ));
    validate(&k).unwrap();
}

#[test]
fn invalid_mma_in_divergent_if() {
    let (mut k, mma) = mma_kernel(Arch::Sm90);
    k.body.push(when(
        lt(Expr::Special(Special::LaneId), Expr::u32(16)),
        vec![mma],
    ));
    assert_eq!(stmt_error(&k).1, StmtError::DivergentWaveReduce);
}

#[test]
fn invalid_mma_in_a_64_lane_wave() {
    let (mut k, mma) = mma_kernel(Arch::Gfx906);
    k.body.push(mma);
    assert!(matches!(
        stmt_error(&k).1,
        StmtError::Mismatch {
            what: "mma fragment layout",
            ..
        }
    ));
}

/// `Stmt::StreamWait` (`Schedule::prefetch_before_wait`): accepted once, at the top level, after
/// L2 prefetches, in an sm_90 kernel whose workgroups do not wait for each other. Refused after a
/// load (a value read before the wait for the stream predecessor: §5.7 across launches), twice,
/// inside a loop, and in a kernel without the stream-order prologue (gfx906, or a grid barrier's
/// co-residency).
#[test]
fn invalid_stream_wait_out_of_place() {
    let kernel = |body: Vec<Stmt>, dependent: bool| {
        let mut k = LoweredKernel::new("k", Arch::Sm90, 1, 128, 4);
        k.dependent_launch = dependent;
        let w = array(
            &mut k,
            "w_qweight",
            Ty::U32,
            1024,
            Access::Read,
            Purpose::Data {
                buffer: "w".into(),
                part: "qweight",
            },
        );
        let y = array(&mut k, "y", Ty::U32, 512, Access::Write, data("y"));
        let v = k.reg(Ty::U32, "v");
        let line = k.reg(Ty::U32, "line");
        let prefetch = Stmt::For {
            var: line,
            start: local_id(),
            end: Expr::u32(32),
            step: Expr::u32(128),
            body: vec![Stmt::PrefetchL2 {
                mem: at(w, Expr::bin(BinOp::Mul, Expr::Reg(line), Expr::u32(32))),
            }],
        };
        let load = Stmt::Load {
            dst: vec![v],
            mem: at(w, local_id()),
        };
        let store = Stmt::Store {
            mem: at(y, local_id()),
            values: vec![Expr::Reg(v)],
        };
        (k, body_of(body, prefetch, load, store))
    };
    // Which statements, in order: p = the prefetch loop, w = the wait, l = a load, s = a store.
    fn body_of(order: Vec<Stmt>, p: Stmt, l: Stmt, s: Stmt) -> Vec<Stmt> {
        order
            .into_iter()
            .map(|st| match st {
                Stmt::Comment(c) if c == "p" => p.clone(),
                Stmt::Comment(c) if c == "l" => l.clone(),
                Stmt::Comment(c) if c == "s" => s.clone(),
                other => other,
            })
            .collect()
    }
    let c = |s: &str| Stmt::Comment(s.into());
    let check = |order: Vec<Stmt>, dependent: bool| {
        let (mut k, body) = kernel(order, dependent);
        k.body = body;
        validate(&k)
    };
    // Accepted: prefetches, the wait, then the work.
    check(vec![c("p"), Stmt::StreamWait, c("l"), c("s")], true).unwrap();
    // A load before the wait.
    let e = check(vec![c("p"), c("l"), Stmt::StreamWait, c("s")], true);
    assert!(
        matches!(&e, Err(LoweredError::StreamWait(m)) if m.contains("not an L2 prefetch")),
        "{e:?}"
    );
    // Twice.
    let e = check(
        vec![Stmt::StreamWait, c("l"), Stmt::StreamWait, c("s")],
        true,
    );
    assert!(
        matches!(&e, Err(LoweredError::StreamWait(m)) if m.contains("2 in one kernel")),
        "{e:?}"
    );
    // Inside a loop.
    let (mut k, body) = kernel(vec![c("l"), c("s")], true);
    let r = k.reg(Ty::U32, "i");
    k.body = vec![Stmt::For {
        var: r,
        start: Expr::u32(0),
        end: Expr::u32(1),
        step: Expr::u32(1),
        body: [vec![Stmt::StreamWait], body].concat(),
    }];
    let e = validate(&k);
    assert!(
        matches!(&e, Err(LoweredError::StreamWait(m)) if m.contains("below the top level")),
        "{e:?}"
    );
    // Without the stream-order prologue (a target without dependent launches).
    let e = check(vec![c("p"), Stmt::StreamWait, c("l"), c("s")], false);
    assert!(
        matches!(&e, Err(LoweredError::StreamWait(m)) if m.contains("without the stream-order prologue")),
        "{e:?}"
    );
}
