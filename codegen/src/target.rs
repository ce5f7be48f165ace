//! Targets as data: an exhaustive [`Arch`] with capability queries (DESIGN.md §6).
//!
//! There is no catch-all variant with default numbers: adding a GPU means adding a variant and
//! answering every query for it.

use std::fmt;
use std::str::FromStr;

/// A GPU architecture wavefuse generates code for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// AMD Vega 20 (MI50 / MI60): wave64, 60 CUs, no MFMA.
    Gfx906,
    /// NVIDIA Hopper (H100 / H200): warp 32, 132 SMs.
    Sm90,
}

/// The C++ dialect a target is written in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// HIP for AMD GPUs.
    Amd,
    /// CUDA for NVIDIA GPUs.
    Nvidia,
}

impl Arch {
    /// Every architecture.
    pub const ALL: [Arch; 2] = [Arch::Gfx906, Arch::Sm90];

    /// The name used on command lines and in snapshot names (`gfx906`, `sm90`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gfx906 => "gfx906",
            Arch::Sm90 => "sm90",
        }
    }

    /// Vendor, which selects the C++ dialect.
    pub fn vendor(self) -> Vendor {
        match self {
            Arch::Gfx906 => Vendor::Amd,
            Arch::Sm90 => Vendor::Nvidia,
        }
    }

    /// Lanes per wave (warp).
    pub fn wave_size(self) -> u32 {
        match self {
            Arch::Gfx906 => 64,
            Arch::Sm90 => 32,
        }
    }

    /// Compute units (AMD) or streaming multiprocessors (NVIDIA).
    pub fn compute_units(self) -> u32 {
        match self {
            Arch::Gfx906 => 60,
            Arch::Sm90 => 132,
        }
    }

    /// Workgroup-shared memory per CU/SM, in bytes.
    pub fn lds_bytes_per_cu(self) -> u32 {
        match self {
            Arch::Gfx906 => 64 * 1024,
            Arch::Sm90 => 228 * 1024,
        }
    }

    /// Largest LDS allocation of one workgroup, in bytes.
    pub fn max_lds_per_workgroup(self) -> u32 {
        match self {
            Arch::Gfx906 => 64 * 1024,
            Arch::Sm90 => 227 * 1024,
        }
    }

    /// Largest LDS one workgroup of the generated C++ may declare statically, in bytes: the whole
    /// 64 KiB on gfx906; 48 KiB on sm_90, where more needs dynamic shared memory and an opt-in
    /// attribute: past it the writer carves the arrays out of one dynamic allocation
    /// (`LoweredKernel::dynamic_lds_layout`) and the runtime sets the attribute at launch.
    pub fn max_static_lds_per_workgroup(self) -> u32 {
        match self {
            Arch::Gfx906 => 64 * 1024,
            Arch::Sm90 => 48 * 1024,
        }
    }

    /// Whether a global-memory prefetch into L2 exists (sm_90 `prefetch.global.L2`; gfx906 has
    /// none).
    pub fn has_l2_prefetch(self) -> bool {
        match self {
            Arch::Gfx906 => false,
            Arch::Sm90 => true,
        }
    }

    /// Whether the warp-wide FP16 MMA with f32 accumulation (`mma.sync…m16n8k16…f32.f16`) exists:
    /// sm_80 and later. gfx906 has no matrix cores (MFMA came with gfx908).
    pub fn has_fp16_mma(self) -> bool {
        match self {
            Arch::Gfx906 => false,
            Arch::Sm90 => true,
        }
    }

    /// Whether a kernel can be launched as a programmatic dependent of the previous kernel of its
    /// stream (`griddepcontrol`, CUDA's programmatic dependent launch): sm_90 and later. HIP has
    /// no such launch.
    pub fn has_dependent_launch(self) -> bool {
        match self {
            Arch::Gfx906 => false,
            Arch::Sm90 => true,
        }
    }

    /// Most threads in one workgroup.
    pub fn max_workgroup_size(self) -> u32 {
        1024
    }

    /// Most resident waves per SIMD (AMD) or warps per SM / 4 sub-partitions (NVIDIA).
    pub fn max_waves_per_simd(self) -> u32 {
        match self {
            Arch::Gfx906 => 10,
            Arch::Sm90 => 16,
        }
    }

    /// SIMDs per CU (AMD) or sub-partitions per SM (NVIDIA).
    pub fn simds_per_cu(self) -> u32 {
        4
    }

    /// Most workgroups one CU/SM holds at once, whatever their size: gfx906 40 (as many as its
    /// wave slots, 4 SIMDs × 10; GCC's libgomp documentation for GCN: "maximally 40
    /// workgroups/CU … up to a limit of 40 wavefronts in total per CU"), sm_90 32 (CUDA
    /// programming guide, compute capability 9.0: 32 resident blocks per SM).
    pub fn max_workgroups_per_cu(self) -> u32 {
        match self {
            Arch::Gfx906 => 40,
            Arch::Sm90 => 32,
        }
    }

    /// Workgroups of `workgroup_size` lanes using `lds_bytes` of LDS each that one CU/SM holds at
    /// once when `waves_per_simd` of the kernel's waves (warps) fit per SIMD (sub-partition) —
    /// the compiled occupancy, or [`Arch::max_waves_per_simd`] for the most any register count
    /// allows. A workgroup's waves spread over the SIMDs, so a CU holds
    /// `⌊waves_per_simd · SIMDs / waves per workgroup⌋` by waves, bounded by LDS
    /// ([`Arch::lds_bytes_per_cu`]; sm_90 reserves 1 KB per block) and by
    /// [`Arch::max_workgroups_per_cu`]. What co-residency (DESIGN.md §5.9) is checked against
    /// at compile time; the runtime checks the driver's own number before launch.
    pub fn resident_workgroups_per_cu(
        self,
        workgroup_size: u32,
        waves_per_simd: u32,
        lds_bytes: u32,
    ) -> u32 {
        let waves = workgroup_size.div_ceil(self.wave_size()).max(1);
        let by_waves = waves_per_simd.min(self.max_waves_per_simd()) * self.simds_per_cu() / waves;
        let reserved = match self {
            Arch::Gfx906 => 0,
            Arch::Sm90 => 1024,
        };
        let by_lds = match lds_bytes + reserved {
            0 => u32::MAX,
            b => self.lds_bytes_per_cu() / b,
        };
        by_waves.min(by_lds).min(self.max_workgroups_per_cu())
    }

    /// Whether a packed 8×INT4 dot product instruction exists (`v_dot8_i32_i4` on gfx906).
    pub fn has_dot8_i4(self) -> bool {
        match self {
            Arch::Gfx906 => true,
            Arch::Sm90 => false,
        }
    }

    /// Whether a packed FP16 dot product into FP32 exists (`v_dot2_f32_f16`; `fma.rn.f32.f16x2`-free
    /// Hopper has HFMA2 but no f16→f32 dot).
    pub fn has_dot2_f32_f16(self) -> bool {
        match self {
            Arch::Gfx906 => true,
            Arch::Sm90 => false,
        }
    }

    /// Whether FP32 atomic add to global memory is a native instruction (gfx906: no, it becomes a
    /// CAS loop).
    pub fn has_global_fadd(self) -> bool {
        match self {
            Arch::Gfx906 => false,
            Arch::Sm90 => true,
        }
    }

    /// Whether matrix-core instructions (MFMA / tensor cores) exist.
    pub fn has_matrix_cores(self) -> bool {
        match self {
            Arch::Gfx906 => false,
            Arch::Sm90 => true,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown architecture name.
#[derive(Debug, thiserror::Error)]
#[error("unknown target `{0}`; known targets: gfx906, sm90")]
pub struct UnknownArch(pub String);

impl FromStr for Arch {
    type Err = UnknownArch;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gfx906" => Ok(Arch::Gfx906),
            "sm90" | "sm_90" => Ok(Arch::Sm90),
            _ => Err(UnknownArch(s.to_owned())),
        }
    }
}
