//! q8 activations (issue 19 item 2): the user's opt-in `quantize_int8.rne` + `gemv_q8`, written
//! in the DSL and in the textual IR (`examples/gemv_int4_q8.wfir`).

use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint, parse, validate};

wavefuse::kernel! {
    /// y = W·x with GPTQ INT4 weights and q8 activations: x quantised per block of 32 K rows,
    /// round half to even, codes clamped to ±127.
    pub fn gemv_int4_q8(tp: u32, batch: usize, hidden: usize, n: usize, gptq: GptqLayout) across tp {
        in w: gptq(gptq)[hidden, n] col_parallel;
        in x: f16[batch, hidden];
        out y: f16[batch, n] col_parallel;

        let (q, s) = quantize_int8.rne(x, block = 32, clamp = 127);
        y = round_f16(gemv_q8.col(w, q, s, block = 32));
    }
}

/// The DSL kernel and the example `.wfir` file are the same kernel (printed alike; the file's
/// comments aside), and it validates.
#[test]
fn q8_dsl_is_the_example_file() {
    let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
    let dsl = gemv_int4_q8(1, 8, 5120, 17408, layout);
    validate(&dsl).expect("valid");
    let file = include_str!("../../examples/gemv_int4_q8.wfir");
    let parsed = parse(file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dsl.to_string(), parsed.to_string());
}

// ---------------------------------------------------------------------------------------------
// gfx906 machine code: VALU per weight, registers, occupancy, the MI50 model
// ---------------------------------------------------------------------------------------------

use wavefuse::ir::Kernel;
use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp;
use wavefuse_codegen::lower::{Schedule, lower};
use wavefuse_codegen::model::{HotLoop, Modelled, inputs_for, instructions_with_targets, model};
use wavefuse_harness::generate;
use wavefuse_runtime::compile::{Bounds, Compiler, Hipcc, disassemble, objdump};

wavefuse::kernel! {
    /// The FP16-activation GEMV of the same shape (the kernel set's `gemv_int4`).
    pub fn gemv_int4_fp16(tp: u32, batch: usize, hidden: usize, n: usize, gptq: GptqLayout) across tp {
        in w: gptq(gptq)[hidden, n] col_parallel;
        in x: f16[batch, hidden];
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv.col(w, x));
    }
}

/// A compiled kernel: its hot loop, the VALU of the loops before the first workgroup barrier
/// (the q8 quantisation prologue), hipcc's resources and the MI50 model.
struct Isa {
    hot: HotLoop,
    vgprs: u32,
    occupancy: u32,
    lds: u32,
    modelled: Modelled,
    /// The model with the prologue's VALU lane-instructions counted too.
    with_prologue: Option<Modelled>,
    usage: wavefuse_codegen::resources::ResourceUsage,
    workgroup_size: u32,
}

/// The VALU instructions before the second `s_barrier` (the q8 prologue's two passes, each
/// followed by a workgroup barrier), and those of each loop (backward branch) among them.
fn prologue_valu(disasm: &str) -> (usize, Vec<usize>) {
    let ins = instructions_with_targets(disasm);
    let barrier = ins
        .iter()
        .enumerate()
        .filter(|(_, (_, c, _))| c.starts_with("s_barrier"))
        .nth(1)
        .map_or(ins.len(), |(i, _)| i);
    let all = ins[..barrier]
        .iter()
        .filter(|(_, c, _)| c.starts_with("v_"))
        .count();
    let mut loops = Vec::new();
    for (i, (addr, code, target)) in ins[..barrier].iter().enumerate() {
        let Some(t) = target.filter(|t| t <= addr && code.starts_with("s_cbranch")) else {
            continue;
        };
        let start = ins.iter().position(|(a, _, _)| *a >= t).unwrap_or(i);
        loops.push(
            ins[start..=i]
                .iter()
                .filter(|(_, c, _)| c.starts_with("v_"))
                .count(),
        );
    }
    (all, loops)
}

