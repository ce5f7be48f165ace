//! The default schedule, decided in one place: the target's default for the kernel
//! ([`Schedule::default_for`]: tiles, dot-product path, split-K, LDS staging per target), the
//! allreduce protocol for the placement ([`for_placement`]), and the cost rule between
//! recomputing a GEMV prologue and materialising it ([`prologue_by_cost`]). What
//! `wavefuse emit`, the snapshots, `check`, `ab` and the suites start from before overrides and
//! the co-residency fit ([`super::fit()`]).

use wavefuse_ir::ops::Compression;
use wavefuse_ir::{BufferType, Kernel, OpKind, ScalarType, WeightFormat};

use super::fit::{Trials, fits_coresident};
use super::gemv::{MMA_MAX_BATCH, mma_takes};
use super::schedule::{
    batch_of, common_k, gcd, gemv_count, gemv_format, gemv_ns, gemv_prologue, gptq_group_words,
    gptq_k, q8_gemv, widest_gemv_group,
};
use super::{
    AllreduceProtocol, Int4Dot, Int4Scaling, MmaDecode, MmaScale, NibbleDecode, Reduction,
    Schedule, has_gemv_prologue,
};
use crate::target::Arch;

/// Whether `ir` has a GEMV (the kernels whose schedule fields an override can change).
pub fn has_gemv(ir: &Kernel) -> bool {
    ir.ops()
        .any(|(_, o)| matches!(o.kind, OpKind::Gemv(_) | OpKind::GemvQ8(_)))
}

/// The target's default for `ir` with `ranks_per_device` ranks sharing each device, before the
/// prologue's cost rule. With one rank per device a kernel that fuses a GEMV with an allreduce
/// uses the push protocol (each rank writes its slice into the peers' memory and polls only its
/// own flags): on 2 × H200 over NVLink the fused kernel took 18.2 µs with push against 19.6 µs
/// with pull (three alternating runs each, `bench/results/2026-11-30-push-per-device/`), while
/// with four ranks on one H200 push was 6 µs slower
/// (`bench/results/2026-11-30-fused-experiments/`).
pub fn for_placement(arch: Arch, ir: &Kernel, ranks_per_device: u32) -> Schedule {
    for_placement_in(&mut Trials::new(ir, arch), ranks_per_device)
}

/// [`for_placement`] over the fit's lowerings `t` (those of the LDS fit, `lds_fit.rs`).
fn for_placement_in(t: &mut Trials<'_>, ranks_per_device: u32) -> Schedule {
    let s = placed(t.kernel(), ranks_per_device, target(t.arch(), t.kernel()));
    super::lds_fit::fit_lds(t, s)
}

/// The target's default `s` with the allreduce protocol for the placement.
fn placed(ir: &Kernel, ranks_per_device: u32, s: Schedule) -> Schedule {
    let allreduce = ir
        .ops()
        .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_)));
    if ranks_per_device == 1 && ir.tp() > 1 && has_gemv(ir) && allreduce {
        s.with_protocol(AllreduceProtocol::Push)
    } else {
        s
    }
}

/// The default schedule of `ir` on `arch` with `ranks_per_device` ranks sharing each device:
/// [`for_placement`], then [`prologue_by_cost`] (before the co-residency fit).
pub fn default_schedule(ir: &Kernel, arch: Arch, ranks_per_device: u32) -> Schedule {
    default_in(&mut Trials::new(ir, arch), ranks_per_device)
}

/// [`default_schedule`] over the fit's lowerings `t` (the prologue rule's lowerings are the
/// fit's first trials).
pub(super) fn default_in(t: &mut Trials<'_>, ranks_per_device: u32) -> Schedule {
    let s = for_placement_in(t, ranks_per_device);
    cost_rule(t, s, ranks_per_device)
}

