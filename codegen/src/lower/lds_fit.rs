//! The default schedule where its LDS does not fit one workgroup (issue 40: batches past 8).
//!
//! The arrays that grow with the batch are the GEMVs' cross-slice sums (`[slices][B][C]` f32),
//! the staged activations (`B × K part × 2` bytes) and the RMSNorm's stash of its tile
//! (`[B][C]` f32). Where the default's lowering refuses them, the default gives up, in this
//! order, what costs least: the sums' slices (the serial reduction: `slices − 1` more workgroup
//! barriers, once per kernel, bit-identical results), then the staging (each lane packs its
//! activations from global memory in the hot loop), then the width of its tile (more, smaller
//! workgroups: for the INT4 GEMVs fewer words per lane, on the tensor-core path fewer K warps). The first schedule that lowers is the default; it is
//! a field of the schedule like any other, so what `emit` prints and a tuner or an override
//! chooses is what runs. A schedule that lowers is never changed here: every kernel that lowered
//! with the default before (all of them up to batch 8) keeps its code.

use crate::lowered::Occupancy;

use super::fit::Trials;
use super::{Int4Dot, Reduction, Schedule};

/// `s` (the default for `kernel` on `arch`) if it lowers; else the first of the steps above that
/// lowers (with a grid one device holds, where one does), each on top of the last; else `s`,
/// whose refusal names the LDS limit. A kernel whose
/// GEMV prologue is recomputed into LDS is left to the harness's fallback, which materialises
/// the prologue first (`lower_or_materialise`).
///
/// Every trial lowering is one of the fit's (`t`): a schedule tried here and again by the fit is
/// lowered once (`harness/tests/lower_once.rs`).
pub(super) fn fit_lds(t: &mut Trials<'_>, s: Schedule) -> Schedule {
    let kernel = t.kernel();
    let recomputed_prologue = super::has_gemv_prologue(kernel) && !s.materialise_prologue;
    if recomputed_prologue || t.lower(&s).is_ok() {
        return s;
    }
    let ignored = s.ignored_fields(kernel);
    let reads = |field: &str| !ignored.contains(&field);
    let mut tries = Vec::new();
    let mut next = s.clone();
    // The tensor-core path has no serial reduction.
    if reads("reduction") && (next.int4_dot != Int4Dot::Mma || !reads("int4_dot")) {
        next.reduction = Reduction::Serial;
        tries.push(next.clone());
    }
    if reads("x_in_lds") && next.x_in_lds {
        next.x_in_lds = false;
        next.x_phase_units = 0;
        tries.push(next.clone());
    }
    if !reads("threads_per_column") {
        // No GEMV (its tile is not tied to K slices): half the columns per workgroup.
        while next.columns_per_workgroup > 1 {
            next.columns_per_workgroup /= 2;
            tries.push(next.clone());
        }
    } else if reads("int4_dot") && next.int4_dot != Int4Dot::Mma {
        // The INT4 FMA and dot2 paths: half the columns in half the words per lane, the same
        // lanes and K slices (the sums and an RMSNorm's stash halve; the grid doubles).
        while next.words_per_iteration > 1 && next.columns_per_workgroup > 1 {
            next.columns_per_workgroup /= 2;
            next.words_per_iteration /= 2;
            tries.push(next.clone());
        }
    } else if reads("int4_dot") && next.int4_dot == Int4Dot::Mma {
        // The tensor-core path: half the K warps, the same columns (the sums halve: two
        // weights at batch 64 keep 64 KiB of them with 4 K warps, 32 KiB with 2).
        while next.threads_per_column > 1 {
            next.threads_per_column /= 2;
            next.workgroup_size /= 2;
            tries.push(next.clone());
        }
    }
    // First one whose grid one device holds at once (a kernel with a grid barrier, §5.9: the
    // fused kernel on gfx906 at batch 32, whose staged activations leave one workgroup per CU
    // where 80 must be resident); else the first that lowers.
    let lowered: Vec<Option<bool>> = tries
        .iter()
        .map(|s| {
            t.lower(s)
                .ok()
                .map(|k| k.coresident(1, Occupancy::HardwareMax).is_ok())
        })
        .collect();
    let pick = lowered
        .iter()
        .position(|r| *r == Some(true))
        .or_else(|| lowered.iter().position(Option::is_some));
    pick.map_or(s, |i| tries[i].clone())
}