fn compile(k: &Kernel, batch: usize, prologue_items: Option<(usize, usize)>) -> Isa {
    let s = Schedule::default_for(Arch::Gfx906, k);
    let lowered = lower(k, Arch::Gfx906, &s).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    let src = cpp::emit(&lowered).expect("writes");
    let c = generate::compile_source(&Hipcc::from_env(), &src)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    assert_eq!(c.usage.scratch_bytes(), 0, "{}: scratch", k.name());
    let text = disassemble(&c.artifact.image, Arch::Gfx906, &Bounds::default()).expect("objdump");
    let hot = HotLoop::from_disassembly(&text).expect("a loop");
    let occupancy = c.usage.occupancy(lowered.workgroup_size);
    let inputs = inputs_for(&lowered, &hot, batch, occupancy).expect("model inputs");
    let modelled = model(&inputs);
    // The prologue: its code once per lane, and the loops of its two passes — the quantisation
    // (one block per lane per iteration) and X (one group per lane per iteration) — as many
    // more times as each wave iterates (lane l takes items l, l + 256, ...: wave w iterates
    // ceil((items − 64w) / 256) times). Where hipcc made no loop (at most one item per lane)
    // the code runs once.
    let with_prologue = prologue_items.map(|(blocks, groups)| {
        let (all, loops) = prologue_valu(&text);
        let wg = lowered.workgroup_size as usize;
        // Items per workgroup: its K part's blocks and groups.
        let split = s.k_split as usize;
        let (blocks, groups) = (blocks / split, groups / split);
        let more = |items: usize| -> usize {
            (0..wg / 64)
                .map(|w| items.saturating_sub(64 * w).div_ceil(wg).saturating_sub(1) * 64)
                .sum()
        };
        let extra = match loops[..] {
            [q, x] => q * more(blocks) + x * more(groups),
            [q] => q * more(blocks),
            _ => 0,
        };
        let mut i = inputs.clone();
        // The prologue's count replaces the per-wave count of the code outside the hot loop.
        i.valu_outside_per_wave = 0.0;
        i.other_valu_lane_instructions = ((all * wg + extra) * lowered.grid as usize) as f64;
        model(&i)
    });
    Isa {
        hot,
        vgprs: c.usage.registers(),
        occupancy,
        lds: c.usage.lds_bytes(),
        modelled,
        with_prologue,
        usage: c.usage.clone(),
        workgroup_size: lowered.workgroup_size,
    }
}

/// hipcc's gfx906 code of the q8 GEMV at 5120 → 17408 (blocks of 32, group 128) at batch 1, 2,
/// 4, 8: `v_dot4_i32_i8` in the hot loop, no scratch, VALU per weight (the whole group loop:
/// unpack, dot4, per-block convert and scale, per-group fold, addresses, loop control) under a
/// CI ceiling per batch (the measured value plus ~7 %), the batch-8 kernel within its budget in
/// kernels-gen/budgets.toml; and the MI50 model (modelled, not measured) of the q8 kernel
/// against the FP16 default at the same batch: faster at batch 8 (VALU-bound on the FP16
/// path), never slower. Prints the table bench/results/2026-12-03-gfx906-q8/ keeps.
#[test]
fn q8_gemv_valu_per_weight_and_model_gfx906() {
    if !(wavefuse_test_support::found("hipcc", Hipcc::from_env().version())
        && wavefuse_test_support::found("llvm-objdump", objdump()))
    {
        return;
    }
    let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
    let (hidden, n, block) = (5120, 17408, 32);
    let budgets = generate::budgets().expect("budgets parse");
    for (batch, ceiling) in [(1, 0.98), (2, 1.32), (4, 2.03), (8, 3.65)] {
        let q8 = gemv_int4_q8(1, batch, hidden, n, layout);
        let fp16 = gemv_int4_fp16(1, batch, hidden, n, layout);
        let a = compile(
            &q8,
            batch,
            Some((batch * hidden / block, batch * hidden / 128)),
        );
        let b = compile(&fp16, batch, None);
        assert!(
            a.hot.dot4 > 0,
            "batch {batch}: no v_dot4_i32_i8 in the hot loop"
        );
        let r = a.hot.valu_per_weight(batch).expect("products");
        let rf = b.hot.valu_per_weight(batch).expect("products");
        let wp = a.with_prologue.as_ref();
        println!(
            "batch {batch}: q8 {r:.2} VALU/weight, {} VGPRs, {} B LDS, occupancy {}, modelled (MI50) {:.1} us ({:.1} us with the quantisation prologue); \
             FP16 default {rf:.2} VALU/weight, {} VGPRs, occupancy {}, modelled (MI50) {:.1} us",
            a.vgprs,
            a.lds,
            a.occupancy,
            a.modelled.us,
            wp.map_or(f64::NAN, |m| m.us),
            b.vgprs,
            b.occupancy,
            b.modelled.us,
        );
        println!("  q8: {}", wp.unwrap_or(&a.modelled));
        assert!(
            r <= ceiling,
            "batch {batch}: {r:.3} VALU per weight in the q8 hot loop (ceiling {ceiling})"
        );
        let slowest = wp.map_or(a.modelled.us, |m| m.us);
        // Within 3 %: where both are memory-bound the q8 kernel moves its 4 K parts' f32
        // partials too (4 · B · N · 4 bytes written and read: 1.2 % of the bytes at batch 1,
        // 2.4 % at batch 2), which the FP16 default (no K split) does not.
        assert!(
            slowest <= b.modelled.us * 1.03,
            "batch {batch}: q8 modelled {slowest:.1} us, FP16 {:.1} us",
            b.modelled.us
        );
        if batch == 8 {
            // A quarter faster at least: 69.9 against 99.2 µs (0.70) since the FP16 default
            // takes units of 8 K-words at batch 8 (`bench/results/2026-12-03-gfx906-batch8/`),
            // 0.69 against 101.6 before.
            assert!(slowest < 0.75 * b.modelled.us, "no gain at batch 8");
            let limit = budgets
                .valu_per_weight_ceiling(Arch::Gfx906, "gemv_int4_q8", 1)
                .expect("a budget entry");
            assert!(r <= limit, "{r} over the budget's {limit}");
            let v = budgets.check(Arch::Gfx906, "gemv_int4_q8", 1, &a.usage, a.workgroup_size);
            assert!(v.ok() && v.entries >= 2, "over budget: {}", v.describe());
        }
    }
}

