//! The search space: [`Schedule`] values around [`Schedule::default_for`], in priority order.
//!
//! The order is what makes a budget meaningful: a search cut at N candidates has tried the N most
//! promising ones, not the first N of an arbitrary product. It is, deterministically:
//! 1. the default;
//! 2. its neighbours: one field changed at a time (a tile field changed with the others kept and
//!    the columns recomputed from the INT4 / FP16 relation), and past batch 8 on the tensor
//!    cores the default's tile with 5 and 6 K warps ([`MMA_EXTRA_K_WARPS`]); for a GPTQ GEMV
//!    alone, the default on stripe grids of [`STRIPE_PER_SM`] workgroups per SM;
//! 3. every tile (workgroup size × words per lane × K slices, or FP16 lanes per column) with the
//!    default's other fields (on the tensor cores past batch 8 these and the FMA neighbours come
//!    after 4);
//! 4. on sm_90, every tensor-core tile ([`Int4Dot::Mma`]) at pipeline depths 1 and 2, past batch
//!    8 the wide ones also with the activations staged in phases (`x_phase_units`), past 32 the
//!    rows in passes ([`MMA_BATCH_TILES`]), then every FMA tile with the inner loop the issue expects to win (`magic` decode, `per_unit` scaling);
//! 5. the rest of the full product in a seeded pseudo-random order (skipped by `--quick`).
//!
//! Only schedules that satisfy the field relations documented on [`Schedule`] are produced; the
//! lowering is still the judge (`super::candidates` keeps what [`wavefuse_codegen::lower::lower`]
//! accepts). `k_split` (split-K) is searched over [`K_SPLITS`] on the tensor-core tiles of the
//! INT4 GEMV kernels, the fused one included (it must divide the K units); elsewhere it stays the
//! default's. Tiles whose
//! grid would leave more than half of the target's compute units idle are pruned (a decode GEMV
//! is memory bound: idle SMs are lost bandwidth), unless the default itself does.

use std::collections::HashSet;

use wavefuse::ir::ops::Compression;
use wavefuse::ir::{BufferType, Kernel, OpKind, WeightFormat};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{
    AllreduceProtocol, Int4Dot, Int4Scaling, MmaScale, NibbleDecode, Schedule, batch_of,
};

/// Workgroup sizes tried.
pub const WORKGROUP_SIZES: [u32; 3] = [128, 256, 512];
/// Words per lane and load tried.
pub const WORDS: [u32; 4] = [1, 2, 4, 8];
/// Independent accumulators tried.
pub const ACCUMULATORS: [u32; 3] = [1, 2, 4];
/// INT4 K slices (threads per column) tried.
pub const INT4_SLICES: [u32; 6] = [1, 2, 4, 8, 16, 32];
/// INT4 work-unit sizes tried (those dividing the group's words).
pub const K_UNITS: [u32; 5] = [1, 2, 4, 8, 16];
/// Largest tile tried, in columns.
pub const MAX_COLUMNS: u32 = 512;
/// Tensor-core INT4 (sm_90): work units tried (multiples of the MMA step's 4 K-words).
pub const MMA_K_UNITS: [u32; 3] = [4, 8, 16];
/// Tensor-core INT4: pipeline depths tried.
pub const PIPELINE_DEPTHS: [u32; 2] = [1, 2];
/// How far ahead, in a warp's units, the tensor-core candidate asks L2 for the weights
/// ([`Schedule::l2_prefetch_units`]).
pub const L2_PREFETCH_UNITS: u32 = 4;
/// Tensor-core INT4 past batch 8: K warps per workgroup tried on the default's tile besides
/// the powers of two that [`WORKGROUP_SIZES`] gives (160 and 192 lanes at 32 columns). Six
/// K warps with the scale on the weights were 6.2–6.7 % faster than the default at 17408 → 5120
/// batch 16 and slower at three other shapes, on one H100
/// (`bench/results/2026-12-07-gpu-kwarps/`, `…-kwarps-units4/`): a per-shape choice.
pub const MMA_EXTRA_K_WARPS: [u32; 2] = [5, 6];
/// Tensor-core INT4 past batch 32: batch tiles tried ([`Schedule::batch_tile`]), each pass the
/// unstaged 32-column form of that batch. Passes of 16 were 17 % faster than the default at
/// 4352 → 5120 batch 64 and 21 % slower at 5120 → 17408, passes of 32 the other way round
/// (−2.7 %, +7 %), on one H100 (`bench/results/2026-12-07-gpu-mma-batch-tiles/`).
pub const MMA_BATCH_TILES: [u32; 2] = [16, 32];
/// Tensor-core INT4: workgroups per column tile tried (split-K). 5 is there for K = 5120 (40
/// units of 16 words): 2 units per K warp of 4, the split the sm_90 default takes at TP > 1
/// (`bench/results/2026-11-30-h200-ksplit/`), which powers of two cannot give.
pub const K_SPLITS: [u32; 5] = [1, 2, 4, 5, 8];

