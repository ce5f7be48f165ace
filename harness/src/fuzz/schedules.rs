//! The schedules a fuzzed kernel is lowered with: the target's default, the simulator's small
//! schedule ([`crate::sim::small_schedule`]), and random ones drawn within the relations the
//! lowering checks (`codegen/src/lower/gemv.rs`, `point.rs`, `splitk.rs`; the ranges of
//! [`Schedule::ranges`]), so that most of them lower. A schedule the lowering still refuses is
//! counted as a `schedule` refusal, by reason, like any other.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use wavefuse::ir::ops::{Compression, OpKind};
use wavefuse::ir::{BufferType, Kernel, WeightFormat};
use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::{
    AllreduceProtocol, Int4Dot, Int4Scaling, MmaDecode, MmaScale, NibbleDecode, Schedule,
};

/// One schedule to lower a kernel with.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// `default`, `small` or `random`.
    pub label: &'static str,
    /// The schedule.
    pub schedule: Schedule,
}

/// The default, the small schedule and `random` random ones for `k` on `arch`.
pub fn candidates(arch: Arch, k: &Kernel, rng: &mut ChaCha8Rng, random: usize) -> Vec<Candidate> {
    let mut out = vec![
        Candidate {
            label: "default",
            schedule: Schedule::default_for(arch, k),
        },
        Candidate {
            label: "small",
            schedule: crate::sim::small_schedule(arch, k),
        },
    ];
    for _ in 0..random {
        out.push(Candidate {
            label: "random",
            schedule: random_schedule(arch, k, rng),
        });
    }
    out
}

