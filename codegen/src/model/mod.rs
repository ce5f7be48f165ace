//! The gfx906 time model: what an INT4 GEMV would take on an MI50, from the instruction counts
//! of hipcc's machine code and the bytes the kernel must move — until an MI50 is at hand, a time
//! on gfx906 is this model's, labelled "modelled (MI50)" and printed with its inputs
//! (DESIGN.md §8). docs/model.md describes it for users.
//!
//! ```text
//! modelled = max(1.18 · T_VALU + 10.6 µs,  bytes / 0.85 TB/s + 5 µs,  latency term)
//!            + grid barriers × 1.5 µs + PCIe flag round trips × 5 µs
//! T_VALU   = (VALU per weight × weights + VALU outside the loop per wave × 64 × waves) / 6.62e12 per s
//! latency term (only under 16 KB of loads in flight per CU) = bytes / (0.85 TB/s × in flight / 16 KB) + 5 µs
//! an op of several launches: + Σ other launches (bytes / 0.85 TB/s + 5 µs)   (OtherLaunch)
//! ```
//!
//! **What is counted: the executed path of the ABI's symbol.** The loop counted is the hottest of
//! the symbol's code ([`HotLoop::from_disassembly_of`]): its VALU per trip charge a block that a
//! branch inside the loop skips on most trips (a per-group scale/zero reload: jumped over by a
//! forward branch, or placed by hipcc after the loop's inner back edge) at 1/P, where the ABI
//! says it runs once per P trips ([`LoopFacts::branch_period`]; unknown: every trip, said);
//! the weights per trip are the ABI's (the weight buffer's words one lane reads per trip × 8,
//! [`LoopFacts::weights_per_trip`]), else the products' (`v_dot2_f32_f16` two, `v_dot4_i32_i8`
//! four, `v_fma_mix_f32` one — what a generated loop holds; a hand-written loop may hide its
//! first product of a word in `v_cvt_f32_f16` + `v_mul_f32`, or add a scale FMA, which only the
//! ABI's count gets right). The VALU outside the loop that every wave runs (the straight-line
//! path: not in a block a forward branch skips, unless that block holds the loop — an `if (n <
//! N)` guard) are counted once per wave; those in skippable blocks (a last workgroup's
//! reduction, a lane-0 write) are said, not counted.
//!
//! **Constants, on this counter's convention** (DESIGN.md §6, public MI50 measurements with
//! hipcc 5.2's instruction counts of the measured kernels):
//! - VALU peak: 60 CUs × 64 lanes × 1.725 GHz = 6.62 T lane-instructions per second;
//! - the VALU fit `T ≈ 1.18 · T_VALU + 10.6 µs`: hand-written INT4 GEMVs at 7.2–8.0 VALU per
//!   weight took 38–48 µs at 5120 → 4352/5120 back to back. Those counts are steady-state counts
//!   of the executed path (a reload amortised over its group, every weight once): the loop count
//!   above, so slope and offset stay. The fitted kernels' code outside the loop (one wave per 64
//!   columns: ~70–80 waves, a prologue of ~100 VALU) is ~0.1 µs of T_VALU, under the fit's
//!   resolution: the offset is not reduced for it;
//! - memory: `bytes / 0.85 TB/s + ~5 µs` (streaming `global_load_dwordx4` reads reach ~870 GB/s,
//!   dword loads ~814): a fit on bytes, which the counter does not change;
//! - latency: HBM2's latency needs loads in flight; 16 KB per CU is the rule the model has used
//!   to flag a kernel (not a measurement: no MI50 latency figure is in §6). By Little's law it
//!   is the in-flight bytes that draw 0.85 TB/s at a latency of 60 × 16 KB / 0.85 TB/s ≈ 1.16 µs;
//!   under it the bandwidth drawn is 0.85 TB/s × in flight / 16 KB ([`Bound::Latency`], with a
//!   warning);
//! - a grid barrier: at most the kernel boundary it replaces in a graph — an empty launch costs
//!   ~12 µs and graph replay cuts that ~8×: 1.5 µs;
//! - a flag round trip of the PCIe allreduce (push the partials and a flag, poll locally): a 10 KB
//!   peer read takes ~14–20 µs end to end, of which ~12 µs is the launch: 2–8 µs, 5 µs taken.
//!   Counted only where the ranks are on different GPUs (TP > 1).
//!
//! The bytes are the data arrays' once and the scratch arrays' (split-K partials, published
//! partials) twice: written once, read once. Not modelled: tail effects of a grid that does not
//! fill the CUs evenly, the L2, clocks under load, other loops' trip counts (their VALU outside
//! the hot loop count once). Pure functions of explicit inputs: nothing here reads a device, a
//! file or the environment.

