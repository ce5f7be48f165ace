//! Schedules: how one kernel's work is split over workgroups, lanes and registers.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use wavefuse_ir::ops::Compression;
use wavefuse_ir::{BufferType, Kernel, OpKind, Value, WeightFormat};

use crate::target::Arch;

use super::LowerError;
use super::gemv::mma_takes;

/// INT4: how a 4-bit code becomes an f32 (both exact).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NibbleDecode {
    /// `f32(bfe(word, 4i, 4))`: a bitfield extract and an integer → float conversion. On gfx906
    /// both are full-rate VALU instructions (`v_bfe_u32`, `v_cvt_f32_u32`); on sm_90 the
    /// conversion (I2F) issues at a quarter of the FP32 rate and `bfe` is two instructions.
    Convert,
    /// The "magic number" decode: `bitcast<f32>(((word >> 4i) & 0xF) | 0x4B00_0000) − 2^23`.
    /// `0x4B00_0000` is `2^23`, whose ulp is 1, so OR-ing `q` into the mantissa gives `2^23 + q`
    /// exactly and the subtraction gives `q` exactly: a shift, a LOP3 and an FADD, all full-rate.
    Magic,
}

/// INT4: where a group's scale `s` and zero point `z` are applied.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Int4Scaling {
    /// Per weight: `w = fma(q, s, −z·s)` (exactly `(q − z)·s`), then `acc = fma(w, x, acc)`.
    PerWeight,
    /// Per work unit: `a = Σ q·x` and `X = Σ x` over the unit's K rows, then
    /// `acc = fma(s, a − z·X, acc)`: one FMA per weight instead of two. `Σ (q − z)·s·x` equals
    /// `s·(Σ q·x − z·Σ x)`; in f32 the two sums are exact to 2^-24 relative, far inside the
    /// FP16 output's rounding.
    PerUnit,
}

/// INT4: which instructions form the dot products.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Int4Dot {
    /// FP32 FMAs per weight (with [`NibbleDecode`] and [`Int4Scaling`]): 3-5 ALU instructions
    /// per weight, which makes the GEMV issue-bound on sm_90 (measured: ~30 % of copy bandwidth).
    Fma,
    /// The tensor cores (sm_90 only, [`Stmt::MmaF16`](crate::lowered::Stmt::MmaF16)): each
    /// packed word gives four FP16 pairs `1024 + q` by one LOP3 each (`0x6400 | q` is exactly
    /// `1024 + q`), one `sub.f16x2` with `1024 + z` makes the exact `q − z`, and
    /// `mma.m16n8k16` multiplies them by the FP16 activations with f32 accumulation (products
    /// exact); the scale is applied per unit in f32. About 1.5 instructions per weight. A warp
    /// covers 32 columns × 4 K-words per step (16-byte loads: `words_per_iteration` = 4); the
    /// batch (≤ 64) is the MMA's N in `ceil(batch / 8)` tiles sharing each decoded A fragment
    /// (`lower/gemv/mma.rs`). `workgroup_size = threads_per_column · columns_per_workgroup`
    /// with `threads_per_column` the K-slicing warps; `k_unit_words` a multiple of 4.
    Mma,
    /// FP16 pair dot products into f32 (gfx906 `v_dot2_f32_f16`, where
    /// [`Arch::has_dot2_f32_f16`]): the FMA path's tiling and per-unit scaling, with each packed
    /// word decoded into four exact FP16 `q − z` pairs as on the tensor-core path (one LOP per
    /// pair after a shift, one packed subtraction) and one dot2 per pair and batch row: about
    /// 2 instructions per weight instead of 5. `nibble_decode` and `int4_scaling` do not apply.
    Dot2,
}

/// Tensor-core INT4: how a packed word becomes the MMA's FP16 `q − z` pairs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MmaDecode {
    /// Nibble pair `(i, i + 4)` = `((word >> 4i) & 0x000F000F) | 0x64006400` (1024 + q), minus
    /// `1024 + z` with one `sub.f16x2`: three shifts, four LOP3 and four HSUB2 per word.
    #[default]
    Shift,
    /// Pairs 0, 2 from `word` and `word >> 8` as above; pairs 1, 3 masked in place with
    /// `0x00F000F0` (1024 + 16q) and fixed by one `fma.f16x2` with 1/16 and `−(64 + z)`: one shift
    /// per word. Exact like `Shift`; one more register per column for `−(64 + z)`.
    Fma,
}

/// How the K slices of a workgroup add their partial sums (the cross-slice reduction in LDS).
/// Both add them in slice order, `((0 + p0) + p1) + …`, so the results are bit-identical.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    /// Every slice stores its sums at once into `[slices][B][C]` f32 per GEMV, one workgroup
    /// barrier, then each point adds the slices' values.
    #[default]
    Slices,
    /// One `[B][C]` array per GEMV: slice 0 stores, then each further slice adds its sums to it
    /// (load, add, store), one workgroup barrier after each slice's step; each point reads one
    /// value. `slices` times less LDS for `slices − 1` more barriers, once per kernel
    /// (`gemv/serial.rs`).
    Serial,
}

/// How the allreduce moves each rank's partial to its peers (DESIGN.md §5.12). Both protocols use
/// only plain stores, loads and release/acquire flag accesses on peer memory — never a
/// read-modify-write.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllreduceProtocol {
    /// Each rank writes its partial into its own slot of a peer-visible scratch array and
    /// release-stores its flag; peers acquire that flag (polling over the link) and read the slot.
    Pull,
    /// Each rank writes its partial into every peer's inbox and release-stores a flag in the
    /// peer's memory; each rank then polls only its local flags and reads its local inbox (cheap
    /// polling over PCIe: the spin never leaves the device).
    Push,
}

