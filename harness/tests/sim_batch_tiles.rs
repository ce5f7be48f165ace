//! Batch tiles on the gfx906 dot2 path (`Schedule::batch_tile`, `codegen/src/lower/gemv.rs`
//! `gptq_rows`): every GPTQ kernel of the set at small shapes, the rows in tiles of 8 — batch 20:
//! two tiles in the tile loop and a last one of 4 — with the whole K part staged per tile,
//! staged in phases, packed per lane and split over K, clean in the protocol simulator over
//! seeded schedules against the f64 reference; the gfx906 defaults past batch 16 tiled; and the
//! barrier between tiles removed, caught by the simulator's race check.

use wavefuse_codegen::Arch;
use wavefuse_codegen::ir::{BufferType, OpKind};
use wavefuse_codegen::lower::{Int4Dot, MmaDecode, Reduction, Schedule, lower};
use wavefuse_codegen::lowered::{LoweredKernel, Stmt};
use wavefuse_codegen::sim::{FindingKind, PeerTable};
use wavefuse_harness::sim::{Prepared, SmallShapes, small_kernel, small_schedule, summary, sweep};
use wavefuse_kernels::{KernelId, Shapes};

const SEED: u64 = 0xB7_11E;
/// Schedules per combination: each of 20 rows runs in the simulator (the fused kernel's four
/// combinations take about a minute on 2 cores).
const SCHEDULES: u64 = 2;

/// K = 512 (or 1024 / TP for the fused kernel): 16 units of 4 K-words or more, so a phase of
/// the K slices' units is smaller than the part.
const SMALL: SmallShapes = SmallShapes {
    hidden: 512,
    ffn: 1024,
    ..SmallShapes::DEFAULT
};

/// `id` at [`SMALL`], batch `batch` in tiles of 8 on the dot2 path: 8 lanes × 4 packed columns
/// per K row, two-wave workgroups, `parts` K parts, staged or packed per lane, in four phases.
fn tiled(
    id: KernelId,
    tp: u32,
    batch: usize,
    parts: u32,
    x_in_lds: bool,
    phased: bool,
) -> Prepared {
    tiled_with(id, (tp, batch), parts, x_in_lds, phased, |s| s)
}

/// [`tiled`] with `adjust` applied to the schedule last.
fn tiled_with(
    id: KernelId,
    (tp, batch): (u32, usize),
    parts: u32,
    x_in_lds: bool,
    phased: bool,
    adjust: impl FnOnce(Schedule) -> Schedule,
) -> Prepared {
    let arch = Arch::Gfx906;
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    };
    let ir = small_kernel(id, &shapes, &SMALL).expect("small kernel");
    let small = small_schedule(arch, &ir);
    let slices = small.workgroup_size / 8;
    let k = ir.ops().find_map(|(_, op)| match &op.kind {
        OpKind::Gemv(g) => match &ir.buffer(g.weight)?.ty {
            BufferType::Weight(w) => Some(w.k as u32),
            _ => None,
        },
        _ => None,
    });
    let part_units = k.expect("a GPTQ GEMV") / 8 / 4 / parts;
    let s = Schedule {
        int4_dot: Int4Dot::Dot2,
        mma_decode: MmaDecode::Fma,
        x_in_lds,
        byte_offsets: true,
        words_per_iteration: 4,
        columns_per_workgroup: 32,
        threads_per_column: slices,
        k_unit_words: 4,
        accumulators: 1,
        k_split: parts,
        x_phase_units: if phased { part_units / 4 } else { 0 },
        batch_tile: 8,
        ..small
    };
    let s = adjust(s);
    let lowered = lower(&ir, arch, &s).unwrap_or_else(|e| panic!("{id} batch {batch}: {e}"));
    let text = lowered.to_string();
    assert!(
        text.contains("batch tiles (batch_tile = 8)"),
        "{id}: not tiled:\n{text}"
    );
    Prepared {
        ir,
        lowered,
        shapes: Some(shapes),
        peer_table: PeerTable::Shared,
    }
}

