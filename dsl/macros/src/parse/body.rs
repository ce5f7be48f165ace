//! A kernel body: declarations, then `let` bindings and output assignments.

use syn::parse::ParseStream;
use syn::{Ident, Token};

use crate::ast::{Body, LetNames, Stmt};

use super::decl::parse_decl;
use super::expr::convert;

/// Parse a whole body. Errors in op expressions are collected in `Body::errors`; anything else
/// stops the parse.
pub fn parse_body(input: ParseStream) -> syn::Result<Body> {
    let mut body = Body {
        decls: Vec::new(),
        stmts: Vec::new(),
        errors: Vec::new(),
    };
    while !input.is_empty() {
        if is_decl(input) {
            let after_stmt = !body.stmts.is_empty();
            body.decls.push(parse_decl(input, after_stmt)?);
        } else if input.peek(Token![let]) {
            body.stmts.push(parse_let(input, &mut body.errors)?);
        } else if input.peek(Ident) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
            let target: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let expr = parse_expr(input, &mut body.errors)?;
            body.stmts.push(Stmt::Assign { target, expr });
        } else {
            return Err(input.error(
                "expected a parameter (`in x: f16[batch, k];`), a binding (`let v = …;`) or an \
                 output assignment (`y = …;`)",
            ));
        }
    }
    Ok(body)
}

fn is_decl(input: ParseStream) -> bool {
    if input.peek(Token![in]) {
        return true;
    }
    let fork = input.fork();
    matches!(fork.parse::<Ident>(), Ok(kw) if kw == "out") && fork.peek(Ident)
}

fn parse_let(input: ParseStream, errors: &mut Vec<syn::Error>) -> syn::Result<Stmt> {
    input.parse::<Token![let]>()?;
    let names = if input.peek(syn::token::Paren) {
        let content;
        let paren = syn::parenthesized!(content in input);
        let idents = content.parse_terminated(Ident::parse, Token![,])?;
        let tokens = quote::quote_spanned!(paren.span.join()=> (#idents));
        LetNames::Tuple(idents.into_iter().collect(), tokens)
    } else {
        LetNames::One(input.parse()?)
    };
    input.parse::<Token![=]>()?;
    let expr = parse_expr(input, errors)?;
    Ok(Stmt::Let { names, expr })
}

fn parse_expr(input: ParseStream, errors: &mut Vec<syn::Error>) -> syn::Result<crate::ast::Expr> {
    let expr: syn::Expr = input.parse()?;
    input.parse::<Token![;]>()?;
    Ok(convert(&expr, errors))
}

use syn::parse::Parse as _;
