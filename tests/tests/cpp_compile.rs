//! The writer's output on hand-built kernels (the miniature fused kernel of the codegen crate's
//! tests) compiles with the real compilers through the runtime's drivers (hipcc for gfx906, nvcc
//! for sm_90), and the gfx906 machine code has the synchronisation the source asks for.
//! Without the tools: "skipped: ... not found", except under CI, where missing tools fail.

#[allow(dead_code)] // the miniature kernels the codegen crate's own tests share
#[path = "../../codegen/tests/cpp_kernels/mod.rs"]
mod cpp_kernels;

use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp::{self};
use wavefuse_harness::generate::{Compiled, compile_source};
use wavefuse_harness::pipeline::{self, Purpose};
use wavefuse_runtime::compile::{Bounds, disassemble, objdump};

use cpp_kernels::mini_fused;

/// `Some(())` when `check`'s compiler for `arch` is installed, else `None` after printing why the
/// test is skipped; panics under CI.
fn compiler(arch: Arch) -> Option<()> {
    let c = pipeline::compiler(arch, Purpose::Check(&Bounds::default()));
    wavefuse_test_support::found(c.id().name(), c.version()).then_some(())
}

/// `Some(())` when llvm-objdump is installed (as [`compiler`]).
fn llvm_objdump() -> Option<()> {
    wavefuse_test_support::found("llvm-objdump", objdump()).then_some(())
}

/// Compile the miniature fused kernel; `check` sees the result.
fn compile(arch: Arch, check: impl FnOnce(&Compiled, u32)) {
    let k = mini_fused(arch, 2);
    let src = cpp::emit(&k).expect("writes");
    let c = compile_source(
        &*pipeline::compiler(arch, Purpose::Check(&Bounds::default())),
        &src,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    check(&c, k.workgroup_size);
}

#[test]
fn mini_fused_compiles_without_spills_gfx906() {
    let Some(()) = compiler(Arch::Gfx906) else {
        return;
    };
    compile(Arch::Gfx906, |c, wg| {
        let r = &c.usage;
        assert_eq!(
            (r.spilled(), r.scratch_bytes()),
            (0, 0),
            "{}",
            c.artifact.log
        );
        assert_eq!(r.lds_bytes(), 16);
        assert!(r.registers() <= 64 && r.occupancy(wg) >= 4, "{r:?}");
    });
}

#[test]
fn mini_fused_compiles_without_stack_sm90() {
    let Some(()) = compiler(Arch::Sm90) else {
        return;
    };
    compile(Arch::Sm90, |c, _| {
        let r = &c.usage;
        assert_eq!(
            (r.spilled(), r.scratch_bytes()),
            (0, 0),
            "{}",
            c.artifact.log
        );
        assert_eq!(r.lds_bytes(), 32);
    });
}

/// The instructions between two labels / the whole kernel, one per line, without encodings.
fn instructions(disasm: &str) -> Vec<String> {
    disasm
        .lines()
        .filter(|l| l.starts_with('\t') || l.starts_with("  "))
        .map(|l| l.split("//").next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn grid_barrier_and_acquires_in_machine_code_gfx906() {
    let (Some(()), Some(())) = (compiler(Arch::Gfx906), llvm_objdump()) else {
        return;
    };
    let mut text = String::new();
    compile(Arch::Gfx906, |c, _| {
        text = disassemble(&c.artifact.image, Arch::Gfx906, &Bounds::default())
            .unwrap_or_else(|e| panic!("{e}"));
    });
    let ins = instructions(&text);
    // One arrival per grid barrier (one barrier in this kernel), then the device epoch's advance
    // at exit (§5.4), each issued by one lane: it sits after an exec-masking `s_and_saveexec` and
    // before the matching `s_or_b64 exec`. The first is the barrier's.
    let adds: Vec<usize> = ins
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("global_atomic_add "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(adds.len(), 2, "{text}");
    let before = &ins[..adds[0]];
    let mask = before
        .iter()
        .rposition(|l| l.starts_with("s_and_saveexec_b64"))
        .expect("exec-masked branch");
    assert!(
        !before[mask..]
            .iter()
            .any(|l| l.starts_with("s_or_b64 exec")),
        "the arrival is outside the lane-0 branch:\n{text}"
    );
    // Its release waits for this wave's stores first.
    assert!(
        before[mask..]
            .iter()
            .any(|l| l.starts_with("s_waitcnt vmcnt(0)")),
        "{text}"
    );
    // Every agent/system acquire invalidates the L1 afterwards: at least one per flag wait
    // loop and one per barrier wait loop, plus the explicit fence.
    let inv = ins
        .iter()
        .filter(|l| l.starts_with("buffer_wbinvl1_vol"))
        .count();
    assert!(inv >= 3, "{inv} buffer_wbinvl1_vol:\n{text}");
    for (i, l) in ins.iter().enumerate() {
        if l.starts_with("global_load_dword") && l.contains(" glc") {
            // An acquire load (glc: bypasses L1) is followed by a wait and the invalidate.
            let next = &ins[i + 1..(i + 4).min(ins.len())];
            assert!(
                next.iter().any(|n| n.starts_with("buffer_wbinvl1_vol")),
                "acquire at {i} not followed by an L1 invalidate:\n{text}"
            );
        }
    }
}