fn run(id: KernelId, tp: u32) {
    let batch = 20;
    for (parts, x_in_lds, phased) in [
        (1, true, false),
        (1, true, true),
        (1, false, false),
        (2, true, false),
    ] {
        let p = tiled(id, tp, batch, parts, x_in_lds, phased);
        let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
        let text = summary(&p, &r);
        eprintln!(
            "{id}@gfx906 tp {tp} batch {batch} in tiles of 8, k_split {parts} x_in_lds {x_in_lds} phased {phased}: {}",
            text.lines().next().unwrap_or("")
        );
        assert!(r.findings.is_empty() && r.failing == 0, "{text}");
    }
}

#[test]
fn batch_tiles_of_gemv_int4_match_the_reference_gfx906() {
    run(KernelId::GemvInt4, 1);
}

#[test]
fn batch_tiles_of_the_two_weight_gemv_match_the_reference_gfx906() {
    run(KernelId::GemvInt4DualSilu, 1);
}

#[test]
fn batch_tiles_of_gemv_int4_qkv_match_the_reference_gfx906() {
    run(KernelId::GemvInt4Qkv, 1);
}

#[test]
fn batch_tiles_of_the_fused_kernel_match_the_reference_gfx906() {
    run(KernelId::GemvInt4AllreduceRmsnorm, 2);
}

/// The gfx906 default tiles the batch past 16 rows and not at 16 or below: a GEMV alone (one
/// weight, no allreduce or norm) 32 rows per tile, the two-weight GEMV and the fused kernel 16;
/// sm_90 (the tensor-core path) never.
#[test]
fn the_gfx906_default_tiles_the_batch_past_16_gfx906() {
    for (id, rows) in [
        (KernelId::GemvInt4, 32),
        (KernelId::GemvInt4DualSilu, 16),
        (KernelId::GemvInt4Qkv, 32),
        (KernelId::GemvInt4AllreduceRmsnorm, 16),
    ] {
        for (batch, tile) in [(8, 0), (16, 0), (17, rows), (32, rows), (64, rows)] {
            let ir = id.build(&Shapes {
                batch,
                ..Shapes::qwen27b(4)
            });
            let s = Schedule::default_for(Arch::Gfx906, &ir);
            assert_eq!(s.batch_tile, tile, "{id} batch {batch}: {s:?}");
            let cuda = Schedule::default_for(Arch::Sm90, &ir);
            assert_eq!(cuda.batch_tile, 0, "{id}@sm90 batch {batch}");
        }
    }
}

/// The gfx906 default past batch 16 at the small shapes, TP 2, where the tiles do not divide
/// the batch — `gemv_int4` in tiles of 32: 33 = 32 + 1, 50 = 32 + 18; the fused GEMV +
/// allreduce + RMSNorm kernel in tiles of 16: 33 = 16 + 16 + 1, 50 = 3 · 16 + 2 — clean in the
/// simulator over seeded schedules against the f64 reference (FP16 outputs: relative L2 ≤ 1e-3,
/// `sim::tolerance`), on fresh random inputs (`sim_batch.rs` runs every kernel at 16, 32 and
/// 64, whole tiles).
#[test]
fn the_gfx906_default_with_a_short_last_tile_matches_the_reference_gfx906() {
    use wavefuse_harness::sim::{Config, prepare_config};
    for (id, tile) in [
        (KernelId::GemvInt4, 32),
        (KernelId::GemvInt4AllreduceRmsnorm, 16),
    ] {
        for batch in [33, 50] {
            let c = Config {
                batch,
                ..Config::new(2, Arch::Gfx906)
            };
            let p = prepare_config(id, &c, &SmallShapes::DEFAULT)
                .unwrap_or_else(|e| panic!("{id} batch {batch}: {e}"));
            let text = p.lowered.to_string();
            assert!(
                text.contains(&format!("batch tiles (batch_tile = {tile})"))
                    && text.contains(&format!("then the last {} row(s)", batch % tile)),
                "{id} batch {batch}: not in tiles of {tile} with a short last one"
            );
            let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &r);
            eprintln!(
                "{id}@gfx906 tp 2 batch {batch} (default, tiles of {tile}): {}",
                text.lines().next().unwrap_or("")
            );
            assert!(r.findings.is_empty() && r.failing == 0, "{text}");
        }
    }
}

