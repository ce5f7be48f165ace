//! GEMV prologues (`codegen/src/lower/prologue.rs`): the example's `rmsnorm_gate_up_silu` (the
//! activation `round_f16(rmsnorm(x, norm_w))` recomputed by every workgroup into LDS) and two
//! other prologues — a residual add before an FP16 GEMV, and `silu(gate) · up` before the fused
//! row-parallel down projection with its allreduce and RMSNorm — lowered for gfx906 and sm_90,
//! run in the protocol simulator over seeded schedules at small shapes and checked against the
//! f64 reference (`wavefuse_ir::reference::evaluate`) on fresh `Workload` inputs; the barriers the
//! prologue adds are each shown necessary by a mutation; the refusals are checked by message; the
//! example's kernel compiles with hipcc and nvcc and its HIP and CUDA are snapshots.
//!
//! Tolerance: relative L2 ≤ 1e-3 per FP16 output (the simulator's `tolerance`, DESIGN.md §7).
//! The reference rounds at the same points (`round_f16` of the activation, of the output); what
//! is left is f32-vs-f64 arithmetic — the sum of squares, `rsqrt`, the GEMV's f32 accumulation —
//! flipping an occasional FP16 rounding of `h` or `y` by one ulp (2⁻¹¹ relative), far below 1e-3
//! in L2 over a row. A missing or stale activation is off by whole values.

use wavefuse::ir::{GptqLayout, Kernel};
use wavefuse_codegen::lower::{Int4Dot, LowerError, Schedule, lower};
use wavefuse_codegen::lowered::Stmt;
use wavefuse_codegen::sim::{FindingKind, PeerTable};
use wavefuse_codegen::{Arch, compile};
use wavefuse_harness::generate::compile_source;
use wavefuse_harness::pipeline::{Purpose, compiler};
use wavefuse_harness::sim::{Prepared, Sweep, shrink, small_schedule, summary, sweep};
use wavefuse_kernels::shapes::{HIDDEN, RMS_EPS};
use wavefuse_kernels::{KernelId, Shapes};

use fused_norm_gate_up::rmsnorm_gate_up_silu;

const SEED: u64 = 0x9_01_06;

/// Schedules per combination: each runs 3 launches on fresh data.
const SCHEDULES: u64 = 8;

/// Schedules per mutation (each must find the missing barrier).
const MUTATION_SCHEDULES: u64 = 4;

/// The small sizes: two GPTQ groups along K, two 32-column tiles.
const K: usize = 256;
const N: usize = 64;

wavefuse::kernel! {
    /// `y = W·round_f16(x + r)`: a residual add as the prologue of an FP16 GEMV.
    fn residual_gemv_f16(k: usize, n: usize, batch: usize) {
        in x: f16[batch, k];
        in r: f16[batch, k];
        in w: f16_nk[k, n];
        out y: f16[batch, n];

        let h = round_f16(x + r);
        y = round_f16(gemv.rep(w, h));
    }

    /// The FFN's down projection with `silu(gate) · up` as its prologue, then the allreduce,
    /// the residual add and the RMSNorm of the fused kernel (a prologue next to a grid stage).
    fn silu_down_allreduce_rmsnorm(tp: u32, batch: usize, k: usize, hidden: usize, gptq: GptqLayout)
    across tp {
        in gate: f16[batch, k] col_parallel;
        in up: f16[batch, k] col_parallel;
        in w_down: gptq(gptq)[k, hidden] row_parallel;
        in residual: f16[batch, hidden];
        in norm_w: f16[hidden];
        out residual_out: f16[batch, hidden];
        out normed: f16[batch, hidden];

        let h = round_f16(silu(gate) * up);
        let partial = round_f16(gemv.row(w_down, h));
        residual_out = round_f16(allreduce(partial) + residual);
        normed = round_f16(rmsnorm(residual_out, norm_w, eps = RMS_EPS));
    }

    /// A GEMV whose activation comes out of another GEMV: not a prologue, a second GEMV stage
    /// behind a grid barrier (`codegen/src/lower/stages.rs`).
    fn gemv_of_gemv(k: usize, n: usize) {
        in x: f16[1, k];
        in w1: f16_nk[k, k];
        in w2: f16_nk[k, n];
        out y: f16[1, n];

        let h = round_f16(gemv.rep(w1, x));
        y = round_f16(gemv.rep(w2, h));
    }

    /// The normalised activation also stored: a prologue value used outside the prologue.
    fn norm_stored_and_gemv(k: usize, n: usize) {
        in x: f16[1, k];
        in norm_w: f16[k];
        in w: f16_nk[k, n];
        out h_out: f16[1, k];
        out y: f16[1, n];

        let h = round_f16(rmsnorm(x, norm_w, eps = RMS_EPS));
        h_out = h;
        y = round_f16(gemv.rep(w, h));
    }
}

