//! Batch 16, 32 and 64 (issue #40, item 1): every kernel of the set at small shapes on both
//! targets, lowered with the simulator's schedule (or, where its LDS does not fit, a narrower
//! form) and run in the protocol simulator against the f64 reference over a few seeded
//! schedules, with the list of what no form lowers; and, at the model shapes with the default policy
//! (what `wavefuse emit` prints), the explicit list of what the lowering refuses at those
//! batches, each refusal naming the kernel, the batch, the LDS limit and a batch that lowers.

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::lower;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::generate::generate;
use wavefuse_harness::sim::{
    Config, Prepared, SmallShapes, prepare_config, small_kernel, small_schedule, summary, sweep,
};
use wavefuse_harness::{KernelId, Shapes};

const BATCHES: [usize; 3] = [16, 32, 64];
const ARCHS: [Arch; 2] = [Arch::Gfx906, Arch::Sm90];
/// Few schedules: each lane of each batch row runs in the simulator.
const SCHEDULES: u64 = 4;
const SEED: u64 = 0xB64;

/// What neither the simulator's schedule ([`prepare_config`]) nor a [`NARROWER`] form lowers at
/// the small shapes, TP 2: on gfx906 at batch 64 the two-weight GEMV and the fused kernel, whose
/// cross-slice sums (and, fused, the norm's stash) outgrow the 64 KiB of LDS even with one wave
/// of 8 K slices. Everything else lowers and must be clean; the refusal (of the simulator's
/// schedule) is asserted to name the kernel, the batch, the limit and a batch that fits.
fn refused_small(arch: Arch, batch: usize) -> &'static [KernelId] {
    use KernelId::*;
    match (arch, batch) {
        (Arch::Gfx906, 64) => &[GemvInt4DualSilu, GemvInt4AllreduceRmsnorm],
        _ => &[],
    }
}

