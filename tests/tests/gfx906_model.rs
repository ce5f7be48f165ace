//! The MI50 time model (`wavefuse_codegen::model`, DESIGN.md §6) on gfx906 code objects: its
//! prediction for a hand-written kernel whose hot loop is fixed by construction, its inputs for
//! the generated `gemv_int4` at 5120 → 17408, and the table of every gfx906 INT4 kernel at TP 1,
//! 2, 4 and 8 and batch 1, 2, 4 and 8 — generated on the new default (the dot2 floor path; at
//! batch 1 also the old one, the FMA path) and the hand-written references of
//! `kernels-gen/reference/hip/` compiled and counted the same way. Every time is "modelled
//! (MI50)", printed with its inputs; nothing here ran on a GPU.
//!
//! The table is what `bench/results/2026-12-03-gfx906-batch8/` holds (before it
//! `2026-12-03-gfx906-batch/`; batch 1 alone: `2026-12-03-gfx906-fused-splitk/`,
//! `2026-12-03-gfx906-model/`):
//! `WAVEFUSE_MODEL_OUT=bench/results/2026-12-03-gfx906-batch8 cargo test -p wavefuse-tests --test gfx906_model -- --nocapture model_table`
//! writes `model.json` and `README.md` there, a relative path taken from the repository root
//! (without the variable it only prints); `WAVEFUSE_MODEL_BATCHES=1,8` restricts the batches.
//! The table compiles 112 kernels with hipcc on parallel threads: 1.5–3 minutes on 2 cores.
//! Without hipcc: "skipped: hipcc not found", except under CI (`CI` set), where it fails.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::{Schedule, lower};
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::model::{
    Bound, HotLoop, LoopFacts, ModelInputs, Modelled, inputs_for, inputs_with, model,
    scratch_bytes, with_weight_passes,
};
use wavefuse_kernels::shapes::TP_SIZES;
use wavefuse_kernels::{KernelId, Shapes};
use wavefuse_runtime::compile::{
    Artifact, Bounds, CompileRequest, Compiler, Hipcc, disassemble, objdump,
};

const ARCH: Arch = Arch::Gfx906;

/// The gfx906 FMA path (the INT4 default before the dot2 floor path), as overrides: one
/// workgroup per 32-column tile over the whole K (`k_split = 1`, as that default was; the new
/// default splits K for the fused kernel at TP 1 and 2, issue 19).
const FMA_PATH: &str = "int4_dot=fma,k_split=1,mma_decode=shift,x_in_lds=false,byte_offsets=false,words_per_iteration=1,columns_per_workgroup=32,threads_per_column=8,k_unit_words=16,accumulators=2";

const INT4: [KernelId; 4] = [
    KernelId::GemvInt4,
    KernelId::GemvInt4DualSilu,
    KernelId::GemvInt4Qkv,
    KernelId::GemvInt4AllreduceRmsnorm,
];

fn tools() -> bool {
    wavefuse_test_support::found("hipcc", Hipcc::from_env().version())
        && wavefuse_test_support::found("llvm-objdump", objdump())
}

/// A compiled kernel's hot loop and hipcc's resources.
struct Counted {
    hot: HotLoop,
    vgprs: u32,
    occupancy: u32,
    /// Static LDS per workgroup (hipcc's report).
    lds: u32,
}

/// The one kernel of a compiled source: its hot loop and hipcc's report.
fn count(a: &Artifact) -> Counted {
    try_count(a).unwrap_or_else(|e| panic!("{e}"))
}

/// [`count`], or why not: spills, or no loop in the code.
fn try_count(a: &Artifact) -> Result<Counted, String> {
    assert_eq!(a.usage.len(), 1, "one kernel per source");
    let r = a.usage.values().next().expect("a resource report");
    if r.spilled() != 0 {
        return Err(format!("{} VGPRs spilled", r.spilled()));
    }
    let text = disassemble(&a.image, ARCH, &Bounds::default()).expect("objdump");
    Ok(Counted {
        hot: HotLoop::from_disassembly(&text).ok_or("no loop (a backward branch) in the code")?,
        vgprs: r.registers(),
        lds: r.lds_bytes(),
        // AMD: the compiler's own figure (the block size is not used).
        occupancy: r.occupancy(0),
    })
}

fn generated(id: KernelId, tp: u32, batch: usize, overrides: &str) -> (LoweredKernel, Counted) {
    let k = id.build(&Shapes {
        batch,
        ..Shapes::qwen27b(tp)
    });
    let s = Schedule::default_for(ARCH, &k)
        .with_overrides(overrides)
        .expect("overrides parse");
    let lowered = lower(&k, ARCH, &s).unwrap_or_else(|e| panic!("{id}@tp{tp}: {e}"));
    let src = cpp::emit(&lowered).expect("writes");
    let c = wavefuse_harness::generate::compile_source(&Hipcc::from_env(), &src)
        .unwrap_or_else(|e| panic!("{id}@tp{tp}: {e}"));
    (lowered, count(&c.artifact))
}

/// A HIP source compiled by the runtime's hipcc (the flags `wavefuse check` uses) with `defines`.
fn hipcc(name: &str, source: String, defines: &[String]) -> Counted {
    let mut req = CompileRequest::new(name, source, ARCH);
    req.extra_flags = defines.iter().map(|d| format!("-D{d}")).collect();
    count(
        &Hipcc::from_env()
            .compile(&req)
            .unwrap_or_else(|e| panic!("hipcc {name}: {e}")),
    )
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gen/reference/hip")
}

