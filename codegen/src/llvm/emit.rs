//! The kernel body: lowered statements and expressions into LLVM IR through inkwell's builder.
//!
//! Registers are `alloca`s zeroed in the entry block (as the C++ writer declares them zeroed);
//! `mem2reg` turns them into SSA before the IR is printed. Every synchronisation call carries a
//! `!wavefuse.sync` attachment `!{!"5.N", !"<ordering>", !"<scope>", !"<invariant summary>"}`:
//! the LLVM IR's counterpart of the C++ writer's `// §5.N` comments.

use inkwell::AddressSpace;
use inkwell::FloatPredicate as FP;
use inkwell::IntPredicate as IP;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, GlobalValue, IntValue,
    PointerValue,
};
use wavefuse_ir::{Ordering, Scope};

use super::helpers::{AtomTy, HTy, Library, order_name, scope_name};
use super::{Error, Flavor};
use crate::cpp::vector_words;
use crate::lowered::{
    Access, AtomicOp, Base, BinOp, Block, Expr, Invariant, LoweredKernel, MemRef, Param, ParamKind,
    ReduceKind, Reg, Special, Stmt, Ty, UnOp,
};

fn be(e: BuilderError) -> Error {
    Error::Llvm(format!("builder: {e}"))
}

fn malformed(m: impl Into<String>) -> Error {
    Error::Malformed(m.into())
}

/// A typed value.
#[derive(Copy, Clone)]
struct V<'c> {
    v: BasicValueEnum<'c>,
    ty: Ty,
}

pub(super) struct Emitter<'c, 'k> {
    cx: &'c Context,
    pub m: Module<'c>,
    b: Builder<'c>,
    k: &'k LoweredKernel,
    f: FunctionValue<'c>,
    regs: Vec<PointerValue<'c>>,
    params: Vec<BasicValueEnum<'c>>,
    lds: Vec<GlobalValue<'c>>,
    pub lib: Library,
    sync_kind: u32,
    /// Names of blocks, numbered in creation order (deterministic).
    blocks: u32,
}

impl<'c, 'k> Emitter<'c, 'k> {
    pub fn new(
        cx: &'c Context,
        k: &'k LoweredKernel,
        flavor: Flavor,
        symbol: &str,
    ) -> Result<Self, Error> {
        let m = cx.create_module(symbol);
        let b = cx.create_builder();
        let mut param_tys: Vec<BasicMetadataTypeEnum> = Vec::new();
        let gptr = cx.ptr_type(AddressSpace::from(1u16));
        for p in k.params.values() {
            param_tys.push(match &p.kind {
                ParamKind::Array { .. } | ParamKind::PeerArrays { .. } => gptr.into(),
                ParamKind::Scalar { ty, .. } => reg_ty(cx, *ty).into(),
            });
        }
        let fty = cx.void_type().fn_type(&param_tys, false);
        let f = m.add_function(symbol, fty, None);
        Ok(Emitter {
            cx,
            m,
            b,
            k,
            f,
            regs: Vec::new(),
            params: Vec::new(),
            lds: Vec::new(),
            lib: Library::new(flavor, k.workgroup_size),
            sync_kind: cx.get_kind_id("wavefuse.sync"),
            blocks: 0,
        })
    }