/// An override that tiles a path without tiles is refused with the reason.
#[test]
fn invalid_batch_tile_on_the_fma_path_is_refused_gfx906() {
    let ir = KernelId::GemvInt4.build(&Shapes {
        batch: 16,
        ..Shapes::qwen27b(4)
    });
    let s = Schedule::default_for(Arch::Gfx906, &ir)
        .with_overrides("int4_dot=fma,x_in_lds=false,x_phase_units=0,batch_tile=8")
        .expect("parses");
    let e = lower(&ir, Arch::Gfx906, &s)
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("batch_tile = 8 is lowered on the dot2 and tensor-core paths only"),
        "{e}"
    );
}

/// `block` with the workgroup barrier that closes each pass of the batch-tile loop removed (the
/// last barrier directly in the body of the `for` over `batch_tile`): the barrier after which the
/// next tile's activations overwrite the stage that this tile's lanes read (DESIGN.md §5.2: LDS
/// reused across tiles). Counts the loops it cut in `cut`.
fn without_the_tile_barrier(block: Vec<Stmt>, k: &LoweredKernel, cut: &mut usize) -> Vec<Stmt> {
    block
        .into_iter()
        .map(|s| match s {
            Stmt::For {
                var,
                start,
                end,
                step,
                mut body,
            } if k.regs[var].hint == "batch_tile" => {
                let last = body
                    .iter()
                    .rposition(|s| matches!(s, Stmt::WorkgroupBarrier))
                    .expect("a barrier closes each tile");
                body.remove(last);
                *cut += 1;
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                }
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => Stmt::For {
                var,
                start,
                end,
                step,
                body: without_the_tile_barrier(body, k, cut),
            },
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => Stmt::If {
                cond,
                then_body: without_the_tile_barrier(then_body, k, cut),
                else_body: without_the_tile_barrier(else_body, k, cut),
            },
            s => s,
        })
        .collect()
}

/// `gemv_int4` at batch 20 in tiles of 8, the activations staged per tile, in two-wave
/// workgroups (16 K slices) whose slices' sums all fit in LDS (`reduction = slices`, 40 KiB:
/// each tile's rows have their own, so the only LDS two tiles share is the activations' stage).
fn tiles_sharing_only_the_stage() -> Prepared {
    tiled_with(KernelId::GemvInt4, (1, 20), 1, true, false, |s| Schedule {
        workgroup_size: 128,
        threads_per_column: 16,
        reduction: Reduction::Slices,
        ..s
    })
}

/// Mutant: [`tiles_sharing_only_the_stage`] without the barrier between tiles (the one that
/// closes each pass of the tile loop; the last tile's, outside the loop, still orders the
/// slices' sums before they are added). A lane that is done with tile 0 stages tile 1's rows
/// over the activations that slower lanes of its workgroup are still reading (§5.2: LDS reused
/// across tiles): the simulator's race check reports those reads as stale (and the outputs
/// mismatch), at lane and at wave granularity (every schedule of the sweep, measured; at least
/// half required); the unmodified kernel is clean on the same schedules.
#[test]
fn batch_tiles_without_the_barrier_between_tiles_are_caught_gfx906() {
    let p = tiles_sharing_only_the_stage();
    let text = p.lowered.to_string();
    assert!(
        text.contains("cross-slice reduction: each slice's sums to LDS")
            && !text.contains("serial"),
        "not the slices' reduction:\n{text}"
    );
    let clean = sweep(&p, SEED, 0, MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
    assert!(
        clean.findings.is_empty() && clean.failing == 0,
        "{}",
        summary(&p, &clean)
    );
    let mut m = tiles_sharing_only_the_stage();
    let mut cut = 0;
    m.lowered.body =
        without_the_tile_barrier(std::mem::take(&mut m.lowered.body), &p.lowered, &mut cut);
    assert_eq!(cut, 1, "one batch-tile loop");
    let r = sweep(&m, SEED, 0, MUTANT_SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&m, &r);
    eprintln!("{text}");
    assert!(
        r.failing * 2 >= MUTANT_SCHEDULES,
        "caught on only {} of {MUTANT_SCHEDULES} schedules:\n{text}",
        r.failing
    );
    assert!(
        r.findings
            .iter()
            .any(|f| f.first.kind == FindingKind::StaleRead),
        "no stale read reported:\n{text}"
    );
}

/// Schedules the mutant is swept over (it must fail on at least half).
const MUTANT_SCHEDULES: u64 = 6;
