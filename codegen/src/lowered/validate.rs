//! The lowered validator: the gate between a lowering pass and the back ends or the simulator.
//!
//! [`validate`] checks, for every statement (errors name its path, e.g. `body[4].then[0]`):
//! - types: every expression is well typed ([`ty`]), assignments, loads, stores, atomics and waits
//!   agree with their registers' and arrays' element types, indices are u32, conditions bool;
//! - uniformity (§5.8): no workgroup barrier, grid barrier, flag publish or flag wait inside
//!   control flow that may diverge within a workgroup, and no wave reduction inside control flow
//!   that may diverge within a wave. `local_id` and `lane_id` are divergent, `wave_id` is uniform
//!   per wave, `wg_id`, `num_wgs`, parameters and constants are uniform; a register is as
//!   divergent as anything assigned to it, including the control flow it is assigned under;
//! - no read-modify-write atomic on peer memory (§5.12);
//! - counters (§5.1, §5.4): an atomic add on a [`Purpose::Counter`] parameter sits directly in an
//!   `if local_id == 0` block that follows a workgroup barrier, outside any loop; a counter is
//!   never stored to (that would be a reset), and flags are only accessed atomically (§5.3);
//! - bounded spins (§5.10): every wait has a positive budget;
//! - memory: LDS is only reached through LDS arrays, never through parameters (§5.2), the LDS
//!   total fits one workgroup, read-only parameters are never written and write-only ones never
//!   read (§5.7), vector accesses fit their arrays and constant indices (and constant peer ranks)
//!   are in bounds.
//!
//! On success it returns the facts it derived ([`LoweredInfo`]: types, uniformity, atomically
//! accessed parameters), which the back ends read instead of deriving them again.

use std::fmt;

use cranelift_entity::SecondaryMap;
use thiserror::Error;
use wavefuse_ir::{MemorySpace, Ordering};

use crate::target::Arch;

use super::info::{self, LoweredInfo, Uniformity as Uni, uniformity};
use super::{
    Access, AtomicOp, Base, BinOp, Expr, Lds, LoweredKernel, MemRef, Param, ParamKind, Purpose,
    ReduceKind, Reg, Special, Stmt, Ty, UnOp,
};

/// One step of a statement path.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Statement `i` of the kernel body.
    Body(usize),
    /// Statement `i` of an `if`'s then-block.
    Then(usize),
    /// Statement `i` of an `if`'s else-block.
    Else(usize),
    /// Statement `i` of a `for` loop's body.
    Loop(usize),
}

/// Where a statement is: the steps from the kernel body down to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StmtPath(pub Vec<Step>);

impl fmt::Display for StmtPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match s {
                Step::Body(i) => write!(f, "body[{i}]")?,
                Step::Then(i) => write!(f, "then[{i}]")?,
                Step::Else(i) => write!(f, "else[{i}]")?,
                Step::Loop(i) => write!(f, "loop[{i}]")?,
            }
        }
        Ok(())
    }
}

/// An ill-typed expression.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TypeError {
    /// A register that the kernel does not define.
    #[error("undefined register {0}")]
    UndefinedReg(Reg),
    /// A parameter that the kernel does not define.
    #[error("undefined parameter {0}")]
    UndefinedParam(Param),
    /// An array parameter used as a scalar value.
    #[error("parameter {0} is an array, not a scalar")]
    NotScalar(Param),
    /// A constant whose type cannot hold it.
    #[error("constant {value} of type {ty}")]
    BadConstant {
        /// The constant, as text.
        value: String,
        /// Its declared type.
        ty: &'static str,
    },
    /// Operands of different types, or of a type the operator does not take.
    #[error("`{op:?}` on {a} and {b}")]
    Binary {
        /// Operator.
        op: BinOp,
        /// Left type.
        a: &'static str,
        /// Right type.
        b: &'static str,
    },
    /// An operand of a type the unary operator does not take.
    #[error("`{op:?}` on {ty}")]
    Unary {
        /// Operator.
        op: UnOp,
        /// Operand type.
        ty: &'static str,
    },
    /// Any other operand of the wrong type.
    #[error("{what}: expected {expected}, found {found}")]
    Operand {
        /// Which operand.
        what: &'static str,
        /// Expected type.
        expected: &'static str,
        /// Found type.
        found: &'static str,
    },
}