/// How a kernel's work is split. Every field is a plain number so that a search over schedules
/// (or a person) can try variants; [`Schedule::default_for`] gives sensible values per target.
///
/// Each workgroup owns a *tile* of `columns_per_workgroup` consecutive output columns (of the
/// GEMV's N, or of the allreduced vector's features) for every batch row; the grid is
/// `ceil(N / columns_per_workgroup)` workgroups. A kernel of several GEMV stages (`stages.rs`)
/// has one schedule for all of them: each stage tiles its own N with it, and the grid is the
/// largest stage's (the defaults take `k_split` and the work unit from what every GEMV's K and
/// group allow).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Lanes per workgroup (a multiple of the wave size, at most the target's maximum).
    pub workgroup_size: u32,
    /// Output columns owned by one workgroup (1 to [`MAX_COLUMNS_PER_LANE`] × `workgroup_size`).
    pub columns_per_workgroup: u32,
    /// Lanes that cooperate on one column. INT4: the number of K slices a workgroup splits K into
    /// (lanes of one slice read adjacent columns: the coalesced pattern of DESIGN.md §2), so
    /// `workgroup_size = threads_per_column · columns_per_workgroup / words_per_iteration`.
    /// FP16 `[N, K]` weights: lanes along K of one row (a multiple of the wave size), so
    /// `workgroup_size = threads_per_column · columns_per_workgroup`. Ignored without a GEMV;
    /// 1 to `workgroup_size` always.
    pub threads_per_column: u32,
    /// Workgroups that split K for one column tile (GPTQ GEMVs; with an allreduce or norm stage
    /// only each tile's last arriver goes on to it). With `k_split > 1` the grid is
    /// `tiles · k_split`; workgroup `w` takes tile `w mod tiles` and K part `w / tiles` (whole
    /// units, `units / k_split` each), writes its f32
    /// sums to a global `splitk_partials` scratch, arrives once on the tile's `splitk_counter`,
    /// and the last arriver of the launch adds the parts in K-part order and runs the epilogue
    /// (see `lower/splitk.rs`). 1 to [`MAX_K_SPLIT`].
    pub k_split: u32,
    /// 32-bit words each lane loads per step, as one vector load. INT4: adjacent packed columns
    /// of one K-row word (1, 2, 4 or 8); FP16: pairs of halves along K (8 halves = 16 bytes for 4).
    pub words_per_iteration: u32,
    /// Independent FP32 accumulators per output and lane, to break FMA dependency chains (1 to
    /// [`MAX_ACCUMULATORS`]).
    pub accumulators: u32,
    /// Allreduce protocol.
    pub protocol: AllreduceProtocol,
    /// INT4: K words (8 K rows each) in one work unit, a divisor of the group's words. Each
    /// group is cut into `group_words / k_unit_words` units and the K slices take units round
    /// robin, so smaller units balance K better across slices (at the cost of one scale/zero
    /// load and one fold per unit). 1 to [`MAX_K_UNIT_WORDS`] whatever the kernel.
    pub k_unit_words: u32,
    /// INT4: how a nibble becomes an f32.
    pub nibble_decode: NibbleDecode,
    /// INT4: where scale and zero point are applied.
    pub int4_scaling: Int4Scaling,
    /// INT4: FMAs or tensor-core MMAs for the dot products.
    pub int4_dot: Int4Dot,
    /// INT4 with MMAs: units whose loads are in flight at once per warp — 1, or 2 to issue the
    /// next unit's loads before this unit's MMAs (software pipelining, twice the registers).
    /// 1 or 2 whatever the kernel.
    pub pipeline_depth: u32,
    /// Packed INT4 weights are loaded as a stream (CUDA: `ld.global.nc.L1::no_allocate.L2::256B`
    /// for 16-byte loads): see [`LoweredKernel::stream_weights`](crate::lowered::LoweredKernel::stream_weights).
    /// Absent in stored schedules: false.
    #[serde(default)]
    pub stream_weights: bool,
    /// INT4 with MMAs: the workgroup's K part of the activations is staged once in LDS, already
    /// packed as MMA B fragments (`batch · K / k_split · 2` bytes), instead of every warp loading
    /// and packing them per unit from global memory. Absent in stored schedules: false.
    #[serde(default)]
    pub x_in_lds: bool,
    /// The packed-FP16 INT4 paths (tensor-core MMA and gfx906 dot2): how a packed word becomes
    /// FP16 `q − z` pairs. Absent in stored schedules: `shift`.
    #[serde(default)]
    pub mma_decode: MmaDecode,
    /// Loads from array parameters address the base pointer plus a 32-bit byte offset
    /// (see [`LoweredKernel::byte_offsets`](crate::lowered::LoweredKernel::byte_offsets)).
    /// Absent in stored schedules: false.
    #[serde(default)]
    pub byte_offsets: bool,
    /// The most workgroups a kernel of several GEMV stages launches (0: no limit, one
    /// workgroup per tile part of its largest stage). A stage without a grid-wide wait of its own
    /// (a GEMV group and its epilogue, up to the grid barrier after it) that has more tile parts
    /// loops over them — workgroup `w` takes parts `w, w + grid, …` — so it keeps its own tiles
    /// and K split on a grid that stays co-resident; a stage with one (an allreduce's flags, an
    /// RMSNorm's barrier) needs a workgroup per tile part, so the grid is at least its
    /// (`stages.rs`). The co-residency fit sets it; a kernel of one stage ignores it.
    #[serde(default)]
    pub max_grid: u32,
    /// A GEMV whose activation is computed from loaded inputs (an RMSNorm, `silu(gate)·up`) gets
    /// it from a stage of its own, materialised once in global memory behind a grid barrier,
    /// instead of every workgroup recomputing it into LDS (a prologue, the default). The
    /// co-residency fit sets it when the prologue's activation does not fit in LDS; absent in
    /// stored schedules: false.
    #[serde(default)]
    pub materialise_prologue: bool,
    /// Before each grid barrier between GEMV stages, every workgroup asks the L2 cache for its
    /// share of the next stage's weights ([`Stmt::PrefetchL2`](crate::lowered::Stmt::PrefetchL2)
    /// over the whole arrays, split evenly over the grid's lanes): the weights do not depend on
    /// the barrier, so their DRAM reads can overlap the wait for the slowest workgroup of the
    /// stage before (`stages.rs`). A hint: sm_90 only (gfx906 has no prefetch instruction; there
    /// the field has no effect); a kernel of one stage ignores it. Absent in stored schedules:
    /// false.
    #[serde(default)]
    pub prefetch_next_stage: bool,
    /// The gfx906 dot2 path with `x_in_lds`: the workgroup's K part of the activations is staged
    /// in phases of this many units (`batch · units · k_unit_words · 16` bytes of LDS), each
    /// behind two workgroup barriers, instead of at once — so a part whose activations exceed
    /// the LDS can still be staged without splitting K over more workgroups. 0: the whole part
    /// at once. A divisor of the part's units (a multiple of the K slices, `threads_per_column`,
    /// gives every slice the same units per phase). Absent in stored schedules: 0.
    #[serde(default)]
    pub x_phase_units: u32,
    /// sm_90: the compiler is asked to keep this many workgroups resident per SM
    /// (`__launch_bounds__(workgroup_size, n)`: it caps the registers per lane at what `n`
    /// workgroups leave, spilling if it must), so a grid that must be co-resident (§5.9) at `n`
    /// per SM is by construction. 0: no request. The co-residency fit sets it with a persistent
    /// grid ([`Schedule::max_grid`]); gfx906 ignores it (its persistent grids stay at the
    /// occupancy any kernel of ≤ 128 VGPRs keeps). At most 32 (sm_90's resident blocks per SM).
    /// Absent in stored schedules: 0.
    #[serde(default)]
    pub min_resident_per_cu: u32,
    /// GEMVs: how the K slices' sums are added (not lowered on the tensor-core path). The
    /// default is [`Reduction::Slices`] unless its LDS does not fit the workgroup (past batch 8).
    /// Absent in stored schedules: `slices`.
    #[serde(default)]
    pub reduction: Reduction,
}

