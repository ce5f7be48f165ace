//! Synchronisation and wave operations: atomics, bounded waits, wave reductions, the tensor-core
//! MMA; every call tagged with its `!wavefuse.sync` invariant.

use super::*;

impl<'c> Emitter<'c, '_> {
    pub(super) fn atom_ty(&self, elem: Ty) -> Result<AtomTy, Error> {
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

    pub(super) fn global_address(&mut self, m: &MemRef) -> Result<(PointerValue<'c>, Ty), Error> {
        if matches!(m.base, Base::Lds(_)) {
            return Err(Error::Unsupported(
                "atomics on LDS (the LLVM back end's helpers address global memory)".into(),
            ));
        }
        self.address(m, 0)
    }

    pub(super) fn atomic(
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
    pub(super) fn wait_ge(&mut self, s: &Stmt) -> Result<(), Error> {
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

    pub(super) fn wave_reduce(
        &mut self,
        dst: Reg,
        op: ReduceKind,
        value: &Expr,
    ) -> Result<(), Error> {
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
    pub(super) fn mma_f16(
        &mut self,
        acc: &[Reg; 4],
        a: &[Reg; 4],
        b: &[Reg; 2],
    ) -> Result<(), Error> {
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
}