/// What is wrong with one statement.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StmtError {
    /// An ill-typed expression.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// A value of the wrong type for where it goes.
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        /// What was checked.
        what: &'static str,
        /// Expected type.
        expected: &'static str,
        /// Found type.
        found: &'static str,
    },
    /// §5.8.
    #[error(
        "{what} in control flow that may diverge within the workgroup (§5.8: barriers in uniform control flow; mask tails)"
    )]
    DivergentBarrier {
        /// The statement kind.
        what: &'static str,
    },
    /// A wave reduction or MMA some lanes of the wave may skip.
    #[error("wave reduction or mma in control flow that may diverge within a wave")]
    DivergentWaveReduce,
    /// §5.12.
    #[error("read-modify-write atomic `{0:?}` on peer memory (§5.12: never RMW over the link)")]
    PeerRmw(AtomicOp),
    /// §5.9.
    #[error(
        "{what} inside a loop over virtual workgroups (§5.9: it may wait for a later iteration of its own workgroup)"
    )]
    WaitInVirtualLoop {
        /// The statement kind.
        what: &'static str,
    },
    /// §5.1.
    #[error(
        "arrival on counter {param} is not elected: {why} (§5.1: one arrival per workgroup, by lane 0 after a workgroup barrier)"
    )]
    UnelectedArrival {
        /// The counter.
        param: Param,
        /// What is missing.
        why: &'static str,
    },
    /// §5.4.
    #[error("{what} to counter {param} (§5.4: counters only grow, by elected atomic adds)")]
    CounterWrite {
        /// The access.
        what: &'static str,
        /// The counter.
        param: Param,
    },
    /// §5.3.
    #[error(
        "plain {what} of flag array {param} (§5.3: flags are released and acquired atomically)"
    )]
    PlainFlagAccess {
        /// Load or store.
        what: &'static str,
        /// The flags.
        param: Param,
    },
    /// §5.10.
    #[error("wait with a zero spin budget (§5.10: every spin is bounded)")]
    ZeroBudget,
    /// A constant index past the end.
    #[error("{what} of {width} element(s) at constant index {index} is past the end of {len}")]
    OutOfBounds {
        /// What accesses.
        what: &'static str,
        /// The index.
        index: i64,
        /// Elements accessed.
        width: usize,
        /// Array length.
        len: usize,
    },
    /// A vector wider than its array, or empty.
    #[error("{what} of {width} element(s) does not fit an array of {len}")]
    BadWidth {
        /// What accesses.
        what: &'static str,
        /// Elements accessed.
        width: usize,
        /// Array length.
        len: usize,
    },
    /// A constant peer rank outside the group.
    #[error("peer rank {rank} outside the TP group of {tp}")]
    PeerRank {
        /// The rank.
        rank: i64,
        /// Group size.
        tp: u32,
    },
    /// A memory base that is not the right kind of array.
    #[error("{0}")]
    BadBase(String),
    /// §5.7 / roles.
    #[error("{what} parameter {param}, which is {access:?}")]
    Access {
        /// Read or write.
        what: &'static str,
        /// The parameter.
        param: Param,
        /// Its declared access.
        access: Access,
    },
    /// An atomic whose operation, operands and ordering do not fit together.
    #[error("atomic: {0}")]
    Atomic(&'static str),
}

/// Why a lowered kernel is invalid.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LoweredError {
    /// A statement is invalid.
    #[error("{path}: {source}")]
    Stmt {
        /// Where.
        path: StmtPath,
        /// What.
        source: StmtError,
    },
    /// Too much LDS.
    #[error("{bytes} bytes of LDS exceed the {max} bytes one workgroup may use on {arch}")]
    LdsTooLarge {
        /// Bytes declared.
        bytes: usize,
        /// The target's limit.
        max: u32,
        /// The target.
        arch: Arch,
    },
    /// A parameter that cannot exist.
    #[error("parameter {param}: {what}")]
    Param {
        /// The parameter.
        param: Param,
        /// What is wrong.
        what: String,
    },
    /// A launch shape the target cannot run.
    #[error("launch shape: {0}")]
    Shape(String),
    /// A [`Stmt::StreamWait`] out of place: more than one, below the top level, in a kernel
    /// without the stream-order prologue, or after a statement that is not an L2 prefetch
    /// (§5.7 across launches: nothing may read or write a value before the wait).
    #[error("stream wait: {0}")]
    StreamWait(String),
}

/// Validate a lowered kernel (see the module docs for the rules) and return what was learnt of
/// it: the facts the back ends read ([`LoweredInfo`]).
pub fn validate(k: &LoweredKernel) -> Result<LoweredInfo, LoweredError> {
    check_shape(k)?;
    check_params(k)?;
    check_stream_wait(k)?;
    let bytes = k.lds_bytes();
    if bytes > k.arch.max_lds_per_workgroup() as usize {
        return Err(LoweredError::LdsTooLarge {
            bytes,
            max: k.arch.max_lds_per_workgroup(),
            arch: k.arch,
        });
    }
    let uni = uniformity(k);
    let mut cx = Checker {
        k,
        uni,
        path: StmtPath::default(),
    };
    cx.block(&k.body, Uni::Uniform, &Nest::default(), Step::Body)?;
    Ok(LoweredInfo::with_uniformity(k, &cx.uni))
}