impl Schedule {
    /// Sensible defaults for `kernel` on `arch`: 256-lane workgroups; INT4 tiles of 32 columns:
    /// on sm_90 the tensor-core GEMV ([`Int4Dot::Mma`]: 8 K-slicing warps, 16-byte loads, units
    /// of a whole group, 8 K-words with two weights — the fastest of the H200 sweep in
    /// `bench/results/2026-11-29-h200-int4-sweep/`), on gfx906 the dot2 floor path (see `floor`:
    /// 4 packed columns per lane, 32 K slices, ~136 workgroups at the TP = 4 FFN shapes); FP16 GEMVs with one wave per column and 16-byte loads; elementwise
    /// and allreduce kernels with two columns per lane (or, with INT8 compression, one
    /// quantisation block per wave). Two accumulators at batch 1, one otherwise (the batch rows
    /// already give independent chains), which keeps register use modest. Where that does not
    /// lower for its LDS (past batch 8), the serial reduction, unstaged activations or a narrower
    /// tile (`lds_fit.rs`).
    pub fn default_for(arch: Arch, kernel: &Kernel) -> Self {
        let wave = arch.wave_size();
        let workgroup_size = 256;
        let batch = batch_of(kernel);
        let accumulators = if batch == 1 { 2 } else { 1 };
        let base = Schedule {
            workgroup_size,
            columns_per_workgroup: workgroup_size * 2,
            threads_per_column: 1,
            k_split: 1,
            words_per_iteration: 1,
            accumulators,
            protocol: AllreduceProtocol::Pull,
            k_unit_words: 16,
            nibble_decode: NibbleDecode::Convert,
            int4_scaling: Int4Scaling::PerWeight,
            int4_dot: Int4Dot::Fma,
            pipeline_depth: 1,
            stream_weights: false,
            x_in_lds: false,
            mma_decode: MmaDecode::Shift,
            byte_offsets: false,
            max_grid: 0,
            materialise_prologue: false,
            prefetch_next_stage: false,
            x_phase_units: 0,
            min_resident_per_cu: 0,
            reduction: Reduction::Slices,
        };
        if let Some((k, block)) = q8_gemv(kernel) {
            return q8_default(arch, kernel, k, block, base);
        }
        let s = match gemv_format(kernel) {
            Some(WeightFormat::F16) => Schedule {
                threads_per_column: wave,
                columns_per_workgroup: workgroup_size / wave,
                words_per_iteration: 4,
                ..base
            },
            Some(_) => {
                let group_words = gptq_group_words(kernel).unwrap_or(16);
                let fma = Schedule {
                    columns_per_workgroup: 32,
                    threads_per_column: workgroup_size / 32,
                    k_unit_words: group_words,
                    ..base
                };
                // Two weights (gate and up) hold twice the packed words per unit: on the tensor
                // cores units of 4 at batch > 1 (occupancy 8, the hand-written kernel's).
                let max_unit = if gemv_count(kernel) > 1 { 4 } else { 16 };
                // On the tensor cores at batch 1, units of 8: 12 % faster on the H200 than
                // units of 4 at TP 1 and TP 4, though at 70 registers nvcc holds occupancy 6
                // instead of the hand-written kernel's 8 (`bench/results/2026-11-30-h200-units/`:
                // 40.6 -> 35.9 us at TP 1, 43.8 -> 39.0 at TP 4).
                let mma_unit = |unit: u32| {
                    if gemv_count(kernel) > 1 && batch == 1 && group_words % 8 == 0 {
                        8
                    } else {
                        unit
                    }
                };
                let unit = [16, 8, 4]
                    .into_iter()
                    .find(|u| *u <= max_unit && group_words % u == 0);
                match unit {
                    Some(unit) if arch.has_fp16_mma() && mma_takes(batch, gemv_count(kernel)) => {
                        let mma = Schedule {
                            int4_dot: Int4Dot::Mma,
                            words_per_iteration: 4,
                            columns_per_workgroup: 32,
                            threads_per_column: workgroup_size / 32,
                            k_unit_words: mma_unit(unit),
                            stream_weights: true,
                            ..fma
                        };
                        mma_split(arch, kernel, mma)
                    }
                    _ if arch.has_dot2_f32_f16() && group_words % 4 == 0 => floor(kernel, fma),
                    _ => fma,
                }
            }
            None => match int8_block(kernel) {
                Some(block) if block % wave as usize == 0 => Schedule {
                    columns_per_workgroup: workgroup_size * (block as u32 / wave),
                    ..base
                },
                _ => base,
            },
        };
        super::lds_fit::fit_lds(arch, kernel, s)
    }

    /// The same schedule with some fields replaced, from `field=value` pairs separated by commas,
    /// e.g. `words_per_iteration=4,nibble_decode=magic` (field names as in this struct; enum
    /// values in snake case). Unknown fields and bad values are errors naming the pair.
    pub fn with_overrides(self, spec: &str) -> Result<Self, LowerError> {
        let bad = |what: String| LowerError::Schedule(what);
        let mut v = serde_json::to_value(&self).map_err(|e| bad(e.to_string()))?;
        let table = v.as_object_mut().expect("a struct serialises to an object");
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("`{pair}` is not field=value")))?;
            let (key, value) = (key.trim(), value.trim());
            let Some(slot) = table.get_mut(key) else {
                let fields: Vec<&str> = table.keys().map(String::as_str).collect();
                return Err(bad(format!(
                    "unknown schedule field `{key}` (fields: {})",
                    fields.join(", ")
                )));
            };
            *slot = match (value.parse::<u32>(), value.parse::<bool>()) {
                (Ok(n), _) => serde_json::Value::from(n),
                (_, Ok(b)) => serde_json::Value::from(b),
                _ => serde_json::Value::from(value),
            };
        }
        serde_json::from_value(v).map_err(|e| bad(format!("`{spec}`: {e}")))
    }

    /// The same schedule with another allreduce protocol.
    pub fn with_protocol(self, protocol: AllreduceProtocol) -> Self {
        Schedule { protocol, ..self }
    }

    /// The same schedule with `k_split` K parts per tile for `kernel`, its LDS staging of the
    /// activations re-derived by the defaults' rule (a part's activations, at most
    /// `STAGE_MAX_BYTES`, 40 KiB), so fewer parts do not stage more than a workgroup should hold.
    pub fn with_k_split(self, kernel: &Kernel, k_split: u32) -> Self {
        let s = Schedule { k_split, ..self };
        let x_in_lds = s.x_in_lds && staged_fits(kernel, &s);
        Schedule { x_in_lds, ..s }
    }

    /// Check the parts of the schedule that do not depend on the kernel's ops: every numeric
    /// field within its range (see [`Schedule::ranges`]) and the workgroup a whole number of
    /// waves. The relations between fields that depend on the kernel are checked where the
    /// lowering uses them.
    pub(super) fn check(&self, arch: Arch) -> Result<(), LowerError> {
        let bad = |what: String| Err(LowerError::Schedule(what));
        for (field, value, range, why) in self.ranges(arch) {
            if !range.contains(&value) {
                return bad(format!(
                    "{field} = {value} is outside {}..={} ({why})",
                    range.start(),
                    range.end()
                ));
            }
        }
        let wave = arch.wave_size();
        if self.workgroup_size % wave != 0 {
            return bad(format!(
                "workgroup_size = {} is not a multiple of the wave size {wave}",
                self.workgroup_size
            ));
        }
        if self.min_resident_per_cu > 32 {
            return bad(format!(
                "min_resident_per_cu = {} is more than the 32 workgroups an SM holds",
                self.min_resident_per_cu
            ));
        }
        if !matches!(self.words_per_iteration, 1 | 2 | 4 | 8) {
            return bad(format!(
                "words_per_iteration must be 1, 2, 4 or 8, not {}",
                self.words_per_iteration
            ));
        }
        Ok(())
    }

    /// Every numeric field with its value, the range it must lie in on `arch`, and why. The
    /// upper bounds keep the lowering's work and the generated code bounded: accumulators,
    /// columns per lane and pipeline stages are unrolled into registers and statements.
    pub fn ranges(
        &self,
        arch: Arch,
    ) -> [(&'static str, u32, RangeInclusive<u32>, &'static str); 8] {
        let wg = self.workgroup_size;
        [
            (
                "workgroup_size",
                wg,
                arch.wave_size()..=arch.max_workgroup_size(),
                "whole waves, at most the target's workgroup",
            ),
            (
                "columns_per_workgroup",
                self.columns_per_workgroup,
                1..=MAX_COLUMNS_PER_LANE.saturating_mul(wg.max(1)),
                "at most 16 columns per lane",
            ),
            (
                "threads_per_column",
                self.threads_per_column,
                1..=wg.max(1),
                "at most the workgroup's lanes",
            ),
            (
                "k_split",
                self.k_split,
                1..=MAX_K_SPLIT,
                "workgroups per column tile",
            ),
            (
                "words_per_iteration",
                self.words_per_iteration,
                1..=8,
                "one vector load of 1, 2, 4 or 8 words",
            ),
            (
                "accumulators",
                self.accumulators,
                1..=MAX_ACCUMULATORS,
                "independent chains per output and lane",
            ),
            (
                "k_unit_words",
                self.k_unit_words,
                1..=MAX_K_UNIT_WORDS,
                "K words per INT4 work unit",
            ),
            (
                "pipeline_depth",
                self.pipeline_depth,
                1..=MAX_PIPELINE_DEPTH,
                "units in flight per warp",
            ),
        ]
    }
}

