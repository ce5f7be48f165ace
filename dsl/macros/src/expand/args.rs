//! The argument struct of the typed host API: one field per parameter, typed by element type,
//! weight format and sharding (so binding a column-parallel weight where a row-parallel one is
//! declared is a Rust type error), plus the TP group's peers for kernels that communicate, and
//! a `check` against the built kernel for everything only known at run time (lengths, layouts,
//! peer count).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Ident;

use crate::ast::{KernelDef, Role};
use crate::model::{BufType, Buffer, Dtype, Format, Sharding};
use crate::paths;

use super::builder::pretty;

/// `gemv_int4_allreduce_rmsnorm` → `GemvInt4AllreduceRmsnormArgs`.
pub fn args_struct_name(def: &KernelDef) -> Ident {
    let camel: String = def
        .name
        .to_string()
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect();
    format_ident!("{}Args", camel, span = def.name.span())
}

/// One line describing a parameter, for docs.
pub fn describe(b: &Buffer) -> String {
    let role = if b.role == Role::In { "in" } else { "out" };
    let (ty, dims) = match &b.ty {
        BufType::Tensor { dtype, dims } => {
            (dtype.name().to_owned(), dims.iter().collect::<Vec<_>>())
        }
        BufType::Weight { format, k, n } => (format_name(format), vec![*k, *n]),
    };
    let dims: Vec<String> = dims.iter().map(|d| pretty(&quote!(#d))).collect();
    let mut s = format!("`{role} {}: {ty}[{}]", b.name, dims.join(", "));
    if b.sharding != Sharding::Replicated {
        s.push(' ');
        s.push_str(b.sharding.name());
    }
    s.push('`');
    s
}

fn format_name(f: &Format) -> String {
    match f {
        Format::F16 => "f16_nk".to_owned(),
        Format::GptqLit(_) => "gptq<…>".to_owned(),
        Format::AwqLit(_) => "awq<…>".to_owned(),
        Format::GptqExpr(e) => format!("gptq({})", pretty(&quote!(#e))),
        Format::AwqExpr(e) => format!("awq({})", pretty(&quote!(#e))),
        Format::Any(e) => format!("weight({})", pretty(&quote!(#e))),
    }
}

fn element(d: Dtype) -> TokenStream {
    let host = paths::host();
    match d {
        Dtype::F16 => quote!(#host::f16),
        Dtype::Bf16 => quote!(#host::bf16),
        Dtype::F32 => quote!(f32),
        Dtype::I8 => quote!(i8),
        Dtype::I32 => quote!(i32),
        Dtype::U32 => quote!(u32),
    }
}

fn sharding(s: Sharding) -> TokenStream {
    let host = paths::host();
    match s {
        Sharding::Replicated => quote!(#host::Replicated),
        Sharding::Col => quote!(#host::ColParallel),
        Sharding::Row => quote!(#host::RowParallel),
        Sharding::Partial => quote!(#host::Partial),
    }
}

fn field_type(b: &Buffer) -> TokenStream {
    let host = paths::host();
    let s = sharding(b.sharding);
    match (&b.ty, b.role) {
        (BufType::Tensor { dtype, .. }, Role::In) => {
            let t = element(*dtype);
            quote!(#host::Input<'a, #t, #s>)
        }
        (BufType::Tensor { dtype, .. }, Role::Out) => {
            let t = element(*dtype);
            quote!(#host::Output<'a, #t, #s>)
        }
        (BufType::Weight { format, .. }, _) => match format {
            Format::F16 => quote!(#host::F16Weight<'a, #s>),
            Format::GptqLit(_) | Format::GptqExpr(_) => quote!(#host::Gptq<'a, #s>),
            Format::AwqLit(_) | Format::AwqExpr(_) => quote!(#host::Awq<'a, #s>),
            Format::Any(_) => quote!(#host::AnyWeight<'a, #s>),
        },
    }
}

/// The argument struct and its `check`.
pub fn args_struct(def: &KernelDef, buffers: &[Buffer], collective: bool) -> TokenStream {
    let (ir, host, core) = (paths::ir(), paths::host(), paths::core());
    let name = args_struct_name(def);
    let kernel = &def.name;
    let kernel_str = kernel.to_string();
    let vis = &def.vis;
    let cfgs: Vec<_> = def
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    let fields = buffers.iter().map(|b| {
        let (id, ty) = (b.name, field_type(b));
        let doc = describe(b);
        quote!(#[doc = #doc] pub #id: #ty,)
    });
    let names: Vec<String> = buffers.iter().map(|b| b.name.to_string()).collect();
    let checks = buffers.iter().map(|b| {
        let (id, s) = (b.name, b.name.to_string());
        quote!(#host::Bind::check(&self.#id, kernel, #s)?;)
    });
    let gather = buffers.iter().map(|b| {
        let (id, s) = (b.name, b.name.to_string());
        quote! {
            if let #core::option::Option::Some(d) = #host::Bind::host_data(&self.#id, kernel, #s)? {
                let b = #host::buffer_named(kernel, #s).expect("checked: the kernel has it");
                inputs.insert(b, d);
            }
        }
    });
    let scatter = buffers.iter().map(|b| {
        let (id, s) = (b.name, b.name.to_string());
        quote! {
            if let #core::option::Option::Some(t) =
                #host::buffer_named(kernel, #s).and_then(|b| outputs.get(&b))
            {
                #host::Bind::write(&mut self.#id, #s, t)?;
            }
        }
    });
    let (peers_field, peers_check) = if collective {
        (
            quote! {
                /// The TP group's exchange buffers, in the order of [`wavefuse::peer_order`]
                /// (one per rank; built by [`wavefuse::host::Peers::new`]).
                pub peers: #host::Peers,
            },
            quote!(self.peers.check(kernel)?;),
        )
    } else {
        (quote!(), quote!())
    };
    let doc = format!(
        "One rank's arguments for a launch of [`{kernel_str}`](fn@{kernel_str}), typed by \
         element type, weight format and sharding. Call [`check`](Self::check) with the built \
         kernel before launching."
    );
    quote! {
        #(#cfgs)*
        #[doc = #doc]
        #[derive(Debug)]
        #vis struct #name<'a> {
            #(#fields)*
            #peers_field
        }

        #(#cfgs)*
        impl #name<'_> {
            /// Check every argument against `kernel` before a launch: that it is this
            /// declaration's kernel, and each parameter's sharding, element type, weight layout
            /// and per-rank lengths, and the number of peers. The first mismatch is returned.
            pub fn check(&self, kernel: &#ir::Kernel) -> #core::result::Result<(), #host::ArgError> {
                #host::check_kernel(kernel, #kernel_str, &[#(#names),*])?;
                #(#checks)*
                #peers_check
                #core::result::Result::Ok(())
            }
        }

        #(#cfgs)*
        impl #host::KernelArgs for #name<'_> {
            fn check_all(&self, kernel: &#ir::Kernel) -> #core::result::Result<(), #host::ArgError> {
                self.check(kernel)
            }

            fn inputs(
                &self,
                kernel: &#ir::Kernel,
            ) -> #core::result::Result<#ir::reference::RankInputs, #host::ArgError> {
                self.check(kernel)?;
                let mut inputs = #ir::reference::RankInputs::new();
                #(#gather)*
                #core::result::Result::Ok(inputs)
            }

            fn write_outputs(
                &mut self,
                kernel: &#ir::Kernel,
                outputs: &#ir::reference::RankOutputs,
            ) -> #core::result::Result<(), #host::ArgError> {
                self.check(kernel)?;
                #(#scatter)*
                #core::result::Result::Ok(())
            }
        }
    }
}

/// An argument struct with no fields, for a kernel whose parameters did not resolve.
pub fn fallback_struct(def: &KernelDef) -> TokenStream {
    let (ir, host, core) = (paths::ir(), paths::host(), paths::core());
    let name = args_struct_name(def);
    let vis = &def.vis;
    quote! {
        #vis struct #name<'a> {
            _kernel: #core::marker::PhantomData<&'a ()>,
        }

        impl #name<'_> {
            pub fn check(&self, _: &#ir::Kernel) -> #core::result::Result<(), #host::ArgError> {
                #core::unreachable!()
            }
        }
    }
}
