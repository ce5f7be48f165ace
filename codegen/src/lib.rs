//! wavefuse code generation: passes over the IR and the C++ back ends.
//!
//! This crate is the home of the lowering passes (collectives, barriers, tiling) and of the C++
//! writer with its HIP (gfx906) and CUDA (sm_90) dialects. Until those land, it re-exports the IR
//! so that downstream crates already depend on it in the intended direction.

pub use wavefuse_ir as ir;