/// The hand-written reference of `id` at `tp`: compiled with its ABI file's defines; its grid
/// and workgroup size from that file.
fn reference(id: KernelId, tp: u32, batch: usize) -> (Counted, u32, u32) {
    let abi_file = reference_dir().join(format!("{}.abi.toml", id.name()));
    let template = std::fs::read_to_string(&abi_file).expect("ABI file");
    // The parametric description at the generated kernel's shapes.
    let g = wavefuse_harness::generate::generate(id, Arch::Gfx906, tp, batch).expect("generates");
    let text = wavefuse_harness::ab::parametric::instantiate(
        &template,
        &wavefuse_harness::ab::parametric::Bindings::of(&g.ir),
    )
    .expect("instantiates");
    let abi: toml::Value = toml::from_str(&text).expect("ABI file parses");
    let defines: Vec<String> = abi["build"]["defines"]
        .as_array()
        .expect("defines")
        .iter()
        .map(|d| d.as_str().expect("a define").to_owned())
        .collect();
    let int = |key: &str| abi[key].as_integer().expect("an integer") as u32;
    let source = reference_dir().join(abi["source"].as_str().expect("source"));
    (
        hipcc(
            id.name(),
            wavefuse_harness::ab::handwritten::read_source(&source).expect("reference source"),
            &defines,
        ),
        int("grid"),
        int("workgroup_size"),
    )
}

/// The model of a hand-written kernel whose hot loop is fixed by construction: 8
/// `v_dot2_f32_f16` and 8 `v_and_or_b32` per iteration in inline assembly, the loop counter
/// scalar (wave-uniform), so the loop holds exactly 16 VALU instructions for 16 weights: 1.0 VALU
/// per weight. At 5120 × 17408 weights and 46.3 MB the model must give exactly the formula's
/// numbers.
#[test]
fn model_of_a_kernel_with_a_fixed_hot_loop_gfx906() {
    if !tools() {
        return;
    }
    let mut body = String::new();
    for _ in 0..8 {
        body.push_str("        asm volatile(\"v_and_or_b32 %0, %0, %1, %2\" : \"+v\"(w) : \"s\"(m), \"v\"(b));\n");
        body.push_str("        asm volatile(\"v_dot2_f32_f16 %0, %1, %2, %0\" : \"+v\"(acc) : \"v\"(w), \"v\"(x));\n");
    }
    let src = format!(
        "#include <hip/hip_runtime.h>\n\
         extern \"C\" __global__ void __launch_bounds__(256) __attribute__((amdgpu_flat_work_group_size(256, 256)))\n\
         fixed(const unsigned* __restrict__ in, float* __restrict__ out, unsigned n, unsigned m) {{\n\
         \x20   unsigned w = in[threadIdx.x], x = in[threadIdx.x + 256u], b = in[threadIdx.x + 512u];\n\
         \x20   float acc = 0.0f;\n\
         \x20   for (unsigned i = 0; i < n; ++i) {{\n{body}    }}\n\
         \x20   out[threadIdx.x] = acc;\n}}\n"
    );
    let c = hipcc("fixed", src, &[]);
    assert_eq!(
        (c.hot.valu, c.hot.dot2),
        (16, 8),
        "the fixed loop: {:?}",
        c.hot.mnemonics
    );
    let vpw = c.hot.valu_per_weight(1).expect("products");
    assert_eq!(vpw, 1.0);
    let weights = 5120.0 * 17408.0;
    let inputs = ModelInputs {
        valu_per_weight: vpw,
        weights,
        valu_outside_per_wave: 0.0,
        valu_per_pass_per_wave: 0.0,
        weight_passes: 1.0,
        other_valu_lane_instructions: 0.0,
        bytes: 46.3e6,
        bytes_in_flight_per_wave: 0.0,
        occupancy: c.occupancy,
        lds_bytes_per_workgroup: 0,
        dot_floor_lane_instructions: 0.0,
        dot_share: 0.0,
        grid: 544,
        workgroup_size: 256,
        grid_barriers: 0,
        flag_round_trips: 0,
        counted: String::new(),
    };
    let m = model(&inputs);
    let t_valu = weights / 6.624e12 * 1e6; // 13.46 us
    assert!((m.t_valu_us - t_valu).abs() < 1e-9);
    assert!((m.valu_term_us - (1.18 * t_valu + 10.6)).abs() < 1e-9); // 26.5 us
    assert!((m.us - (46.3e6 / 0.85e12 * 1e6 + 5.0)).abs() < 1e-9); // 59.5 us
    assert_eq!(m.bound, Bound::Memory);
    assert!(m.few_loads_in_flight, "no loads in the loop");
    println!("fixed loop: {m}");
}

