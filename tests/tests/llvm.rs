//! The LLVM back end on the kernel set (feature `llvm`): snapshots `{kernel}@llvm_{arch}_tp4` of
//! the LLVM IR, the synchronisation audit (every atomic with the ordering and scope its §5
//! invariant requires, and a deliberately weakened one caught), gfx906 code objects (code object
//! v4) with their resource usage next to hipcc's, and sm_90 PTX assembled by ptxas.
//! Without hipcc or ptxas: "skipped: … not found", except under CI (`CI` set), where it fails.
#![cfg(feature = "llvm")]

use std::process::Command;

use wavefuse_codegen::Arch;
use wavefuse_codegen::llvm::{self, audit};
use wavefuse_codegen::lowered::{Block, LoweredKernel, Stmt};
use wavefuse_harness::generate::{self as generate_mod, Generated, generate};
use wavefuse_kernels::KernelId;
use wavefuse_runtime::compile::usage::parse_ptxas;
use wavefuse_runtime::compile::{Compiler, Hipcc, ResourceUsage, usage::NvidiaUsage};

fn set(arch: Arch, tp: u32) -> Vec<Generated> {
    KernelId::ALL
        .iter()
        .map(|&id| generate(id, arch, tp, 1).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn in_ci() -> bool {
    wavefuse_test_support::under_ci()
}

#[test]
fn llvm_ir_snapshots_of_the_kernel_set() {
    for arch in Arch::ALL {
        for g in set(arch, 4) {
            let ir = llvm::emit_ir(&g.lowered).unwrap_or_else(|e| panic!("{}: {e}", g.spec.kernel));
            insta::assert_snapshot!(format!("{}@llvm_{arch}_tp4", g.spec.kernel.name()), ir);
        }
    }
}

/// Synchronisation statements of a lowered body: (atomics incl. wait polls and timeout reports,
/// workgroup barriers).
fn sync_counts(block: &Block) -> (usize, usize) {
    block.iter().fold((0, 0), |(a, b), s| {
        let (x, y) = match s {
            Stmt::Atomic { .. } | Stmt::Fence { .. } => (1, 0),
            Stmt::WaitGe { .. } => (2, 0),
            Stmt::WorkgroupBarrier => (0, 1),
            Stmt::For { body, .. } => sync_counts(body),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                let (p, q) = sync_counts(then_body);
                let (r, t) = sync_counts(else_body);
                (p + r, q + t)
            }
            _ => (0, 0),
        };
        (a + x, b + y)
    })
}

#[test]
fn every_atomic_carries_its_ordering_and_scope_llvm() {
    for arch in Arch::ALL {
        for tp in [1, 4] {
            for g in set(arch, tp) {
                let ir = llvm::emit_ir(&g.lowered).unwrap();
                let sites =
                    audit(&ir).unwrap_or_else(|e| panic!("{}@{arch}_tp{tp}: {e}", g.spec.kernel));
                let (atomics, barriers) = sync_counts(&g.lowered.body);
                let got_barriers = sites.iter().filter(|s| s.ordering == "barrier").count();
                assert_eq!(
                    (sites.len() - got_barriers, got_barriers),
                    (atomics, barriers),
                    "{}@{arch}_tp{tp}: synchronisation calls vs the lowered kernel",
                    g.spec.kernel
                );
                if tp == 4 && g.spec.kernel == KernelId::GemvInt4AllreduceRmsnorm.into() {
                    let kinds: std::collections::BTreeSet<(&str, &str, &str)> = sites
                        .iter()
                        .map(|s| (s.invariant.as_str(), s.ordering.as_str(), s.scope.as_str()))
                        .collect();
                    for want in [
                        ("5.1", "release", "agent"),
                        ("5.4", "acquire", "agent"),
                        ("5.3", "release", "system"),
                        ("5.3", "acquire", "system"),
                        ("5.10", "monotonic", "system"),
                    ] {
                        assert!(kinds.contains(&want), "{arch}: no {want:?} in {kinds:?}");
                    }
                }
                if arch == Arch::Gfx906 {
                    // The helpers hold real LLVM atomics with the AMDGPU sync scopes.
                    let agent = ir.contains("syncscope(\"agent\") acquire");
                    // A grid barrier's wait, or the device epoch's entry load (§5.4).
                    let agent_sync =
                        g.lowered.coresidency.is_some() || g.lowered.epoch_state.is_some();
                    assert_eq!(agent, agent_sync, "{}", g.spec.kernel);
                }
            }
        }
    }
}

/// Weakens every acquire wait of a kernel to relaxed.
fn weaken(block: &mut Block) {
    for s in block {
        match s {
            Stmt::WaitGe { ordering, .. } => *ordering = wavefuse_codegen::ir::Ordering::Relaxed,
            Stmt::For { body, .. } => weaken(body),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                weaken(then_body);
                weaken(else_body);
            }
            _ => {}
        }
    }
}