impl Schedule {
    /// The fields the lowering of `kernel` with this schedule does not read: an override of one
    /// of them has no effect (issue 21, defect 13). Without a GEMV only the tile, the workgroup
    /// and the protocol matter; FP16 GEMVs ignore every INT4 field; each INT4 dot-product path
    /// ignores the others' fields; one rank (or no allreduce) ignores the protocol.
    pub fn ignored_fields(&self, kernel: &Kernel) -> Vec<&'static str> {
        const INT4: [&str; 9] = [
            "k_unit_words",
            "nibble_decode",
            "int4_scaling",
            "int4_dot",
            "pipeline_depth",
            "stream_weights",
            "x_in_lds",
            "mma_decode",
            "x_phase_units",
        ];
        let mut out: Vec<&'static str> = match gemv_format(kernel) {
            // The q8 GEMV (`gemv/q8.rs`) tiles like the INT4 paths (columns, threads per column,
            // words per lane, K parts, byte offsets) and has one accumulator chain per output.
            None if q8_gemv(kernel).is_some() => ["accumulators"].into_iter().chain(INT4).collect(),
            None => ["threads_per_column", "words_per_iteration", "accumulators"]
                .into_iter()
                .chain(INT4)
                .collect(),
            Some(WeightFormat::F16) => INT4.to_vec(),
            Some(_) => match self.int4_dot {
                Int4Dot::Fma => vec!["pipeline_depth", "x_in_lds", "mma_decode", "x_phase_units"],
                // The dot2 path stages its activations as FP16 pairs in LDS (`x_in_lds`, in
                // phases with `x_phase_units`) and decodes nibble pairs as `mma_decode` says.
                Int4Dot::Dot2 => vec!["nibble_decode", "int4_scaling", "pipeline_depth"],
                Int4Dot::Mma => vec![
                    "nibble_decode",
                    "int4_scaling",
                    "accumulators",
                    "x_phase_units",
                ],
            },
        };
        let exchange = kernel.tp() > 1
            && kernel
                .ops()
                .any(|(_, op)| matches!(op.kind, OpKind::AllReduce(_)));
        if !exchange {
            out.push("protocol");
        }
        // No GEMV: no cross-slice sums.
        if gemv_format(kernel).is_none() && q8_gemv(kernel).is_none() {
            out.push("reduction");
        }
        if !super::stages::materialises_a_prologue(kernel) {
            out.push("materialise_prologue");
        }
        // A recomputed GEMV prologue writes its whole LDS stage at once.
        if !gemv_prologue(kernel).is_empty()
            && !self.materialise_prologue
            && !out.contains(&"x_phase_units")
        {
            out.push("x_phase_units");
        }
        let stages = super::stages::stage_kernels(kernel, self.materialise_prologue);
        if stages.is_ok_and(|s| s.len() < 2) {
            out.push("max_grid");
            out.push("prefetch_next_stage");
        }
        out
    }
}

/// Most independent accumulators per output and lane ([`Schedule::accumulators`]): each is a
/// register per output column and batch row, so more only spill (the tuner tries 1, 2 and 4).
pub const MAX_ACCUMULATORS: u32 = 16;
/// Most output columns per lane and tile ([`Schedule::columns_per_workgroup`] is at most this
/// many times the workgroup size): a lane's columns are unrolled.
pub const MAX_COLUMNS_PER_LANE: u32 = 16;
/// Most workgroups per column tile ([`Schedule::k_split`]).
pub const MAX_K_SPLIT: u32 = 64;
/// Largest INT4 work unit in K words ([`Schedule::k_unit_words`]): 32768 K rows, more than any
/// group of the model's shapes.
pub const MAX_K_UNIT_WORDS: u32 = 4096;
/// Deepest software pipeline of the tensor-core INT4 path ([`Schedule::pipeline_depth`]).
pub const MAX_PIPELINE_DEPTH: u32 = 2;

/// Workgroups per SM the split-K default aims for where no grid stage bounds the grid
/// ([`mma_split`]): 3.5 × 132 = 462 on the H200. One TP 4 rank of `gemv_int4` alone
/// (5120 → 4352, 136 tiles, `bench/results/2026-12-01-h200-rank-alone/`): 2 parts (272
/// workgroups) 13.06 µs, 4 parts 10.59, 5 parts 9.79, 8 parts 9.76, 10 parts 10.69; at
/// 5120 → 17408 (544 tiles) 2 parts 18.43, 4 parts 20.16. More workgroups than stay resident
/// gain nothing; fewer leave too few bytes in flight.
pub const FILL_PER_SM: f64 = 3.5;