/// What kind of kernel a schedule is searched for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Family {
    /// An INT4 (GPTQ) GEMV, possibly fused with an allreduce.
    Int4 {
        /// Output columns of the widest GEMV (per rank).
        n: usize,
        /// The GEMV's K (per rank).
        k: usize,
        /// Packed words of one quantisation group.
        group_words: u32,
        /// Whether the kernel has an allreduce (the protocol is searched).
        allreduce: bool,
    },
    /// An FP16 GEMV.
    F16 {
        /// Output columns (per rank).
        n: usize,
    },
    /// Elementwise and allreduce kernels: only the tile and the protocol matter.
    Elementwise {
        /// Whether the kernel has an allreduce.
        allreduce: bool,
        /// Features per block of an INT8-compressed allreduce (one wave quantises one block, so
        /// the tile follows from the workgroup size).
        int8_block: Option<u32>,
    },
}

impl Family {
    /// The family of `kernel`.
    pub fn of(kernel: &Kernel) -> Family {
        let allreduce = kernel
            .ops()
            .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_)));
        let mut int4: Option<(usize, usize, u32)> = None;
        let mut f16: Option<usize> = None;
        for (_, op) in kernel.ops() {
            let OpKind::Gemv(g) = &op.kind else { continue };
            let Some(BufferType::Weight(w)) = kernel.buffer(g.weight).map(|d| d.local_type())
            else {
                continue;
            };
            match w.format {
                WeightFormat::F16 => f16 = Some(f16.unwrap_or(0).max(w.n)),
                WeightFormat::Gptq(_) | WeightFormat::Awq(_) => {
                    let rows = w.format.group().map_or(w.k, |g| g.rows(w.k));
                    let words = (rows / 8).max(1) as u32;
                    let n = int4.map_or(0, |(n, _, _)| n).max(w.n);
                    int4 = Some((n, w.k, words));
                }
            }
        }
        match (int4, f16) {
            (Some((n, k, group_words)), _) => Family::Int4 {
                n,
                k,
                group_words,
                allreduce,
            },
            (None, Some(n)) => Family::F16 { n },
            (None, None) => Family::Elementwise {
                allreduce,
                int8_block: kernel.ops().find_map(|(_, o)| match &o.kind {
                    OpKind::AllReduce(a) => match a.compression {
                        Compression::Int8 { block } => Some(block as u32),
                        Compression::None => None,
                    },
                    _ => None,
                }),
            },
        }
    }

    fn allreduce(self) -> bool {
        match self {
            Family::Int4 { allreduce, .. } | Family::Elementwise { allreduce, .. } => allreduce,
            Family::F16 { .. } => false,
        }
    }
}