/// [`Stmt::StreamWait`]: at most once, at the top level, in a kernel with the stream-order
/// prologue, after hints only: L2 prefetches, the loops that run them and their index
/// arithmetic (register assignments), comments.
fn check_stream_wait(k: &LoweredKernel) -> Result<(), LoweredError> {
    fn count(block: &[Stmt]) -> usize {
        block
            .iter()
            .map(|s| match s {
                Stmt::StreamWait => 1,
                Stmt::For { body, .. } => count(body),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => count(then_body) + count(else_body),
                _ => 0,
            })
            .sum()
    }
    fn hint_only(s: &Stmt) -> bool {
        match s {
            Stmt::PrefetchL2 { .. } | Stmt::Assign { .. } | Stmt::Comment(_) => true,
            Stmt::For { body, .. } => body.iter().all(hint_only),
            _ => false,
        }
    }
    let bad = |what: &str| Err(LoweredError::StreamWait(what.to_owned()));
    let total = count(&k.body);
    if total == 0 {
        return Ok(());
    }
    if total > 1 {
        return bad(&format!("{total} in one kernel (at most one)"));
    }
    if !k.stream_order_prologue() {
        return bad(
            "in a kernel without the stream-order prologue (its workgroups wait for each other, or the target has no dependent launch)",
        );
    }
    let Some(at) = k.body.iter().position(|s| matches!(s, Stmt::StreamWait)) else {
        return bad("below the top level of the body");
    };
    if let Some(i) = k.body[..at].iter().position(|s| !hint_only(s)) {
        return bad(&format!(
            "statement {i} before it is not an L2 prefetch (a value read or written before the wait for the stream predecessor)"
        ));
    }
    Ok(())
}

fn check_shape(k: &LoweredKernel) -> Result<(), LoweredError> {
    let wave = k.wave_size();
    if k.workgroup_size == 0
        || k.workgroup_size % wave != 0
        || k.workgroup_size > k.arch.max_workgroup_size()
    {
        return Err(LoweredError::Shape(format!(
            "{} lanes per workgroup (a positive multiple of the wave size {wave}, at most {})",
            k.workgroup_size,
            k.arch.max_workgroup_size()
        )));
    }
    if k.grid == 0 || k.tp == 0 {
        return Err(LoweredError::Shape(format!(
            "grid {} on {} ranks",
            k.grid, k.tp
        )));
    }
    Ok(())
}

fn check_params(k: &LoweredKernel) -> Result<(), LoweredError> {
    for (p, d) in k.params.iter() {
        let what = match &d.kind {
            ParamKind::Array {
                space: MemorySpace::Lds | MemorySpace::Register,
                ..
            } => Some(
                "an array parameter in LDS or registers (§5.2: LDS is reached only through LDS arrays)",
            ),
            ParamKind::Array {
                space: MemorySpace::PeerGlobal,
                ..
            } => Some(
                "a single array in peer memory (peer arrays are addressed by rank through PeerArrays, §5.5)",
            ),
            ParamKind::Array { elem: Ty::Bool, .. }
            | ParamKind::PeerArrays { elem: Ty::Bool, .. } => Some("an array of bool"),
            ParamKind::Array {
                purpose: Purpose::Counter | Purpose::Flags,
                elem,
                ..
            }
            | ParamKind::PeerArrays {
                purpose: Purpose::Counter | Purpose::Flags,
                elem,
                ..
            } if *elem != Ty::U32 => Some("counters and flags are u32"),
            ParamKind::Array { len, .. } | ParamKind::PeerArrays { len, .. }
                if *len as u64 > crate::lower::MAX_INDEXED_ELEMENTS =>
            {
                Some("more elements than 32-bit indices reach")
            }
            _ => None,
        };
        if let Some(what) = what {
            return Err(LoweredError::Param {
                param: p,
                what: what.into(),
            });
        }
    }
    Ok(())
}