/// The example's kernel at TP = 4 with hidden → K and the FFN shard → N.
fn small_fused(batch: usize) -> Kernel {
    let s = Shapes {
        batch,
        ..Shapes::qwen27b(4)
    };
    let k = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
    shrink(&k, &[(HIDDEN, K), (s.ffn_local(), N)]).expect("shrinks")
}

fn prepared(ir: Kernel, arch: Arch, s: &Schedule) -> Prepared {
    let lowered = lower(&ir, arch, s).unwrap_or_else(|e| panic!("{}@{arch}: {e}", ir.name()));
    Prepared {
        ir,
        lowered,
        shapes: None,
        peer_table: PeerTable::Shared,
    }
}

/// Sweep and require a clean run within the FP16 tolerance.
fn clean(p: &Prepared, what: &str) -> Sweep {
    let r = sweep(p, SEED, 0, SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(p, &r);
    eprintln!("{what}: {}", text.lines().next().unwrap_or(""));
    assert!(r.findings.is_empty() && r.failing == 0, "{what}:\n{text}");
    assert!(
        r.max_rel_l2 <= 1e-3,
        "{what}: rel L2 {} > 1e-3\n{text}",
        r.max_rel_l2
    );
    assert!(r.schedules == SCHEDULES);
    r
}

/// The simulator's schedule for `ir` with some fields replaced.
fn with(arch: Arch, ir: &Kernel, overrides: &str) -> Schedule {
    small_schedule(arch, ir)
        .with_overrides(overrides)
        .expect("overrides parse")
}

fn run_fused(arch: Arch, variants: &[&str]) {
    for batch in [1, 3] {
        for v in variants {
            let ir = small_fused(batch);
            let s = with(arch, &ir, v);
            let p = prepared(ir, arch, &s);
            clean(
                &p,
                &format!("rmsnorm_gate_up_silu@{arch} batch {batch} [{v}]"),
            );
        }
    }
}

/// gfx906: the default (dot2 floor path; the prologue writes the LDS activation stage), the
/// dot2 path reading a plain LDS activation per lane, and the FMA path (likewise), split over K.
#[test]
fn norm_prologue_matches_the_oracle_in_the_simulator_gfx906() {
    run_fused(
        Arch::Gfx906,
        &["", "x_in_lds=false", "int4_dot=fma,k_split=2"],
    );
}

/// sm_90: the default (tensor cores, split-K, the prologue writing the stage) and the MMA path
/// reading a plain LDS activation.
#[test]
fn norm_prologue_matches_the_oracle_in_the_simulator_sm90() {
    let d = small_schedule(Arch::Sm90, &small_fused(1));
    assert_eq!(d.int4_dot, Int4Dot::Mma);
    assert!(d.x_in_lds, "a prologue kernel stages its activation: {d:?}");
    run_fused(Arch::Sm90, &["", "x_in_lds=false,k_split=1"]);
}

#[test]
fn residual_add_prologue_before_an_f16_gemv_matches_the_oracle() {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        for batch in [1, 2] {
            let ir = residual_gemv_f16(K, N, batch);
            let s = small_schedule(arch, &ir);
            clean(
                &prepared(ir, arch, &s),
                &format!("residual_gemv_f16@{arch} batch {batch}"),
            );
        }
    }
}

#[test]
fn silu_mul_prologue_before_the_fused_down_kernel_matches_the_oracle() {
    let gptq = Shapes::qwen27b(2).gptq;
    for arch in [Arch::Gfx906, Arch::Sm90] {
        let ir = silu_down_allreduce_rmsnorm(2, 1, K, 64, gptq);
        let s = small_schedule(arch, &ir);
        clean(
            &prepared(ir, arch, &s),
            &format!("silu_down_allreduce_rmsnorm@{arch} tp 2"),
        );
    }
}

/// The index of the first workgroup barrier after the top-level comment containing `marker`.
fn barrier_after(body: &[Stmt], marker: &str) -> Option<usize> {
    let start = body
        .iter()
        .position(|s| matches!(s, Stmt::Comment(c) if c.contains(marker)))?;
    (start..body.len()).find(|&i| matches!(body[i], Stmt::WorkgroupBarrier))
}

