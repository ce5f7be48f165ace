//! `wavefuse llvm …`: the LLVM back end (built with `--features llvm`).

use std::path::PathBuf;
use std::process::ExitCode;

use wavefuse_codegen::Arch;
use wavefuse_harness::KernelId;
use wavefuse_harness::generate;
use wavefuse_harness::shapes::parse_tp;

/// `wavefuse llvm …`.
#[derive(clap::Subcommand)]
pub enum LlvmCommand {
    /// Print a kernel's LLVM IR (after mem2reg, before optimisation).
    Emit {
        /// Kernel name (see `wavefuse list`).
        kernel: KernelId,
        /// gfx906 (AMDGPU) or sm90 (NVPTX).
        #[arg(long)]
        target: Arch,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
    },
    /// Compile the set at one TP through LLVM and, for gfx906, hipcc: resources side by side and
    /// compile times.
    Check {
        /// gfx906 or sm90.
        #[arg(long)]
        target: Arch,
        /// TP group size.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
        tp: u32,
    },
    /// Write the PTX of the differential set (TP 1 and 4) and its manifest for `wavefuse llvm-diff`.
    Ptx {
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
}

/// `wavefuse llvm …`.
pub fn run(c: LlvmCommand) -> ExitCode {
    use wavefuse_codegen::llvm;
    match c {
        LlvmCommand::Emit { kernel, target, tp } => {
            match generate::generate(kernel, target, tp, 1)
                .map_err(|e| e.to_string())
                .and_then(|g| llvm::emit_ir(&g.lowered).map_err(|e| e.to_string()))
            {
                Ok(ir) => {
                    print!("{ir}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        LlvmCommand::Check { target, tp } => llvm_check(target, tp),
        LlvmCommand::Ptx { out } => match wavefuse_harness::llvm_diff::write_ptx_set(&out) {
            Ok(n) => {
                println!(
                    "wrote {n} PTX files and manifest.json into {}",
                    out.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Resources and compile times: LLVM vs hipcc (gfx906) or LLVM vs nvcc (sm90).
fn llvm_check(arch: Arch, tp: u32) -> ExitCode {
    use wavefuse_codegen::llvm;
    use wavefuse_harness::pipeline::Purpose;
    use wavefuse_runtime::compile::Bounds;
    let compiler = wavefuse_harness::pipeline::compiler(arch, Purpose::Check(&Bounds::default()));
    let native = compiler.version().is_ok();
    let cname = compiler.id();
    println!(
        "{:<28} | {:>5} {:>5} {:>6} {:>4} {:>8} | {cname}: {:>5} {:>5} {:>6} {:>4} {:>8}",
        format!("kernel@{arch}_tp{tp}"),
        "sgpr",
        "vgpr",
        "lds",
        "occ",
        "LLVM ms",
        "sgpr",
        "vgpr",
        "lds",
        "occ",
        "ms"
    );
    let mut ok = true;
    for id in KernelId::ALL {
        let g = match generate::generate(id, arch, tp, 1) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{id}: {e}");
                ok = false;
                continue;
            }
        };
        let c = match llvm::compile(&g.lowered, true) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{id}: {e}");
                ok = false;
                continue;
            }
        };
        let ours = match &c.asm {
            Some(asm) => match llvm::parse_amd_asm(asm, g.lowered.workgroup_size) {
                Ok(r) => format!(
                    "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                    r.sgprs,
                    r.vgprs,
                    r.lds_bytes,
                    r.occupancy_waves_per_simd,
                    c.total_ms()
                ),
                Err(e) => e,
            },
            None => format!(
                "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                "-",
                "-",
                "-",
                "-",
                c.total_ms()
            ),
        };
        let theirs = if native {
            let t = std::time::Instant::now();
            match generate::compile_source(&*compiler, &g.source) {
                Ok(h) => {
                    let r = &h.usage;
                    format!(
                        "{:>5} {:>5} {:>6} {:>4} {:>8.1}",
                        r.sgprs().map_or("-".into(), |s| s.to_string()),
                        r.registers(),
                        r.lds_bytes(),
                        r.occupancy(g.lowered.workgroup_size),
                        t.elapsed().as_secs_f64() * 1e3
                    )
                }
                Err(e) => format!("failed: {}", e.to_string().lines().next().unwrap_or("")),
            }
        } else {
            format!("skipped: {cname} not found")
        };
        println!("{:<28} | {ours} | {cname}: {theirs}", id.name());
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
