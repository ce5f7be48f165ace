//! Rust expressions → op expressions. The body's right-hand sides are parsed by syn as Rust
//! expressions (so precedence and spans come for free) and converted here; any form that is not
//! a name, an op call, `+` or `*` is reported on its own tokens.

use quote::ToTokens;
use syn::spanned::Spanned as _;

use crate::ast::{BinOp, Call, Expr, NamedArg};

/// Convert one expression, pushing an error for each form the DSL does not have.
pub fn convert(expr: &syn::Expr, errors: &mut Vec<syn::Error>) -> Expr {
    match expr {
        syn::Expr::Paren(p) => convert(&p.expr, errors),
        syn::Expr::Group(g) => convert(&g.expr, errors),
        syn::Expr::Path(p) => match single_ident(p) {
            Some(ident) => Expr::Name(ident.clone()),
            None => invalid(expr, "expected a value name (a single identifier)", errors),
        },
        syn::Expr::Call(c) => call(c, errors),
        syn::Expr::MethodCall(m) => method_call(m, errors),
        syn::Expr::Binary(b) => binary(b, errors),
        syn::Expr::Lit(_) => invalid(
            expr,
            "a literal is not a value of the kernel; constants are op attributes, e.g. \
             `rmsnorm(x, w, eps = 1e-6)`",
            errors,
        ),
        _ => invalid(
            expr,
            "expected an op call (`silu(x)`, `gemv.row(w, x)`), a value name, `a + b` or `a * b`",
            errors,
        ),
    }
}

fn invalid(expr: &syn::Expr, msg: &str, errors: &mut Vec<syn::Error>) -> Expr {
    errors.push(syn::Error::new_spanned(expr, msg));
    Expr::Invalid(expr.to_token_stream())
}

fn single_ident(p: &syn::ExprPath) -> Option<&syn::Ident> {
    if p.qself.is_some() {
        return None;
    }
    p.path.get_ident()
}

fn as_ident(expr: &syn::Expr) -> Option<&syn::Ident> {
    match expr {
        syn::Expr::Path(p) => single_ident(p),
        _ => None,
    }
}

fn call(c: &syn::ExprCall, errors: &mut Vec<syn::Error>) -> Expr {
    let syn::Expr::Path(path) = &*c.func else {
        return invalid(&c.func, "expected an op name", errors);
    };
    let Some(name) = single_ident(path) else {
        return invalid(
            &c.func,
            "expected an op name such as `rmsnorm` or `gemv.row`",
            errors,
        );
    };
    let (args, attrs) = arguments(&c.args, errors);
    Expr::Call(Call {
        name: name.to_string(),
        name_tokens: name.to_token_stream(),
        variant: None,
        args,
        attrs,
        tokens: c.to_token_stream(),
    })
}

/// `gemv.row(w, x)`: an op family and its variant, written as in the textual IR.
fn method_call(m: &syn::ExprMethodCall, errors: &mut Vec<syn::Error>) -> Expr {
    let Some(family) = as_ident(&m.receiver) else {
        return invalid(
            &syn::Expr::MethodCall(m.clone()),
            "ops are called as functions (`silu(x)`), not as methods of a value",
            errors,
        );
    };
    if let Some(turbofish) = &m.turbofish {
        errors.push(syn::Error::new_spanned(
            turbofish,
            "ops take no type arguments",
        ));
    }
    let (args, attrs) = arguments(&m.args, errors);
    let method = &m.method;
    let dot = &m.dot_token;
    Expr::Call(Call {
        name: format!("{family}.{method}"),
        name_tokens: quote::quote!(#family #dot #method),
        variant: Some(method.clone()),
        args,
        attrs,
        tokens: m.to_token_stream(),
    })
}

type Args = syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>;

fn arguments(args: &Args, errors: &mut Vec<syn::Error>) -> (Vec<Expr>, Vec<NamedArg>) {
    let mut values = Vec::new();
    let mut attrs: Vec<NamedArg> = Vec::new();
    for arg in args {
        match arg {
            syn::Expr::Assign(a) => match as_ident(&a.left) {
                Some(key) => attrs.push(NamedArg {
                    key: key.clone(),
                    value: (*a.right).clone(),
                }),
                None => errors.push(syn::Error::new_spanned(
                    &a.left,
                    "expected an attribute name",
                )),
            },
            value => {
                if let Some(first) = attrs.first() {
                    let msg = format!(
                        "value operands come before attributes (found one after `{} = …`)",
                        first.key
                    );
                    errors.push(syn::Error::new(value.span(), msg));
                }
                values.push(convert(value, errors));
            }
        }
    }
    (values, attrs)
}

fn binary(b: &syn::ExprBinary, errors: &mut Vec<syn::Error>) -> Expr {
    let op = match b.op {
        syn::BinOp::Add(_) => BinOp::Add,
        syn::BinOp::Mul(_) => BinOp::Mul,
        other => {
            let msg = format!(
                "`{}` is not an op of the kernel language: elementwise ops are `+` (add) and `*` (mul)",
                other.to_token_stream()
            );
            errors.push(syn::Error::new_spanned(other, msg));
            return Expr::Invalid(b.to_token_stream());
        }
    };
    Expr::Binary {
        op,
        op_span: b.op.span(),
        lhs: Box::new(convert(&b.left, errors)),
        rhs: Box::new(convert(&b.right, errors)),
        tokens: b.to_token_stream(),
    }
}
