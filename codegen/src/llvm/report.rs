//! Resource usage of an LLVM-built gfx906 kernel, read from the code object metadata the AMDGPU
//! backend writes into its assembly (`.sgpr_count`, `.vgpr_count`, spills, segment sizes), with
//! the occupancy computed from them as clang's `-Rpass-analysis=kernel-resource-usage` does for
//! hipcc (gfx9: 256 VGPRs per lane in granules of 4, 800 SGPRs per SIMD in granules of 16, 64 KiB
//! of LDS per CU, at most 10 waves per SIMD).

/// Resource usage of one gfx906 kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AmdResources {
    /// Scalar registers (`.sgpr_count`, including VCC and the other reserved ones).
    pub sgprs: u32,
    /// Vector registers per lane (`.vgpr_count`).
    pub vgprs: u32,
    /// Scalar registers spilled (`.sgpr_spill_count`).
    pub sgpr_spills: u32,
    /// Vector registers spilled (`.vgpr_spill_count`).
    pub vgpr_spills: u32,
    /// Private scratch per lane, in bytes (`.private_segment_fixed_size`).
    pub scratch_bytes: u32,
    /// Static LDS per workgroup, in bytes (`.group_segment_fixed_size`).
    pub lds_bytes: u32,
    /// Waves per SIMD that fit (computed).
    pub occupancy: u32,
}

impl AmdResources {
    /// Whether anything spilled or uses scratch.
    pub fn spills(&self) -> bool {
        self.sgpr_spills + self.vgpr_spills + self.scratch_bytes > 0
    }
}

/// Parses the AMDGPU assembly of a module with one kernel launched with `workgroup_size` lanes.
/// `Err` names the missing field.
pub fn parse_amd_asm(asm: &str, workgroup_size: u32) -> Result<AmdResources, String> {
    let field = |key: &str| -> Result<u32, String> {
        asm.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("the AMDGPU assembly has no `{key}` field"))
    };
    let mut r = AmdResources {
        sgprs: field(".sgpr_count:")?,
        vgprs: field(".vgpr_count:")?,
        sgpr_spills: field(".sgpr_spill_count:")?,
        vgpr_spills: field(".vgpr_spill_count:")?,
        scratch_bytes: field(".private_segment_fixed_size:")?,
        lds_bytes: field(".group_segment_fixed_size:")?,
        occupancy: 0,
    };
    r.occupancy = occupancy_gfx906(&r, workgroup_size);
    Ok(r)
}

/// Waves per SIMD on gfx906 for these resources.
pub fn occupancy_gfx906(r: &AmdResources, workgroup_size: u32) -> u32 {
    let round = |x: u32, g: u32| x.max(1).div_ceil(g) * g;
    let by_vgpr = 256 / round(r.vgprs, 4);
    let by_sgpr = 800 / round(r.sgprs, 16);
    let waves_per_group = workgroup_size.div_ceil(64).max(1);
    // Workgroups per CU by LDS, their waves spread over the 4 SIMDs.
    let by_lds = 65536u32
        .checked_div(r.lds_bytes)
        .map_or(10, |groups| groups * waves_per_group / 4);
    by_vgpr.min(by_sgpr).min(by_lds).min(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_backend_comments() {
        let asm = "    .group_segment_fixed_size: 4096\n    .private_segment_fixed_size: 0\n    .sgpr_count:     41\n    .sgpr_spill_count: 0\n    .vgpr_count:     26\n    .vgpr_spill_count: 0\n";
        let r = parse_amd_asm(asm, 256).unwrap();
        // 26 VGPRs → 28 allocated → 9 waves per SIMD; 48 SGPRs → 16; LDS → 16 groups × 4 / 4.
        assert_eq!(
            (r.sgprs, r.vgprs, r.lds_bytes, r.occupancy),
            (41, 26, 4096, 9)
        );
        assert!(!r.spills());
        assert!(parse_amd_asm(".sgpr_count: 1\n", 256).is_err());
    }
}