/// The type of an expression in kernel `k`.
pub fn ty(e: &Expr, k: &LoweredKernel) -> Result<Ty, TypeError> {
    match e {
        Expr::Int(v, t) => int_const(*v, *t),
        Expr::Float(_, t) if t.is_float() => Ok(*t),
        Expr::Float(v, t) => Err(TypeError::BadConstant {
            value: v.to_string(),
            ty: t.name(),
        }),
        Expr::Reg(r) => k
            .regs
            .get(*r)
            .map(|d| d.ty)
            .ok_or(TypeError::UndefinedReg(*r)),
        Expr::Param(p) => match k.params.get(*p).map(|d| &d.kind) {
            None => Err(TypeError::UndefinedParam(*p)),
            Some(ParamKind::Scalar { ty, .. }) => Ok(*ty),
            Some(_) => Err(TypeError::NotScalar(*p)),
        },
        Expr::Special(_) => Ok(Ty::U32),
        Expr::Bin(op, a, b) => bin_ty(*op, ty(a, k)?, ty(b, k)?),
        Expr::Un(op, a) => un_ty(*op, ty(a, k)?),
        Expr::Cast(t, a) => {
            let from = ty(a, k)?;
            if *t == Ty::Bool {
                return Err(TypeError::Operand {
                    what: "cast target",
                    expected: "a numeric type",
                    found: from.name(),
                });
            }
            Ok(*t)
        }
        Expr::PackHalf2(a, b) => {
            expect(ty(a, k)?, Ty::F16, "packed half")?;
            expect(ty(b, k)?, Ty::F16, "packed half")?;
            Ok(Ty::U32)
        }
        Expr::SubHalf2(a, b) => {
            expect(ty(a, k)?, Ty::U32, "packed half pair")?;
            expect(ty(b, k)?, Ty::U32, "packed half pair")?;
            Ok(Ty::U32)
        }
        Expr::FmaHalf2(a, b, c) => {
            for e in [a, b, c] {
                expect(ty(e, k)?, Ty::U32, "packed half pair")?;
            }
            Ok(Ty::U32)
        }
        Expr::Dot4I8(a, b, c) => {
            expect(ty(a, k)?, Ty::U32, "packed bytes")?;
            expect(ty(b, k)?, Ty::U32, "packed bytes")?;
            expect(ty(c, k)?, Ty::I32, "dot4 accumulator")?;
            Ok(Ty::I32)
        }
        Expr::Dot2F16(a, b, c) => {
            expect(ty(a, k)?, Ty::U32, "packed half pair")?;
            expect(ty(b, k)?, Ty::U32, "packed half pair")?;
            expect(ty(c, k)?, Ty::F32, "dot2 accumulator")?;
            Ok(Ty::F32)
        }
        Expr::Bitcast(t, a) => {
            let from = ty(a, k)?;
            let word = |t: Ty| matches!(t, Ty::U32 | Ty::I32 | Ty::F32);
            if !word(from) || !word(*t) {
                return Err(TypeError::Operand {
                    what: "bitcast",
                    expected: "u32, i32 or f32 on both sides",
                    found: if word(from) { t.name() } else { from.name() },
                });
            }
            Ok(*t)
        }
        Expr::Select(c, a, b) => {
            expect(ty(c, k)?, Ty::Bool, "select condition")?;
            let (ta, tb) = (ty(a, k)?, ty(b, k)?);
            if ta != tb {
                return Err(TypeError::Operand {
                    what: "select arms",
                    expected: ta.name(),
                    found: tb.name(),
                });
            }
            Ok(ta)
        }
        Expr::Bfe {
            value,
            offset,
            width,
        } => {
            expect(ty(value, k)?, Ty::U32, "bfe value")?;
            expect(ty(offset, k)?, Ty::U32, "bfe offset")?;
            if !(1..=32).contains(width) {
                return Err(TypeError::BadConstant {
                    value: width.to_string(),
                    ty: "bfe width (1..=32)",
                });
            }
            Ok(Ty::U32)
        }
        Expr::Fma(a, b, c) => {
            for (what, x) in [("fma a", a), ("fma b", b), ("fma c", c)] {
                expect(ty(x, k)?, Ty::F32, what)?;
            }
            Ok(Ty::F32)
        }
    }
}

fn expect(found: Ty, want: Ty, what: &'static str) -> Result<(), TypeError> {
    if found == want {
        Ok(())
    } else {
        Err(TypeError::Operand {
            what,
            expected: want.name(),
            found: found.name(),
        })
    }
}

fn is_int(t: Ty) -> bool {
    matches!(t, Ty::I8 | Ty::I32 | Ty::U32)
}

fn int_const(v: i64, t: Ty) -> Result<Ty, TypeError> {
    let ok = match t {
        Ty::Bool => v == 0 || v == 1,
        Ty::I8 => i8::try_from(v).is_ok(),
        Ty::I32 => i32::try_from(v).is_ok(),
        Ty::U32 => u32::try_from(v).is_ok(),
        Ty::F16 | Ty::F32 => false,
    };
    if ok {
        Ok(t)
    } else {
        Err(TypeError::BadConstant {
            value: v.to_string(),
            ty: t.name(),
        })
    }
}

fn bin_ty(op: BinOp, a: Ty, b: Ty) -> Result<Ty, TypeError> {
    let bad = || {
        Err(TypeError::Binary {
            op,
            a: a.name(),
            b: b.name(),
        })
    };
    if a != b {
        return bad();
    }
    match op {
        BinOp::Eq | BinOp::Ne => Ok(Ty::Bool),
        _ if op.is_comparison() => {
            if a == Ty::Bool {
                bad()
            } else {
                Ok(Ty::Bool)
            }
        }
        BinOp::And | BinOp::Or | BinOp::Xor => {
            if a == Ty::Bool || is_int(a) {
                Ok(a)
            } else {
                bad()
            }
        }
        BinOp::Shl | BinOp::Shr => {
            if is_int(a) {
                Ok(a)
            } else {
                bad()
            }
        }
        _ => {
            if a == Ty::Bool {
                bad()
            } else {
                Ok(a)
            }
        }
    }
}

fn un_ty(op: UnOp, t: Ty) -> Result<Ty, TypeError> {
    let ok = match op {
        UnOp::Neg | UnOp::Abs => matches!(t, Ty::I8 | Ty::I32 | Ty::F16 | Ty::F32),
        UnOp::Not => t == Ty::Bool || is_int(t),
        UnOp::Exp | UnOp::Rsqrt => t == Ty::F32,
    };
    if ok {
        Ok(t)
    } else {
        Err(TypeError::Unary { op, ty: t.name() })
    }
}

fn expr_uni(e: &Expr, regs: &SecondaryMap<Reg, Uni>) -> Uni {
    info::expr_uni(e, &|r| regs[r])
}

/// What encloses a statement, for the election rule.
#[derive(Clone, Default)]
struct Nest {
    /// Inside a `for` loop (not counting loops over virtual workgroups).
    in_loop: bool,
    /// Inside a loop over virtual workgroups (`for (v = wg_id; v < n; v += grid)`: each
    /// iteration is one workgroup's worth of a stage's tile parts, `lower/stages.rs`).
    virtual_wg: bool,
    /// Directly inside an `if local_id == 0` reached in uniform control flow right after a
    /// workgroup barrier.
    elected: Option<ElectedIf>,
}