use std::fmt;

use serde::Serialize;

mod hot_loop;
mod inputs;
#[cfg(test)]
mod tests;

pub use hot_loop::{HotLoop, instructions_with_targets};
pub use inputs::{inputs_for, inputs_with, scratch_bytes, weight_bytes, with_weight_passes};

/// MI50 VALU lane-instructions per second: 60 CUs × 64 lanes × 1.725 GHz (DESIGN.md §6).
pub const MI50_VALU_LANE_INSTRUCTIONS_PER_S: f64 = 60.0 * 64.0 * 1.725e9;
/// Slope of the VALU-bound fit `T ≈ 1.18 · T_VALU + 10.6 µs` (DESIGN.md §6: hand-written INT4
/// GEMVs at 7.2–8.0 steady-state VALU per weight, 38–48 µs at 5120 → 4352/5120).
pub const MI50_VALU_FIT_SLOPE: f64 = 1.18;
/// Offset of the VALU-bound fit, in µs (DESIGN.md §6, the same fit; back-to-back launches).
pub const MI50_VALU_FIT_OFFSET_US: f64 = 10.6;
/// Streaming read bandwidth of a memory-bound kernel, bytes per second (DESIGN.md §6:
/// `global_load_dwordx4` ~870 GB/s, dword ~814; the fit `bytes / 0.85 TB/s + ~5 µs`).
pub const MI50_MEMORY_BYTES_PER_S: f64 = 0.85e12;
/// Fixed cost of a memory-bound kernel, in µs (DESIGN.md §6, the same fit).
pub const MI50_MEMORY_OFFSET_US: f64 = 5.0;
/// Bytes of loads in flight per CU that draw [`MI50_MEMORY_BYTES_PER_S`]: the model's rule (no
/// MI50 latency measurement in DESIGN.md §6); with Little's law it stands for a latency of
/// [`mi50_latency_us`]. Under it the kernel is latency-bound.
pub const MI50_MIN_BYTES_IN_FLIGHT_PER_CU: f64 = 16.0 * 1024.0;
/// A grid barrier, µs: at most the kernel boundary it replaces in a graph (DESIGN.md §6: an
/// empty launch ~12 µs, graph replay cuts that ~8×).
pub const MI50_GRID_BARRIER_US: f64 = 12.0 / 8.0;
/// One flag round trip of a PCIe allreduce, µs (DESIGN.md §6: a 10 KB peer read ~14–20 µs end
/// to end, ~12 µs of it the launch: 2–8 µs; the middle).
pub const MI50_FLAG_ROUND_TRIP_US: f64 = 5.0;
/// MI50 compute units.
pub const MI50_CUS: u32 = 60;
/// SIMDs per compute unit (each holds up to 10 waves).
pub const MI50_SIMDS_PER_CU: u32 = 4;
/// Lanes per wave on gfx906.
pub const MI50_WAVE: u32 = 64;