/// Every schedule of the space for `kernel` on `arch`, default first, in priority order (see the
/// module docs), without duplicates. `quick` stops after step 4.
pub fn enumerate(arch: Arch, kernel: &Kernel, quick: bool) -> Vec<Schedule> {
    let default = Schedule::default_for(arch, kernel);
    let family = Family::of(kernel);
    let mut out = Ordered::default();
    out.push(default.clone());
    let tiles = tiles(arch, family, &default);
    // On the tensor cores past batch 8 the FMA forms (neighbours and tiles) come after the
    // tensor-core ones: there they took 170–400 µs against 26–58 (17408 → 5120 batch 16 on an
    // H100, bench/results/2026-12-07-gpu-store-check/tune-k17408-b16.md) and, first, filled
    // most of a quick budget of 60.
    let fma_late = default.int4_dot == Int4Dot::Mma && batch_of(kernel) > 8;
    let mut late = vec![];
    for s in neighbours(&default, family, &tiles) {
        if fma_late && s.int4_dot == Int4Dot::Fma {
            late.push(s);
        } else {
            out.push(s);
        }
    }
    // The default on a stripe grid ([`STRIPE_PER_SM`] workgroups per SM, one of which is the
    // form's residency): a GPTQ GEMV alone, whose default grid is seldom a whole number of
    // rounds of the SMs (an H100 runs the default at 5120 -> 17408 b64 as fast with 46 % more
    // columns, `bench/results/2026-12-08-gpu-grid-evenness/`). Its first form was slower than
    // the defaults at every row (`bench/results/2026-12-08-gpu-stripe/`, before its finish was
    // unrolled): five candidates, so the tuner times what a quick budget can afford. The
    // lowering refuses the kernels it does not serve (a fused allreduce or norm, a prologue).
    if matches!(
        family,
        Family::Int4 {
            allreduce: false,
            ..
        }
    ) && !has_norm(kernel)
    {
        let sms = arch.compute_units();
        for per in STRIPE_PER_SM {
            out.push(Schedule {
                stripe_workgroups: sms * per,
                ..default.clone()
            });
        }
    }
    // Past batch 8: the default's tile with 5 and 6 K warps ([`MMA_EXTRA_K_WARPS`]), with the
    // default's scale and with the scale on the weights (64 registers where the default's scale
    // per unit takes 78 at batch 16, so more workgroups of the wider size stay resident), next
    // to the neighbours: the one form measured faster than the default at a batch-16 row (a
    // quick budget of 60 cut it when it came after the FMA tiles).
    // Not on a phased default (its phases are a multiple of its K warps).
    if let (Int4Dot::Mma, true, 0) = (
        default.int4_dot,
        batch_of(kernel) > 8,
        default.x_phase_units,
    ) {
        let column_warps = default.columns_per_workgroup / 32;
        for kw in MMA_EXTRA_K_WARPS {
            let wg = 32 * column_warps * kw;
            if wg > arch.max_workgroup_size() || default.columns_per_workgroup % 32 != 0 {
                continue;
            }
            let form = Schedule {
                workgroup_size: wg,
                threads_per_column: kw,
                ..default.clone()
            };
            out.push(Schedule {
                mma_scale: MmaScale::Weight,
                ..form.clone()
            });
            out.push(form);
        }
    }
    // The dot2 stage in phases (the gfx906 default at batch > 1): phases of 2 and 4 times the
    // default's units, where they divide the K part (fewer barriers, more LDS).
    if let (Family::Int4 { k, .. }, true) = (family, default.x_phase_units > 0) {
        let part = k / 8 / default.k_unit_words.max(1) as usize / default.k_split.max(1) as usize;
        for m in [2, 4] {
            let phase = default.x_phase_units as usize * m;
            if phase < part && part % phase == 0 {
                out.push(Schedule {
                    x_phase_units: phase as u32,
                    ..default.clone()
                });
            }
        }
    }
    // The dot2 path's batch tiles (the gfx906 default past batch 16, tiles of 32 for a GEMV
    // alone and 16 otherwise): tiles of 8 and 16 (fewer registers, more weight passes) and one
    // pass of every row.
    if default.batch_tile > 0 {
        for rows in [8, 16, 0] {
            if rows != default.batch_tile {
                out.push(Schedule {
                    batch_tile: rows,
                    ..default.clone()
                });
            }
        }
    }
    if !fma_late {
        for t in &tiles {
            out.push(t.clone());
        }
    }
    let mma = mma_tiles(arch, family, &default);
    for t in &mma {
        for pipeline_depth in PIPELINE_DEPTHS {
            out.push(Schedule {
                pipeline_depth,
                ..t.clone()
            });
        }
    }
    // The weights asked into L2 four of a warp's units ahead of its register loads
    // (`l2_prefetch_units`, issue 40), on the tensor-core default: on one H100 it cost 4–40 %
    // at 5120 → 17408 and 17408 → 5120 (batch 1–64) and gained 2–5 % at the TP 4 rank shapes'
    // batch 1, 8 and 32 (bench/results/2026-12-07-gpu-l2-prefetch/), so only the tuner tries it.
    // sm_90 only (gfx906 has no prefetch); not with the asynchronous ring.
    if arch.has_l2_prefetch() && default.int4_dot == Int4Dot::Mma && default.async_stages == 0 {
        out.push(Schedule {
            l2_prefetch_units: L2_PREFETCH_UNITS,
            ..default.clone()
        });
    }
    // Past batch 8: the wide tensor-core tiles (64 columns and more) with the activations staged
    // in phases of one unit per K warp (issue 40: the tile's column warps share one stage instead
    // of each reading the activations from L2), the scale on the weights, units of 4 and 8
    // K-words, the fewest K parts that give two workgroups per SM, both pipeline depths.
    if let (Family::Int4 { k, group_words, .. }, Int4Dot::Mma, true) =
        (family, default.int4_dot, batch_of(kernel) > 8)
    {
        let rows = (batch_of(kernel), gemv_ops(kernel));
        for t in mma.iter().filter(|t| t.columns_per_workgroup >= 64) {
            for s in phased_wide(arch, t, (k, family_n(family), group_words), rows) {
                out.push(s);
            }
        }
    }
    if let Family::Int4 { k, .. } = family {
        for t in &mma {
            let units = k / 8 / t.k_unit_words as usize;
            for k_split in K_SPLITS.into_iter().filter(|p| units % *p as usize == 0) {
                out.push(Schedule {
                    k_split,
                    ..t.clone()
                });
            }
        }
    }
    // Past batch 32: the rows in passes of 16 or 32 ([`MMA_BATCH_TILES`]), each pass the
    // unstaged 32-column form (4 K warps, units of 8; the scale per unit for passes of 16, on
    // the weights for 32, as the defaults take them at those batches), at every K split.
    if let (Family::Int4 { k, group_words, .. }, Int4Dot::Mma, true) =
        (family, default.int4_dot, batch_of(kernel) > 32)
        && group_words % 8 == 0
    {
        let units = k / 64;
        for rows in MMA_BATCH_TILES
            .into_iter()
            .filter(|&r| (r as usize) < batch_of(kernel))
        {
            for k_split in K_SPLITS.into_iter().filter(|p| units % *p as usize == 0) {
                out.push(Schedule {
                    workgroup_size: 128,
                    columns_per_workgroup: 32,
                    threads_per_column: 4,
                    k_unit_words: 8,
                    x_in_lds: false,
                    x_phase_units: 0,
                    pipeline_depth: 1,
                    async_stages: 0,
                    l2_prefetch_units: 0,
                    mma_scale: if rows == 16 {
                        MmaScale::Unit
                    } else {
                        MmaScale::Weight
                    },
                    batch_tile: rows,
                    k_split,
                    ..default.clone()
                });
            }
        }
    }
    // Past batch 8 (several N tiles of the MMA): the scale on the decoded weights, which halves
    // the f32 registers (`MmaScale::Weight`), on the default and each tensor-core tile, at
    // every work unit.
    if let (Family::Int4 { group_words, .. }, Int4Dot::Mma, true) =
        (family, default.int4_dot, batch_of(kernel) > 8)
    {
        for t in std::iter::once(&default).chain(&mma) {
            for k_unit_words in MMA_K_UNITS.into_iter().filter(|k| group_words % k == 0) {
                out.push(Schedule {
                    mma_scale: MmaScale::Weight,
                    k_unit_words,
                    ..t.clone()
                });
            }
        }
    }
    if fma_late {
        for s in late.into_iter().chain(tiles.iter().cloned()) {
            out.push(s);
        }
    }
    if let Family::Int4 { .. } = family {
        for t in &tiles {
            out.push(Schedule {
                nibble_decode: NibbleDecode::Magic,
                int4_scaling: Int4Scaling::PerUnit,
                ..t.clone()
            });
        }
    }
    if let (Family::Int4 { group_words, .. }, true) = (family, arch.has_dot2_f32_f16()) {
        // The dot2 path with short units: the whole unit's words are loaded up front, and
        // 16-word units cost occupancy on gfx906 (52 VGPRs, 4 waves per SIMD).
        for t in &tiles {
            for unit in [2, 4].into_iter().filter(|u| group_words % u == 0) {
                out.push(Schedule {
                    int4_dot: Int4Dot::Dot2,
                    k_unit_words: unit,
                    ..t.clone()
                });
            }
        }
    }
    if !quick {
        let mut rest = product(family, &default, &tiles);
        rest.extend(mma_product(family, &mma));
        shuffle(&mut rest, 0x007E_5EED);
        for s in rest {
            out.push(s);
        }
    }
    // Phased tensor-core schedules whose stage does not fit beside the sums (a larger unit or
    // phase than the phased default's) are left out: the lowering would refuse them.
    let rows = (batch_of(kernel), gemv_ops(kernel));
    // And phases that divide their K part (a K split or unit of a phased default can leave a
    // part of 5 units for phases of 2: the lowering refuses it).
    let phases_divide = |s: &Schedule| match family {
        Family::Int4 { k, .. } if s.x_phase_units > 0 => {
            let part = k / 8 / s.k_unit_words.max(1) as usize / s.k_split.max(1) as usize;
            part % s.x_phase_units as usize == 0
        }
        _ => true,
    };
    // The ring in dynamic LDS only in the full space: timed on an H100 at batch 32 and 64 it was
    // 1.12–1.74× the default at every row (bench/results/2026-12-07-gpu-ring-bfrag/), so a
    // quick budget does not spend itself on it.
    out.list
        .into_iter()
        .filter(|s| {
            (phased_fits(arch, s, rows) || (!quick && ring_in_dynamic_lds(arch, s, rows)))
                && phases_divide(s)
        })
        .collect()
}

