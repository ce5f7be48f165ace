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

use crate::lowered::{LoweredKernel, ParamKind, Purpose};

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
    /// VALU instructions outside the loop that every wave runs once (the straight-line path).
    #[serde(default)]
    pub valu_outside_per_wave: f64,
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
            write!(
                f,
                " + {:.0} VALU outside the loop x {} waves",
                i.valu_outside_per_wave,
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

/// The counts of a kernel's hot loop in hipcc's machine code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotLoop {
    /// Mnemonics of the loop body, in order.
    pub mnemonics: Vec<String>,
    /// Vector ALU instructions (`v_*`).
    pub valu: usize,
    /// `v_dot2_f32_f16` (two weights of one batch row each).
    pub dot2: usize,
    /// `v_fma_mix_f32` (the FMA path's one per weight and batch row).
    pub fma_mix: usize,
    /// `v_dot4_i32_i8` (the q8 path's four weights of one batch row each).
    pub dot4: usize,
    /// Bytes per lane of vector-memory loads the loop has in flight at most: loads add their
    /// width, `s_waitcnt vmcnt(n)` leaves the newest `n` outstanding.
    pub bytes_in_flight_per_lane: u32,
    /// The kernel symbol whose code was searched ([`HotLoop::from_disassembly_of`]); `None`:
    /// the whole code object.
    pub symbol: Option<String>,
    /// Address of the loop's first instruction (the backward branch's target).
    pub first: u64,
    /// Address of the loop's last instruction (the backward branch).
    pub last: u64,
    /// VALU instructions of the loop in blocks a forward conditional branch inside the loop may
    /// skip (a per-group reload): charged once per [`LoopFacts::branch_period`] trips.
    pub skippable_valu: usize,
    /// VALU instructions of the searched code outside the loop (a static count).
    pub valu_outside: usize,
    /// Of those, the ones on the path every wave runs: not in a block a forward branch outside
    /// the loop skips, unless that block holds the loop (a guard such as `if (n < N)`); other
    /// loops' bodies once.
    pub valu_outside_path: usize,
}

impl HotLoop {
    /// The hot loop of a disassembly (`llvm-objdump -d --mcpu=gfx906`): of the ranges from a
    /// backward branch's target to the branch, the one with the most products
    /// (`v_dot2_f32_f16`, `v_fma_mix_f32`), then the longest — so a long spin loop (a peer-flag
    /// wait) is not taken for the GEMV's. `None` without a backward branch.
    pub fn from_disassembly(disasm: &str) -> Option<HotLoop> {
        HotLoop::of_instructions(&instructions_with_targets(disasm))
    }

    /// [`HotLoop::from_disassembly`] within the code of kernel `symbol` only (a code object may
    /// hold several kernels: tile variants of one file): the lines from `<symbol>:` to the next
    /// symbol. `None` when the symbol is not in the disassembly or has no loop.
    pub fn from_disassembly_of(disasm: &str, symbol: &str) -> Option<HotLoop> {
        let header = format!("<{symbol}>:");
        let mut text = String::new();
        let mut inside = false;
        for l in disasm.lines() {
            if l.ends_with(">:") {
                inside = l.trim_end().ends_with(&header);
            }
            if inside {
                text.push_str(l);
                text.push('\n');
            }
        }
        let mut hot = HotLoop::of_instructions(&instructions_with_targets(&text))?;
        hot.symbol = Some(symbol.to_owned());
        Some(hot)
    }

    /// What was counted, in words, without facts from an ABI at batch 1
    /// ([`HotLoop::counted_with`]).
    pub fn counted(&self) -> String {
        self.counted_with(1, &LoopFacts::default())
    }

    /// What was counted, in words: `` loop 0x1a0..0x3f4 (212 instructions) of `sym`: 90.5 VALU
    /// per trip (…), 16 weights per trip (…); 40 VALU outside the loop … ``.
    pub fn counted_with(&self, batch: usize, facts: &LoopFacts) -> String {
        let of = self
            .symbol
            .as_deref()
            .map_or("the whole code object".to_owned(), |s| format!("`{s}`"));
        let mut s = format!(
            "loop {:#x}..{:#x} ({} instructions) of {of}: {} VALU per trip",
            self.first,
            self.last,
            self.mnemonics.len(),
            trim(self.valu_per_trip(facts)),
        );
        if self.skippable_valu > 0 {
            s.push_str(&match facts.branch_period {
                Some(p) => format!(
                    " ({} of its {} in blocks a branch skips, charged once per {} trips)",
                    self.skippable_valu,
                    self.valu,
                    trim(p)
                ),
                None => format!(
                    " ({} of its {} in blocks a branch may skip, charged on every trip: the ABI gives no period)",
                    self.skippable_valu, self.valu
                ),
            });
        }
        let products = self.weights(batch);
        s.push_str(&match facts.weights_per_trip {
            Some(w) if (w - products).abs() > 1e-9 => format!(
                ", {} weights per trip (the ABI's; the products say {})",
                trim(w),
                trim(products)
            ),
            Some(w) => format!(", {} weights per trip (the ABI's)", trim(w)),
            None => format!(", {} weights per trip (the products')", trim(products)),
        });
        if self.valu_outside > 0 {
            s.push_str(&format!(
                "; {} VALU outside the loop on every wave's path, counted once per wave",
                self.valu_outside_path
            ));
            if self.valu_outside > self.valu_outside_path {
                s.push_str(&format!(
                    ", {} in blocks a branch may skip, not counted",
                    self.valu_outside - self.valu_outside_path
                ));
            }
        }
        s
    }