/// Most waves one SIMD holds on gfx906 (DESIGN.md §6: "max 10 waves per SIMD").
pub const MI50_MAX_WAVES_PER_SIMD: u32 = 10;
/// VGPRs per SIMD lane on gfx906: a wave of `v` VGPRs (allocated in granules of
/// [`MI50_VGPR_GRANULE`]) leaves room for `256 / v` waves (AMD's Vega ISA manual: 256 VGPRs per
/// wave at most, a 64 KB register file per SIMD lane group: 256 × 64 lanes × 4 bytes).
pub const MI50_VGPRS_PER_LANE: u32 = 256;
/// VGPR allocation granule on gfx906 (LLVM AMDGPU `getVGPRAllocGranule` for GFX9: 4).
pub const MI50_VGPR_GRANULE: u32 = 4;
/// LDS per CU, bytes (DESIGN.md §6: 64 KB per CU), shared by its resident workgroups.
pub const MI50_LDS_PER_CU: u32 = 64 * 1024;
/// LDS allocation granule on gfx906, bytes (LLVM AMDGPU: 64 dwords for GFX7+).
pub const MI50_LDS_GRANULE: u32 = 256;
/// Products (weight × activation pairs) one dot-product lane-instruction makes:
/// `v_dot2_f32_f16` two, `v_dot4_i32_i8` four (DESIGN.md §6: both full rate, like every VOP3P
/// instruction listed there).
pub const DOT2_PRODUCTS: f64 = 2.0;

/// Waves per SIMD the VGPRs of one wave leave room for on gfx906: `256 / v` with `v` rounded
/// up to the granule of 4, at most 10 (84 VGPRs: 3; 116: 2; 214: 1).
pub fn mi50_waves_per_simd_by_vgprs(vgprs: u32) -> u32 {
    let v = vgprs.max(1).div_ceil(MI50_VGPR_GRANULE) * MI50_VGPR_GRANULE;
    (MI50_VGPRS_PER_LANE / v).min(MI50_MAX_WAVES_PER_SIMD)
}

/// Waves per SIMD the LDS of one workgroup leaves room for on gfx906: the workgroups of
/// `lds_bytes` (rounded up to 256 bytes) that fit 64 KB on one CU, times their waves, over the
/// CU's 4 SIMDs (a workgroup's waves spread over the SIMDs), at most 10; at least 1 where one
/// workgroup fits at all; 10 without LDS. 256 lanes with 24 KB: 2 workgroups, 8 waves, 2 per
/// SIMD; with 48 KB: 1 per SIMD.
pub fn mi50_waves_per_simd_by_lds(lds_bytes: u32, workgroup_size: u32) -> u32 {
    if lds_bytes == 0 {
        return MI50_MAX_WAVES_PER_SIMD;
    }
    let per_wg = lds_bytes.div_ceil(MI50_LDS_GRANULE) * MI50_LDS_GRANULE;
    let workgroups = MI50_LDS_PER_CU / per_wg;
    let waves = workgroups * workgroup_size.div_ceil(MI50_WAVE);
    (waves / MI50_SIMDS_PER_CU).clamp(u32::from(workgroups > 0), MI50_MAX_WAVES_PER_SIMD)
}

/// Waves per SIMD on gfx906 from a kernel's VGPRs and LDS: the fewer of the two limits
/// ([`mi50_waves_per_simd_by_vgprs`], [`mi50_waves_per_simd_by_lds`]). hipcc 5.2's
/// `Occupancy [waves/SIMD]` remark counts the registers but not the LDS (it reports 2 for
/// `gemv_int4` at batch 16 with 48 KB of LDS per 256-lane workgroup, where one workgroup, 1 wave
/// per SIMD, fits a CU), so the model takes the fewer of hipcc's figure and the LDS limit.
pub fn mi50_occupancy(vgprs: u32, lds_bytes: u32, workgroup_size: u32) -> u32 {
    mi50_waves_per_simd_by_vgprs(vgprs).min(mi50_waves_per_simd_by_lds(lds_bytes, workgroup_size))
}

/// The memory latency that [`MI50_MIN_BYTES_IN_FLIGHT_PER_CU`] covers at the streaming bandwidth
/// (Little's law: 60 CUs × 16 KB / 0.85 TB/s ≈ 1.16 µs).
pub fn mi50_latency_us() -> f64 {
    MI50_CUS as f64 * MI50_MIN_BYTES_IN_FLIGHT_PER_CU / MI50_MEMORY_BYTES_PER_S * 1e6
}

/// The busiest CU's share of an uneven grid over the mean from which a compute-bound line says so
/// ([`Modelled::uneven_grid`]): 68 workgroups on 60 CUs (1.76×) are, 272 (1.10×) are not.
pub const MI50_UNEVEN_GRID: f64 = 1.2;