/// Remove the barrier after `marker` and require the simulator to report the reads it ordered.
fn mutation_is_caught(arch: Arch, overrides: &str, marker: &str) {
    let ir = small_fused(1);
    let s = with(arch, &ir, overrides);
    let mut p = prepared(ir, arch, &s);
    let at = barrier_after(&p.lowered.body, marker)
        .unwrap_or_else(|| panic!("no barrier after `{marker}` in:\n{}", p.lowered));
    p.lowered.body.remove(at);
    let r = sweep(&p, SEED, 0, MUTATION_SCHEDULES, |_, _| {}).expect("simulates");
    let text = summary(&p, &r);
    assert!(
        r.findings.iter().any(|f| matches!(
            f.first.kind,
            FindingKind::StaleRead | FindingKind::UninitRead | FindingKind::WriteRace
        )),
        "{arch} [{overrides}]: removing the barrier after `{marker}` was not caught:\n{text}"
    );
    assert_eq!(
        r.failing, r.schedules,
        "{arch} [{overrides}]: caught only sometimes:\n{text}"
    );
}

const ACTIVATION_WRITTEN: &str = "each lane wrote only its part of the activation";
const NORM_PARTIALS: &str = "RMSNorm of the prologue";

/// §5.2: without the workgroup barrier between the prologue's LDS writes of the activation and
/// the GEMV's reads, lanes read activations other lanes have not written yet — in the LDS stage
/// (the default) and in the plain LDS array.
#[test]
fn prologue_without_its_activation_barrier_is_caught_gfx906() {
    mutation_is_caught(Arch::Gfx906, "", ACTIVATION_WRITTEN);
    mutation_is_caught(Arch::Gfx906, "x_in_lds=false", ACTIVATION_WRITTEN);
}

#[test]
fn prologue_without_its_activation_barrier_is_caught_sm90() {
    mutation_is_caught(Arch::Sm90, "", ACTIVATION_WRITTEN);
}

/// §5.2: without the workgroup barrier after the waves' sum-of-squares partials, lanes add up
/// partials other waves have not written yet.
#[test]
fn prologue_norm_without_its_barrier_is_caught_gfx906() {
    mutation_is_caught(Arch::Gfx906, "", NORM_PARTIALS);
}

#[test]
fn prologue_norm_without_its_barrier_is_caught_sm90() {
    mutation_is_caught(Arch::Sm90, "", NORM_PARTIALS);
}

/// An FP16 GEMV of an FP16 GEMV's result: two GEMV stages (one wave per column, 64 and 16
/// workgroups at the small shapes) matching the oracle.
#[test]
fn gemv_of_gemv_lowers_as_two_stages_and_matches_the_oracle() {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        let ir = gemv_of_gemv(K, N);
        let s = small_schedule(arch, &ir);
        clean(&prepared(ir, arch, &s), &format!("gemv_of_gemv@{arch}"));
    }
}

fn unsupported(k: &Kernel, arch: Arch) -> String {
    match lower(k, arch, &Schedule::default_for(arch, k)) {
        Err(LowerError::Unsupported(m)) => m,
        other => panic!("{}@{arch}: expected Unsupported, got {other:?}", k.name()),
    }
}

#[test]
fn prologue_refusals_name_what_does_not_lower() {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        // Not a prologue: the activation is materialised behind a grid barrier instead.
        let k = gemv_of_gemv(K, N);
        let lowered = lower(&k, arch, &Schedule::default_for(arch, &k))
            .unwrap_or_else(|e| panic!("gemv_of_gemv@{arch}: {e}"));
        assert_eq!(lowered.barriers_per_launch, 1, "{arch}: the stage barrier");
        let m = unsupported(&norm_stored_and_gemv(K, N), arch);
        assert!(
            m.contains("also used by `store`") && m.contains("prologue"),
            "{m}"
        );
    }
}

/// The activation is kept in LDS: at the model's K = 5120 a batch that does not fit one
/// workgroup's static LDS is refused with the numbers and the largest batch that fits.
#[test]
fn prologue_that_does_not_fit_lds_is_refused_with_the_numbers() {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        let s = Shapes {
            batch: 8,
            ..Shapes::qwen27b(4)
        };
        let k = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
        let d = Schedule::default_for(arch, &k).with_overrides("x_in_lds=false,k_split=1");
        let m = match lower(&k, arch, &d.expect("overrides parse")) {
            Err(LowerError::Schedule(m)) => m,
            other => panic!("{arch}: expected a schedule error, got {other:?}"),
        };
        eprintln!("{arch}: {m}");
        assert!(
            m.contains("8·5120·2 = 81920 bytes") && m.contains("fits up to batch"),
            "{m}"
        );
    }
}