/// The tensor-core GEMV's split and staging (H200 sweep, `bench/results/2026-11-29-h200-splitk/`:
/// 1.2-1.3x faster than 8 K warps of one workgroup per tile at every Qwen shape): 4 K warps per
/// workgroup and several workgroups per tile (split-K). Without a grid stage the parts fill the
/// device: the fewest (at least 2, at most a quarter of the K units: every K warp keeps a unit)
/// that divide the K units and give `tiles · P ≥`
/// [`FILL_PER_SM`] `· SMs` workgroups, or, up to twice that many, the fewest that also give every
/// K warp the same units, but not fewer than an even split of 4 (the warps of a workgroup wait for the slowest at the cross-slice
/// barrier; ncu had barrier stalls at 2.5 cycles per issued instruction). K = 5120 in units of
/// 16 words is 40 units: at 5120 → 17408 (544 tiles) 2 parts (5 units per warp), at one TP 4
/// rank's 5120 → 4352 (136 tiles) 5 parts (2 per warp), at 17408 → 5120 (160 tiles, 136 units)
/// 4 parts. Kernels with an allreduce or norm stage (the fused kernel) take the largest of 4 and
/// 2 that divides the K units: only each tile's last arriver goes on to the exchange and the
/// norm (`splitk.rs`), and all `tiles · P` workgroups must be co-resident (128 lanes each: 8 per
/// SM at the budgets' 1024 lanes; where ranks share a device the co-residency fit lowers P
/// first). The decode is the one-shift [`MmaDecode::Fma`]. The activations of the workgroup's K
/// part are staged in LDS when they take at most [`STAGE_MAX_BYTES`], or when a GEMV prologue
/// computes them (they are in LDS then anyway; a norm in the prologue is no grid stage).
fn mma_split(arch: Arch, kernel: &Kernel, mut s: Schedule) -> Schedule {
    let grid_stage = grid_stage(kernel);
    let tiles = gemv_ns(kernel)
        .max()
        .unwrap_or(0)
        .div_ceil(s.columns_per_workgroup as usize);
    let target = (FILL_PER_SM * arch.compute_units() as f64).ceil() as usize;
    let units_of = |s: &Schedule| common_k(kernel).map_or(0, |k| k / 8 / s.k_unit_words as usize);
    // Without a grid stage, where no part count fills the device at these units and the units
    // do not even allow 4 parts, halve the units (to 4 K-words, one MMA step) until one does: K =
    // 4352 is 34 units of 16 K-words, no count in 3..=8 divides 34, and 2 parts left 320
    // workgroups on 132 SMs; in 68 units of 8, 4 parts give 640 (H200, graphs, 4352 → 5120
    // batch 1, one TP 4 rank's down GEMV alone: 10.1 → 8.2 µs,
    // `bench/results/2026-12-03-h200-k4352-units/`). Where 4 parts divide the units (K = 2048:
    // 16 units, 4 parts of 64 tiles) the units stay: not measured otherwise.
    while !grid_stage
        && filling_parts(units_of(&s), tiles, target).is_none()
        && units_of(&s) % 4 != 0
        && s.k_unit_words >= 8
        && s.k_unit_words % 8 == 0
    {
        s.k_unit_words /= 2;
    }
    let units = units_of(&s);
    let divides = |p: &usize| units > 0 && units % p == 0;
    let even = |p: &usize| divides(p) && (units / p) % MMA_K_WARPS == 0;
    let plain = [4, 2].into_iter().find(divides);
    let filling = || filling_parts(units, tiles, target);
    let mut parts = match (grid_stage, plain, filling()) {
        (true, ..) => plain,
        // An even split of 4 stays (the dual GEMV's 80 units of 8 words at TP 1: its staged
        // activations and 80 registers hold 6 workgroups per SM, and 2 parts would stage twice
        // the bytes).
        (false, Some(p), Some(f)) if even(&p) && p > f => Some(p),
        (false, _, Some(f)) => Some(f),
        (false, p, None) => p,
    };
    // Without a grid stage, where a part's activations do not fit the stage, twice the parts
    // (up to 8) if then they do and staging adds no wave: 17408 → 5120 at batch 8 takes 8 parts
    // of 35 KB staged instead of 4 of 70 KB unstaged (H200, graphs: 25.7 → 21.7 µs; 8 parts
    // unstaged 28.2; `bench/results/2026-12-03-h200-k4352-units/`).
    if let Some(p) = parts.filter(|_| !grid_stage) {
        let with = |p: usize| Schedule {
            k_split: p as u32,
            workgroup_size: 128,
            threads_per_column: MMA_K_WARPS as u32,
            ..s.clone()
        };
        if !staged_fits(kernel, &with(p)) {
            let more = [2 * p, 4 * p].into_iter().find(|&q| {
                q <= 8
                    && divides(&q)
                    && units / q >= MMA_K_WARPS
                    && staged_fits(kernel, &with(q))
                    && staging_adds_no_wave(arch, kernel, &with(q), tiles * q)
            });
            parts = more.or(parts);
        }
    }
    if let Some(parts) = parts {
        s.workgroup_size = 128;
        s.threads_per_column = MMA_K_WARPS as u32;
        s.k_split = parts as u32;
    } else if grid_stage && batch_of(kernel) == 1 {
        // No split: the tile gets 16 K warps instead of 8 (512-lane workgroups, two per SM;
        // `bench/results/2026-11-29-h200-fused-wg512/`: 47.6 → 32.1 µs at TP 1). Batch 1 only:
        // at batch 8 only one 512-lane workgroup fits per SM, fewer than must be co-resident.
        s.workgroup_size = 512;
        s.threads_per_column = 16;
    }
    // The one-shift decode everywhere: in 128-lane workgroups nvcc 13 keeps even the fused
    // kernel without spills (56 registers; in 256-lane ones it had spilled at 48).
    s.mma_decode = MmaDecode::Fma;
    // A kernel with a grid stage keeps its whole grid co-resident anyway (DESIGN.md §5.9).
    let workgroups = tiles * s.k_split.max(1) as usize;
    s.x_in_lds = staged_fits(kernel, &s)
        && stage_and_sums_fit(arch, kernel, &s)
        && (grid_stage || staging_adds_no_wave(arch, kernel, &s, workgroups));
    s
}

/// The K warps of the tensor-core GEMV's 128-lane workgroup (`threads_per_column`).
const MMA_K_WARPS: usize = 4;

/// Whether a K part's staged activations and the cross-warp sums (one array per GEMV, growing
/// with the batch: 32 KiB at batch 64) fit the static LDS of one workgroup together.
fn stage_and_sums_fit(arch: Arch, kernel: &Kernel, s: &Schedule) -> bool {
    let (Some(k), batch) = (gptq_k(kernel), batch_of(kernel)) else {
        return false;
    };
    let staged = batch * k * 2 / s.k_split.max(1) as usize;
    let sums = gemv_count(kernel)
        * s.columns_per_workgroup as usize
        * batch
        * s.threads_per_column as usize
        * 4;
    staged + sums <= arch.max_static_lds_per_workgroup() as usize
}

/// Without a grid stage: enough workgroups to fill the device, the fewest K parts (at least 2)
/// that give `tiles · P ≥ target` workgroups, or, up to twice that, the fewest that give every K
/// warp the same units; every K warp keeps at least one unit per part. `None` when no part count
/// dividing the `units` fills the device.
fn filling_parts(units: usize, tiles: usize, target: usize) -> Option<usize> {
    let divides = |p: &usize| units > 0 && units % p == 0;
    let least = (2..=units / MMA_K_WARPS).find(|p| divides(p) && tiles * p >= target)?;
    (least..=2 * least)
        .find(|p| divides(p) && (units / p) % MMA_K_WARPS == 0)
        .or(Some(least))
}

/// Whether the kernel synchronises its whole grid (an allreduce, or an RMSNorm of GEMV
/// results): then every workgroup must be co-resident (DESIGN.md §5.9).
fn grid_stage(kernel: &Kernel) -> bool {
    let feeds_gemv = gemv_prologue(kernel);
    kernel.ops().any(|(_, op)| match op.kind {
        OpKind::AllReduce(_) => true,
        // A norm in a GEMV prologue is workgroup-local (`prologue.rs`): no grid stage.
        OpKind::RmsNorm(_) => !op.results.iter().any(|v| feeds_gemv.contains(v)),
        _ => false,
    })
}

/// Registers per lane nvcc gives the 128-lane tensor-core INT4 GEMV (56, `ptxas -v`; the
/// budgets in `kernels-gen/budgets.toml`) as warps per SM sub-partition: 65536 registers per SM
/// over 4 sub-partitions over 56 × 32 per warp = 9.
const MMA_WARPS_PER_SUBPARTITION: u32 = 9;

/// Whether staging the activations of a K part in LDS adds no wave: the device holds
/// `workgroups` in as few rounds staged as reading them through L1 (at
/// [`MMA_WARPS_PER_SUBPARTITION`]). Staging saves each warp's activation loads, but where it
/// pushes part of the grid into a wave of its own that tail costs more (H200, CUDA graphs,
/// bench/results/2026-12-03-h200-stage-limit: `gemv_int4` 5120 → 17408 batch 8, 1088
/// workgroups with 45 KB of LDS each, 5 per SM: 2 rounds staged against 1, staged 24.6 µs,
/// unstaged 21.1; at TP 2, 544 workgroups fit staged: staged 14.4, unstaged 16.5); where the grid
/// takes two rounds either way it pays (17408 → 5120 batch 8, 8 parts, 1280 workgroups: staged
/// 21.7, unstaged 28.2; bench/results/2026-12-03-h200-k4352-units). The LDS counted is the part's
/// activations and the cross-warp sums (`columns · batch · K warps · 4` bytes), the lowering's
/// two arrays.
fn staging_adds_no_wave(arch: Arch, kernel: &Kernel, s: &Schedule, workgroups: usize) -> bool {
    let Some(k) = gptq_k(kernel) else {
        return false;
    };
    let batch = batch_of(kernel);
    let staged = batch * k * 2 / s.k_split.max(1) as usize;
    let sums = s.columns_per_workgroup as usize * batch * s.threads_per_column as usize * 4;
    let lds = u32::try_from(staged + sums).unwrap_or(u32::MAX);
    let per_device = |lds| {
        arch.resident_workgroups_per_cu(s.workgroup_size, MMA_WARPS_PER_SUBPARTITION, lds) as usize
            * arch.compute_units() as usize
    };
    let rounds = |lds| workgroups.div_ceil(per_device(lds).max(1));
    rounds(lds) <= rounds(sums as u32)
}

