//! `wavefuse check`: the real compiler's resource report against the budgets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate::{
    Outcome, budgets, check_compiler, check_within, compile_source, coresident_as_compiled,
    generate_file_kernel, modelled_mi50_image, table,
};
use wavefuse_harness::policy::{Placement, SchedulePolicy};
use wavefuse_harness::shapes::TP_SIZES;
use wavefuse_harness::shapes::parse_tp;
use wavefuse_harness::suite::ShapeKind;
use wavefuse_runtime::compile::child::Bounds;

use super::read_valid_kernel_file;
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
        return check_file(&path, a.target, &env_policy(), a.placement, &bounds);
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
    check_set(a.target, &tps, shape, a.jobs, &bounds)
}

/// `wavefuse check --kernel-file PATH --target T [--placement P]`: generate a kernel of one's
/// own, compile it with the real compiler, print its resources, and fail when it spills, when
/// its grids (with a grid barrier) are not co-resident at the compiled occupancy for the
/// placement, or when it does not generate or compile. gfx906 INT4 kernels also get the MI50
/// time model (modelled, not measured).
pub fn check_file(
    path: &Path,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
    bounds: &Bounds,
) -> ExitCode {
    let kernel = match read_valid_kernel_file(path) {
        Ok(k) => k,
        Err((e, code)) => {
            eprintln!("error: {e}");
            return code;
        }
    };
    let g = match generate_file_kernel(path, &kernel, arch, policy, placement) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let compiler = check_compiler(arch, bounds);
    let compiled = match compile_source(&*compiler, &g.source) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let r = &compiled.usage;
    let occupancy = r.occupancy(g.lowered.workgroup_size);
    let regs = if arch == Arch::Sm90 {
        "registers"
    } else {
        "VGPRs"
    };
    println!(
        "wavefuse check: {} for {arch}, compiled with {}

\
         grid {} x {} lanes, {} {regs}, {} SGPRs, {} spills, {} bytes scratch, {} bytes LDS, \
         occupancy {} waves per {}",
        kernel.name(),
        compiler.id(),
        g.lowered.grid,
        g.lowered.workgroup_size,
        r.registers(),
        r.sgprs().map_or("-".to_owned(), |s| s.to_string()),
        r.spilled(),
        r.scratch_bytes(),
        r.lds_bytes(),
        occupancy,
        if arch == Arch::Sm90 {
            "SM sub-partition"
        } else {
            "SIMD"
        },
    );
    let mut failed = false;
    if r.spills() {
        eprintln!("error: the kernel spills or uses scratch memory (a budget violation)");
        failed = true;
    }
    let rpd = placement.ranks_per_device(kernel.tp());
    match coresident_as_compiled(&g.lowered, r, rpd) {
        Ok(()) if g.lowered.coresidency.is_some() => println!(
            "co-resident: {} grid(s) of {} workgroups fit at the compiled occupancy ({})",
            rpd,
            g.lowered.grid,
            placement.name()
        ),
        Ok(()) => {}
        Err(e) => {
            eprintln!("error: {e}");
            failed = true;
        }
    }
    if let Some(m) = modelled_mi50_image(
        &g.lowered,
        &compiled.artifact.image,
        kernel_batch(&kernel),
        occupancy,
    ) {
        println!("{m} (not measured: no AMD GPU ran it)");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The batch rows of a kernel: the leading axis of its first `[B, F]` input (1 without one).
fn kernel_batch(k: &wavefuse::ir::Kernel) -> usize {
    k.buffers()
        .find_map(|(_, b)| match b.local_type() {
            wavefuse::ir::BufferType::Tensor(t) if t.shape.len() == 2 => Some(t.shape[0]),
            _ => None,
        })
        .unwrap_or(1)
}

/// `wavefuse check --target T [--tp N] [--jobs J]`: compile the set, print the resource table,
/// fail when a budget is exceeded, a kernel fails to generate or compile, or the compiler is
/// missing.
pub fn check_set(
    arch: Arch,
    tps: &[u32],
    shape: ShapeKind,
    jobs: Option<usize>,
    bounds: &Bounds,
) -> ExitCode {
    let budgets = match budgets() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: kernels-gen/budgets.toml: {e}");
            return ExitCode::FAILURE;
        }
    };
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let rows = match check_within(arch, tps, shape, &budgets, jobs, bounds) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let at = match shape {
        ShapeKind::Of(m) => format!(" at {}", m.name()),
        _ => String::new(),
    };
    println!(
        "wavefuse check: the kernel set{at} for {arch}, compiled with {}; budget kernels-gen/budgets.toml\n",
        check_compiler(arch, bounds).id()
    );
    print!("{}", table(arch, &rows));
    let modelled: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Compiled {
                modelled: Some(m), ..
            } => Some(format!("{:<28} {:>3}  {m}", r.id.name(), r.tp)),
            _ => None,
        })
        .collect();
    if !modelled.is_empty() {
        println!(
            "\nINT4 kernels, modelled (MI50, not measured: no AMD GPU ran them; \
             codegen/src/model.rs gives the model and its sources):"
        );
        for line in modelled {
            println!("{line}");
        }
    }
    let failed = rows.iter().filter(|r| r.failed()).count();
    let unsupported = rows
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Unsupported(_)))
        .count();
    if unsupported > 0 {
        println!("\n{unsupported} kernel(s) not generated: the lowering does not support them yet");
    }
    for r in rows
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
    {
        if let Outcome::Failed(why) = &r.outcome {
            eprintln!("\n{}@{arch}_tp{}: {why}", r.id.name(), r.tp);
        }
    }
    if failed > 0 {
        eprintln!("\n{failed} kernel(s) over budget or failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
