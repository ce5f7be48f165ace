//! The lowered kernel: parameters, registers, LDS arrays and the body.

use cranelift_entity::PrimaryMap;
use wavefuse_ir::MemorySpace;

use crate::target::Arch;

use super::{Block, Lds, Param, Reg, Ty};

/// How a kernel may touch an array.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only.
    Read,
    /// Written only.
    Write,
    /// Read and written (scratch, counters, flags).
    ReadWrite,
}

/// What a parameter is for; the runtime binds arguments by purpose.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Part of an op-level buffer: `buffer` is its name, `part` the array of a packed weight
    /// (`qweight`, `scales`, `qzeros`, `g_idx`) or `data` for a dense tensor.
    Data {
        /// The op-level buffer's name.
        buffer: String,
        /// Which array of it.
        part: &'static str,
    },
    /// Scratch written and read within one launch (published partials, split-K accumulators).
    Scratch,
    /// Monotonic arrival counters: grid barriers and split-K last-arriver counts (u32, zeroed once
    /// at allocation, never reset).
    Counter,
    /// Cross-rank epoch flags (u32, zeroed once at allocation; uncached memory on AMD).
    Flags,
    /// The error word a timed-out wait writes (u32, zero means no error).
    ErrorWord,
    /// The executing rank (u32 scalar).
    Rank,
    /// The launch's epoch (u32 scalar, 1 for the first launch, +1 per launch).
    Epoch,
}

/// The kind of a parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamKind {
    /// One device array of the executing rank.
    Array {
        /// Element type.
        elem: Ty,
        /// Length in elements.
        len: usize,
        /// Where it lives.
        space: MemorySpace,
        /// How the kernel uses it.
        access: Access,
        /// What it is for.
        purpose: Purpose,
    },
    /// One array per rank of the TP group, as a table of `tp` pointers where slot `p` is rank p's
    /// array ([`peer_slot`]). The executing rank's own array is its slot.
    PeerArrays {
        /// Element type.
        elem: Ty,
        /// Length of each array in elements.
        len: usize,
        /// How the kernel uses the arrays.
        access: Access,
        /// What they are for.
        purpose: Purpose,
    },
    /// A uniform scalar.
    Scalar {
        /// Its type.
        ty: Ty,
        /// What it is for.
        purpose: Purpose,
    },
}

/// A parameter's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamData {
    /// Name in the generated code and the ABI description.
    pub name: String,
    /// Kind.
    pub kind: ParamKind,
}

/// A register's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct RegData {
    /// Its type.
    pub ty: Ty,
    /// A readable name stem for the generated code (the namer adds the index).
    pub hint: &'static str,
}

/// An LDS array's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct LdsData {
    /// Element type.
    pub elem: Ty,
    /// Length in elements.
    pub len: usize,
}

/// A co-residency requirement: all `workgroups` of a rank's grid must be resident at once
/// (the kernel has a grid barrier, DESIGN.md §5.9).
#[derive(Clone, Debug, PartialEq)]
pub struct CoResidency {
    /// Workgroups that must be resident together.
    pub workgroups: u32,
}

/// The slot of rank `peer`'s array in every rank's peer table: the one rule host and device share
/// (DESIGN.md §5.5), defined once in the IR crate.
pub use wavefuse_ir::peer_slot;

