//! Expressions: literals, operators, conversions, with the fewest parentheses that keep C++
//! precedence unambiguous (every nested binary operation is parenthesised).

use crate::lowered::{BinOp, Expr, Special, Ty, UnOp};

use super::writer::WF_WG;
use super::{Dialect, Error, Writer, expr_ty};

/// How tightly a printed expression binds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    /// Binary or conditional operator: parenthesise as an operand.
    Binary,
    /// Prefix operator or C cast: fine as a binary operand.
    Unary,
    /// Name, literal, call, or parenthesised.
    Primary,
}

struct Cx {
    text: String,
    prec: Prec,
}

impl Cx {
    fn new(text: String, prec: Prec) -> Cx {
        Cx { text, prec }
    }

    fn primary(text: String) -> Cx {
        Cx::new(text, Prec::Primary)
    }

    /// Text usable where at least `min` binding is needed.
    fn at(self, min: Prec) -> String {
        if self.prec >= min {
            self.text
        } else {
            format!("({})", self.text)
        }
    }
}

impl<D: Dialect> Writer<'_, D> {
    /// `e` as C++ text.
    pub(super) fn expr(&self, e: &Expr) -> Result<String, Error> {
        Ok(self.ex(e)?.text)
    }

    fn ex(&self, e: &Expr) -> Result<Cx, Error> {
        Ok(match e {
            Expr::Int(v, t) => self.int(*v, *t)?,
            Expr::Float(v, t) => self.float(*v, *t)?,
            Expr::Reg(r) => Cx::primary(self.names.reg(*r).to_owned()),
            Expr::Param(p) => {
                expr_ty(self.info, e)?; // a scalar parameter
                Cx::primary(self.names.param(*p).to_owned())
            }
            Expr::Special(Special::WorkgroupId) if self.ranks_entry => Cx::primary(WF_WG.into()),
            Expr::Special(Special::NumWorkgroups) if self.ranks_entry => {
                Cx::primary(format!("{}u", self.k.grid))
            }
            Expr::Special(s) => Cx::new(self.d.special(*s, self.k.wave_size()), Prec::Unary),
            Expr::Bin(op, a, b) => self.binary(*op, a, b)?,
            Expr::Un(op, a) => self.unary(*op, a)?,
            Expr::Cast(to, a) => self.cast(*to, a)?,
            Expr::Bitcast(to, a) => self.bitcast(*to, a)?,
            Expr::PackHalf2(lo, hi) => {
                let bits = |e: &Expr| -> Result<String, Error> {
                    Ok(self.d.f16_to_bits(&self.ex(e)?.at(Prec::Primary)))
                };
                Cx::new(
                    format!(
                        "(unsigned)({}) | ((unsigned)({}) << 16)",
                        bits(lo)?,
                        bits(hi)?
                    ),
                    Prec::Binary,
                )
            }
            Expr::SubHalf2(a, b) => {
                self.helper_call(Some(self.d.sub_half2_helper()), "sub_half2", &[a, b])?
            }
            Expr::FmaHalf2(a, b, c) => {
                self.helper_call(self.d.fma_half2_helper(), "fma_half2", &[a, b, c])?
            }
            Expr::Dot2F16(a, b, c) => {
                self.helper_call(self.d.dot2_f16_helper(), "dot2_f16", &[a, b, c])?
            }
            Expr::Dot4I8(a, b, c) => {
                self.helper_call(Some(self.d.dot4_i8_helper()), "dot4_i8", &[a, b, c])?
            }
            Expr::Select(c, a, b) => {
                let [c, a, b] = [c, a, b].map(|x| self.ex(x));
                Cx::new(
                    format!(
                        "{} ? {} : {}",
                        c?.at(Prec::Unary),
                        a?.at(Prec::Unary),
                        b?.at(Prec::Unary)
                    ),
                    Prec::Binary,
                )
            }
            Expr::Bfe {
                value,
                offset,
                width,
            } => {
                let (v, o) = (
                    self.ex(value)?.at(Prec::Unary),
                    self.ex(offset)?.at(Prec::Unary),
                );
                Cx::primary(self.d.bfe(&v, &o, *width))
            }
            Expr::Fma(a, b, c) => {
                let [a, b, c] = [a, b, c].map(|x| self.expr(x));
                Cx::primary(format!("fmaf({}, {}, {})", a?, b?, c?))
            }
        })
    }

    /// A call of the dialect's helper `(name, definition)` (written once per source), or
    /// Unsupported where the dialect has none for `what`.
    fn helper_call(
        &self,
        helper: Option<(&'static str, &'static str)>,
        what: &str,
        args: &[&Expr],
    ) -> Result<Cx, Error> {
        let (name, def) =
            helper.ok_or_else(|| Error::Unsupported(format!("{}: {what}", self.k.arch)))?;
        self.helpers
            .borrow_mut()
            .entry(name.to_owned())
            .or_insert_with(|| def.to_owned());
        let args = args
            .iter()
            .map(|a| self.expr(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cx::primary(format!("{name}({})", args.join(", "))))
    }

    fn int(&self, v: i64, t: Ty) -> Result<Cx, Error> {
        let out_of_range = || Error::Malformed(format!("constant {v} does not fit {}", t.name()));
        Ok(match t {
            Ty::Bool => Cx::primary(if v != 0 { "true" } else { "false" }.into()),
            Ty::U32 => Cx::primary(format!(
                "{}u",
                u32::try_from(v).map_err(|_| out_of_range())?
            )),
            Ty::I32 => match i32::try_from(v).map_err(|_| out_of_range())? {
                i32::MIN => Cx::primary("(-2147483647 - 1)".into()),
                v if v < 0 => Cx::new(v.to_string(), Prec::Unary),
                v => Cx::primary(v.to_string()),
            },
            Ty::I8 => Cx::new(
                format!(
                    "(signed char){}",
                    i8::try_from(v).map_err(|_| out_of_range())?
                ),
                Prec::Unary,
            ),
            Ty::F32 | Ty::F16 => self.float(v as f64, t)?,
        })
    }

    fn float(&self, v: f64, t: Ty) -> Result<Cx, Error> {
        let f32_lit = f32_literal(v as f32);
        match t {
            Ty::F32 => Ok(f32_lit),
            Ty::F16 => Ok(Cx::new(
                self.d.f32_to_f16(&f32_lit.at(Prec::Primary)),
                Prec::Unary,
            )),
            _ => Err(Error::Malformed(format!(
                "float constant {v} typed {}",
                t.name()
            ))),
        }
    }

    fn binary(&self, op: BinOp, a: &Expr, b: &Expr) -> Result<Cx, Error> {
        let ty = expr_ty(self.info, a)?;
        // `(x & c1) | c2` on 32 bits (the INT4 decode's nibble-pair insertion): one instruction
        // where the dialect has a three-input bitwise op, where C++ would give the compiler two
        // constants it encodes as two instructions (ptxas: two LOP3s with one immediate each).
        if let (BinOp::Or, Ty::U32, Expr::Bin(BinOp::And, x, c1), Expr::Int(..)) = (op, ty, a, b)
            && matches!(**c1, Expr::Int(..))
            && let Some(helper) = self.d.and_or_helper()
        {
            return self.helper_call(Some(helper), "and_or", &[x, c1, b]);
        }
        let (x, y) = (self.ex(a)?, self.ex(b)?);
        let call = |f: &str, x: Cx, y: Cx| Cx::primary(format!("{f}({}, {})", x.text, y.text));
        let float = ty.is_float();
        if ty == Ty::F16 && !op.is_comparison() {
            return Err(Error::Unsupported(format!(
                "{}: FP16 arithmetic ({op:?}); convert to f32 first",
                self.k.arch
            )));
        }
        let sym = match op {
            BinOp::Min if float => return Ok(call("fminf", x, y)),
            BinOp::Max if float => return Ok(call("fmaxf", x, y)),
            BinOp::Min => return Ok(call("min", x, y)),
            BinOp::Max => return Ok(call("max", x, y)),
            BinOp::Rem if float => return Ok(call("fmodf", x, y)),
            BinOp::And if ty == Ty::Bool => "&&",
            BinOp::Or if ty == Ty::Bool => "||",
            BinOp::Xor if ty == Ty::Bool => "!=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Ge => ">=",
            BinOp::Gt => ">",
        };
        if ty == Ty::F16 {
            // Comparisons of FP16 values: exact in FP32.
            let (x, y) = (
                self.d.f16_to_f32(&x.at(Prec::Primary)),
                self.d.f16_to_f32(&y.at(Prec::Primary)),
            );
            return Ok(Cx::new(format!("{x} {sym} {y}"), Prec::Binary));
        }
        Ok(Cx::new(
            format!("{} {sym} {}", x.at(Prec::Unary), y.at(Prec::Unary)),
            Prec::Binary,
        ))
    }

    fn unary(&self, op: UnOp, a: &Expr) -> Result<Cx, Error> {
        let ty = expr_ty(self.info, a)?;
        let x = self.ex(a)?;
        let unsupported =
            || Error::Unsupported(format!("{}: {op:?} on {}", self.k.arch, ty.name()));
        Ok(match (op, ty) {
            (_, Ty::F16) => return Err(unsupported()),
            (UnOp::Neg, Ty::Bool) => return Err(unsupported()),
            (UnOp::Neg, _) => Cx::new(format!("-{}", x.at(Prec::Primary)), Prec::Unary),
            (UnOp::Not, Ty::Bool) => Cx::new(format!("!{}", x.at(Prec::Primary)), Prec::Unary),
            (UnOp::Not, Ty::F32) => return Err(unsupported()),
            (UnOp::Not, _) => Cx::new(format!("~{}", x.at(Prec::Primary)), Prec::Unary),
            (UnOp::Abs, Ty::F32) => Cx::primary(format!("fabsf({})", x.text)),
            (UnOp::Abs, Ty::U32) => x,
            (UnOp::Abs, Ty::I32 | Ty::I8) => Cx::primary(format!("abs({})", x.text)),
            (UnOp::Exp, Ty::F32) => Cx::primary(format!("expf({})", x.text)),
            (UnOp::Rsqrt, Ty::F32) => Cx::primary(format!("rsqrtf({})", x.text)),
            (UnOp::Abs | UnOp::Exp | UnOp::Rsqrt, _) => return Err(unsupported()),
        })
    }

    /// A reinterpretation of 32 bits: the `__*_as_*` intrinsics both HIP and CUDA provide.
    fn bitcast(&self, to: Ty, a: &Expr) -> Result<Cx, Error> {
        let from = expr_ty(self.info, a)?;
        let x = self.ex(a)?;
        let f = match (from, to) {
            _ if from == to => return Ok(x),
            (Ty::U32, Ty::F32) => "__uint_as_float",
            (Ty::I32, Ty::F32) => "__int_as_float",
            (Ty::F32, Ty::U32) => "__float_as_uint",
            (Ty::F32, Ty::I32) => "__float_as_int",
            (Ty::U32 | Ty::I32, Ty::U32 | Ty::I32) => {
                return Ok(Cx::new(
                    format!("({}){}", self.ty(to)?, x.at(Prec::Primary)),
                    Prec::Unary,
                ));
            }
            _ => {
                return Err(Error::Malformed(format!(
                    "bitcast of {} to {}",
                    from.name(),
                    to.name()
                )));
            }
        };
        Ok(Cx::primary(format!("{f}({})", x.text)))
    }

    fn cast(&self, to: Ty, a: &Expr) -> Result<Cx, Error> {
        let from = expr_ty(self.info, a)?;
        let x = self.ex(a)?;
        if from == to {
            return Ok(x);
        }
        let c = |ty: &str, x: String| Cx::new(format!("({ty}){x}"), Prec::Unary);
        Ok(match (from, to) {
            (_, Ty::Bool) if from.is_float() => {
                return Err(Error::Malformed("float → bool conversion".into()));
            }
            (_, Ty::Bool) => Cx::new(format!("{} != 0", x.at(Prec::Unary)), Prec::Binary),
            (Ty::F16, Ty::F32) => Cx::new(self.d.f16_to_f32(&x.at(Prec::Primary)), Prec::Unary),
            (Ty::F16, _) => c(
                &self.ty(to)?,
                format!("({})", self.d.f16_to_f32(&x.at(Prec::Primary))),
            ),
            (Ty::F32, Ty::F16) => Cx::new(self.d.f32_to_f16(&x.at(Prec::Primary)), Prec::Unary),
            (_, Ty::F16) => Cx::new(
                self.d
                    .f32_to_f16(&format!("((float){})", x.at(Prec::Primary))),
                Prec::Unary,
            ),
            _ => c(&self.ty(to)?, x.at(Prec::Primary)),
        })
    }
}

/// An `f32` constant that reads back bit-exactly.
fn f32_literal(f: f32) -> Cx {
    if f.is_nan() {
        Cx::primary("__uint_as_float(0x7fc00000u)".into())
    } else if f.is_infinite() {
        Cx::primary(format!("__uint_as_float({:#x}u)", f.to_bits()))
    } else {
        // Debug prints the shortest decimal that round-trips, always with a `.` or an exponent.
        let text = format!("{f:?}f");
        let prec = if f.is_sign_negative() {
            Prec::Unary
        } else {
            Prec::Primary
        };
        Cx::new(text, prec)
    }
}