    fn block_named(&mut self, stem: &str) -> BasicBlock<'c> {
        self.blocks += 1;
        self.cx
            .append_basic_block(self.f, &format!("{stem}{}", self.blocks))
    }

    /// Emit the kernel function (signature attributes, LDS, registers, body).
    pub fn kernel(
        &mut self,
        atomic_params: &std::collections::HashSet<Param>,
    ) -> Result<(), Error> {
        let k = self.k;
        let names = crate::cpp::Names::new(k);
        for (i, (p, d)) in k.params.iter().enumerate() {
            let v = self
                .f
                .get_nth_param(i as u32)
                .ok_or_else(|| malformed("parameter count"))?;
            v.set_name(names.param(p));
            if let ParamKind::Array { access, .. } = &d.kind {
                if !atomic_params.contains(&p) {
                    // As the C++ `__restrict__` (and `const` for inputs): no other parameter
                    // aliases it within the launch.
                    self.attr(i as u32, "noalias");
                    if *access == Access::Read {
                        self.attr(i as u32, "readonly");
                    }
                }
            }
            self.params.push(v);
        }
        for (l, d) in k.lds.iter() {
            let ty = mem_ty(self.cx, d.elem).array_type(d.len as u32);
            let g = self.m.add_global(
                ty,
                Some(AddressSpace::from(3u16)),
                &format!("lds{}", l.as_u32()),
            );
            g.set_linkage(inkwell::module::Linkage::Internal);
            g.set_initializer(&ty.get_undef());
            g.set_alignment(16);
            self.lds.push(g);
        }
        let entry = self.cx.append_basic_block(self.f, "entry");
        self.b.position_at_end(entry);
        for (r, d) in k.regs.iter() {
            let ty = reg_ty(self.cx, d.ty);
            let a = self
                .b
                .build_alloca(ty, &format!("{}{}", d.hint, r.as_u32()))
                .map_err(be)?;
            self.b.build_store(a, ty.const_zero()).map_err(be)?;
            self.regs.push(a);
        }
        self.block(&k.body)?;
        self.b.build_return(None).map_err(be)?;
        Ok(())
    }

    fn attr(&self, index: u32, name: &str) {
        let kind = Attribute::get_named_enum_kind_id(name);
        let a = self.cx.create_enum_attribute(kind, 0);
        self.f.add_attribute(AttributeLoc::Param(index), a);
    }

    fn block(&mut self, stmts: &Block) -> Result<(), Error> {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), Error> {
        match s {
            Stmt::Assign { dst, value } => {
                let v = self.expr(value)?;
                self.set(*dst, v)
            }
            Stmt::Load { dst, mem } => self.load(dst, mem),
            Stmt::Store { mem, values } => self.store(mem, values),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_loop(*var, start, end, step, body),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body),
            Stmt::WorkgroupBarrier => {
                let name = self.lib.barrier();
                let call = self.call(&name, HTy::Void, &[], &[])?;
                self.tag(call, Invariant::UniformBarriers, None)
            }
            Stmt::Atomic {
                dst,
                op,
                mem,
                value,
                ordering,
                scope,
                why,
            } => self.atomic(*dst, *op, mem, value.as_ref(), (*ordering, *scope), *why),
            Stmt::Fence {
                ordering,
                scope,
                why,
            } => {
                let name = self
                    .lib
                    .fence(*ordering, *scope)
                    .map_err(Error::Malformed)?;
                let call = self.call(&name, HTy::Void, &[], &[])?;
                self.tag(call, *why, Some((*ordering, *scope)))
            }
            Stmt::WaitGe { .. } => self.wait_ge(s),
            Stmt::WaveReduce { dst, op, value } => self.wave_reduce(*dst, *op, value),
            Stmt::MmaF16 { acc, a, b } => self.mma_f16(acc, a, b),
            Stmt::GridBarrier { .. }
            | Stmt::PublishFlag { .. }
            | Stmt::WaitFlag { .. }
            | Stmt::WaitFlagPerLane { .. } => Err(malformed(
                "grid barrier or flag not expanded; run lowered::expand::expand_sync first",
            )),
            // A cache hint with no AMDGPU instruction (gfx906 has no prefetch): nothing.
            Stmt::Comment(_) | Stmt::SchedBarrier | Stmt::PrefetchL2 { .. } => Ok(()),
        }
    }

    // ---- registers and values --------------------------------------------------------------

    fn reg_ptr(&self, r: Reg) -> Result<(PointerValue<'c>, Ty), Error> {
        let p = *self
            .regs
            .get(r.as_u32() as usize)
            .ok_or_else(|| malformed(format!("{r} is not declared")))?;
        Ok((p, self.k.regs[r].ty))
    }

    fn set(&mut self, r: Reg, v: V<'c>) -> Result<(), Error> {
        let (p, ty) = self.reg_ptr(r)?;
        if ty != v.ty {
            return Err(malformed(format!(
                "{r} is {} but is assigned a {} value",
                ty.name(),
                v.ty.name()
            )));
        }
        self.b.build_store(p, v.v).map_err(be)?;
        Ok(())
    }

    fn get(&mut self, r: Reg) -> Result<V<'c>, Error> {
        let (p, ty) = self.reg_ptr(r)?;
        let v = self.b.build_load(reg_ty(self.cx, ty), p, "").map_err(be)?;
        Ok(V { v, ty })
    }

    fn u32c(&self, v: u32) -> IntValue<'c> {
        self.cx.i32_type().const_int(u64::from(v), false)
    }

    /// Calls helper `name` (declaring it in the kernel module on first use).
    fn call(
        &mut self,
        name: &str,
        ret: HTy,
        args: &[HTy],
        vals: &[BasicValueEnum<'c>],
    ) -> Result<inkwell::values::CallSiteValue<'c>, Error> {
        let f = match self.m.get_function(name) {
            Some(f) => f,
            None => {
                let ps: Vec<BasicMetadataTypeEnum> =
                    args.iter().map(|a| self.hty(*a).into()).collect();
                let fty = match ret {
                    HTy::Void => self.cx.void_type().fn_type(&ps, false),
                    r => self.hty(r).fn_type(&ps, false),
                };
                self.m.add_function(name, fty, None)
            }
        };
        let args: Vec<BasicMetadataValueEnum> = vals.iter().map(|v| (*v).into()).collect();
        self.b.build_call(f, &args, "").map_err(be)
    }

    fn call_value(
        &mut self,
        name: &str,
        ret: HTy,
        args: &[HTy],
        vals: &[BasicValueEnum<'c>],
    ) -> Result<BasicValueEnum<'c>, Error> {
        self.call(name, ret, args, vals)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::Llvm(format!("{name} returns no value")))
    }

    fn hty(&self, t: HTy) -> BasicTypeEnum<'c> {
        match t {
            HTy::I32 | HTy::Void => self.cx.i32_type().into(),
            HTy::F32 => self.cx.f32_type().into(),
            HTy::Ptr => self.cx.ptr_type(AddressSpace::from(1u16)).into(),
        }
    }

    /// Attaches `!wavefuse.sync !{!"5.N", !"<ordering>", !"<scope>", !"<summary>"}`.
    fn tag(
        &self,
        call: inkwell::values::CallSiteValue<'c>,
        why: Invariant,
        sync: Option<(Ordering, Scope)>,
    ) -> Result<(), Error> {
        let (o, s) = match sync {
            Some((o, s)) => (order_name(o), scope_name(s)),
            None => ("barrier", "workgroup"),
        };
        let strs = [
            format!("5.{}", why.number()),
            o.to_owned(),
            s.to_owned(),
            why.summary().to_owned(),
        ];
        let vals: Vec<BasicMetadataValueEnum> = strs
            .iter()
            .map(|t| self.cx.metadata_string(t).into())
            .collect();
        let node = self.cx.metadata_node(&vals);
        let inst = match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => v.as_instruction_value(),
            inkwell::values::ValueKind::Instruction(i) => Some(i),
        };
        let inst = inst.ok_or_else(|| Error::Llvm("a call that is not an instruction".into()))?;
        inst.set_metadata(node, self.sync_kind)
            .map_err(|e| Error::Llvm(format!("metadata: {e:?}")))
    }

    // ---- memory ----------------------------------------------------------------------------

    fn elem_ty(&self, m: &MemRef) -> Result<Ty, Error> {
        match &m.base {
            Base::Param(p) | Base::Peer { param: p, .. } => {
                match self.k.params.get(*p).map(|d| &d.kind) {
                    Some(ParamKind::Array { elem, .. } | ParamKind::PeerArrays { elem, .. }) => {
                        Ok(*elem)
                    }
                    _ => Err(malformed(format!("{p} is not an array parameter"))),
                }
            }
            Base::Lds(l) => self
                .k
                .lds
                .get(*l)
                .map(|d| d.elem)
                .ok_or_else(|| malformed(format!("{l} is not declared"))),
        }
    }

    /// Pointer to element `index + offset` of the array `m` addresses.
    fn address(&mut self, m: &MemRef, offset: u32) -> Result<(PointerValue<'c>, Ty), Error> {
        let elem = self.elem_ty(m)?;
        let base = match &m.base {
            Base::Param(p) => {
                if !matches!(self.k.params[*p].kind, ParamKind::Array { .. }) {
                    return Err(malformed(format!("{p} addressed as an array of this rank")));
                }
                self.params[p.as_u32() as usize].into_pointer_value()
            }
            Base::Peer { param, rank } => {
                if !matches!(self.k.params[*param].kind, ParamKind::PeerArrays { .. }) {
                    return Err(malformed(format!("{param} addressed as a peer table")));
                }
                let table = self.params[param.as_u32() as usize].into_pointer_value();
                let rank = self.int(rank, Ty::U32)?;
                let rank = self
                    .b
                    .build_int_z_extend(rank, self.cx.i64_type(), "")
                    .map_err(be)?;
                let gptr = self.cx.ptr_type(AddressSpace::from(1u16));
                // SAFETY (LLVM semantics, not Rust memory): `rank` < tp indexes the table.
                let slot = unsafe {
                    self.b
                        .build_in_bounds_gep(gptr, table, &[rank], "peer.slot")
                }
                .map_err(be)?;
                self.b
                    .build_load(gptr, slot, "peer")
                    .map_err(be)?
                    .into_pointer_value()
            }
            Base::Lds(l) => self
                .lds
                .get(l.as_u32() as usize)
                .ok_or_else(|| malformed(format!("{l} is not declared")))?
                .as_pointer_value(),
        };
        let mut index = self.int(&m.index, Ty::U32)?;
        if offset > 0 {
            index = self
                .b
                .build_int_add(index, self.u32c(offset), "")
                .map_err(be)?;
        }
        // The index is u32: zero-extended, as C++ indexes with an unsigned.
        let index = self
            .b
            .build_int_z_extend(index, self.cx.i64_type(), "")
            .map_err(be)?;
        // SAFETY (LLVM semantics): generated indices stay within the array.
        let p = unsafe {
            self.b
                .build_in_bounds_gep(mem_ty(self.cx, elem), base, &[index], "")
        }
        .map_err(be)?;
        Ok((p, elem))
    }

    fn load(&mut self, dst: &[Reg], m: &MemRef) -> Result<(), Error> {
        let elem = self.elem_ty(m)?;
        for r in dst {
            if self.k.regs[*r].ty != elem {
                return Err(malformed(format!(
                    "{r} is {} but loads a {} element",
                    self.k.regs[*r].ty.name(),
                    elem.name()
                )));
            }
        }
        match vector_words(elem, dst.len()) {
            Some((words, _)) => {
                let (p, _) = self.address(m, 0)?;
                let vty = vec_ty(self.cx, elem, dst.len() as u32);
                let v = self.b.build_load(vty, p, "vec").map_err(be)?;
                set_align(v, words as u32 * 4)?;
                for (i, r) in dst.iter().enumerate() {
                    let e = self
                        .b
                        .build_extract_element(v.into_vector_value(), self.u32c(i as u32), "")
                        .map_err(be)?;
                    self.set(*r, V { v: e, ty: elem })?;
                }
            }
            None => {
                for (i, r) in dst.iter().enumerate() {
                    let (p, _) = self.address(m, i as u32)?;
                    let v = self
                        .b
                        .build_load(mem_ty(self.cx, elem), p, "")
                        .map_err(be)?;
                    set_align(v, elem.bytes() as u32)?;
                    let v = self.bool_from_mem(v, elem)?;
                    self.set(*r, V { v, ty: elem })?;
                }
            }
        }
        Ok(())
    }

    fn store(&mut self, m: &MemRef, values: &[Expr]) -> Result<(), Error> {
        let elem = self.elem_ty(m)?;
        let mut vals = Vec::new();
        for e in values {
            let v = self.expr(e)?;
            if v.ty != elem {
                return Err(malformed(format!(
                    "a {} value stored into a {} array",
                    v.ty.name(),
                    elem.name()
                )));
            }
            vals.push(v.v);
        }
        match vector_words(elem, values.len()) {
            Some((words, _)) => {
                let vty = vec_ty(self.cx, elem, values.len() as u32);
                let mut vec = vty.get_undef();
                for (i, v) in vals.into_iter().enumerate() {
                    vec = self
                        .b
                        .build_insert_element(vec, v, self.u32c(i as u32), "")
                        .map_err(be)?;
                }
                let (p, _) = self.address(m, 0)?;
                let st = self.b.build_store(p, vec).map_err(be)?;
                st.set_alignment(words as u32 * 4)
                    .map_err(|e| Error::Llvm(format!("{e:?}")))?;
            }
            None => {
                for (i, v) in vals.into_iter().enumerate() {
                    let (p, _) = self.address(m, i as u32)?;
                    let v = self.bool_to_mem(v, elem)?;
                    let st = self.b.build_store(p, v).map_err(be)?;
                    st.set_alignment(elem.bytes() as u32)
                        .map_err(|e| Error::Llvm(format!("{e:?}")))?;
                }
            }
        }
        Ok(())
    }

    /// Bool is an i8 in memory and an i1 in registers.
    fn bool_from_mem(&self, v: BasicValueEnum<'c>, elem: Ty) -> Result<BasicValueEnum<'c>, Error> {
        if elem != Ty::Bool {
            return Ok(v);
        }
        let z = self.cx.i8_type().const_zero();
        Ok(self
            .b
            .build_int_compare(IP::NE, v.into_int_value(), z, "")
            .map_err(be)?
            .into())
    }

    fn bool_to_mem(&self, v: BasicValueEnum<'c>, elem: Ty) -> Result<BasicValueEnum<'c>, Error> {
        if elem != Ty::Bool {
            return Ok(v);
        }
        Ok(self
            .b
            .build_int_z_extend(v.into_int_value(), self.cx.i8_type(), "")
            .map_err(be)?
            .into())
    }

    // ---- synchronisation -------------------------------------------------------------------

    fn atom_ty(&self, elem: Ty) -> Result<AtomTy, Error> {
        match elem {
            Ty::U32 => Ok(AtomTy::U32),
            Ty::I32 => Ok(AtomTy::I32),
            Ty::F32 => Ok(AtomTy::F32),
            t => Err(Error::Unsupported(format!(
                "atomic access to a {} element",
                t.name()
            ))),
        }
    }

    fn global_address(&mut self, m: &MemRef) -> Result<(PointerValue<'c>, Ty), Error> {
        if matches!(m.base, Base::Lds(_)) {
            return Err(Error::Unsupported(
                "atomics on LDS (the LLVM back end's helpers address global memory)".into(),
            ));
        }
        self.address(m, 0)
    }

    fn atomic(
        &mut self,
        dst: Option<Reg>,
        op: AtomicOp,
        mem: &MemRef,
        value: Option<&Expr>,
        (o, s): (Ordering, Scope),
        why: Invariant,
    ) -> Result<(), Error> {
        let (p, elem) = self.global_address(mem)?;
        let aty = self.atom_ty(elem)?;
        let (name, ret, args) = self.lib.atomic(op, aty, o, s).map_err(Error::Malformed)?;
        let mut vals: Vec<BasicValueEnum> = vec![p.into()];
        if op != AtomicOp::Load {
            let v = value.ok_or_else(|| malformed(format!("atomic {op:?} without an operand")))?;
            let v = self.expr(v)?;
            if v.ty != elem {
                return Err(malformed(format!(
                    "a {} value where a {} is needed",
                    v.ty.name(),
                    elem.name()
                )));
            }
            vals.push(v.v);
        }
        let call = self.call(&name, ret, &args, &vals)?;
        self.tag(call, why, Some((o, s)))?;
        match (dst, op) {
            (Some(_), AtomicOp::Store) => Err(malformed("an atomic store has no result")),
            (None, AtomicOp::Load) => Err(malformed("an atomic load without a destination")),
            (Some(r), _) => {
                let v = call
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| Error::Llvm("atomic without a value".into()))?;
                self.set(r, V { v, ty: elem })
            }
            (None, _) => Ok(()),
        }
    }

    /// A bounded spin: poll until `(i32)(value − target) >= 0`, at most `budget` polls; on
    /// timeout store the site's code into the error word (relaxed, system) and continue (§5.10).
    fn wait_ge(&mut self, s: &Stmt) -> Result<(), Error> {
        let Stmt::WaitGe {
            mem,
            target,
            ordering,
            scope,
            budget,
            error,
            code,
            why,
        } = s
        else {
            return Err(malformed("not a wait"));
        };
        if *budget == 0 {
            return Err(malformed("a wait with a budget of zero loads"));
        }
        let target = self.int(target, Ty::U32)?;
        let (p, elem) = self.global_address(mem)?;
        let (ep, eelem) = self.global_address(error)?;
        if elem != Ty::U32 || eelem != Ty::U32 {
            return Err(malformed(
                "a wait polls a u32 counter and writes a u32 error word",
            ));
        }
        let (poll, ret, args) = self
            .lib
            .atomic(AtomicOp::Load, AtomTy::U32, *ordering, *scope)
            .map_err(Error::Malformed)?;
        let (report, _, rargs) = self
            .lib
            .atomic(
                AtomicOp::Store,
                AtomTy::U32,
                Ordering::Relaxed,
                Scope::System,
            )
            .map_err(Error::Malformed)?;
        let pause = self.lib.pause();
        let pre = self
            .b
            .get_insert_block()
            .ok_or_else(|| Error::Llvm("no block".into()))?;
        let head = self.block_named("wait.poll");
        let more = self.block_named("wait.more");
        let timeout = self.block_named("wait.timeout");
        let next = self.block_named("wait.next");
        let done = self.block_named("wait.done");
        let i32t = self.cx.i32_type();
        self.b.build_unconditional_branch(head).map_err(be)?;
        // head: polls = phi; v = poll(); if (i32)(v - target) >= 0 → done
        self.b.position_at_end(head);
        let polls = self.b.build_phi(i32t, "polls").map_err(be)?;
        let call = self.call(&poll, ret, &args, &[p.into()])?;
        self.tag(call, *why, Some((*ordering, *scope)))?;
        let v = call
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::Llvm("poll without a value".into()))?
            .into_int_value();
        let diff = self.b.build_int_sub(v, target, "").map_err(be)?;
        let reached = self
            .b
            .build_int_compare(IP::SGE, diff, i32t.const_zero(), "reached")
            .map_err(be)?;
        self.b
            .build_conditional_branch(reached, done, more)
            .map_err(be)?;
        // more: if polls == budget → timeout else next
        self.b.position_at_end(more);
        let out = self
            .b
            .build_int_compare(
                IP::EQ,
                polls.as_basic_value().into_int_value(),
                self.u32c(*budget),
                "out",
            )
            .map_err(be)?;
        self.b
            .build_conditional_branch(out, timeout, next)
            .map_err(be)?;
        self.b.position_at_end(timeout);
        let call = self.call(
            &report,
            HTy::Void,
            &rargs,
            &[ep.into(), self.u32c(*code).into()],
        )?;
        self.tag(
            call,
            Invariant::BoundedSpin,
            Some((Ordering::Relaxed, Scope::System)),
        )?;
        self.b.build_unconditional_branch(done).map_err(be)?;
        self.b.position_at_end(next);
        let inc = self
            .b
            .build_int_add(polls.as_basic_value().into_int_value(), self.u32c(1), "")
            .map_err(be)?;
        self.call(&pause, HTy::Void, &[], &[])?;
        self.b.build_unconditional_branch(head).map_err(be)?;
        polls.add_incoming(&[(&self.u32c(1), pre), (&inc, next)]);
        self.b.position_at_end(done);
        Ok(())
    }

    fn wave_reduce(&mut self, dst: Reg, op: ReduceKind, value: &Expr) -> Result<(), Error> {
        let mut v = self.expr(value)?;
        if !matches!(v.ty, Ty::F32 | Ty::U32 | Ty::I32) {
            return Err(Error::Unsupported(format!(
                "wave reduction of {}",
                v.ty.name()
            )));
        }
        let shfl = self.lib.shuffle_xor();
        let mut mask = self.k.wave_size() / 2;
        while mask > 0 {
            let bits = if v.ty == Ty::F32 {
                self.b
                    .build_bit_cast(v.v, self.cx.i32_type(), "")
                    .map_err(be)?
            } else {
                v.v
            };
            let other = self.call_value(
                &shfl,
                HTy::I32,
                &[HTy::I32, HTy::I32],
                &[bits, self.u32c(mask).into()],
            )?;
            let other = if v.ty == Ty::F32 {
                self.b
                    .build_bit_cast(other, self.cx.f32_type(), "")
                    .map_err(be)?
            } else {
                other
            };
            let o = V { v: other, ty: v.ty };
            let bop = match op {
                ReduceKind::Sum => BinOp::Add,
                ReduceKind::Max => BinOp::Max,
            };
            v = self.binary_values(bop, v, o)?;
            mask /= 2;
        }
        self.set(dst, v)
    }

    /// `acc += A·B`, m16n8k16 FP16 with f32 accumulation: the PTX instruction (as the CUDA
    /// dialect), inline, since the fragment layout is PTX's. AMDGPU (gfx906) has no MMA.
    fn mma_f16(&mut self, acc: &[Reg; 4], a: &[Reg; 4], b: &[Reg; 2]) -> Result<(), Error> {
        if self.lib.flavor() != Flavor::Nvptx {
            return Err(Error::Unsupported("FP16 mma (m16n8k16) on AMDGPU".into()));
        }
        let f32t = self.cx.f32_type();
        let i32t = self.cx.i32_type();
        let ret = self.cx.struct_type(&[f32t.into(); 4], false);
        let mut params: Vec<BasicMetadataTypeEnum> = vec![f32t.into(); 4];
        params.extend([BasicMetadataTypeEnum::from(i32t); 6]);
        let fty = ret.fn_type(&params, false);
        let asm = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, \
                   {$8, $9, $10, $11}, {$12, $13}, {$4, $5, $6, $7};"
            .to_owned();
        let constraints = "=f,=f,=f,=f,0,1,2,3,r,r,r,r,r,r".to_owned();
        let ptr = self
            .cx
            .create_inline_asm(fty, asm, constraints, true, false, None, false);
        let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
        for (regs, want) in [(&acc[..], Ty::F32), (&a[..], Ty::U32), (&b[..], Ty::U32)] {
            for r in regs {
                let v = self.get(*r)?;
                if v.ty != want {
                    return Err(malformed(format!("mma operand {r} is {}", v.ty.name())));
                }
                args.push(v.v.into());
            }
        }
        let call = self
            .b
            .build_indirect_call(fty, ptr, &args, "mma")
            .map_err(be)?;
        let out = call
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::Llvm("mma without a value".into()))?
            .into_struct_value();
        for (i, r) in acc.iter().enumerate() {
            let v = self.b.build_extract_value(out, i as u32, "").map_err(be)?;
            self.set(*r, V { v, ty: Ty::F32 })?;
        }
        Ok(())
    }

    // ---- control flow ----------------------------------------------------------------------

    fn for_loop(
        &mut self,
        var: Reg,
        start: &Expr,
        end: &Expr,
        step: &Expr,
        body: &Block,
    ) -> Result<(), Error> {
        let s = self.expr(start)?;
        self.set(var, s)?;
        let head = self.block_named("for.head");
        let inner = self.block_named("for.body");
        let exit = self.block_named("for.exit");
        self.b.build_unconditional_branch(head).map_err(be)?;
        self.b.position_at_end(head);
        let cur = self.get(var)?;
        let e = self.expr(end)?;
        let c = self.binary_values(BinOp::Lt, cur, e)?;
        self.b
            .build_conditional_branch(c.v.into_int_value(), inner, exit)
            .map_err(be)?;
        self.b.position_at_end(inner);
        self.block(body)?;
        let cur = self.get(var)?;
        let st = self.expr(step)?;
        let n = self.binary_values(BinOp::Add, cur, st)?;
        self.set(var, n)?;
        self.b.build_unconditional_branch(head).map_err(be)?;
        self.b.position_at_end(exit);
        Ok(())
    }

    fn if_else(&mut self, cond: &Expr, then_body: &Block, else_body: &Block) -> Result<(), Error> {
        let c = self.int(cond, Ty::Bool)?;
        let then_b = self.block_named("if.then");
        let else_b = if else_body.is_empty() {
            None
        } else {
            Some(self.block_named("if.else"))
        };
        let join = self.block_named("if.end");
        self.b
            .build_conditional_branch(c, then_b, else_b.unwrap_or(join))
            .map_err(be)?;
        self.b.position_at_end(then_b);
        self.block(then_body)?;
        self.b.build_unconditional_branch(join).map_err(be)?;
        if let Some(eb) = else_b {
            self.b.position_at_end(eb);
            self.block(else_body)?;
            self.b.build_unconditional_branch(join).map_err(be)?;
        }
        self.b.position_at_end(join);
        Ok(())
    }

    // ---- expressions -----------------------------------------------------------------------

    /// An expression that must have type `want`, as an integer value.
    fn int(&mut self, e: &Expr, want: Ty) -> Result<IntValue<'c>, Error> {
        let v = self.expr(e)?;
        if v.ty != want {
            return Err(malformed(format!(
                "a {} value where a {} is needed",
                v.ty.name(),
                want.name()
            )));
        }
        Ok(v.v.into_int_value())
    }

    fn expr(&mut self, e: &Expr) -> Result<V<'c>, Error> {
        Ok(match e {
            Expr::Int(v, t) => self.constant_int(*v, *t)?,
            Expr::Float(v, t) => self.constant_float(*v, *t)?,
            Expr::Reg(r) => self.get(*r)?,
            Expr::Param(p) => match self.k.params.get(*p).map(|d| &d.kind) {
                Some(ParamKind::Scalar { ty, .. }) => V {
                    v: self.params[p.as_u32() as usize],
                    ty: *ty,
                },
                _ => return Err(malformed(format!("{p} is not a scalar parameter"))),
            },
            Expr::Special(s) => self.special(*s)?,
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                self.binary_values(*op, a, b)?
            }
            Expr::Un(op, a) => {
                let a = self.expr(a)?;
                self.unary(*op, a)?
            }
            Expr::Cast(to, a) => {
                let a = self.expr(a)?;
                self.cast(*to, a)?
            }
            Expr::Bitcast(to, a) => {
                let a = self.expr(a)?;
                self.bitcast(*to, a)?
            }
            Expr::PackHalf2(lo, hi) => {
                let (lo, hi) = (self.expr(lo)?, self.expr(hi)?);
                if lo.ty != Ty::F16 || hi.ty != Ty::F16 {
                    return Err(malformed("pack_half2 of non-f16 values"));
                }
                let bits = |s: &Self, v: V<'c>| -> Result<IntValue<'c>, Error> {
                    let h =
                        s.b.build_bit_cast(v.v, s.cx.i16_type(), "")
                            .map_err(be)?
                            .into_int_value();
                    s.b.build_int_z_extend(h, s.cx.i32_type(), "").map_err(be)
                };
                let (l, h) = (bits(self, lo)?, bits(self, hi)?);
                let h = self.b.build_left_shift(h, self.u32c(16), "").map_err(be)?;
                let v = self.b.build_or(l, h, "half2").map_err(be)?;
                V {
                    v: v.into(),
                    ty: Ty::U32,
                }
            }
            Expr::SubHalf2(a, b) => {
                // Lane-wise FP16 subtraction, round to nearest even (`sub.rn.f16x2` on sm_90).
                let (a, b) = (self.int(a, Ty::U32)?, self.int(b, Ty::U32)?);
                let h2 = self.cx.f16_type().vec_type(2);
                let x = self
                    .b
                    .build_bit_cast(a, h2, "")
                    .map_err(be)?
                    .into_vector_value();
                let y = self
                    .b
                    .build_bit_cast(b, h2, "")
                    .map_err(be)?
                    .into_vector_value();
                let d = self.b.build_float_sub(x, y, "").map_err(be)?;
                let v = self
                    .b
                    .build_bit_cast(d, self.cx.i32_type(), "")
                    .map_err(be)?;
                V { v, ty: Ty::U32 }
            }
            Expr::FmaHalf2(a, b, c) => {
                // Lane-wise FP16 FMA, one rounding: `llvm.fma.v2f16` (`fma.rn.f16x2` on sm_90,
                // `v_pk_fma_f16` on gfx906).
                let h2 = self.cx.f16_type().vec_type(2);
                let mut vs = Vec::with_capacity(3);
                for e in [a, b, c] {
                    let w = self.int(e, Ty::U32)?;
                    vs.push(self.b.build_bit_cast(w, h2, "").map_err(be)?);
                }
                let f = match self.m.get_function("llvm.fma.v2f16") {
                    Some(f) => f,
                    None => {
                        let fty = h2.fn_type(&[h2.into(), h2.into(), h2.into()], false);
                        self.m.add_function("llvm.fma.v2f16", fty, None)
                    }
                };
                let args: Vec<BasicMetadataValueEnum> = vs.iter().map(|v| (*v).into()).collect();
                let d = self
                    .b
                    .build_call(f, &args, "")
                    .map_err(be)?
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| Error::Llvm("llvm.fma.v2f16 returns no value".into()))?;
                let v = self
                    .b
                    .build_bit_cast(d, self.cx.i32_type(), "")
                    .map_err(be)?;
                V { v, ty: Ty::U32 }
            }
            Expr::Dot2F16(a, b, c) => {
                // `llvm.amdgcn.fdot2` (v_dot2_f32_f16, clamp off); NVPTX has no such instruction.
                if self.lib.flavor() == Flavor::Nvptx {
                    return Err(Error::Unsupported("FP16 dot2 into f32 on NVPTX".into()));
                }
                let h2 = self.cx.f16_type().vec_type(2);
                let f32t = self.cx.f32_type();
                let mut args: Vec<BasicMetadataValueEnum> = Vec::with_capacity(4);
                for e in [a, b] {
                    let w = self.int(e, Ty::U32)?;
                    args.push(self.b.build_bit_cast(w, h2, "").map_err(be)?.into());
                }
                let acc = self.expr(c)?;
                if acc.ty != Ty::F32 {
                    return Err(malformed("dot2 accumulator is not f32"));
                }
                args.push(acc.v.into());
                args.push(self.cx.bool_type().const_int(0, false).into());
                let f = match self.m.get_function("llvm.amdgcn.fdot2") {
                    Some(f) => f,
                    None => {
                        let bool_t = self.cx.bool_type();
                        let fty = f32t
                            .fn_type(&[h2.into(), h2.into(), f32t.into(), bool_t.into()], false);
                        self.m.add_function("llvm.amdgcn.fdot2", fty, None)
                    }
                };
                let v = self
                    .b
                    .build_call(f, &args, "")
                    .map_err(be)?
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| Error::Llvm("llvm.amdgcn.fdot2 returns no value".into()))?;
                V { v, ty: Ty::F32 }
            }
            Expr::Dot4I8(a, b, c) => {
                // `llvm.amdgcn.sdot4` (v_dot4_i32_i8, clamp off) or `llvm.nvvm.idp4a.s.s` (dp4a).
                let i32t = self.cx.i32_type();
                let mut args: Vec<BasicMetadataValueEnum> = Vec::with_capacity(4);
                for (e, t) in [(a, Ty::U32), (b, Ty::U32), (c, Ty::I32)] {
                    args.push(self.int(e, t)?.into());
                }
                let name = if self.lib.flavor() == Flavor::Nvptx {
                    "llvm.nvvm.idp4a.s.s"
                } else {
                    args.push(self.cx.bool_type().const_int(0, false).into());
                    "llvm.amdgcn.sdot4"
                };
                let f = match self.m.get_function(name) {
                    Some(f) => f,
                    None => {
                        let mut params = vec![i32t.into(), i32t.into(), i32t.into()];
                        if args.len() == 4 {
                            params.push(self.cx.bool_type().into());
                        }
                        self.m
                            .add_function(name, i32t.fn_type(&params, false), None)
                    }
                };
                let v = self
                    .b
                    .build_call(f, &args, "")
                    .map_err(be)?
                    .try_as_basic_value()
                    .basic()
                    .ok_or_else(|| Error::Llvm(format!("{name} returns no value")))?;
                V { v, ty: Ty::I32 }
            }
            Expr::Select(c, a, b) => {
                let c = self.int(c, Ty::Bool)?;
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                if a.ty != b.ty {
                    return Err(malformed("select arms of different types"));
                }
                let v = self.b.build_select(c, a.v, b.v, "").map_err(be)?;
                V { v, ty: a.ty }
            }
            Expr::Bfe {
                value,
                offset,
                width,
            } => {
                let v = self.int(value, Ty::U32)?;
                let o = self.int(offset, Ty::U32)?;
                let sh = self.b.build_right_shift(v, o, false, "").map_err(be)?;
                let r = if *width >= 32 {
                    sh
                } else {
                    let mask = self.u32c(((1u64 << width) - 1) as u32);
                    self.b.build_and(sh, mask, "").map_err(be)?
                };
                V {
                    v: r.into(),
                    ty: Ty::U32,
                }
            }
            Expr::Fma(a, b, c) => {
                let vs = [self.expr(a)?, self.expr(b)?, self.expr(c)?];
                if vs.iter().any(|v| v.ty != Ty::F32) {
                    return Err(malformed("fma of non-f32 operands"));
                }
                let (name, _) = self.lib.math("fma").map_err(Error::Malformed)?;
                let v = self.call_value(
                    &name,
                    HTy::F32,
                    &[HTy::F32; 3],
                    &[vs[0].v, vs[1].v, vs[2].v],
                )?;
                V { v, ty: Ty::F32 }
            }
        })
    }

    fn constant_int(&self, v: i64, t: Ty) -> Result<V<'c>, Error> {
        let bad = || malformed(format!("constant {v} does not fit {}", t.name()));
        let c: BasicValueEnum = match t {
            Ty::Bool => self
                .cx
                .bool_type()
                .const_int(u64::from(v != 0), false)
                .into(),
            Ty::U32 => self.u32c(u32::try_from(v).map_err(|_| bad())?).into(),
            Ty::I32 => {
                let x = i32::try_from(v).map_err(|_| bad())?;
                self.cx.i32_type().const_int(x as u32 as u64, false).into()
            }
            Ty::I8 => {
                let x = i8::try_from(v).map_err(|_| bad())?;
                self.cx.i8_type().const_int(x as u8 as u64, false).into()
            }
            Ty::F32 | Ty::F16 => return self.constant_float(v as f64, t),
        };
        Ok(V { v: c, ty: t })
    }

    fn constant_float(&self, v: f64, t: Ty) -> Result<V<'c>, Error> {
        // Rounded to f32 first, as the C++ writer's literals are (then to f16 where needed).
        let f = v as f32;
        let c: BasicValueEnum = match t {
            Ty::F32 => self.cx.f32_type().const_float(f64::from(f)).into(),
            Ty::F16 => {
                // The f16 nearest to the f32 (even on ties), exact as a double.
                let h = half::f16::from_f32(f).to_f64();
                self.cx.f16_type().const_float(h).into()
            }
            _ => return Err(malformed(format!("float constant {v} typed {}", t.name()))),
        };
        Ok(V { v: c, ty: t })
    }

    fn special(&mut self, s: Special) -> Result<V<'c>, Error> {
        let wave = self.k.wave_size();
        let which = match s {
            Special::LocalId | Special::LaneId => "local_id",
            Special::WorkgroupId => "workgroup_id",
            Special::NumWorkgroups => "num_workgroups",
            Special::WaveId => "wave_id",
        };
        let name = self.lib.special(which, wave).map_err(Error::Llvm)?;
        let mut v = self.call_value(&name, HTy::I32, &[], &[])?.into_int_value();
        if s == Special::LaneId {
            // Waves are consecutive lanes of a 1-D workgroup whose size is a multiple of the wave.
            v = self
                .b
                .build_and(v, self.u32c(wave - 1), "lane")
                .map_err(be)?;
        }
        Ok(V {
            v: v.into(),
            ty: Ty::U32,
        })
    }

    fn binary_values(&mut self, op: BinOp, a: V<'c>, b: V<'c>) -> Result<V<'c>, Error> {
        if a.ty != b.ty {
            return Err(malformed(format!(
                "{op:?} of {} and {}",
                a.ty.name(),
                b.ty.name()
            )));
        }
        let ty = a.ty;
        if ty == Ty::F16 {
            if !op.is_comparison() {
                return Err(Error::Unsupported(format!(
                    "FP16 arithmetic ({op:?}); convert to f32 first"
                )));
            }
            // Comparisons of FP16 values: exact in f32.
            let (x, y) = (self.cast(Ty::F32, a)?, self.cast(Ty::F32, b)?);
            return self.binary_values(op, x, y);
        }
        let bool_v = |v: IntValue<'c>| V {
            v: v.into(),
            ty: Ty::Bool,
        };
        if ty == Ty::F32 {
            let (x, y) = (a.v.into_float_value(), b.v.into_float_value());
            let f = |v: inkwell::values::FloatValue<'c>| V { v: v.into(), ty };
            let cmp = |p: FP, s: &Self| -> Result<V<'c>, Error> {
                Ok(bool_v(s.b.build_float_compare(p, x, y, "").map_err(be)?))
            };
            return match op {
                BinOp::Add => Ok(f(self.b.build_float_add(x, y, "").map_err(be)?)),
                BinOp::Sub => Ok(f(self.b.build_float_sub(x, y, "").map_err(be)?)),
                BinOp::Mul => Ok(f(self.b.build_float_mul(x, y, "").map_err(be)?)),
                BinOp::Div => Ok(f(self.b.build_float_div(x, y, "").map_err(be)?)),
                BinOp::Rem => Ok(f(self.b.build_float_rem(x, y, "").map_err(be)?)),
                BinOp::Min | BinOp::Max => {
                    let which = if op == BinOp::Min { "min" } else { "max" };
                    let (name, _) = self.lib.math(which).map_err(Error::Malformed)?;
                    let v = self.call_value(&name, HTy::F32, &[HTy::F32; 2], &[a.v, b.v])?;
                    Ok(V { v, ty })
                }
                // C++ `<` … on floats: ordered, except `!=` which is unordered.
                BinOp::Lt => cmp(FP::OLT, self),
                BinOp::Le => cmp(FP::OLE, self),
                BinOp::Eq => cmp(FP::OEQ, self),
                BinOp::Ne => cmp(FP::UNE, self),
                BinOp::Ge => cmp(FP::OGE, self),
                BinOp::Gt => cmp(FP::OGT, self),
                BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
                    Err(malformed(format!("{op:?} on f32")))
                }
            };
        }
        let signed = matches!(ty, Ty::I32 | Ty::I8);
        let (x, y) = (a.v.into_int_value(), b.v.into_int_value());
        let b_ = &self.b;
        let i = |v: IntValue<'c>| V { v: v.into(), ty };
        let pred = |s: IP, u: IP| if signed { s } else { u };
        Ok(match op {
            BinOp::Add => i(b_.build_int_add(x, y, "").map_err(be)?),
            BinOp::Sub => i(b_.build_int_sub(x, y, "").map_err(be)?),
            BinOp::Mul => i(b_.build_int_mul(x, y, "").map_err(be)?),
            BinOp::Div if signed => i(b_.build_int_signed_div(x, y, "").map_err(be)?),
            BinOp::Div => i(b_.build_int_unsigned_div(x, y, "").map_err(be)?),
            BinOp::Rem if signed => i(b_.build_int_signed_rem(x, y, "").map_err(be)?),
            BinOp::Rem => i(b_.build_int_unsigned_rem(x, y, "").map_err(be)?),
            BinOp::Min | BinOp::Max => {
                let p = match op {
                    BinOp::Min => pred(IP::SLT, IP::ULT),
                    _ => pred(IP::SGT, IP::UGT),
                };
                let c = b_.build_int_compare(p, x, y, "").map_err(be)?;
                V {
                    v: b_.build_select(c, a.v, b.v, "").map_err(be)?,
                    ty,
                }
            }
            BinOp::And => i(b_.build_and(x, y, "").map_err(be)?),
            BinOp::Or => i(b_.build_or(x, y, "").map_err(be)?),
            BinOp::Xor => i(b_.build_xor(x, y, "").map_err(be)?),
            BinOp::Shl => i(b_.build_left_shift(x, y, "").map_err(be)?),
            BinOp::Shr => i(b_.build_right_shift(x, y, signed, "").map_err(be)?),
            BinOp::Lt => bool_v(
                b_.build_int_compare(pred(IP::SLT, IP::ULT), x, y, "")
                    .map_err(be)?,
            ),
            BinOp::Le => bool_v(
                b_.build_int_compare(pred(IP::SLE, IP::ULE), x, y, "")
                    .map_err(be)?,
            ),
            BinOp::Eq => bool_v(b_.build_int_compare(IP::EQ, x, y, "").map_err(be)?),
            BinOp::Ne => bool_v(b_.build_int_compare(IP::NE, x, y, "").map_err(be)?),
            BinOp::Ge => bool_v(
                b_.build_int_compare(pred(IP::SGE, IP::UGE), x, y, "")
                    .map_err(be)?,
            ),
            BinOp::Gt => bool_v(
                b_.build_int_compare(pred(IP::SGT, IP::UGT), x, y, "")
                    .map_err(be)?,
            ),
        })
    }

    fn unary(&mut self, op: UnOp, a: V<'c>) -> Result<V<'c>, Error> {
        let ty = a.ty;
        let unsupported = || Error::Unsupported(format!("{op:?} on {}", ty.name()));
        let math = |s: &mut Self, which| -> Result<V<'c>, Error> {
            let (name, _) = s.lib.math(which).map_err(Error::Malformed)?;
            Ok(V {
                v: s.call_value(&name, HTy::F32, &[HTy::F32], &[a.v])?,
                ty,
            })
        };
        Ok(match (op, ty) {
            (_, Ty::F16) | (UnOp::Neg, Ty::Bool) | (UnOp::Not, Ty::F32) => {
                return Err(unsupported());
            }
            (UnOp::Neg, Ty::F32) => V {
                v: self
                    .b
                    .build_float_neg(a.v.into_float_value(), "")
                    .map_err(be)?
                    .into(),
                ty,
            },
            (UnOp::Neg, _) => V {
                v: self
                    .b
                    .build_int_neg(a.v.into_int_value(), "")
                    .map_err(be)?
                    .into(),
                ty,
            },
            (UnOp::Not, _) => V {
                v: self
                    .b
                    .build_not(a.v.into_int_value(), "")
                    .map_err(be)?
                    .into(),
                ty,
            },
            (UnOp::Abs, Ty::F32) => math(self, "abs")?,
            (UnOp::Abs, Ty::U32) => a,
            (UnOp::Abs, Ty::I32 | Ty::I8) => {
                let x = a.v.into_int_value();
                let n = self.b.build_int_neg(x, "").map_err(be)?;
                let neg = self
                    .b
                    .build_int_compare(IP::SLT, x, x.get_type().const_zero(), "")
                    .map_err(be)?;
                V {
                    v: self.b.build_select(neg, n, x, "").map_err(be)?,
                    ty,
                }
            }
            (UnOp::Exp, Ty::F32) => math(self, "exp")?,
            (UnOp::Rsqrt, Ty::F32) => math(self, "rsqrt")?,
            (UnOp::Abs | UnOp::Exp | UnOp::Rsqrt, _) => return Err(unsupported()),
        })
    }

    fn bitcast(&mut self, to: Ty, a: V<'c>) -> Result<V<'c>, Error> {
        let ok = |t: Ty| matches!(t, Ty::U32 | Ty::I32 | Ty::F32);
        if !ok(a.ty) || !ok(to) {
            return Err(malformed(format!(
                "bitcast of {} to {}",
                a.ty.name(),
                to.name()
            )));
        }
        if a.ty.is_float() == to.is_float() {
            return Ok(V { v: a.v, ty: to });
        }
        let v = self
            .b
            .build_bit_cast(a.v, reg_ty(self.cx, to), "")
            .map_err(be)?;
        Ok(V { v, ty: to })
    }

    fn cast(&mut self, to: Ty, a: V<'c>) -> Result<V<'c>, Error> {
        let from = a.ty;
        if from == to {
            return Ok(a);
        }
        let b = &self.b;
        let t = reg_ty(self.cx, to);
        let v: BasicValueEnum = match (from, to) {
            (_, Ty::Bool) if from.is_float() => return Err(malformed("float → bool conversion")),
            (_, Ty::Bool) => {
                let x = a.v.into_int_value();
                b.build_int_compare(IP::NE, x, x.get_type().const_zero(), "")
                    .map_err(be)?
                    .into()
            }
            (Ty::F16, Ty::F32) => b
                .build_float_ext(a.v.into_float_value(), self.cx.f32_type(), "")
                .map_err(be)?
                .into(),
            (Ty::F32, Ty::F16) => b
                .build_float_trunc(a.v.into_float_value(), self.cx.f16_type(), "")
                .map_err(be)?
                .into(),
            (Ty::F16, _) => {
                // Through f32, as the C++ writer converts.
                let f = self.cast(Ty::F32, a)?;
                return self.cast(to, f);
            }
            (_, Ty::F16) => {
                let f = self.cast(Ty::F32, a)?;
                return self.cast(Ty::F16, f);
            }
            (Ty::F32, _) => {
                let x = a.v.into_float_value();
                let it = t.into_int_type();
                if to == Ty::I32 || to == Ty::I8 {
                    b.build_float_to_signed_int(x, it, "").map_err(be)?.into()
                } else {
                    b.build_float_to_unsigned_int(x, it, "").map_err(be)?.into()
                }
            }
            (_, Ty::F32) => {
                let x = a.v.into_int_value();
                let ft = self.cx.f32_type();
                if matches!(from, Ty::I32 | Ty::I8) {
                    b.build_signed_int_to_float(x, ft, "").map_err(be)?.into()
                } else {
                    b.build_unsigned_int_to_float(x, ft, "").map_err(be)?.into()
                }
            }
            _ => {
                // Integer ↔ integer: C conversions (sign-extend from signed sources, zero-extend
                // from unsigned and bool, truncate to narrower).
                let x = a.v.into_int_value();
                let signed = matches!(from, Ty::I32 | Ty::I8);
                b.build_int_cast_sign_flag(x, t.into_int_type(), signed, "")
                    .map_err(be)?
                    .into()
            }
        };
        Ok(V { v, ty: to })
    }
}

fn set_align(v: BasicValueEnum<'_>, align: u32) -> Result<(), Error> {
    v.as_instruction_value()
        .ok_or_else(|| Error::Llvm("a load that is not an instruction".into()))?
        .set_alignment(align)
        .map_err(|e| Error::Llvm(format!("{e:?}")))
}

/// The LLVM type of a register.
pub(super) fn reg_ty(cx: &Context, t: Ty) -> BasicTypeEnum<'_> {
    match t {
        Ty::Bool => cx.bool_type().into(),
        Ty::I8 => cx.i8_type().into(),
        Ty::I32 | Ty::U32 => cx.i32_type().into(),
        Ty::F16 => cx.f16_type().into(),
        Ty::F32 => cx.f32_type().into(),
    }
}

/// The LLVM type of an array element (a bool is a byte in memory).
fn mem_ty(cx: &Context, t: Ty) -> BasicTypeEnum<'_> {
    match t {
        Ty::Bool => cx.i8_type().into(),
        t => reg_ty(cx, t),
    }
}

/// `<n x elem>` for a vector access.
fn vec_ty(cx: &Context, elem: Ty, n: u32) -> inkwell::types::VectorType<'_> {
    match mem_ty(cx, elem) {
        BasicTypeEnum::FloatType(t) => t.vec_type(n),
        BasicTypeEnum::IntType(t) => t.vec_type(n),
        _ => cx.i32_type().vec_type(n), // not reached: elements are ints or floats
    }
}
