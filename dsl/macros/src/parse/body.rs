//! A kernel body: declarations, then `let` bindings and output assignments.

use syn::parse::ParseStream;
use syn::{Ident, Token};

use crate::ast::{Body, LetNames, Stmt};
use crate::suggest::declaration_keyword;

use super::decl::parse_decl;
use super::expr::convert;

/// Parse a whole body. Errors the parse can step over (a form of op expression the DSL lacks,
/// `==` for `=`) are collected in `Body::errors`; anything else stops the parse.
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
        } else if input.peek(Ident) && input.peek2(Token![=]) {
            let target: Ident = input.parse()?;
            parse_assign_token(input, &mut body.errors)?;
            let expr = parse_expr(input, &mut body.errors)?;
            body.stmts.push(Stmt::Assign { target, expr });
        } else if let Some(keyword) = misspelt_decl(input) {
            return Err(unknown_declaration(&keyword));
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

/// `WORD name:` where WORD is not `in` or `out`: a declaration with a misspelt keyword.
fn misspelt_decl(input: ParseStream) -> Option<Ident> {
    let fork = input.fork();
    let keyword: Ident = fork.parse().ok()?;
    fork.parse::<Ident>().ok()?;
    fork.peek(Token![:]).then_some(keyword)
}

fn unknown_declaration(keyword: &Ident) -> syn::Error {
    let msg = match declaration_keyword(&keyword.to_string()) {
        Some(kw) => format!("unknown declaration `{keyword}`; did you mean `{kw}`?"),
        None => format!(
            "unknown declaration `{keyword}`: a parameter is declared `in name: type;` or \
             `out name: type;`"
        ),
    };
    syn::Error::new(keyword.span(), msg)
}

/// The `=` of a binding or an assignment. `==` is reported and read as `=`, so the rest of the
/// body is still checked.
fn parse_assign_token(input: ParseStream, errors: &mut Vec<syn::Error>) -> syn::Result<()> {
    if input.peek(Token![==]) {
        let eq: Token![==] = input.parse()?;
        errors.push(syn::Error::new_spanned(
            eq,
            "`==` compares; assign with `=`",
        ));
    } else {
        input.parse::<Token![=]>()?;
    }
    Ok(())
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
    parse_assign_token(input, errors)?;
    let expr = parse_expr(input, errors)?;
    Ok(Stmt::Let { names, expr })
}

fn parse_expr(input: ParseStream, errors: &mut Vec<syn::Error>) -> syn::Result<crate::ast::Expr> {
    let expr: syn::Expr = input.parse()?;
    input.parse::<Token![;]>()?;
    Ok(convert(&expr, errors))
}

use syn::parse::Parse as _;