/// The model's inputs for the generated `gemv_int4` at 5120 → 17408 (TP 1, batch 1, the
/// default schedule): 89.1 M weights, the bytes of qweight + scales + qzeros + x + y, the hot
/// loop's VALU per weight under the 2.0 ceiling, 16-byte loads in flight; memory-bound at ≤ 62 µs
/// (issue 19's target), where the old default (the FMA path) is VALU-bound at ~138 µs.
#[test]
fn model_inputs_of_the_generated_gemv_int4_at_5120_to_17408_gfx906() {
    if !tools() {
        return;
    }
    let (k, n, g) = (5120usize, 17408usize, 128usize);
    let bytes = (k / 8 * n * 4 + k / g * n * 2 + k / g * n / 8 * 4 + k * 2 + n * 2) as f64;
    let (lowered, c) = generated(KernelId::GemvInt4, 1, 1, "");
    let i = inputs_for(&lowered, &c.hot, 1, c.occupancy).expect("inputs");
    assert_eq!(i.weights, (k * n) as f64);
    assert_eq!(i.bytes, bytes);
    assert_eq!((i.grid, i.workgroup_size), (544, 256));
    assert!(i.valu_per_weight <= 2.0, "{i:?}");
    assert!(i.bytes_in_flight_per_wave >= 4096.0, "{i:?}");
    let m = model(&i);
    println!("gemv_int4 5120 -> 17408, dot2 floor path: {m}");
    assert_eq!(m.bound, Bound::Memory);
    assert!(m.us <= 62.0 && !m.few_loads_in_flight, "{m}");
    let (lowered, c) = generated(KernelId::GemvInt4, 1, 1, FMA_PATH);
    let old = model(&inputs_for(&lowered, &c.hot, 1, c.occupancy).expect("inputs"));
    println!("gemv_int4 5120 -> 17408, FMA path: {old}");
    assert_eq!(old.inputs.valu_per_weight, 8.0);
    assert_eq!(old.bound, Bound::Valu);
    assert!((old.us - 137.7).abs() < 0.5, "{old}");
}

/// Batch 64 on the floor path (TP 4's 5120 → 4352): the rows in two tiles of 32, two weight
/// passes. The counted loop is the K loop inside the tile loop, not the tile loop (as many
/// products, a longer range), and the tile loop's own VALU — a tile's setup, cross-slice sums
/// and stores — count once per pass and wave, not on every K trip.
#[test]
fn batch_tiles_count_the_k_loop_and_the_tile_loop_once_per_pass_gfx906() {
    if !tools() {
        return;
    }
    let (lowered, c) = generated(KernelId::GemvInt4, 4, 64, "");
    assert_eq!(lowered.weight_passes, 2);
    let tiles = &c.hot;
    let k_loop = tiles.for_passes(2.0);
    let (first, last) = k_loop.enclosing.expect("a tile loop around the K loop");
    assert_eq!(
        (first, last),
        (tiles.first, tiles.last),
        "{}",
        k_loop.counted()
    );
    assert!(first < k_loop.first && k_loop.last <= last);
    assert_eq!(k_loop.dot2, tiles.dot2, "every product in the K loop");
    assert!(k_loop.valu < tiles.valu && k_loop.valu_enclosing_path > 0);
    let i = inputs_for(&lowered, tiles, 64, c.occupancy).expect("inputs");
    assert_eq!(
        (i.weight_passes, i.valu_per_pass_per_wave),
        (2.0, k_loop.valu_enclosing_path as f64)
    );
    assert_eq!(
        i.valu_outside_per_wave,
        (k_loop.valu_outside_path + k_loop.valu_enclosing_path) as f64
    );
    assert_eq!(
        i.valu_per_weight,
        k_loop.valu_per_weight(64).expect("products")
    );
    // The K loop of a tile of 32 rows: its products are 32 rows' (2 per `v_dot2_f32_f16`),
    // counted over the batch's 64: each weight decoded and multiplied once per pass.
    let m = model(&i);
    println!("gemv_int4 5120 -> 4352 b64: {m}");
    assert!(
        m.to_string()
            .contains(&format!("per weight pass x 2) x {} waves", i.grid * 4)),
        "{m}"
    );
}

/// One row of the table.
struct Row {
    id: KernelId,
    tp: u32,
    batch: usize,
    variant: &'static str,
    vgprs: u32,
    m: Modelled,
}

/// The batches of the table: `WAVEFUSE_MODEL_BATCHES` (comma-separated), else 1, 2, 4 and 8.
fn table_batches() -> Vec<usize> {
    std::env::var("WAVEFUSE_MODEL_BATCHES")
        .unwrap_or_else(|_| "1,2,4,8".into())
        .split(',')
        .map(|b| b.trim().parse().expect("a batch"))
        .collect()
}

/// Rows where the generated default is modelled slower than the hand-written reference beyond
/// the model's 1 % resolution, each with the most it may be (the table's ratio, rounded up to
/// the next 0.5 %). None since units of 8 K-words from batch 5 (`schedule.rs` `floor_phases`,
/// `bench/results/2026-12-03-gfx906-batch8/`): the six batch-8 rows listed before (the
/// two-weight GEMV at TP 1, 2, 4 at 1.1–1.3 %, `gemv_int4` at TP 8 and the QKV GEMV at TP 4 and
/// 8 in 32-column tiles at 2.2–3.1 %) are now within 1 %. Since issue 38's latency term one row
/// again: the fused kernel at TP 8 batch 4, latency-bound (80 workgroups of 2 waves, 6.7 KB of
/// loads in flight per CU: 21.8 µs) where the reference (80 workgroups of 4 waves, 30.7 KB) is
/// not (VALU-bound at 19.7 µs): 7.7 % (see [`FUSED_LATENCY_BOUND`]). Any row over 1 % that is
/// not listed, a listed one over its bound, or a listed one no longer over 1 % (a stale entry),
/// fails.
const KNOWN_SLOWER: [(KernelId, u32, usize, f64); 1] =
    [(KernelId::GemvInt4AllreduceRmsnorm, 8, 4, 1.08)];