/// Snapshots of the example q8 kernel (`examples/gemv_int4_q8.wfir`, batch 8): its textual IR,
/// its HIP for gfx906 and its CUDA for sm_90, as `wavefuse emit --kernel-file` writes them.
#[test]
fn q8_example_snapshots() {
    let file = include_str!("../../examples/gemv_int4_q8.wfir");
    let k = parse(file).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("gemv_int4_q8@ir_tp1", k.to_string());
    for (arch, name) in [(Arch::Gfx906, "gfx906"), (Arch::Sm90, "sm90")] {
        let lowered = lower(&k, arch, &Schedule::default_for(arch, &k)).expect("lowers");
        let src = cpp::emit(&lowered).expect("writes");
        insta::assert_snapshot!(format!("gemv_int4_q8@{name}_tp1"), src.text);
    }
}

/// Misuse of the q8 ops in a `.wfir` file is a validation error that starts with the file, line
/// and column of the offending op's mnemonic (here: the GEMV's block is not the quantisation's).
#[test]
fn invalid_q8_block_in_a_file_points_at_the_op() {
    let file = include_str!("../../examples/gemv_int4_q8.wfir").replace(
        "gemv_q8.col buf0, v1, v2, block=32",
        "gemv_q8.col buf0, v1, v2, block=64",
    );
    let k = wavefuse::ir::parse_named(&file, "bad_q8.wfir").expect("parses");
    let e = validate(&k).expect_err("the scales do not match the block");
    let (line, l) = file
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("gemv_q8.col"))
        .expect("the op's line");
    let column = l.find("gemv_q8.col").expect("mnemonic") + 1;
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("bad_q8.wfir:{}:{column}: ", line + 1)),
        "{msg}"
    );
    assert!(
        msg.contains("gemv_q8.col") && msg.contains("scales"),
        "{msg}"
    );
}

/// nvcc compiles the q8 GEMV for sm_90 (`dp4a`) at 5120 → 17408, batch 1 and 8, with the default
/// schedule: no spills, no stack frame (it need not be fast there; the simulator and the
/// interpreter check it is correct).
#[test]
fn q8_gemv_compiles_for_sm90() {
    use wavefuse_runtime::compile::Nvcc;
    if !wavefuse_test_support::found("nvcc", Nvcc::from_env().version()) {
        return;
    }
    let layout = GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1);
    for batch in [1, 8] {
        let k = gemv_int4_q8(1, batch, 5120, 17408, layout);
        let lowered = lower(&k, Arch::Sm90, &Schedule::default_for(Arch::Sm90, &k))
            .unwrap_or_else(|e| panic!("batch {batch}: {e}"));
        let src = cpp::emit(&lowered).expect("writes");
        assert!(src.text.contains("__dp4a"), "batch {batch}: no dp4a");
        let c = generate::compile_source(&Nvcc::from_env(), &src)
            .unwrap_or_else(|e| panic!("batch {batch}: {e}"));
        assert_eq!(c.usage.scratch_bytes(), 0, "batch {batch}: stack frame");
        println!(
            "sm90 batch {batch}: {} x {} lanes, {} registers, occupancy {}",
            lowered.grid,
            lowered.workgroup_size,
            c.usage.registers(),
            c.usage.occupancy(lowered.workgroup_size)
        );
    }
}
