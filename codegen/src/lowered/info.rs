//! The facts the lowered validator derives, as side tables the back ends read (naga's
//! `ModuleInfo`): every register's type and uniformity, the type of every scalar parameter and
//! the element type of every array, and which parameters an atomic or a wait touches.
//!
//! [`validate`](super::validate::validate) returns a [`LoweredInfo`] for a kernel it accepts: the
//! C++ writer and the LLVM back end read it instead of working the facts out again.
//! [`LoweredInfo::derive`] builds the same tables without checking anything, for a back end handed a
//! kernel that has not been through the validator (the writers' own refusals are tested on such
//! kernels).
//!
//! Expressions of the lowered level are trees inside statements, with no identity of their own,
//! so a fact about an expression ([`LoweredInfo::expr_ty`], [`LoweredInfo::expr_uniformity`]) is
//! answered from the tables by its operators without checking them: on a validated kernel it is
//! the type the validator checked.

use cranelift_entity::SecondaryMap;

use super::{
    Base, Block, Expr, Lds, LoweredKernel, MemRef, Param, ParamKind, Reg, Special, Stmt, Ty,
};

/// How far a value, or the control flow around a statement, may differ between lanes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub enum Uniformity {
    /// The same for every lane of the workgroup.
    #[default]
    Uniform,
    /// The same for every lane of a wave.
    Wave,
    /// May differ between lanes of a wave.
    Divergent,
}

/// What the validator knows of one register.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RegInfo {
    /// Its type (as declared).
    pub ty: Ty,
    /// How far its value may differ between lanes: the join over all its assignments of the
    /// assigned value's and the enclosing control flow's uniformity.
    pub uniformity: Uniformity,
}

/// The validator's facts about one lowered kernel. See the module docs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoweredInfo {
    regs: SecondaryMap<Reg, Option<RegInfo>>,
    /// A scalar parameter's type; `None` for arrays.
    scalars: SecondaryMap<Param, Option<Ty>>,
    /// An array or peer-arrays parameter's element type; `None` for scalars.
    arrays: SecondaryMap<Param, Option<Ty>>,
    lds: SecondaryMap<Lds, Option<Ty>>,
    /// Whether an atomic or a bounded wait touches the parameter.
    atomic: SecondaryMap<Param, bool>,
}

impl LoweredInfo {
    /// The facts of `k`, derived without checking it (what [`validate`](super::validate::validate)
    /// returns when `k` is valid). Never fails: facts about entities `k` does not define are
    /// absent.
    pub fn derive(k: &LoweredKernel) -> LoweredInfo {
        LoweredInfo::with_uniformity(k, &uniformity(k))
    }

    /// The tables of `k` with the register uniformity `uni` (the validator's fixed point).
    pub(super) fn with_uniformity(k: &LoweredKernel, uni: &SecondaryMap<Reg, Uniformity>) -> Self {
        let mut info = LoweredInfo::default();
        for (r, d) in k.regs.iter() {
            info.regs[r] = Some(RegInfo {
                ty: d.ty,
                uniformity: uni[r],
            });
        }
        for (p, d) in k.params.iter() {
            match &d.kind {
                ParamKind::Scalar { ty, .. } => info.scalars[p] = Some(*ty),
                ParamKind::Array { elem, .. } | ParamKind::PeerArrays { elem, .. } => {
                    info.arrays[p] = Some(*elem)
                }
            }
        }
        for (l, d) in k.lds.iter() {
            info.lds[l] = Some(d.elem);
        }
        atomic_bases(&k.body, &mut info.atomic);
        info
    }

    /// What is known of register `r` (`None`: the kernel does not define it).
    pub fn reg(&self, r: Reg) -> Option<RegInfo> {
        self.regs.get(r).copied().flatten()
    }

    /// Register `r`'s uniformity (an undefined register is taken as divergent).
    pub fn reg_uniformity(&self, r: Reg) -> Uniformity {
        self.reg(r)
            .map_or(Uniformity::Divergent, |info| info.uniformity)
    }

    /// Scalar parameter `p`'s type (`None`: not a scalar parameter of the kernel).
    pub fn scalar_ty(&self, p: Param) -> Option<Ty> {
        self.scalars.get(p).copied().flatten()
    }

    /// Whether an atomic or a bounded wait touches parameter `p` (the writers neither mark it
    /// `const` / `readonly` nor promise it is not aliased).
    pub fn is_atomic(&self, p: Param) -> bool {
        self.atomic.get(p).copied().unwrap_or(false)
    }

