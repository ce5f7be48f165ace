//! What a compiler says a kernel uses: registers, spills, scratch, LDS and occupancy — the one
//! resource report of the project. The runtime's compiler drivers (hipcc, hiprtc, nvcc, NVRTC)
//! parse their compilers' reports into it, the LLVM back end reads it from the AMDGPU assembly,
//! and the budgets ([`crate::cpp::budget`]), `wavefuse check`, `ab`, the tuner and the gfx906 time
//! model ([`crate::model`]) read it.
//!
//! It lives here rather than in the runtime because the code generator's own consumers (budgets,
//! the LLVM back end, co-residency) need it and the generator does not depend on the runtime.

use serde::{Deserialize, Serialize};

/// Resource usage of one AMD kernel, from clang's kernel-resource-usage remarks (hipcc) or the
/// AMDGPU assembly's metadata (the LLVM back end).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmdUsage {
    /// Scalar registers.
    pub sgprs: u32,
    /// Vector registers per lane.
    pub vgprs: u32,
    /// Scalar registers spilled.
    pub sgpr_spills: u32,
    /// Vector registers spilled (to scratch).
    pub vgpr_spills: u32,
    /// Private scratch per lane, in bytes.
    pub scratch_bytes_per_lane: u32,
    /// Static LDS per workgroup, in bytes.
    pub lds_bytes: u32,
    /// Waves per SIMD that fit, as the compiler computes it.
    pub occupancy_waves_per_simd: u32,
}

/// Resource usage of one NVIDIA kernel, from ptxas's `-v` report (nvcc or NVRTC).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvidiaUsage {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores per thread.
    pub spill_store_bytes: u32,
    /// Bytes of spill loads per thread.
    pub spill_load_bytes: u32,
    /// Local-memory stack frame per thread, in bytes.
    pub stack_frame_bytes: u32,
    /// Static shared memory per block, in bytes.
    pub shared_bytes: u32,
    /// Named barriers used.
    pub barriers: u32,
}

/// Resource usage of one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResourceUsage {
    /// From hipcc or the LLVM back end.
    Amd(AmdUsage),
    /// From ptxas (nvcc or NVRTC).
    Nvidia(NvidiaUsage),
}

impl ResourceUsage {
    /// Whether anything was spilled or a local-memory stack frame exists (a budget violation:
    /// DESIGN.md §7 wants neither).
    pub fn spills(&self) -> bool {
        self.spilled() + self.scratch_bytes() > 0
    }

    /// How much was spilled: AMD VGPR + SGPR spills (registers), NVIDIA spill stores + loads
    /// (bytes per thread).
    pub fn spilled(&self) -> u32 {
        match self {
            ResourceUsage::Amd(u) => u.sgpr_spills + u.vgpr_spills,
            ResourceUsage::Nvidia(u) => u.spill_store_bytes + u.spill_load_bytes,
        }
    }

    /// Private memory per lane in bytes: AMD scratch, NVIDIA local-memory stack frame.
    pub fn scratch_bytes(&self) -> u32 {
        match self {
            ResourceUsage::Amd(u) => u.scratch_bytes_per_lane,
            ResourceUsage::Nvidia(u) => u.stack_frame_bytes,
        }
    }

    /// Vector registers per lane (AMD) or registers per thread (NVIDIA).
    pub fn registers(&self) -> u32 {
        match self {
            ResourceUsage::Amd(u) => u.vgprs,
            ResourceUsage::Nvidia(u) => u.registers,
        }
    }

    /// Scalar registers per wave (AMD only).
    pub fn sgprs(&self) -> Option<u32> {
        match self {
            ResourceUsage::Amd(u) => Some(u.sgprs),
            ResourceUsage::Nvidia(_) => None,
        }
    }

    /// Static LDS / shared memory per workgroup, in bytes.
    pub fn lds_bytes(&self) -> u32 {
        match self {
            ResourceUsage::Amd(u) => u.lds_bytes,
            ResourceUsage::Nvidia(u) => u.shared_bytes,
        }
    }

    /// Resident waves per SIMD (AMD, as the compiler reported it) or warps per SM sub-partition
    /// (NVIDIA, [`sm90_occupancy`] for blocks of `workgroup_size` threads).
    pub fn occupancy(&self, workgroup_size: u32) -> u32 {
        self.occupancy_with_dynamic_lds(workgroup_size, 0)
    }

    /// [`ResourceUsage::occupancy`] of a launch that also gives each workgroup `dynamic_lds`
    /// bytes of dynamic LDS, which no compiler report counts: NVIDIA with the static and dynamic
    /// shared memory together; AMD the compiler's figure, capped by [`gfx906_occupancy`] with
    /// the LDS together where there is dynamic LDS.
    pub fn occupancy_with_dynamic_lds(&self, workgroup_size: u32, dynamic_lds: u32) -> u32 {
        match self {
            ResourceUsage::Amd(u) if dynamic_lds > 0 => {
                let together = AmdUsage {
                    lds_bytes: u.lds_bytes.saturating_add(dynamic_lds),
                    ..u.clone()
                };
                u.occupancy_waves_per_simd
                    .min(gfx906_occupancy(&together, workgroup_size))
            }
            ResourceUsage::Amd(u) => u.occupancy_waves_per_simd,
            ResourceUsage::Nvidia(u) => sm90_occupancy(
                u.registers,
                u.shared_bytes.saturating_add(dynamic_lds),
                workgroup_size,
            ),
        }
    }
}