/// The gfx906 INT4 GEMV at the memory floor: [`Int4Dot::Dot2`] with the one-shift decode
/// ([`MmaDecode::Fma`]), 8 lanes × 4 adjacent packed columns (16-byte loads) per K row, 32
/// columns and 32 K slices per 256-lane workgroup, units of 4 K-words (K = 5120: 160 units, 5 per
/// slice; 8 K-words from batch 5, see [`floor_phases`]), one accumulator chain, 32-bit byte offsets, and the activations staged in LDS as
/// FP16 pairs when they take at most 16 KiB (more would cut the workgroups per CU below 4; where
/// they take more, K is split so that a part's fit, see [`floor_split`]; the unstaged path packs
/// them per lane, +0.25 VALU per weight) or when a GEMV prologue computes them
/// (they are in LDS then anyway, and the stage is where the prologue writes them). hipcc's hot loop for `gemv_int4`
/// at TP 4: 1.83 VALU instructions per weight (the FMA path 8.0, dot2 with one word per lane
/// 4.5), 62 VGPRs, occupancy 4; by the MI50 model (`crate::model`) memory-bound at every TP
/// (`bench/results/2026-12-01-gfx906-model/`).
///
/// A kernel with a grid barrier (an RMSNorm) at batch > 4 gets 128-lane workgroups (16 K
/// slices): the cross-slice sums in LDS take `slices · 32 columns · batch · 4` bytes, 32 KiB
/// at batch 8 with 32 slices — one workgroup per CU, fewer than the grid's 160 that must be
/// co-resident on 60 CUs (DESIGN.md §5.9); with 16 slices 16 KiB, three per CU.
///
/// A GEMV group of two weights (gate and up) at batch 1 takes 2 packed columns per lane (8-byte
/// loads, 16 K slices; see the body): occupancy 4 instead of 2, like the hand-written reference,
/// which instead gives the two weights to different waves at 4 columns per lane.
fn floor(kernel: &Kernel, s: Schedule) -> Schedule {
    // A norm in a GEMV prologue is workgroup-local (`prologue.rs`): no grid barrier.
    let feeds_gemv = gemv_prologue(kernel);
    let barrier = kernel.ops().any(|(_, op)| {
        matches!(op.kind, OpKind::RmsNorm(_)) && !op.results.iter().any(|v| feeds_gemv.contains(v))
    });
    let workgroup_size = if barrier && batch_of(kernel) > 4 {
        128
    } else {
        s.workgroup_size
    };
    // Two weights of one activation (gate and up) at batch 1: 2 packed columns per lane instead
    // of 4 (8-byte loads, 16 K slices), so a unit's words in flight stay those of one weight at
    // 4 columns (16, not 32): 62 VGPRs and occupancy 4 instead of 102 and 2, at 1.84 VALU per
    // weight instead of 1.80, memory-bound as before. At batch > 1 the batch rows' products
    // outweigh the words: 2 columns per lane cost more VALU per weight (2.59 → 2.90 at batch 2)
    // and time in the MI50 model.
    let words = if batch_of(kernel) == 1 && widest_gemv_group(kernel) > 1 {
        2
    } else {
        4
    };
    let s = Schedule {
        workgroup_size,
        int4_dot: Int4Dot::Dot2,
        mma_decode: MmaDecode::Fma,
        byte_offsets: true,
        words_per_iteration: words,
        columns_per_workgroup: 32,
        threads_per_column: workgroup_size * words / 32,
        k_unit_words: 4,
        accumulators: 1,
        ..s
    };
    let staged = batch_of(kernel) * gptq_k(kernel).unwrap_or(usize::MAX / 4) * 2;
    if staged <= FLOOR_STAGE_BYTES || !gemv_prologue(kernel).is_empty() {
        return Schedule {
            x_in_lds: true,
            ..s
        };
    }
    floor_split(kernel, staged, s)
}

/// The most LDS the gfx906 floor path's staged activations may take: more would cut the
/// 256-lane workgroups per CU below 4 (64 KiB of LDS per CU, the cross-slice sums beside).
const FLOOR_STAGE_BYTES: usize = 16 * 1024;

/// The floor path where the activations do not fit the stage ([`FLOOR_STAGE_BYTES`]) at batch 1:
/// K split into the fewest parts (2 or 4) whose activations fit, each tile `P` times wider with
/// the K slices of the workgroup cut by `P`, so the grid keeps its workgroups (`tiles · P` with
/// `P` times fewer tiles: 160 for the fused kernel at N = 5120, all co-resident at occupancy 4 on
/// 60 CUs, DESIGN.md §5.9). Only each tile's last arriver goes on to the exchange and the norm
/// (`splitk.rs`). The fused kernel at TP 1 (K = 17408, 34.8 KB of activations) takes 4 parts of
/// 128 columns, at TP 2 (17.4 KB) 2 parts of 64 columns: hipcc's hot loop 1.83 / 1.85 VALU per
/// weight, 62 VGPRs, occupancy 4, where the unstaged path (per-lane packing) took 2.09 at 65
/// VGPRs, occupancy 3 (`bench/results/2026-12-03-gfx906-fused-splitk/`). At batch > 1 the
/// stage is filled in phases instead ([`floor_phases`]); without a fitting split or phase the
/// activations are packed per lane.
fn floor_split(kernel: &Kernel, staged: usize, s: Schedule) -> Schedule {
    let units = common_k(kernel).map_or(0, |k| k / 8 / s.k_unit_words as usize);
    let batch = batch_of(kernel);
    if batch > 1 {
        let paired = widest_gemv_group(kernel) > 1;
        let n = gemv_ns(kernel).max().unwrap_or(0);
        let k_words = common_k(kernel).map_or(0, |k| k / 8);
        let group_words = gptq_group_words(kernel).unwrap_or(4);
        if let Some(s) = floor_phases(k_words, group_words, n, batch, paired, s.clone()) {
            return s;
        }
        if batch > 2 {
            return Schedule {
                x_in_lds: false,
                ..s
            };
        }
    }
    let lanes_per_row = |p: u32| s.columns_per_workgroup * p / s.words_per_iteration;
    let parts = [2u32, 4].into_iter().find(|&p| {
        staged / p as usize <= FLOOR_STAGE_BYTES
            && units % p as usize == 0
            && lanes_per_row(p) <= s.workgroup_size
    });
    match parts {
        Some(p) => Schedule {
            k_split: p,
            columns_per_workgroup: s.columns_per_workgroup * p,
            threads_per_column: s.workgroup_size / lanes_per_row(p),
            x_in_lds: true,
            ..s
        },
        _ => Schedule {
            x_in_lds: false,
            ..s
        },
    }
}