    /// The element type of the array `m` addresses (`None`: its base is not an array of the
    /// kernel).
    pub fn elem(&self, m: &MemRef) -> Option<Ty> {
        match &m.base {
            Base::Param(p) | Base::Peer { param: p, .. } => self.arrays.get(*p).copied().flatten(),
            Base::Lds(l) => self.lds.get(*l).copied().flatten(),
        }
    }

    /// The type `e` evaluates to (`None`: it names a register or scalar the kernel does not
    /// define). Operands are not checked: on a valid kernel this is the validator's type.
    pub fn expr_ty(&self, e: &Expr) -> Option<Ty> {
        match e {
            Expr::Int(_, t) | Expr::Float(_, t) | Expr::Cast(t, _) | Expr::Bitcast(t, _) => {
                Some(*t)
            }
            Expr::Reg(r) => self.reg(*r).map(|info| info.ty),
            Expr::Param(p) => self.scalar_ty(*p),
            Expr::Special(_)
            | Expr::PackHalf2(..)
            | Expr::SubHalf2(..)
            | Expr::FmaHalf2(..)
            | Expr::Bfe { .. } => Some(Ty::U32),
            Expr::Bin(op, a, _) if op.is_comparison() => self.expr_ty(a).map(|_| Ty::Bool),
            Expr::Bin(_, a, _) | Expr::Un(_, a) | Expr::Select(_, a, _) => self.expr_ty(a),
            Expr::Dot4I8(..) => Some(Ty::I32),
            Expr::Dot2F16(..) | Expr::Fma(..) => Some(Ty::F32),
        }
    }

    /// How far the value of `e` may differ between lanes.
    pub fn expr_uniformity(&self, e: &Expr) -> Uniformity {
        expr_uni(e, &|r| self.reg_uniformity(r))
    }
}

/// The uniformity of `e`, given its registers' `reg`.
pub(super) fn expr_uni(e: &Expr, reg: &dyn Fn(Reg) -> Uniformity) -> Uniformity {
    let all = |es: &[&Expr]| {
        es.iter()
            .map(|e| expr_uni(e, reg))
            .max()
            .unwrap_or_default()
    };
    match e {
        Expr::Int(..) | Expr::Float(..) | Expr::Param(_) => Uniformity::Uniform,
        Expr::Special(Special::LocalId | Special::LaneId) => Uniformity::Divergent,
        Expr::Special(Special::WaveId) => Uniformity::Wave,
        Expr::Special(Special::WorkgroupId | Special::NumWorkgroups) => Uniformity::Uniform,
        Expr::Reg(r) => reg(*r),
        Expr::Un(_, a) | Expr::Cast(_, a) | Expr::Bitcast(_, a) => expr_uni(a, reg),
        Expr::Bin(_, a, b) | Expr::PackHalf2(a, b) | Expr::SubHalf2(a, b) => all(&[a, b]),
        Expr::Bfe { value, offset, .. } => all(&[value, offset]),
        Expr::FmaHalf2(a, b, c)
        | Expr::Dot2F16(a, b, c)
        | Expr::Dot4I8(a, b, c)
        | Expr::Select(a, b, c)
        | Expr::Fma(a, b, c) => all(&[a, b, c]),
    }
}

fn mem_uni(m: &MemRef, regs: &SecondaryMap<Reg, Uniformity>) -> Uniformity {
    let reg = |r: Reg| regs[r];
    let base = match &m.base {
        Base::Peer { rank, .. } => expr_uni(rank, &reg),
        Base::Param(_) | Base::Lds(_) => Uniformity::Uniform,
    };
    base.max(expr_uni(&m.index, &reg))
}

/// Every register's uniformity: the join over all its assignments of the assigned value's and
/// the enclosing control flow's uniformity, iterated to a fixed point.
pub(super) fn uniformity(k: &LoweredKernel) -> SecondaryMap<Reg, Uniformity> {
    let mut regs = SecondaryMap::with_capacity(k.regs.len());
    loop {
        let mut changed = false;
        uni_block(&k.body, Uniformity::Uniform, &mut regs, &mut changed);
        if !changed {
            return regs;
        }
    }
}

fn raise(regs: &mut SecondaryMap<Reg, Uniformity>, r: Reg, u: Uniformity, changed: &mut bool) {
    if regs[r] < u {
        regs[r] = u;
        *changed = true;
    }
}

