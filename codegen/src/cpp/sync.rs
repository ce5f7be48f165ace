//! Synchronisation: workgroup barriers, atomics, fences, bounded waits. Each is preceded by a
//! one-line comment naming the DESIGN.md §5 invariant it upholds.

use wavefuse_ir::{Ordering, Scope};

use crate::lowered::{AtomicOp, Expr, Invariant, MemRef, Reg, Stmt, Ty};

use super::{Dialect, Error, Level, Rmw, Writer, elem_ty, expr_ty};

fn invariant_comment(why: Invariant) -> String {
    format!("// §5.{}: {}", why.number(), why.summary())
}

impl<D: Dialect> Writer<'_, D> {
    pub(super) fn workgroup_barrier(&mut self, lvl: Level) -> Result<(), Error> {
        self.line(lvl, &invariant_comment(Invariant::UniformBarriers));
        let b = self.d.workgroup_barrier();
        self.line(lvl, b);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn atomic(
        &mut self,
        dst: Option<Reg>,
        op: AtomicOp,
        mem: &MemRef,
        value: Option<&Expr>,
        (o, s): (Ordering, Scope),
        why: Invariant,
        lvl: Level,
    ) -> Result<(), Error> {
        let elem = elem_ty(self.info, mem)?;
        let ptr = format!("&{}", self.element(mem)?);
        let operand = |w: &Self| -> Result<String, Error> {
            let v = value
                .ok_or_else(|| Error::Malformed(format!("atomic {op:?} without an operand")))?;
            w.check_ty(v, elem)?;
            w.expr(v)
        };
        let call = match op {
            AtomicOp::Load => {
                check_load_order(o)?;
                self.d.atomic_load(&ptr, o, s)
            }
            AtomicOp::Store => {
                check_store_order(o)?;
                if dst.is_some() {
                    return Err(Error::Malformed("an atomic store has no result".into()));
                }
                self.d.atomic_store(&ptr, &operand(self)?, o, s)
            }
            AtomicOp::Add | AtomicOp::Max => {
                let rmw = if op == AtomicOp::Add {
                    Rmw::Add
                } else {
                    Rmw::Max
                };
                if !self.d.rmw_supported(rmw, elem) {
                    return Err(Error::Unsupported(format!(
                        "{}: atomic {op:?} on {}",
                        self.k.arch,
                        elem.name()
                    )));
                }
                self.d.atomic_rmw(rmw, &ptr, &operand(self)?, o, s)
            }
        };
        let text = match dst {
            Some(r) => {
                if self.k.regs[r].ty != elem {
                    return Err(Error::Malformed(format!(
                        "{r} receives a {} atomic result",
                        elem.name()
                    )));
                }
                format!("{} = {call};", self.names.reg(r))
            }
            None if op == AtomicOp::Load => {
                return Err(Error::Malformed(
                    "an atomic load without a destination".into(),
                ));
            }
            None => format!("{call};"),
        };
        self.line(lvl, &invariant_comment(why));
        self.line(lvl, &text);
        Ok(())
    }

    pub(super) fn fence(
        &mut self,
        o: Ordering,
        s: Scope,
        why: Invariant,
        lvl: Level,
    ) -> Result<(), Error> {
        if o == Ordering::Relaxed {
            return Err(Error::Malformed("a relaxed fence orders nothing".into()));
        }
        self.line(lvl, &invariant_comment(why));
        let text = format!("{};", self.d.fence(o, s));
        self.line(lvl, &text);
        Ok(())
    }

    /// A bounded spin: poll until `(int)(value - target) >= 0` (wrap-safe), at most `budget`
    /// loads; on timeout store the site's code into the error word and continue (§5.10).
    pub(super) fn wait_ge(&mut self, s: &Stmt, lvl: Level) -> Result<(), Error> {
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
            return Err(Error::Malformed("not a wait".into()));
        };
        check_load_order(*ordering)?;
        if elem_ty(self.info, mem)? != Ty::U32 || elem_ty(self.info, error)? != Ty::U32 {
            return Err(Error::Malformed(
                "a wait polls a u32 counter and writes a u32 error word".into(),
            ));
        }
        self.check_ty(target, Ty::U32)?;
        if *budget == 0 {
            return Err(Error::Malformed(
                "a wait with a budget of zero loads".into(),
            ));
        }
        let poll = self
            .d
            .atomic_load(&format!("&{}", self.element(mem)?), *ordering, *scope);
        let report = self.d.atomic_store(
            &format!("&{}", self.element(error)?),
            &format!("{code}u"),
            Ordering::Relaxed,
            Scope::System,
        );
        let target = self.expr(target)?;
        let inner = lvl.next();
        self.line(lvl, &invariant_comment(*why));
        self.line(
            lvl,
            &format!("{{ // wait site {code}: bounded by {budget} polls (§5.10)"),
        );
        self.line(inner, &format!("const unsigned wf_target = {target};"));
        self.line(inner, "unsigned wf_polls = 1u;");
        self.line(inner, &format!("while ((int)({poll} - wf_target) < 0) {{"));
        self.line(inner.next(), &format!("if (wf_polls == {budget}u) {{"));
        self.line(
            inner.next().next(),
            &format!("{report}; // timed out: the runtime reports site {code}"),
        );
        self.line(inner.next().next(), "break;");
        self.line(inner.next(), "}");
        self.line(inner.next(), "++wf_polls;");
        let pause = self.d.spin_pause();
        self.line(inner.next(), pause);
        self.line(inner, "}");
        self.line(lvl, "}");
        Ok(())
    }

    fn check_ty(&self, e: &Expr, want: Ty) -> Result<(), Error> {
        let got = expr_ty(self.info, e)?;
        if got == want {
            Ok(())
        } else {
            Err(Error::Malformed(format!(
                "a {} value where a {} is needed",
                got.name(),
                want.name()
            )))
        }
    }
}

fn check_load_order(o: Ordering) -> Result<(), Error> {
    match o {
        Ordering::Release | Ordering::AcqRel => Err(Error::Malformed(format!(
            "an atomic load cannot have ordering {o:?}"
        ))),
        _ => Ok(()),
    }
}

fn check_store_order(o: Ordering) -> Result<(), Error> {
    match o {
        Ordering::Acquire | Ordering::AcqRel => Err(Error::Malformed(format!(
            "an atomic store cannot have ordering {o:?}"
        ))),
        _ => Ok(()),
    }
}
