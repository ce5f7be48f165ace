//! Parameter declarations: `in NAME: TYPE [SHARDING] [@SPACE] [index = local|global];`.

use syn::ext::IdentExt as _;
use syn::parse::{Parse as _, ParseStream};
use syn::{Ident, LitInt, Token};

use crate::ast::{Decl, GenericEntry, GenericValue, Generics, Role, TypeSpec};

/// Parse one declaration; the caller has seen `in` or `out`.
pub fn parse_decl(input: ParseStream, after_stmt: bool) -> syn::Result<Decl> {
    let (role, role_span) = if input.peek(Token![in]) {
        (Role::In, input.parse::<Token![in]>()?.span)
    } else {
        (Role::Out, input.parse::<Ident>()?.span())
    };
    let name: Ident = input.parse()?;
    input.parse::<Token![:]>()?;
    let ty = parse_type(input)?;
    let mut decl = Decl {
        role,
        role_span,
        name,
        ty,
        sharding: None,
        space: None,
        index: None,
        after_stmt,
    };
    parse_modifiers(input, &mut decl)?;
    input.parse::<Token![;]>()?;
    Ok(decl)
}

fn parse_type(input: ParseStream) -> syn::Result<TypeSpec> {
    let keyword = input.call(Ident::parse_any)?;
    let generics = if input.peek(Token![<]) {
        Some(parse_generics(input)?)
    } else {
        None
    };
    let arg = if input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in input);
        Some(content.parse()?)
    } else {
        None
    };
    if !input.peek(syn::token::Bracket) {
        return Err(input.error(format!(
            "expected the shape after `{keyword}`, e.g. `{keyword}[batch, features]`"
        )));
    }
    let content;
    let bracket = syn::bracketed!(content in input);
    let dims = content.parse_terminated(syn::Expr::parse, Token![,])?;
    Ok(TypeSpec {
        keyword,
        generics,
        arg,
        dims: dims.into_iter().collect(),
        dims_span: bracket.span.join(),
    })
}

fn parse_generics(input: ParseStream) -> syn::Result<Generics> {
    input.parse::<Token![<]>()?;
    let mut entries = Vec::new();
    while !input.peek(Token![>]) {
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if input.peek(LitInt) {
                Some(GenericValue::Int(input.parse()?))
            } else {
                Some(GenericValue::Ident(input.call(Ident::parse_any)?))
            }
        } else {
            None
        };
        entries.push(GenericEntry { key, value });
        if !input.peek(Token![>]) {
            input.parse::<Token![,]>()?;
        }
    }
    input.parse::<Token![>]>()?;
    Ok(Generics { entries })
}

fn parse_modifiers(input: ParseStream, decl: &mut Decl) -> syn::Result<()> {
    while !input.peek(Token![;]) {
        if input.peek(Token![@]) {
            input.parse::<Token![@]>()?;
            set_once(
                &mut decl.space,
                input.call(Ident::parse_any)?,
                "memory space",
            )?;
        } else if input.peek(Ident) && input.peek2(Token![=]) {
            let key: Ident = input.parse()?;
            if key != "index" {
                return Err(syn::Error::new(
                    key.span(),
                    "expected `index = local` or `index = global`",
                ));
            }
            input.parse::<Token![=]>()?;
            set_once(
                &mut decl.index,
                input.call(Ident::parse_any)?,
                "index space",
            )?;
        } else if input.peek(Ident) {
            set_once(&mut decl.sharding, input.parse()?, "sharding")?;
        } else {
            return Err(input.error(format!(
                "expected `;` after the declaration of `{}` (or a sharding, `@space`, `index = …`)",
                decl.name
            )));
        }
    }
    Ok(())
}

fn set_once(slot: &mut Option<Ident>, ident: Ident, what: &str) -> syn::Result<()> {
    if let Some(first) = slot {
        let msg = format!("a second {what} (`{ident}` after `{first}`): a parameter has one");
        return Err(syn::Error::new(ident.span(), msg));
    }
    *slot = Some(ident);
    Ok(())
}