    fn of_instructions(ins: &[(u64, String, Option<u64>)]) -> Option<HotLoop> {
        let (start, end) = hottest_loop(ins)?;
        let body = &ins[start..=end];
        let (first, last) = (body[0].0, body[body.len() - 1].0);
        let skippable = skipped_within(body, first, last);
        let skippable_valu = body
            .iter()
            .zip(&skippable)
            .filter(|((_, m, _), s)| **s && m.starts_with("v_"))
            .count();
        let outside_skipped = skipped_outside(ins, (start, end));
        let is_valu_outside = |i: usize| (i < start || i > end) && ins[i].1.starts_with("v_");
        let valu_outside = (0..ins.len()).filter(|&i| is_valu_outside(i)).count();
        let valu_outside_path = (0..ins.len())
            .filter(|&i| is_valu_outside(i) && !outside_skipped[i])
            .count();
        let mnemonics: Vec<String> = body.iter().map(|(_, m, _)| m.clone()).collect();
        let count = |p: &str| mnemonics.iter().filter(|m| m.starts_with(p)).count();
        Some(HotLoop {
            valu: count("v_"),
            dot2: count("v_dot2_f32_f16"),
            fma_mix: count("v_fma_mix_f32"),
            dot4: count("v_dot4_i32_i8"),
            bytes_in_flight_per_lane: in_flight(
                &body.iter().map(|b| b.1.as_str()).collect::<Vec<_>>(),
            ),
            mnemonics,
            symbol: None,
            first,
            last,
            skippable_valu,
            valu_outside,
            valu_outside_path,
        })
    }

    /// Weights one lane handles per loop iteration at `batch` rows, from the products: four per
    /// `v_dot4_i32_i8` and row on the q8 path, two per `v_dot2_f32_f16` and row on the dot2
    /// path, else one per `v_fma_mix_f32` and row (the dot2 path's per-unit scale folds into a
    /// `v_fma_mix_f32` per column word, which is not a weight). A generated loop holds only
    /// these; a hand-written one may not ([`LoopFacts::weights_per_trip`]).
    pub fn weights(&self, batch: usize) -> f64 {
        match (self.dot4, self.dot2) {
            (0, 0) => self.fma_mix as f64 / batch as f64,
            (0, d) => 2.0 * d as f64 / batch as f64,
            (d, _) => 4.0 * d as f64 / batch as f64,
        }
    }

    /// Products (weight × activation pairs) one product instruction of the loop makes: 4 on the
    /// q8 path (`v_dot4_i32_i8`), 2 on the dot2 path, else 1 (`v_fma_mix_f32`, the FMA path).
    pub fn products_per_instruction(&self) -> f64 {
        match (self.dot4, self.dot2) {
            (0, 0) => 1.0,
            (0, _) => DOT2_PRODUCTS,
            _ => 2.0 * DOT2_PRODUCTS,
        }
    }

    /// The share of the loop's VALU that is weight products (`v_dot2_f32_f16`, `v_dot4_i32_i8`,
    /// `v_fma_mix_f32` on the FMA path), 0 to 1.
    pub fn dot_share(&self) -> f64 {
        let products = match (self.dot4, self.dot2) {
            (0, 0) => self.fma_mix,
            (0, d) => d,
            (d, _) => d,
        };
        if self.valu == 0 {
            0.0
        } else {
            products as f64 / self.valu as f64
        }
    }

    /// VALU instructions of one trip on the executed path: the blocks a branch inside the loop
    /// skips at 1/[`LoopFacts::branch_period`] (every trip where the period is not known).
    pub fn valu_per_trip(&self, facts: &LoopFacts) -> f64 {
        let period = facts.branch_period.unwrap_or(1.0).max(1.0);
        (self.valu - self.skippable_valu) as f64 + self.skippable_valu as f64 / period
    }

    /// VALU instructions per weight with nothing known from an ABI (the products' weights, every
    /// VALU of the loop on every trip), or `None` without products.
    pub fn valu_per_weight(&self, batch: usize) -> Option<f64> {
        self.valu_per_weight_with(batch, &LoopFacts::default())
    }

    /// VALU instructions per weight on the executed path of a trip: [`HotLoop::valu_per_trip`]
    /// over the ABI's weights per trip (else the products'), or `None` without weights.
    pub fn valu_per_weight_with(&self, batch: usize, facts: &LoopFacts) -> Option<f64> {
        let w = facts
            .weights_per_trip
            .unwrap_or_else(|| self.weights(batch));
        (w > 0.0).then(|| self.valu_per_trip(facts) / w)
    }
}

/// A weight product: `v_dot2_f32_f16`, `v_fma_mix_f32` or `v_dot4_i32_i8`.
fn is_product(m: &str) -> bool {
    m.starts_with("v_dot2_f32_f16")
        || m.starts_with("v_fma_mix_f32")
        || m.starts_with("v_dot4_i32_i8")
}