/// (TP, batch, the most the fused kernel's GEMV part may be over `gemv_int4`'s time) where the
/// fused kernel is latency-bound (issue 38's latency term): at TP 8 batch 4 its 80 workgroups of
/// 2 waves keep 6.7 KB of loads in flight per CU (under 16 KB: flagged before the recount too),
/// the latency term 21.8 µs against `gemv_int4`'s 17.9 (VALU-bound, 21.5 KB in flight). A
/// schedule question for codegen (more workgroups or deeper loads at that shape), not a count.
const FUSED_LATENCY_BOUND: [(u32, usize, f64); 1] = [(8, 4, 1.25)];

/// The model of every gfx906 INT4 kernel at every TP and batch (`table_batches`): the new
/// default and the hand-written reference, and at batch 1 the old default. Asserts what issue
/// 19 targets: at batch 1 the new default issues its VALU work faster than it streams its bytes
/// and is modelled no slower than the old default; at every batch no slower than the
/// hand-written reference beyond the model's resolution (1 %) except the listed
/// [`KNOWN_SLOWER`] rows within their bounds; and the fused kernel (its GEMV part, all the model
/// sees) within 10 % of `gemv_int4` of the same weights at every TP and batch. The (kernel, TP)
/// cells compile on parallel threads.
#[test]
fn model_table_of_the_int4_kernels_gfx906() {
    if !tools() {
        return;
    }
    let batches = table_batches();
    let cells: Vec<(KernelId, u32)> = INT4
        .into_iter()
        .flat_map(|id| TP_SIZES.into_iter().map(move |tp| (id, tp)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(id, tp)) = cells.get(i) else { break };
                    let rows = table_cell(id, tp, &batches);
                    done.lock().expect("no panic holds it").push((i, rows));
                }
            });
        }
    });
    let mut done = done.into_inner().expect("no panic holds it");
    done.sort_by_key(|(i, _)| *i);
    let rows: Vec<Row> = done.into_iter().flat_map(|(_, r)| r).collect();
    let mut slower = Vec::new();
    let find = |id: KernelId, tp: u32, batch: usize, prefix: &str| {
        rows.iter()
            .find(|r| r.id == id && r.tp == tp && r.batch == batch && r.variant.starts_with(prefix))
            .map(|r| r.m.clone())
            .expect("a row")
    };
    for &(id, tp) in &cells {
        for &batch in &batches {
            let new = find(id, tp, batch, "generated, new");
            let hand = find(id, tp, batch, "hand-written");
            if batch == 1 {
                let old = find(id, tp, batch, "generated, old");
                // Issue rate under the bandwidth (the fit's 10.6 µs offset, against the memory
                // term's 5, still decides the bound of the small TP 8 shapes).
                let memory_us = new.memory_term_us - 5.0;
                assert!(1.18 * new.t_valu_us < memory_us, "{id}@tp{tp}: {new}");
                assert!(new.us <= old.us, "{id}@tp{tp}: new {new}, old {old}");
            }
            // No slower than the hand-written reference within the model's resolution: 1 %,
            // about 2 VALU instructions per 128 weights at TP 8, where both are VALU-bound by
            // the fit's offset.
            let bound = KNOWN_SLOWER
                .iter()
                .find(|k| (k.0, k.1, k.2) == (id, tp, batch))
                .map_or(1.01, |k| k.3);
            let ratio = new.us / hand.us;
            println!(
                "{id}@gfx906 tp{tp} b{batch}: generated / hand-written {ratio:.3} (bound {bound})"
            );
            if bound > 1.01 && ratio <= 1.01 {
                slower.push(format!(
                    "{id}@tp{tp} b{batch}: listed as slower, now {ratio:.3}: remove it from KNOWN_SLOWER"
                ));
            }
            if ratio > bound {
                slower.push(format!(
                    "{id}@tp{tp} b{batch}: generated {new}, hand-written {hand}"
                ));
            }
        }
    }
    // Issue 19: the fused kernel's GEMV part within 10 % of `gemv_int4` at the same shape: its
    // time without the grid barrier and flag round trips (issue 38 adds those), and at each TP
    // the two move the same weights (17408 / TP → 5120 against 5120 → 17408 / TP).
    for tp in TP_SIZES {
        for &batch in &batches {
            let (fused, gemv) = (
                find(
                    KernelId::GemvInt4AllreduceRmsnorm,
                    tp,
                    batch,
                    "generated, new",
                ),
                find(KernelId::GemvInt4, tp, batch, "generated, new"),
            );
            assert_eq!(fused.inputs.weights, gemv.inputs.weights, "tp {tp}");
            println!(
                "tp {tp} b{batch}: fused GEMV part / gemv_int4, same weights: {:.1} / {:.1} us = {:.3} (modelled, MI50)",
                fused.gemv_us(),
                gemv.us,
                fused.gemv_us() / gemv.us
            );
            let bound = FUSED_LATENCY_BOUND
                .iter()
                .find(|k| (k.0, k.1) == (tp, batch))
                .map_or(1.10, |k| k.2);
            if bound > 1.10 {
                assert_eq!(fused.bound, Bound::Latency, "tp {tp} b{batch}: {fused}");
            }
            assert!(
                fused.gemv_us() <= bound * gemv.us,
                "tp {tp} b{batch}: fused {fused}, gemv_int4 {gemv}"
            );
        }
    }
    if let Some(out) = std::env::var_os("WAVEFUSE_MODEL_OUT") {
        write_results(Path::new(&out), &rows);
    }
    assert!(
        slower.is_empty(),
        "generated slower than hand-written:\n{}",
        slower.join("\n")
    );
}