/// What the machine code does not show about the counted loop: from the ABI (a hand-written
/// kernel's `[model]` table). Default: nothing known.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopFacts {
    /// Weights one lane handles per trip of the counted loop: the weight buffer's words it reads
    /// per trip × 8 (INT4). `None`: from the products.
    pub weights_per_trip: Option<f64>,
    /// Trips per execution of the blocks a forward branch inside the loop skips (a per-group
    /// reload: the group's K rows over the rows a lane advances per trip). `None`: every trip.
    pub branch_period: Option<f64>,
    /// Times the kernel reads its packed weights (batch tiles, each reading them again).
    /// `None`: once.
    pub weight_passes: Option<f64>,
}

/// What the model needs, all explicit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelInputs {
    /// VALU instructions per weight in the counted loop (per lane, the executed path of a trip:
    /// decode, products, address arithmetic, loop control, a reload block at its share).
    pub valu_per_weight: f64,
    /// Weights the kernel multiplies (K × N per GEMV; every one handled by one lane once).
    pub weights: f64,
    /// VALU instructions outside the loop that every wave runs (the straight-line path once,
    /// the loop around the counted one once per weight pass: [`ModelInputs::valu_per_pass_per_wave`]).
    #[serde(default)]
    pub valu_outside_per_wave: f64,
    /// Of [`ModelInputs::valu_outside_per_wave`], what one pass of the loop around the counted
    /// loop runs per wave ([`HotLoop::valu_enclosing_path`]: a batch tile's setup, cross-slice
    /// reduction and stores), counted [`ModelInputs::weight_passes`] times (0: no such loop).
    #[serde(default)]
    pub valu_per_pass_per_wave: f64,
    /// Times the kernel reads its packed weights (batch tiles; 1 without).
    pub weight_passes: f64,
    /// Further VALU lane-instructions, where known (else 0).
    pub other_valu_lane_instructions: f64,
    /// Bytes the kernel must move (weights, scales, zero points, activations, outputs).
    pub bytes: f64,
    /// Bytes of loads one wave has in flight at most in the hot loop.
    pub bytes_in_flight_per_wave: f64,
    /// Waves resident per SIMD at the compiled occupancy (hipcc's report; the model takes the
    /// fewer of it and what [`ModelInputs::lds_bytes_per_workgroup`] leaves).
    pub occupancy: u32,
    /// Static LDS per workgroup, bytes (0: not known, no limit): caps the occupancy
    /// ([`mi50_waves_per_simd_by_lds`]), which hipcc's report does not.
    #[serde(default)]
    pub lds_bytes_per_workgroup: u32,
    /// Weight × activation products the op needs (K × N × batch rows per GEMV) over the products
    /// one dot-product lane-instruction makes (2 for `v_dot2_f32_f16`, 4 for `v_dot4_i32_i8`): the
    /// dot-issue floor's lane-instructions (0: not known).
    #[serde(default)]
    pub dot_floor_lane_instructions: f64,
    /// Of the loop's VALU, the share that is dot products (0 to 1; 0: not known): whether a
    /// compute-bound kernel is bound by its dot issue or by the other VALU work.
    #[serde(default)]
    pub dot_share: f64,
    /// Workgroups of one launch.
    pub grid: u32,
    /// Lanes per workgroup.
    pub workgroup_size: u32,
    /// Grid barriers per launch (a fused kernel's).
    #[serde(default)]
    pub grid_barriers: u32,
    /// Flag round trips per launch that cross PCIe (a fused allreduce's at TP > 1).
    #[serde(default)]
    pub flag_round_trips: u32,
    /// What was counted: the kernel symbol, the address range of its loop, its trip's VALU and
    /// weights and where they came from ([`HotLoop::counted_with`]); empty when not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub counted: String,
}

/// Which term of the model is the largest.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Compute: `1.18 · T_VALU + 10.6 µs` — by the dot-product issue where dot products are at
    /// least half the loop's VALU ([`Modelled::bound_name`]), else by the other VALU work.
    Valu,
    /// `bytes / 0.85 TB/s + 5 µs`.
    Memory,
    /// Too few loads in flight to draw the bandwidth: `bytes / (0.85 TB/s × in flight / 16 KB)
    /// + 5 µs`.
    Latency,
}