/// Workgroups per SM of the stripe grids the space tries
/// ([`Schedule::stripe_workgroups`] `= SMs · n`): the residencies the tensor-core forms have at
/// batch 2–64 (2–8 per SM by their registers).
pub const STRIPE_PER_SM: [u32; 5] = [2, 3, 4, 5, 6];

/// Whether `kernel` has an RMSNorm (the stripe grid is not lowered with one).
fn has_norm(kernel: &Kernel) -> bool {
    kernel
        .ops()
        .any(|(_, o)| matches!(o.kind, OpKind::RmsNorm(..)))
}

/// The phased forms of the wide tensor-core tile `t` (see `enumerate`): K-words per unit 4 and 8,
/// the fewest K parts of [`K_SPLITS`] dividing the units that give `2 · SMs` workgroups (else
/// the most that divide) and the fewest of at least twice that many, the activations staged
/// in phases of one unit per K warp where the part has more than one phase ([`phased_forms`]);
/// none whose cross-warp sums (`batch · columns · K warps` f32 per GEMV) and phase stage
/// (`batch · (K warps · unit + pad) · 16` bytes) outgrow the workgroup's static LDS.
fn phased_wide(
    arch: Arch,
    t: &Schedule,
    (k, n, group_words): (usize, usize, u32),
    (batch, gemvs): (usize, usize),
) -> Vec<Schedule> {
    let tiles = n.div_ceil(t.columns_per_workgroup as usize);
    let kwarps = t.threads_per_column as usize;
    let mut out = Vec::new();
    for unit in [4, 8].into_iter().filter(|u| group_words % u == 0) {
        let phased = Schedule {
            k_unit_words: unit,
            x_in_lds: true,
            x_phase_units: kwarps as u32,
            async_stages: 0,
            ..t.clone()
        };
        if !phased_fits(arch, &phased, (batch, gemvs)) {
            continue;
        }
        let units = k / 8 / unit as usize;
        let splits: Vec<u32> = K_SPLITS
            .into_iter()
            .filter(|p| units % *p as usize == 0)
            .collect();
        let fill = 2 * arch.compute_units() as usize;
        let Some(&k_split) = splits
            .iter()
            .find(|&&p| tiles * p as usize >= fill)
            .or(splits.last())
        else {
            continue;
        };
        // Also twice the parts where they divide: at the fill's parts the phased tiles ran at
        // a quarter of the SM's warps (Nsight Compute, bench/results/2026-12-06-gpu-async-stage/).
        let more = splits.iter().copied().find(|&p| p >= 2 * k_split);
        for k_split in std::iter::once(k_split).chain(more) {
            phased_forms(
                &mut out,
                t,
                &phased,
                (k_split, units, kwarps),
                arch,
                (batch, gemvs),
            );
        }
    }
    out
}