fn uni_block(
    block: &[Stmt],
    ctx: Uniformity,
    regs: &mut SecondaryMap<Reg, Uniformity>,
    changed: &mut bool,
) {
    for s in block {
        match s {
            Stmt::Assign { dst, value } => {
                let u = ctx.max(expr_uni(value, &|r| regs[r]));
                raise(regs, *dst, u, changed);
            }
            Stmt::Load { dst, mem } => {
                let u = ctx.max(mem_uni(mem, regs));
                for &d in dst {
                    raise(regs, d, u, changed);
                }
            }
            Stmt::Atomic { dst: Some(d), .. } => raise(regs, *d, Uniformity::Divergent, changed),
            Stmt::WaveReduce { dst, .. } => raise(regs, *dst, ctx.max(Uniformity::Wave), changed),
            Stmt::MmaF16 { acc, .. } => {
                // Each lane receives its own part of the result.
                for &d in acc {
                    raise(regs, d, Uniformity::Divergent, changed);
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let bounds = [start, end, step]
                    .iter()
                    .map(|e| expr_uni(e, &|r| regs[r]))
                    .max()
                    .unwrap_or_default();
                let inner = ctx.max(bounds);
                raise(regs, *var, inner, changed);
                uni_block(body, inner, regs, changed);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let inner = ctx.max(expr_uni(cond, &|r| regs[r]));
                uni_block(then_body, inner, regs, changed);
                uni_block(else_body, inner, regs, changed);
            }
            _ => {}
        }
    }
}

fn base_param(m: &MemRef) -> Option<Param> {
    match &m.base {
        Base::Param(p) | Base::Peer { param: p, .. } => Some(*p),
        Base::Lds(_) => None,
    }
}

/// Marks in `out` the parameters some atomic or wait of `block` touches.
fn atomic_bases(block: &Block, out: &mut SecondaryMap<Param, bool>) {
    fn mark(m: &MemRef, out: &mut SecondaryMap<Param, bool>) {
        if let Some(p) = base_param(m) {
            out[p] = true;
        }
    }
    for s in block {
        match s {
            Stmt::Atomic { mem, .. } => mark(mem, out),
            Stmt::WaitGe { mem, error, .. } => {
                mark(mem, out);
                mark(error, out);
            }
            Stmt::For { body, .. } => atomic_bases(body, out),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                atomic_bases(then_body, out);
                atomic_bases(else_body, out);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use wavefuse_ir::{MemorySpace, Ordering, Scope};

    use super::*;
    use crate::lowered::{Access, AtomicOp, BinOp, Invariant, Purpose, ReduceKind};
    use crate::target::Arch;

    fn array(elem: Ty, access: Access) -> ParamKind {
        ParamKind::Array {
            elem,
            len: 1024,
            space: MemorySpace::Global,
            access,
            purpose: Purpose::Scratch,
        }
    }

    fn at(base: Base, index: Expr) -> MemRef {
        MemRef { base, index }
    }

    /// A kernel with one register of each uniformity, and the facts derived from it.
    struct Small {
        k: LoweredKernel,
        x: Param,
        n: Param,
        sums: Param,
        lds: Lds,
        /// `local_id`: divergent.
        lane: Reg,
        /// `wave_id`: per wave.
        wave: Reg,
        /// `x[wg_id]`: uniform.
        row: Reg,
        /// A constant assigned under `if local_id == 0`: divergent through control flow.
        masked: Reg,
        /// A wave sum: per wave.
        sum: Reg,
        /// A loop variable over uniform bounds: uniform.
        i: Reg,
        /// An atomic's result: divergent.
        old: Reg,
    }

    fn small() -> Small {
        let mut k = LoweredKernel::new("small", Arch::Gfx906, 1, 256, 4);
        let x = k.param("x", array(Ty::F32, Access::Read));
        let n = k.param(
            "n",
            ParamKind::Scalar {
                ty: Ty::U32,
                purpose: Purpose::Scratch,
            },
        );
        let sums = k.param("sums", array(Ty::F32, Access::ReadWrite));
        let lds = k.lds(Ty::F32, 4);
        let (lane, wave, row) = (
            k.reg(Ty::U32, "lane"),
            k.reg(Ty::U32, "wave"),
            k.reg(Ty::F32, "row"),
        );
        let (masked, sum, i, old) = (
            k.reg(Ty::F32, "masked"),
            k.reg(Ty::F32, "sum"),
            k.reg(Ty::U32, "i"),
            k.reg(Ty::F32, "old"),
        );
        let lane0 = Expr::bin(BinOp::Eq, Expr::Special(Special::LocalId), Expr::u32(0));
        k.body = vec![
            Stmt::Assign {
                dst: lane,
                value: Expr::Special(Special::LocalId),
            },
            Stmt::Assign {
                dst: wave,
                value: Expr::Special(Special::WaveId),
            },
            Stmt::Load {
                dst: vec![row],
                mem: at(Base::Param(x), Expr::Special(Special::WorkgroupId)),
            },
            Stmt::If {
                cond: lane0,
                then_body: vec![Stmt::Assign {
                    dst: masked,
                    value: Expr::f32(1.0),
                }],
                else_body: vec![],
            },
            Stmt::WaveReduce {
                dst: sum,
                op: ReduceKind::Sum,
                value: Expr::Reg(row),
            },
            Stmt::For {
                var: i,
                start: Expr::u32(0),
                end: Expr::Param(n),
                step: Expr::u32(1),
                body: vec![Stmt::Atomic {
                    dst: Some(old),
                    op: AtomicOp::Add,
                    mem: at(Base::Param(sums), Expr::Reg(i)),
                    value: Some(Expr::Reg(row)),
                    ordering: Ordering::Relaxed,
                    scope: Scope::Agent,
                    why: Invariant::ScratchInitialised,
                }],
            },
        ];
        Small {
            k,
            x,
            n,
            sums,
            lds,
            lane,
            wave,
            row,
            masked,
            sum,
            i,
            old,
        }
    }

    #[test]
    fn registers_get_their_declared_type_and_the_join_of_their_assignments_uniformity() {
        let s = small();
        let info = LoweredInfo::derive(&s.k);
        let want = [
            (s.lane, Ty::U32, Uniformity::Divergent),
            (s.wave, Ty::U32, Uniformity::Wave),
            (s.row, Ty::F32, Uniformity::Uniform),
            (s.masked, Ty::F32, Uniformity::Divergent),
            (s.sum, Ty::F32, Uniformity::Wave),
            (s.i, Ty::U32, Uniformity::Uniform),
            (s.old, Ty::F32, Uniformity::Divergent),
        ];
        for (r, ty, uniformity) in want {
            assert_eq!(info.reg(r), Some(RegInfo { ty, uniformity }), "{r}");
        }
        let mut other = s.k.clone();
        let undefined = other.reg(Ty::U32, "undefined");
        assert_eq!(info.reg(undefined), None);
        assert_eq!(info.reg_uniformity(undefined), Uniformity::Divergent);
    }

    #[test]
    fn expression_facts_come_from_the_tables() {
        let s = small();
        let info = LoweredInfo::derive(&s.k);
        let lt = Expr::bin(BinOp::Lt, Expr::Reg(s.i), Expr::Param(s.n));
        assert_eq!(info.expr_ty(&lt), Some(Ty::Bool));
        assert_eq!(info.expr_uniformity(&lt), Uniformity::Uniform);
        let mixed = Expr::add(Expr::Reg(s.wave), Expr::Reg(s.lane));
        assert_eq!(info.expr_ty(&mixed), Some(Ty::U32));
        assert_eq!(info.expr_uniformity(&mixed), Uniformity::Divergent);
        let cast = Expr::cast(Ty::F16, Expr::Reg(s.sum));
        assert_eq!(
            (info.expr_ty(&cast), info.expr_uniformity(&cast)),
            (Some(Ty::F16), Uniformity::Wave)
        );
        assert_eq!(info.scalar_ty(s.n), Some(Ty::U32));
        assert_eq!(
            info.expr_ty(&Expr::Param(s.x)),
            None,
            "an array is no scalar"
        );
        assert_eq!(
            info.elem(&at(Base::Lds(s.lds), Expr::u32(0))),
            Some(Ty::F32)
        );
        assert_eq!(info.elem(&at(Base::Param(s.n), Expr::u32(0))), None);
    }

    #[test]
    fn only_parameters_an_atomic_touches_are_atomic() {
        let s = small();
        let info = LoweredInfo::derive(&s.k);
        assert!(info.is_atomic(s.sums));
        assert!(!info.is_atomic(s.x) && !info.is_atomic(s.n));
    }

    /// The validator returns the facts [`LoweredInfo::derive`] gives (what `cpp::emit` reads), and
    /// nothing when it rejects the kernel.
    #[test]
    fn the_validator_returns_the_derived_facts() {
        let s = small();
        let info = crate::lowered::validate::validate(&s.k).expect("valid");
        assert_eq!(info, LoweredInfo::derive(&s.k));
        let mut bad = s.k.clone();
        bad.body.push(Stmt::If {
            cond: Expr::bin(BinOp::Eq, Expr::Reg(s.lane), Expr::u32(1)),
            then_body: vec![Stmt::WorkgroupBarrier],
            else_body: vec![],
        });
        assert!(crate::lowered::validate::validate(&bad).is_err());
    }
}