/// The model's prediction for one kernel, with its inputs: "modelled (MI50)".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Modelled {
    /// The inputs it was computed from.
    pub inputs: ModelInputs,
    /// VALU lane-instructions of the launch (loop, outside the loop, other).
    pub valu_lane_instructions: f64,
    /// `VALU lane-instructions / 6.62e12 per s`, in µs.
    pub t_valu_us: f64,
    /// `1.18 · T_VALU + 10.6 µs`.
    pub valu_term_us: f64,
    /// `bytes / 0.85 TB/s + 5 µs`.
    pub memory_term_us: f64,
    /// The memory term at the bandwidth the loads in flight draw, where under 16 KB per CU (else
    /// equal to the memory term).
    pub latency_term_us: f64,
    /// Grid barriers and PCIe flag round trips, µs, added to the largest term.
    pub fused_us: f64,
    /// The largest term plus the fused parts: the modelled time.
    pub us: f64,
    /// Which term is the largest.
    pub bound: Bound,
    /// Bytes of loads in flight per CU: per wave × the waves resident per CU (the fewer of the
    /// occupancy's `4 · occupancy` and the grid's waves spread over the 60 CUs).
    pub bytes_in_flight_per_cu: f64,
    /// Set when `bytes_in_flight_per_cu` is under 16 KB: latency-bound where the loop loads.
    pub few_loads_in_flight: bool,
    /// The busiest CU's workgroups over the mean (`ceil(grid / 60) / (grid / 60)`; 1 when the
    /// grid divides): how far an uneven grid's tail may stretch a compute-bound time. Not in
    /// `us` — the VALU term spreads the work over 60 CUs evenly — and said where ≥ 1.2 and
    /// compute-bound ([`Modelled::uneven_grid`]).
    pub grid_tail: f64,
    /// Waves per SIMD the model used: the fewer of hipcc's occupancy and the LDS limit.
    pub occupancy: u32,
    /// The dot-issue floor, µs: [`ModelInputs::dot_floor_lane_instructions`] at the VALU peak
    /// (every dot product issued back to back on every lane of 60 CUs at 1.725 GHz, nothing else):
    /// no kernel of these products can be faster. 0 when not known.
    pub dot_floor_us: f64,
    /// The op's other launches, in stream order around this one (a split-K's reduce, an
    /// activation quantiser: [`Modelled::with_launches`]); their times are in `us`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_launches: Vec<OtherLaunch>,
}

/// A further launch of one op, beside the launch with the weight loop (a hand-written split-K
/// GEMV's reduce kernel, a W4A8 kernel's activation quantiser): no weight loop to count, so a
/// streaming launch, `bytes / 0.85 TB/s + 5 µs` — its bytes, plus the 5 µs every launch of a
/// stream pays back to back (the memory fit's offset: launch gap and ramp, DESIGN.md §6).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OtherLaunch {
    /// The launch's kernel.
    pub symbol: String,
    /// Bytes it moves: each array it binds once.
    pub bytes: f64,
    /// `bytes / 0.85 TB/s + 5 µs`.
    pub us: f64,
}

impl OtherLaunch {
    /// A streaming launch of `symbol` moving `bytes`.
    pub fn streaming(symbol: &str, bytes: f64) -> OtherLaunch {
        OtherLaunch {
            symbol: symbol.to_owned(),
            bytes,
            us: bytes / MI50_MEMORY_BYTES_PER_S * 1e6 + MI50_MEMORY_OFFSET_US,
        }
    }
}