/// The phased forms of tile `t` at `k_split` parts (see [`phased_wide`]): pipeline depth 1 and
/// 2 (where the phases are even in number), phases of 2 and 4 units per K warp at depth 1
/// (where they divide the part and fit), and the asynchronous rings of 2, 3 and 4 phase
/// buffers where they fit beside the sums.
fn phased_forms(
    out: &mut Vec<Schedule>,
    t: &Schedule,
    phased: &Schedule,
    (k_split, units, kwarps): (u32, usize, usize),
    arch: Arch,
    (batch, gemvs): (usize, usize),
) {
    let part = units / k_split as usize;
    if part <= kwarps || part % kwarps != 0 {
        return;
    }
    let form = Schedule {
        k_unit_words: phased.k_unit_words,
        k_split,
        x_in_lds: true,
        x_phase_units: kwarps as u32,
        mma_scale: MmaScale::Weight,
        ..t.clone()
    };
    for pipeline_depth in PIPELINE_DEPTHS {
        if pipeline_depth == 2 && (part / kwarps) % 2 != 0 {
            continue;
        }
        out.push(Schedule {
            pipeline_depth,
            ..form.clone()
        });
    }
    // Longer phases (2 and 4 units per K warp) at depth 1: a quarter to a half of the barriers
    // and 2–4× the activation loads in flight per phase; at batch 64 they fit only with the
    // stage in the sums' LDS (`mma.rs`; not measured yet: bench/results/2026-12-07-gpu-parts-and-stage/).
    for per_warp in [2, 4] {
        let longer = Schedule {
            x_phase_units: (per_warp * kwarps) as u32,
            ..form.clone()
        };
        if part % (per_warp * kwarps) == 0
            && part > per_warp * kwarps
            && phased_fits(arch, &longer, (batch, gemvs))
        {
            out.push(longer);
        }
    }
    // The activations and weights through asynchronous LDS rings (depth 1) of 2, 3 and 4
    // phase buffers where they fit beside the sums; from batch 32 on a tile of one K warp also
    // the ring of 3 in dynamic shared memory (sm_90: a tuned schedule may take it; issue 40,
    // the form of bench/results/2026-12-07-gpu-ring-bfrag/, its activations stored in
    // B-fragment order), which `enumerate` keeps in the full space only.
    for stages in [2, 3, 4] {
        let ringed = Schedule {
            async_stages: stages,
            ..phased.clone()
        };
        if !phased_fits(arch, &ringed, (batch, gemvs))
            && !ring_in_dynamic_lds(arch, &ringed, (batch, gemvs))
        {
            continue;
        }
        out.push(Schedule {
            pipeline_depth: 1,
            async_stages: stages,
            ..form.clone()
        });
    }
}

/// The kernel's GEMV ops.
fn gemv_ops(kernel: &Kernel) -> usize {
    kernel
        .ops()
        .filter(|(_, o)| matches!(o.kind, OpKind::Gemv(_)))
        .count()
}

/// Whether a tensor-core schedule whose activations are staged in phases fits the static LDS
/// (true for every other schedule): the cross-warp sums (`gemvs · batch · columns · K warps`
/// f32), the phase's stage (its rows padded by 4 entries where they are a multiple of 8, the
/// lowering's bank-conflict pad; one per buffer of the ring where there is one) and the asynchronous ring (per warp, weight and buffer 512
/// bytes per 4 K-words of the unit, 384 for scales and zero words; counted whole although its
/// words may share the sums), with room for the few words of flags a kernel declares beside
/// them. The lowering refuses the others; the space leaves them out.
fn phased_fits(arch: Arch, s: &Schedule, rows: (usize, usize)) -> bool {
    phased_fits_in(arch.max_static_lds_per_workgroup(), s, rows)
}

/// The ring of 3 phase buffers of a tile of one K warp from batch 32 on, where it fits the
/// dynamic shared memory of an asked-for sm_90 schedule (see `phased_forms`; the full space
/// only, see `enumerate`).
fn ring_in_dynamic_lds(arch: Arch, s: &Schedule, rows: (usize, usize)) -> bool {
    s.async_stages == 3
        && s.x_phase_units > 0
        && s.threads_per_column == 1
        && rows.0 >= 32
        && phased_fits_in(arch.max_lds_per_workgroup(), s, rows)
}

