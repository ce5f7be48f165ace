//! `wavefuse emit`: a kernel's textual IR, lowered kernel or generated source.

use std::path::PathBuf;
use std::process::ExitCode;

use wavefuse_codegen::Arch;
use wavefuse_harness::KernelId;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate;
use wavefuse_harness::policy::Placement;
use wavefuse_harness::run::parse_tp;
use wavefuse_harness::suite::{CaseSpec, ShapeKind};
use wavefuse_harness::tune::select::ScheduleArgs;

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
    /// Print the lowered kernel instead of the source.
    #[arg(long, requires = "target", conflicts_with = "out")]
    lowered: bool,
    /// TP group size.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
    tp: u32,
    /// Tokens decoded at once (1–8).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
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
            Ok(policy) => {
                generate::emit_file_cmd(&path, a.target, &policy, a.placement, a.out, a.lowered)
            }
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
        Ok(policy) => generate::emit_cmd(
            kernel,
            arch,
            (a.tp, a.batch.into(), shape),
            &policy,
            a.placement,
            a.out,
            a.lowered,
        ),
        Err(e) => store_error(e),
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
    generate::print_out(&kernel.to_string())
}
