//! The front end of the wavefuse kernel language: `wavefuse::kernel! { … }`. Users should depend
//! on the `wavefuse` facade, whose docs teach the language; this crate's docs record how the
//! macro is built and why.
//!
//! # Why a function-like macro
//!
//! A kernel declares typed, shaped, sharded parameters (`in x: f16[batch, k] col_parallel;`) and
//! a body of ops written as in the textual IR (`gemv.row(w, x)`). An attribute macro on a Rust
//! `fn` would require all of that to be valid Rust before the macro sees it, forcing shapes and
//! shardings into type-position contortions (`In<F16<[?; 2]>, ColParallel>`) and ops into method
//! chains. A function-like macro has its own grammar and still keeps Rust where Rust is the
//! right language: the header is a Rust function signature, and every compile-time parameter —
//! TP size, batch, K, N, a GPTQ layout, an epsilon — is an ordinary Rust expression evaluated
//! when the generated function runs, so one declaration yields the kernel for TP 1, 2, 4 and 8.
//!
//! # Pipeline
//!
//! - `parse/`: tokens → the spanned AST of `ast.rs`. Keywords stay identifiers, so a typo is
//!   reported by `valid` with a "did you mean" (a declaration keyword, `input` for `in`, by the
//!   parser, which cannot read on without it). Each kernel's body is parsed on its own.
//! - `valid.rs` (+ `valid/`): every check the tokens decide — names, roles, op arities and
//!   attributes, keywords, and the IR's typing rules (element type, distribution over the TP
//!   group, literal shapes, group sizes dividing a literal K). Errors are `syn::Error`s on the
//!   offending token, combined; a mistake poisons only what depends on it. What depends on run
//!   time values (a symbolic K against a group size, TP divisibility) is left to the IR validator,
//!   the one gate, which every consumer of a kernel runs.
//! - `expand/`: the checked kernel → a builder function and an argument struct. User expressions
//!   keep their spans and are bound to typed locals, so a Rust type error (a `u32` where a `usize`
//!   shape is expected) lands on the user's token. Paths go through `paths.rs`
//!   (`::wavefuse::__private::…`); generated locals have mixed-site hygiene.
//!
//! On error a kernel expands to `compile_error!` plus a fallback function with the same signature
//! (and its argument struct when the parameters resolved), so one mistake gives one message and
//! the rest of the crate still type-checks. The macro never panics.
//!
//! # Why inputs are loaded implicitly and outputs read back as values
//!
//! An input is loaded where its name is first used, once; an output is stored by `y = …;` and,
//! after that statement, `y` names the value stored — never a re-read of memory, which the IR
//! forbids (another workgroup or rank may still be writing it, DESIGN.md §5.7). This keeps the
//! program order of the IR exactly the order of the user's statements, so the kernel set's IR
//! text is the same whether built with the builder or with the DSL.
//!
//! # Why the GEMV mode is explicit
//!
//! `gemv.col` / `gemv.row` / `gemv.rep` repeat what the weight's declared sharding implies. The
//! repetition is the point: it states the user's intent where the data flows (a row-parallel
//! GEMV yields partial sums that need an allreduce), and a weight declared one way but used the
//! other is reported on the mode token (DESIGN.md §5.6).

mod ast;
mod expand;
mod model;
mod ops;
mod parse;
mod paths;
mod suggest;
mod valid;

use proc_macro::TokenStream;

/// Define one or more kernels; see the `wavefuse` crate's docs for the language.
#[proc_macro]
pub fn kernel(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as parse::Input);
    let mut out = proc_macro2::TokenStream::new();
    for def in &input.kernels {
        out.extend(one_kernel(def));
    }
    out.into()
}

fn one_kernel(def: &ast::KernelDef) -> proc_macro2::TokenStream {
    let body = match def.parse_body() {
        Ok(body) => body,
        Err(e) => return expand::fallback(def, None, &e),
    };
    match valid::check(def, &body) {
        Ok(kernel) => expand::kernel(&kernel),
        Err(failure) => expand::fallback(def, Some(&failure), &failure.error),
    }
}
