//! Entity references of the IR.
//!
//! Every entity is a dense `u32` index into a `PrimaryMap` owned by a [`Kernel`](crate::Kernel).
//! Handles are only obtained from a [`Builder`](crate::Builder). Handles are plain indices: a handle
//! from another kernel that is out of range here is rejected by the validator, but one that happens
//! to be in range silently names this kernel's entity — never mix builders. Debug output uses the
//! textual IR's prefixes.

use cranelift_entity::entity_impl;

/// A buffer: a kernel parameter (input or output) living in some memory space.
/// Created by [`Builder::input`](crate::Builder::input) / [`Builder::output`](crate::Builder::output)
/// and friends.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(u32);
entity_impl!(Buffer, "buf");

/// An SSA value: a tensor produced by exactly one op and read by any number of later ops.
/// Returned by the builder's op methods.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An operation of the op level. Ops are evaluated in creation order.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u32);
entity_impl!(Op, "op");
