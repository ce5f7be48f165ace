//! Expressions: constants, specials, unary and binary operators, casts and bitcasts.

use super::*;

impl<'c> Emitter<'c, '_> {
    /// An expression that must have type `want`, as an integer value.
    pub(super) fn int(&mut self, e: &Expr, want: Ty) -> Result<IntValue<'c>, Error> {
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

    pub(super) fn expr(&mut self, e: &Expr) -> Result<V<'c>, Error> {
        Ok(match e {
            Expr::Int(v, t) => self.constant_int(*v, *t)?,
            Expr::Float(v, t) => self.constant_float(*v, *t)?,
            Expr::Reg(r) => self.get(*r)?,
            Expr::Param(p) => match self.info.scalar_ty(*p) {
                Some(ty) => V {
                    v: self.params[p.as_u32() as usize],
                    ty,
                },
                None => return Err(malformed(format!("{p} is not a scalar parameter"))),
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

    pub(super) fn constant_int(&self, v: i64, t: Ty) -> Result<V<'c>, Error> {
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

    pub(super) fn constant_float(&self, v: f64, t: Ty) -> Result<V<'c>, Error> {
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

    pub(super) fn special(&mut self, s: Special) -> Result<V<'c>, Error> {
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

    pub(super) fn binary_values(&mut self, op: BinOp, a: V<'c>, b: V<'c>) -> Result<V<'c>, Error> {
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

    pub(super) fn unary(&mut self, op: UnOp, a: V<'c>) -> Result<V<'c>, Error> {
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

    pub(super) fn bitcast(&mut self, to: Ty, a: V<'c>) -> Result<V<'c>, Error> {
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

    pub(super) fn cast(&mut self, to: Ty, a: V<'c>) -> Result<V<'c>, Error> {
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
