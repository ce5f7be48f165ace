//! The simulator's program: the structured body flattened into instructions with jumps, every
//! expression type-checked and resolved to a typed tree once, so execution never looks types up.
//!
//! The type rules here are a local checker (`lowered::validate::ty` will replace it): operands of
//! arithmetic have equal types, comparisons yield `Bool`, specials are `u32`, memory accesses move
//! values of the array's element type (`i32` and `u32` are interchangeable bit patterns).

use cranelift_entity::EntityRef;
use wavefuse_ir::{Ordering, Scope};

use crate::lowered::{
    Access, AtomicOp, Base, BinOp, Block, Expr, LoweredKernel, MemRef, ParamKind, ReduceKind,
    Special, Stmt, Ty, UnOp,
};

use super::SimError;
// Findings quote statements in the lowered printer's notation.
use super::eval::{Fx, closure};
use crate::lowered::print::{
    expr as show_expr, mem as show_mem, ordering as ordering_name, scope as scope_name,
};

/// A typed, resolved expression (compiled further into closures, [`Fx`]). Values are 32-bit patterns: `f32` bits for both float types (an
/// `f16` value is an `f32` holding a representable binary16 number), two's complement for
/// integers, 0/1 for `Bool`.
#[derive(Clone, Debug)]
pub(super) enum CExpr {
    Const(u32),
    Reg(u32),
    Scalar(u32),
    Special(Special),
    /// Operator, operand type, operands.
    Bin(BinOp, Ty, Box<CExpr>, Box<CExpr>),
    Un(UnOp, Ty, Box<CExpr>),
    /// From, to, operand.
    Cast(Ty, Ty, Box<CExpr>),
    Select(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Bfe(Box<CExpr>, Box<CExpr>, u32),
    Fma(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    PackHalf2(Box<CExpr>, Box<CExpr>),
    SubHalf2(Box<CExpr>, Box<CExpr>),
    FmaHalf2(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Dot2F16(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Dot4I8(Box<CExpr>, Box<CExpr>, Box<CExpr>),
}

/// The array an access addresses.
pub(super) enum CBase {
    /// An array parameter of the executing rank (parameter index).
    Array(u32),
    /// A peer-arrays parameter, entry given by a rank expression.
    Peer(u32, Fx),
    /// An LDS array of the executing workgroup.
    Lds(u32),
}

/// A resolved memory reference.
pub(super) struct CMem {
    pub base: CBase,
    pub index: Fx,
    pub elem: Ty,
}

/// One instruction of the flat program.
pub(super) enum Inst {
    Assign {
        dst: u32,
        value: Fx,
    },
    /// `local`: a read-only array of the executing rank, which no lane writes; its accesses are
    /// not scheduling points.
    Load {
        dst: Vec<u32>,
        mem: CMem,
        local: bool,
    },
    Store {
        mem: CMem,
        values: Vec<Fx>,
    },
    Atomic {
        dst: Option<u32>,
        op: AtomicOp,
        mem: CMem,
        value: Option<Fx>,
        ordering: Ordering,
        scope: Scope,
    },
    Fence {
        ordering: Ordering,
        scope: Scope,
    },
    WaitGe {
        mem: CMem,
        target: Fx,
        ordering: Ordering,
        scope: Scope,
        budget: u32,
        error: CMem,
        code: u32,
    },
    WaveReduce {
        dst: u32,
        op: ReduceKind,
        ty: Ty,
        value: Fx,
    },
    /// A wave-collective FP16 MMA: register indices of the fragments.
    Mma {
        acc: [u32; 4],
        a: [u32; 4],
        b: [u32; 2],
    },
    /// [`Stmt::AsyncCopy`]: the source read now, the LDS words written at the lane's wait.
    AsyncCopy {
        dst: CMem,
        src: CMem,
        elems: u32,
    },
    AsyncCommit,
    AsyncWait {
        pending: u32,
    },
    /// [`Stmt::PrefetchL2`]: the address evaluated and checked to be in its array (a hint: no
    /// value read, no access recorded, not a scheduling point).
    Prefetch {
        mem: CMem,
    },
    Barrier,
    Jump(u32),
    /// Jump to `to` when `cond` is false.
    BranchFalse {
        cond: Fx,
        to: u32,
    },
    End,
}

impl Inst {
    /// Whether the scheduler may switch lanes before this instruction: every access to memory
    /// another lane may write, every synchronisation. `End` is not: finishing is local.
    pub(super) fn is_yield(&self) -> bool {
        !matches!(
            self,
            Inst::Assign { .. }
                | Inst::Jump(_)
                | Inst::BranchFalse { .. }
                | Inst::Load { local: true, .. }
                | Inst::Prefetch { .. }
                | Inst::End
        )
    }
}

/// The flat program and, per instruction, the statement it came from (for findings).
pub(super) struct Program {
    pub insts: Vec<Inst>,
    pub text: Vec<String>,
    pub num_regs: usize,
}

impl Program {
    /// Compile `k`'s body. Rejects un-expanded synchronisation objects and ill-typed statements.
    pub(super) fn compile(k: &LoweredKernel) -> Result<Program, SimError> {
        let mut c = Compiler {
            k,
            insts: Vec::new(),
            text: Vec::new(),
        };
        c.block(&k.body)?;
        c.emit(Inst::End, "end of kernel".into());
        Ok(Program {
            insts: c.insts,
            text: c.text,
            num_regs: k.regs.len(),
        })
    }
}

struct Compiler<'a> {
    k: &'a LoweredKernel,
    insts: Vec<Inst>,
    text: Vec<String>,
}

fn type_err(stmt: &str, what: String) -> SimError {
    SimError::Type {
        stmt: stmt.to_owned(),
        what,
    }
}

/// `i32` and `u32` are the same bits in memory.
fn same_bits(a: Ty, b: Ty) -> bool {
    a == b || matches!((a, b), (Ty::I32, Ty::U32) | (Ty::U32, Ty::I32))
}

fn is_int(t: Ty) -> bool {
    matches!(t, Ty::I8 | Ty::I32 | Ty::U32)
}

impl Compiler<'_> {
    fn emit(&mut self, i: Inst, text: String) -> u32 {
        self.insts.push(i);
        self.text.push(text);
        (self.insts.len() - 1) as u32
    }

    fn pc(&self) -> u32 {
        self.insts.len() as u32
    }

    fn block(&mut self, b: &Block) -> Result<(), SimError> {
        b.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), SimError> {
        let text = show_stmt(s);
        match s {
            Stmt::Assign { dst, value } => {
                let (e, t) = self.expr(value).map_err(|w| type_err(&text, w))?;
                let rt = self.k.regs[*dst].ty;
                if rt != t {
                    return Err(type_err(
                        &text,
                        format!("assigns {} to a {} register", t.name(), rt.name()),
                    ));
                }
                self.emit(
                    Inst::Assign {
                        dst: dst.index() as u32,
                        value: closure(e),
                    },
                    text,
                );
            }
            Stmt::Load { dst, mem } => {
                let (m, local) = self.mem(mem).map_err(|w| type_err(&text, w))?;
                for r in dst {
                    let rt = self.k.regs[*r].ty;
                    if !same_bits(rt, m.elem) {
                        return Err(type_err(
                            &text,
                            format!("loads {} into a {} register", m.elem.name(), rt.name()),
                        ));
                    }
                }
                let dst = dst.iter().map(|r| r.index() as u32).collect();
                self.emit(Inst::Load { dst, mem: m, local }, text);
            }
            Stmt::Store { mem, values } => {
                let (m, _) = self.mem(mem).map_err(|w| type_err(&text, w))?;
                let mut vs = Vec::with_capacity(values.len());
                for v in values {
                    let (e, t) = self.expr(v).map_err(|w| type_err(&text, w))?;
                    if !same_bits(t, m.elem) {
                        return Err(type_err(
                            &text,
                            format!("stores {} into {} memory", t.name(), m.elem.name()),
                        ));
                    }
                    vs.push(closure(e));
                }
                self.emit(Inst::Store { mem: m, values: vs }, text);
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_loop(&text, *var, start, end, step, body)?,
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let (c, t) = self.expr(cond).map_err(|w| type_err(&text, w))?;
                if t != Ty::Bool {
                    return Err(type_err(&text, format!("condition is {}", t.name())));
                }
                let branch = self.emit(
                    Inst::BranchFalse {
                        cond: closure(c),
                        to: 0,
                    },
                    text.clone(),
                );
                self.block(then_body)?;
                let jump = self.emit(Inst::Jump(0), format!("end of then-branch of {text}"));
                let else_pc = self.pc();
                self.block(else_body)?;
                let end = self.pc();
                self.insts[branch as usize] =
                    match std::mem::replace(&mut self.insts[branch as usize], Inst::End) {
                        Inst::BranchFalse { cond, .. } => Inst::BranchFalse { cond, to: else_pc },
                        _ => unreachable!(),
                    };
                self.insts[jump as usize] = Inst::Jump(end);
            }
            Stmt::WorkgroupBarrier => {
                self.emit(Inst::Barrier, text);
            }
            Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                scope,
                ..
            } => {
                let (m, _) = self.mem(mem).map_err(|w| type_err(&text, w))?;
                let value = match value {
                    Some(v) => {
                        let (e, t) = self.expr(v).map_err(|w| type_err(&text, w))?;
                        if !same_bits(t, m.elem) {
                            return Err(type_err(
                                &text,
                                format!("operand is {}, memory is {}", t.name(), m.elem.name()),
                            ));
                        }
                        Some(closure(e))
                    }
                    None if *op != AtomicOp::Load => {
                        return Err(type_err(&text, "missing operand".into()));
                    }
                    None => None,
                };
                if let Some(d) = dst {
                    let rt = self.k.regs[*d].ty;
                    if !same_bits(rt, m.elem) {
                        return Err(type_err(
                            &text,
                            format!(
                                "result register is {}, memory is {}",
                                rt.name(),
                                m.elem.name()
                            ),
                        ));
                    }
                }
                if m.elem == Ty::Bool || m.elem == Ty::F16 || m.elem == Ty::I8 {
                    return Err(type_err(
                        &text,
                        format!("atomics on {} are not supported", m.elem.name()),
                    ));
                }
                let dst = dst.map(|d| d.index() as u32);
                self.emit(
                    Inst::Atomic {
                        dst,
                        op: *op,
                        mem: m,
                        value,
                        ordering: *ordering,
                        scope: *scope,
                    },
                    text,
                );
            }
            Stmt::Fence {
                ordering, scope, ..
            } => {
                self.emit(
                    Inst::Fence {
                        ordering: *ordering,
                        scope: *scope,
                    },
                    text,
                );
            }
            Stmt::WaitGe {
                mem,
                target,
                ordering,
                scope,
                budget,
                error,
                code,
                ..
            } => {
                let (m, _) = self.mem(mem).map_err(|w| type_err(&text, w))?;
                let (e, _) = self.mem(error).map_err(|w| type_err(&text, w))?;
                let (t, tt) = self.expr(target).map_err(|w| type_err(&text, w))?;
                if !same_bits(m.elem, Ty::U32)
                    || !same_bits(tt, Ty::U32)
                    || !same_bits(e.elem, Ty::U32)
                {
                    return Err(type_err(
                        &text,
                        "wait_ge needs u32 memory, target and error word".into(),
                    ));
                }
                let inst = Inst::WaitGe {
                    mem: m,
                    target: closure(t),
                    ordering: *ordering,
                    scope: *scope,
                    budget: *budget,
                    error: e,
                    code: *code,
                };
                self.emit(inst, text);
            }
            Stmt::MmaF16 { acc, a, b } => {
                let idx = |r: &crate::lowered::Reg| r.index() as u32;
                let tys =
                    |rs: &[crate::lowered::Reg], t: Ty| rs.iter().all(|r| self.k.regs[*r].ty == t);
                if !tys(acc, Ty::F32) || !tys(a, Ty::U32) || !tys(b, Ty::U32) {
                    return Err(type_err(
                        &text,
                        "mma needs f32 accumulators and u32 operands".into(),
                    ));
                }
                self.emit(
                    Inst::Mma {
                        acc: acc.map(|r| idx(&r)),
                        a: a.map(|r| idx(&r)),
                        b: b.map(|r| idx(&r)),
                    },
                    text,
                );
            }
            Stmt::WaveReduce { dst, op, value } => {
                let (e, t) = self.expr(value).map_err(|w| type_err(&text, w))?;
                let rt = self.k.regs[*dst].ty;
                if rt != t || t == Ty::Bool {
                    return Err(type_err(
                        &text,
                        format!("reduces {} into a {} register", t.name(), rt.name()),
                    ));
                }
                self.emit(
                    Inst::WaveReduce {
                        dst: dst.index() as u32,
                        op: *op,
                        ty: t,
                        value: closure(e),
                    },
                    text,
                );
            }
            Stmt::GridBarrier { .. }
            | Stmt::PublishFlag { .. }
            | Stmt::WaitFlag { .. }
            | Stmt::WaitFlagPerLane { .. } => {
                return Err(SimError::NotExpanded(text));
            }
            Stmt::Comment(_) | Stmt::SchedBarrier | Stmt::StreamWait => {}
            Stmt::AsyncCopy { dst, src, words } => {
                let (d, _) = self.mem(dst).map_err(|w| type_err(&text, w))?;
                let (sm, _) = self.mem(src).map_err(|w| type_err(&text, w))?;
                if !matches!(d.base, CBase::Lds(_)) || matches!(sm.base, CBase::Lds(_)) {
                    return Err(type_err(
                        &text,
                        "copies from a global array into LDS".into(),
                    ));
                }
                let same = d.elem == sm.elem || (d.elem.bytes() == 4 && sm.elem.bytes() == 4);
                if !same || !matches!(d.elem.bytes(), 2 | 4) {
                    return Err(type_err(
                        &text,
                        "copies 32-bit words, or elements of one 16-bit type".into(),
                    ));
                }
                self.emit(
                    Inst::AsyncCopy {
                        elems: *words * 4 / d.elem.bytes() as u32,
                        dst: d,
                        src: sm,
                    },
                    text,
                );
            }
            Stmt::AsyncCommit => {
                self.emit(Inst::AsyncCommit, text);
            }
            Stmt::AsyncWait { pending } => {
                self.emit(Inst::AsyncWait { pending: *pending }, text);
            }
            // A cache hint: no value, no access, nothing to order; its address is checked to be
            // in the array when a lane runs it (a prefetch past an array is a lowering bug even
            // though the hardware would drop it).
            Stmt::PrefetchL2 { mem } => {
                let (m, _) = self.mem(mem).map_err(|w| type_err(&text, w))?;
                self.emit(Inst::Prefetch { mem: m }, text);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn for_loop(
        &mut self,
        text: &str,
        var: crate::lowered::Reg,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &Block,
    ) -> Result<(), SimError> {
        let vt = self.k.regs[var].ty;
        if !is_int(vt) {
            return Err(type_err(
                text,
                format!("induction variable is {}", vt.name()),
            ));
        }
        let v = var.index() as u32;
        let typed = |e: &Expr| -> Result<CExpr, SimError> {
            let (c, t) = self.expr(e).map_err(|w| type_err(text, w))?;
            if t != vt {
                return Err(type_err(
                    text,
                    format!("loop bound is {}, variable is {}", t.name(), vt.name()),
                ));
            }
            Ok(c)
        };
        let (start, end, step) = (typed(start)?, typed(end)?, typed(step)?);
        self.emit(
            Inst::Assign {
                dst: v,
                value: closure(start),
            },
            format!("{text} (init)"),
        );
        let test = self.pc();
        let cond = closure(CExpr::Bin(
            BinOp::Lt,
            vt,
            Box::new(CExpr::Reg(v)),
            Box::new(end),
        ));
        let branch = self.emit(Inst::BranchFalse { cond, to: 0 }, format!("{text} (test)"));
        self.block(body)?;
        let next = closure(CExpr::Bin(
            BinOp::Add,
            vt,
            Box::new(CExpr::Reg(v)),
            Box::new(step),
        ));
        self.emit(
            Inst::Assign {
                dst: v,
                value: next,
            },
            format!("{text} (step)"),
        );
        self.emit(Inst::Jump(test), format!("{text} (back edge)"));
        let exit = self.pc();
        if let Inst::BranchFalse { to, .. } = &mut self.insts[branch as usize] {
            *to = exit;
        }
        Ok(())
    }

    /// Resolve a memory reference; the flag says whether its accesses are local (see [`Inst::Load`]).
    fn mem(&self, m: &MemRef) -> Result<(CMem, bool), String> {
        let (base, elem, local) = match &m.base {
            Base::Param(p) => match self.k.params.get(*p).map(|d| &d.kind) {
                Some(ParamKind::Array { elem, access, .. }) => (
                    CBase::Array(p.index() as u32),
                    *elem,
                    *access == Access::Read,
                ),
                Some(_) => return Err(format!("{p} is not an array parameter")),
                None => return Err(format!("{p} is not a parameter")),
            },
            Base::Peer { param, rank } => match self.k.params.get(*param).map(|d| &d.kind) {
                Some(ParamKind::PeerArrays { elem, .. }) => {
                    let (r, t) = self.expr(rank)?;
                    if !is_int(t) {
                        return Err(format!("peer rank is {}", t.name()));
                    }
                    (CBase::Peer(param.index() as u32, closure(r)), *elem, false)
                }
                Some(_) => return Err(format!("{param} is not a peer-arrays parameter")),
                None => return Err(format!("{param} is not a parameter")),
            },
            Base::Lds(l) => match self.k.lds.get(*l) {
                Some(d) => (CBase::Lds(l.index() as u32), d.elem, false),
                None => return Err(format!("{l} is not an LDS array")),
            },
        };
        let (index, it) = self.expr(&m.index)?;
        if !is_int(it) {
            return Err(format!("index is {}", it.name()));
        }
        Ok((
            CMem {
                base,
                index: closure(index),
                elem,
            },
            local,
        ))
    }

    fn expr(&self, e: &Expr) -> Result<(CExpr, Ty), String> {
        Ok(match e {
            Expr::Int(v, ty) => (CExpr::Const(int_bits(*v, *ty)?), *ty),
            Expr::Float(v, ty) => {
                let bits = match ty {
                    Ty::F32 => (*v as f32).to_bits(),
                    Ty::F16 => half::f16::from_f64(*v).to_f32().to_bits(),
                    t => return Err(format!("float constant of type {}", t.name())),
                };
                (CExpr::Const(bits), *ty)
            }
            Expr::Reg(r) => match self.k.regs.get(*r) {
                Some(d) => (CExpr::Reg(r.index() as u32), d.ty),
                None => return Err(format!("{r} is not a register")),
            },
            Expr::Param(p) => match self.k.params.get(*p).map(|d| &d.kind) {
                Some(ParamKind::Scalar { ty, .. }) => (CExpr::Scalar(p.index() as u32), *ty),
                _ => return Err(format!("{p} is not a scalar parameter")),
            },
            Expr::Special(s) => (CExpr::Special(*s), Ty::U32),
            Expr::Bin(op, a, b) => {
                let ((a, ta), (b, tb)) = (self.expr(a)?, self.expr(b)?);
                if ta != tb {
                    return Err(format!("{op:?} of {} and {}", ta.name(), tb.name()));
                }
                check_bin(*op, ta)?;
                let rt = if op.is_comparison() { Ty::Bool } else { ta };
                (CExpr::Bin(*op, ta, Box::new(a), Box::new(b)), rt)
            }
            Expr::Un(op, a) => {
                let (a, t) = self.expr(a)?;
                let ok = match op {
                    UnOp::Neg => t != Ty::Bool,
                    UnOp::Abs => t != Ty::Bool && t != Ty::U32,
                    UnOp::Not => !t.is_float(),
                    UnOp::Exp | UnOp::Rsqrt => t.is_float(),
                };
                if !ok {
                    return Err(format!("{op:?} of {}", t.name()));
                }
                (CExpr::Un(*op, t, Box::new(a)), t)
            }
            Expr::Cast(to, a) => {
                let (a, from) = self.expr(a)?;
                (CExpr::Cast(from, *to, Box::new(a)), *to)
            }
            Expr::PackHalf2(a, b) => {
                let ((a, ta), (b, tb)) = (self.expr(a)?, self.expr(b)?);
                if ta != Ty::F16 || tb != Ty::F16 {
                    return Err(format!("pack_half2({}, {})", ta.name(), tb.name()));
                }
                (CExpr::PackHalf2(Box::new(a), Box::new(b)), Ty::U32)
            }
            Expr::SubHalf2(a, b) => {
                let ((a, ta), (b, tb)) = (self.expr(a)?, self.expr(b)?);
                if ta != Ty::U32 || tb != Ty::U32 {
                    return Err(format!("sub_half2({}, {})", ta.name(), tb.name()));
                }
                (CExpr::SubHalf2(Box::new(a), Box::new(b)), Ty::U32)
            }
            Expr::FmaHalf2(a, b, c) => {
                let ((a, ta), (b, tb), (c, tc)) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
                if ta != Ty::U32 || tb != Ty::U32 || tc != Ty::U32 {
                    return Err(format!(
                        "fma_half2({}, {}, {})",
                        ta.name(),
                        tb.name(),
                        tc.name()
                    ));
                }
                (
                    CExpr::FmaHalf2(Box::new(a), Box::new(b), Box::new(c)),
                    Ty::U32,
                )
            }
            Expr::Dot2F16(a, b, c) => {
                let ((a, ta), (b, tb), (c, tc)) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
                if ta != Ty::U32 || tb != Ty::U32 || tc != Ty::F32 {
                    return Err(format!(
                        "dot2_f16({}, {}, {})",
                        ta.name(),
                        tb.name(),
                        tc.name()
                    ));
                }
                (
                    CExpr::Dot2F16(Box::new(a), Box::new(b), Box::new(c)),
                    Ty::F32,
                )
            }
            Expr::Dot4I8(a, b, c) => {
                let ((a, ta), (b, tb), (c, tc)) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
                if ta != Ty::U32 || tb != Ty::U32 || tc != Ty::I32 {
                    return Err(format!(
                        "dot4_i8({}, {}, {})",
                        ta.name(),
                        tb.name(),
                        tc.name()
                    ));
                }
                (
                    CExpr::Dot4I8(Box::new(a), Box::new(b), Box::new(c)),
                    Ty::I32,
                )
            }
            // Values are held as their 32-bit patterns: a bitcast only changes the type.
            Expr::Bitcast(to, a) => (self.expr(a)?.0, *to),
            Expr::Select(c, a, b) => {
                let ((c, tc), (a, ta), (b, tb)) = (self.expr(c)?, self.expr(a)?, self.expr(b)?);
                if tc != Ty::Bool || ta != tb {
                    return Err(format!(
                        "select({}, {}, {})",
                        tc.name(),
                        ta.name(),
                        tb.name()
                    ));
                }
                (CExpr::Select(Box::new(c), Box::new(a), Box::new(b)), ta)
            }
            Expr::Bfe {
                value,
                offset,
                width,
            } => {
                let ((v, tv), (o, to)) = (self.expr(value)?, self.expr(offset)?);
                if !same_bits(tv, Ty::U32) || !same_bits(to, Ty::U32) || !(1..=32).contains(width) {
                    return Err(format!("bfe({}, {}, {width})", tv.name(), to.name()));
                }
                (CExpr::Bfe(Box::new(v), Box::new(o), *width), Ty::U32)
            }
            Expr::Fma(a, b, c) => {
                let ((a, ta), (b, tb), (c, tc)) = (self.expr(a)?, self.expr(b)?, self.expr(c)?);
                if (ta, tb, tc) != (Ty::F32, Ty::F32, Ty::F32) {
                    return Err(format!("fma({}, {}, {})", ta.name(), tb.name(), tc.name()));
                }
                (CExpr::Fma(Box::new(a), Box::new(b), Box::new(c)), Ty::F32)
            }
        })
    }
}

fn int_bits(v: i64, ty: Ty) -> Result<u32, String> {
    let fits = match ty {
        Ty::Bool => v == 0 || v == 1,
        Ty::I8 => i8::try_from(v).is_ok(),
        Ty::I32 => i32::try_from(v).is_ok(),
        Ty::U32 => u32::try_from(v).is_ok(),
        Ty::F16 | Ty::F32 => return Err(format!("integer constant of type {}", ty.name())),
    };
    if !fits {
        return Err(format!("constant {v} does not fit {}", ty.name()));
    }
    Ok(v as i32 as u32)
}

fn check_bin(op: BinOp, t: Ty) -> Result<(), String> {
    let ok = match op {
        BinOp::And | BinOp::Or => !t.is_float(),
        BinOp::Xor | BinOp::Shl | BinOp::Shr => is_int(t),
        BinOp::Eq | BinOp::Ne => true,
        _ => t != Ty::Bool,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{op:?} on {}", t.name()))
    }
}

// ---- Rendering, for findings (one line per statement). ----

/// One statement on one line (bodies elided).
pub(super) fn show_stmt(s: &Stmt) -> String {
    let list = |v: &[Expr]| v.iter().map(show_expr).collect::<Vec<_>>().join(", ");
    match s {
        Stmt::Assign { dst, value } => format!("{dst} = {}", show_expr(value)),
        Stmt::Load { dst, mem } => {
            let d = dst
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            format!("{d} = load.x{} {}", dst.len(), show_mem(mem))
        }
        Stmt::Store { mem, values } => format!(
            "store.x{} {}, {}",
            values.len(),
            show_mem(mem),
            list(values)
        ),
        Stmt::For {
            var,
            start,
            end,
            step,
            ..
        } => {
            format!(
                "for {var} in {}..{} step {}",
                show_expr(start),
                show_expr(end),
                show_expr(step)
            )
        }
        Stmt::If { cond, .. } => format!("if {}", show_expr(cond)),
        Stmt::WorkgroupBarrier => "workgroup_barrier".into(),
        Stmt::Atomic {
            dst,
            op,
            mem,
            value,
            ordering,
            scope,
            ..
        } => {
            let dst = dst.map(|d| format!("{d} = ")).unwrap_or_default();
            let value = value
                .as_ref()
                .map(|v| format!(", {}", show_expr(v)))
                .unwrap_or_default();
            let op = format!("{op:?}").to_lowercase();
            format!(
                "{dst}atomic.{op} {}{value} {} {}",
                show_mem(mem),
                ordering_name(*ordering),
                scope_name(*scope)
            )
        }
        Stmt::Fence {
            ordering, scope, ..
        } => format!("fence {} {}", ordering_name(*ordering), scope_name(*scope)),
        Stmt::WaitGe {
            mem,
            target,
            ordering,
            scope,
            code,
            ..
        } => format!(
            "wait_ge {}, {} {} {} (code {code})",
            show_mem(mem),
            show_expr(target),
            ordering_name(*ordering),
            scope_name(*scope)
        ),
        Stmt::MmaF16 { acc, a, b } => format!("{acc:?} += mma {a:?} x {b:?}"),
        Stmt::WaveReduce { dst, op, value } => {
            format!(
                "{dst} = wave_reduce.{} {}",
                format!("{op:?}").to_lowercase(),
                show_expr(value)
            )
        }
        Stmt::GridBarrier { counter, index } => {
            format!("grid_barrier #{index} {}", show_mem(counter))
        }
        Stmt::PublishFlag { flag, round } => format!("publish_flag #{round} {}", show_mem(flag)),
        Stmt::WaitFlag { flag, round } => format!("wait_flag #{round} {}", show_mem(flag)),
        Stmt::WaitFlagPerLane {
            flag, lanes, round, ..
        } => format!(
            "wait_flag_per_lane #{round} lanes<{lanes} {}",
            show_mem(flag)
        ),
        Stmt::Comment(c) => format!("// {c}"),
        Stmt::SchedBarrier => "sched_barrier".into(),
        Stmt::StreamWait => "stream_wait".into(),
        Stmt::PrefetchL2 { mem } => format!("prefetch.l2 {}", show_mem(mem)),
        Stmt::AsyncCopy { dst, src, words } => {
            format!("async_copy.x{words} {}, {}", show_mem(dst), show_mem(src))
        }
        Stmt::AsyncCommit => "async_commit".into(),
        Stmt::AsyncWait { pending } => format!("async_wait {pending}"),
    }
}
