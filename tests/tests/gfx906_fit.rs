//! Fused kernels with a grid barrier fit on gfx906 at the occupancy hipcc compiles them to
//! (issue 34, item 3): a user's pre-norm → INT4 GEMV (5120 → 17408, one weight and gate/up) and silu·mul → down GEMV +
//! allreduce (17408 → 5120, TP 1 and 4), `fit_gfx906/*.wfir` at batch 8, and the same kernels at
//! batches 1–8 and 16, lower for gfx906 and compile with hipcc to grids that are co-resident at
//! the compiled occupancy, one rank per device (what `emit` prints and `check` compiles). At
//! batch 16 the pre-norm kernel's refusal used to name `materialise_prologue = true`; the
//! default now materialises by itself, and the hint applied also fits.
//! Without hipcc: "skipped: hipcc not found", except under CI (`CI` set), where it fails.

use std::path::{Path, PathBuf};

use wavefuse_codegen::Arch;
use wavefuse_harness::generate::{
    compile_source, coresident_as_compiled, generate_file_kernel, read_kernel_file,
};
use wavefuse_harness::policy::{Override, Placement, SchedulePolicy};
use wavefuse_runtime::compile::{Compiler, Hipcc};

fn hipcc() -> bool {
    wavefuse_test_support::found("hipcc", Hipcc::from_env().version())
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fit_gfx906");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fit_gfx906/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wfir"))
        .collect();
    v.sort();
    assert_eq!(v.len(), 4, "the four user kernels at batch 8");
    v
}

/// `path`'s kernel at `batch` rows (the files are written at batch 8), as a file in a temporary
/// directory (so errors name a file).
fn at_batch(path: &Path, batch: usize) -> PathBuf {
    let text = std::fs::read_to_string(path).expect("reads");
    let text = text
        .replace("[8, ", &format!("[{batch}, "))
        .replace("_b8(", &format!("_b{batch}("));
    let dir = std::env::temp_dir().join(format!("wavefuse-gfx906-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let name = path.file_name().expect("name").to_string_lossy();
    let out = dir.join(name.replace("_b8.", &format!("_b{batch}.")));
    std::fs::write(&out, text).expect("writes");
    out
}

/// Lower with `policy`, compile with hipcc, and require the grid co-resident at hipcc's
/// occupancy; returns a line for the log.
fn fits(path: &Path, policy: &SchedulePolicy, hipcc: &Hipcc) -> String {
    let kernel = read_kernel_file(path).unwrap_or_else(|e| panic!("{e}"));
    let g = generate_file_kernel(path, &kernel, Arch::Gfx906, policy, Placement::PerDevice)
        .unwrap_or_else(|e| panic!("lowers for gfx906: {e}"));
    let c = compile_source(hipcc, &g.source)
        .unwrap_or_else(|e| panic!("{}: hipcc: {e}", path.display()));
    assert!(!c.usage.spills(), "{}: spills", path.display());
    coresident_as_compiled(&g.lowered, &c.usage, 1)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!(
        "{}: grid {} x {} lanes, {} VGPRs, occupancy {}, barrier {}",
        kernel.name(),
        g.lowered.grid,
        g.lowered.workgroup_size,
        c.usage.registers(),
        c.usage.occupancy(g.lowered.workgroup_size),
        g.lowered.coresidency.is_some()
    )
}

#[test]
fn user_fused_kernels_at_batch_8_fit_the_compiled_occupancy() {
    if !hipcc() {
        return;
    }
    let hipcc = Hipcc::from_env();
    for f in files() {
        let kernel = read_kernel_file(&f).expect("reads");
        let line = fits(&f, &SchedulePolicy::default(), &hipcc);
        eprintln!("{line}");
        assert!(line.ends_with("barrier true") || kernel.tp() == 1, "{line}");
    }
}

#[test]
fn user_fused_kernels_at_batches_1_to_7_fit_the_compiled_occupancy() {
    if !hipcc() {
        return;
    }
    let hipcc = Hipcc::from_env();
    for f in files() {
        for batch in 1..=7 {
            eprintln!(
                "{}",
                fits(&at_batch(&f, batch), &SchedulePolicy::default(), &hipcc)
            );
        }
    }
}

#[test]
fn user_fused_kernels_at_batch_16_fit_and_so_does_the_old_hint() {
    if !hipcc() {
        return;
    }
    let hipcc = Hipcc::from_env();
    let hint = SchedulePolicy::new(
        None,
        vec![Override {
            origin: "the refusal's hint".into(),
            arch: None,
            spec: "materialise_prologue=true".into(),
        }],
    );
    for f in files() {
        let f16 = at_batch(&f, 16);
        eprintln!("{}", fits(&f16, &SchedulePolicy::default(), &hipcc));
        eprintln!("{} (hint applied)", fits(&f16, &hint, &hipcc));
    }
}