/// L2 bandwidth at which the workgroups of a recomputed GEMV prologue re-read its inputs, fitted
/// on the H200 (`bench/results/2026-12-02-h200-prologue-batch`: silu·mul before the INT4 down
/// GEMV 17408 → 5120, 640 workgroups, batch 1 and 2).
pub const PROLOGUE_REREAD_BYTES_PER_S: f64 = 10.9e12;
/// What materialising a prologue costs on the H200 when the GEMV stage keeps its grid: the stage
/// barrier and the activation's round trip through global memory (same fit).
pub const MATERIALISE_US: f64 = 2.6;
/// … and when the grid barrier makes the GEMV stage shrink its grid to be co-resident (RMSNorm
/// before gate/up 5120 → 2 × 17408: 2176 → 528 workgroups): recomputing won at batch 4 (111 MB
/// re-read, 0.91×), materialising at batch 8 (200 MB, 1.17×); the line between them.
pub const MATERIALISE_SHRUNK_US: f64 = 13.8;

/// The default's choice between recomputing a GEMV prologue in every workgroup and
/// materialising it once behind a grid barrier ([`Schedule::materialise_prologue`]), by cost, on
/// sm_90 (where it was measured): materialise when the recompute's re-reads (its grid × the
/// prologue's input bytes, at [`PROLOGUE_REREAD_BYTES_PER_S`]: each workgroup reads the inputs
/// whole once — a stage that loops over its tile parts computes the norm's `1/rms` once per
/// workgroup in front of the loop, and each part's packing of its K slice is what the GEMV
/// stages anyway) take longer than materialising
/// ([`MATERIALISE_US`], or [`MATERIALISE_SHRUNK_US`] when the barrier's co-residency shrinks the
/// grid). gfx906 keeps recomputing (not measured there); the fit still materialises where
/// recomputing does not lower ([`super::fit::lower_or_materialise`]). Tuned and explicit
/// schedules decide for themselves (an override `materialise_prologue=false` wins).
pub fn prologue_by_cost(ir: &Kernel, arch: Arch, s: Schedule, ranks_per_device: u32) -> Schedule {
    cost_rule(&mut Trials::new(ir, arch), s, ranks_per_device)
}

fn cost_rule(t: &mut Trials<'_>, s: Schedule, ranks_per_device: u32) -> Schedule {
    let (ir, arch) = (t.kernel(), t.arch());
    if arch != Arch::Sm90 || s.materialise_prologue || !has_gemv_prologue(ir) {
        return s;
    }
    let Ok(recompute) = t.lower(&s) else {
        return s;
    };
    let m = Schedule {
        materialise_prologue: true,
        ..s.clone()
    };
    let Ok(materialised) = t.lower(&m) else {
        return s;
    };
    let reread_us = f64::from(recompute.grid) * super::prologue_input_bytes(ir) as f64
        / PROLOGUE_REREAD_BYTES_PER_S
        * 1e6;
    let cost_us = if fits_coresident(&materialised, arch, ranks_per_device) {
        MATERIALISE_US
    } else {
        MATERIALISE_SHRUNK_US
    };
    if reread_us > cost_us { m } else { s }
}

/// The target's default for `kernel` on `arch`, before the placement, its LDS fitted
/// ([`Schedule::default_for`]).
pub(super) fn target_fitted(arch: Arch, kernel: &Kernel) -> Schedule {
    super::lds_fit::fit_lds(&mut Trials::new(kernel, arch), target(arch, kernel))
}

