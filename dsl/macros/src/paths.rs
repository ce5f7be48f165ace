//! Every path the generated code names, in one place. Generated code reaches the IR and the host
//! API only through the facade's hidden `__private` module, so a user needs `wavefuse` and
//! nothing else in their dependencies.

use proc_macro2::TokenStream;
use quote::quote;

/// The IR crate.
pub fn ir() -> TokenStream {
    quote!(::wavefuse::__private::ir)
}

/// The typed host API.
pub fn host() -> TokenStream {
    quote!(::wavefuse::__private::host)
}

/// `core`, for `unreachable!` in fallback items.
pub fn core() -> TokenStream {
    quote!(::core)
}

/// `std`, for `vec!`.
pub fn std() -> TokenStream {
    quote!(::std)
}
