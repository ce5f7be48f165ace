//! The wavefuse facade: the builder API of the IR, and (with the DSL issue) the `kernel` macro.
//!
//! ```
//! use wavefuse::ir::{Builder, ScalarType, Sharding, Tensor};
//! let mut b = Builder::new("scale_add", 1);
//! let x = b.input("x", Tensor::vector(ScalarType::F16, 8), Sharding::Replicated);
//! let r = b.input("r", Tensor::vector(ScalarType::F16, 8), Sharding::Replicated);
//! let y = b.output("y", Tensor::vector(ScalarType::F16, 8), Sharding::Replicated);
//! let xv = b.load(x);
//! let rv = b.load(r);
//! let s = b.add(xv, rv);
//! let s16 = b.round_f16(s);
//! b.store(s16, y);
//! let kernel = b.finish();
//! assert!(wavefuse::ir::validate(&kernel).is_ok());
//! ```

pub use wavefuse_ir as ir;
pub use wavefuse_macros::kernel;

#[doc(hidden)]
pub mod __private {
    pub use wavefuse_ir as ir;
}
