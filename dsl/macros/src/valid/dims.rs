//! Token-level shapes: a dimension is a number when its expression is made of integer literals
//! (`5120`, `17408 / 4`), a symbol when it is any other expression (`batch`, `HIDDEN`), and
//! unknown when it depends on the TP size. Two numbers are compared; two symbols are equal when
//! their tokens are; anything else is left to the IR validator at run time.

use std::fmt;

use quote::ToTokens;

/// One dimension of a token-level shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A literal (or literal arithmetic).
    Known(u128),
    /// Any other expression, by its tokens.
    Sym(String),
    /// Depends on run-time values.
    Unknown,
}

impl Dim {
    /// The dimension an expression denotes.
    pub fn of(expr: &syn::Expr) -> Dim {
        match eval_int(expr) {
            Some(v) => Dim::Known(v),
            None => Dim::Sym(expr.to_token_stream().to_string()),
        }
    }

    /// Whether two dimensions are equal: `None` when that is only known at run time.
    pub fn same(&self, other: &Dim) -> Option<bool> {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) => Some(a == b),
            (Dim::Sym(a), Dim::Sym(b)) if a == b => Some(true),
            _ => None,
        }
    }

    /// The value, if it is a literal.
    pub fn known(&self) -> Option<u128> {
        match self {
            Dim::Known(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(v) => write!(f, "{v}"),
            Dim::Sym(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// A shape, for messages: `[1, 5120]`.
pub fn show(shape: &[Dim]) -> String {
    let dims: Vec<String> = shape.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Evaluate integer-literal arithmetic (`+ - * /`, parentheses); anything else is `None`.
pub fn eval_int(expr: &syn::Expr) -> Option<u128> {
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse().ok(),
        syn::Expr::Paren(p) => eval_int(&p.expr),
        syn::Expr::Group(g) => eval_int(&g.expr),
        syn::Expr::Binary(b) => {
            let (l, r) = (eval_int(&b.left)?, eval_int(&b.right)?);
            match b.op {
                syn::BinOp::Add(_) => l.checked_add(r),
                syn::BinOp::Sub(_) => l.checked_sub(r),
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Div(_) => l.checked_div(r),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Evaluate a float or integer literal, possibly negated; anything else is `None`.
pub fn eval_float(expr: &syn::Expr) -> Option<f64> {
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Float(f),
            ..
        }) => f.base10_parse().ok(),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse().ok(),
        syn::Expr::Paren(p) => eval_float(&p.expr),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => eval_float(&u.expr).map(|v| -v),
        _ => None,
    }
}