/// `x` with at most two decimals and no trailing zeros (`16`, `0.5`, `90.06`).
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The loop with the most products, then the most instructions: `(first, last)` indices of the
/// range from a backward branch's target to the branch.
fn hottest_loop(ins: &[(u64, String, Option<u64>)]) -> Option<(usize, usize)> {
    let products =
        |b: &[(u64, String, Option<u64>)]| b.iter().filter(|(_, m, _)| is_product(m)).count();
    let mut best: Option<(usize, usize)> = None;
    for (i, (addr, m, target)) in ins.iter().enumerate() {
        // A loop closes with a backward conditional branch, or with an unconditional one
        // (`s_branch`) where the exit test is at the top.
        let Some(t) = target
            .filter(|t| t <= addr && (m.starts_with("s_cbranch") || m.as_str() == "s_branch"))
        else {
            continue;
        };
        let start = ins.iter().position(|(a, _, _)| *a >= t).unwrap_or(i);
        let key = |(s, e): (usize, usize)| (products(&ins[s..=e]), e - s);
        if best.is_none_or(|b| key((start, i)) > key(b)) {
            best = Some((start, i));
        }
    }
    best
}

/// Which instructions of a loop body (`first`..=`last`) a branch inside it jumps over on most
/// trips: a block a forward conditional branch skips, and the tail after a second back edge to
/// the loop's own first instruction when the tail holds no products (hipcc places a reload
/// block there: that branch goes back while the group lasts, the tail runs when it ends and
/// then jumps back itself; a tail with the products is the trip's work after a staging loop
/// that shares the head). A nested loop's back edge (to its own, later, first instruction)
/// skips nothing.
fn skipped_within(body: &[(u64, String, Option<u64>)], first: u64, last: u64) -> Vec<bool> {
    let mut skipped = vec![false; body.len()];
    for (i, (addr, m, target)) in body.iter().enumerate() {
        let Some(t) = target.filter(|t| *t <= last && m.starts_with("s_cbranch")) else {
            continue;
        };
        if t == first {
            if !body[i + 1..].iter().any(|(_, m, _)| is_product(m)) {
                for s in skipped.iter_mut().skip(i + 1) {
                    *s = true;
                }
            }
            continue;
        }
        if t <= *addr {
            continue;
        }
        for (j, (a, _, _)) in body.iter().enumerate().skip(i + 1) {
            if *a >= t {
                break;
            }
            skipped[j] = true;
        }
    }
    skipped
}

