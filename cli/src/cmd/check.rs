//! `wavefuse check`: the real compiler's resource report against the budgets.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate;
use wavefuse_harness::policy::Placement;
use wavefuse_harness::run::parse_tp;
use wavefuse_harness::shapes::TP_SIZES;
use wavefuse_runtime::compile::child::Bounds;

use crate::{env_policy, ignored_overrides, parse_seconds};

/// The arguments of `wavefuse check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// gfx906 (hipcc) or sm90 (nvcc).
    #[arg(long)]
    target: Arch,
    /// A kernel of your own in the textual IR (`.wfir`) instead of the set: compiled at the
    /// file's shapes with the default schedule (and `WAVEFUSE_SCHEDULE*` overrides); fails
    /// when it spills or when its grids, with a grid barrier, are not co-resident at the
    /// compiled occupancy for `--placement`.
    #[arg(long, conflicts_with = "tp")]
    kernel_file: Option<PathBuf>,
    /// With `--kernel-file`: where the ranks run (per-device: one rank per GPU;
    /// same-device: all ranks' grids share one GPU).
    #[arg(long, value_enum, default_value_t = Placement::PerDevice, requires = "kernel_file")]
    placement: Placement,
    /// Compile the set at this model's dimensions (a Hugging Face `config.json`) instead of
    /// Qwen 3.5 27B's.
    #[arg(long, conflicts_with = "kernel_file")]
    model_config: Option<PathBuf>,
    /// TP group sizes (default: all of 1, 2, 4, 8).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_tp, value_delimiter = ',')]
    tp: Vec<u32>,
    /// Compiler processes at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Seconds one compiler process may run before it is stopped (with its children).
    #[arg(long, default_value_t = 300.0, value_parser = parse_seconds)]
    compile_timeout: f64,
}

/// `wavefuse check`.
pub fn run(a: CheckArgs) -> ExitCode {
    let bounds = Bounds::timeout(Duration::from_secs_f64(a.compile_timeout));
    if let Some(path) = a.kernel_file {
        return generate::check_file_cmd(&path, a.target, &env_policy(), a.placement, &bounds);
    }
    ignored_overrides("check (it compiles the default schedules the budgets are for)");
    let tps = if a.tp.is_empty() {
        TP_SIZES.to_vec()
    } else {
        a.tp
    };
    let shape = match model_shapes(a.model_config.as_deref(), &tps) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    generate::check_cmd(a.target, &tps, shape, a.jobs, &bounds)
}
