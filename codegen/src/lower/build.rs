//! Small constructors for lowered expressions and statements, with the constant folding that
//! keeps the printed code readable (`x + 0` is `x`).

use crate::lowered::{Base, BinOp, Expr, MemRef, Reg, Special, Stmt, Ty, UnOp};

/// A u32 constant.
pub(super) fn u(v: usize) -> Expr {
    Expr::u32(u32::try_from(v).expect("sizes of one rank's arrays fit in u32"))
}

/// An f32 constant.
pub(super) fn f(v: f64) -> Expr {
    Expr::Float(v, Ty::F32)
}

fn int(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(v, Ty::U32 | Ty::I32) => Some(*v),
        _ => None,
    }
}

fn ty_of_const(e: &Expr) -> Ty {
    match e {
        Expr::Int(_, t) => *t,
        _ => Ty::U32,
    }
}

/// `a op b`, folding integer constants and the identities `x + 0`, `x − 0`, `x · 1`, `x · 0`,
/// `x / 1`.
pub(super) fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (int(&a), int(&b)) {
        let ty = ty_of_const(&a);
        let folded = match op {
            BinOp::Add => Some(x + y),
            BinOp::Sub if x >= y || ty == Ty::I32 => Some(x - y),
            BinOp::Mul => Some(x * y),
            BinOp::Div if y != 0 => Some(x / y),
            BinOp::Rem if y != 0 => Some(x % y),
            BinOp::Min => Some(x.min(y)),
            BinOp::Max => Some(x.max(y)),
            _ => None,
        };
        if let Some(v) = folded.filter(|v| ty != Ty::U32 || (0..=i64::from(u32::MAX)).contains(v)) {
            return Expr::Int(v, ty);
        }
    }
    match (op, int(&a), int(&b)) {
        (BinOp::Add, Some(0), _) => b,
        (BinOp::Add | BinOp::Sub | BinOp::Shl | BinOp::Shr, _, Some(0)) => a,
        (BinOp::Mul, _, Some(1)) | (BinOp::Div, _, Some(1)) => a,
        (BinOp::Mul, Some(1), _) => b,
        (BinOp::Mul, _, Some(0)) => b,
        (BinOp::Mul, Some(0), _) => a,
        _ => Expr::bin(op, a, b),
    }
}

pub(super) fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

pub(super) fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}

pub(super) fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}

pub(super) fn div(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Div, a, b)
}

pub(super) fn rem(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Rem, a, b)
}

pub(super) fn lt(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Lt, a, b)
}

pub(super) fn eq(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Eq, a, b)
}

pub(super) fn ne(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Ne, a, b)
}

/// Logical and, dropping `true` operands.
pub(super) fn and(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Int(1, Ty::Bool), _) => b,
        (_, Expr::Int(1, Ty::Bool)) => a,
        _ => Expr::bin(BinOp::And, a, b),
    }
}

/// The boolean constant `true`.
pub(super) fn truth() -> Expr {
    Expr::Int(1, Ty::Bool)
}

pub(super) fn cast(ty: Ty, e: Expr) -> Expr {
    Expr::cast(ty, e)
}

pub(super) fn un(op: UnOp, e: Expr) -> Expr {
    Expr::Un(op, Box::new(e))
}

pub(super) fn fma(a: Expr, b: Expr, c: Expr) -> Expr {
    Expr::Fma(Box::new(a), Box::new(b), Box::new(c))
}

pub(super) fn sel(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::Select(Box::new(c), Box::new(a), Box::new(b))
}

pub(super) fn bfe(value: Expr, offset: Expr, width: u32) -> Expr {
    Expr::Bfe {
        value: Box::new(value),
        offset: Box::new(offset),
        width,
    }
}

pub(super) fn sp(s: Special) -> Expr {
    Expr::Special(s)
}

pub(super) fn r(reg: Reg) -> Expr {
    Expr::Reg(reg)
}

/// `base[index]`.
pub(super) fn at(base: Base, index: Expr) -> MemRef {
    MemRef { base, index }
}

pub(super) fn assign(dst: Reg, value: Expr) -> Stmt {
    Stmt::Assign { dst, value }
}

pub(super) fn load(dst: Vec<Reg>, mem: MemRef) -> Stmt {
    Stmt::Load { dst, mem }
}

pub(super) fn store(mem: MemRef, values: Vec<Expr>) -> Stmt {
    Stmt::Store { mem, values }
}

/// `if cond { then }`, or `then` inlined when `cond` is the constant `true`.
pub(super) fn when(cond: Expr, then_body: Vec<Stmt>, out: &mut Vec<Stmt>) {
    if cond == truth() {
        out.extend(then_body);
    } else if !then_body.is_empty() {
        out.push(Stmt::If {
            cond,
            then_body,
            else_body: vec![],
        });
    }
}

pub(super) fn for_loop(var: Reg, start: Expr, end: Expr, step: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        var,
        start,
        end,
        step,
        body,
    }
}

pub(super) fn comment(text: impl Into<String>) -> Stmt {
    Stmt::Comment(text.into())
}
