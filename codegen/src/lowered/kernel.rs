//! The lowered kernel: parameters, registers, LDS arrays and the body.

use cranelift_entity::PrimaryMap;
use wavefuse_ir::MemorySpace;

pub use crate::lower::CoResidency;
use crate::target::Arch;

use super::{Block, Expr, Lds, Param, Reg, Ty};

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
    /// The launch's epoch passed by the host (u32 scalar, 1 for the first launch, +1 per launch):
    /// the ABI of hand-written kernels. It is correct for one replay of a captured graph only;
    /// generated kernels keep their epoch on the device ([`LoweredKernel::epoch_value`]).
    Epoch,
    /// A value passed by the launcher (a hand-written kernel's `k`, `n`, `group_size`, a
    /// stride or a split count): the number is in the ABI description's `value`
    /// ([`crate::abi::AbiParam::value`]), evaluated for the shape; u32 or i32 scalar.
    Value,
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

/// An array parameter that holds part of an op-level buffer ([`ParamData::data_array`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct DataArrayRef<'a> {
    /// The op-level buffer's name.
    pub buffer: &'a str,
    /// Which array of it (`data`, `qweight`, `scales`, `qzeros`, `g_idx`).
    pub part: &'static str,
    /// Element type.
    pub elem: Ty,
    /// Length in elements (of each rank's array, for peer arrays).
    pub len: usize,
}

impl ParamData {
    /// The op-level buffer and part this parameter's array (own or peer) holds, with its element
    /// type and length; None for runtime-owned arrays and scalars.
    pub fn data_array(&self) -> Option<DataArrayRef<'_>> {
        match &self.kind {
            ParamKind::Array {
                elem,
                len,
                purpose: Purpose::Data { buffer, part },
                ..
            }
            | ParamKind::PeerArrays {
                elem,
                len,
                purpose: Purpose::Data { buffer, part },
                ..
            } => Some(DataArrayRef {
                buffer,
                part,
                elem: *elem,
                len: *len,
            }),
            _ => None,
        }
    }
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

/// What bounds how many workgroups of a kernel one CU/SM holds, for [`LoweredKernel::coresident`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Occupancy {
    /// The most waves any register count allows ([`Arch::max_waves_per_simd`]): what the
    /// lowering knows before the real compiler has run.
    HardwareMax,
    /// The compiled kernel's: `waves_per_simd` waves (warps per sub-partition) at `registers`
    /// vector registers per lane, from the compiler's resource report.
    Compiled {
        /// Resident waves per SIMD (warps per SM sub-partition).
        waves_per_simd: u32,
        /// Vector registers per lane (AMD VGPRs, NVIDIA registers per thread).
        registers: u32,
    },
}

/// The grids of a kernel whose workgroups wait for each other (a grid barrier, or flags of ranks
/// sharing the device) do not all fit on one device at once (DESIGN.md §5.9): launched, it would
/// wait forever, so it is refused before.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kernel}: {} workgroups of {workgroup_size} lanes must be resident at once (its workgroups \
     wait for each other: a grid barrier, or flags of ranks sharing the device), but {arch} holds \
     at most {} ({cus} {} x {per_cu}) at {}",
    counted(*ranks_per_device, *workgroups),
    cus * per_cu,
    if *arch == Arch::Gfx906 { "CUs" } else { "SMs" },
    describe(*arch, *occupancy, *lds_bytes)
)]
pub struct NotCoResident {
    /// The kernel.
    pub kernel: String,
    /// Its target.
    pub arch: Arch,
    /// Workgroups of one rank's grid.
    pub workgroups: u32,
    /// Ranks whose grids share the device.
    pub ranks_per_device: u32,
    /// Lanes per workgroup.
    pub workgroup_size: u32,
    /// LDS per workgroup, in bytes.
    pub lds_bytes: u32,
    /// Workgroups one CU/SM holds ([`Arch::resident_workgroups_per_cu`]).
    pub per_cu: u32,
    /// CUs/SMs of the device.
    pub cus: u32,
    /// What bounded `per_cu`.
    pub occupancy: Occupancy,
}

fn counted(ranks: u32, workgroups: u32) -> String {
    if ranks == 1 {
        workgroups.to_string()
    } else {
        format!("{} ({ranks} ranks x {workgroups})", ranks * workgroups)
    }
}