/// [`phased_fits`] within `limit` bytes of LDS (the static or, for an asked-for sm_90 schedule,
/// the dynamic limit).
fn phased_fits_in(limit: u32, s: &Schedule, (batch, gemvs): (usize, usize)) -> bool {
    if s.int4_dot != Int4Dot::Mma || !s.x_in_lds || s.x_phase_units == 0 {
        return true;
    }
    let (kwarps, cols) = (
        s.threads_per_column as usize,
        s.columns_per_workgroup as usize,
    );
    let sums = gemvs * batch * cols * kwarps * 4;
    let words = s.x_phase_units as usize * s.k_unit_words as usize;
    // With the ring the stage is a ring of phase buffers too (one per unit buffer).
    let stage = batch
        * (words + if words % 8 == 0 { 4 } else { 0 })
        * 16
        * (s.async_stages as usize).max(1);
    let warps = s.workgroup_size as usize / 32;
    let unit = s.k_unit_words as usize;
    let ring = s.async_stages as usize * warps * gemvs * (unit / 4 * 512 + 384);
    // The synchronous stage fits wherever the larger of it and the first weight's sums does (it
    // lives in the sums where the two do not fit side by side).
    let stage_and_sums = if s.async_stages == 0 {
        stage.max(sums / gemvs) + sums - sums / gemvs
    } else {
        sums + stage
    };
    stage_and_sums + ring + 64 <= limit as usize
}

/// The widest output of an INT4 family (0 for the others).
fn family_n(family: Family) -> usize {
    match family {
        Family::Int4 { n, .. } => n,
        _ => 0,
    }
}

/// A list that keeps the first of equal schedules.
#[derive(Default)]
struct Ordered {
    list: Vec<Schedule>,
    seen: HashSet<Schedule>,
}

impl Ordered {
    fn push(&mut self, s: Schedule) {
        if self.seen.insert(s.clone()) {
            self.list.push(s);
        }
    }
}

/// The tiles of the family, each on the default's other fields (default's own tile first).
fn tiles(arch: Arch, family: Family, d: &Schedule) -> Vec<Schedule> {
    let wave = arch.wave_size();
    let min_grid = arch.compute_units().div_ceil(2) as usize;
    let fills = |n: usize, c: u32| n.div_ceil(c as usize) >= min_grid;
    let mut out = Vec::new();
    for wg in WORKGROUP_SIZES
        .into_iter()
        .filter(|&w| w % wave == 0 && w <= arch.max_workgroup_size())
    {
        match family {
            Family::Int4 { n, .. } => {
                for v in WORDS {
                    for t in INT4_SLICES {
                        if (wg * v) % t != 0 {
                            continue;
                        }
                        let c = wg * v / t;
                        if c < v || c > MAX_COLUMNS || !fills(n, c) {
                            continue;
                        }
                        out.push(Schedule {
                            workgroup_size: wg,
                            columns_per_workgroup: c,
                            threads_per_column: t,
                            words_per_iteration: v,
                            int4_dot: Int4Dot::Fma,
                            pipeline_depth: 1,
                            // Fields the FMA path ignores, not inherited from a phased or
                            // ringed tensor-core default (they would make equal kernels look
                            // like distinct candidates).
                            x_phase_units: 0,
                            async_stages: 0,
                            ..d.clone()
                        });
                    }
                }
            }
            Family::F16 { n } => {
                for m in [1, 2, 4, 8] {
                    let t = wave * m;
                    if wg % t != 0 {
                        continue;
                    }
                    let c = wg / t;
                    if !fills(n, c) {
                        continue;
                    }
                    for v in WORDS {
                        out.push(Schedule {
                            workgroup_size: wg,
                            columns_per_workgroup: c,
                            threads_per_column: t,
                            words_per_iteration: v,
                            ..d.clone()
                        });
                    }
                }
            }
            Family::Elementwise { int8_block, .. } => {
                let tiles = match int8_block {
                    Some(b) if b % wave == 0 => vec![wg * (b / wave)],
                    _ => vec![wg / 2, wg, 2 * wg, 4 * wg, 8 * wg],
                };
                for c in tiles {
                    out.push(Schedule {
                        workgroup_size: wg,
                        columns_per_workgroup: c,
                        ..d.clone()
                    });
                }
            }
        }
    }
    // The default's own tile first, then by distance from it.
    let dist = |s: &Schedule| {
        let l = |a: u32, b: u32| (a.max(1) as f64 / b.max(1) as f64).log2().abs();
        l(s.workgroup_size, d.workgroup_size)
            + l(s.columns_per_workgroup, d.columns_per_workgroup)
            + l(s.words_per_iteration, d.words_per_iteration)
    };
    out.sort_by(|a, b| dist(a).total_cmp(&dist(b)));
    out
}

