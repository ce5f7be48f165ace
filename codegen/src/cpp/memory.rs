//! Plain loads and stores, scalar or as one vector access.
//!
//! A run of `n` consecutive elements is read or written with 32-bit words when it fills 1, 2 or
//! 4k words: one `unsigned`, one `uint2`, or `k` `uint4`s. The element index is then assumed to be
//! a multiple of `n` and the array aligned to the access width; the ABI description records the
//! alignment per parameter (see [`vector_words`](crate::back::vector_words)).

use crate::lowered::{Access, Base, Expr, MemRef, ParamKind, Purpose, Reg, Ty};

use super::writer::shared_address_var;
use super::{Dialect, Error, Level, Writer, elem_ty, expr_ty};
use crate::back::vector_words;

const LANES: [&str; 4] = ["x", "y", "z", "w"];

impl<D: Dialect> Writer<'_, D> {
    /// The array `m` addresses, as a pointer expression.
    pub(super) fn base(&self, m: &MemRef) -> Result<String, Error> {
        Ok(match &m.base {
            Base::Param(p) => {
                if !matches!(self.k.params[*p].kind, ParamKind::Array { .. }) {
                    return Err(Error::Malformed(format!(
                        "{p} addressed as an array of this rank"
                    )));
                }
                self.names.param(*p).to_owned()
            }
            Base::Peer { param, rank } => {
                if !matches!(self.k.params[*param].kind, ParamKind::PeerArrays { .. }) {
                    return Err(Error::Malformed(format!(
                        "{param} addressed as a peer table"
                    )));
                }
                format!("{}[{}]", self.names.param(*param), self.expr(rank)?)
            }
            Base::Lds(l) => self.names.lds(*l).to_owned(),
        })
    }

    /// Whether `m` is in a packed weight array the kernel streams ([`LoweredKernel::stream_weights`](crate::lowered::LoweredKernel::stream_weights)).
    fn is_streamed(&self, m: &MemRef) -> bool {
        let Base::Param(p) = m.base else {
            return false;
        };
        self.k.stream_weights
            && matches!(
                &self.k.params[p].kind,
                ParamKind::Array {
                    access: Access::Read,
                    purpose: Purpose::Data {
                        part: "qweight",
                        ..
                    },
                    ..
                }
            )
    }

    /// `base[index]`.
    pub(super) fn element(&self, m: &MemRef) -> Result<String, Error> {
        Ok(format!("{}[{}]", self.base(m)?, self.expr(&m.index)?))
    }

    /// `base[index + i]`.
    fn element_at(&self, m: &MemRef, i: usize) -> Result<String, Error> {
        if i == 0 {
            return self.element(m);
        }
        let index = Expr::add(m.index.clone(), Expr::u32(i as u32));
        Ok(format!("{}[{}]", self.base(m)?, self.expr(&index)?))
    }

    /// With [`LoweredKernel::byte_offsets`](crate::lowered::LoweredKernel::byte_offsets):
    /// `&base[index + i]` as the byte pointer
    /// `reinterpret_cast<const char*>(base) + (index + i) * bytes`, where `base` is an array
    /// parameter of this rank whose bytes fit in 32 bits (so the offset, computed in `unsigned`,
    /// cannot wrap); otherwise `None`.
    fn byte_pointer(&self, m: &MemRef, i: usize) -> Result<Option<String>, Error> {
        let Base::Param(p) = m.base else {
            return Ok(None);
        };
        let ParamKind::Array { elem, len, .. } = self.k.params[p].kind else {
            return Ok(None);
        };
        if !self.k.byte_offsets || (len * elem.bytes()) as u64 >= 1 << 32 {
            return Ok(None);
        }
        let index = if i == 0 {
            m.index.clone()
        } else {
            Expr::add(m.index.clone(), Expr::u32(i as u32))
        };
        let offset = Expr::mul(index, Expr::u32(elem.bytes() as u32));
        Ok(Some(format!(
            "(reinterpret_cast<const char*>({}) + ({}))",
            self.base(m)?,
            self.expr(&offset)?
        )))
    }

    /// The C++ type of a scalar element loaded through a byte pointer, where it has one.
    fn scalar_type(&self, elem: Ty) -> Option<&'static str> {
        match elem {
            Ty::U32 => Some("unsigned"),
            Ty::I32 => Some("int"),
            Ty::F32 => Some("float"),
            Ty::F16 => Some(self.d.f16_type()),
            Ty::I8 | Ty::Bool => None,
        }
    }

    pub(super) fn load(&mut self, dst: &[Reg], m: &MemRef, lvl: Level) -> Result<(), Error> {
        let elem = elem_ty(self.info, m)?;
        for r in dst {
            let t = self.k.regs[*r].ty;
            if t != elem {
                return Err(Error::Malformed(format!(
                    "{r} is {} but loads a {} element",
                    t.name(),
                    elem.name()
                )));
            }
        }
        let Some((words, count)) = vector_words(elem, dst.len()) else {
            for (i, r) in dst.iter().enumerate() {
                let value = match (self.byte_pointer(m, i)?, self.scalar_type(elem)) {
                    (Some(ptr), Some(t)) => format!("*reinterpret_cast<const {t}*>{ptr}"),
                    _ => self.element_at(m, i)?,
                };
                let text = format!("{} = {value};", self.names.reg(*r));
                self.line(lvl, &text);
            }
            return Ok(());
        };
        let vty = vector_type(words);
        let addr = match self.byte_pointer(m, 0)? {
            Some(ptr) => ptr,
            None => format!("&{}", self.element(m)?),
        };
        self.line(lvl, "{");
        let inner = lvl.next();
        let mut word_names = Vec::new();
        let streamed = (count == 1 && words == 4 && self.is_streamed(m))
            .then(|| self.d.streaming_load_v4("wf_v", &addr))
            .flatten();
        if let Some(text) = streamed {
            self.line(inner, &text);
            word_names.extend(word_lanes("wf_v", words));
        } else if count == 1 {
            self.line(
                inner,
                &format!("const {vty} wf_v = *reinterpret_cast<const {vty}*>({addr});"),
            );
            word_names.extend(word_lanes("wf_v", words));
        } else {
            self.line(
                inner,
                &format!("const {vty}* wf_p = reinterpret_cast<const {vty}*>({addr});"),
            );
            for c in 0..count {
                self.line(inner, &format!("const {vty} wf_v{c} = wf_p[{c}];"));
                word_names.extend(word_lanes(&format!("wf_v{c}"), words));
            }
        }
        let per_word = 4 / elem.bytes();
        for (i, r) in dst.iter().enumerate() {
            let word = &word_names[i / per_word];
            let shift = (i % per_word) * elem.bytes() * 8;
            let value = self.element_from_word(elem, word, shift);
            self.line(inner, &format!("{} = {value};", self.names.reg(*r)));
        }
        self.line(lvl, "}");
        Ok(())
    }

    /// [`Stmt::PrefetchL2`](crate::lowered::Stmt::PrefetchL2): the dialect's prefetch of the
    /// line holding `m`, or nothing.
    pub(super) fn prefetch_l2(&mut self, m: &MemRef, lvl: Level) -> Result<(), Error> {
        let addr = match self.byte_pointer(m, 0)? {
            Some(ptr) => ptr,
            None => format!("&{}", self.element(m)?),
        };
        if let Some(text) = self.d.prefetch_l2(&addr) {
            self.line(lvl, &text);
        }
        Ok(())
    }

    /// [`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy): the dialect's asynchronous copy
    /// of `words` 32-bit elements from `src` to the LDS `dst`, or (where it has none) a
    /// synchronous one through a register.
    pub(super) fn async_copy(
        &mut self,
        dst: &MemRef,
        src: &MemRef,
        words: u32,
        lvl: Level,
    ) -> Result<(), Error> {
        let from = match self.byte_pointer(src, 0)? {
            Some(ptr) => ptr,
            None => format!("&{}", self.element(src)?),
        };
        if let Base::Lds(l) = dst.base
            && self.shared_addressed.contains(&l)
        {
            let to = format!(
                "{} + ({}) * {}u",
                shared_address_var(self.names.lds(l)),
                self.expr(&dst.index)?,
                self.k.lds[l].elem.bytes()
            );
            if let Some(text) = self.d.async_copy(&to, &from, words * 4) {
                self.line(lvl, &text);
                return Ok(());
            }
        }
        let to = format!("&{}", self.element(dst)?);
        let vty = vector_type(words as usize);
        self.line(
            lvl,
            &format!("*reinterpret_cast<{vty}*>({to}) = *reinterpret_cast<const {vty}*>({from});"),
        );
        Ok(())
    }

    pub(super) fn store(&mut self, m: &MemRef, values: &[Expr], lvl: Level) -> Result<(), Error> {
        let elem = elem_ty(self.info, m)?;
        for v in values {
            let t = expr_ty(self.info, v)?;
            if t != elem {
                return Err(Error::Malformed(format!(
                    "a {} value stored into a {} array",
                    t.name(),
                    elem.name()
                )));
            }
        }
        let Some((words, count)) = vector_words(elem, values.len()) else {
            for (i, v) in values.iter().enumerate() {
                let text = format!("{} = {};", self.element_at(m, i)?, self.expr(v)?);
                self.line(lvl, &text);
            }
            return Ok(());
        };
        let per_word = 4 / elem.bytes();
        let mut packed = Vec::new();
        for chunk in values.chunks(per_word) {
            let mut parts = Vec::new();
            for (j, v) in chunk.iter().enumerate() {
                parts.push(self.element_to_word(elem, &self.expr(v)?, j * elem.bytes() * 8));
            }
            packed.push(parts.join(" | "));
        }
        let vty = vector_type(words);
        let addr = format!("&{}", self.element(m)?);
        if count == 1 {
            let value = make_vector(words, &packed);
            self.line(
                lvl,
                &format!("*reinterpret_cast<{vty}*>({addr}) = {value};"),
            );
        } else {
            self.line(lvl, "{");
            let inner = lvl.next();
            self.line(
                inner,
                &format!("{vty}* wf_p = reinterpret_cast<{vty}*>({addr});"),
            );
            for (c, ws) in packed.chunks(4).enumerate() {
                self.line(inner, &format!("wf_p[{c}] = {};", make_vector(words, ws)));
            }
            self.line(lvl, "}");
        }
        Ok(())
    }

    /// The element at bit `shift` of the 32-bit `word`, as a value of `elem`.
    fn element_from_word(&self, elem: Ty, word: &str, shift: usize) -> String {
        let bits = if shift == 0 {
            word.to_owned()
        } else {
            format!("({word} >> {shift})")
        };
        match elem {
            Ty::U32 => bits,
            Ty::I32 => format!("(int){bits}"),
            Ty::F32 => format!("__uint_as_float({bits})"),
            Ty::F16 => self.d.f16_from_bits(&bits),
            Ty::I8 => format!("(signed char){bits}"),
            Ty::Bool => format!("({bits} & 0xffu) != 0u"), // not reached: vector_words excludes bool
        }
    }

    /// `value` (of `elem`) as the bits at `shift` of a 32-bit word.
    fn element_to_word(&self, elem: Ty, value: &str, shift: usize) -> String {
        let v = if value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            value.to_owned()
        } else {
            format!("({value})")
        };
        let bits = match elem {
            Ty::U32 => v,
            Ty::I32 => format!("(unsigned){v}"),
            Ty::F32 => format!("__float_as_uint({v})"),
            Ty::F16 => format!("(unsigned){}", self.d.f16_to_bits(&v)),
            Ty::I8 => format!("(unsigned)(unsigned char){v}"),
            Ty::Bool => format!("(unsigned){v}"), // not reached: vector_words excludes bool
        };
        if shift == 0 {
            bits
        } else {
            format!("({bits} << {shift})")
        }
    }
}

fn vector_type(words: usize) -> &'static str {
    match words {
        1 => "unsigned",
        2 => "uint2",
        _ => "uint4",
    }
}

fn word_lanes(v: &str, words: usize) -> Vec<String> {
    if words == 1 {
        vec![v.to_owned()]
    } else {
        LANES[..words].iter().map(|l| format!("{v}.{l}")).collect()
    }
}

fn make_vector(words: usize, ws: &[String]) -> String {
    match words {
        1 => ws[0].clone(),
        2 => format!("make_uint2({}, {})", ws[0], ws[1]),
        _ => format!("make_uint4({})", ws.join(", ")),
    }
}