fn simulate_every_kernel_at(arch: Arch) {
    let mut refusals = Vec::new();
    for batch in BATCHES {
        for id in KernelId::ALL {
            let c = Config {
                batch,
                ..Config::new(2, arch)
            };
            let refuse = refused_small(arch, batch).contains(&id);
            let (p, form) = match prepare_config(id, &c, &SmallShapes::DEFAULT) {
                Ok(p) => (p, "the simulator's schedule"),
                Err(e) => {
                    let m = e.to_string();
                    assert_lds_refusal(id, arch, batch, &m);
                    match narrower(id, arch, batch) {
                        Some(found) => found,
                        None => {
                            eprintln!("{id}@{arch} tp 2 batch {batch}: refused: {m}");
                            refusals.push(format!("{id}@{arch} batch {batch}: {m}"));
                            continue;
                        }
                    }
                }
            };
            assert!(!refuse, "{id}@{arch} batch {batch} lowered ({form})");
            let r = sweep(&p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
            let text = summary(&p, &r);
            eprintln!(
                "{id}@{arch} tp 2 batch {batch} ({form}): {}",
                text.lines().next().unwrap_or("")
            );
            assert!(r.findings.is_empty() && r.failing == 0, "{text}");
        }
    }
    for batch in BATCHES {
        for id in refused_small(arch, batch) {
            assert!(
                refusals
                    .iter()
                    .any(|r| r.starts_with(&format!("{id}@{arch} batch {batch}:"))),
                "{id}@{arch} batch {batch} should be refused"
            );
        }
    }
    let expected: usize = BATCHES.iter().map(|&b| refused_small(arch, b).len()).sum();
    assert_eq!(refusals.len(), expected, "{refusals:#?}");
}

/// Where the simulator's schedule outgrows the LDS (gfx906: 16 K slices of 32 columns, their
/// cross-slice sums `32 · 16 · batch · 4` bytes), the first of these narrower forms that lowers:
/// one wave of 8 K slices, then also the activations read from global memory instead of staged.
const NARROWER: [(&str, &str); 2] = [
    (
        "one wave, 8 K slices",
        "workgroup_size=64,threads_per_column=8",
    ),
    (
        "one wave, 8 K slices, x not staged",
        "workgroup_size=64,threads_per_column=8,x_in_lds=false",
    ),
];

fn narrower(id: KernelId, arch: Arch, batch: usize) -> Option<(Prepared, &'static str)> {
    let shapes = Shapes {
        batch,
        ..Shapes::qwen27b(2)
    };
    let ir = small_kernel(id, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
    NARROWER.iter().find_map(|&(form, spec)| {
        let s = small_schedule(arch, &ir).with_overrides(spec).ok()?;
        let lowered = lower(&ir, arch, &s).ok()?;
        Some((
            Prepared {
                ir: ir.clone(),
                lowered,
                shapes: Some(shapes),
                peer_table: PeerTable::Shared,
            },
            form,
        ))
    })
}

/// A refusal for LDS names the kernel, the batch, the target's limit and a batch that fits.
fn assert_lds_refusal(id: KernelId, arch: Arch, batch: usize, m: &str) {
    for needle in [
        id.name(),
        &format!("at batch {batch}"),
        "bytes of LDS exceed",
        &arch.to_string(),
    ] {
        assert!(m.contains(needle), "`{needle}` not in: {m}");
    }
    assert!((1..batch).contains(&fits_up_to(m)), "{m}");
}

#[test]
fn every_kernel_at_batch_16_32_64_is_clean_in_the_simulator_gfx906() {
    simulate_every_kernel_at(Arch::Gfx906);
}

#[test]
fn every_kernel_at_batch_16_32_64_is_clean_in_the_simulator_sm90() {
    simulate_every_kernel_at(Arch::Sm90);
}

/// What the default policy refuses at the model shapes, TP 4 (Qwen 3.5 27B, the snapshots'
/// shapes): the LDS of one workgroup (gfx906 64 KiB, sm_90 48 KiB declared statically) no longer
/// holds the staged activations and the cross-slice sums (the GEMVs) or the norm's stash (the
/// RMSNorm kernels). Everything else lowers at batch 16, 32 and 64.
fn refused(arch: Arch, batch: usize) -> &'static [KernelId] {
    use KernelId::*;
    match (arch, batch) {
        (_, 16) => &[],
        (Arch::Gfx906, _) => &[
            GemvInt4,
            GemvInt4DualSilu,
            GemvInt4Qkv,
            AllreduceResidualRmsnorm,
            GemvInt4AllreduceRmsnorm,
        ],
        // The tensor-core GEMV (issue #40 item 2) keeps its cross-warp sums within the LDS to
        // batch 64 (32 KiB, the activations unstaged); two weights take it only to batch 32
        // (`sim_mma_batch.rs`), and the FMA path's sums do not fit past that.
        (Arch::Sm90, 32) => &[AllreduceResidualRmsnorm],
        (Arch::Sm90, _) => &[GemvInt4DualSilu, AllreduceResidualRmsnorm],
    }
}

/// The batch a refusal says still fits (`… fits up to batch N`).
fn fits_up_to(message: &str) -> usize {
    let tail = message
        .split("fits up to batch ")
        .nth(1)
        .unwrap_or_else(|| panic!("no batch that fits in: {message}"));
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a batch")
}

#[test]
fn model_shapes_at_batch_16_32_64_lower_or_are_refused_with_the_reason() {
    for arch in ARCHS {
        for batch in BATCHES {
            let mut got = vec![];
            for id in KernelId::ALL {
                match generate(id, arch, 4, batch) {
                    Ok(_) => {}
                    Err(e) => {
                        let m = e.to_string();
                        eprintln!("{id}@{arch} batch {batch} refused: {m}");
                        got.push(id);
                        assert_lds_refusal(id, arch, batch, &m);
                        // The batch it names as fitting does lower (the policy's schedule there).
                        let fits = fits_up_to(&m);
                        if let Err(e) = generate(id, arch, 4, fits) {
                            panic!(
                                "{id}@{arch}: the refusal at batch {batch} names batch {fits}, which is refused: {e}"
                            );
                        }
                    }
                }
            }
            assert_eq!(got, refused(arch, batch), "{arch} batch {batch}");
        }
    }
}

/// The sm_90 tensor-core INT4 path takes the batch as `ceil(batch / 8)` N tiles of the MMA's 8
/// columns: asked for at batch 8 to 64 it lowers (past 64 it is refused with the limit:
/// `sim_mma_batch.rs`).
#[test]
fn int4_mma_lowers_at_batch_8_to_64_sm90() {
    let arch = Arch::Sm90;
    for batch in [8, 16, 32, 64] {
        let shapes = Shapes {
            batch,
            ..Shapes::qwen27b(1)
        };
        let ir =
            small_kernel(KernelId::GemvInt4, &shapes, &SmallShapes::DEFAULT).expect("small kernel");
        let s = small_schedule(arch, &ir)
            .with_overrides("int4_dot=mma,words_per_iteration=4,k_unit_words=4")
            .expect("parses");
        if let Err(e) = lower(&ir, arch, &s) {
            panic!("batch {batch}: {e}");
        }
    }
}
