//! The builder function: `fn name(params…) -> Kernel`, one builder call per declaration and per
//! step, in program order.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use crate::ast::Role;
use crate::model::{
    AwqLit, BufType, Buffer, Dtype, Format, GptqLit, Group, Kernel, Sharding, Step, Zero,
};
use crate::ops::{Mode, Op, Reduce};
use crate::paths;

use super::args::args_struct_name;

fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn buf(i: usize) -> Ident {
    format_ident!("buf{}", i, span = Span::mixed_site())
}

fn val(i: usize) -> Ident {
    format_ident!("v{}", i, span = Span::mixed_site())
}

/// A user expression bound to a local of Rust type `ty`, so that a type error lands on it (and
/// the type it was expected to have is shown there too, not on the whole macro call).
fn typed(expr: &syn::Expr, ty: TokenStream) -> TokenStream {
    let x = local("x");
    let span = expr.span();
    let ty = respan(ty, span);
    quote_spanned!(span=> { let #x: #ty = #expr; #x })
}

fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                t = TokenTree::Group(group);
            }
            t.set_span(span);
            t
        })
        .collect()
}

/// The builder function.
pub fn function(k: &Kernel) -> TokenStream {
    let def = k.def;
    let ir = paths::ir();
    let b = local("builder");
    let tp = local("tp");
    let tp_init = match &def.across {
        Some(a) => {
            let e = typed(&a.tp, quote!(u32));
            quote!(let #tp: u32 = #e;)
        }
        None => quote!(let #tp: u32 = 1;),
    };
    let name = &def.name;
    let name_str = name.to_string();
    let decls = k.buffers.iter().enumerate().map(|(i, buffer)| {
        let id = buf(i);
        let decl = declaration(buffer, &tp);
        quote!(let #id = #b.param(#decl);)
    });
    let steps = k.steps.iter().map(|s| step(s, &b));
    let (attrs, vis, params) = (&def.attrs, &def.vis, &def.params);
    let doc = docs(k);
    quote! {
        #(#attrs)*
        #doc
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#(#params),*) -> #ir::Kernel {
            #tp_init
            let mut #b = #ir::Builder::new(#name_str, #tp);
            #(#decls)*
            #(#steps)*
            #b.finish()
        }
    }
}

fn declaration(b: &Buffer, tp: &Ident) -> TokenStream {
    let ir = paths::ir();
    let name = b.name.to_string();
    let ty = buffer_type(b);
    let sharding = match b.sharding {
        Sharding::Replicated => quote!(#ir::Sharding::Replicated),
        Sharding::Col => quote!(#ir::Sharding::ColumnParallel { tp: #tp }),
        Sharding::Row => quote!(#ir::Sharding::RowParallel { tp: #tp }),
        Sharding::Partial => quote!(#ir::Sharding::Partial { tp: #tp }),
    };
    let ctor = if b.role == Role::In {
        quote!(input)
    } else {
        quote!(output)
    };
    let mut decl = quote!(#ir::BufferDecl::#ctor(#name, #ty, #sharding));
    if b.host {
        decl = quote!(#decl.space(#ir::MemorySpace::HostVisible));
    }
    if b.global_index {
        decl = quote!(#decl.index_space(#ir::IndexSpace::Global));
    }
    decl
}

fn buffer_type(b: &Buffer) -> TokenStream {
    let (ir, std) = (paths::ir(), paths::std());
    match &b.ty {
        BufType::Tensor { dtype, dims } => {
            let dtype = scalar(*dtype);
            let dims = dims.iter().map(|d| typed(d, quote!(usize)));
            quote!(#ir::Tensor { dtype: #dtype, shape: #std::vec![#(#dims),*] })
        }
        BufType::Weight { format, k, n } => {
            let format = weight_format(format);
            let (k, n) = (typed(k, quote!(usize)), typed(n, quote!(usize)));
            quote!(#ir::Weight { format: #format, k: #k, n: #n })
        }
    }
}

fn scalar(d: Dtype) -> TokenStream {
    let ir = paths::ir();
    let v = match d {
        Dtype::F16 => quote!(F16),
        Dtype::Bf16 => quote!(Bf16),
        Dtype::F32 => quote!(F32),
        Dtype::I8 => quote!(I8),
        Dtype::I32 => quote!(I32),
        Dtype::U32 => quote!(U32),
    };
    quote!(#ir::ScalarType::#v)
}

fn group(g: Group) -> TokenStream {
    let ir = paths::ir();
    match g {
        Group::Rows(rows) => quote!(#ir::GroupSize::Rows(#rows)),
        Group::PerChannel => quote!(#ir::GroupSize::PerChannel),
    }
}

fn weight_format(f: &Format) -> TokenStream {
    let ir = paths::ir();
    match f {
        Format::F16 => quote!(#ir::WeightFormat::F16),
        Format::GptqLit(GptqLit {
            group: g,
            zero,
            scale,
            act_order,
        }) => {
            let (g, scale) = (group(*g), scalar(*scale));
            let zero = match zero {
                Zero::V1 => quote!(V1),
                Zero::V2 => quote!(V2),
                Zero::Sym => quote!(Symmetric),
            };
            quote!(#ir::WeightFormat::Gptq(#ir::GptqLayout {
                group: #g, scale: #scale, zero: #ir::ZeroPoint::#zero, act_order: #act_order,
            }))
        }
        Format::GptqExpr(e) => {
            let layout = typed(e, quote!(#ir::GptqLayout));
            quote!(#ir::WeightFormat::Gptq(#layout))
        }
        Format::AwqLit(AwqLit { group: g, scale }) => {
            let (g, scale) = (group(*g), scalar(*scale));
            quote!(#ir::WeightFormat::Awq(#ir::AwqLayout { group: #g, scale: #scale }))
        }
        Format::AwqExpr(e) => {
            let layout = typed(e, quote!(#ir::AwqLayout));
            quote!(#ir::WeightFormat::Awq(#layout))
        }
        Format::Any(e) => typed(e, quote!(#ir::WeightFormat)),
    }
}

fn step(s: &Step, b: &Ident) -> TokenStream {
    match s {
        Step::Load { buf: i, value } => {
            let (v, bf) = (val(*value), buf(*i));
            quote!(let #v = #b.load(#bf);)
        }
        Step::Store { value, buf: i } => {
            let (v, bf) = (val(*value), buf(*i));
            quote!(#b.store(#v, #bf);)
        }
        Step::Op {
            op,
            weight,
            args,
            attrs,
            results,
            tokens,
        } => {
            let call = op_call(*op, *weight, args, attrs, b);
            let results: Vec<Ident> = results.iter().map(|r| val(*r)).collect();
            let span = tokens
                .clone()
                .into_iter()
                .next()
                .map_or_else(Span::call_site, |t| t.span());
            // The op remembers its first token (`gemv.rep`, `rmsnorm`, the operator of `a + b`):
            // `line!()` and `column!()` spanned there expand to that token's place in the user's
            // file, so a validation error or a lowering refusal about the op reads
            // `file:line:column`.
            let at = quote_spanned!(span=>
                #b.located(::core::file!(), ::core::line!(), ::core::column!());
            );
            match results.as_slice() {
                [r] => quote_spanned!(span=> #at let #r = #call;),
                rs => quote_spanned!(span=> #at let (#(#rs),*) = #call;),
            }
        }
    }
}

fn op_call(
    op: Op,
    weight: Option<usize>,
    args: &[usize],
    attrs: &[&syn::Expr],
    b: &Ident,
) -> TokenStream {
    let ir = paths::ir();
    let a: Vec<Ident> = args.iter().map(|v| val(*v)).collect();
    let attr = |i: usize, ty: TokenStream| typed(attrs[i], ty);
    match op {
        Op::Gemv(mode) => {
            let w = buf(weight.unwrap_or_default());
            let mode = match mode {
                Mode::Rep => quote!(Replicated),
                Mode::Col => quote!(Column),
                Mode::Row => quote!(Row),
            };
            let x = &a[0];
            quote!(#b.gemv(#w, #x, #ir::Parallelism::#mode))
        }
        Op::GemvQ8(mode) => {
            let w = buf(weight.unwrap_or_default());
            let mode = match mode {
                Mode::Rep => quote!(Replicated),
                Mode::Col => quote!(Column),
                Mode::Row => quote!(Row),
            };
            let (q, sc) = (&a[0], &a[1]);
            let block = attr(0, quote!(usize));
            quote!(#b.gemv_q8(#w, (#q, #sc), #block, #ir::Parallelism::#mode))
        }
        Op::Add => quote!(#b.add(#(#a),*)),
        Op::Mul => quote!(#b.mul(#(#a),*)),
        Op::Silu => quote!(#b.silu(#(#a),*)),
        Op::RoundF16 => quote!(#b.round_f16(#(#a),*)),
        Op::Slice => {
            let (start, len) = (attr(0, quote!(usize)), attr(1, quote!(usize)));
            quote!(#b.slice(#(#a),*, #start, #len))
        }
        Op::RmsNorm => {
            let eps = attr(0, quote!(f64));
            quote!(#b.rmsnorm(#(#a),*, #eps))
        }
        Op::Reduce(r) => {
            let r = match r {
                Reduce::Sum => quote!(Sum),
                Reduce::SumSquares => quote!(SumSquares),
                Reduce::AbsMax => quote!(AbsMax),
            };
            quote!(#b.reduce(#ir::ops::ReduceOp::#r, #(#a),*))
        }
        Op::AllReduce => quote!(#b.allreduce(#(#a),*)),
        Op::AllReduceInt8 => {
            let block = attr(0, quote!(usize));
            quote!(#b.allreduce_int8(#(#a),*, #block))
        }
        Op::QuantizeInt8 => {
            let block = attr(0, quote!(usize));
            quote!(#b.quantize_int8(#(#a),*, #block))
        }
        Op::DequantizeInt8 => {
            let block = attr(0, quote!(usize));
            quote!(#b.dequantize_int8(#(#a),*, #block))
        }
        Op::QuantizeRne => {
            let (block, clamp) = (attr(0, quote!(usize)), attr(1, quote!(usize)));
            quote!(#b.quantize_rne(#(#a),*, #block, #clamp))
        }
    }
}

/// Rendered Rust tokens, with the spaces `to_string` puts around `.` and parentheses removed.
pub fn pretty(tokens: &TokenStream) -> String {
    let mut s = tokens.to_string();
    for (from, to) in [
        (" . ", "."),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        (" ,", ","),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// The generated part of the function's docs: its parameters and what to bind them with.
fn docs(k: &Kernel) -> TokenStream {
    let args = args_struct_name(k.def);
    let group = match &k.def.across {
        Some(a) => {
            let tp = &a.tp;
            format!("a TP group of `{}` ranks", pretty(&quote!(#tp)))
        }
        None => "one rank".to_owned(),
    };
    let mut lines = vec![
        String::new(),
        "# Kernel".to_owned(),
        String::new(),
        format!(
            "Generated by `wavefuse::kernel!`: builds the IR kernel for {group} (not yet \
             validated: `wavefuse::ir::validate` is the one gate). Bind one rank's arguments \
             with [`{args}`]. Parameters:"
        ),
        String::new(),
    ];
    lines.extend(
        k.buffers
            .iter()
            .map(|b| format!("- {}", super::args::describe(b))),
    );
    quote!(#(#[doc = #lines])*)
}