fn describe(arch: Arch, o: Occupancy, lds: u32) -> String {
    let regs = if arch == Arch::Gfx906 {
        "VGPRs"
    } else {
        "registers"
    };
    let what = match o {
        Occupancy::HardwareMax => {
            "the most waves a CU holds, whatever the register count".to_owned()
        }
        Occupancy::Compiled {
            waves_per_simd,
            registers,
        } => format!("its compiled {registers} {regs} ({waves_per_simd} waves per SIMD)"),
    };
    if lds > 0 {
        format!("{what}, {lds} bytes of LDS per workgroup")
    } else {
        what
    }
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
    /// The host-passed epoch scalar ([`LoweredKernel::epoch_param`]): kernels built by hand with
    /// the hand-written ABI. Generated kernels have none: their epoch lives on the device.
    pub epoch: Option<Param>,
    /// The device-side epoch state ([`LoweredKernel::epoch_value`]): a [`Purpose::Counter`]
    /// array of one word per workgroup, the launches that workgroup completed (DESIGN.md §5.4:
    /// the generation advances on the device, so the same launch can be replayed).
    pub epoch_state: Option<Param>,
    /// The register holding this launch's epoch, loaded from `epoch_state[wg_id] + 1` at entry.
    pub epoch_reg: Option<Reg>,
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
    /// The target can launch a kernel as a programmatic dependent of the previous kernel of its
    /// stream (set by the lowering on sm_90; gfx906 has no such launch). Whether this kernel
    /// opens with the stream-order prologue and may be launched so is
    /// [`LoweredKernel::stream_order_prologue`]. See `docs/synchronisation.md` (stream order).
    pub dependent_launch: bool,
    /// Workgroups per SM the compiler is asked to keep resident (sm_90's `__launch_bounds__`
    /// minimum; 0: none; the HIP writer ignores it). From
    /// [`Schedule::min_resident_per_cu`](crate::lower::Schedule::min_resident_per_cu).
    pub min_resident_per_cu: u32,
    /// Times each workgroup reads its part of the packed weights (`qweight`, scales, zero
    /// points): `ceil(batch / batch_tile)` with batch tiles
    /// ([`Schedule::batch_tile`](crate::lower::Schedule::batch_tile)), else 1. The MI50 model
    /// counts their bytes this many times (`crate::model`).
    pub weight_passes: u32,
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
            dependent_launch: false,
            min_resident_per_cu: 0,
            weight_passes: 1,
            params: PrimaryMap::new(),
            regs: PrimaryMap::new(),
            lds: PrimaryMap::new(),
            body: Vec::new(),
            epoch: None,
            epoch_state: None,
            epoch_reg: None,
            error_word: None,
            barriers_per_launch: 0,
            flag_rounds_per_launch: 0,
            coresidency: None,
        }
    }

    /// Add a parameter. A name already taken (the scratch of a second GEMV stage of the same
    /// kind as the first's, e.g. two split-K stages) gets the suffix `_2`, `_3`, …: names stay
    /// unique in the generated code; the runtime binds such parameters by purpose.
    pub fn param(&mut self, name: &str, kind: ParamKind) -> Param {
        let taken = |n: &str| self.params.values().any(|p| p.name == n);
        let mut unique = name.to_owned();
        let mut i = 2;
        while taken(&unique) {
            unique = format!("{name}_{i}");
            i += 1;
        }
        self.params.push(ParamData { name: unique, kind })
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

    /// Whether workgroups of one launch wait for each other or for other ranks: a grid barrier,
    /// flag rounds, or peer flags at TP > 1 (what makes a launch need co-residency, §5.9).
    pub fn waits_across_workgroups(&self) -> bool {
        self.coresidency.is_some()
            || self.flag_rounds_per_launch > 0
            || (self.tp > 1
                && self.params.values().any(|p| {
                    matches!(
                        p.kind,
                        ParamKind::Array {
                            purpose: Purpose::Flags,
                            ..
                        } | ParamKind::PeerArrays {
                            purpose: Purpose::Flags,
                            ..
                        }
                    )
                }))
    }

    /// The kernel opens with the stream-order prologue (CUDA: `griddepcontrol.launch_dependents`
    /// then `griddepcontrol.wait`, before any memory access), so it may be launched as a
    /// programmatic dependent of the previous kernel of its stream: its workgroups may be
    /// scheduled while that kernel's last ones still run, and wait there until it has completed
    /// and its writes are visible (without such a launch both instructions do nothing). Only
    /// where the target has the launch and the kernel's workgroups do not wait for each other:
    /// a dependent's early workgroups would hold the SM slots that the co-residency rule (§5.9)
    /// counts on for a grid barrier or for other ranks' flag kernels on the same device, and
    /// its early `launch_dependents` would let a chain of its successors pile up there too.
    pub fn stream_order_prologue(&self) -> bool {
        self.dependent_launch && !self.waits_across_workgroups()
    }

    /// Bytes of LDS per workgroup.
    pub fn lds_bytes(&self) -> usize {
        self.lds.values().map(|l| l.elem.bytes() * l.len).sum()
    }

    /// Whether the kernel's LDS exceeds what one workgroup may declare statically
    /// ([`Arch::max_static_lds_per_workgroup`]: sm_90 past 48 KiB), so that the C++ writer
    /// carves every array out of one dynamic shared-memory allocation instead
    /// ([`LoweredKernel::dynamic_lds_layout`]) and the launch passes its size (the ABI's
    /// `dynamic_lds_bytes`).
    pub fn lds_is_dynamic(&self) -> bool {
        self.lds_bytes() > self.arch.max_static_lds_per_workgroup() as usize
    }

    /// The dynamic shared-memory layout of a kernel whose LDS is dynamic
    /// ([`LoweredKernel::lds_is_dynamic`]): each array's byte offset, in declaration order, each
    /// at a multiple of 16 bytes (the widest vector access, as the static declarations align
    /// them), and the allocation's size; `None` where the LDS is declared statically.
    pub fn dynamic_lds_layout(&self) -> Option<(Vec<(Lds, usize)>, usize)> {
        if !self.lds_is_dynamic() {
            return None;
        }
        let mut at = 0;
        let offsets = self
            .lds
            .iter()
            .map(|(l, d)| {
                let off = at;
                at = (at + d.elem.bytes() * d.len).next_multiple_of(16);
                (l, off)
            })
            .collect();
        Some((offsets, at))
    }

    /// Whether the grids of `ranks_per_device` ranks of this kernel fit on one device at once
    /// at `occupancy` (always, for a kernel whose workgroups do not wait for each other or for
    /// other ranks): the compile-time half of the co-residency rule (DESIGN.md §5.9), from
    /// [`Arch::resident_workgroups_per_cu`]; the runtime asks the driver before launch. A kernel
    /// with flags and no grid barrier needs it too where several ranks share the device — its
    /// workgroups wait for other ranks', which there wait for slots its own may hold. With one
    /// rank per device a rank's flag waits are on other devices' workgroups, and this check
    /// leaves such a kernel alone (the runtime, stricter, asks it of every launch whose ABI
    /// synchronises).
    pub fn coresident(
        &self,
        ranks_per_device: u32,
        occupancy: Occupancy,
    ) -> Result<(), NotCoResident> {
        let workgroups = match &self.coresidency {
            Some(c) => c.workgroups,
            None if ranks_per_device > 1 && self.waits_across_workgroups() => self.grid,
            None => return Ok(()),
        };
        let (per_cu, cus) = self.resident_per_cu(occupancy);
        let lds = u32::try_from(self.lds_bytes()).unwrap_or(u32::MAX);
        if u64::from(ranks_per_device) * u64::from(workgroups) <= u64::from(cus * per_cu) {
            return Ok(());
        }
        Err(NotCoResident {
            kernel: self.name.clone(),
            arch: self.arch,
            workgroups,
            ranks_per_device,
            workgroup_size: self.workgroup_size,
            lds_bytes: lds,
            per_cu,
            cus,
            occupancy,
        })
    }

    /// Workgroups of this kernel one CU/SM holds at once at `occupancy` (by waves, lanes, LDS
    /// and the hardware's workgroup limit: [`Arch::resident_workgroups_per_cu`]), and the
    /// target's CUs/SMs.
    pub fn resident_per_cu(&self, occupancy: Occupancy) -> (u32, u32) {
        let waves = match occupancy {
            Occupancy::HardwareMax => self.arch.max_waves_per_simd(),
            Occupancy::Compiled { waves_per_simd, .. } => waves_per_simd,
        };
        let lds = u32::try_from(self.lds_bytes()).unwrap_or(u32::MAX);
        let per_cu = self
            .arch
            .resident_workgroups_per_cu(self.workgroup_size, waves, lds);
        (per_cu, self.arch.compute_units())
    }

    /// Workgroups of this kernel one device holds at once at `occupancy`: what the GPU starts
    /// before it waits for one to finish (the simulator's default residency).
    pub fn device_capacity(&self, occupancy: Occupancy) -> u32 {
        let (per_cu, cus) = self.resident_per_cu(occupancy);
        per_cu.saturating_mul(cus).max(1)
    }

    /// This launch's epoch (u32, 1 for the first launch on zeroed state, +1 per launch), kept on
    /// the device: on first use the kernel gains the `epoch_state` counter array and a register
    /// that [`expand_sync`](super::expand::expand_sync) loads at entry; the last workgroup to
    /// finish advances it. A kernel built with a host-passed epoch ([`LoweredKernel::epoch_param`])
    /// keeps that one.
    pub fn epoch_value(&mut self) -> Expr {
        if let Some(p) = self.epoch {
            return Expr::Param(p);
        }
        if let Some(r) = self.epoch_reg {
            return Expr::Reg(r);
        }
        // One word per workgroup: `expand_sync` sets the length to the final grid.
        let kind = ParamKind::Array {
            elem: Ty::U32,
            len: 1,
            space: MemorySpace::Global,
            access: Access::ReadWrite,
            purpose: Purpose::Counter,
        };
        self.epoch_state = Some(self.param("epoch_state", kind));
        let r = self.reg(Ty::U32, "epoch");
        self.epoch_reg = Some(r);
        Expr::Reg(r)
    }

    /// The host-passed epoch parameter (the hand-written kernels' ABI), added on first use: a
    /// kernel built with it is correct for one replay of a captured graph only (DESIGN.md §5.4).
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