/// Tensor-core INT4 tiles ([`Int4Dot::Mma`], sm_90's 32-lane warps only): 4 words per lane,
/// columns a multiple of 32, `workgroup_size = threads_per_column · columns_per_workgroup`, the
/// default's work unit when it is a multiple of 4 (else 16).
fn mma_tiles(arch: Arch, family: Family, d: &Schedule) -> Vec<Schedule> {
    let Family::Int4 { n, group_words, .. } = family else {
        return Vec::new();
    };
    if arch.wave_size() != 32 {
        return Vec::new();
    }
    let min_grid = arch.compute_units().div_ceil(2) as usize;
    let unit = if d.k_unit_words % 4 == 0 && group_words % d.k_unit_words == 0 {
        d.k_unit_words
    } else {
        16.min(group_words)
    };
    let mut out = Vec::new();
    for wg in WORKGROUP_SIZES
        .into_iter()
        .filter(|&w| w <= arch.max_workgroup_size())
    {
        for c in [32, 64, 128, 256, 512] {
            if wg % c != 0 || n.div_ceil(c as usize) < min_grid {
                continue;
            }
            out.push(Schedule {
                workgroup_size: wg,
                columns_per_workgroup: c,
                threads_per_column: wg / c,
                words_per_iteration: 4,
                k_unit_words: unit,
                int4_dot: Int4Dot::Mma,
                pipeline_depth: 1,
                // A phased default (the wide tile past batch 56) keeps its phases on every
                // tile at one unit per K warp, a multiple of them as the lowering needs.
                x_phase_units: if d.x_phase_units > 0 { wg / c } else { 0 },
                ..d.clone()
            });
        }
    }
    out
}

/// Every tensor-core tile with every work unit, pipeline depth and protocol.
fn mma_product(family: Family, tiles: &[Schedule]) -> Vec<Schedule> {
    let Family::Int4 { group_words, .. } = family else {
        return Vec::new();
    };
    let protocols = if family.allreduce() {
        vec![AllreduceProtocol::Pull, AllreduceProtocol::Push]
    } else {
        tiles.first().map(|t| vec![t.protocol]).unwrap_or_default()
    };
    let mut out = Vec::new();
    for t in tiles {
        // A phased tile's stage grows with the unit: no larger units than the tile's own (the
        // phased default's stage is sized to fit the LDS beside the cross-warp sums).
        let units = MMA_K_UNITS
            .into_iter()
            .filter(|k| group_words % k == 0 && (t.x_phase_units == 0 || *k <= t.k_unit_words));
        for k_unit_words in units {
            for pipeline_depth in PIPELINE_DEPTHS {
                for &protocol in &protocols {
                    out.push(Schedule {
                        k_unit_words,
                        pipeline_depth,
                        protocol,
                        ..t.clone()
                    });
                }
            }
        }
    }
    out
}

/// The default with one field changed.
fn neighbours(d: &Schedule, family: Family, tiles: &[Schedule]) -> Vec<Schedule> {
    let mut out = Vec::new();
    // Tiles one step away: same words and workgroup size (other slices), or same slices. The
    // tiles are the FMA path's; a dot2 default's neighbours stay on the dot2 path (gfx906), with
    // its activation phase at one unit per K slice of the tile where it stages in phases.
    out.extend(
        tiles
            .iter()
            .filter(|t| {
                let same = [
                    t.workgroup_size == d.workgroup_size,
                    t.words_per_iteration == d.words_per_iteration,
                    t.threads_per_column == d.threads_per_column,
                ];
                same.iter().filter(|&&x| x).count() == 2
            })
            .map(|t| match d.int4_dot {
                Int4Dot::Dot2 => Schedule {
                    int4_dot: Int4Dot::Dot2,
                    x_phase_units: if d.x_phase_units > 0 {
                        t.threads_per_column
                    } else {
                        0
                    },
                    ..t.clone()
                },
                _ => t.clone(),
            }),
    );
    for a in ACCUMULATORS {
        out.push(Schedule {
            accumulators: a,
            ..d.clone()
        });
    }
    if family.allreduce() {
        for p in [AllreduceProtocol::Pull, AllreduceProtocol::Push] {
            out.push(d.clone().with_protocol(p));
        }
    }
    if let (Family::Int4 { group_words, k, .. }, Int4Dot::Mma) = (family, d.int4_dot) {
        // K parts per tile first: how many workgroups are in flight decides a small-N GEMV (one
        // TP 4 rank's 5120 → 4352 alone on an H200: 13.06 µs at the default's 2 parts, 9.79 at 5,
        // 9.76 at 8; `bench/results/2026-12-01-h200-rank-alone/`).
        let units = k / 8 / d.k_unit_words.max(1) as usize;
        for k_split in K_SPLITS.into_iter().filter(|p| units % *p as usize == 0) {
            out.push(Schedule {
                k_split,
                ..d.clone()
            });
        }
        for ku in MMA_K_UNITS.into_iter().filter(|k| group_words % k == 0) {
            out.push(Schedule {
                k_unit_words: ku,
                ..d.clone()
            });
        }
        for pipeline_depth in PIPELINE_DEPTHS {
            out.push(Schedule {
                pipeline_depth,
                ..d.clone()
            });
        }
    } else if let Family::Int4 { group_words, .. } = family {
        for ku in k_units(group_words) {
            out.push(Schedule {
                k_unit_words: ku,
                ..d.clone()
            });
        }
        for nd in [NibbleDecode::Convert, NibbleDecode::Magic] {
            out.push(Schedule {
                nibble_decode: nd,
                ..d.clone()
            });
        }
        for sc in [Int4Scaling::PerWeight, Int4Scaling::PerUnit] {
            out.push(Schedule {
                int4_scaling: sc,
                ..d.clone()
            });
        }
    }
    out
}

