//! wavefuse runtime: compiles generated code, loads and launches it, and A/B-tests it.
//!
//! The compilers, devices and harness land with the runtime issue. The runtime depends on
//! `wavefuse-codegen` and `wavefuse-ir` only: never on the DSL, so kernels can also come from IR
//! built by hand.

pub use wavefuse_codegen as codegen;
