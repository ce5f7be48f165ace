//! `wavefuse sim`: the CPU protocol simulator over seeded schedules.

use std::path::PathBuf;
use std::process::ExitCode;

use wavefuse_codegen::Arch;
use wavefuse_codegen::lower::AllreduceProtocol;
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::run::parse_tp;
use wavefuse_harness::shapes::Model;
use wavefuse_harness::sim;
use wavefuse_harness::{KernelId, Workload};

use crate::{ignored_overrides, parse_protocol};

/// The arguments of `wavefuse sim`.
#[derive(clap::Args)]
pub struct SimArgs {
    /// Kernel name (see `wavefuse list`).
    #[arg(required_unless_present = "kernel_file")]
    kernel: Option<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`) instead of a kernel of the set,
    /// simulated at the file's own shapes and TP size (write small shapes: every lane runs).
    #[arg(long, conflicts_with_all = ["kernel", "tp", "batch"])]
    kernel_file: Option<PathBuf>,
    /// TP group size.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = parse_tp)]
    tp: u32,
    /// Number of seeded schedules (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    schedules: u64,
    /// Seed of the schedules and of the data.
    #[arg(long, default_value_t = Workload::DEFAULT_SEED)]
    seed: u64,
    /// Target whose lowering is simulated.
    #[arg(long, default_value_t = Arch::Gfx906)]
    target: Arch,
    /// Tokens decoded at once (1–8).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    batch: u16,
    /// Allreduce protocol: pull or push (default: the schedule's).
    #[arg(long, value_parser = parse_protocol)]
    protocol: Option<AllreduceProtocol>,
    /// Fill the simulated host's peer tables rotated instead of by rank (plants the host-side
    /// defect of DESIGN.md §5.5, to see what the simulator reports).
    #[arg(long)]
    rotate_peers: bool,
    /// Shrink the kernel built at this model's dimensions (a Hugging Face `config.json`, with its
    /// checkpoint's GPTQ layout and RMSNorm epsilon) instead of Qwen 3.5 27B's: the layout and
    /// epsilon are simulated, the dimensions become the small ones.
    #[arg(long, conflicts_with = "kernel_file")]
    model_config: Option<PathBuf>,
}

/// `wavefuse sim`.
pub fn run(a: SimArgs) -> ExitCode {
    let peer_table = if a.rotate_peers {
        PeerTable::Rotated
    } else {
        PeerTable::Shared
    };
    let model = match a.model_config.as_deref().map(|p| {
        let m = wavefuse_harness::model_config::read(p)?;
        m.check_tp(a.tp)
            .map_err(|e| format!("{} at TP {}: {e}", p.display(), a.tp))?;
        Ok::<_, String>(m)
    }) {
        None => Model::QWEN27B,
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let config = sim::Config {
        tp: a.tp,
        arch: a.target,
        batch: a.batch.into(),
        protocol: a.protocol,
        peer_table,
        model,
    };
    ignored_overrides("sim (it simulates the small-shape schedules)");
    match (a.kernel, a.kernel_file) {
        (_, Some(path)) => sim::sim_file_cmd(&path, config, a.schedules, a.seed),
        (Some(kernel), None) => sim::sim_cmd(kernel, config, a.schedules, a.seed),
        (None, None) => {
            eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
            ExitCode::from(2)
        }
    }
}