impl Modelled {
    /// Bytes moved per modelled second, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        let others: f64 = self.other_launches.iter().map(|l| l.bytes).sum();
        (self.inputs.bytes + others) / (self.us * 1e-6) / 1e9
    }

    /// The time without the fused parts and the other launches (the GEMV part of a fused
    /// kernel, the GEMV launch of several), µs.
    pub fn gemv_us(&self) -> f64 {
        self.us - self.fused_us - self.launches_us()
    }

    /// The other launches' time, µs.
    pub fn launches_us(&self) -> f64 {
        self.other_launches.iter().map(|l| l.us).sum()
    }

    /// This launch and the op's `others`, launched back to back on one stream: the times add
    /// (each other launch its bytes and its launch gap, [`OtherLaunch::streaming`]).
    pub fn with_launches(mut self, others: Vec<OtherLaunch>) -> Modelled {
        self.us += others.iter().map(|l| l.us).sum::<f64>();
        self.other_launches = others;
        self
    }

    /// The bound in words: `memory`, `latency`, `compute (dot issue)` (compute-bound with dot
    /// products at least half the loop's VALU) or `compute (VALU)` (the decode, addressing and
    /// loop work outweigh them).
    pub fn bound_name(&self) -> &'static str {
        match self.bound {
            Bound::Memory => "memory",
            Bound::Latency => "latency",
            Bound::Valu if self.inputs.dot_share >= 0.5 => "compute (dot issue)",
            Bound::Valu => "compute (VALU)",
        }
    }

    /// Whether the time is compute-bound on a grid whose busiest CU runs at least 1.2× the mean
    /// workgroups ([`Modelled::grid_tail`]): the line says the model does not count that tail.
    pub fn uneven_grid(&self) -> bool {
        self.bound == Bound::Valu && self.grid_tail >= MI50_UNEVEN_GRID
    }

    /// The modelled time over the dot-issue floor (`None` where the floor is not known).
    pub fn over_dot_floor(&self) -> Option<f64> {
        (self.dot_floor_us > 0.0).then(|| self.gemv_us() / self.dot_floor_us)
    }
}

/// The model (see the module documentation).
pub fn model(inputs: &ModelInputs) -> Modelled {
    let waves_per_wg = inputs.workgroup_size.div_ceil(MI50_WAVE) as f64;
    let waves = inputs.grid as f64 * waves_per_wg;
    let valu = inputs.valu_per_weight * inputs.weights
        + inputs.valu_outside_per_wave * MI50_WAVE as f64 * waves
        + inputs.other_valu_lane_instructions;
    let t_valu_us = valu / MI50_VALU_LANE_INSTRUCTIONS_PER_S * 1e6;
    let valu_term_us = MI50_VALU_FIT_SLOPE * t_valu_us + MI50_VALU_FIT_OFFSET_US;
    let stream_us = inputs.bytes / MI50_MEMORY_BYTES_PER_S * 1e6;
    let memory_term_us = stream_us + MI50_MEMORY_OFFSET_US;
    let occupancy = inputs.occupancy.min(mi50_waves_per_simd_by_lds(
        inputs.lds_bytes_per_workgroup,
        inputs.workgroup_size,
    ));
    let resident = (occupancy * MI50_SIMDS_PER_CU) as f64;
    let bytes_in_flight_per_cu =
        inputs.bytes_in_flight_per_wave * resident.min(waves / MI50_CUS as f64);
    let few_loads_in_flight = bytes_in_flight_per_cu < MI50_MIN_BYTES_IN_FLIGHT_PER_CU;
    // A loop without loads (its data loaded before it) says nothing of the latency.
    let latency_term_us = if few_loads_in_flight && bytes_in_flight_per_cu > 0.0 {
        stream_us * MI50_MIN_BYTES_IN_FLIGHT_PER_CU / bytes_in_flight_per_cu + MI50_MEMORY_OFFSET_US
    } else {
        memory_term_us
    };
    let (term, bound) = [
        (valu_term_us, Bound::Valu),
        (memory_term_us, Bound::Memory),
        (latency_term_us, Bound::Latency),
    ]
    .into_iter()
    .fold((f64::NEG_INFINITY, Bound::Valu), |best, t| {
        if t.0 > best.0 { t } else { best }
    });
    let per_cu = f64::from(inputs.grid) / MI50_CUS as f64;
    let grid_tail = if per_cu > 0.0 {
        per_cu.ceil() / per_cu
    } else {
        1.0
    };
    let fused_us = inputs.grid_barriers as f64 * MI50_GRID_BARRIER_US
        + inputs.flag_round_trips as f64 * MI50_FLAG_ROUND_TRIP_US;
    Modelled {
        inputs: inputs.clone(),
        valu_lane_instructions: valu,
        t_valu_us,
        valu_term_us,
        memory_term_us,
        latency_term_us,
        fused_us,
        us: term + fused_us,
        bound,
        bytes_in_flight_per_cu,
        few_loads_in_flight,
        grid_tail,
        occupancy,
        dot_floor_us: inputs.dot_floor_lane_instructions / MI50_VALU_LANE_INSTRUCTIONS_PER_S * 1e6,
        other_launches: Vec::new(),
    }
}