#[test]
fn invalid_weakened_acquire_fails_the_audit_llvm() {
    for arch in Arch::ALL {
        let g = generate(KernelId::GemvInt4AllreduceRmsnorm, arch, 4, 1).unwrap();
        let mut k: LoweredKernel = g.lowered.clone();
        weaken(&mut k.body);
        let ir = llvm::emit_ir(&k).unwrap();
        let err = audit(&ir).expect_err("a relaxed grid-barrier wait passed the audit");
        assert!(err.to_string().contains("needs acquire"), "{err}");
        // And a tampered helper body (agent → workgroup scope) is caught on AMDGPU.
        if arch == Arch::Gfx906 {
            let ir = llvm::emit_ir(&g.lowered).unwrap();
            let bad = ir.replace(
                "syncscope(\"agent\") acquire",
                "syncscope(\"workgroup\") acquire",
            );
            let err = audit(&bad).expect_err("a narrowed helper passed the audit");
            assert!(err.to_string().contains("helper body"), "{err}");
        }
    }
}

/// Whether hipcc is installed (else "skipped: …", a failure under CI).
fn hipcc_found() -> bool {
    match Hipcc::from_env().version() {
        Ok(_) => true,
        Err(e) if in_ci() => panic!("CI must have hipcc: {e}"),
        Err(_) => {
            eprintln!("skipped: hipcc not found");
            false
        }
    }
}

/// Every kernel of the set at every TP through LLVM's AMDGPU back end: a code object v4 for
/// gfx906 with no spills and no scratch; at TP 4 its resources are printed next to hipcc's.
#[test]
fn llvm_code_objects_gfx906() {
    let mut table =
        String::from("kernel@tp | LLVM sgpr vgpr lds occ ms | hipcc sgpr vgpr lds occ ms\n");
    let hipcc = hipcc_found().then(Hipcc::from_env);
    for tp in wavefuse_kernels::shapes::TP_SIZES {
        for g in set(Arch::Gfx906, tp) {
            let c = llvm::compile(&g.lowered, true)
                .unwrap_or_else(|e| panic!("{}: {e}", g.spec.kernel));
            let o = &c.image;
            assert_eq!(&o[..4], b"\x7fELF", "{}: not an ELF object", g.spec.kernel);
            assert_eq!(o[7], 64, "{}: OS/ABI is not AMDGPU HSA", g.spec.kernel);
            assert_eq!(
                o[8], 2,
                "{}: not code object v4 (ABI version {})",
                g.spec.kernel, o[8]
            );
            let r =
                llvm::parse_amd_asm(c.asm.as_deref().unwrap(), g.lowered.workgroup_size).unwrap();
            assert!(
                !ResourceUsage::Amd(r.clone()).spills(),
                "{}@tp{tp}: spills {r:?}",
                g.spec.kernel
            );
            assert_eq!(
                r.lds_bytes as usize,
                g.lowered.lds_bytes(),
                "{}",
                g.spec.kernel
            );
            if tp != 4 {
                continue;
            }
            let mut row = format!(
                "{}@tp{tp} | {} {} {} {} {:.0}",
                g.spec.kernel,
                r.sgprs,
                r.vgprs,
                r.lds_bytes,
                r.occupancy_waves_per_simd,
                c.total_ms()
            );
            if let Some(hipcc) = &hipcc {
                let t = std::time::Instant::now();
                let h = generate_mod::compile_source(hipcc, &g.source)
                    .unwrap_or_else(|e| panic!("{e}"));
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let hr = &h.usage;
                row += &format!(
                    " | {} {} {} {} {ms:.0}",
                    hr.sgprs().unwrap_or(0),
                    hr.registers(),
                    hr.lds_bytes(),
                    hr.occupancy(g.lowered.workgroup_size)
                );
                assert_eq!(
                    hr.lds_bytes(),
                    r.lds_bytes,
                    "{}: LDS differs",
                    g.spec.kernel
                );
            }
            table += &row;
            table.push('\n');
        }
    }
    println!("{table}");
}