/// Whether `check`'s compiler for `arch` is installed (else "skipped: …", a failure under CI).
fn compiler_found(arch: Arch) -> bool {
    let c = compiler(arch, Purpose::Check(&Default::default()));
    wavefuse_test_support::found(c.id().name(), c.version())
}

/// The example's kernel at the TP = 4 shape of the model with each target's default schedule.
fn generated(arch: Arch) -> wavefuse_codegen::Generated {
    let s = Shapes::qwen27b(4);
    let k = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
    compile(&k, arch, &Schedule::default_for(arch, &k)).unwrap_or_else(|e| panic!("{arch}: {e}"))
}

#[test]
fn snapshots_of_the_example_kernel() {
    for arch in [Arch::Gfx906, Arch::Sm90] {
        let g = generated(arch);
        let target = if arch == Arch::Gfx906 {
            "gfx906"
        } else {
            "sm90"
        };
        insta::assert_snapshot!(format!("rmsnorm_gate_up_silu@{target}_tp4"), g.source.text);
    }
}

/// The example's kernel compiles without spills or a stack frame and needs no more registers and
/// no lower occupancy than the kernel set's unfused `gemv_int4_dual_silu` at the same shape (the
/// same GEMV path; the prologue's registers are dead before the GEMV starts).
fn compiles(arch: Arch) {
    if !compiler_found(arch) {
        return;
    }
    let compiler = compiler(arch, Purpose::Check(&Default::default()));
    let build = |g: &wavefuse_codegen::Generated, what: &str| {
        compile_source(&*compiler, &g.source)
            .unwrap_or_else(|e| panic!("{arch} {what}: {e}"))
            .usage
    };
    let g = generated(arch);
    let fused = build(&g, "fused");
    let dual = KernelId::GemvInt4DualSilu.build(&Shapes::qwen27b(4));
    let dual = compile(&dual, arch, &Schedule::default_for(arch, &dual)).expect("generates");
    let unfused = build(&dual, "dual_silu");
    eprintln!("{arch}: prologue kernel {fused:?}; gemv_int4_dual_silu {unfused:?}");
    assert_eq!(fused.scratch_bytes(), 0, "{arch}: stack frame");
    assert_eq!(fused.spilled(), 0, "{arch}: spills");
    assert!(
        fused.lds_bytes() as usize >= g.lowered.lds_bytes(),
        "{arch}: {fused:?}"
    );
    let occupancy = |u: &wavefuse_codegen::resources::ResourceUsage,
                     g: &wavefuse_codegen::Generated| {
        u.occupancy(g.lowered.workgroup_size)
    };
    assert!(
        fused.registers() <= unfused.registers()
            && occupancy(&fused, &g) >= occupancy(&unfused, &dual),
        "{arch}: the prologue costs registers or occupancy: {fused:?} vs {unfused:?}"
    );
}

#[test]
fn example_kernel_compiles_with_hipcc_gfx906() {
    compiles(Arch::Gfx906);
}

#[test]
fn example_kernel_compiles_with_nvcc_sm90() {
    compiles(Arch::Sm90);
}

/// With the default schedules at the model's K = 5120 (TP = 4): gfx906 (no split-K, the whole
/// activation in LDS next to 32 K slices' reduction arrays) fits up to batch 3 and refuses batch
/// 4 saying so; sm_90 (4 K parts per tile, a quarter of the activation each) fits every batch
/// up to 8.
#[test]
fn default_schedules_fit_the_prologue_up_to_a_stated_batch() {
    for (arch, max) in [(Arch::Gfx906, 3), (Arch::Sm90, 8)] {
        for batch in 1..=8 {
            let s = Shapes {
                batch,
                ..Shapes::qwen27b(4)
            };
            let k = rmsnorm_gate_up_silu(s.tp, s.batch, s.ffn_local(), s.gptq);
            let r = lower(&k, arch, &Schedule::default_for(arch, &k));
            match r {
                Ok(_) => assert!(batch <= max, "{arch}: batch {batch} lowered"),
                Err(LowerError::Schedule(m)) => {
                    assert!(batch > max, "{arch}: batch {batch}: {m}");
                    assert!(m.contains(&format!("fits up to batch {max}")), "{m}");
                }
                Err(e) => panic!("{arch}: batch {batch}: {e}"),
            }
        }
    }
}