/// The target's default for `kernel` on `arch`, before the placement and the LDS fit.
fn target(arch: Arch, kernel: &Kernel) -> Schedule {
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
        mma_scale: MmaScale::Unit,
        byte_offsets: false,
        max_grid: 0,
        materialise_prologue: false,
        prefetch_next_stage: false,
        prefetch_before_wait: false,
        x_phase_units: 0,
        async_stages: 0,
        l2_prefetch_units: 0,
        min_resident_per_cu: 0,
        reduction: Reduction::Slices,
        batch_tile: 0,
        stripe_workgroups: 0,
    };
    if let Some((k, block)) = q8_gemv(kernel) {
        return q8_default(arch, kernel, k, block, base);
    }
    // Where this does not lower for its LDS (past batch 8), the callers fit it: the serial
    // reduction, unstaged activations or a narrower tile (`lds_fit.rs`).
    match gemv_format(kernel) {
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
            // The scale per unit (exact) where its accumulators fit; else, past what that holds
            // (two weights past batch 32), the scale on the decoded weights, which needs half
            // of them, rather than the FMA path (`MmaScale::Weight`: 2⁻¹¹ per weight) — only
            // where every output is FP16, whose rounding (and tolerance) it stays within; an
            // FP32 output is held to f32 accuracy.
            let scale = [MmaScale::Unit, MmaScale::Weight]
                .into_iter()
                .filter(|&sc| sc == MmaScale::Unit || fp16_outputs(kernel))
                .find(|&sc| mma_takes(batch, gemv_count(kernel), sc));
            match (unit, scale) {
                (Some(unit), Some(mma_scale)) if arch.has_fp16_mma() => {
                    let mma = Schedule {
                        int4_dot: Int4Dot::Mma,
                        words_per_iteration: 4,
                        columns_per_workgroup: 32,
                        threads_per_column: workgroup_size / 32,
                        k_unit_words: mma_unit(unit),
                        stream_weights: true,
                        mma_scale,
                        ..fma
                    };
                    let mut s = mma_split(arch, kernel, mma);
                    // Halved after the split, which keeps the K parts it chose for units of 16
                    // (the measured schedule).
                    if gemv_alone_at_two_tiles(kernel) && s.k_unit_words == 16 {
                        s.k_unit_words = 8;
                    }
                    if gemv_alone_at_eight_tiles(kernel) && fp16_outputs(kernel) {
                        s = wide_phased(arch, kernel, s);
                    }
                    if gemv_alone(kernel, 2..=MMA_MAX_BATCH) && single_gemv(kernel) {
                        s = whole_rounds(arch, kernel, s);
                    }
                    s
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
    }
}

/// Whether `kernel` is a GEMV alone (one weight, no allreduce or norm) at batch 9–16 (two N tiles
/// of the tensor-core MMA): there units of 8 K-words instead of 16, with the K parts the split
/// chose for 16 (`mma_split`'s; the schedule measured) — one H100, `ab --timing
/// graphs`, `gemv_int4` at batch 16: 5120 → 17408 36.6 → 28.7 µs and 17408 → 5120 34.1 → 28.4
/// (`bench/results/2026-12-06-h100-mma-scale/`, `k_unit_words=8`), 36.3 → 28.6 again as the
/// tuner's winner over 80 candidates (`bench/results/2026-12-06-h100-phased-tune/`). Not at
/// batch 32 (units of 8 were 16–25 % slower there) nor on the fused or two-weight kernels
/// (not measured at these batches).
fn gemv_alone_at_two_tiles(kernel: &Kernel) -> bool {
    gemv_alone(kernel, 9..=16)
}

/// Whether `kernel` is a GEMV alone (one weight, no allreduce or norm) at a batch in `batches`.
fn gemv_alone(kernel: &Kernel, batches: std::ops::RangeInclusive<usize>) -> bool {
    batches.contains(&batch_of(kernel))
        && widest_gemv_group(kernel) == 1
        && !kernel
            .ops()
            .any(|(_, op)| matches!(op.kind, OpKind::AllReduce(..) | OpKind::RmsNorm(..)))
}

/// Whether `kernel` is a GEMV alone (one weight, no allreduce or norm) at batch 57–64 (eight N
/// tiles of the tensor-core MMA, as measured): there [`wide_phased`].
fn gemv_alone_at_eight_tiles(kernel: &Kernel) -> bool {
    gemv_alone(kernel, 57..=MMA_MAX_BATCH)
}

/// The tensor-core GEMV alone past batch 1: its grid fitted to whole rounds of the workgroups an
/// SM holds at the registers nvcc gives the form (`ptxas`, in `tune`'s reports of
/// `bench/results/2026-12-07-gpu-tune-rows/`). The tuner's winners at the rows behind Marlin
/// (one H100, `ab --timing graphs`) all fit that way where the default did not:
/// - batch 2–4 (one N tile, units of 16, 64 registers: 8 workgroups of 128 lanes per SM):
///   memory-bound, so several rounds do no harm, but a last round under half full does — at
///   5120 → 17408 the fill's 2 parts are 1088 workgroups on the 1056 an H100 holds; by K parts
///   the tuner timed 2: 26.5, 4: 26.2, 5: 23.7, 8: 28.7 µs (1.03, 2.06, 2.58, 4.12 rounds). The
///   parts are raised to the fewest dividing the units evenly over the K warps whose last
///   round is at least half full (`ab`: 24.45 → 21.45 µs at batch 2; Marlin 23.47);
/// - batch 9–16 (units of 8, 78–80 registers, 6 per SM): the most K parts that keep the grid
///   within one round (each part writes and reads `batch · N` f32 partial sums): at 5120 →
///   17408 no split instead of 2 parts (`ab`: 28.72 → 25.08 µs);
/// - batch 17–32, FP16 outputs (units of 8 with the scale on the weights: 94 registers, 5 per
///   SM, against 128–168 and 3–4 per SM for the scale per unit): the most K parts within one
///   round (17408 → 5120: 44.30 → 38.05 µs at 4 parts);
/// - batch 57–64, FP16 outputs: 64-column tiles of two K warps, units of 8, the scale on the
///   weights, phases of one unit per K warp (129–158 registers, 3 per SM), the most K parts
///   within one round that leave each part an even count of units (the phases): the winners
///   at 5120 → 17408 (no split: 85.05 → 77.01 µs), 5120 → 4352 (5 parts: 39.98 → 31.80) and
///   4352 → 5120 (2 parts: 46.51 → 39.83).
/// Measured as defaults (each changed row's kernel byte-identical to an override timed beside
/// the old default and Marlin in one H100 call, `bench/results/2026-12-07-gpu-round-rules/`):
/// 5120 → 17408 b2 / b4 / b16 / b32 / b64 24.47 → 21.55, 24.82 → 21.71, 28.66 → 25.34, 41.85
/// → 35.27, 85.45 → 77.13 µs; b32 17408 → 5120 43.78 → 37.89, 5120 → 4352 19.97 → 15.20,
/// 4352 → 5120 20.67 → 14.61; b64 5120 → 4352 39.59 → 31.83, 4352 → 5120 46.63 → 39.68, and
/// at 17408 → 5120 (K past [`ROUND_RULE_MAX_K`], the wide tile with units of 16) 75.82 →
/// 72.00. A single GEMV only (the fused, two-weight and QKV kernels keep what they had); batch
/// 5–8 and 33–56 unchanged (not measured). Where no count fits (more tiles than a round
/// holds), `s` is unchanged.
fn whole_rounds(arch: Arch, kernel: &Kernel, s: Schedule) -> Schedule {
    let (Some(k), Some(n)) = (common_k(kernel), gemv_ns(kernel).max()) else {
        return s;
    };
    let batch = batch_of(kernel);
    let sms = arch.compute_units() as usize;
    let tiles = |s: &Schedule| n.div_ceil(s.columns_per_workgroup as usize);
    let units = |s: &Schedule| k / 8 / s.k_unit_words.max(1) as usize;
    // The most K parts dividing the units, each with at least `per` units, whose grid fits one
    // round of `round` workgroups.
    let most_within = |s: &Schedule, round: usize, per: usize, even: bool| {
        let (t, u) = (tiles(s), units(s));
        (1..=super::schedule::MAX_K_SPLIT as usize)
            .rev()
            .find(|&p| u % p == 0 && u / p >= per && (!even || (u / p) % 2 == 0) && t * p <= round)
    };
    let restage = |mut s: Schedule| {
        s.x_in_lds = s.x_in_lds && staged_fits(kernel, &s) && stage_and_sums_fit(arch, kernel, &s);
        s
    };
    match batch {
        2..=4 => {
            let round = 8 * sms;
            let (t, u, p) = (tiles(&s), units(&s), s.k_split.max(1) as usize);
            let full = |p: usize| {
                let last = (t * p) % round;
                last == 0 || 2 * last >= round
            };
            if full(p) {
                return s;
            }
            match (p + 1..=u / MMA_K_WARPS)
                .find(|&q| u % q == 0 && (u / q) % MMA_K_WARPS == 0 && full(q))
            {
                Some(q) => restage(Schedule {
                    k_split: q as u32,
                    ..s
                }),
                None => s,
            }
        }
        9..=16 => match most_within(&s, 6 * sms, MMA_K_WARPS, false) {
            Some(p) => restage(Schedule {
                k_split: p as u32,
                ..s
            }),
            None => s,
        },
        17..=32 if fp16_outputs(kernel) && s.k_unit_words % 8 == 0 => {
            let form = Schedule {
                k_unit_words: 8,
                mma_scale: MmaScale::Weight,
                ..s.clone()
            };
            match most_within(&form, 5 * sms, MMA_K_WARPS, false) {
                Some(p) => restage(Schedule {
                    k_split: p as u32,
                    ..form
                }),
                None => s,
            }
        }
        // Long K (17408 → 5120): the 64-column form was 2.6 % slower than the wide phased
        // tile there (77.83 vs 75.82 µs); that tile with units of 16 was faster (72.00), the
        // tuner's winner. Same K parts (`wide_phased` counts them at units of 8 and 16 alike
        // there: 8).
        57..=64 if k > ROUND_RULE_MAX_K => {
            let wide = s.columns_per_workgroup == 128 && s.x_phase_units == 1;
            match gptq_group_words(kernel) {
                Some(g) if wide && g % 16 == 0 && (k / 128) % s.k_split.max(1) as usize == 0 => {
                    Schedule {
                        k_unit_words: 16,
                        ..s
                    }
                }
                _ => s,
            }
        }
        57..=64 if fp16_outputs(kernel) && s.k_unit_words % 8 == 0 => {
            let form = Schedule {
                workgroup_size: 128,
                columns_per_workgroup: 64,
                threads_per_column: 2,
                k_unit_words: 8,
                mma_scale: MmaScale::Weight,
                x_in_lds: true,
                x_phase_units: 2,
                pipeline_depth: 1,
                ..s.clone()
            };
            // Units of 16 (a whole group of 128) where they keep the grid as large: the tuner's
            // winner at 5120 → 17408 and 5120 → 4352 (67.04 vs 76.90 µs and 29.58 vs 31.95 by
            // `ab`, one H100 call, bench/results/2026-12-07-gpu-tune-new-space/); at 4352 →
            // 5120 they would halve the K parts (17 units of 16 per part is odd), so units of 8.
            let wide = Schedule {
                k_unit_words: 16,
                ..form.clone()
            };
            let p8 = most_within(&form, 3 * sms, 2, true);
            let p16 = gptq_group_words(kernel)
                .filter(|g| g % 16 == 0)
                .and_then(|_| most_within(&wide, 3 * sms, 2, true));
            match (p8, p16) {
                (Some(p8), Some(p16)) if p16 >= p8 => Schedule {
                    k_split: p16 as u32,
                    ..wide
                },
                (Some(p), _) => Schedule {
                    k_split: p as u32,
                    ..form
                },
                (None, _) => s,
            }
        }
        _ => s,
    }
}

/// Whether `kernel` has one GEMV (the grid [`whole_rounds`] counts is its tiles times parts;
/// measured on `gemv_int4` alone).
fn single_gemv(kernel: &Kernel) -> bool {
    kernel
        .ops()
        .filter(|(_, op)| matches!(op.kind, OpKind::Gemv(_)))
        .count()
        == 1
}

/// The longest K the batch-57–64 rule of [`whole_rounds`] gives the 64-column form: it was
/// faster at K = 4352 and 5120 and slower at 17408.
const ROUND_RULE_MAX_K: usize = 8192;

/// Workgroups per SM [`wide_phased`] fills: the measured K parts (4 at 5120 → 17408, 8 at
/// 17408 → 5120) are the fewest of at least 4 that give two per SM.
const WIDE_PHASED_PER_SM: usize = 2;

/// The tensor-core GEMV in tiles of 128 columns (four column warps, one K warp, 128 lanes)
/// sharing one LDS stage of the activations, staged in phases of one unit of 8 K-words, the
/// scale on the decoded weights (FP16 outputs only), K in the fewest parts of at least 4 that
/// divide the units and give [`WIDE_PHASED_PER_SM`] workgroups per SM (none: `s` unchanged).
/// Measured twice on one H100 (`ab --timing graphs`, `gemv_int4` at batch 64): 5120 → 17408
/// 89.9 → 85.0 µs and 17408 → 5120 82.0 → 75.3 µs (`bench/results/2026-12-06-gpu-async-ring/`,
/// c7), 90.2 → 85.2 and 82.1 → 76.1 in the run before (`bench/results/2026-12-06-gpu-mma-phases/`,
/// c1): the activations read from L2 halve (Nsight Compute there: 191 → 104 MB). At batch 32
/// the same tile was slower (47.9 vs 42.0 µs at 5120 → 17408) and batch 33–56 was not
/// measured, so it takes only the batches of eight N tiles; the TP rank shapes (their K parts
/// follow the rule) and the fused and two-weight kernels (which keep what they had) were not
/// measured either.
fn wide_phased(arch: Arch, kernel: &Kernel, s: Schedule) -> Schedule {
    let (Some(k), Some(n)) = (common_k(kernel), gemv_ns(kernel).max()) else {
        return s;
    };
    if k % 64 != 0 || s.k_unit_words % 8 != 0 {
        return s;
    }
    let (units, tiles) = (k / 64, n.div_ceil(128));
    let target = WIDE_PHASED_PER_SM * arch.compute_units() as usize;
    let Some(parts) =
        (4..=super::schedule::MAX_K_SPLIT as usize).find(|p| units % p == 0 && tiles * p >= target)
    else {
        return s;
    };
    Schedule {
        workgroup_size: 128,
        columns_per_workgroup: 128,
        threads_per_column: 1,
        k_unit_words: 8,
        k_split: parts as u32,
        x_in_lds: true,
        x_phase_units: 1,
        mma_scale: MmaScale::Weight,
        pipeline_depth: 1,
        ..s
    }
}

/// Workgroups per SM the split-K default aims for where no grid stage bounds the grid
/// ([`mma_split`]): 3.5 × 132 = 462 on the H200. One TP 4 rank of `gemv_int4` alone
/// (5120 → 4352, 136 tiles, `bench/results/2026-12-01-h200-rank-alone/`): 2 parts (272
/// workgroups) 13.06 µs, 4 parts 10.59, 5 parts 9.79, 8 parts 9.76, 10 parts 10.69; at
/// 5120 → 17408 (544 tiles) 2 parts 18.43, 4 parts 20.16. More workgroups than stay resident
/// gain nothing; fewer leave too few bytes in flight.
const FILL_PER_SM: f64 = 3.5;

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

/// Whether a K part's staged activations and the cross-warp sums (one array per GEMV, growing
/// with the batch: 32 KiB at batch 64) fit the static LDS of one workgroup together.
fn stage_and_sums_fit(arch: Arch, kernel: &Kernel, s: &Schedule) -> bool {
    let (Some(k), batch) = (gptq_k(kernel), batch_of(kernel)) else {
        return false;
    };
    let part = k / s.k_split.max(1) as usize;
    let phase = s.x_phase_units as usize * s.k_unit_words as usize * 8;
    let rows = match phase {
        0 => part,
        phase => phase.min(part),
    };
    let staged = batch * rows * 2;
    let per_gemv = s.columns_per_workgroup as usize * batch * s.threads_per_column as usize * 4;
    let sums = gemv_count(kernel) * per_gemv;
    // A phased stage on the tensor cores fits wherever the larger of it and the first weight's
    // sums does (it lives in the sums where the two do not fit side by side, `mma.rs`).
    let phased = phase > 0 && phase < part && s.int4_dot == Int4Dot::Mma;
    let total = if phased {
        staged.max(per_gemv) + sums - per_gemv
    } else {
        staged + sums
    };
    total <= arch.max_static_lds_per_workgroup() as usize
}

/// The K warps of the tensor-core GEMV's 128-lane workgroup (`threads_per_column`).
const MMA_K_WARPS: usize = 4;

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
    let part = k / s.k_split.max(1) as usize;
    let rows = match s.x_phase_units as usize * s.k_unit_words as usize * 8 {
        0 => part,
        phase => phase.min(part),
    };
    let staged = batch * rows * 2;
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
///
/// Past batch 16 the rows go in tiles of 32 or 16 ([`Schedule::batch_tile`], [`floor_batch_tile`])
/// and every choice here is the one for a batch of a tile's rows (the registers are a tile's).
fn floor(kernel: &Kernel, s: Schedule) -> Schedule {
    // A norm in a GEMV prologue is workgroup-local (`prologue.rs`): no grid barrier.
    let feeds_gemv = gemv_prologue(kernel);
    let barrier = kernel.ops().any(|(_, op)| {
        matches!(op.kind, OpKind::RmsNorm(_)) && !op.results.iter().any(|v| feeds_gemv.contains(v))
    });
    // Past `FLOOR_UNTILED_BATCH` the rows go in tiles of `FLOOR_BATCH_TILE`, and every choice
    // below is the one for a batch of a tile's rows (its registers, its stage).
    let batch_tile = floor_batch_tile(kernel);
    let rows = if batch_tile > 0 {
        batch_tile as usize
    } else {
        batch_of(kernel)
    };
    let s = Schedule { batch_tile, ..s };
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
    let words = if rows == 1 && widest_gemv_group(kernel) > 1 {
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
    let staged = rows * gptq_k(kernel).unwrap_or(usize::MAX / 4) * 2;
    if staged <= FLOOR_STAGE_BYTES || !gemv_prologue(kernel).is_empty() {
        return Schedule {
            x_in_lds: true,
            ..s
        };
    }
    floor_split(kernel, (staged, rows), s)
}

/// The largest batch the gfx906 floor path computes in one pass of registers: at 16 rows
/// hipcc holds `gemv_int4` at 116 VGPRs and the fused kernel at 120-123 (occupancy 2); at 32
/// they take 193-214 (occupancy 1) and at 64 they spill (122-158 VGPRs' worth).
const FLOOR_UNTILED_BATCH: usize = 16;

/// Batch rows per tile past [`FLOOR_UNTILED_BATCH`] ([`Schedule::batch_tile`]) of a kernel with
/// a grid barrier, flags or two weights: the batch-16 schedules' registers (hipcc: 115-123
/// VGPRs, 2 waves per SIMD by registers), the weights read `batch / 16` times. Tiles of 8 (84
/// VGPRs for `gemv_int4`, 3 waves) read them twice as often and decode each weight for half
/// the rows: the MI50 model (`gfx906_model` `batch64_table`,
/// `bench/results/2026-12-06-mi50-model-tile-loop/`, the K loop counted inside the tile loop)
/// puts `gemv_int4` 5120 → 17408 at 368.3 / 725.5 µs at batch 32 / 64 in tiles of 8 and
/// 321.5 / 631.6 µs in tiles of 16; 4352 → 5120 at 102.8 / 194.8 against 92.5 / 174.1.
const FLOOR_BATCH_TILE: u32 = 16;

/// Batch rows per tile of a GEMV alone (one weight, no allreduce or norm: nothing that must be
/// co-resident): [`FLOOR_BATCH_TILE_GEMV`] rows with one packed column per lane
/// ([`floor_phases`]), so each decoded pair feeds twice the rows for the same accumulators
/// (hipcc: 99 VGPRs, 2 waves per SIMD; the dot products 88 % of the K loop's VALU where tiles
/// of 16 at 2 columns per lane have 82 %). The MI50 model
/// (`bench/results/2026-12-06-mi50-model-tile32/`): `gemv_int4` 5120 → 17408 at batch 32 / 64
/// 302.1 / 594.0 µs against 321.5 / 631.6 in tiles of 16, 4352 → 5120 83.5 / 156.6 against
/// 92.5 / 174.1. The fused kernel at 32 rows does not fit its LDS beside a co-resident grid,
/// the two-weight GEMV takes 211 VGPRs (occupancy 1): both keep tiles of 16.
const FLOOR_BATCH_TILE_GEMV: u32 = 32;

/// [`Schedule::batch_tile`] of the gfx906 floor path for `kernel`: past [`FLOOR_UNTILED_BATCH`]
/// rows [`FLOOR_BATCH_TILE_GEMV`] for a GEMV alone, else [`FLOOR_BATCH_TILE`], where no GEMV
/// prologue writes the activations (it writes every row at once); else 0.
fn floor_batch_tile(kernel: &Kernel) -> u32 {
    if batch_of(kernel) <= FLOOR_UNTILED_BATCH || !gemv_prologue(kernel).is_empty() {
        return 0;
    }
    let alone = widest_gemv_group(kernel) == 1
        && !kernel
            .ops()
            .any(|(_, op)| matches!(op.kind, OpKind::AllReduce(..) | OpKind::RmsNorm(..)));
    if alone {
        FLOOR_BATCH_TILE_GEMV
    } else {
        FLOOR_BATCH_TILE
    }
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
fn floor_split(kernel: &Kernel, (staged, batch): (usize, usize), s: Schedule) -> Schedule {
    let units = common_k(kernel).map_or(0, |k| k / 8 / s.k_unit_words as usize);
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
        // A tile of a GEMV alone past 16 rows (`FLOOR_BATCH_TILE_GEMV`): one column per lane.
        (_, false) if batch > FLOOR_UNTILED_BATCH => &[(1, 64), (2, 64)],
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
    // A GEMV alone past 16 rows: the slices' sums (32 rows × 64 columns × 4 slices, 32 KB
    // beside the 16 KB stage) would leave one workgroup per CU; added in slice order into one
    // array they take 8 KB, and hipcc's 99 VGPRs keep 2 waves per SIMD (the MI50 model's time
    // is the same either way: compute-bound; `bench/results/2026-12-06-mi50-model-tile32/`).
    let reduction = if batch > FLOOR_UNTILED_BATCH && !paired {
        Reduction::Serial
    } else {
        s.reduction
    };
    Some(Schedule {
        workgroup_size: lanes_per_row * slices,
        columns_per_workgroup: columns,
        words_per_iteration: words,
        threads_per_column: slices,
        k_unit_words: unit,
        x_in_lds: true,
        x_phase_units: slices,
        k_split: 1,
        reduction,
        ..s
    })
}

/// Whether the FP16 activations of one K part (`batch · K / k_split`) take at most
/// [`STAGE_MAX_BYTES`] of LDS, or the kernel has a GEMV prologue: its activation lives in LDS
/// anyway, and the stage (one K part) is the smallest place for it.
pub(super) fn staged_fits(kernel: &Kernel, s: &Schedule) -> bool {
    let Some(k) = gptq_k(kernel) else {
        return false;
    };
    // A recomputed prologue lives in LDS (the lowering refuses it when it does not fit); a
    // materialised one is read from global scratch like a loaded activation.
    if !gemv_prologue(kernel).is_empty() && !s.materialise_prologue {
        return true;
    }
    let part = k / s.k_split.max(1) as usize;
    // In phases (`Schedule::x_phase_units`) the stage holds one phase's K rows.
    let rows = match s.x_phase_units as usize * s.k_unit_words as usize * 8 {
        0 => part,
        phase => phase.min(part),
    };
    let staged = batch_of(kernel).saturating_mul(rows).saturating_mul(2);
    staged <= STAGE_MAX_BYTES
}

/// The most LDS one workgroup's staged activations may take: sm_90's 48 KiB of static shared
/// memory per workgroup less room for the cross-warp sums. Whether staging pays below it depends
/// on the grid: see [`staging_adds_no_wave`].
const STAGE_MAX_BYTES: usize = 40 * 1024;

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

/// Whether every output of `kernel` is an FP16 tensor.
fn fp16_outputs(kernel: &Kernel) -> bool {
    kernel.outputs().all(|b| {
        matches!(
            kernel.buffer(b).map(|d| &d.ty),
            Some(BufferType::Tensor(t)) if t.dtype == ScalarType::F16
        )
    })
}