/// One rank's kernel at the lowered level. See the module docs for the execution model.
#[derive(Clone, Debug, PartialEq)]
pub struct LoweredKernel {
    /// Kernel (symbol) name.
    pub name: String,
    /// Target architecture.
    pub arch: Arch,
    /// Ranks in the TP group.
    pub tp: u32,
    /// Lanes per workgroup.
    pub workgroup_size: u32,
    /// Workgroups per rank.
    pub grid: u32,
    /// Parameters, in ABI order.
    pub params: PrimaryMap<Param, ParamData>,
    /// Registers.
    pub regs: PrimaryMap<Reg, RegData>,
    /// LDS arrays.
    pub lds: PrimaryMap<Lds, LdsData>,
    /// What every lane executes.
    pub body: Block,
    /// The epoch scalar, when the kernel synchronises.
    pub epoch: Option<Param>,
    /// The error word, when the kernel waits.
    pub error_word: Option<Param>,
    /// Grid barriers per launch (for epoch arithmetic).
    pub barriers_per_launch: u32,
    /// Flag rounds per launch (for epoch arithmetic).
    pub flag_rounds_per_launch: u32,
    /// Set when the kernel has a grid barrier.
    pub coresidency: Option<CoResidency>,
    /// Packed weight arrays (`qweight`, read-only) are streamed: read once per launch, so the
    /// CUDA writer loads their 16-byte vectors without allocating in L1 and with 256-byte L2
    /// fetches. A cache hint: no effect on values (the simulator, the HIP writer and the LLVM
    /// back end ignore it). From [`Schedule::stream_weights`](crate::lower::Schedule::stream_weights).
    pub stream_weights: bool,
    /// Loads from array parameters whose bytes fit in 32 bits are written as the base pointer
    /// plus a 32-bit byte offset (`(const char*)p + 4u * i`) instead of `p[i]`: hipcc then keeps
    /// the pointer in SGPRs and the offset in one VGPR (`global_load … v_off, s[base:base+1]`)
    /// instead of widening every index to 64 bits (`v_lshlrev_b64` + a 64-bit add per load).
    /// The same addresses: no effect on values (the simulator and the LLVM back end ignore it).
    /// From [`Schedule::byte_offsets`](crate::lower::Schedule::byte_offsets).
    pub byte_offsets: bool,
}

impl LoweredKernel {
    /// An empty kernel.
    pub fn new(name: &str, arch: Arch, tp: u32, workgroup_size: u32, grid: u32) -> Self {
        LoweredKernel {
            name: name.to_owned(),
            arch,
            tp,
            workgroup_size,
            grid,
            stream_weights: false,
            byte_offsets: false,
            params: PrimaryMap::new(),
            regs: PrimaryMap::new(),
            lds: PrimaryMap::new(),
            body: Vec::new(),
            epoch: None,
            error_word: None,
            barriers_per_launch: 0,
            flag_rounds_per_launch: 0,
            coresidency: None,
        }
    }

    /// Add a parameter.
    pub fn param(&mut self, name: &str, kind: ParamKind) -> Param {
        self.params.push(ParamData {
            name: name.to_owned(),
            kind,
        })
    }

    /// Add a register.
    pub fn reg(&mut self, ty: Ty, hint: &'static str) -> Reg {
        self.regs.push(RegData { ty, hint })
    }

    /// Add an LDS array.
    pub fn lds(&mut self, elem: Ty, len: usize) -> Lds {
        self.lds.push(LdsData { elem, len })
    }

    /// Lanes per wave.
    pub fn wave_size(&self) -> u32 {
        self.arch.wave_size()
    }

    /// Bytes of LDS per workgroup.
    pub fn lds_bytes(&self) -> usize {
        self.lds.values().map(|l| l.elem.bytes() * l.len).sum()
    }

    /// The epoch parameter, added on first use.
    pub fn epoch_param(&mut self) -> Param {
        if let Some(p) = self.epoch {
            return p;
        }
        let p = self.param(
            "epoch",
            ParamKind::Scalar {
                ty: Ty::U32,
                purpose: Purpose::Epoch,
            },
        );
        self.epoch = Some(p);
        p
    }

    /// The error-word parameter, added on first use.
    pub fn error_param(&mut self) -> Param {
        if let Some(p) = self.error_word {
            return p;
        }
        let kind = ParamKind::Array {
            elem: Ty::U32,
            len: 1,
            space: MemorySpace::HostVisible,
            access: Access::ReadWrite,
            purpose: Purpose::ErrorWord,
        };
        let p = self.param("error_word", kind);
        self.error_word = Some(p);
        p
    }
}