/// The floor path at batch > 1 where the activations do not fit the stage: the whole K staged
/// in phases (`Schedule::x_phase_units`) of one unit per K slice, so no K split (no partials,
/// and the fused kernel's grid stays co-resident). The batch rows' accumulators set the packed
/// columns per lane: 4 at batch 2 in 32-column tiles (32 K slices) and at batch 3–4 in
/// 64-column tiles (16 K slices; 124 VGPRs, occupancy 2 as the reference: 3.48 VALU per weight
/// where 2 columns took 3.61), 2 from batch 5 in 64-column tiles (8 K slices); two weights per
/// lane (gate and up) take half as many words.
/// 256-lane workgroups, 128 where the K slices of 256 do not divide the units (K = 2176, the
/// fused kernel at TP 8: 68 units); 32-column tiles where 64 would leave CUs without a
/// workgroup.
///
/// From batch 5 the units are 8 K-words instead of 4 where the group allows and the same K
/// slices divide them (never at the cost of lanes: the fused kernel at TP 4 and 8 keeps units
/// of 4). At 2 packed columns per lane (1 with two weights) a unit's scale, zero-point and
/// activation-address work and the phase's loop control are shared by half as many weights as
/// the reference's 4 columns share, and a unit of 8 shares them by twice as many; each wave
/// also has twice the weight bytes in flight. hipcc's hot loop at batch 8 (MI50 model,
/// `bench/results/2026-12-03-gfx906-batch8/`): `gemv_int4` 5.73 → 5.58 VALU per weight in
/// 64-column tiles, 5.97 → 5.59 in 32-column tiles (TP 8: 22.4 → 21.7 µs, reference 21.9;
/// 11.3 → 20.4 KB in flight per CU), the two-weight GEMV 5.77 → 5.48 at 112 VGPRs, occupancy
/// 2 (TP 1: 193.7 → 184.5 µs, reference 191.2). Against the hand-written references (which
/// stage in phases too, and whose hot loops then hold their staging as these do) the model puts
/// all 64 (kernel, TP, batch) rows of `tests/tests/gfx906_model.rs` within 1 %; the old default
/// (the activations packed per lane) took 7.66 VALU per weight at batch 8 at 135 VGPRs,
/// `gemv_int4` now 5.58 at 84. `None` when no slice count divides the units.
fn floor_phases(
    k_words: usize,
    group_words: u32,
    n: usize,
    batch: usize,
    paired: bool,
    s: Schedule,
) -> Option<Schedule> {
    // Packed columns per lane and tile columns, in order of preference: a later one where no
    // slice count of an earlier one divides the units (the fused kernel at TP 8, batch 4: 68
    // units, 16 or 8 slices of 4 columns per lane do not divide them, 8 or 4 of 2 do).
    let shapes: &[(u32, u32)] = match (batch, paired) {
        (2, false) => &[(4, 32)],
        (2, true) => &[(2, 32)],
        (3 | 4, false) => &[(4, 64), (2, 64)],
        (_, true) if batch > 4 => &[(1, 64)],
        _ => &[(2, 64)],
    };
    let unit_sizes: &[u32] = if batch > 4 && group_words % 8 == 0 {
        &[8, 4]
    } else {
        &[4]
    };
    let (words, columns, slices, unit) = shapes.iter().find_map(|&(words, columns)| {
        // 64-column tiles only where they still give every CU a workgroup (the model does not
        // see idle CUs): `gemv_int4` at TP 8 (N = 2176) keeps 32-column tiles, 68 workgroups.
        let columns = if n / columns as usize >= Arch::Gfx906.compute_units() as usize {
            columns
        } else {
            32
        };
        let lanes_per_row = columns / words;
        [256 / lanes_per_row, 128 / lanes_per_row]
            .into_iter()
            .filter(|&p| p > 0)
            .find_map(|p| {
                unit_sizes
                    .iter()
                    .find(|&&u| k_words / u as usize % p as usize == 0)
                    .map(|&u| (words, columns, p, u))
            })
    })?;
    let lanes_per_row = columns / words;
    Some(Schedule {
        workgroup_size: lanes_per_row * slices,
        columns_per_workgroup: columns,
        words_per_iteration: words,
        threads_per_column: slices,
        k_unit_words: unit,
        x_in_lds: true,
        x_phase_units: slices,
        k_split: 1,
        ..s
    })
}

/// Whether the FP16 activations of one K part (`batch · K / k_split`) take at most
/// [`STAGE_MAX_BYTES`] of LDS, or the kernel has a GEMV prologue: its activation lives in LDS
/// anyway, and the stage (one K part) is the smallest place for it.
fn staged_fits(kernel: &Kernel, s: &Schedule) -> bool {
    let Some(k) = gptq_k(kernel) else {
        return false;
    };
    // A recomputed prologue lives in LDS (the lowering refuses it when it does not fit); a
    // materialised one is read from global scratch like a loaded activation.
    if !gemv_prologue(kernel).is_empty() && !s.materialise_prologue {
        return true;
    }
    let staged = batch_of(kernel).saturating_mul(k).saturating_mul(2) / s.k_split.max(1) as usize;
    staged <= STAGE_MAX_BYTES
}

/// The most LDS one workgroup's staged activations may take: sm_90's 48 KiB of static shared
/// memory per workgroup less room for the cross-warp sums. Whether staging pays below it depends
/// on the grid: see [`staging_adds_no_wave`].
const STAGE_MAX_BYTES: usize = 40 * 1024;

/// The values computed for a GEMV activation that is not a loaded input (a GEMV prologue, see
/// `plan.rs`): the activation and everything it is computed from except loads. Empty when every
/// GEMV reads a loaded input.
fn gemv_prologue(kernel: &Kernel) -> HashSet<Value> {
    let mut seen = HashSet::new();
    // An activation computed from GEMV or allreduce results is no prologue: it is materialised
    // between GEMV stages (`stages.rs`).
    let sync = super::stages::synchronised(kernel);
    let mut stack: Vec<Value> = kernel
        .ops()
        .filter_map(|(_, op)| match &op.kind {
            OpKind::Gemv(g) if !sync.contains(&g.x) => Some(g.x),
            _ => None,
        })
        .collect();
    while let Some(v) = stack.pop() {
        let Some(def) = kernel.value_def(v) else {
            continue;
        };
        let Some(op) = kernel.op(def.op) else {
            continue;
        };
        if matches!(op.kind, OpKind::Load(_)) || !seen.insert(v) {
            continue;
        }
        stack.extend(op.kind.args());
    }
    seen
}

/// Bytes, per rank, of the loaded inputs a GEMV prologue is computed from (0 without one):
/// what every workgroup re-reads when the prologue is recomputed.
pub fn prologue_input_bytes(kernel: &Kernel) -> usize {
    let prologue = gemv_prologue(kernel);
    let mut loaded = HashSet::new();
    for v in &prologue {
        let Some(op) = kernel.value_def(*v).and_then(|d| kernel.op(d.op)) else {
            continue;
        };
        for a in op.kind.args() {
            let load = kernel.value_def(a).and_then(|d| kernel.op(d.op));
            if let Some(OpKind::Load(l)) = load.map(|o| &o.kind) {
                loaded.insert(l.buffer);
            }
        }
    }
    loaded
        .into_iter()
        .filter_map(|b| kernel.buffer(b))
        .map(|d| d.local_type().bytes())
        .sum()
}

/// The N (output columns) of every GEMV.
fn gemv_ns(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
    kernel.ops().filter_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.n),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// K of the kernel's GPTQ GEMV.