/// Work-unit sizes that divide the group.
fn k_units(group_words: u32) -> impl Iterator<Item = u32> {
    K_UNITS
        .into_iter()
        .filter(move |&k| k <= group_words && group_words % k == 0)
}

/// The full product over the tiles and every other field.
fn product(family: Family, d: &Schedule, tiles: &[Schedule]) -> Vec<Schedule> {
    let protocols: Vec<AllreduceProtocol> = if family.allreduce() {
        vec![AllreduceProtocol::Pull, AllreduceProtocol::Push]
    } else {
        vec![d.protocol]
    };
    let (kus, decodes, scalings): (Vec<u32>, Vec<NibbleDecode>, Vec<Int4Scaling>) = match family {
        Family::Int4 { group_words, .. } => (
            k_units(group_words).collect(),
            vec![NibbleDecode::Convert, NibbleDecode::Magic],
            vec![Int4Scaling::PerWeight, Int4Scaling::PerUnit],
        ),
        _ => (
            vec![d.k_unit_words],
            vec![d.nibble_decode],
            vec![d.int4_scaling],
        ),
    };
    let accs: Vec<u32> = match family {
        Family::Elementwise { .. } => vec![d.accumulators],
        _ => ACCUMULATORS.to_vec(),
    };
    let mut out = Vec::new();
    for t in tiles {
        for &accumulators in &accs {
            for &k_unit_words in &kus {
                for &nibble_decode in &decodes {
                    for &int4_scaling in &scalings {
                        for &protocol in &protocols {
                            out.push(Schedule {
                                accumulators,
                                k_unit_words,
                                nibble_decode,
                                int4_scaling,
                                protocol,
                                ..t.clone()
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Fisher–Yates with splitmix64: the same order on every machine.
fn shuffle(v: &mut [Schedule], seed: u64) {
    for i in (1..v.len()).rev() {
        let j = (crate::suite::mix(seed, i as u64) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// A schedule in a few characters: `wg256 c32 t8 w1 a2 ku16 convert per_weight`,
/// `wg256 c32 t8 w1 a2 ku4 dot2` on gfx906's dot2 path, or `wg256 c64 t4 w4 ku16 mma d2 xs` on the
/// tensor cores (`xs`: the activations staged whole in LDS, `phN`: in phases of N units; and the
/// protocol for kernels with an allreduce).
pub fn summary(s: &Schedule, family: Family) -> String {
    let mut out = format!(
        "wg{} c{} t{} w{} a{}",
        s.workgroup_size,
        s.columns_per_workgroup,
        s.threads_per_column,
        s.words_per_iteration,
        s.accumulators
    );
    if let (Family::Int4 { .. }, Int4Dot::Mma) = (family, s.int4_dot) {
        out = format!(
            "wg{} c{} t{} w{} ku{} mma d{}",
            s.workgroup_size,
            s.columns_per_workgroup,
            s.threads_per_column,
            s.words_per_iteration,
            s.k_unit_words,
            s.pipeline_depth
        );
        if s.mma_scale == MmaScale::Weight {
            out.push_str(" sw");
        }
        // The activations staged in LDS: whole (`xs`) or in phases (`phN`); unstaged: nothing.
        if s.x_in_lds && s.x_phase_units > 0 {
            out.push_str(&format!(" ph{}", s.x_phase_units));
        } else if s.x_in_lds {
            out.push_str(" xs");
        }
        if s.async_stages > 0 {
            out.push_str(&format!(" ring{}", s.async_stages));
        }
        if s.l2_prefetch_units > 0 {
            out.push_str(&format!(" pf{}", s.l2_prefetch_units));
        }
        // Rows in passes: two candidates that differ only there read apart.
        if s.batch_tile > 0 {
            out.push_str(&format!(" bt{}", s.batch_tile));
        }
    } else if let (Family::Int4 { .. }, Int4Dot::Dot2) = (family, s.int4_dot) {
        out.push_str(&format!(" ku{} dot2", s.k_unit_words));
        if s.batch_tile > 0 {
            out.push_str(&format!(" bt{}", s.batch_tile));
        }
        if s.x_phase_units > 0 {
            out.push_str(&format!(" ph{}", s.x_phase_units));
        }
    } else if let Family::Int4 { .. } = family {
        let nd = match s.nibble_decode {
            NibbleDecode::Convert => "convert",
            NibbleDecode::Magic => "magic",
        };
        let sc = match s.int4_scaling {
            Int4Scaling::PerWeight => "per_weight",
            Int4Scaling::PerUnit => "per_unit",
        };
        out.push_str(&format!(" ku{} {nd} {sc}", s.k_unit_words));
    }
    // Split-K: candidates that differ only in their K parts must not read alike.
    if s.k_split > 1 {
        out.push_str(&format!(" k{}", s.k_split));
    }
    if family.allreduce() {
        out.push_str(match s.protocol {
            AllreduceProtocol::Pull => " pull",
            AllreduceProtocol::Push => " push",
        });
    }
    out
}
