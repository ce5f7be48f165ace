//! The CUDA back end on the kernel set (sm_90): snapshots `{kernel}@sm90_tp{N}` of the generated
//! source (and `…_tp4.abi`), and real nvcc compiles checked against the committed budget
//! (kernels-gen/budgets.toml: no spills, no local-memory stack frame).
//! Without nvcc: "skipped: nvcc not found", except under CI (`CI` set), where it fails.

use std::collections::BTreeSet;

use wavefuse_codegen::Arch;
use wavefuse_harness::generate::{self, Generated, Outcome, generate};
use wavefuse_kernels::KernelId;
use wavefuse_kernels::shapes::TP_SIZES;
use wavefuse_runtime::compile::{Compiler, Nvcc};

const ARCH: Arch = Arch::Sm90;

/// Kernels the lowering reports Unsupported for on sm_90 (at every TP). Asserted exactly.
const NOT_LOWERED: &[&str] = &[];

/// Whether nvcc is installed (else "skipped: …", a failure under CI).
fn nvcc() -> bool {
    wavefuse_test_support::found("nvcc", Nvcc::from_env().version())
}

fn generate_set() -> (Vec<Generated>, BTreeSet<&'static str>) {
    let (mut ok, mut unsupported) = (Vec::new(), BTreeSet::new());
    for id in KernelId::ALL {
        for tp in TP_SIZES {
            match generate(id, ARCH, tp, 1) {
                Ok(g) => ok.push(g),
                Err(e) if e.is_unsupported() => {
                    unsupported.insert(id.name());
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    for name in &unsupported {
        assert!(
            !ok.iter().any(|g| g.spec.kernel.name() == *name),
            "{name} lowers at some TP sizes only"
        );
    }
    (ok, unsupported)
}

#[test]
fn cuda_snapshots_of_the_kernel_set_sm90() {
    let (set, unsupported) = generate_set();
    assert_eq!(
        unsupported,
        NOT_LOWERED.iter().copied().collect(),
        "the kernels the lowering does not support changed: update NOT_LOWERED"
    );
    for g in &set {
        insta::assert_snapshot!(
            format!("{}@sm90_tp{}", g.spec.kernel.name(), g.spec.tp),
            g.source.text
        );
        if g.spec.tp == 4 {
            let abi = g.abi.to_toml().expect("ABI serialises");
            insta::assert_snapshot!(format!("{}@sm90_tp4.abi", g.spec.kernel.name()), abi);
        }
    }
}

#[test]
fn cuda_uses_scoped_atomics_and_warp32_sm90() {
    let (set, _) = generate_set();
    for g in &set {
        let t = &g.source.text;
        let name = g.spec.kernel.name();
        assert!(
            !t.contains("#include"),
            "{name}: the CUDA source needs no header (NVRTC without include paths)"
        );
        assert!(
            !t.contains("__hip") && !t.contains("amdgcn"),
            "{name}: HIP spelling in CUDA"
        );
        assert!(
            !t.contains("atomicAdd(") && !t.contains("__threadfence()"),
            "{name}: unscoped atomics"
        );
        assert!(
            !t.contains(", 64)"),
            "{name}: a 64-lane shuffle on a 32-lane warp"
        );
        if t.contains("__shfl_xor_sync") {
            assert!(
                t.contains("__shfl_xor_sync(0xffffffffu, v, 16, 32)"),
                "{name}"
            );
        }
        if g.abi.peer_table.is_some() && g.spec.tp > 1 {
            assert!(
                t.contains("__NV_ATOMIC_ACQUIRE, __NV_THREAD_SCOPE_SYSTEM"),
                "{name}: peer flags need a system-scope acquire"
            );
            assert!(
                t.contains("__NV_ATOMIC_RELEASE, __NV_THREAD_SCOPE_SYSTEM"),
                "{name}: peer flags need a system-scope release"
            );
        }
    }
}

#[test]
fn nvcc_compiles_the_set_within_budget_sm90() {
    if !nvcc() {
        return;
    }
    let budgets = generate::budgets().expect("kernels-gen/budgets.toml parses");
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let rows = generate::check(ARCH, &TP_SIZES, &budgets, jobs).expect("nvcc runs");
    let table = generate::table(ARCH, &rows);
    println!("{table}");
    for r in &rows {
        match &r.outcome {
            Outcome::Compiled {
                verdict, compiled, ..
            } => {
                assert!(
                    verdict.ok(),
                    "{}@tp{}: {}\n{table}",
                    r.id.name(),
                    r.tp,
                    verdict.describe()
                );
                assert_eq!(
                    compiled.usage.scratch_bytes(),
                    0,
                    "{}@tp{}: local-memory stack frame",
                    r.id.name(),
                    r.tp
                );
            }
            Outcome::Unsupported(_) => assert!(NOT_LOWERED.contains(&r.id.name()), "{table}"),
            Outcome::Failed(why) => panic!("{}@tp{}: {why}", r.id.name(), r.tp),
        }
    }
}

/// Every sm_90 kernel of the set whose workgroups do not wait for each other opens with the
/// stream-order prologue — the next kernel may be scheduled (`griddepcontrol.launch_dependents`),
/// then the wait for the previous kernel of the stream (`griddepcontrol.wait`) — before any
/// statement that touches memory, and its ABI says it may be launched as a programmatic
/// dependent; a kernel with a grid barrier or peer flags has neither (its launch needs
/// co-residency, §5.9), and no gfx906 kernel claims it (HIP has no such launch). What makes the
/// dependent launch safe is the wait coming first: the GPU test
/// `a_dependent_launch_waits_for_its_producer_only_with_the_prologue_sm90` shows a consumer
/// without it reading stale data.
#[test]
fn sm90_kernels_without_cross_workgroup_waits_wait_for_their_stream_predecessor_first() {
    let (set, _) = generate_set();
    let (mut with, mut without) = (0, 0);
    for g in &set {
        let name = format!("{}@tp{}", g.spec.kernel.name(), g.spec.tp);
        if g.lowered.waits_across_workgroups() {
            assert!(!g.abi.dependent_launch, "{name}: ABI");
            assert!(!g.source.text.contains("griddepcontrol"), "{name}");
            without += 1;
            continue;
        }
        with += 1;
        assert!(g.abi.dependent_launch, "{name}: ABI");
        let text = &g.source.text;
        let body = &text[text
            .find("\n{\n")
            .unwrap_or_else(|| panic!("{name}: no body"))
            + 3..];
        let code: Vec<&str> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .collect();
        assert_eq!(
            code[0], "asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");",
            "{name}: the body does not open with the wait for its stream predecessor"
        );
        assert_eq!(
            code[code.len() - 2..],
            [
                "asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");",
                "}"
            ],
            "{name}: the body does not end with the signal to its successor"
        );
        assert_eq!(text.matches("griddepcontrol.wait").count(), 1, "{name}");
        assert_eq!(
            text.matches("griddepcontrol.launch_dependents").count(),
            1,
            "{name}"
        );
    }
    // The GEMVs (TP 1 allreduces too) open with it; the exchanging kernels at TP > 1 do not.
    assert!(
        with >= 16 && without >= 12,
        "{with} with, {without} without"
    );
    for id in KernelId::ALL {
        let g = generate(id, Arch::Gfx906, 4, 1).expect("generates");
        assert!(!g.abi.dependent_launch, "{id}@gfx906");
        assert!(!g.source.text.contains("griddepcontrol"), "{id}@gfx906");
    }
}

/// `prefetch_before_wait` (issue 37): on every sm_90 kernel of the set with the stream-order
/// prologue, what comes before `griddepcontrol.wait` is L2 prefetches of the kernel's own packed
/// weights only (no load, store or atomic: §5.7 across launches), the signal to the successor
/// follows the wait at once and does not close the kernel; the prefetches cover the `qweight`
/// (the kernel's weights, at most `PREFETCH_BEFORE_WAIT_BYTES`). A kernel with a grid barrier or
/// flags keeps no prologue and gets no prefetch; gfx906 has neither (the field has no effect).
/// The validator's refusals of a misplaced wait are in codegen's unit tests.
#[test]
fn prefetch_before_wait_puts_only_l2_prefetches_before_the_stream_wait_sm90() {
    use wavefuse_harness::policy::{Override, Placement, SchedulePolicy};
    let policy = SchedulePolicy::new(
        None,
        vec![Override {
            origin: "test".into(),
            arch: None,
            spec: "prefetch_before_wait=true".into(),
        }],
    );
    let (mut with, mut without) = (0, 0);
    for id in KernelId::ALL {
        for tp in [1, 4] {
            let name = format!("{id}@tp{tp}");
            let g = generate::generate_with(id, ARCH, tp, 1, &policy, Placement::PerDevice)
                .expect("generates");
            let text = &g.source.text;
            if !g.lowered.stream_order_prologue() {
                assert!(!text.contains("griddepcontrol"), "{name}");
                assert!(!text.contains("prefetch.global.L2"), "{name}");
                without += 1;
                continue;
            }
            let packed = g.lowered.params.values().any(|p| {
                p.data_array()
                    .is_some_and(|a| matches!(a.part, "qweight" | "scales" | "qzeros"))
            });
            let body = &text[text.find("\n{\n").expect("a body") + 3..];
            let code: Vec<&str> = body
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//"))
                .collect();
            let wait = code
                .iter()
                .position(|l| l.contains("griddepcontrol.wait"))
                .unwrap_or_else(|| panic!("{name}: no wait"));
            assert_eq!(text.matches("griddepcontrol.wait").count(), 1, "{name}");
            if !packed {
                // Nothing to prefetch: the default prologue, the wait first and the signal last.
                assert_eq!(wait, 0, "{name}");
                assert!(!text.contains("prefetch.global.L2"), "{name}");
                continue;
            }
            with += 1;
            assert!(
                code[wait + 1].contains("griddepcontrol.launch_dependents"),
                "{name}: the signal does not follow the wait"
            );
            assert_eq!(
                text.matches("griddepcontrol.launch_dependents").count(),
                1,
                "{name}"
            );
            let before = &code[..wait];
            assert!(
                before
                    .iter()
                    .any(|l| l.contains("prefetch.global.L2") && l.contains("qweight")),
                "{name}: no prefetch of the weights before the wait"
            );
            for l in before {
                // The writer's declarations: LDS arrays and registers set to their type's zero.
                let declaration = l.starts_with("alignas(16) __shared__")
                    || [" = 0;", " = 0u;", " = 0.0f;", " = false;", " = {};"]
                        .iter()
                        .any(|z| l.ends_with(z));
                let hint = l.starts_with("for (unsigned line_")
                    || l.starts_with("asm volatile(\"prefetch.global.L2")
                    || *l == "}";
                assert!(
                    declaration || hint,
                    "{name}: `{l}` before the wait for the stream predecessor"
                );
            }
        }
    }
    // The INT4 GEMVs at TP 1 and 4; the exchanging kernels and a grid-barrier TP 1 kernel have none.
    assert!(with >= 6 && without >= 4, "{with} with, {without} without");
    for id in KernelId::ALL {
        let g = generate::generate_with(id, Arch::Gfx906, 1, 1, &policy, Placement::PerDevice)
            .expect("generates");
        assert!(!g.source.text.contains("griddepcontrol"), "{id}@gfx906");
    }
}

/// A row-parallel GEMV with the allreduce and the residual add and no RMSNorm (the decoder's
/// `wf_row_residual`, a user's `.wfir`): flags but no grid barrier. Its ranks' workgroups wait for
/// each other's flags, so all ranks' grids must be resident at once where they share a device, as
/// the runtime requires of every launch that synchronises (§5.9). The fit once counted grid
/// barriers only and left it at 4 × 512 workgroups on one H100 (1188 fit: the binding refused
/// it, 2026-12-06-gpu-prenorm); now the same-device placement shrinks it to fit, and one rank per
/// device keeps the default grid.
#[test]
fn a_flags_only_gemv_kernel_is_fitted_for_ranks_on_one_device() {
    use wavefuse_codegen::lowered::Occupancy;
    use wavefuse_harness::policy::{Placement, SchedulePolicy};
    let text = "kernel wf_row_residual(tp=4) {
    buf0 = input w : gptq<group=128, zero=v1, scale=f16>[k=1024, n=4096] row_parallel(tp=4) @global index=local
    buf1 = input x : f16[1, 1024] col_parallel(tp=4) @global index=local
    buf2 = input residual : f16[1, 4096] replicated @global index=local
    buf3 = output residual_out : f16[1, 4096] replicated @global index=local
    v0 = load buf1
    v1 = gemv.row buf0, v0
    v2 = round_f16 v1
    v3 = allreduce v2, tp=4
    v4 = load buf2
    v5 = add v3, v4
    v6 = round_f16 v5
    store v6, buf3
}
";
    let ir = wavefuse::ir::parse_named(text, "wf_row_residual.wfir").expect("parses");
    let path = std::path::Path::new("wf_row_residual.wfir");
    for arch in [Arch::Sm90, Arch::Gfx906] {
        let generate_for = |placement| {
            generate::generate_file_kernel(path, &ir, arch, &SchedulePolicy::default(), placement)
                .unwrap_or_else(|e| panic!("{arch}: {e}"))
        };
        let (alone, shared) = (
            generate_for(Placement::PerDevice),
            generate_for(Placement::SameDevice),
        );
        for (g, ranks) in [(&alone, 1), (&shared, 4)] {
            let k = &g.lowered;
            assert!(
                k.coresidency.is_none() && k.waits_across_workgroups(),
                "{arch}"
            );
            assert!(g.abi.synchronises(), "{arch}");
            k.coresident(ranks, Occupancy::HardwareMax)
                .unwrap_or_else(|e| panic!("{arch}, {ranks} ranks per device: {e}"));
        }
        // Four ranks on one H100: the default grid does not fit the budgets' occupancy (1024
        // lanes per SM, the fit's rule) four times over; the fitted one does.
        if arch == Arch::Sm90 {
            let lanes =
                |k: &wavefuse_codegen::lowered::LoweredKernel| 4 * k.grid * k.workgroup_size;
            let room = arch.compute_units() * 1024;
            assert!(
                lanes(&alone.lowered) > room,
                "{arch}: the default grid ({}) fits 4 ranks on one device already; the test no \
                 longer tells the fit's shrinking apart",
                alone.lowered.grid
            );
            assert!(
                lanes(&shared.lowered) <= room,
                "{arch}: {}",
                shared.lowered.grid
            );
        }
    }
}

/// The GEMV → GEMM switch (issue #40 item 2): past batch 8 the default schedule keeps the
/// tensor-core INT4 GEMV, the batch as `ceil(batch / 8)` N tiles. nvcc compiles `gemv_int4` at
/// 5120 → 17408 (TP 1) at batch 9 to 64, and the fused kernels at batch 16, with the resource
/// report printed; `gemv_int4` must not spill at batch 16 and 32 (at 64, 8 N tiles, what ptxas
/// reports is printed, not asserted).
#[test]
fn nvcc_compiles_the_mma_gemm_at_batch_9_to_64_sm90() {
    use wavefuse_codegen::lower::Int4Dot;
    use wavefuse_harness::generate::compile_source;
    use wavefuse_harness::pipeline::{Purpose, compiler};
    use wavefuse_runtime::compile::Bounds;
    if !nvcc() {
        return;
    }
    let compiler = compiler(ARCH, Purpose::Check(&Bounds::default()));
    let cases = [9, 16, 24, 32, 64]
        .map(|b| (KernelId::GemvInt4, 1, b))
        .into_iter()
        .chain([
            (KernelId::GemvInt4DualSilu, 1, 16),
            (KernelId::GemvInt4AllreduceRmsnorm, 2, 16),
            (KernelId::GemvInt4AllreduceRmsnorm, 2, 64),
        ]);
    for (id, tp, batch) in cases {
        let g = generate(id, ARCH, tp, batch).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.schedule.int4_dot, Int4Dot::Mma, "{id} batch {batch}");
        let c = compile_source(compiler.as_ref(), &g.source)
            .unwrap_or_else(|e| panic!("{id} tp {tp} batch {batch}: {e}"));
        let u = &c.usage;
        let s = &g.schedule;
        println!(
            "{id} tp {tp} batch {batch} ({}): {} registers, {} spilled, {} B stack, {} B LDS, occupancy {} \
             (workgroup {}, K warps {}, k_split {}, k_unit_words {}, x_in_lds {})",
            g.dims(),
            u.registers(),
            u.spilled(),
            u.scratch_bytes(),
            u.lds_bytes(),
            u.occupancy(g.lowered.workgroup_size),
            s.workgroup_size,
            s.threads_per_column,
            s.k_split,
            s.k_unit_words,
            s.x_in_lds
        );
        if id == KernelId::GemvInt4 && [16, 32].contains(&batch) {
            assert_eq!(u.spilled(), 0, "{id} batch {batch} spills");
            assert_eq!(u.scratch_bytes(), 0, "{id} batch {batch}: stack frame");
        }
    }
}

