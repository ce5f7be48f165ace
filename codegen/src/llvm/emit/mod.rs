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
use crate::back::{Names, vector_words};
use crate::lowered::{
    Access, AtomicOp, Base, BinOp, Block, Expr, Invariant, LoweredInfo, LoweredKernel, MemRef,
    ParamKind, ReduceKind, Reg, Special, Stmt, Ty, UnOp,
};

mod control;
mod expr;
mod memory;
mod sync;

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
    /// The validator's facts about `k`.
    info: &'k LoweredInfo,
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
        info: &'k LoweredInfo,
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
            info,
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
    pub fn kernel(&mut self) -> Result<(), Error> {
        let k = self.k;
        let names = Names::new(k);
        for (i, (p, d)) in k.params.iter().enumerate() {
            let v = self
                .f
                .get_nth_param(i as u32)
                .ok_or_else(|| malformed("parameter count"))?;
            v.set_name(names.param(p));
            if let ParamKind::Array { access, .. } = &d.kind {
                if !self.info.is_atomic(p) {
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
            Stmt::AsyncCopy { dst, src, words } => self.copy(dst, src, *words),
            // Copies are synchronous here: nothing to commit or wait for.
            Stmt::AsyncCommit | Stmt::AsyncWait { .. } => Ok(()),
            // A cache hint with no AMDGPU instruction (gfx906 has no prefetch): nothing.
            Stmt::Comment(_) | Stmt::SchedBarrier | Stmt::StreamWait | Stmt::PrefetchL2 { .. } => {
                Ok(())
            }
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
