//! Checked kernel → Rust: a builder function that makes the IR kernel, and an argument struct
//! for the typed host API. User expressions are emitted with their own spans (and ascribed their
//! Rust type where they are bound), so a Rust type error lands on the user's token; the
//! generated locals use mixed-site hygiene, so they can neither capture nor shadow user names.

mod args;
mod builder;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::KernelDef;
use crate::model::Kernel;
use crate::paths;
use crate::valid::Failure;

/// The items of a kernel that passed every check.
pub fn kernel(k: &Kernel) -> TokenStream {
    let builder = builder::function(k);
    let args = args::args_struct(k.def, &k.buffers, k.collective);
    quote!(#builder #args)
}

/// After an error: the error, plus items with the kernel's signature (and, when its parameters
/// resolved, its argument struct) so that the rest of the user's crate compiles without
/// follow-on errors. The fallback function is never run: the crate does not compile.
pub fn fallback(def: &KernelDef, failure: Option<&Failure>, error: &syn::Error) -> TokenStream {
    let error = error.to_compile_error();
    let attrs = &def.attrs;
    let vis = &def.vis;
    let name = &def.name;
    let types = def.params.iter().map(|p| &p.ty);
    let (ir, core) = (paths::ir(), paths::core());
    let args = match failure {
        Some(Failure {
            buffers: Some(buffers),
            collective,
            ..
        }) => args::args_struct(def, buffers, *collective),
        _ => args::fallback_struct(def),
    };
    quote! {
        #error
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#(_: #types),*) -> #ir::Kernel {
            #core::unreachable!()
        }
        #args
    }
}
