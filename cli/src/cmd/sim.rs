//! `wavefuse sim`: the CPU protocol simulator over seeded schedules.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use wavefuse_codegen::Arch;
use wavefuse_codegen::CompileError;
use wavefuse_codegen::lower::fit::lower_or_materialise;
use wavefuse_codegen::lower::{AllreduceProtocol, LowerError, Schedule};
use wavefuse_codegen::sim::PeerTable;
use wavefuse_harness::generate::read_kernel_file;
use wavefuse_harness::policy::{Placement, SchedulePolicy};
use wavefuse_harness::shapes::Model;
use wavefuse_harness::shapes::parse_tp;
use wavefuse_harness::sim::{
    self, Config, LAUNCHES, Prepared, SmallShapes, prepare_config, summary, sweep,
};
use wavefuse_harness::{KernelId, Workload};

use crate::{ignored_overrides, parse_protocol};

/// The arguments of `wavefuse sim`.
#[derive(clap::Args)]
pub struct SimArgs {
    /// Kernel name (see `wavefuse list`).
    #[arg(required_unless_present = "kernel_file")]
    kernel: Option<KernelId>,
    /// A kernel of your own in the textual IR (`.wfir`) instead of a kernel of the set,
    /// simulated at the file's own shapes and TP size with the schedule `wavefuse emit` gives it
    /// (write small shapes: every lane runs; a kernel too large for the simulator's budgets is
    /// "not checked", exit 2).
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
    /// Tokens decoded at once (1–64); a batch whose kernel the lowering cannot take on the target (its LDS) is refused with the reason.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
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

/// Exit code of a kernel the simulator could not run within its budgets (too large to simulate):
/// as for a kernel it cannot simulate yet — no verdict on the kernel.
const NOT_CHECKED: u8 = 2;

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
        (_, Some(path)) => sim_file(&path, config, a.schedules, a.seed),
        (Some(kernel), None) => sim_set(kernel, config, a.schedules, a.seed),
        (None, None) => {
            eprintln!("error: name a kernel of the set or pass --kernel-file PATH");
            ExitCode::from(2)
        }
    }
}

/// `wavefuse sim KERNEL --tp N --schedules N --seed S --target T [--batch B] [--protocol P]`.
fn sim_set(id: KernelId, c: Config, schedules: u64, seed: u64) -> ExitCode {
    let (tp, arch) = (c.tp, c.arch);
    let small = SmallShapes::DEFAULT;
    let p = match prepare_config(id, &c, &small) {
        Ok(p) => p,
        Err(e) if e.is_unsupported() => {
            eprintln!("error: {id}@{arch} tp={tp} cannot be simulated yet: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {id}@{arch} tp={tp}: {e}");
            return ExitCode::FAILURE;
        }
    };
    report_sweep(&p, &id.to_string(), &c, schedules, seed)
}

/// `wavefuse sim --kernel-file PATH`: a kernel written in the textual IR, at the shapes and TP
/// size the file gives, lowered with the simulator's schedule for `c.arch` (`c.protocol` when
/// given; `c.tp` and `c.batch` are the file's), run like `sim_set` against the f64 reference.
/// Exit 2 for a file that does not parse or a kernel that cannot be lowered yet.
fn sim_file(path: &std::path::Path, c: Config, schedules: u64, seed: u64) -> ExitCode {
    let ir = match read_kernel_file(path) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The schedule `wavefuse emit` gives the file (its workgroup size, its tiles: one rank per
    // device, as TP is deployed), with `--protocol` on top when given.
    let lowered = SchedulePolicy::default()
        .resolve_kernel(&ir, c.arch, Placement::PerDevice, None)
        .map_err(|e| match e {
            CompileError::Lower(e) | CompileError::Override { source: e, .. } => e,
            e => LowerError::Unsupported(e.to_string()),
        })
        .and_then(|r| match c.protocol {
            // Another protocol than the fitted one: that schedule, lowered as given.
            Some(p) if p != r.code.schedule.protocol => {
                let (k, s) = lower_or_materialise(&ir, c.arch, r.code.schedule.with_protocol(p))?;
                k.coresident(1, wavefuse_codegen::lowered::Occupancy::HardwareMax)?;
                Ok((k, s))
            }
            _ => Ok((r.code.lowered, r.code.schedule)),
        });
    let (lowered, schedule) = match lowered {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(if matches!(e, LowerError::Unsupported(_)) {
                2
            } else {
                1
            });
        }
    };
    let c = Config { tp: ir.tp(), ..c };
    // At a model's shapes, a scaled-down instance: the same kernel and schedule, a smaller grid
    // (every lane of every schedule runs in the simulator).
    let (ir, lowered) = match sim::scaled_down(&ir, c.arch, &schedule, &lowered) {
        Some(sd) => {
            println!("{}", sd.what);
            (sd.ir, sd.lowered)
        }
        None => (ir, lowered),
    };
    let p = Prepared {
        ir,
        lowered,
        shapes: None,
        peer_table: c.peer_table,
    };
    let what = p.ir.name().to_owned();
    report_sweep(&p, &what, &c, schedules, seed)
}