/// `field=value` pairs that turn `Schedule::default_for(arch, k)` into `s` (empty: the default):
/// what a finding prints, and what `Schedule::with_overrides` reads back.
pub fn spec(arch: Arch, k: &Kernel, s: &Schedule) -> String {
    let base = serde_json::to_value(Schedule::default_for(arch, k)).expect("serialises");
    let this = serde_json::to_value(s).expect("serialises");
    let (Some(base), Some(this)) = (base.as_object(), this.as_object()) else {
        unreachable!("a struct serialises to an object")
    };
    this.iter()
        .filter(|(key, v)| base.get(*key) != Some(v))
        .map(|(key, v)| match v {
            serde_json::Value::String(s) => format!("{key}={s}"),
            other => format!("{key}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, xs: &[T]) -> T {
    xs[rng.random_range(0..xs.len())]
}

/// The kernel's GEMV weight `(format, K, N)` per rank, if it has one.
fn gemv_weight(k: &Kernel) -> Option<(WeightFormat, usize, usize)> {
    k.ops().find_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match k.buffer(g.weight)?.local_type() {
            BufferType::Weight(w) => Some((w.format, w.k, w.n)),
            BufferType::Tensor(_) => None,
        },
        _ => None,
    })
}

fn int8_block(k: &Kernel) -> Option<usize> {
    k.ops().find_map(|(_, op)| match &op.kind {
        OpKind::AllReduce(a) => match a.compression {
            Compression::Int8 { block } => Some(block),
            Compression::None => None,
        },
        _ => None,
    })
}

/// Batch rows of the kernel's first 2-D buffer.
/// The kernel's batch: the rows of its first two-dimensional tensor (1 without one).
pub(crate) fn batch(k: &Kernel) -> usize {
    k.buffers()
        .find_map(|(_, d)| match &d.ty {
            BufferType::Tensor(t) if t.shape.len() == 2 => Some(t.shape[0]),
            _ => None,
        })
        .unwrap_or(1)
}

/// A random schedule for `k` on `arch` that satisfies the relations the lowering checks for the
/// kernel's family (elementwise / INT8 allreduce, FP16 GEMV, GPTQ FMA / dot2 / tensor-core).
/// Workgroups stay at most 256 lanes so that the simulator runs it quickly.
pub fn random_schedule(arch: Arch, k: &Kernel, rng: &mut ChaCha8Rng) -> Schedule {
    let wave = arch.wave_size();
    let base = Schedule::default_for(arch, k);
    let protocol = pick(rng, &[AllreduceProtocol::Pull, AllreduceProtocol::Push]);
    // A persistent grid for kernels of several GEMV stages (ignored by one stage): a cap of 1, 2
    // or 5 workgroups makes every stage without a grid-wide wait loop over its tile parts.
    let max_grid = pick(rng, &[0, 0, 1, 2, 5]);
    // A GEMV prologue computed once into global memory behind a grid barrier, one time in four
    // (ignored by a kernel without one).
    let materialise_prologue = rng.random_bool(0.25);
    // The next GEMV stage's weights prefetched into L2 before each stage barrier, one time in two
    // (sm_90 only; ignored by a kernel of one stage).
    let prefetch_next_stage = rng.random_bool(0.5);
    let base = Schedule {
        protocol,
        max_grid,
        materialise_prologue,
        prefetch_next_stage,
        ..base
    };
    let Some((format, kdim, n)) = gemv_weight(k) else {
        let wg = wave * pick(rng, &[1, 2, 4]).min(256 / wave);
        let cols = match int8_block(k) {
            Some(block) if block as u32 % wave == 0 => wg * (block as u32 / wave),
            Some(_) => return base,
            None if rng.random_bool(0.5) => wg * pick(rng, &[1, 2, 4]),
            None => rng.random_range(1..=2 * wg),
        };
        return Schedule {
            workgroup_size: wg,
            columns_per_workgroup: cols,
            ..base
        };
    };
    match format {
        WeightFormat::F16 => {
            let t = wave * pick(rng, &[1, 2]);
            let c = pick(rng, &[1, 2, 4]).min(256 / t).max(1);
            let wpis: Vec<u32> = [1, 2, 4, 8]
                .into_iter()
                .filter(|w| kdim % (2 * *w as usize) == 0)
                .collect();
            Schedule {
                workgroup_size: t * c,
                threads_per_column: t,
                columns_per_workgroup: c,
                words_per_iteration: if wpis.is_empty() { 1 } else { pick(rng, &wpis) },
                accumulators: pick(rng, &[1, 2, 4]),
                ..base
            }
        }
        WeightFormat::Gptq(l) => {
            let group_words = (l.group.rows(kdim) / 8).max(1) as u32;
            // The tensor cores take batch 1–64 (8 N tiles of 8 rows; past that the lowering
            // refuses, with the limit).
            // Past batch 8 (where they are the default) three times in four.
            // A stripe grid (`stripe_workgroups`) one time in five for a GEMV without an
            // allreduce or norm, drawn from a clone of the generator so that every other draw
            // (and the kernels and schedules of a seed) stays as it was.
            let stripe = {
                let mut side = rng.clone();
                let alone = !k
                    .ops()
                    .any(|(_, o)| matches!(o.kind, OpKind::AllReduce(_) | OpKind::RmsNorm(..)));
                let draw = side.random_range(0..5u32) == 0;
                let g = side.random_range(1..=48u32);
                if alone && draw { g } else { 0 }
            };
            let mma = arch.has_fp16_mma() && batch(k) <= 64 && group_words % 4 == 0;
            let s = if mma && rng.random_bool(if batch(k) > 8 { 0.75 } else { 0.5 }) {
                mma_schedule(rng, base, kdim, group_words, batch(k))
            } else {
                int4_schedule(arch, rng, base, (kdim, n, batch(k)), group_words)
            };
            // (Not with batch tiles: the CI's count of simulated batch-tile lowerings stays.)
            Schedule {
                stripe_workgroups: if s.batch_tile == 0 { stripe } else { 0 },
                ..s
            }
        }
        WeightFormat::Awq(_) => base,
    }
}

/// A divisor of `words` (at most 16) for `k_unit_words`; `multiple_of` restricts to multiples.
fn unit(rng: &mut ChaCha8Rng, words: u32, multiple_of: u32) -> u32 {
    let units: Vec<u32> = (1..=words.min(16))
        .filter(|u| words % u == 0 && u % multiple_of == 0)
        .collect();
    if units.is_empty() {
        multiple_of
    } else {
        pick(rng, &units)
    }
}

/// Split-K parts (1 mostly; 2 or 4 when they divide the K units).
fn k_split(rng: &mut ChaCha8Rng, kdim: usize, unit: u32) -> u32 {
    let units = kdim as u32 / 8 / unit.max(1);
    let parts: Vec<u32> = [2, 4].into_iter().filter(|p| units % p == 0).collect();
    if parts.is_empty() || rng.random_bool(0.7) {
        1
    } else {
        pick(rng, &parts)
    }
}

/// Rows per batch tile (`Schedule::batch_tile`) of the dot2 path, one time in two past batch 1
/// (three in four past batch 8, where the gfx906 default tiles too):
/// a power of two below the batch (the tiles the defaults and the tuner use) or any count below
/// it (a last, shorter tile of any size; tiles of one row); else 0, one pass over every row. The
/// FMA path refuses tiles, so it gets none (the tensor-core path draws its own: `mma_schedule`).
fn batch_tile(rng: &mut ChaCha8Rng, dot2: bool, batch: usize) -> u32 {
    if !dot2 || batch < 2 || rng.random_bool(if batch > 8 { 0.25 } else { 0.5 }) {
        return 0;
    }
    let below = batch as u32 - 1;
    let powers: Vec<u32> = [1, 2, 4, 8, 16, 32]
        .into_iter()
        .filter(|t| *t <= below)
        .collect();
    if rng.random_bool(0.5) {
        pick(rng, &powers)
    } else {
        rng.random_range(1..=below)
    }
}

/// The GPTQ FMA or (gfx906) dot2 tiling: `lanes_per_row` lanes × `v` words per K row,
/// `workgroup / lanes_per_row` K slices; on the dot2 path the batch rows in tiles, at times.
fn int4_schedule(
    arch: Arch,
    rng: &mut ChaCha8Rng,
    base: Schedule,
    (kdim, n, batch): (usize, usize, usize),
    group_words: u32,
) -> Schedule {
    let wave = arch.wave_size();
    let vs: Vec<u32> = [1, 2, 4, 8]
        .into_iter()
        .filter(|v| n % *v as usize == 0)
        .collect();
    let v = if vs.is_empty() { 1 } else { pick(rng, &vs) };
    let lanes_per_row = pick(rng, &[4, 8, 16, 32]);
    let wg = wave * pick(rng, &[1, 2, 4]).min(256 / wave);
    let dot2 = arch.has_dot2_f32_f16() && rng.random_bool(0.5);
    let k_unit_words = unit(rng, group_words, 1);
    let k_split = k_split(rng, kdim, k_unit_words);
    let x_in_lds = dot2 && rng.random_bool(0.5);
    // The dot2 stage in phases, one time in two: a divisor of the part's units smaller than the
    // part (a kernel whose activation a prologue computes refuses it, which the fuzzer then
    // reports).
    let part_units = kdim / 8 / k_unit_words as usize / k_split as usize;
    let phases: Vec<u32> = (1..part_units)
        .filter(|p| part_units % p == 0)
        .map(|p| p as u32)
        .collect();
    let x_phase_units = if x_in_lds && !phases.is_empty() && rng.random_bool(0.5) {
        pick(rng, &phases)
    } else {
        0
    };
    Schedule {
        workgroup_size: wg,
        columns_per_workgroup: v * lanes_per_row,
        threads_per_column: wg / lanes_per_row,
        words_per_iteration: v,
        k_unit_words,
        k_split,
        accumulators: pick(rng, &[1, 2]),
        int4_dot: if dot2 { Int4Dot::Dot2 } else { Int4Dot::Fma },
        nibble_decode: pick(rng, &[NibbleDecode::Convert, NibbleDecode::Magic]),
        int4_scaling: pick(rng, &[Int4Scaling::PerWeight, Int4Scaling::PerUnit]),
        mma_decode: pick(rng, &[MmaDecode::Shift, MmaDecode::Fma]),
        x_in_lds,
        x_phase_units,
        byte_offsets: rng.random_bool(0.5),
        stream_weights: rng.random_bool(0.3),
        pipeline_depth: 1,
        batch_tile: batch_tile(rng, dot2, batch),
        ..base
    }
}

/// The tensor-core tiling (sm_90): 16-byte loads, 32-column warps, `k_warps` K-slicing warps;
/// past batch 8, one time in two, the rows in passes of a multiple of 8 (`batch_tile`, which
/// takes unstaged activations and no ring: a kernel whose activation a prologue computes
/// refuses it, and the fuzzer counts the refusal).
fn mma_schedule(
    rng: &mut ChaCha8Rng,
    base: Schedule,
    kdim: usize,
    group_words: u32,
    batch: usize,
) -> Schedule {
    let cw = pick(rng, &[1, 2]);
    let k_warps = pick(rng, &[1, 2, 4]);
    let k_unit_words = unit(rng, group_words, 4);
    let k_split = k_split(rng, kdim, k_unit_words);
    let x_in_lds = rng.random_bool(0.5);
    // The stage in phases, one time in three where it is staged: a multiple of the K warps that
    // divides the part's units and is smaller than the part (a kernel whose activation a
    // prologue computes ignores it).
    let part_units = kdim / 8 / k_unit_words as usize / k_split as usize;
    let phases: Vec<u32> = (1..part_units)
        .filter(|p| part_units % p == 0 && p % k_warps as usize == 0)
        .map(|p| p as u32)
        .collect();
    let x_phase_units = if x_in_lds && !phases.is_empty() && rng.random_bool(1.0 / 3.0) {
        pick(rng, &phases)
    } else {
        0
    };
    let async_stages = if rng.random_bool(1.0 / 3.0) {
        pick(rng, &[2, 3, 4])
    } else {
        0
    };
    // With the ring, phases are one unit per K warp (the stage's ring of phase buffers).
    let x_phase_units = if async_stages > 0 && x_phase_units != 0 {
        if phases.contains(&k_warps) {
            k_warps
        } else {
            0
        }
    } else {
        x_phase_units
    };
    let s = Schedule {
        int4_dot: Int4Dot::Mma,
        workgroup_size: 32 * cw * k_warps,
        columns_per_workgroup: 32 * cw,
        threads_per_column: k_warps,
        words_per_iteration: 4,
        k_unit_words,
        k_split,
        // Phases pipelined only at one unit per K warp per phase and an even count of them;
        // the asynchronous weight ring (a third of the draws) only at depth 1.
        pipeline_depth: if async_stages == 0
            && (x_phase_units == 0
                || (x_phase_units == k_warps && (part_units / x_phase_units as usize) % 2 == 0))
        {
            pick(rng, &[1, 2])
        } else {
            1
        },
        async_stages,
        mma_decode: pick(rng, &[MmaDecode::Shift, MmaDecode::Fma]),
        // The scale per unit only: the scale on the weights rounds (q − z)·s to FP16, beyond
        // an FP32 output's tolerance (its own tests: `harness/tests/sim_mma_batch.rs`).
        mma_scale: MmaScale::Unit,
        x_in_lds,
        x_phase_units,
        stream_weights: rng.random_bool(0.5),
        byte_offsets: rng.random_bool(0.3),
        batch_tile: 0,
        ..base
    };
    // The weights' L2 prefetch (register loads only), a third of the draws: a hint, so the
    // simulator checks only that every line it asks for is in the arrays.
    let l2_prefetch_units = if async_stages == 0 && rng.random_bool(1.0 / 3.0) {
        pick(rng, &[1, 2, 4, 8])
    } else {
        0
    };
    let tiles: Vec<u32> = (8..batch as u32).step_by(8).collect();
    if batch > 8 && !tiles.is_empty() && rng.random_bool(0.5) {
        return Schedule {
            batch_tile: pick(rng, &tiles),
            x_in_lds: false,
            x_phase_units: 0,
            async_stages: 0,
            pipeline_depth: pick(rng, &[1, 2]),
            l2_prefetch_units,
            ..s
        };
    }
    Schedule {
        l2_prefetch_units,
        ..s
    }
}