#[derive(Clone, Copy)]
struct ElectedIf {
    after_barrier: bool,
}

fn is_lane0(cond: &Expr) -> bool {
    let zero = |e: &Expr| matches!(e, Expr::Int(0, Ty::U32));
    let local = |e: &Expr| matches!(e, Expr::Special(Special::LocalId));
    matches!(cond, Expr::Bin(BinOp::Eq, a, b) if (local(a) && zero(b)) || (zero(a) && local(b)))
}

struct Checker<'a> {
    k: &'a LoweredKernel,
    uni: SecondaryMap<Reg, Uni>,
    path: StmtPath,
}

/// The element type, length, access and purpose of the array a memory reference reaches.
struct Target {
    elem: Ty,
    len: usize,
    access: Access,
    purpose: Option<Purpose>,
    param: Option<Param>,
    peer: bool,
}

impl Checker<'_> {
    fn err(&self, source: StmtError) -> LoweredError {
        LoweredError::Stmt {
            path: self.path.clone(),
            source,
        }
    }

    fn block(
        &mut self,
        block: &[Stmt],
        ctx: Uni,
        nest: &Nest,
        step: fn(usize) -> Step,
    ) -> Result<(), LoweredError> {
        let mut after_barrier = false;
        for (i, s) in block.iter().enumerate() {
            self.path.0.push(step(i));
            self.stmt(s, ctx, nest, after_barrier)?;
            self.path.0.pop();
            match s {
                Stmt::Comment(_) | Stmt::SchedBarrier | Stmt::StreamWait => {}
                Stmt::WorkgroupBarrier => after_barrier = true,
                _ => after_barrier = false,
            }
        }
        Ok(())
    }

    fn ty(&self, e: &Expr) -> Result<Ty, LoweredError> {
        ty(e, self.k).map_err(|t| self.err(t.into()))
    }

    fn want(&self, e: &Expr, want: Ty, what: &'static str) -> Result<(), LoweredError> {
        let found = self.ty(e)?;
        if found == want {
            Ok(())
        } else {
            Err(self.err(StmtError::Mismatch {
                what,
                expected: want.name(),
                found: found.name(),
            }))
        }
    }

    fn reg_ty(&self, r: Reg) -> Result<Ty, LoweredError> {
        self.ty(&Expr::Reg(r))
    }

    fn stmt(
        &mut self,
        s: &Stmt,
        ctx: Uni,
        nest: &Nest,
        after_barrier: bool,
    ) -> Result<(), LoweredError> {
        match s {
            Stmt::Assign { dst, value } => {
                let want = self.reg_ty(*dst)?;
                self.want(value, want, "assigned value")
            }
            Stmt::Load { dst, mem } => {
                let t = self.mem(mem, dst.len(), "load", false)?;
                if let Some(p) = t.param {
                    if t.purpose == Some(Purpose::Flags) {
                        return Err(self.err(StmtError::PlainFlagAccess {
                            what: "load",
                            param: p,
                        }));
                    }
                    if t.access == Access::Write {
                        return Err(self.err(StmtError::Access {
                            what: "load from",
                            param: p,
                            access: t.access,
                        }));
                    }
                }
                for &d in dst {
                    let found = self.reg_ty(d)?;
                    if found != t.elem {
                        return Err(self.err(StmtError::Mismatch {
                            what: "loaded register",
                            expected: t.elem.name(),
                            found: found.name(),
                        }));
                    }
                }
                Ok(())
            }
            Stmt::AsyncCopy { dst, src, words } => {
                // 4, 8 or 16 bytes from one of this rank's read-only global arrays into LDS;
                // the source's element type (16 or 32 bits) counts the elements.
                if !matches!(words, 1 | 2 | 4) {
                    return Err(self.err(StmtError::BadBase(format!(
                        "an asynchronous copy moves 1, 2 or 4 32-bit words (not {words})"
                    ))));
                }
                let elem = match &src.base {
                    Base::Param(p) => match self.k.params.get(*p).map(|d| &d.kind) {
                        Some(ParamKind::Array { elem, .. }) => *elem,
                        _ => Ty::U32, // `mem` below names what is wrong with it
                    },
                    _ => Ty::U32,
                };
                if !matches!(elem.bytes(), 2 | 4) {
                    return Err(self.err(StmtError::Mismatch {
                        what: "asynchronous copy element",
                        expected: "a 16- or 32-bit type",
                        found: elem.name(),
                    }));
                }
                let n = *words as usize * 4 / elem.bytes();
                let to = self.mem(dst, n, "asynchronous copy into", true)?;
                let from = self.mem(src, n, "asynchronous copy from", false)?;
                if to.param.is_some() || to.peer {
                    return Err(self.err(StmtError::BadBase(
                        "an asynchronous copy writes an LDS array".into(),
                    )));
                }
                match from.param {
                    Some(p) if !from.peer => {
                        if from.access != Access::Read {
                            return Err(self.err(StmtError::Access {
                                what: "asynchronous copy from",
                                param: p,
                                access: from.access,
                            }));
                        }
                    }
                    _ => {
                        return Err(self.err(StmtError::BadBase(
                            "an asynchronous copy reads one of this rank's read-only global arrays"
                                .into(),
                        )));
                    }
                }
                // A 32-bit word may land in an array of another 32-bit type (the copy moves
                // bits: the weight ring shares the f32 cross-slice sums' LDS); 16-bit types match.
                if to.elem != from.elem && (to.elem.bytes() != 4 || from.elem.bytes() != 4) {
                    return Err(self.err(StmtError::Mismatch {
                        what: "asynchronous copy destination element",
                        expected: from.elem.name(),
                        found: to.elem.name(),
                    }));
                }
                Ok(())
            }
            Stmt::AsyncCommit | Stmt::AsyncWait { .. } => Ok(()),
            Stmt::PrefetchL2 { mem } => {
                // A global array of this rank's (not LDS, not a peer's), in bounds like a load.
                let t = self.mem(mem, 1, "prefetch", false)?;
                if t.param.is_none() || t.peer {
                    return Err(self.err(StmtError::BadBase(
                        "an L2 prefetch addresses one of this rank's global arrays".into(),
                    )));
                }
                Ok(())
            }
            Stmt::Store { mem, values } => {
                let t = self.mem(mem, values.len(), "store", true)?;
                if let Some(p) = t.param {
                    match t.purpose {
                        Some(Purpose::Counter) => {
                            return Err(self.err(StmtError::CounterWrite {
                                what: "plain store",
                                param: p,
                            }));
                        }
                        Some(Purpose::Flags) => {
                            return Err(self.err(StmtError::PlainFlagAccess {
                                what: "store",
                                param: p,
                            }));
                        }
                        _ => {}
                    }
                }
                for v in values {
                    self.want(v, t.elem, "stored value")?;
                }
                Ok(())
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                self.want(&Expr::Reg(*var), Ty::U32, "loop variable")?;
                for (e, what) in [
                    (start, "loop start"),
                    (end, "loop end"),
                    (step, "loop step"),
                ] {
                    self.want(e, Ty::U32, what)?;
                }
                if const_eval(step) == Some(0) {
                    return Err(self.err(StmtError::Mismatch {
                        what: "loop step",
                        expected: "positive",
                        found: "0",
                    }));
                }
                let bounds = [start, end, step]
                    .iter()
                    .map(|e| expr_uni(e, &self.uni))
                    .max()
                    .unwrap_or_default();
                // A loop over virtual workgroups: each iteration is a workgroup of its own for the
                // election rule (§5.1: one arrival per virtual workgroup on a split-K counter);
                // nothing inside may wait for another workgroup (checked at the waits).
                let virtual_wg = matches!(start, Expr::Special(Special::WorkgroupId))
                    && const_eval(step) == Some(i64::from(self.k.grid));
                let inner = Nest {
                    in_loop: nest.in_loop || !virtual_wg,
                    virtual_wg: nest.virtual_wg || virtual_wg,
                    elected: None,
                };
                self.block(body, ctx.max(bounds), &inner, Step::Loop)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.want(cond, Ty::Bool, "if condition")?;
                let inner_ctx = ctx.max(expr_uni(cond, &self.uni));
                let elected =
                    (is_lane0(cond) && ctx == Uni::Uniform).then_some(ElectedIf { after_barrier });
                let then_nest = Nest {
                    in_loop: nest.in_loop,
                    virtual_wg: nest.virtual_wg,
                    elected,
                };
                self.block(then_body, inner_ctx, &then_nest, Step::Then)?;
                let else_nest = Nest {
                    in_loop: nest.in_loop,
                    virtual_wg: nest.virtual_wg,
                    elected: None,
                };
                self.block(else_body, inner_ctx, &else_nest, Step::Else)
            }
            Stmt::WorkgroupBarrier => self.uniform(ctx, "workgroup barrier"),
            Stmt::GridBarrier { counter, .. } => {
                self.uniform(ctx, "grid barrier")?;
                self.not_virtual(nest, "grid barrier")?;
                self.sync_word(counter, Some(Purpose::Counter))
            }
            Stmt::PublishFlag { flag, .. } => {
                self.uniform(ctx, "flag publish")?;
                self.not_virtual(nest, "flag publish")?;
                self.sync_word(flag, Some(Purpose::Flags))
            }
            Stmt::WaitFlag { flag, .. } => {
                self.uniform(ctx, "flag wait")?;
                self.not_virtual(nest, "flag wait")?;
                self.sync_word(flag, Some(Purpose::Flags))
            }
            Stmt::WaitFlagPerLane {
                flag, lanes, cond, ..
            } => {
                self.uniform(ctx, "flag wait")?;
                self.not_virtual(nest, "flag wait")?;
                self.want(cond, Ty::Bool, "per-lane wait condition")?;
                if *lanes == 0 || *lanes > self.k.wave_size() {
                    return Err(self.err(StmtError::Mismatch {
                        what: "per-lane wait lanes",
                        expected: "1 ..= the wave size",
                        found: "outside",
                    }));
                }
                self.sync_word(flag, Some(Purpose::Flags))
            }
            Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                ..
            } => self.atomic(*dst, *op, mem, value.as_ref(), *ordering, nest),
            Stmt::Fence { .. } | Stmt::Comment(_) | Stmt::SchedBarrier | Stmt::StreamWait => Ok(()),
            Stmt::WaitGe {
                mem,
                target,
                budget,
                error,
                ..
            } => {
                if *budget == 0 {
                    return Err(self.err(StmtError::ZeroBudget));
                }
                self.not_virtual(nest, "bounded wait")?;
                self.sync_word(mem, None)?;
                self.want(target, Ty::U32, "wait target")?;
                let e = self.mem(error, 1, "error word", true)?;
                if e.elem != Ty::U32 {
                    return Err(self.err(StmtError::Mismatch {
                        what: "error word",
                        expected: "u32",
                        found: e.elem.name(),
                    }));
                }
                Ok(())
            }
            Stmt::MmaF16 { acc, a, b } => {
                if ctx == Uni::Divergent {
                    return Err(self.err(StmtError::DivergentWaveReduce));
                }
                if self.k.wave_size() != 32 {
                    return Err(self.err(StmtError::Mismatch {
                        what: "mma fragment layout",
                        expected: "a 32-lane wave",
                        found: "a 64-lane wave",
                    }));
                }
                for &r in acc {
                    self.want(&Expr::Reg(r), Ty::F32, "mma accumulator")?;
                }
                for &r in a.iter().chain(b) {
                    self.want(&Expr::Reg(r), Ty::U32, "mma operand (packed FP16 pair)")?;
                }
                Ok(())
            }
            Stmt::WaveReduce { dst, op, value } => {
                if ctx == Uni::Divergent {
                    return Err(self.err(StmtError::DivergentWaveReduce));
                }
                let want = self.reg_ty(*dst)?;
                self.want(value, want, "wave-reduced value")?;
                let ok = match op {
                    ReduceKind::Sum => want == Ty::F32,
                    ReduceKind::Max => want != Ty::Bool,
                };
                if !ok {
                    return Err(self.err(StmtError::Mismatch {
                        what: "wave reduction",
                        expected: "f32 (sum) or numeric (max)",
                        found: want.name(),
                    }));
                }
                Ok(())
            }
        }
    }

    fn uniform(&self, ctx: Uni, what: &'static str) -> Result<(), LoweredError> {
        if ctx == Uni::Uniform {
            Ok(())
        } else {
            Err(self.err(StmtError::DivergentBarrier { what }))
        }
    }

    /// A u32 word used for synchronisation (optionally of a given purpose).
    fn sync_word(&self, m: &MemRef, purpose: Option<Purpose>) -> Result<(), LoweredError> {
        let t = self.mem(m, 1, "synchronisation word", false)?;
        if t.elem != Ty::U32 {
            return Err(self.err(StmtError::Mismatch {
                what: "synchronisation word",
                expected: "u32",
                found: t.elem.name(),
            }));
        }
        if let (Some(want), Some(found)) = (&purpose, &t.purpose) {
            if want != found {
                return Err(self.err(StmtError::BadBase(format!(
                    "a {want:?} operation on a {found:?} array"
                ))));
            }
        }
        if purpose.is_some() && t.param.is_none() {
            return Err(self.err(StmtError::BadBase(
                "a grid barrier or flag on an LDS array (§5.2)".into(),
            )));
        }
        Ok(())
    }

    fn atomic(
        &self,
        dst: Option<Reg>,
        op: AtomicOp,
        mem: &MemRef,
        value: Option<&Expr>,
        ordering: Ordering,
        nest: &Nest,
    ) -> Result<(), LoweredError> {
        let t = self.mem(mem, 1, "atomic", !matches!(op, AtomicOp::Load))?;
        if matches!(op, AtomicOp::Add | AtomicOp::Max) && t.peer {
            return Err(self.err(StmtError::PeerRmw(op)));
        }
        match (op, dst, value) {
            (AtomicOp::Load, Some(_), None)
            | (AtomicOp::Store, None, Some(_))
            | (AtomicOp::Add | AtomicOp::Max, _, Some(_)) => {}
            _ => return Err(self.err(StmtError::Atomic("operands do not fit the operation"))),
        }
        match (op, ordering) {
            (AtomicOp::Load, Ordering::Release | Ordering::AcqRel) => {
                return Err(self.err(StmtError::Atomic("a load cannot release")));
            }
            (AtomicOp::Store, Ordering::Acquire | Ordering::AcqRel) => {
                return Err(self.err(StmtError::Atomic("a store cannot acquire")));
            }
            _ => {}
        }
        if matches!(t.elem, Ty::Bool | Ty::F16 | Ty::I8) {
            return Err(self.err(StmtError::Mismatch {
                what: "atomic element",
                expected: "u32, i32 or f32",
                found: t.elem.name(),
            }));
        }
        if let Some(d) = dst {
            let found = self.reg_ty(d)?;
            if found != t.elem {
                return Err(self.err(StmtError::Mismatch {
                    what: "atomic result",
                    expected: t.elem.name(),
                    found: found.name(),
                }));
            }
        }
        if let Some(v) = value {
            self.want(v, t.elem, "atomic operand")?;
        }
        if let (Some(p), Some(Purpose::Counter)) = (t.param, t.purpose) {
            match op {
                AtomicOp::Store => {
                    return Err(self.err(StmtError::CounterWrite {
                        what: "atomic store",
                        param: p,
                    }));
                }
                AtomicOp::Max => {
                    return Err(self.err(StmtError::CounterWrite {
                        what: "atomic max",
                        param: p,
                    }));
                }
                AtomicOp::Add => self.elected(p, nest)?,
                AtomicOp::Load => {}
            }
        }
        Ok(())
    }

    /// §5.9: nothing inside a loop over virtual workgroups waits for (or signals) another
    /// workgroup — the awaited one may be a later iteration of the waiting workgroup itself.
    fn not_virtual(&self, nest: &Nest, what: &'static str) -> Result<(), LoweredError> {
        if nest.virtual_wg {
            Err(self.err(StmtError::WaitInVirtualLoop { what }))
        } else {
            Ok(())
        }
    }

    fn elected(&self, param: Param, nest: &Nest) -> Result<(), LoweredError> {
        let why = match nest.elected {
            _ if nest.in_loop => Some("it is inside a loop"),
            None => Some("it is not directly inside `if local_id == 0` in uniform control flow"),
            Some(ElectedIf {
                after_barrier: false,
            }) => Some("its `if local_id == 0` does not follow a workgroup barrier"),
            Some(ElectedIf {
                after_barrier: true,
            }) => None,
        };
        match why {
            Some(why) => Err(self.err(StmtError::UnelectedArrival { param, why })),
            None => Ok(()),
        }
    }

    /// Check a memory reference accessing `width` elements and describe its target.
    fn mem(
        &self,
        m: &MemRef,
        width: usize,
        what: &'static str,
        write: bool,
    ) -> Result<Target, LoweredError> {
        self.want(&m.index, Ty::U32, "index")?;
        let target = match &m.base {
            Base::Lds(l) => self.lds(*l)?,
            Base::Param(p) => match self.k.params.get(*p).map(|d| &d.kind) {
                Some(ParamKind::Array {
                    elem,
                    len,
                    access,
                    purpose,
                    ..
                }) => Target {
                    elem: *elem,
                    len: *len,
                    access: *access,
                    purpose: Some(purpose.clone()),
                    param: Some(*p),
                    peer: false,
                },
                Some(ParamKind::PeerArrays { .. }) => {
                    return Err(self.err(StmtError::BadBase(format!(
                        "{p} is a set of peer arrays: address it by rank"
                    ))));
                }
                Some(ParamKind::Scalar { .. }) => {
                    return Err(
                        self.err(StmtError::BadBase(format!("{p} is a scalar, not an array")))
                    );
                }
                None => return Err(self.err(TypeError::UndefinedParam(*p).into())),
            },
            Base::Peer { param, rank } => {
                self.want(rank, Ty::U32, "peer rank")?;
                if let Some(r) = const_eval(rank).filter(|&r| r < 0 || r >= i64::from(self.k.tp)) {
                    return Err(self.err(StmtError::PeerRank {
                        rank: r,
                        tp: self.k.tp,
                    }));
                }
                match self.k.params.get(*param).map(|d| &d.kind) {
                    Some(ParamKind::PeerArrays {
                        elem,
                        len,
                        access,
                        purpose,
                    }) => Target {
                        elem: *elem,
                        len: *len,
                        access: *access,
                        purpose: Some(purpose.clone()),
                        param: Some(*param),
                        peer: true,
                    },
                    Some(_) => {
                        return Err(self.err(StmtError::BadBase(format!(
                            "{param} is not a set of peer arrays"
                        ))));
                    }
                    None => return Err(self.err(TypeError::UndefinedParam(*param).into())),
                }
            }
        };
        if width == 0 || width > target.len {
            return Err(self.err(StmtError::BadWidth {
                what,
                width,
                len: target.len,
            }));
        }
        if let Some(i) = const_eval(&m.index) {
            if i < 0 || i as usize + width > target.len {
                return Err(self.err(StmtError::OutOfBounds {
                    what,
                    index: i,
                    width,
                    len: target.len,
                }));
            }
        }
        if let (true, Some(p), Access::Read) = (write, target.param, target.access) {
            return Err(self.err(StmtError::Access {
                what: "write to",
                param: p,
                access: Access::Read,
            }));
        }
        Ok(target)
    }

    fn lds(&self, l: Lds) -> Result<Target, LoweredError> {
        let d = self
            .k
            .lds
            .get(l)
            .ok_or_else(|| self.err(StmtError::BadBase(format!("undefined LDS array {l}"))))?;
        Ok(Target {
            elem: d.elem,
            len: d.len,
            access: Access::ReadWrite,
            purpose: None,
            param: None,
            peer: false,
        })
    }
}

/// The value of an integer expression made of constants, if it is one.
pub fn const_eval(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(v, _) => Some(*v),
        Expr::Bin(op, a, b) => {
            let (a, b) = (const_eval(a)?, const_eval(b)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div => a.checked_div(b),
                BinOp::Rem => a.checked_rem(b),
                BinOp::Min => Some(a.min(b)),
                BinOp::Max => Some(a.max(b)),
                _ => None,
            }
        }
        _ => None,
    }
}
