//! Helpers shared by the simulator tests: building lowered kernels by hand, a raw host, and
//! seeded op-level inputs.
#![allow(dead_code)]

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wavefuse_codegen::ir::reference::{HostData, HostTensor, RankInputs, round_to};
use wavefuse_codegen::ir::{BufferType, Kernel, MemorySpace, Ordering, Scope, Sharding};
use wavefuse_codegen::lowered::*;
use wavefuse_codegen::sim::{Host, HostView};

pub fn u(v: u32) -> Expr {
    Expr::u32(v)
}

pub fn f(v: f32) -> Expr {
    Expr::f32(v)
}

pub fn r(reg: Reg) -> Expr {
    Expr::Reg(reg)
}

pub fn lid() -> Expr {
    Expr::Special(Special::LocalId)
}

pub fn wg() -> Expr {
    Expr::Special(Special::WorkgroupId)
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}

pub fn add(a: Expr, b: Expr) -> Expr {
    Expr::add(a, b)
}

pub fn mul(a: Expr, b: Expr) -> Expr {
    Expr::mul(a, b)
}

pub fn eq(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Eq, a, b)
}

pub fn lt(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Lt, a, b)
}

pub fn at(p: Param, index: Expr) -> MemRef {
    MemRef {
        base: Base::Param(p),
        index,
    }
}

pub fn peer(p: Param, rank: Expr, index: Expr) -> MemRef {
    MemRef {
        base: Base::Peer { param: p, rank },
        index,
    }
}

pub fn lds_at(l: Lds, index: Expr) -> MemRef {
    MemRef {
        base: Base::Lds(l),
        index,
    }
}

pub fn assign(dst: Reg, value: Expr) -> Stmt {
    Stmt::Assign { dst, value }
}

pub fn load(dst: Reg, mem: MemRef) -> Stmt {
    Stmt::Load {
        dst: vec![dst],
        mem,
    }
}

pub fn store(mem: MemRef, value: Expr) -> Stmt {
    Stmt::Store {
        mem,
        values: vec![value],
    }
}

pub fn if_(cond: Expr, then_body: Block) -> Stmt {
    Stmt::If {
        cond,
        then_body,
        else_body: vec![],
    }
}

pub fn atomic(
    op: AtomicOp,
    mem: MemRef,
    value: Option<Expr>,
    ordering: Ordering,
    scope: Scope,
) -> Stmt {
    Stmt::Atomic {
        dst: None,
        op,
        mem,
        value,
        ordering,
        scope,
        why: Invariant::PeerFlagHandshake,
    }
}

pub fn wait_ge(
    k: &mut LoweredKernel,
    mem: MemRef,
    target: Expr,
    ordering: Ordering,
    scope: Scope,
    budget: u32,
    code: u32,
) -> Stmt {
    let error = at(k.error_param(), u(0));
    Stmt::WaitGe {
        mem,
        target,
        ordering,
        scope,
        budget,
        error,
        code,
        why: Invariant::BoundedSpin,
    }
}

pub fn array(
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

pub fn peers(k: &mut LoweredKernel, name: &str, elem: Ty, len: usize, purpose: Purpose) -> Param {
    k.param(
        name,
        ParamKind::PeerArrays {
            elem,
            len,
            access: Access::ReadWrite,
            purpose,
        },
    )
}

pub fn data(buffer: &str, part: &'static str) -> Purpose {
    Purpose::Data {
        buffer: buffer.into(),
        part,
    }
}

pub fn rank_param(k: &mut LoweredKernel) -> Param {
    k.param(
        "rank",
        ParamKind::Scalar {
            ty: Ty::U32,
            purpose: Purpose::Rank,
        },
    )
}

/// Values of a parameter per (launch, rank, element).
pub type Fill = Box<dyn Fn(u32, u32, usize) -> f64>;

/// A host for hand-built kernels: fills parameters from closures before each launch and keeps
/// what chosen parameters hold after each launch.
#[derive(Default)]
pub struct RawHost {
    pub fills: Vec<(Param, Fill)>,
    pub poison: Vec<Param>,
    pub capture: Vec<Param>,
    /// (launch, rank, param) → values.
    pub captured: HashMap<(u32, u32, Param), Vec<f64>>,
}

impl RawHost {
    pub fn fill(mut self, p: Param, f: impl Fn(u32, u32, usize) -> f64 + 'static) -> Self {
        self.fills.push((p, Box::new(f)));
        self
    }

    pub fn output(mut self, p: Param) -> Self {
        self.poison.push(p);
        self.capture.push(p);
        self
    }

    pub fn get(&self, launch: u32, rank: u32, p: Param) -> &[f64] {
        &self.captured[&(launch, rank, p)]
    }
}

impl Host for RawHost {
    fn before_launch(&mut self, launch: u32, mem: &mut HostView<'_>) {
        let rank = mem.rank();
        for (p, f) in &self.fills {
            for i in 0..mem.len(*p) {
                mem.write(*p, i, f(launch, rank, i));
            }
        }
        for p in &self.poison {
            mem.poison(*p);
        }
    }

    fn after_launch(&mut self, launch: u32, mem: &mut HostView<'_>) {
        let rank = mem.rank();
        for p in &self.capture {
            let v = (0..mem.len(*p)).map(|i| mem.read(*p, i)).collect();
            self.captured.insert((launch, rank, *p), v);
        }
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (a, b): (f64, f64) = (rng.random_range(1e-12..1.0), rng.random_range(0.0..1.0));
    (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
}

/// Seeded inputs for a kernel of dense tensors: N(0, 1) activations (partials N(0, 1/tp)),
/// `1 + N(0, 0.1)` vectors, rounded to their type; replicated inputs are equal on all ranks.
pub fn inputs(k: &Kernel, seed: u64) -> Vec<RankInputs> {
    (0..k.tp())
        .map(|rank| {
            k.inputs()
                .map(|b| {
                    let d = k.buffer(b).unwrap();
                    let BufferType::Tensor(t) = d.local_type() else {
                        panic!("dense inputs only")
                    };
                    let tag = if d.sharding == Sharding::Replicated {
                        0
                    } else {
                        rank + 1
                    };
                    let mut rng = ChaCha8Rng::seed_from_u64(
                        seed ^ (u64::from(b.as_u32()) << 40) ^ (u64::from(tag) << 32),
                    );
                    let (mean, std) = match (t.shape.len(), d.sharding) {
                        (1, _) => (1.0, 0.1),
                        (_, Sharding::Partial { tp }) => (0.0, 1.0 / f64::from(tp).sqrt()),
                        _ => (0.0, 1.0),
                    };
                    let data: Vec<f64> = (0..t.len())
                        .map(|_| mean + std * normal(&mut rng))
                        .collect();
                    (
                        b,
                        HostData::Tensor(HostTensor::rounded(
                            t.dtype,
                            t.shape.clone(),
                            data.into_iter().map(|x| round_to(t.dtype, x)),
                        )),
                    )
                })
                .collect()
        })
        .collect()
}

/// Inputs for `n` launches, different in every launch (so stale data from a previous launch is
/// a wrong answer, not a lucky one).
pub fn launches(k: &Kernel, seed: u64, n: u32) -> Vec<Vec<RankInputs>> {
    (0..n)
        .map(|l| inputs(k, seed.wrapping_mul(31).wrapping_add(u64::from(l))))
        .collect()
}
