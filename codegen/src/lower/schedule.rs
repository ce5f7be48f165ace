//! Schedules: how one kernel's work is split over workgroups, lanes and registers.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use wavefuse_ir::{BufferType, Kernel, OpKind, Value, WeightFormat};

use crate::target::Arch;

use super::LowerError;

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

/// Tensor-core INT4: where a group's scale `s` is applied.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MmaScale {
    /// To the f32 sums of each work unit: the unit's MMAs accumulate the exact `(q − z)·x` into
    /// unit sums, then `total = fma(s, unit sum, total)`. Exact up to the f32 accumulation; per
    /// lane 8 unit sums and 8 totals per weight and N tile of 8 batch rows (128 f32 registers at
    /// batch 64).
    #[default]
    Unit,
    /// To the decoded weights, in FP16: one `fma.f16x2` per A register makes `(q − z)·s`
    /// (rounded once to FP16: 2⁻¹¹ relative per weight, a few 1e-4 in L2 over a dot product;
    /// Marlin's dequantisation rounds the same way), and the MMAs accumulate straight into the
    /// totals: half the f32 registers and no per-unit FMAs, which past batch 8 (several N tiles)
    /// is what limits the tile. A scale below FP16's normal range (6.1e-5) would lose bits:
    /// GPTQ scales are far above it.
    Weight,
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
    /// Tensor-core INT4: where the group scale is applied ([`MmaScale`]). Absent in stored
    /// schedules: `unit`.
    #[serde(default)]
    pub mma_scale: MmaScale,
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
    /// sm_90, a kernel that opens with the stream-order prologue
    /// ([`LoweredKernel::stream_order_prologue`](crate::lowered::LoweredKernel::stream_order_prologue):
    /// its workgroups do not wait for each other): before `griddepcontrol.wait` every workgroup
    /// asks the L2 cache for its share of the kernel's packed GEMV weights
    /// ([`Stmt::PrefetchL2`](crate::lowered::Stmt::PrefetchL2) over the `qweight`, `scales`
    /// and `qzeros` arrays, split evenly over the grid's lanes, at most
    /// [`PREFETCH_BEFORE_WAIT_BYTES`](crate::lower::PREFETCH_BEFORE_WAIT_BYTES)), and it lets
    /// its stream successor be scheduled right after that wait instead of at its end. Launched
    /// as a programmatic dependent, a kernel's workgroups that find a free SM slot while their
    /// predecessor streams its own weights fetch theirs meanwhile: a hint that reads no value
    /// and orders nothing (no invariant of §5 rests on it; the wait still comes before any
    /// access that reads a value). Launched in stream order it only reads ahead. gfx906 has
    /// neither instruction: no effect there; nor on a kernel without the prologue. Absent in
    /// stored schedules: false.
    #[serde(default)]
    pub prefetch_before_wait: bool,
    /// The gfx906 dot2 and the sm_90 tensor-core paths with `x_in_lds`: the workgroup's K part
    /// of the activations is staged in phases of this many units (`batch · units ·
    /// k_unit_words · 16` bytes of LDS), each behind two workgroup barriers, instead of at once
    /// — so a part whose activations exceed the LDS can still be staged without splitting K
    /// over more workgroups, and the column warps of a wide tile share them (issue 40). 0: the
    /// whole part at once. A divisor of the part's units (dot2: a multiple of the K slices,
    /// `threads_per_column`, gives every slice the same units per phase; tensor cores: a multiple
    /// of the K warps, exactly one unit per K warp at pipeline depth 2 or with `async_stages`).
    /// On the tensor cores, where the stage and the cross-slice sums do not fit the static LDS
    /// side by side, the stage lives in the first weight's sums (one more workgroup barrier
    /// after the phases). Absent in stored schedules: 0.
    #[serde(default)]
    pub x_phase_units: u32,
    /// Tensor-core INT4 (sm_90): each warp copies the packed weights of its next units into a
    /// ring of this many unit buffers in LDS with asynchronous copies
    /// ([`Stmt::AsyncCopy`](crate::lowered::Stmt::AsyncCopy), `cp.async`), `async_stages − 1`
    /// units ahead of the one it computes, instead of loading them into registers (issue 40:
    /// meant as bytes in flight that cost no registers; measured slower than register loads at
    /// every batch on an H100, and not lighter on registers, so no default takes it). Every lane
    /// reads back only the bytes it copied itself, so the lane's own wait orders them (§5.2);
    /// where the words share the cross-slice sums' LDS a workgroup barrier precedes the sums.
    /// With `x_phase_units` (one unit per K warp) the phased activation stage becomes a ring of
    /// this many phase buffers too: each phase's activations are loaded into registers with
    /// its weights' group and stored in B-fragment order a phase later; one wait and one
    /// workgroup barrier per phase. 0: register loads. 2 to [`MAX_ASYNC_STAGES`]; `pipeline_depth` 1. Absent in stored
    /// schedules: 0.
    #[serde(default)]
    pub async_stages: u32,
    /// Tensor-core INT4 (sm_90), register loads (`async_stages` 0): with each unit's loads a
    /// warp asks the L2 cache for the packed words, scales and zero words of its unit this many
    /// of its units ahead (`prefetch.global.L2`, [`Stmt::PrefetchL2`](crate::lowered::Stmt::PrefetchL2):
    /// lane `l` below the unit's K-words the line of K-word `l`, 128 bytes of the warp's 32
    /// columns; lane 0 the scales' and zero words' lines), within the workgroup's K part, so
    /// the DRAM latency of unit `u + D` overlaps units `u .. u + D` and the loads of a unit
    /// find it in L2: bytes in flight that cost no registers and no LDS (issue 40: the batch
    /// 16–64 GEMV was measured bound by its bytes in flight). Measured slower than without it
    /// at every row of the two TP 1 shapes on an H100 and 1–5 % faster at some TP 4 rank rows
    /// (`bench/results/2026-12-07-gpu-l2-prefetch/`): no default takes it, the tuner tries 4. A
    /// hint: it reads no value and orders nothing. 0: none. At most [`MAX_L2_PREFETCH_UNITS`]. gfx906 has no prefetch
    /// instruction: no effect there. Absent in stored schedules: 0.
    #[serde(default)]
    pub l2_prefetch_units: u32,
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
    /// The gfx906 dot2 path at large batches: the batch rows in register tiles of this many
    /// rows, one tile after the other (`gemv.rs` `gptq_rows`): each tile stages its rows'
    /// activations, runs the K loop with one tile's accumulators and adds its sums to the
    /// cross-slice reduction, so the registers are those of a batch of `batch_tile` rows (hipcc:
    /// 100-123 VGPRs at 16, the default past batch 16; 84-119 at 8: at least 2 waves per SIMD)
    /// instead of growing with the batch (214 VGPRs, one wave per SIMD, at batch 32). The weights of the workgroup's K part are loaded and decoded
    /// once per tile (`ceil(batch / batch_tile)` times; each decoded pair still feeds a dot2 per
    /// row of the tile). A last tile of `batch mod batch_tile` rows where it does not divide.
    /// The sm_90 tensor-core path takes it too (`gemv/mma.rs`): a multiple of 8 (whole N tiles),
    /// activations unstaged (`x_in_lds` false, no phases, no ring); each pass its rows' MMAs
    /// and accumulators, its sums into the cross-slice reduction's rows, one workgroup barrier
    /// after the last (issue 40; measured on an H100 level to 17 % faster than the batch-64
    /// defaults at two shapes and slower at two, `bench/results/2026-12-07-gpu-mma-batch-tiles/`:
    /// no default takes it, the tuner tries it). 0 (or at least the batch): one tile of all
    /// rows. Not lowered on the FMA path or with a GEMV prologue. Absent in stored schedules: 0.
    #[serde(default)]
    pub batch_tile: u32,
    /// A GPTQ GEMV alone (no allreduce, RMSNorm or GEMV prologue; it replaces `k_split`, which
    /// is then ignored): a persistent
    /// grid of this many workgroups that splits the work evenly (issue 40). The GEMV's
    /// `tiles · U / g` (column tile, K granule) pairs, tile by tile, are cut into as many
    /// consecutive stripes of equal length (±1 granule; a granule is `g` = `x_phase_units`
    /// units where the activations are staged in phases, else one unit); workgroup `w` takes
    /// stripe `w`, one segment per tile it touches, each summed as a K part of that tile:
    /// partial sums to global memory, an arrival on the tile's counter, and the tile's last
    /// arriver adds the contributions in stripe order and runs the epilogue (`splitk.rs`). Where
    /// `tiles` is not a multiple of the SMs' resident workgroups, a grid of whole tiles leaves
    /// some SMs a workgroup more than others; a stripe grid of `SMs · resident` workgroups
    /// does not. 0: one workgroup per tile and K part. At most [`MAX_STRIPE_WORKGROUPS`].
    /// Absent in stored schedules: 0.
    #[serde(default)]
    pub stripe_workgroups: u32,
}