/// The gate kernel `ab --timing graphs` replays behind (`timing::spin_request`: it reads the
/// global timer and sleeps, with no pointer parameter) compiles with nvcc for sm_90.
#[test]
fn the_graph_timing_spin_kernel_compiles_for_sm90() {
    if !nvcc() {
        return;
    }
    let req = wavefuse_runtime::timing::spin_request(Arch::Sm90);
    Nvcc::from_env()
        .compile(&req)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// With two units in flight (`pipeline_depth = 2`) and the activations staged in LDS, the tensor-
/// core GEMV issues its first unit's weight loads before the staging and its workgroup barrier
/// (they read no LDS), so their DRAM latency overlaps the staging's; with one unit in flight the
/// loads stay inside the loop, after the barrier. The values are the simulator's to check
/// (`harness/tests/sim_mma_batch.rs` runs `pipeline_depth=2` against the reference).
#[test]
fn pipelined_mma_gemv_issues_its_first_weight_loads_before_the_staging_barrier_sm90() {
    use wavefuse_codegen::lower::Schedule;
    let text = "kernel o_proj(tp=1) {
    buf0 = input w : gptq<group=128, zero=sym, scale=f16>[k=4096, n=4096] col_parallel(tp=1) @global index=local
    buf1 = input x : f16[1, 4096] replicated @global index=local
    buf2 = output y : f16[1, 4096] col_parallel(tp=1) @global index=local
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}
";
    let ir = wavefuse::ir::parse_named(text, "o_proj.wfir").expect("parses");
    let order = |spec: &str| {
        let s = Schedule::default_for(ARCH, &ir)
            .with_overrides(spec)
            .expect("a valid override");
        assert!(s.x_in_lds, "{spec}: the default stages the activations");
        let g = wavefuse_codegen::compile(&ir, ARCH, &s).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let src = &g.source.text;
        let body = &src[src.find("\n{\n").expect("a body")..];
        let load = body.find("&w_qweight[").expect("a weight load");
        let barrier = body.find("__syncthreads()").expect("the staging barrier");
        load < barrier
    };
    assert!(
        order("pipeline_depth=2"),
        "depth 2: first loads before the barrier"
    );
    assert!(
        !order("pipeline_depth=1"),
        "depth 1: loads after the barrier"
    );
}