/// Sweep `p` over `schedules` seeded schedules and print what was found (progress on a
/// terminal); exit 130 when interrupted, non-zero on any finding.
fn report_sweep(p: &Prepared, id: &str, c: &Config, schedules: u64, seed: u64) -> ExitCode {
    let (tp, arch) = (c.tp, c.arch);
    let k = &p.lowered;
    // A protocol the kernel does not exchange with is not printed as if it were simulated.
    let exchanges = !Schedule::default_for(arch, &p.ir)
        .ignored_fields(&p.ir)
        .contains(&"protocol");
    if let (Some(proto), false) = (c.protocol, exchanges) {
        eprintln!(
            "warning: --protocol {proto:?} has no effect: {id} at tp={tp} exchanges nothing between ranks"
        );
    }
    let protocol = c
        .protocol
        .filter(|_| exchanges)
        .map(|p| format!(", {p:?} allreduce"))
        .unwrap_or_default();
    println!(
        "simulating {id}@{arch}, tp={tp}{protocol}, {schedules} schedules from seed {seed:#x}"
    );
    if c.peer_table == PeerTable::Rotated {
        println!(
            "host peer tables ROTATED (slot s of rank r = rank r + s): the §5.5 defect is planted"
        );
    }
    match &p.shapes {
        Some(shapes) => println!("small shapes: {}", SmallShapes::DEFAULT.describe(shapes)),
        None => println!("shapes: the file's own"),
    }
    println!(
        "per rank: {} workgroups × {} lanes (wave {}); {LAUNCHES} launches per schedule (epochs 1..={LAUNCHES}, counters and flags never reset)",
        k.grid,
        k.workgroup_size,
        k.wave_size()
    );
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    let progress = |done: u64, failing: u64| {
        if tty && (last.elapsed().as_millis() >= 200 || done == schedules) {
            last = Instant::now();
            let width = 30;
            let filled = (done * width / schedules.max(1)) as usize;
            eprint!(
                "\r[{}{}] {done}/{schedules} schedules, {failing} with findings",
                "=".repeat(filled),
                " ".repeat(width as usize - filled)
            );
            let _ = std::io::stderr().flush();
        }
    };
    let guard = wavefuse_runtime::compile::child::cooperate();
    let result = sweep(p, seed, 0, schedules, progress);
    if tty {
        eprintln!();
    }
    let s = match result {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", summary(p, &s));
    if let (Some(limit), true) = (&s.not_checked, s.findings.is_empty()) {
        // A limit of the simulator, not a verdict on the kernel.
        println!("verdict: not checked: too large to simulate (needs {limit})");
        drop(guard);
        return ExitCode::from(NOT_CHECKED);
    }
    if s.interrupted {
        println!(
            "verdict: interrupted after {} of {schedules} schedules ({})",
            s.schedules,
            if s.findings.is_empty() {
                "no finding so far"
            } else {
                "findings above"
            }
        );
        let _ = std::io::stdout().flush();
        drop(guard);
        return ExitCode::from(130);
    }
    drop(guard);
    if s.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