impl Schedule {
    /// Sensible defaults for `kernel` on `arch`: 256-lane workgroups; INT4 tiles of 32 columns:
    /// on sm_90 the tensor-core GEMV ([`Int4Dot::Mma`]: 8 K-slicing warps, 16-byte loads, units
    /// of a whole group, 8 K-words with two weights — the fastest of the H200 sweep in
    /// `bench/results/2026-11-29-h200-int4-sweep/`), on gfx906 the dot2 floor path (see `floor` in `defaults.rs`:
    /// 4 packed columns per lane, 32 K slices, ~136 workgroups at the TP = 4 FFN shapes); FP16 GEMVs with one wave per column and 16-byte loads; elementwise
    /// and allreduce kernels with two columns per lane (or, with INT8 compression, one
    /// quantisation block per wave). Two accumulators at batch 1, one otherwise (the batch rows
    /// already give independent chains), which keeps register use modest.
    ///
    /// Decided in [`defaults`](super::defaults), with the rest of the default: the protocol for
    /// the placement and the GEMV prologue's cost rule
    /// ([`default_schedule`](super::defaults::default_schedule)).
    pub fn default_for(arch: Arch, kernel: &Kernel) -> Self {
        super::defaults::target_fitted(arch, kernel)
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
        let x_in_lds = s.x_in_lds && super::defaults::staged_fits(kernel, &s);
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
        if self.async_stages == 1 || self.async_stages > MAX_ASYNC_STAGES {
            return bad(format!(
                "async_stages = {} is neither 0 (register loads) nor 2..={MAX_ASYNC_STAGES} (unit buffers of the ring)",
                self.async_stages
            ));
        }
        if self.l2_prefetch_units > MAX_L2_PREFETCH_UNITS {
            return bad(format!(
                "l2_prefetch_units = {} is more than {MAX_L2_PREFETCH_UNITS} units ahead",
                self.l2_prefetch_units
            ));
        }
        if self.stripe_workgroups > MAX_STRIPE_WORKGROUPS {
            return bad(format!(
                "stripe_workgroups = {} is more than {MAX_STRIPE_WORKGROUPS} workgroups",
                self.stripe_workgroups
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
        const INT4: [&str; 14] = [
            "k_unit_words",
            "nibble_decode",
            "int4_scaling",
            "int4_dot",
            "pipeline_depth",
            "stream_weights",
            "x_in_lds",
            "mma_decode",
            "mma_scale",
            "x_phase_units",
            "batch_tile",
            "async_stages",
            "l2_prefetch_units",
            "stripe_workgroups",
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
                Int4Dot::Fma => vec![
                    "pipeline_depth",
                    "x_in_lds",
                    "mma_decode",
                    "mma_scale",
                    "x_phase_units",
                    "batch_tile",
                    "async_stages",
                    "l2_prefetch_units",
                ],
                // The dot2 path stages its activations as FP16 pairs in LDS (`x_in_lds`, in
                // phases with `x_phase_units`) and decodes nibble pairs as `mma_decode` says.
                Int4Dot::Dot2 => vec![
                    "nibble_decode",
                    "int4_scaling",
                    "pipeline_depth",
                    "mma_scale",
                    "async_stages",
                    "l2_prefetch_units",
                ],
                Int4Dot::Mma => vec!["nibble_decode", "int4_scaling", "accumulators"],
            },
        };
        // The stripe splits K itself.
        if self.stripe_workgroups > 0
            && !out.contains(&"stripe_workgroups")
            && matches!(gemv_format(kernel), Some(WeightFormat::Gptq(_)))
        {
            out.push("k_split");
        }
        // One batch row: nothing to tile.
        if batch_of(kernel) == 1 && !out.contains(&"batch_tile") {
            out.push("batch_tile");
        }
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
        // A recomputed GEMV prologue writes its whole LDS stage at once; unstaged activations
        // have no stage to fill in phases.
        if ((!gemv_prologue(kernel).is_empty() && !self.materialise_prologue) || !self.x_in_lds)
            && !out.contains(&"x_phase_units")
        {
            out.push("x_phase_units");
        }
        let stages = super::stages::stage_kernels(kernel, self.materialise_prologue);
        let single = stages.is_ok_and(|s| s.len() < 2);
        if single {
            out.push("max_grid");
            out.push("prefetch_next_stage");
        }
        // The stream-order prologue: one stage, no exchange (a kernel that waits across
        // workgroups has none), packed weights to prefetch.
        if !single || exchange || !matches!(gemv_format(kernel), Some(f) if f != WeightFormat::F16)
        {
            out.push("prefetch_before_wait");
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
/// Most workgroups of a stripe grid ([`Schedule::stripe_workgroups`]): 32 per SM of a
/// 132-SM H100, more than any SM holds.
pub const MAX_STRIPE_WORKGROUPS: u32 = 4224;
/// Deepest software pipeline of the tensor-core INT4 path ([`Schedule::pipeline_depth`]).
pub const MAX_PIPELINE_DEPTH: u32 = 2;
/// Most unit buffers of the asynchronous weight ring ([`Schedule::async_stages`]).
pub const MAX_ASYNC_STAGES: u32 = 8;
/// Furthest L2 prefetch of the tensor-core INT4 path, in a warp's units
/// ([`Schedule::l2_prefetch_units`]).
pub const MAX_L2_PREFETCH_UNITS: u32 = 32;

/// The values computed for a GEMV activation that is not a loaded input (a GEMV prologue, see
/// `plan.rs`): the activation and everything it is computed from except loads. Empty when every
/// GEMV reads a loaded input.
pub(super) fn gemv_prologue(kernel: &Kernel) -> HashSet<Value> {
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
pub(super) fn gemv_ns(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
    kernel.ops().filter_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.n),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// K of the kernel's GPTQ GEMV.
pub(super) fn gptq_k(kernel: &Kernel) -> Option<usize> {
    gemv_ks(kernel).max()
}

/// The K of every GEMV (several GEMV stages have several).
pub(super) fn gemv_ks(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
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
pub(super) fn common_k(kernel: &Kernel) -> Option<usize> {
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
/// The batch rows of `kernel`: the rows of its first 2-D tensor (1 without one).
pub fn batch_of(kernel: &Kernel) -> usize {
    kernel
        .buffers()
        .find_map(|(_, d)| match &d.ty {
            BufferType::Tensor(t) if t.shape.len() == 2 => Some(t.shape[0]),
            _ => None,
        })
        .unwrap_or(1)
}

pub(super) fn gemv_format(kernel: &Kernel) -> Option<WeightFormat> {
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &kernel.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.format),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

/// GEMVs in the kernel (two for gate/up).
pub(super) fn gemv_count(kernel: &Kernel) -> usize {
    kernel
        .ops()
        .filter(|(_, op)| matches!(op.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)))
        .count()
}

/// The most GEMVs that share one activation (a GEMV group, lowered together: 2 for gate/up).
pub(super) fn widest_gemv_group(kernel: &Kernel) -> usize {
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
pub(super) fn gptq_group_words(kernel: &Kernel) -> Option<u32> {
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

pub(super) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The K and activation block of the kernel's `gemv_q8`, if it has one.
pub(super) fn q8_gemv(kernel: &Kernel) -> Option<(usize, usize)> {
    kernel.ops().find_map(|(_, op)| match &op.kind {
        OpKind::GemvQ8(g) => match kernel.buffer(g.weight)?.local_type() {
            BufferType::Weight(w) => Some((w.k, g.block)),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}
