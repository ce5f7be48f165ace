//! Resource usage of an LLVM-built gfx906 kernel, read from the code object metadata the AMDGPU
//! backend writes into its assembly (`.sgpr_count`, `.vgpr_count`, spills, segment sizes), as the
//! project's one resource report ([`crate::resources::AmdUsage`]), with the occupancy computed
//! from them as clang does for hipcc ([`crate::resources::gfx906_occupancy`]).

use crate::resources::{AmdUsage, gfx906_occupancy};

/// Parses the AMDGPU assembly of a module with one kernel launched with `workgroup_size` lanes.
/// `Err` names the missing field.
pub fn parse_amd_asm(asm: &str, workgroup_size: u32) -> Result<AmdUsage, String> {
    let field = |key: &str| -> Result<u32, String> {
        asm.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("the AMDGPU assembly has no `{key}` field"))
    };
    let mut r = AmdUsage {
        sgprs: field(".sgpr_count:")?,
        vgprs: field(".vgpr_count:")?,
        sgpr_spills: field(".sgpr_spill_count:")?,
        vgpr_spills: field(".vgpr_spill_count:")?,
        scratch_bytes_per_lane: field(".private_segment_fixed_size:")?,
        lds_bytes: field(".group_segment_fixed_size:")?,
        occupancy_waves_per_simd: 0,
    };
    r.occupancy_waves_per_simd = gfx906_occupancy(&r, workgroup_size);
    Ok(r)
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
            (r.sgprs, r.vgprs, r.lds_bytes, r.occupancy_waves_per_simd),
            (41, 26, 4096, 9)
        );
        assert!(!crate::resources::ResourceUsage::Amd(r).spills());
        assert!(parse_amd_asm(".sgpr_count: 1\n", 256).is_err());
    }
}