fn gptq_k(kernel: &Kernel) -> Option<usize> {
    gemv_ks(kernel).max()
}

/// The K of every GEMV (several GEMV stages have several).
fn gemv_ks(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
    kernel.ops().filter_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.k),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// The largest K that divides every GEMV's K: the parts of one `k_split` must divide every
/// GEMV stage's K units (one schedule serves all stages, `stages.rs`).
fn common_k(kernel: &Kernel) -> Option<usize> {
    gemv_ks(kernel).reduce(gcd)
}

/// Waves per SIMD that the co-residency fit of a kernel with a grid barrier assumes the real
/// compiler will give `kernel` on `arch` (at most; the budgets' workgroups per CU/SM bound it
/// too). On gfx906 the INT4 GEMV's registers grow with the batch rows; hipcc (ROCm 5.2) compiled
/// a pre-norm GEMV 5120 → 17408 and silu·mul before the down GEMV + allreduce at TP 1 and 4 to
/// 75–85 VGPRs at batch 2 (3 waves per SIMD), 96–104 at batch 4 (2), 106–126 at batches 5 and
/// 6 (2) and 135–251 at batches 7 and 8 (1): 1 wave above batch 4, 2 at batches 3 and 4, 3 at
/// batch 2; a GEMV group of two weights (gate and up, one activation) 175–255 VGPRs from batch 2
/// (1). Grids fitted at the budgets' occupancy instead were refused by `check` at the
/// compiled one (issue 34: 160 workgroups of 128 lanes at batch 8, 120 fit). Batch 1 and sm_90:
/// the target's most (the budgets' occupancy decides).
pub fn assumed_waves_per_simd(kernel: &Kernel, arch: Arch) -> u32 {
    match (arch, batch_of(kernel)) {
        (_, 0..=1) => arch.max_waves_per_simd(),
        (Arch::Gfx906, _) if widest_gemv_group(kernel) > 1 => 1,
        (Arch::Gfx906, 2) => 3,
        (Arch::Gfx906, 3..=4) => 2,
        (Arch::Gfx906, 5..) => 1,
        _ => arch.max_waves_per_simd(),
    }
}

/// Batch rows of the kernel's activations (1 when it has none).
fn batch_of(kernel: &Kernel) -> usize {
    kernel
        .buffers()
        .find_map(|(_, d)| match &d.ty {
            BufferType::Tensor(t) if t.shape.len() == 2 => Some(t.shape[0]),
            _ => None,
        })
        .unwrap_or(1)
}

fn gemv_format(kernel: &Kernel) -> Option<WeightFormat> {
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.format),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// GEMVs in the kernel (two for gate/up).
fn gemv_count(kernel: &Kernel) -> usize {
    kernel
        .ops()
        .filter(|(_, op)| matches!(op.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)))
        .count()
}

/// The most GEMVs that share one activation (a GEMV group, lowered together: 2 for gate/up).
fn widest_gemv_group(kernel: &Kernel) -> usize {
    let mut per_x: Vec<(Value, usize)> = Vec::new();
    for (_, op) in kernel.ops() {
        if let OpKind::Gemv(g) = &op.kind {
            match per_x.iter_mut().find(|(x, _)| *x == g.x) {
                Some((_, n)) => *n += 1,
                None => per_x.push((g.x, 1)),
            }
        }
    }
    per_x.into_iter().map(|(_, n)| n).max().unwrap_or(0)
}

/// K words (8 rows each) in one GPTQ group of the kernel's GEMV: the default work unit. With
/// several GEMV stages, the largest that divides every GEMV's group (per-channel groups differ
/// with K).
fn gptq_group_words(kernel: &Kernel) -> Option<u32> {
    kernel
        .ops()
        .filter_map(|(_, op)| match &op.kind {
            OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
                BufferType::Weight(w) => match w.format {
                    WeightFormat::Gptq(l) => Some(l.group.rows(w.k) / 8),
                    _ => None,
                },
                BufferType::Tensor(_) => None,
            },
            _ => None,
        })
        .reduce(gcd)
        .and_then(|w| u32::try_from(w).ok())
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The K and activation block of the kernel's `gemv_q8`, if it has one.
fn q8_gemv(kernel: &Kernel) -> Option<(usize, usize)> {
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::GemvQ8(g) => match kernel.buffer(g.weight)?.local_type() {
            BufferType::Weight(w) => Some((w.k, g.block)),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// The q8 GEMV (`gemv_q8`, `gemv/q8.rs`) on either target: one column per lane and 256 per
/// workgroup, so that the workgroup's quantisation of its K part (`B·K/k_split` codes, every
/// workgroup) is small next to its `256·K/k_split` weights; K parts (a power of two dividing
/// the groups) until the stage fits the target's static LDS next to the sums and the grid has
/// at least 4 workgroups per CU (SM), so that the last round of a grid of few large workgroups
/// does not leave most CUs idle (at 5120 → 17408, 68 tiles: 4 parts, 272 workgroups; the split
/// adds `parts · B · N · 4` bytes of partials, 5 % of the weights' bytes at batch 8).
fn q8_default(arch: Arch, kernel: &Kernel, k: usize, block: usize, base: Schedule) -> Schedule {
    let batch = batch_of(kernel);
    let group_words = gptq_group_words_any(kernel).unwrap_or(16);
    let groups = k / (group_words as usize * 8).max(1);
    let cols = base.workgroup_size as usize;
    let max = arch.max_static_lds_per_workgroup() as usize;
    let tiles = q8_ns(kernel).max().unwrap_or(0).div_ceil(cols);
    let fill = 4 * arch.compute_units() as usize;
    let fits = |p: u32| {
        groups % p as usize == 0
            && super::gemv::q8_lds_bytes(
                batch,
                k / p as usize,
                (block, group_words as usize * 8),
                1,
                cols,
            ) <= max
    };
    let parts = [1u32, 2, 4, 8, 16];
    let k_split = parts
        .into_iter()
        .find(|&p| fits(p) && tiles * p as usize >= fill)
        .or_else(|| parts.into_iter().rev().find(|&p| fits(p)))
        .unwrap_or(1);
    Schedule {
        columns_per_workgroup: cols as u32,
        threads_per_column: 1,
        words_per_iteration: 1,
        accumulators: 1,
        k_unit_words: group_words,
        k_split,
        byte_offsets: true,
        ..base
    }
}

/// The N of every `gemv_q8`.
fn q8_ns(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
    kernel.ops().filter_map(|(_, op)| match &op.kind {
        OpKind::GemvQ8(g) => match kernel.buffer(g.weight)?.local_type() {
            BufferType::Weight(w) => Some(w.n),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// [`gptq_group_words`] of the GEMVs and the q8 GEMVs.
fn gptq_group_words_any(kernel: &Kernel) -> Option<u32> {
    kernel
        .ops()
        .filter_map(|(_, op)| {
            let w = match &op.kind {
                OpKind::Gemv(g) => g.weight,
                OpKind::GemvQ8(g) => g.weight,
                _ => return None,
            };
            match kernel.buffer(w)?.local_type() {
                BufferType::Weight(w) => match w.format {
                    WeightFormat::Gptq(l) => Some(l.group.rows(w.k) / 8),
                    _ => None,
                },
                BufferType::Tensor(_) => None,
            }
        })
        .reduce(gcd)
        .and_then(|w| u32::try_from(w).ok())
}

fn int8_block(kernel: &Kernel) -> Option<usize> {
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::AllReduce(a) => match a.compression {
            Compression::Int8 { block } => Some(block),
            Compression::None => None,
        },
        _ => None,
    })
}
