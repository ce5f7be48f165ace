//! The type of a lowered expression, as the writer needs it to spell literals, conversions and
//! overloads: the lowered validator's type rules ([`crate::lowered::validate::ty`]), with a type
//! error reported as a malformed kernel instead of a panic.

use crate::lowered::validate;
use crate::lowered::{Expr, LoweredKernel, Ty};

use super::Error;

/// The type `e` evaluates to in `k`.
pub fn expr_ty(k: &LoweredKernel, e: &Expr) -> Result<Ty, Error> {
    validate::ty(e, k).map_err(|err| Error::Malformed(err.to_string()))
}
