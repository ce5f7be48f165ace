//! The type of a lowered expression, as the writer needs it to spell literals, conversions and
//! overloads: read from the validator's facts ([`LoweredInfo::expr_ty`]), with an expression that
//! names an undefined register or parameter reported as a malformed kernel instead of a panic.

use crate::lowered::{Base, Expr, LoweredInfo, MemRef, Ty};

use super::Error;

/// The type `e` evaluates to, from the facts `info` of its kernel.
pub fn expr_ty(info: &LoweredInfo, e: &Expr) -> Result<Ty, Error> {
    info.expr_ty(e)
        .ok_or_else(|| Error::Malformed(format!("`{e:?}` names an undefined register or scalar")))
}

/// The element type of the array `m` addresses, from the facts `info` of its kernel.
pub fn elem_ty(info: &LoweredInfo, m: &MemRef) -> Result<Ty, Error> {
    info.elem(m).ok_or_else(|| {
        Error::Malformed(match &m.base {
            Base::Param(p) | Base::Peer { param: p, .. } => {
                format!("{p} is not an array parameter")
            }
            Base::Lds(l) => format!("{l} is not declared"),
        })
    })
}
