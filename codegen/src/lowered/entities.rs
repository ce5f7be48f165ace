//! Entity references of the lowered level.

use cranelift_entity::entity_impl;

/// A per-lane register. Created by [`LoweredKernel::reg`](super::LoweredKernel::reg).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(u32);
entity_impl!(Reg, "r");

/// A kernel parameter (an array, a set of peer arrays, or a uniform scalar). Created by
/// [`LoweredKernel::param`](super::LoweredKernel::param).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Param(u32);
entity_impl!(Param, "arg");

/// A workgroup-local (LDS / shared memory) array. Created by
/// [`LoweredKernel::lds`](super::LoweredKernel::lds).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lds(u32);
entity_impl!(Lds, "lds");
