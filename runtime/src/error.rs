//! The runtime's top-level error.

use crate::cache::CacheError;
use crate::compile::CompileError;
use crate::device::DeviceError;

/// Anything the runtime can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A compiler is missing or rejected the source.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The compile cache could not be read or written.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// A driver call failed, or there is no driver or GPU.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A bounded wait ran out of budget and the kernel wrote its error word (DESIGN.md §5.10).
    #[error(
        "barrier timeout in kernel {kernel}, epoch {epoch} (rank {rank}, error code {code:#x})"
    )]
    BarrierTimeout {
        /// Kernel (symbol) name.
        kernel: String,
        /// The epoch of the launch that timed out.
        epoch: u32,
        /// The rank whose error word was set (the lowest one, when several were).
        rank: u32,
        /// The non-zero error code the kernel wrote.
        code: u32,
    },
    /// A kernel with a grid barrier (or cross-rank flags) was asked to run more workgroups than can
    /// be resident at once: it would deadlock, so the launcher refuses (DESIGN.md §5.9).
    #[error(
        "kernel {kernel}: {workgroups} workgroups must be co-resident but the device holds at most \
         {capacity} ({blocks_per_cu} per CU/SM x {compute_units} CUs/SMs at this block size and LDS); \
         a grid barrier would deadlock"
    )]
    NotCoResident {
        /// Kernel (symbol) name.
        kernel: String,
        /// Workgroups that must be resident together.
        workgroups: u64,
        /// Workgroups the device can hold at once.
        capacity: u64,
        /// Occupancy: resident workgroups per CU/SM.
        blocks_per_cu: u32,
        /// CUs/SMs of the device.
        compute_units: u32,
    },
    /// Arguments do not match the kernel's parameters.
    #[error("kernel {kernel}: {message}")]
    Binding {
        /// Kernel (symbol) name.
        kernel: String,
        /// What is wrong.
        message: String,
    },
    /// A rank group was set up or used inconsistently.
    #[error("rank group: {0}")]
    RankGroup(String),
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