/// Past the 48 KiB a CUDA kernel may declare statically, a generated kernel carves its LDS
/// arrays out of one dynamic shared-memory allocation (issue 40: the tensor-core GEMV's
/// `cp.async` rings at Marlin's tile sizes): `gemv_int4` at 5120 → 17408 batch 32 with a
/// 256-lane, 128-column tile and a 3-deep ring (65 KB of LDS). The source declares no static
/// array, each array's pointer sits at a 16-byte offset, the arrays do not overlap and fit the
/// allocation, the ABI passes its size as `dynamic_lds_bytes` (the runtime's launch sets the
/// opt-in attribute and passes it), and nvcc compiles it with no static shared memory and no
/// spills. The same kernel's default schedule stays static. (Values: the simulator's sweeps of
/// these forms at small shapes, `harness/tests/sim_mma_*.rs`; on the GPU, `ab` checks them
/// against the f64 reference before timing.)
#[test]
fn a_kernel_past_48_kib_of_lds_declares_it_dynamic_sm90() {
    use wavefuse_codegen::lower::Schedule;
    use wavefuse_harness::generate::compile_source;
    use wavefuse_harness::pipeline::{Purpose, compiler};
    use wavefuse_runtime::compile::Bounds;
    let shapes = wavefuse_kernels::Shapes {
        batch: 32,
        ..wavefuse_kernels::Shapes::qwen27b(1)
    };
    let ir = KernelId::GemvInt4.build(&shapes);
    let default = Schedule::default_for(ARCH, &ir);
    let g = wavefuse_codegen::compile(&ir, ARCH, &default).expect("the default compiles");
    assert!(g.lowered.dynamic_lds_layout().is_none());
    assert_eq!(g.abi.dynamic_lds_bytes, 0);
    assert_eq!(g.abi.static_lds_bytes, g.lowered.lds_bytes() as u64);
    let ring = default
        .with_overrides(
            "mma_scale=weight,x_in_lds=true,workgroup_size=256,columns_per_workgroup=128,\
             threads_per_column=2,k_unit_words=8,x_phase_units=2,async_stages=3",
        )
        .expect("a valid override");
    let g = wavefuse_codegen::compile(&ir, ARCH, &ring).expect("the ring compiles");
    let k = &g.lowered;
    assert!(k.lds_bytes() > 48 * 1024, "{} bytes", k.lds_bytes());
    let (offsets, bytes) = k.dynamic_lds_layout().expect("dynamic past 48 KiB");
    assert!(bytes >= k.lds_bytes() && bytes <= ARCH.max_lds_per_workgroup() as usize);
    assert_eq!(offsets.len(), k.lds.len());
    let mut end = 0;
    for &(l, off) in &offsets {
        assert_eq!(off % 16, 0, "{l:?} at {off}");
        assert!(
            off >= end,
            "{l:?} at {off} overlaps the array before (ends at {end})"
        );
        end = off + k.lds[l].elem.bytes() * k.lds[l].len;
    }
    assert!(end <= bytes);
    assert_eq!(
        (g.abi.static_lds_bytes, g.abi.dynamic_lds_bytes),
        (0, bytes as u64)
    );
    let src = &g.source.text;
    assert!(
        src.contains("alignas(16) extern __shared__ unsigned char wf_lds[];"),
        "{src}"
    );
    assert!(
        !src.contains("alignas(16) __shared__"),
        "a static array left"
    );
    for &(_, off) in &offsets {
        assert!(src.contains(&format!("(wf_lds + {off});")), "offset {off}");
    }
    if !nvcc() {
        return;
    }
    let compiler = compiler(ARCH, Purpose::Check(&Bounds::default()));
    let c = compile_source(compiler.as_ref(), &g.source).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.usage.lds_bytes(), 0, "static shared memory");
    assert_eq!(c.usage.spilled(), 0);
}