/// The model as it counted before issue 38's recount, from the same count: the loop's VALU on
/// every trip over the products' weights (what `valu_per_weight` is where no ABI gives facts,
/// as for these kernels), nothing outside the loop, no latency term, no fused parts.
fn before_recount(m: &Modelled) -> f64 {
    let t_valu = m.inputs.valu_per_weight * m.inputs.weights / 6.624e12 * 1e6;
    (1.18 * t_valu + 10.6).max(m.memory_term_us)
}

/// The rows of one (kernel, TP) cell: per batch the new default and the reference, at batch 1
/// also the old default.
fn table_cell(id: KernelId, tp: u32, batches: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    for &batch in batches {
        let (new_k, new_c) = generated(id, tp, batch, "");
        let (ref_c, grid, wg) = reference(id, tp, batch);
        let new = model(&inputs_for(&new_k, &new_c.hot, batch, new_c.occupancy).expect("inputs"));
        // The reference moves the generated kernel's data (same data parameters), not its
        // scratch (the generated kernel's split-K partials are its own).
        let mut ri = inputs_for(&new_k, &ref_c.hot, batch, ref_c.occupancy).expect("inputs");
        ri.grid = grid;
        ri.workgroup_size = wg;
        ri.lds_bytes_per_workgroup = ref_c.lds;
        ri.bytes -= 2.0 * scratch_bytes(&new_k);
        let hand = model(&ri);
        let mut variants = Vec::new();
        if batch == 1 {
            let (old_k, old_c) = generated(id, tp, 1, FMA_PATH);
            let old = model(&inputs_for(&old_k, &old_c.hot, 1, old_c.occupancy).expect("inputs"));
            variants.push(("generated, old default (fma)", old_c.vgprs, old));
        }
        variants.push(("generated, new default (dot2 floor)", new_c.vgprs, new));
        variants.push(("hand-written reference", ref_c.vgprs, hand));
        for (variant, vgprs, m) in variants {
            let before = before_recount(&m);
            println!(
                "{id}@gfx906 tp{tp} b{batch} {variant}: {vgprs} VGPRs; {m}; \
                 before the recount (issue 38) {before:.1} us, now {:.1} us ({:+.1} %)",
                m.us,
                (m.us / before - 1.0) * 100.0
            );
            rows.push(Row {
                id,
                tp,
                batch,
                variant,
                vgprs,
                m,
            });
        }
    }
    rows
}

fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn hipcc_version() -> String {
    Hipcc::from_env()
        .version()
        .ok()
        .and_then(|v| {
            v.lines()
                .find(|l| l.starts_with("HIP version"))
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// Writes the table into `out` (relative: from the repository root, where the command recorded
/// in it runs).
fn write_results(out: &Path, rows: &[Row]) {
    let command = format!(
        "WAVEFUSE_MODEL_OUT={} cargo test -p wavefuse-tests --test gfx906_model -- --nocapture model_table",
        out.display()
    );
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(out);
    let out = out.as_path();
    std::fs::create_dir_all(out).expect("output dir");
    let commit = commit();
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "kernel": r.id.name(),
                "tp": r.tp,
                "batch": r.batch,
                "variant": r.variant,
                "vgprs": r.vgprs,
                "label": "modelled (MI50)",
                "model": r.m,
                "before_recount_us": before_recount(&r.m),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "what": "modelled (MI50) times of the gfx906 INT4 kernels: max(1.18 x T_VALU + 10.6 us, bytes / 0.85 TB/s + 5 us, latency term) + grid barriers x 1.5 us + PCIe flag round trips x 5 us, T_VALU = (VALU/weight x weights + VALU outside the loop per wave x 64 x waves) / 6.62e12 per s (DESIGN.md section 6, wavefuse_codegen::model, docs/model.md); before_recount_us: the same count as the model was before issue 38 (loop only, no latency term, no fused parts); nothing ran on a GPU",
        "device": "none (modelled MI50: 60 CUs, 1.725 GHz, 0.85 TB/s)",
        "compiler": hipcc_version(),
        "commit": commit,
        "command": command,
        "rows": json,
    });
    std::fs::write(
        out.join("model.json"),
        serde_json::to_string_pretty(&doc).expect("json") + "\n",
    )
    .expect("write model.json");
    let mut md = String::new();
    md.push_str("# gfx906 INT4 kernels: modelled (MI50) times, generated (old and new default) and hand-written\n\n");
    md.push_str("**Every time here is modelled (MI50), not measured**: no AMD GPU ran anything. The model \
        (`codegen/src/model/`, constants and sources from DESIGN.md §6) is \
        `max(1.18 × T_VALU + 10.6 µs, bytes / 0.85 TB/s + 5 µs, latency term) + grid barriers × 1.5 µs + PCIe flag round trips × 5 µs`, \
        `T_VALU = (VALU/weight × weights + VALU outside the loop per wave × 64 × waves) / 6.62e12 per s` (docs/model.md), \
        where VALU/weight is counted in hipcc 5.2's machine code of the kernel's hot loop (`llvm-objdump --mcpu=gfx906`, \
        the whole loop body: decode, products, scale, address arithmetic, loop control) and the VALU outside the loop are those \
        on every wave's path. \"before the recount\" is the model as it was before issue 38, from the same count: the loop only, \
        no latency term, no fused parts. The bytes: the data arrays once, the generated kernel's scratch \
        (split-K partials, published and norm partials: written once, read once) twice; the reference is given the data arrays' bytes. \
        Where the activations are staged in phases (the fused kernel at batch 4 and 8) the hot loop is the phase loop, its staging \
        included; a whole-part stage is outside the hot loop and not counted. Grid tails (fewer workgroups than CUs, uneven rounds) are not modelled. \
        \"in flight\" is the hot loop's most outstanding \
        vector-memory load bytes per wave × the waves resident per CU (the fewer of 4 × occupancy and the grid's waves \
        over 60 CUs); under 16 KB the memory term is optimistic and the row is flagged. The old default only at batch 1.\n\n");
    let _ = writeln!(md, "- compiler: {}", hipcc_version());
    let _ = writeln!(
        md,
        "- commit: `{commit}` (the table was written from this commit's code)"
    );
    let _ = writeln!(md, "- command: `{command}` (`tests/tests/gfx906_model.rs`)");
    md.push_str("- old default: the FMA path (`int4_dot = fma`, one word per lane); new default: the dot2 floor path \
        (`int4_dot = dot2`, `mma_decode = fma`, byte offsets): at batch 1 4 packed columns per lane (2 for two weights), the \
        activations in LDS where ≤ 16 KiB, else K split into the fewest parts whose activations fit (the fused kernel at TP 1: \
        4 parts of 128-column tiles, TP 2: 2 of 64); at batch > 1 where they exceed 16 KiB the whole K staged in phases of one \
        unit per K slice (`floor_phases`): 4 packed columns per lane at batch 2 (32-column tiles; 2 for two weights) and 3–4 \
        (64-column tiles), 2 from batch 5 (1 for two weights) in units of 8 K-words where the same K slices divide them (else 4), \
        32-column tiles where 64 would leave CUs without a workgroup; \
        hand-written: `kernels-gen/reference/hip/`, compiled with its ABI file's defines and counted the same way \
        (bytes and weights: the generated kernel's data parameters, which the reference shares)\n\n");
    md.push_str("| kernel | TP | batch | variant | VALU/weight | VALU outside / wave | M weights | MB | VGPRs | occupancy | grid × lanes | KB in flight / CU | T_VALU µs | VALU term µs | memory term µs | fused µs | **modelled (MI50) µs** | bound | GB/s | before the recount µs |\n");
    md.push_str(
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (m, i) = (&r.m, &r.m.inputs);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.2} | {:.0} | {:.1} | {:.2} | {} | {} | {} × {} | {:.1}{} | {:.1} | {:.1} | {:.1} | {:.1} | **{:.1}** | {} | {:.0} | {:.1} |",
            r.id.name(),
            r.tp,
            r.batch,
            r.variant,
            i.valu_per_weight,
            i.valu_outside_per_wave,
            i.weights / 1e6,
            i.bytes / 1e6,
            r.vgprs,
            i.occupancy,
            i.grid,
            i.workgroup_size,
            m.bytes_in_flight_per_cu / 1024.0,
            if m.few_loads_in_flight { " ⚠" } else { "" },
            m.t_valu_us,
            m.valu_term_us,
            m.memory_term_us.max(m.latency_term_us),
            m.fused_us,
            m.us,
            match m.bound {
                Bound::Valu => "VALU",
                Bound::Memory => "memory",
                Bound::Latency => "latency",
            },
            m.gb_per_s(),
            before_recount(m)
        );
    }
    std::fs::write(out.join("README.md"), md).expect("write README.md");
}

/// Issue 40's modelled rows: `gemv_int4` at the (K, N) shapes of the GPU batch table
/// (`bench/results/2026-12-05-gpu-batch64/run.sh`: 5120 → 17408, 17408 → 5120 and the TP 4 rank
/// shapes 5120 → 4352, 4352 → 5120, 1536 → 5120, each a model whose hidden size is K and FFN
/// width N, at TP 1), batch 1 to 64.
const BATCH64_SHAPES: [(usize, usize); 5] = [
    (5120, 17408),
    (17408, 5120),
    (5120, 4352),
    (4352, 5120),
    (1536, 5120),
];

/// The batches of issue 40's table.
const BATCH64_BATCHES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// One row of issue 40's table: the generated default (in batch tiles of 32 past 16 rows) and the
/// hand-written reference (in tiles of 8 past 8) at one shape and batch.
struct Batch64Row {
    k: usize,
    n: usize,
    batch: usize,
    /// VGPRs and the model, or why there is none.
    generated: Result<(u32, Modelled), String>,
    hand: Result<(u32, Modelled), String>,
}

