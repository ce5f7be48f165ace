//! The model's inputs for a lowered kernel: the weights and bytes its arrays move, its grid
//! barriers and flag round trips, and its hot loop's counts.

use crate::lowered::{LoweredKernel, ParamKind, Purpose};

use super::{HotLoop, LoopFacts, MI50_WAVE, ModelInputs};

/// The inputs of the model for a lowered GPTQ kernel with nothing known from an ABI beyond the
/// kernel's own ([`inputs_with`] with [`LoopFacts::default`]).
pub fn inputs_for(
    k: &LoweredKernel,
    hot: &HotLoop,
    batch: usize,
    occupancy: u32,
) -> Option<ModelInputs> {
    inputs_with(k, hot, batch, occupancy, &LoopFacts::default())
}

/// The inputs of the model for a lowered GPTQ kernel: the weights and bytes from its array
/// parameters (`qweight` words × 8 weights; every data array read or written once, every scratch
/// array — split-K partials, published allreduce partials, norm partials — written once and read
/// once, so counted twice), its grid barriers and (at TP > 1) flag round trips, the rest from
/// its hot loop with `facts`, and hipcc's occupancy. `None` without INT4 weights or products.
pub fn inputs_with(
    k: &LoweredKernel,
    hot: &HotLoop,
    batch: usize,
    occupancy: u32,
    facts: &LoopFacts,
) -> Option<ModelInputs> {
    let (mut weights, mut bytes) = (0.0, 0.0);
    for (_, p) in k.params.iter() {
        if let ParamKind::Array {
            elem,
            len,
            purpose: Purpose::Data { part, .. },
            ..
        } = &p.kind
        {
            // Batch tiles read the packed weights once per tile (`weight_passes`); a
            // workgroup's part is long gone from the 4 MB L2 when the next tile reads it again.
            let passes = if is_weight_part(part) {
                f64::from(k.weight_passes.max(1))
            } else {
                1.0
            };
            bytes += passes * (*len * elem.bytes()) as f64;
            if *part == "qweight" {
                weights += (*len * 8) as f64;
            }
        }
    }
    bytes += 2.0 * scratch_bytes(k);
    (weights > 0.0).then_some(())?;
    // Past one pass (batch tiles) the K loop inside the tile loop is counted, and the tile
    // loop's own work once per pass: the ABI's passes for a hand-written kernel, else `k`'s.
    let passes = facts
        .weight_passes
        .unwrap_or_else(|| f64::from(k.weight_passes.max(1)));
    let hot = hot.for_passes(passes);
    let per_pass = hot.valu_enclosing_path as f64;
    Some(ModelInputs {
        valu_per_weight: hot.valu_per_weight_with(batch, facts)?,
        lds_bytes_per_workgroup: u32::try_from(k.lds_bytes()).unwrap_or(u32::MAX),
        dot_floor_lane_instructions: weights * batch as f64 / hot.products_per_instruction(),
        dot_share: hot.dot_share(),
        weights,
        valu_outside_per_wave: hot.valu_outside_path as f64 + (passes - 1.0) * per_pass,
        valu_per_pass_per_wave: per_pass,
        weight_passes: passes,
        other_valu_lane_instructions: 0.0,
        bytes,
        bytes_in_flight_per_wave: (hot.bytes_in_flight_per_lane * MI50_WAVE) as f64,
        occupancy,
        grid: k.grid,
        workgroup_size: k.workgroup_size,
        grid_barriers: k.barriers_per_launch,
        flag_round_trips: if k.tp > 1 {
            k.flag_rounds_per_launch
        } else {
            0
        },
        counted: hot.counted_with(batch, facts),
    })
}

/// Whether a data array's part is of the packed weights (read once per weight pass).
fn is_weight_part(part: &str) -> bool {
    matches!(part, "qweight" | "scales" | "qzeros")
}

/// Bytes of kernel `k`'s packed weights (`qweight`, scales, zero points), once.
pub fn weight_bytes(k: &LoweredKernel) -> f64 {
    k.params
        .iter()
        .map(|(_, p)| match &p.kind {
            ParamKind::Array {
                elem,
                len,
                purpose: Purpose::Data { part, .. },
                ..
            } if is_weight_part(part) => (*len * elem.bytes()) as f64,
            _ => 0.0,
        })
        .sum()
}

/// `inputs` (from [`inputs_with`] over `k`'s data) for a kernel of the same data that reads the
/// packed weights `passes` times instead of `k`'s [`LoweredKernel::weight_passes`]: a
/// hand-written kernel with batch tiles of its own (its ABI's `[model] weight_passes`). The
/// bytes and the loop around the counted one (its VALU per pass) follow the passes.
pub fn with_weight_passes(inputs: &mut ModelInputs, k: &LoweredKernel, passes: f64) {
    let more = passes - inputs.weight_passes;
    inputs.bytes += (passes - f64::from(k.weight_passes.max(1))) * weight_bytes(k);
    inputs.valu_outside_per_wave += more * inputs.valu_per_pass_per_wave;
    inputs.weight_passes = passes;
}

/// Bytes of the kernel's scratch arrays (split-K partials, published partials, norm partials):
/// each is written once and read once, so [`inputs_for`] counts them twice.
pub fn scratch_bytes(k: &LoweredKernel) -> f64 {
    k.params
        .iter()
        .map(|(_, p)| match &p.kind {
            ParamKind::Array {
                elem,
                len,
                purpose: Purpose::Scratch,
                ..
            } => (*len * elem.bytes()) as f64,
            _ => 0.0,
        })
        .sum()
}
