//! The language layer under the `wavefuse` facade: the [`kernel!`] macro, the IR (re-exported as
//! [`ir`]), the typed host API ([`host`]) and the one peer-order rule ([`peer_order`]).
//!
//! Depend on `wavefuse`, which re-exports all of this and documents it. This crate exists so
//! that the crates below the facade's optional pipeline (the kernel set, the harness) can use the
//! language without depending on the facade: they name it `wavefuse` in their manifests
//! (`wavefuse = { package = "wavefuse-dsl", … }`), which is the path the macro's expansion uses.

#![deny(missing_docs)]

// Generated code names `::wavefuse::…`; this lets the crate's own tests use the macro.
extern crate self as wavefuse;

pub mod host;

pub use wavefuse_ir as ir;
/// Define kernels in the wavefuse language; the `wavefuse` crate's documentation describes it.
pub use wavefuse_macros::kernel;

/// The one peer-addressing rule of a TP group, shared by host and device.
///
/// Every rank addresses the group's exchange buffers through `tp` slots, and slot
/// [`ir::peer_slot`]`(p)` holds rank p's buffer — the same table on every rank, in ascending rank
/// order. This iterator yields the rank held by each slot, in slot order. Host code builds the slot
/// array with [`host::Peers::new`], which uses it; the lowering, the simulator and the runtime use
/// [`ir::peer_slot`] itself. Summing peers in slot order is summing in ascending rank order, so
/// every rank rounds identically and replicated results agree bit for bit.
///
/// ```
/// let order: Vec<u32> = wavefuse_dsl::peer_order(4).collect();
/// assert_eq!(order, [0, 1, 2, 3]);
/// ```
pub fn peer_order(tp: u32) -> impl Iterator<Item = u32> {
    let mut by_slot: Vec<u32> = (0..tp).collect();
    by_slot.sort_by_key(|&p| ir::peer_slot(p));
    by_slot.into_iter()
}

#[doc(hidden)]
pub mod __private {
    pub use crate::host;
    pub use wavefuse_ir as ir;
}