/// Which instructions outside the loop `(start, end)` a forward branch outside it jumps over,
/// where the skipped range does not hold the loop (a guard around the whole work is the path
/// taken).
fn skipped_outside(ins: &[(u64, String, Option<u64>)], (start, end): (usize, usize)) -> Vec<bool> {
    let mut skipped = vec![false; ins.len()];
    for (i, (addr, m, target)) in ins.iter().enumerate() {
        if (start..=end).contains(&i) {
            continue;
        }
        let Some(t) = target
            .filter(|t| *t > *addr && (m.starts_with("s_cbranch") || m.as_str() == "s_branch"))
        else {
            continue;
        };
        let to = ins
            .iter()
            .position(|(a, _, _)| *a >= t)
            .unwrap_or(ins.len());
        if i < start && to > end {
            continue;
        }
        for s in skipped.iter_mut().take(to).skip(i + 1) {
            *s = true;
        }
    }
    skipped
}

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
    Some(ModelInputs {
        valu_per_weight: hot.valu_per_weight_with(batch, facts)?,
        lds_bytes_per_workgroup: u32::try_from(k.lds_bytes()).unwrap_or(u32::MAX),
        dot_floor_lane_instructions: weights * batch as f64 / hot.products_per_instruction(),
        dot_share: hot.dot_share(),
        weights,
        valu_outside_per_wave: hot.valu_outside_path as f64,
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
/// hand-written kernel with batch tiles of its own (its ABI's `[model] weight_passes`).
pub fn with_weight_passes(inputs: &mut ModelInputs, k: &LoweredKernel, passes: f64) {
    inputs.bytes += (passes - f64::from(k.weight_passes.max(1))) * weight_bytes(k);
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

/// `(address, mnemonic, backward-or-forward branch target)` of every instruction line of
/// llvm-objdump's disassembly (`s_waitcnt` keeps its operands in the mnemonic slot).
pub fn instructions_with_targets(disasm: &str) -> Vec<(u64, String, Option<u64>)> {
    // Each instruction line ends with `// <address>: <encoding>`; branches add `<sym+0xOFF>`.
    let mut ins = Vec::new();
    let mut base = None;
    for l in disasm.lines() {
        if l.ends_with(">:") {
            base = u64::from_str_radix(l.split_whitespace().next().unwrap_or(""), 16).ok();
            continue;
        }
        let Some((code, comment)) = l.split_once("//") else {
            continue;
        };
        let Some(addr) = comment
            .trim()
            .split(':')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let target = comment
            .split('<')
            .nth(1)
            .and_then(|t| t.split("+0x").nth(1))
            .and_then(|o| u64::from_str_radix(o.trim_end_matches('>'), 16).ok())
            .zip(base)
            .map(|(off, b)| b + off);
        let m = code.split_whitespace().next().unwrap_or("").to_owned();
        let full = code.to_owned();
        // keep the operands of waits (vmcnt) in the mnemonic slot for `in_flight`
        let m = if m == "s_waitcnt" { full } else { m };
        ins.push((addr, m, target));
    }
    ins
}

/// Bytes of a vector-memory load mnemonic, or `None` for other instructions.
fn load_bytes(m: &str) -> Option<u32> {
    let rest = m
        .strip_prefix("global_load_")
        .or_else(|| m.strip_prefix("buffer_load_"))
        .or_else(|| m.strip_prefix("flat_load_"))?;
    Some(match rest {
        "dwordx4" => 16,
        "dwordx3" => 12,
        "dwordx2" => 8,
        "dword" => 4,
        "ushort" | "sshort" | "short_d16" | "short_d16_hi" => 2,
        _ => 1,
    })
}

/// The most bytes per lane of loads outstanding at once in `body` (one pass, in order).
fn in_flight(body: &[&str]) -> u32 {
    let mut outstanding: Vec<u32> = Vec::new();
    let mut most = 0;
    for m in body {
        if let Some(b) = load_bytes(m) {
            outstanding.push(b);
            most = most.max(outstanding.iter().sum());
        } else if let Some(n) = m
            .split("vmcnt(")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|n| n.parse::<usize>().ok())
        {
            let keep = outstanding.len().saturating_sub(n);
            outstanding.drain(..keep);
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(valu_per_weight: f64, weights: f64, bytes: f64) -> ModelInputs {
        ModelInputs {
            valu_per_weight,
            weights,
            valu_outside_per_wave: 0.0,
            other_valu_lane_instructions: 0.0,
            bytes,
            bytes_in_flight_per_wave: 8192.0,
            occupancy: 4,
            lds_bytes_per_workgroup: 0,
            dot_floor_lane_instructions: 0.0,
            dot_share: 0.0,
            grid: 272,
            workgroup_size: 256,
            grid_barriers: 0,
            flag_round_trips: 0,
            counted: String::new(),
        }
    }

    /// Occupancy by hand on gfx906 (256 VGPRs per lane, granule 4, 10 waves per SIMD; 64 KB of
    /// LDS per CU, granule 256 B, 4 SIMDs): the batch-8/16/32 kernels' figures.
    #[test]
    fn occupancy_from_vgprs_and_lds_by_hand() {
        // 256 / 84 = 3.05; 256 / 116 = 2.2; 256 / 214 = 1.2; 62 -> 64: 4; 24 -> 10.7: 10.
        for (vgprs, waves) in [
            (84, 3),
            (116, 2),
            (128, 2),
            (129, 1),
            (214, 1),
            (62, 4),
            (24, 10),
        ] {
            assert_eq!(mi50_waves_per_simd_by_vgprs(vgprs), waves, "{vgprs} VGPRs");
        }
        // 256 lanes (4 waves) with 24 KB: 2 workgroups = 8 waves = 2 per SIMD; 48 KB: 1
        // workgroup = 4 waves = 1 per SIMD; 16 KB: 4 = 16 waves = 4; 128 lanes (2 waves) with
        // 40960 B: 1 workgroup = 2 waves, under one per SIMD, still 1; no LDS: 10; 100 B ->
        // 256 B: 256 workgroups, capped at 10.
        for (lds, wg, waves) in [
            (24576, 256, 2),
            (49152, 256, 1),
            (16384, 256, 4),
            (40960, 128, 1),
            (0, 256, 10),
            (100, 64, 10),
        ] {
            assert_eq!(mi50_waves_per_simd_by_lds(lds, wg), waves, "{lds} B x {wg}");
        }
        // `gemv_int4` at batch 16 (116 VGPRs, 48 KB): hipcc says 2, the LDS allows 1.
        assert_eq!(mi50_occupancy(116, 49152, 256), 1);
        assert_eq!(mi50_occupancy(84, 16384, 256), 3);
    }

    /// The LDS caps hipcc's occupancy in the model: 8 KB loads in flight per wave at hipcc's 4
    /// waves per SIMD are 128 KB per CU; at the 1 the LDS allows (48 KB per 256-lane workgroup)
    /// 32 KB, and the line says why.
    #[test]
    fn the_lds_caps_the_occupancy_gfx906() {
        let mut i = inputs(2.0, 5120.0 * 17408.0, 46.3e6);
        let free = model(&i);
        assert_eq!(
            (free.occupancy, free.bytes_in_flight_per_cu),
            (4, 4.0 * 4.0 * 8192.0)
        );
        i.lds_bytes_per_workgroup = 49152;
        let capped = model(&i);
        assert_eq!(
            (capped.occupancy, capped.bytes_in_flight_per_cu),
            (1, 4.0 * 8192.0)
        );
        assert!(
            capped
                .to_string()
                .contains("occupancy 1 (hipcc 4; the LDS, 49152 B per workgroup, allows 1)"),
            "{capped}"
        );
    }

    /// The dot-issue floor by hand: `gemv_int4` 5120 → 17408 at batch 64 needs 5120 · 17408 · 64
    /// products, 2 per `v_dot2_f32_f16`: 2.852 G lane-instructions at 60 · 64 · 1.725 G/s =
    /// 430.6 µs. A kernel at 1.2 VALU per weight and row (76.8 per weight) with 42 % of it dot
    /// products is compute-bound by the other VALU work, at 1.18 · 1032.9 + 10.6 = 1229.4 µs,
    /// 2.86 times the floor; with 62.5 % (0.8 VALU per weight and row) by its dot issue.
    #[test]
    fn the_dot_issue_floor_and_the_compute_bound_by_hand() {
        let w = 5120.0 * 17408.0;
        let mut i = inputs(76.8, w, 8.0 * 46.3e6);
        i.dot_floor_lane_instructions = w * 64.0 / 2.0;
        i.dot_share = 0.42;
        let m = model(&i);
        assert!((m.dot_floor_us - 430.6).abs() < 0.1, "{}", m.dot_floor_us);
        assert_eq!(m.bound, Bound::Valu);
        assert_eq!(m.bound_name(), "compute (VALU)");
        assert!((m.us - (1.18 * 76.8 * w / 6.624e12 * 1e6 + 10.6)).abs() < 1e-6);
        assert!(
            (m.over_dot_floor().expect("a floor") - 2.855).abs() < 0.01,
            "{m}"
        );
        i.valu_per_weight = 51.2;
        i.dot_share = 0.625;
        let d = model(&i);
        assert_eq!(d.bound_name(), "compute (dot issue)");
        assert!(
            d.to_string().contains("(compute-bound (dot issue), "),
            "{d}"
        );
        assert!(d.to_string().contains("dot-issue floor 430.6 us"), "{d}");
        // A memory-bound kernel says so whatever its dot share.
        let mut mem = inputs(2.0, w, 46.3e6);
        mem.dot_share = 0.9;
        assert_eq!(model(&mem).bound_name(), "memory");
    }

    /// DESIGN.md §6's numbers: 8.0 VALU per weight at 5120 → 17408 is VALU-bound at ~138 µs;
    /// 2.0 is memory-bound at the 46.3 MB floor.
    #[test]
    fn the_fit_reproduces_the_design_numbers() {
        let w = 5120.0 * 17408.0;
        let fma = model(&inputs(8.0, w, 46.3e6));
        assert_eq!(fma.bound, Bound::Valu);
        let expect = 1.18 * (8.0 * w / 6.624e12 * 1e6) + 10.6;
        assert!((fma.us - expect).abs() < 1e-9, "{fma}");
        assert!((fma.us - 137.7).abs() < 0.5, "{fma}");
        let floor = model(&inputs(2.0, w, 46.3e6));
        assert_eq!(floor.bound, Bound::Memory);
        assert!((floor.us - (46.3e6 / 0.85e12 * 1e6 + 5.0)).abs() < 1e-9);
        assert!(
            floor
                .to_string()
                .starts_with("modelled (MI50): 59.5 us (memory-bound")
        );
    }

    /// Two kernels in one code object (tile variants of one file): the hotter loop is in `big`,
    /// but the model of `small` counts `small`'s loop only, and says which one it counted.
    #[test]
    fn the_hot_loop_of_a_symbol_is_searched_in_its_code_only() {
        let disasm = "\
0000000000001000 <small>:
\tv_add_u32_e32 v1, v2, v3 // 000000001000: 68020702
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001004: D3A30004
\ts_cbranch_scc1 65534 // 000000001008: BF85FFFE <small+0x4>
\ts_endpgm // 00000000100C: BF810000

0000000000002000 <big>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002000: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002004: D3A30004
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000002008: D3A30004
\ts_cbranch_scc1 65532 // 00000000200C: BF85FFFC <big+0x0>
\ts_endpgm // 000000002010: BF810000
";
        let whole = HotLoop::from_disassembly(disasm).expect("a loop");
        assert_eq!((whole.dot2, whole.first, whole.last), (3, 0x2000, 0x200c));
        let small = HotLoop::from_disassembly_of(disasm, "small").expect("its loop");
        assert_eq!((small.dot2, small.valu), (1, 1));
        assert_eq!((small.first, small.last), (0x1004, 0x1008));
        assert_eq!(
            small.counted(),
            "loop 0x1004..0x1008 (2 instructions) of `small`: 1 VALU per trip, 2 weights per trip (the products'); \
             1 VALU outside the loop on every wave's path, counted once per wave"
        );
        assert!(HotLoop::from_disassembly_of(disasm, "absent").is_none());
        // `small`'s one VALU outside its loop runs once per wave.
        let big = HotLoop::from_disassembly_of(disasm, "big").expect("its loop");
        assert_eq!((big.valu_outside, big.skippable_valu), (0, 0));
        assert_eq!(small.valu_outside, 1);
    }

    /// Without a period from the ABI, a block a forward branch skips is charged on every trip,
    /// and the count says how much of the loop that is.
    #[test]
    fn blocks_a_branch_skips_inside_the_loop_are_said() {
        let disasm = "\
0000000000001000 <k>:
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001000: D3A30004
\ts_cbranch_execz 2 // 000000001004: BF880002 <k+0x10>
\tv_mov_b32_e32 v7, v8 // 000000001008: 7E0E0308
\tv_mov_b32_e32 v9, v8 // 00000000100C: 7E120308
\tv_dot2_f32_f16 v4, v5, v6, v4 // 000000001010: D3A30004
\ts_cbranch_scc1 65530 // 000000001014: BF85FFFA <k+0x0>
";
        let h = HotLoop::from_disassembly_of(disasm, "k").expect("a loop");
        assert_eq!((h.valu, h.skippable_valu, h.valu_outside), (4, 2, 0));
        assert!(
            h.counted().ends_with(
                ": 4 VALU per trip (2 of its 4 in blocks a branch may skip, charged on every trip: \
                 the ABI gives no period), 4 weights per trip (the products')"
            ),
            "{}",
            h.counted()
        );
    }

    #[test]
    fn few_loads_in_flight_are_flagged() {
        let mut i = inputs(2.0, 1e6, 1e6);
        i.bytes_in_flight_per_wave = 1024.0;
        i.grid = 60;
        // 4 waves per CU from the grid × 1 KB = 4 KB per CU
        let m = model(&i);
        assert!((m.bytes_in_flight_per_cu - 4096.0).abs() < 1e-9);
        assert!(m.few_loads_in_flight);
        i.grid = 600; // the occupancy caps it: 16 waves × 1 KB
        assert!(!model(&i).few_loads_in_flight);
    }

    /// One disassembly line: `\tMNEMONIC OPERANDS // ADDR: 0` with a branch's `<k+0xOFF>`.
    fn line(addr: u64, code: &str, target: Option<u64>) -> String {
        let to = target.map_or(String::new(), |t| format!(" <k+{:#x}>", t - 0x1000));
        format!("\t{code} // {addr:012X}: 00000000{to}\n")
    }

    /// A kernel `k` at 0x1000 from `(code, branch target)` lines, 4 bytes each.
    fn kernel(lines: &[(&str, Option<u64>)]) -> String {
        let mut s = "0000000000001000 <k>:\n".to_owned();
        for (i, (code, t)) in lines.iter().enumerate() {
            s.push_str(&line(0x1000 + 4 * i as u64, code, *t));
        }
        s
    }

    /// A conditional reload block (a GEMV's per-group scale and zero reload, run once per
    /// group of 128 rows = 16 words of 8 rows at one word per trip): hand count, per trip, 12
    /// VALU always (decode, 8 `v_fma_mix_f32`, the address) + 6 in the block / 16 = 12.375 VALU
    /// for 8 weights: 1.546875 per weight, where charging the block on every trip gives 18 / 8
    /// = 2.25 (45 % more).
    #[test]
    fn a_conditional_reload_block_costs_its_share_of_the_trips() {
        let mut l: Vec<(&str, Option<u64>)> = vec![
            ("global_load_dword v1, v[2:3], off", None), // 0x1000: the loop
            ("s_and_b32 s4, s5, 15", None),
            ("s_cmp_lg_u32 s4, 0", None),
            ("s_cbranch_scc1 6", Some(0x1028)), // 0x100c: skip the reload
        ];
        l.extend([("v_mov_b32_e32 v7, v8", None); 6]); // 0x1010..0x1024: the reload
        l.extend([("v_fma_mix_f32 v4, v5, v6, v4", None); 8]); // 0x1028..
        l.extend([
            ("v_bfe_u32 v5, v1, 4, 4", None),
            ("v_lshrrev_b32_e32 v6, 8, v1", None),
            ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
            ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None),
            ("s_cbranch_scc0 65510", Some(0x1000)),
            ("s_endpgm", None),
        ]);
        let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
        assert_eq!((h.valu, h.skippable_valu, h.fma_mix), (18, 6, 8));
        let facts = LoopFacts {
            weights_per_trip: Some(8.0),
            branch_period: Some(16.0),
            ..LoopFacts::default()
        };
        assert_eq!(h.valu_per_trip(&facts), 12.375);
        assert_eq!(h.valu_per_weight_with(1, &facts), Some(1.546875));
        assert_eq!(h.valu_per_weight(1), Some(2.25));
        assert!(
            h.counted_with(1, &facts).contains(
                ": 12.38 VALU per trip (6 of its 18 in blocks a branch skips, charged once per 16 trips), \
                 8 weights per trip (the ABI's)"
            ),
            "{}",
            h.counted_with(1, &facts)
        );
    }

    /// hipcc's layout of the same reload (`gemv_int4_reload.hip`): the loop's inner backward
    /// branch goes back while the group lasts; the reload after it runs when the group ends and
    /// jumps back itself. Hand count as above: 12 + 6 / 16 VALU per trip.
    #[test]
    fn a_reload_after_the_inner_back_edge_costs_its_share_of_the_trips() {
        let mut l: Vec<(&str, Option<u64>)> = vec![
            ("global_load_dword v1, v[2:3], off", None), // 0x1000: the loop
        ];
        l.extend([("v_fma_mix_f32 v4, v5, v6, v4", None); 8]); // 0x1004..0x1020
        l.extend([
            ("v_bfe_u32 v5, v1, 4, 4", None),
            ("v_lshrrev_b32_e32 v6, 8, v1", None),
            ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
            ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None), // 0x1030
            ("s_cbranch_scc1 40", Some(0x10d8)),             // 0x1034: the exit
            ("s_cmp_lg_u32 s20, 0", None),
            ("s_cbranch_scc1 65523", Some(0x1000)), // 0x103c: the group lasts
        ]);
        l.extend([("v_mov_b32_e32 v7, v8", None); 6]); // 0x1040..0x1054: the reload
        l.extend([("s_branch 65512", Some(0x1000)), ("s_endpgm", None)]); // 0x1058
        let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
        assert_eq!((h.first, h.last), (0x1000, 0x1058));
        assert_eq!((h.valu, h.skippable_valu), (18, 6));
        let facts = LoopFacts {
            weights_per_trip: Some(8.0),
            branch_period: Some(16.0),
            ..LoopFacts::default()
        };
        assert_eq!(h.valu_per_trip(&facts), 12.375);
        // A staging loop that shares the head, its back edge before the products: the tail is
        // the trip's work, not a skipped block.
        let mut l: Vec<(&str, Option<u64>)> = vec![
            ("ds_write_b32 v1, v2", None),           // 0x1000
            ("v_add_u32_e32 v1, 4, v1", None),       // 0x1004
            ("s_cbranch_execz 65533", Some(0x1000)), // 0x1008
        ];
        l.extend([("v_dot2_f32_f16 v4, v5, v6, v4", None); 4]); // 0x100c..0x1018
        l.extend([("s_branch 65530", Some(0x1000)), ("s_endpgm", None)]); // 0x101c
        let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
        assert_eq!(
            (h.first, h.last, h.valu, h.skippable_valu),
            (0x1000, 0x101c, 5, 0)
        );
    }

    /// hipcc turns the first product of a word into `v_cvt_f32_f16` + `v_mul_f32` and the other
    /// seven into `v_fma_mix_f32`, and adds a scale FMA: the products say 7 weights per trip
    /// (2.71 VALU per weight); the ABI's one word per trip says 8 (hand count: 19 VALU / 8 =
    /// 2.375).
    #[test]
    fn a_mul_first_word_counts_eight_weights_from_the_abi() {
        let mut l: Vec<(&str, Option<u64>)> = vec![
            ("global_load_dword v1, v[2:3], off", None),
            ("s_waitcnt vmcnt(0)", None),
            ("v_cvt_f32_f16_e32 v9, v8", None),
            ("v_mul_f32_e32 v10, v9, v11", None),
        ];
        l.extend([("v_fma_mix_f32 v10, v5, v6, v10", None); 7]);
        l.extend([("v_bfe_u32 v5, v1, 4, 4", None); 7]);
        l.extend([
            ("v_fmac_f32_e32 v4, v10, v12", None), // the scale
            ("v_add_co_u32_e32 v2, vcc, 4, v2", None),
            ("v_addc_co_u32_e32 v3, vcc, 0, v3, vcc", None),
            ("s_cbranch_scc0 65510", Some(0x1000)),
        ]);
        let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
        assert_eq!((h.valu, h.fma_mix, h.weights(1)), (19, 7, 7.0));
        let facts = LoopFacts {
            weights_per_trip: Some(8.0),
            branch_period: None,
            ..LoopFacts::default()
        };
        assert_eq!(h.valu_per_weight_with(1, &facts), Some(2.375));
        assert!(
            h.counted_with(1, &facts)
                .contains("8 weights per trip (the ABI's; the products say 7)"),
            "{}",
            h.counted_with(1, &facts)
        );
    }

    /// Work outside the loop: a guard around the whole work (`if (n < N)`) is the path taken, a
    /// lane-0 store block after the loop is skipped on most waves. Hand count: 5 VALU before the
    /// loop, 4 after it on every wave's path = 9 per wave; the 2 of the skippable block are said,
    /// not counted. At 34 workgroups of 128 lanes (68 waves): 9 × 64 × 68 = 39,168
    /// lane-instructions on top of the loop's.
    #[test]
    fn work_outside_the_loop_is_counted_once_per_wave_on_the_path_every_wave_runs() {
        let mut l: Vec<(&str, Option<u64>)> = vec![
            ("v_cmp_gt_i32_e32 vcc, s1, v0", None), // 0x1000
            ("s_and_saveexec_b64 s[6:7], vcc", None),
            ("s_cbranch_execz 20", Some(0x1054)), // 0x1008: the guard, to s_endpgm
        ];
        l.extend([("v_mul_lo_u32 v4, s16, v2", None); 4]); // 0x100c..0x1018
        l.extend([
            ("v_dot2_f32_f16 v4, v5, v6, v4", None), // 0x101c: the loop
            ("v_dot2_f32_f16 v4, v5, v6, v4", None),
            ("s_cbranch_scc0 65533", Some(0x101c)), // 0x1024
            ("v_cvt_f16_f32_e32 v2, v4", None),     // 0x1028: after the loop
            ("v_add_co_u32_e32 v0, vcc, s6, v0", None),
            ("v_addc_co_u32_e32 v1, vcc, v3, v1, vcc", None),
            ("v_cmp_eq_u32_e32 vcc, 0, v7", None), // 0x1034 (the 3rd after the loop)
            ("s_and_saveexec_b64 s[6:7], vcc", None),
            ("s_cbranch_execz 3", Some(0x1050)), // 0x103c: lane 0 only
            ("v_mov_b32_e32 v9, v2", None),
            ("v_mov_b32_e32 v10, v2", None),
            ("global_store_short v[0:1], v2, off", None), // 0x1048
            ("s_nop 0", None),
            ("s_or_b64 exec, exec, s[6:7]", None), // 0x1050
            ("s_endpgm", None),                    // 0x1054
        ]);
        let h = HotLoop::from_disassembly_of(&kernel(&l), "k").expect("a loop");
        assert_eq!((h.first, h.last), (0x101c, 0x1024));
        // 1 + 4 before the loop, 4 after it (the compare included), 2 in the lane-0 block.
        assert_eq!((h.valu_outside, h.valu_outside_path), (11, 9));
        let mut i = inputs(1.0, 1e6, 1e6);
        (i.grid, i.workgroup_size) = (34, 128);
        i.valu_outside_per_wave = h.valu_outside_path as f64;
        let m = model(&i);
        assert_eq!(m.valu_lane_instructions, 1e6 + 9.0 * 64.0 * 68.0);
        assert!(
            m.to_string()
                .contains("1.00 VALU/weight x 1.0 M weights + 9 VALU outside the loop x 68 waves"),
            "{m}"
        );
        assert!(
            h.counted().ends_with(
                "; 9 VALU outside the loop on every wave's path, counted once per wave, \
                 2 in blocks a branch may skip, not counted"
            ),
            "{}",
            h.counted()
        );
    }

    /// One wave per 64 columns, one dword load in flight per lane: 34 workgroups of 128 lanes
    /// at 5120 → 4352 (11.6 MB) leave 68 waves on 60 CUs, 256 B × 68 / 60 = 290 B in flight per
    /// CU. Hand count: the bandwidth drawn is 0.85 TB/s × 290 / 16,384 = 15.1 GB/s; the latency
    /// term 11.6 MB / 15.1 GB/s + 5 µs = 775.7 µs, latency-bound and said.
    #[test]
    fn a_latency_bound_shape_gets_the_latency_term_and_a_warning() {
        let mut i = inputs(2.0, 5120.0 * 4352.0, 11.6e6);
        (i.grid, i.workgroup_size, i.occupancy) = (34, 128, 10);
        i.bytes_in_flight_per_wave = 4.0 * 64.0;
        let m = model(&i);
        let per_cu = 256.0 * 68.0 / 60.0;
        assert!((m.bytes_in_flight_per_cu - per_cu).abs() < 1e-9);
        let stream = 11.6e6 / 0.85e12 * 1e6;
        let expect = stream * 16384.0 / per_cu + 5.0;
        assert!((m.latency_term_us - expect).abs() < 1e-6, "{m}");
        assert!((m.us - 775.7).abs() < 0.1, "{m}");
        assert_eq!(m.bound, Bound::Latency);
        assert!(
            m.to_string()
                .starts_with("modelled (MI50): 775.7 us (latency-bound")
                && m.to_string().contains("FEWER THAN 16 KB: latency-bound"),
            "{m}"
        );
        // Enough waves hide it: 16 KB per CU and more leave the memory term.
        (i.grid, i.bytes_in_flight_per_wave) = (480, 4096.0);
        let m = model(&i);
        assert_eq!((m.bound, m.few_loads_in_flight), (Bound::Memory, false));
        assert_eq!(m.latency_term_us, m.memory_term_us);
        // The Little's-law latency the 16 KB rule stands for.
        assert!((mi50_latency_us() - 1.157).abs() < 1e-3);
    }

    /// A fused kernel: its grid barrier and its PCIe flag round trips add to the GEMV's time.
    #[test]
    fn the_fused_parts_are_added() {
        let mut i = inputs(2.0, 5120.0 * 4352.0, 11.6e6);
        let gemv = model(&i);
        (i.grid_barriers, i.flag_round_trips) = (1, 2);
        let fused = model(&i);
        assert!((fused.fused_us - (1.5 + 2.0 * 5.0)).abs() < 1e-12);
        assert!((fused.us - gemv.us - 11.5).abs() < 1e-9);
        assert_eq!(fused.gemv_us(), gemv.us);
        assert!(
            fused
                .to_string()
                .contains(") + 1 grid barrier(s) x 1.5 + 2 PCIe flag round trip(s) x 5 us;"),
            "{fused}"
        );
    }

    #[test]
    fn in_flight_follows_vmcnt() {
        let body = [
            "global_load_dwordx4",
            "global_load_dwordx4",
            "global_load_dword",
            "s_waitcnt vmcnt(1)",
            "global_load_dwordx2",
            "s_waitcnt vmcnt(0)",
        ];
        assert_eq!(in_flight(&body), 36);
    }
}