/// `gemv_int4` at K → N, batch `batch`: the default (what `wavefuse emit` prints for that model
/// config) and the reference, compiled with hipcc and modelled.
fn batch64_row(k: usize, n: usize, batch: usize) -> Batch64Row {
    use wavefuse_harness::policy::{Placement, SchedulePolicy};
    use wavefuse_harness::suite::ShapeKind;
    use wavefuse_kernels::shapes::Model;
    let model_dims = Model {
        hidden: k,
        ffn: n,
        ..Model::QWEN27B
    };
    // `WAVEFUSE_MODEL_OVERRIDES` (schedule `field=value,…`): the generated side with them, to
    // compare a schedule choice (e.g. `batch_tile=16`) by the model.
    let overrides = std::env::var("WAVEFUSE_MODEL_OVERRIDES")
        .ok()
        .into_iter()
        .map(|spec| wavefuse_harness::policy::Override {
            origin: "$WAVEFUSE_MODEL_OVERRIDES".into(),
            arch: Some(ARCH),
            spec,
        })
        .collect();
    let g = wavefuse_harness::generate::generate_at(
        KernelId::GemvInt4,
        ARCH,
        (1, batch, ShapeKind::Of(model_dims)),
        &SchedulePolicy::new(None, overrides),
        Placement::PerDevice,
    )
    .unwrap_or_else(|e| panic!("{k} -> {n} b{batch}: {e}"));
    let c = wavefuse_harness::generate::compile_source(&Hipcc::from_env(), &g.source)
        .unwrap_or_else(|e| panic!("{k} -> {n} b{batch}: {e}"));
    let generated = try_count(&c.artifact).and_then(|new_c| {
        let i = inputs_for(&g.lowered, &new_c.hot, batch, new_c.occupancy)
            .ok_or_else(|| format!("no products in the hottest loop ({})", new_c.hot.counted()))?;
        Ok((new_c.vgprs, model(&i)))
    });
    // The reference at the same shapes, its launch, LDS and weight passes from its ABI file.
    let template =
        std::fs::read_to_string(reference_dir().join("gemv_int4.abi.toml")).expect("ABI file");
    let text = wavefuse_harness::ab::parametric::instantiate(
        &template,
        &wavefuse_harness::ab::parametric::Bindings::of(&g.ir),
    )
    .expect("instantiates");
    let abi: toml::Value = toml::from_str(&text).expect("ABI file parses");
    let defines: Vec<String> = abi["build"]["defines"]
        .as_array()
        .expect("defines")
        .iter()
        .map(|d| d.as_str().expect("a define").to_owned())
        .collect();
    let int = |v: &toml::Value| v.as_integer().expect("an integer") as u32;
    let mut req = CompileRequest::new(
        "gemv_int4",
        std::fs::read_to_string(reference_dir().join("gemv_int4.hip")).expect("source"),
        ARCH,
    );
    req.extra_flags = defines.iter().map(|d| format!("-D{d}")).collect();
    let a = Hipcc::from_env()
        .compile(&req)
        .unwrap_or_else(|e| panic!("hipcc reference {k} -> {n} b{batch}: {e}"));
    let hand = try_count(&a).and_then(|ref_c| {
        assert_eq!(
            ref_c.lds,
            int(&abi["static_lds_bytes"]),
            "{k} -> {n} b{batch}: the reference's LDS against its ABI"
        );
        // Its passes (tiles of 8 past batch 8) choose its loop, as `check --manual` does.
        let passes = abi
            .get("model")
            .and_then(|m| m.get("weight_passes"))
            .map_or(1.0, |p| f64::from(int(p)));
        let facts = LoopFacts {
            weight_passes: Some(passes),
            ..LoopFacts::default()
        };
        let mut ri = inputs_with(&g.lowered, &ref_c.hot, batch, ref_c.occupancy, &facts)
            .ok_or_else(|| format!("no products in the hottest loop ({})", ref_c.hot.counted()))?;
        ri.grid = int(&abi["grid"]);
        ri.workgroup_size = int(&abi["workgroup_size"]);
        ri.lds_bytes_per_workgroup = ref_c.lds;
        ri.bytes -= 2.0 * scratch_bytes(&g.lowered);
        with_weight_passes(&mut ri, &g.lowered, passes);
        Ok((ref_c.vgprs, model(&ri)))
    });
    Batch64Row {
        k,
        n,
        batch,
        generated,
        hand,
    }
}

