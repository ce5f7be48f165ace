//! `wavefuse emit`: a kernel's textual IR, lowered kernel or generated source.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::ScheduleArgs;
use wavefuse_codegen::Arch;
use wavefuse_harness::KernelId;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate::{generate_at, generate_file_kernel, write_library, write_outputs};
use wavefuse_harness::policy::{Placement, SchedulePolicy};
use wavefuse_harness::shapes::parse_tp;
use wavefuse_harness::suite::{CaseSpec, ShapeKind};

use super::read_valid_kernel_file;
use crate::{env_overrides, store_error};

/// The arguments of `wavefuse emit`.
#[derive(clap::Args)]
pub struct EmitArgs {
    /// Kernel name (see `wavefuse list`).
    #[arg(required_unless_present = "kernel_file")]
    kernel: Option<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`, docs/ir-format.md) instead of a kernel
    /// of the set; its TP size and shapes are the file's.
    #[arg(long, conflicts_with_all = ["kernel", "tp", "batch"])]
    kernel_file: Option<PathBuf>,
    /// Print the textual IR.
    #[arg(long, conflicts_with = "target")]
    ir: bool,
    /// Generate code for this target (gfx906 → HIP, sm90 → CUDA).
    #[arg(long)]
    target: Option<Arch>,
    /// Write `<kernel>.hip|.cu` and `<kernel>.abi.toml` into this directory instead of
    /// printing the source.
    #[arg(long, requires = "target")]
    out: Option<PathBuf>,
    /// Write the kernel's C library into this directory (docs/clib.md): the source, its ABI as
    /// `<kernel>_<target>.abi.toml`, an `extern "C"` launcher, its header `<kernel>_<target>.h`
    /// and `build_<kernel>_<target>.sh`, which builds `lib<kernel>_<target>.so` with hipcc or
    /// nvcc. Both targets can share the directory.
    #[arg(long, requires = "target", conflicts_with = "out")]
    lib: Option<PathBuf>,
    /// Print the lowered kernel instead of the source.
    #[arg(long, requires = "target", conflicts_with_all = ["out", "lib"])]
    lowered: bool,
    /// TP group size.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
    tp: u32,
    /// Tokens decoded at once (1–64); a batch whose kernel the lowering cannot take on the target (its LDS) is refused with the reason.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    batch: u16,
    /// Build the kernel at this model's dimensions (a Hugging Face `config.json`: hidden,
    /// intermediate, heads, KV heads, head dim, RMSNorm epsilon) instead of Qwen 3.5 27B's.
    #[arg(long, conflicts_with = "kernel_file")]
    model_config: Option<PathBuf>,
    /// Where the ranks run, which the schedule is fitted for: per-device (one rank per GPU,
    /// as TP is deployed: the snapshots, `check`, `gpu-suite --placement per-device`,
    /// `mgpu-bench`) or same-device (all ranks on one GPU: what `ab`, `run` and the default
    /// GPU suite run).
    #[arg(long, value_enum, default_value_t = Placement::PerDevice)]
    placement: Placement,
    #[command(flatten)]
    schedule: ScheduleArgs,
}

/// `wavefuse emit`.
pub fn run(a: EmitArgs) -> ExitCode {
    let dest = dest(&a);
    if let Some(path) = a.kernel_file {
        if a.target.is_none() && !a.ir {
            eprintln!(
                "error: nothing to emit; pass --ir for the textual IR or --target gfx906|sm90 for code"
            );
            return ExitCode::from(2);
        }
        return match a
            .schedule
            .policy(a.target.unwrap_or(Arch::Sm90), env_overrides())
        {
            Ok(policy) => emit_file(&path, a.target, &policy, a.placement, dest),
            Err(e) => store_error(e),
        };
    }
    let Some(kernel) = a.kernel else {
        eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
        return ExitCode::from(2);
    };
    let shape = match model_shapes(a.model_config.as_deref(), &[a.tp]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(arch) = a.target else {
        return ir(kernel, a.ir, a.tp, a.batch.into(), shape);
    };
    match a.schedule.policy(arch, env_overrides()) {
        Ok(policy) => emit_set(
            kernel,
            arch,
            (a.tp, a.batch.into(), shape),
            &policy,
            a.placement,
            dest,
        ),
        Err(e) => store_error(e),
    }
}

/// What `emit --target` writes of a generated kernel, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// The source on stdout.
    Source,
    /// The lowered kernel on stdout (`--lowered`).
    Lowered,
    /// The source and its ABI description in a directory (`--out`).
    Out(PathBuf),
    /// The C library in a directory (`--lib`).
    Lib(PathBuf),
}

fn dest(a: &EmitArgs) -> Dest {
    match (&a.out, &a.lib) {
        _ if a.lowered => Dest::Lowered,
        (Some(dir), _) => Dest::Out(dir.clone()),
        (_, Some(dir)) => Dest::Lib(dir.clone()),
        _ => Dest::Source,
    }
}

/// The textual IR of a kernel of the set (`--ir`).
fn ir(id: KernelId, ir: bool, tp: u32, batch: usize, shape: ShapeKind) -> ExitCode {
    if !ir {
        eprintln!(
            "error: nothing to emit; pass --ir for the textual IR or --target gfx906|sm90 for code"
        );
        return ExitCode::from(2);
    }
    let c = CaseSpec {
        kernel: id.into(),
        tp,
        batch,
        shape,
    };
    let kernel = match wavefuse_harness::suite::op_kernel(&c) {
        Ok(Some(k)) => k,
        Ok(None) => unreachable!("model shapes apply to every kernel"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    print_out(&kernel.to_string())
}

/// `wavefuse emit KERNEL --target T [--tp N] [--out DIR | --lib DIR | --lowered]`: what `dest`
/// says of the generated kernel.
pub fn emit_set(
    id: KernelId,
    arch: Arch,
    case: (u32, usize, ShapeKind),
    policy: &SchedulePolicy,
    placement: Placement,
    dest: Dest,
) -> ExitCode {
    let g = match generate_at(id, arch, case, policy, placement) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    show(&g, dest)
}

/// What `emit` shows of a generated kernel (`dest`). Everything comes from the one `Generated`:
/// the C library's launcher is written from its ABI, next to its source.
fn show(g: &wavefuse_codegen::Generated, dest: Dest) -> ExitCode {
    let written = match dest {
        Dest::Lowered => return print_out(&g.lowered.to_string()),
        Dest::Source => return print_out(&g.source.text),
        Dest::Out(dir) => write_outputs(g, &dir),
        Dest::Lib(dir) => write_library(g, &dir),
    };
    match written {
        Ok(paths) => {
            for p in paths {
                println!("wrote {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `wavefuse emit --kernel-file PATH`: a kernel written in the textual IR (`docs/ir-format.md`),
/// at the shapes and TP size the file gives, through the same pipeline as the set's kernels
/// (`suite::generate`: the schedule policy's sources, fitted by `wavefuse_codegen::generate`). Without a target
/// (`--ir`), the kernel as parsed and printed back. Exit 2 for a file that does not parse, 1 for a
/// kernel that does not validate or lower.
pub fn emit_file(
    path: &Path,
    arch: Option<Arch>,
    policy: &SchedulePolicy,
    placement: Placement,
    dest: Dest,
) -> ExitCode {
    let kernel = match read_valid_kernel_file(path) {
        Ok(k) => k,
        Err((e, code)) => {
            eprintln!("error: {e}");
            return code;
        }
    };
    let Some(arch) = arch else {
        return print_out(&kernel.to_string());
    };
    match generate_file_kernel(path, &kernel, arch, policy, placement) {
        Ok(g) => show(&g, dest),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Print to stdout; a closed pipe (`| head`) ends quietly instead of panicking.
pub fn print_out(text: &str) -> ExitCode {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
