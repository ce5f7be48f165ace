//! Tokens → spanned AST. A kernel's header (name, compile-time parameters, TP group) is parsed
//! with the invocation; its body is parsed on its own so that a mistake in one kernel's body
//! leaves its signature known (for the fallback item) and the other kernels untouched.

mod body;
mod decl;
mod expr;

use syn::parse::{Parse, ParseStream};
use syn::{Attribute, FnArg, Ident, Token, Visibility};

use crate::ast::{Across, Body, KernelDef};

pub use body::parse_body;

syn::custom_keyword!(across);

/// A whole `kernel!` invocation: one or more kernels.
pub struct Input {
    /// The kernels, in order.
    pub kernels: Vec<KernelDef>,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut kernels = Vec::new();
        while !input.is_empty() {
            kernels.push(input.parse()?);
        }
        if kernels.is_empty() {
            return Err(input.error("expected a kernel: `fn name(params…) [across TP] { … }`"));
        }
        Ok(Input { kernels })
    }
}

impl Parse for KernelDef {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        input.parse::<Token![fn]>()?;
        let name: Ident = input.parse()?;
        let params = parse_params(input)?;
        if input.peek(Token![->]) {
            let arrow: Token![->] = input.parse()?;
            return Err(syn::Error::new_spanned(
                arrow,
                "a kernel's function returns `wavefuse::ir::Kernel` by itself: remove the return type",
            ));
        }
        let across = if input.peek(across) {
            input.parse::<across>()?;
            let tp = syn::Expr::parse_without_eager_brace(input)?;
            Some(Across { tp })
        } else {
            None
        };
        if !input.peek(syn::token::Brace) {
            return Err(input.error("expected `across TP` or the kernel body `{ … }`"));
        }
        let content;
        syn::braced!(content in input);
        let body = content.parse()?;
        Ok(KernelDef {
            attrs,
            vis,
            name,
            params,
            across,
            body,
        })
    }
}

fn parse_params(input: ParseStream) -> syn::Result<Vec<syn::PatType>> {
    let content;
    syn::parenthesized!(content in input);
    let args = content.parse_terminated(FnArg::parse, Token![,])?;
    args.into_iter()
        .map(|arg| match arg {
            FnArg::Typed(p) => Ok(p),
            FnArg::Receiver(r) => Err(syn::Error::new_spanned(
                r,
                "a kernel is a free function: it takes no `self`",
            )),
        })
        .collect()
}

impl KernelDef {
    /// Parse the body's tokens.
    pub fn parse_body(&self) -> syn::Result<Body> {
        syn::parse::Parser::parse2(parse_body, self.body.clone())
    }
}