/// The gfx906 dot2 INT4 path (`int4_dot = dot2`) through LLVM: `llvm.amdgcn.fdot2` becomes
/// `v_dot2_f32_f16` in the code object's assembly, without spills; the NVPTX back end refuses
/// the expression (Unsupported, not a crash).
#[test]
fn llvm_dot2_gemv_gfx906() {
    use wavefuse_codegen::lower::{Int4Dot, Schedule, lower};
    let k = KernelId::GemvInt4.build(&wavefuse_kernels::Shapes::qwen27b(4));
    let s = Schedule {
        int4_dot: Int4Dot::Dot2,
        k_unit_words: 2,
        ..Schedule::default_for(Arch::Gfx906, &k)
    };
    let lowered = lower(&k, Arch::Gfx906, &s).expect("lowers");
    let c = llvm::compile(&lowered, true).expect("LLVM compiles the dot2 kernel");
    let asm = c.asm.as_deref().expect("gfx906 assembly");
    let dots = asm.matches("v_dot2_f32_f16").count();
    assert!(dots >= 8, "{dots} v_dot2_f32_f16 in the assembly");
    let r = llvm::parse_amd_asm(asm, lowered.workgroup_size).expect("resources");
    assert!(!ResourceUsage::Amd(r.clone()).spills(), "spills: {r:?}");
    let mut nv = lowered.clone();
    nv.arch = Arch::Sm90;
    assert!(
        matches!(llvm::compile(&nv, false), Err(llvm::Error::Unsupported(_))),
        "NVPTX has no dot2"
    );
}

/// The LLVM-generated PTX of every kernel at TP 1 and 4 assembles with ptxas 13.0 for sm_90, with
/// no spills and no stack frame.
#[test]
fn llvm_ptx_assembles_with_ptxas_sm90() {
    let Some(ptxas) = ptxas() else { return };
    let scratch = tempfile::tempdir().expect("temp dir");
    let dir = scratch.path();
    for tp in [1, 4] {
        for g in set(Arch::Sm90, tp) {
            let c = llvm::compile(&g.lowered, false)
                .unwrap_or_else(|e| panic!("{}: {e}", g.spec.kernel));
            let ptx = String::from_utf8(c.image.clone()).expect("PTX is text");
            assert!(ptx.contains(".target sm_90"), "{}", g.spec.kernel);
            let file = dir.join(format!("{}_tp{tp}.ptx", g.spec.kernel.name()));
            std::fs::write(&file, &ptx).unwrap();
            let out = Command::new(&ptxas)
                .args(["-arch=sm_90", "-v", "-o"])
                .arg(dir.join("out.cubin"))
                .arg(&file)
                .output()
                .expect("ptxas runs");
            let log = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}@tp{tp}: ptxas failed:\n{log}",
                g.spec.kernel
            );
            let usage = parse_ptxas(&log).unwrap_or_else(|e| panic!("{e}\n{log}"));
            let u: &NvidiaUsage = usage
                .get(&c.symbol)
                .unwrap_or_else(|| panic!("{}: no report for {}\n{log}", g.spec.kernel, c.symbol));
            assert!(
                !ResourceUsage::Nvidia(u.clone()).spills(),
                "{}@tp{tp}: {u:?}",
                g.spec.kernel
            );
            println!(
                "{}@tp{tp}: {} registers, {} B shared",
                g.spec.kernel, u.registers, u.shared_bytes
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// ptxas from the CUDA wheels (next to `$WAVEFUSE_NVCC`), or on PATH.
fn ptxas() -> Option<std::path::PathBuf> {
    let near_nvcc = std::env::var_os("WAVEFUSE_NVCC")
        .map(std::path::PathBuf::from)
        .and_then(|n| n.parent().map(|d| d.join("ptxas")))
        .filter(|p| p.exists());
    let found = near_nvcc.or_else(|| {
        Command::new("ptxas")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| "ptxas".into())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "CI must have ptxas (source .venv-cuda/wavefuse-env.sh)"
        );
        eprintln!("skipped: ptxas not found");
    }
    found
}