/// Warps per SM sub-partition on sm_90 for a block of `workgroup_size` threads using `regs`
/// registers per thread and `smem` bytes of shared memory: the smallest of the register-file,
/// shared-memory, warp-slot and block-slot limits.
pub fn sm90_occupancy(regs: u32, smem: u32, workgroup_size: u32) -> u32 {
    let warps_per_block = workgroup_size.div_ceil(32).max(1);
    // Registers are allocated per warp in units of 256.
    let regs_per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
    let by_regs = 65536 / (regs_per_warp * warps_per_block);
    let by_smem = if smem == 0 {
        u32::MAX
    } else {
        (228 * 1024) / (smem + 1024)
    };
    let by_warps = 64 / warps_per_block;
    let blocks = by_regs.min(by_smem).min(by_warps).min(32);
    blocks * warps_per_block / 4
}

/// Waves per SIMD on gfx906 for `u`'s registers and LDS in workgroups of `workgroup_size` lanes,
/// as clang computes it for `-Rpass-analysis=kernel-resource-usage` (gfx9: 256 VGPRs per lane in
/// granules of 4, 800 SGPRs per SIMD in granules of 16, 64 KiB of LDS per CU, at most 10 waves
/// per SIMD). For reports without the compiler's own figure (the LLVM back end's).
pub fn gfx906_occupancy(u: &AmdUsage, workgroup_size: u32) -> u32 {
    let round = |x: u32, g: u32| x.max(1).div_ceil(g) * g;
    let by_vgpr = 256 / round(u.vgprs, 4);
    let by_sgpr = 800 / round(u.sgprs, 16);
    let waves_per_group = workgroup_size.div_ceil(64).max(1);
    // Workgroups per CU by LDS, their waves spread over the 4 SIMDs.
    let by_lds = 65536u32
        .checked_div(u.lds_bytes)
        .map_or(10, |groups| groups * waves_per_group / 4);
    by_vgpr.min(by_sgpr).min(by_lds).min(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A launch's dynamic LDS counts with the static LDS no compiler report includes it in.
    #[test]
    fn dynamic_lds_lowers_the_occupancy() {
        // 128 registers, 8 warps, 16 bytes static: 2 blocks by registers (4 warps per
        // sub-partition); with 69 120 bytes of dynamic LDS 3 fit by shared memory, still 2.
        let nv = ResourceUsage::Nvidia(NvidiaUsage {
            registers: 128,
            shared_bytes: 16,
            ..Default::default()
        });
        assert_eq!(nv.occupancy(256), 4);
        assert_eq!(nv.occupancy_with_dynamic_lds(256, 69_120), 4);
        // 150 KiB dynamic: one block of 8 warps (2 per sub-partition).
        assert_eq!(nv.occupancy_with_dynamic_lds(256, 150 * 1024), 2);
        // gfx906: 32 KiB of dynamic LDS leaves 2 workgroups of 4 waves per CU, 2 waves per SIMD.
        let amd = ResourceUsage::Amd(AmdUsage {
            vgprs: 64,
            sgprs: 32,
            occupancy_waves_per_simd: 4,
            ..Default::default()
        });
        assert_eq!(amd.occupancy_with_dynamic_lds(256, 0), 4);
        assert_eq!(amd.occupancy_with_dynamic_lds(256, 32 * 1024), 2);
    }

    #[test]
    fn sm90_occupancy_is_the_tightest_limit() {
        // 40 regs → 1280 per warp; 8 warps per block → 6 blocks by registers → 48 warps / 4.
        assert_eq!(sm90_occupancy(40, 1024, 256), 12);
        // 255 regs → 8192 per warp → 1 block of 8 warps → 2 per sub-partition.
        assert_eq!(sm90_occupancy(255, 0, 256), 2);
        // Shared memory: 100 KiB per block → 2 blocks of 4 warps → 2.
        assert_eq!(sm90_occupancy(32, 100 * 1024, 128), 2);
    }

    #[test]
    fn normalised_views_of_each_vendor() {
        let amd = ResourceUsage::Amd(AmdUsage {
            sgprs: 20,
            vgprs: 64,
            sgpr_spills: 1,
            vgpr_spills: 2,
            scratch_bytes_per_lane: 8,
            lds_bytes: 512,
            occupancy_waves_per_simd: 4,
        });
        assert_eq!(
            (
                amd.registers(),
                amd.sgprs(),
                amd.spilled(),
                amd.scratch_bytes()
            ),
            (64, Some(20), 3, 8)
        );
        assert_eq!((amd.lds_bytes(), amd.occupancy(1024)), (512, 4));
        let nv = ResourceUsage::Nvidia(NvidiaUsage {
            registers: 40,
            spill_store_bytes: 4,
            spill_load_bytes: 4,
            stack_frame_bytes: 8,
            shared_bytes: 1024,
            barriers: 1,
        });
        assert_eq!((nv.spilled(), nv.scratch_bytes(), nv.sgprs()), (8, 8, None));
        assert_eq!(nv.occupancy(256), 12);
        assert!(nv.spills() && amd.spills());
    }
}