impl fmt::Display for Modelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inputs;
        write!(
            f,
            "modelled (MI50): {:.1} us ({}, {:.0} GB/s) = max(1.18 x {:.1} + 10.6, {:.1} MB / 0.85 TB/s + 5",
            self.us,
            match self.bound_name() {
                "compute (dot issue)" => "compute-bound (dot issue)",
                "compute (VALU)" => "compute-bound (VALU)",
                "memory" => "memory-bound",
                _ => "latency-bound",
            },
            self.gb_per_s(),
            self.t_valu_us,
            i.bytes / 1e6,
        )?;
        if self.latency_term_us != self.memory_term_us {
            write!(f, ", latency {:.1}", self.latency_term_us)?;
        }
        write!(f, ")")?;
        if self.fused_us > 0.0 {
            write!(
                f,
                " + {} grid barrier(s) x 1.5 + {} PCIe flag round trip(s) x 5",
                i.grid_barriers, i.flag_round_trips
            )?;
        }
        for l in &self.other_launches {
            write!(
                f,
                " + launch `{}` ({:.2} MB / 0.85 TB/s + 5 = {:.1})",
                l.symbol,
                l.bytes / 1e6,
                l.us
            )?;
        }
        write!(
            f,
            " us; inputs: {:.2} VALU/weight x {:.1} M weights",
            i.valu_per_weight,
            i.weights / 1e6
        )?;
        if i.valu_outside_per_wave > 0.0 {
            write!(f, " + {:.0} VALU outside the loop", i.valu_outside_per_wave)?;
            if i.valu_per_pass_per_wave > 0.0 && i.weight_passes > 1.0 {
                write!(
                    f,
                    " ({:.0} per weight pass x {})",
                    i.valu_per_pass_per_wave, i.weight_passes
                )?;
            }
            write!(
                f,
                " x {} waves",
                i.grid * i.workgroup_size.div_ceil(MI50_WAVE)
            )?;
        }
        let occupancy = if self.occupancy < i.occupancy {
            format!(
                "occupancy {} (hipcc {}; the LDS, {} B per workgroup, allows {})",
                self.occupancy, i.occupancy, i.lds_bytes_per_workgroup, self.occupancy
            )
        } else {
            format!("occupancy {}", self.occupancy)
        };
        write!(
            f,
            ", {:.2} MB, {occupancy}, {} x {} lanes, {:.1} KB loads in flight per CU{}",
            i.bytes / 1e6,
            i.grid,
            i.workgroup_size,
            self.bytes_in_flight_per_cu / 1024.0,
            if self.few_loads_in_flight {
                " (FEWER THAN 16 KB: latency-bound where the loop loads)"
            } else {
                ""
            }
        )?;
        if self.uneven_grid() {
            let per_cu = f64::from(i.grid) / MI50_CUS as f64;
            write!(
                f,
                " (UNEVEN GRID: {} workgroups on {MI50_CUS} CUs, the busiest runs {:.0} = {:.2}x the mean; a tail the compute term does not count)",
                i.grid,
                per_cu.ceil(),
                self.grid_tail
            )?;
        }
        if let Some(over) = self.over_dot_floor() {
            write!(
                f,
                "; dot-issue floor {:.1} us ({:.1} M dot lane-instructions at 6.62 T/s; {:.2}x it, dot products {:.0} % of the loop's VALU)",
                self.dot_floor_us,
                i.dot_floor_lane_instructions / 1e6,
                over,
                i.dot_share * 100.0
            )?;
        }
        if !i.counted.is_empty() {
            write!(f, "; counted: {}", i.counted)?;
        }
        Ok(())
    }
}
