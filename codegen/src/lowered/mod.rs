//! The lowered level: one rank's kernel as workgroups of lanes executing a structured program.
//!
//! # Execution model
//! A [`LoweredKernel`] is launched once per rank of its TP group with `grid` workgroups of
//! `workgroup_size` lanes; lanes are grouped into waves of the target's wave size. Every lane runs
//! [`LoweredKernel::body`]. Registers ([`Reg`]) are per lane. LDS arrays ([`Lds`]) are per
//! workgroup and never visible to another workgroup (DESIGN.md §5.2). Array parameters are per
//! rank; a [`ParamKind::PeerArrays`] parameter is one array per rank of the group, addressed by
//! peer rank, where entry `r` is rank r's array on every rank (DESIGN.md §5.5: the host fills it
//! with [`peer_slot`]).
//!
//! # Statements
//! Straight-line statements, `for` loops and `if`s ([`Stmt`]). There is no early return: tails are
//! masked with `if` (DESIGN.md §5.8), and a workgroup barrier may only appear where control flow is
//! uniform across the workgroup (the lowered validator checks this).
//!
//! # Memory semantics
//! Plain loads and stores carry no ordering. A value written by one lane becomes visible to a lane
//! of another workgroup or rank only through a release (an [`Stmt::Atomic`] or [`Stmt::Fence`] with
//! ordering release or stronger, after the write, in program order) paired with an acquire (an
//! atomic load with ordering acquire or stronger, or a [`Stmt::WaitGe`], that reads the released
//! value or a later one), both at a scope that contains both lanes: workgroup for lanes of one
//! workgroup, agent for one device, system across devices. A workgroup barrier orders the memory
//! accesses of the lanes of one workgroup (LDS and global) at workgroup scope only.
//!
//! # Synchronisation objects
//! Grid barriers and cross-rank flags appear first as [`Stmt::GridBarrier`] and
//! [`Stmt::PublishFlag`] / [`Stmt::WaitFlag`]; [`expand::expand_sync`] rewrites them into
//! primitives (barrier, elected atomic, bounded wait) with epoch arithmetic that never resets a
//! counter (DESIGN.md §5.4). Back ends and the simulator see only primitives.

mod entities;
pub mod expand;
mod expr;
mod info;
mod kernel;
pub(crate) mod print;
mod stmt;
pub mod ticket;
pub mod validate;

pub use entities::{Lds, Param, Reg};
pub use expr::{BinOp, Expr, Special, UnOp};
pub use info::{LoweredInfo, RegInfo, Uniformity};
pub use kernel::{
    Access, CoResidency, DataArrayRef, LdsData, LoweredKernel, NotCoResident, Occupancy, ParamData,
    ParamKind, Purpose, RegData, peer_slot,
};
pub use stmt::{AtomicOp, Base, Block, Invariant, MemRef, ReduceKind, Stmt};

/// Element and register types of the lowered level.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A predicate.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE binary16.
    F16,
    /// IEEE binary32.
    F32,
}

impl Ty {
    /// Size in bytes in memory.
    pub fn bytes(self) -> usize {
        match self {
            Ty::Bool | Ty::I8 => 1,
            Ty::F16 => 2,
            Ty::I32 | Ty::U32 | Ty::F32 => 4,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Ty::F16 | Ty::F32)
    }

    /// The textual name.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::I8 => "i8",
            Ty::I32 => "i32",
            Ty::U32 => "u32",
            Ty::F16 => "f16",
            Ty::F32 => "f32",
        }
    }
}
