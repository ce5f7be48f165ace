//! Memory: addresses of array elements, loads and stores (scalar and vector), bools in memory.

use super::*;

impl<'c> Emitter<'c, '_> {
    /// The element type of the array `m` addresses, from the validator's facts.
    pub(super) fn elem_ty(&self, m: &MemRef) -> Result<Ty, Error> {
        self.info.elem(m).ok_or_else(|| {
            malformed(match &m.base {
                Base::Param(p) | Base::Peer { param: p, .. } => {
                    format!("{p} is not an array parameter")
                }
                Base::Lds(l) => format!("{l} is not declared"),
            })
        })
    }

    /// Pointer to element `index + offset` of the array `m` addresses.
    pub(super) fn address(
        &mut self,
        m: &MemRef,
        offset: u32,
    ) -> Result<(PointerValue<'c>, Ty), Error> {
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

    pub(super) fn load(&mut self, dst: &[Reg], m: &MemRef) -> Result<(), Error> {
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

    /// [`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy), synchronously: one vector load
    /// of the `words` 32-bit words and one vector store into LDS (complete before any wait,
    /// which the rules of the statement allow).
    pub(super) fn copy(&mut self, dst: &MemRef, src: &MemRef, words: u32) -> Result<(), Error> {
        let elem = self.elem_ty(src)?;
        let to = self.elem_ty(dst)?;
        if to != elem && (to.bytes() != 4 || elem.bytes() != 4) {
            return Err(malformed("an asynchronous copy between element sizes"));
        }
        let n = words * 4 / elem.bytes() as u32;
        let vty = vec_ty(self.cx, elem, n);
        let (from, _) = self.address(src, 0)?;
        let v = self.b.build_load(vty, from, "copy").map_err(be)?;
        set_align(v, words * 4)?;
        let (to, _) = self.address(dst, 0)?;
        let st = self.b.build_store(to, v).map_err(be)?;
        st.set_alignment(words * 4)
            .map_err(|e| Error::Llvm(format!("{e:?}")))?;
        Ok(())
    }

    pub(super) fn store(&mut self, m: &MemRef, values: &[Expr]) -> Result<(), Error> {
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
    pub(super) fn bool_from_mem(
        &self,
        v: BasicValueEnum<'c>,
        elem: Ty,
    ) -> Result<BasicValueEnum<'c>, Error> {
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

    pub(super) fn bool_to_mem(
        &self,
        v: BasicValueEnum<'c>,
        elem: Ty,
    ) -> Result<BasicValueEnum<'c>, Error> {
        if elem != Ty::Bool {
            return Ok(v);
        }
        Ok(self
            .b
            .build_int_z_extend(v.into_int_value(), self.cx.i8_type(), "")
            .map_err(be)?
            .into())
    }
}
