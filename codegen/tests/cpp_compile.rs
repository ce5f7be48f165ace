//! The writer's output on hand-built kernels compiles with the real compilers (hipcc for gfx906,
//! nvcc for sm_90), and the gfx906 machine code has the synchronisation the source asks for.
//! Without the tools: "skipped: ... not found", except under CI, where missing tools fail.

mod cpp_kernels;

use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp::toolchain::{self, Compiled, Tool, ToolError};
use wavefuse_codegen::cpp::{self};

use cpp_kernels::mini_fused;

/// The tool's path, or `None` after printing why the test is skipped; panics under CI.
fn tool(t: Tool) -> Option<()> {
    wavefuse_test_support::found(t.name(), toolchain::find(t)).then_some(())
}

/// Compile the miniature fused kernel in a fresh directory; `check` sees the result before the
/// directory is removed.
fn compile(arch: Arch, tag: &str, check: impl FnOnce(&Compiled)) {
    let k = mini_fused(arch, 2);
    let src = cpp::emit(&k).expect("writes");
    let dir = toolchain::scratch_dir(tag).expect("temp dir");
    let c: Result<Compiled, ToolError> = toolchain::compile(&src, k.workgroup_size, dir.path());
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    check(&c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mini_fused_compiles_without_spills_gfx906() {
    let Some(()) = tool(Tool::Hipcc) else { return };
    compile(Arch::Gfx906, "cpp-compile-gfx906", |c| {
        let r = &c.resources;
        assert_eq!((r.spills, r.scratch_bytes), (0, 0), "{}", c.log);
        assert_eq!(r.lds_bytes, 16);
        assert!(r.vgprs <= 64 && r.occupancy >= 4, "{r:?}");
    });
}

#[test]
fn mini_fused_compiles_without_stack_sm90() {
    let Some(()) = tool(Tool::Nvcc) else { return };
    compile(Arch::Sm90, "cpp-compile-sm90", |c| {
        let r = &c.resources;
        assert_eq!((r.spills, r.scratch_bytes), (0, 0), "{}", c.log);
        assert_eq!(r.lds_bytes, 32);
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
    let (Some(()), Some(())) = (tool(Tool::Hipcc), tool(Tool::LlvmObjdump)) else {
        return;
    };
    let mut text = String::new();
    compile(Arch::Gfx906, "cpp-disasm-gfx906", |c| {
        text = toolchain::disassemble(&c.object, Arch::Gfx906).unwrap_or_else(|e| panic!("{e}"));
    });
    let ins = instructions(&text);
    // One arrival per grid barrier (one barrier in this kernel), issued by one lane: it sits
    // after an exec-masking `s_and_saveexec` and before the matching `s_or_b64 exec`.
    let adds: Vec<usize> = ins
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("global_atomic_add "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(adds.len(), 1, "{text}");
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
