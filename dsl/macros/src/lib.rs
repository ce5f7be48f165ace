//! Procedural macros of the wavefuse DSL. The kernel macro itself lands with the DSL issue; this
//! crate already has its final dependency set (syn, quote, proc-macro2 and nothing internal).

use proc_macro::TokenStream;

/// Placeholder attribute that leaves its item unchanged; the DSL replaces it.
#[proc_macro_attribute]
pub fn kernel(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}