/// Issue 40's modelled MI50 table: `gemv_int4` generated and hand-written at the GPU table's
/// five shapes, batch 1 to 64 (70 rows, 140 hipcc compiles on parallel threads: minutes on 2
/// cores), every time "modelled (MI50)" with its inputs. Asserts what the lowering promises:
/// the generated default within 128 VGPRs and without spills at every row, and its weight bytes
/// read `ceil(batch / 32)` times past batch 16 (its batch tiles). With `WAVEFUSE_MODEL_OUT=DIR` writes
/// `DIR/table.md` and `DIR/model.json` (`WAVEFUSE_MODEL_BATCHES`, `WAVEFUSE_MODEL_SHAPES` restrict
/// it; `WAVEFUSE_MODEL_OVERRIDES` gives the generated side schedule overrides) (the committed run:
/// `bench/results/2026-12-06-mi50-model-tile-loop/`):
/// `WAVEFUSE_MODEL_OUT=bench/results/2026-12-06-mi50-model-tile-loop cargo test -p wavefuse-tests --test gfx906_model -- --ignored --nocapture batch64_table`.
#[test]
#[ignore = "issue 40's modelled table: 140 hipcc compiles (minutes)"]
fn batch64_table_of_gemv_int4_gfx906() {
    if !tools() {
        return;
    }
    // `WAVEFUSE_MODEL_BATCHES` / `WAVEFUSE_MODEL_SHAPES` (`KxN,…`) restrict the table.
    let batches: Vec<usize> = std::env::var("WAVEFUSE_MODEL_BATCHES").map_or_else(
        |_| BATCH64_BATCHES.to_vec(),
        |v| {
            v.split(',')
                .map(|b| b.trim().parse().expect("a batch"))
                .collect()
        },
    );
    let shapes: Vec<(usize, usize)> = std::env::var("WAVEFUSE_MODEL_SHAPES").map_or_else(
        |_| BATCH64_SHAPES.to_vec(),
        |v| {
            v.split(',')
                .map(|kn| {
                    let (k, n) = kn.trim().split_once('x').expect("KxN");
                    (k.parse().expect("K"), n.parse().expect("N"))
                })
                .collect()
        },
    );
    let cells: Vec<(usize, usize, usize)> = shapes
        .iter()
        .flat_map(|&(k, n)| batches.iter().map(move |&b| (k, n, b)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(k, n, b)) = cells.get(i) else {
                        break;
                    };
                    let row = batch64_row(k, n, b);
                    done.lock().expect("no panic holds it").push((i, row));
                }
            });
        }
    });
    let mut done = done.into_inner().expect("no panic holds it");
    done.sort_by_key(|(i, _)| *i);
    let rows: Vec<Batch64Row> = done.into_iter().map(|(_, r)| r).collect();
    let mut problems = Vec::new();
    for r in &rows {
        let show = |side: &Result<(u32, Modelled), String>| match side {
            Ok((v, m)) => format!("{v} VGPRs, {m}"),
            Err(e) => format!("no model: {e}"),
        };
        println!(
            "gemv_int4@gfx906 {} -> {} b{}: generated {}\n    hand-written {}",
            r.k,
            r.n,
            r.batch,
            show(&r.generated),
            show(&r.hand)
        );
        let (gv, g) = match &r.generated {
            Ok(side) => side,
            Err(e) => {
                problems.push(format!("{} -> {} b{}: {e}", r.k, r.n, r.batch));
                continue;
            }
        };
        if *gv > 128 {
            problems.push(format!("{} -> {} b{}: {gv} VGPRs", r.k, r.n, r.batch));
        }
        if std::env::var_os("WAVEFUSE_MODEL_OVERRIDES").is_none() {
            // `gemv_int4` (a GEMV alone) tiles past 16 rows in tiles of 32.
            let passes = if r.batch > 16 {
                r.batch.div_ceil(32)
            } else {
                1
            };
            let once = g.inputs.weights / 8.0 * 4.0;
            assert!(
                g.inputs.bytes >= passes as f64 * once,
                "{} -> {} b{}: {passes} weight passes",
                r.k,
                r.n,
                r.batch
            );
        }
    }
    if let Some(out) = std::env::var_os("WAVEFUSE_MODEL_OUT") {
        write_batch64(Path::new(&out), &rows);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// `table.md` and `model.json` of issue 40's table into `out` (relative: from the repository
/// root).
fn write_batch64(out: &Path, rows: &[Batch64Row]) {
    let command = format!(
        "WAVEFUSE_MODEL_OUT={} cargo test -p wavefuse-tests --test gfx906_model -- --ignored --nocapture batch64_table",
        out.display()
    );
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(out);
    std::fs::create_dir_all(&out).expect("output dir");
    let side = |s: &Result<(u32, Modelled), String>| match s {
        Ok((vgprs, m)) => serde_json::json!({
            "vgprs": vgprs,
            "label": "modelled (MI50)",
            "us": m.us,
            "bound": m.bound_name(),
            "dot_floor_us": m.dot_floor_us,
            "occupancy": m.occupancy,
            "model": m,
        }),
        Err(e) => serde_json::json!({ "no_model": e }),
    };
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "k": r.k,
                "n": r.n,
                "batch": r.batch,
                "generated": side(&r.generated),
                "hand_written": side(&r.hand),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "what": "modelled (MI50) times of gemv_int4 generated (default schedule) and hand-written (kernels-gen/reference/hip/gemv_int4.hip), batch 1-64; nothing ran on a GPU",
        "device": "none (modelled MI50: 60 CUs, 1.725 GHz, 0.85 TB/s)",
        "compiler": hipcc_version(),
        "commit": commit(),
        "command": command,
        "rows": json,
    });
    std::fs::write(
        out.join("model.json"),
        serde_json::to_string_pretty(&doc).expect("json") + "\n",
    )
    .expect("write model.json");
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Every time is **modelled (MI50)**, not measured. `{command}` at `{}` ({}).\n",
        commit(),
        hipcc_version()
    );
    md.push_str("| K → N | batch | generated µs | bound | VGPRs / occ | VALU/weight | MB | hand-written µs | bound | VGPRs / occ | VALU/weight | MB | gen / hand | dot-issue floor µs | gen / floor |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let cells = |s: &Result<(u32, Modelled), String>| match s {
        Ok((v, m)) => format!(
            "**{:.1}** | {} | {v} / {} | {:.2} | {:.1}",
            m.us,
            m.bound_name(),
            m.occupancy,
            m.inputs.valu_per_weight,
            m.inputs.bytes / 1e6
        ),
        Err(e) => format!("no model: {e} | | | |"),
    };
    for r in rows {
        let (ratio, floor, over) = match (&r.generated, &r.hand) {
            (Ok((_, g)), Ok((_, h))) => (
                format!("{:.3}", g.us / h.us),
                format!("{:.1}", g.dot_floor_us),
                format!("{:.2}", g.over_dot_floor().unwrap_or(0.0)),
            ),
            (Ok((_, g)), Err(_)) => (
                String::new(),
                format!("{:.1}", g.dot_floor_us),
                format!("{:.2}", g.over_dot_floor().unwrap_or(0.0)),
            ),
            _ => Default::default(),
        };
        let _ = writeln!(
            md,
            "| {} → {} | {} | {} | {} | {ratio} | {floor} | {over} |",
            r.k,
            r.n,
            r.batch,
            cells(&r.generated),
            cells(&r.hand),
        );
    }
    std::fs::write(out.join("table.md"), md).expect("write table.md");
}
