//! What the back ends share: the ABI description every writer's output is bound by ([`abi`]), the
//! one namer of generated identifiers ([`Names`], [`symbol`], [`identifier`]), the source language
//! of a target ([`language`]) and the vector access rule ([`vector_words`]).
//!
//! The C++ writer ([`crate::cpp`]), the LLVM back end (`crate::llvm`, feature `llvm`) and the C
//! library ([`crate::clib`]) import these from here, never from one another: the LLVM back end
//! names its kernel and parameters as the C++ writer does and accesses memory with the same vector
//! widths, so one ABI description fits both.

pub mod abi;
mod namer;

pub use namer::{Names, identifier, symbol};

use crate::lowered::Ty;
use crate::target::{Arch, Vendor};

/// The source language of a C++ dialect (HIP or CUDA).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    /// HIP C++ (hipcc / hiprtc), for AMD GPUs.
    Hip,
    /// CUDA C++ (nvcc / NVRTC), for NVIDIA GPUs.
    Cuda,
}

impl Language {
    /// File extension of a generated source.
    pub fn extension(self) -> &'static str {
        match self {
            Language::Hip => "hip",
            Language::Cuda => "cu",
        }
    }

    /// Name in comments and the ABI description.
    pub fn name(self) -> &'static str {
        match self {
            Language::Hip => "hip",
            Language::Cuda => "cuda",
        }
    }
}

/// The language a target is written in.
pub fn language(arch: Arch) -> Language {
    match arch.vendor() {
        Vendor::Amd => Language::Hip,
        Vendor::Nvidia => Language::Cuda,
    }
}

/// How a run of `n` elements of `elem` is accessed: the number of 32-bit words per vector access
/// (1, 2 or 4) and how many such accesses, or `None` for element-wise access.
pub fn vector_words(elem: Ty, n: usize) -> Option<(usize, usize)> {
    let bytes = elem.bytes() * n;
    if n < 2 || elem == Ty::Bool || bytes % 4 != 0 {
        return None;
    }
    match bytes / 4 {
        1 => Some((1, 1)),
        2 => Some((2, 1)),
        w if w % 4 == 0 => Some((4, w / 4)),
        _ => None,
    }
}
