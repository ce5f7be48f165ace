//! `wavefuse check`: the real compiler's resource report against the budgets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use wavefuse_codegen::Arch;
use wavefuse_harness::ab::model_shapes;
use wavefuse_harness::generate::{
    Outcome, SymbolLaunch, budgets, check_within, compile_source, coresident_as_compiled,
    generate_file_kernel, modelled_mi50_image, modelled_mi50_symbol, table,
};
use wavefuse_harness::pipeline::{Purpose, compiler};
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
    /// gfx906 (hipcc) or sm90 (nvcc). With `--manual`, the ABI file's `arch` or the source's
    /// extension (`.hip`, `.cu`).
    #[arg(long, required_unless_present = "manual")]
    target: Option<Arch>,
    /// A hand-written kernel's source (`.hip` or `.cu`), described by `--abi`: its description
    /// checked against the generated kernel of the set it implements (`--kernel`, else the ABI's
    /// `kernel`) at the Qwen 3.5 27B shape of `--tp` (default: the ABI's `tp`, else 1), compiled
    /// (hipcc / NVRTC), its resources printed, and for gfx906 the MI50 time model of its
    /// `symbol`, saying which kernel and loop it counted.
    #[arg(long, requires = "abi", conflicts_with_all = ["kernel_file", "model_config"])]
    manual: Option<PathBuf>,
    /// The ABI description of `--manual` (TOML; see docs/abi.md).
    #[arg(long, requires = "manual")]
    abi: Option<PathBuf>,
    /// With `--manual`: the kernel of the set it implements (default: the ABI's `kernel`).
    #[arg(long, requires = "manual")]
    kernel: Option<String>,
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
    if let (Some(src), Some(abi)) = (&a.manual, &a.abi) {
        return match check_manual(src, abi, a.kernel.as_deref(), a.target, &a.tp, &bounds) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    let Some(target) = a.target else {
        eprintln!("error: --target is required");
        return ExitCode::from(2);
    };
    if let Some(path) = a.kernel_file {
        return check_file(&path, target, &env_policy(), a.placement, &bounds);
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
    check_set(target, &tps, shape, a.jobs, &bounds)
}

/// `wavefuse check --manual FILE --abi FILE [--kernel K] [--tp N]`: a hand-written kernel
/// checked against its description and the generated kernel, compiled, its resources printed
/// and, for gfx906, its symbol's MI50 model with what was counted. `Err`: a usage or ABI
/// problem (exit 2); `Ok(FAILURE)`: it does not compile or spills.
fn check_manual(
    src: &Path,
    abi: &Path,
    kernel: Option<&str>,
    target: Option<Arch>,
    tps: &[u32],
    bounds: &Bounds,
) -> Result<ExitCode, String> {
    use wavefuse_harness::ab::handwritten::{self, Hand};
    use wavefuse_harness::suite::{self, CaseSpec};

    let text =
        std::fs::read_to_string(abi).map_err(|e| format!("reading {}: {e}", abi.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", abi.display()))?;
    let kernel = kernel
        .map(str::to_owned)
        .or_else(|| {
            table
                .get("kernel")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .ok_or_else(|| {
            format!(
                "{}: name the kernel of the set it implements (--kernel, or `kernel` in the ABI \
                 file)",
                abi.display()
            )
        })?;
    let id: wavefuse_harness::KernelId = kernel
        .parse()
        .map_err(|e| format!("{}: {e}", abi.display()))?;
    let tp = match tps {
        [] => table
            .get("tp")
            .and_then(|v| v.as_integer())
            .map_or(1, |t| t as u32),
        [tp] => *tp,
        _ => return Err("check --manual checks one shape: give one --tp".into()),
    };
    let arch = match (target, table.get("arch").and_then(|v| v.as_str())) {
        (Some(t), _) => t,
        (None, Some(name)) => Arch::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| format!("{}: unknown arch `{name}`", abi.display()))?,
        (None, None) => handwritten::arch_of(src)?,
    };
    let shape = model_shapes(None, &[tp])?;
    let c = CaseSpec::of(id, tp, 1, shape);
    let g = suite::generate(&c, arch, &SchedulePolicy::default(), Placement::PerDevice)
        .map_err(|e| format!("{}: {e}", c.label()))?;
    let hand = Hand::load_for(abi, Some(src), Some(&g.ir))?;
    if hand.arch != arch {
        return Err(format!(
            "{} targets {}, asked for {arch}",
            abi.display(),
            hand.arch
        ));
    }
    let problems = hand.check(&g.lowered);
    if !problems.is_empty() {
        return Err(format!(
            "ABI mismatch between {} and {} for `{kernel}` at TP {tp}:\n  - {}",
            abi.display(),
            src.display(),
            problems.join("\n  - ")
        ));
    }
    let compiler = compiler(arch, Purpose::CheckHand(bounds));
    let request = hand.request()?;
    let artifact = match compiler.compile(&request) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {}: {e}", src.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let stages = hand.stages();
    let multi = stages.len() > 1;
    if multi {
        println!(
            "wavefuse check --manual: {} launches of {} for {arch} (`{kernel}` at TP {tp}), in \
             order on one stream, compiled with {}",
            stages.len(),
            src.display(),
            compiler.id()
        );
    }
    let mut spills = false;
    let mut main_occupancy = 0;
    let mut main_lds = 0;
    let main = hand.main_stage();
    for (i, st) in stages.iter().enumerate() {
        let launch = st.launch().map_err(|p| p.join("; "))?;
        let symbol = &st.abi.symbol;
        let Some(r) = artifact.usage_of(symbol) else {
            eprintln!(
                "error: {} gave no resource report for `{symbol}`",
                compiler.id()
            );
            return Ok(ExitCode::FAILURE);
        };
        // The launch's dynamic LDS, which the compiler's report does not count.
        let dynamic = u32::try_from(st.abi.dynamic_lds_bytes).unwrap_or(u32::MAX);
        let occupancy = r.occupancy_with_dynamic_lds(launch.lanes(), dynamic);
        let lds = r.lds_bytes().saturating_add(dynamic);
        if *symbol == main.abi.symbol {
            main_occupancy = occupancy;
            main_lds = lds;
        }
        let head = if multi {
            format!("launch {} `{symbol}`:", i + 1)
        } else {
            format!(
                "wavefuse check --manual: `{symbol}` of {} for {arch} (`{kernel}` at TP {tp}), \
                 compiled with {}\n",
                src.display(),
                compiler.id()
            )
        };
        println!(
            "{head}{}grid {:?} x block {:?} ({} x {} lanes), {} {}, {} SGPRs, {} spills, {} bytes \
             scratch, {} bytes LDS, occupancy {} waves per {}",
            if multi { " " } else { "" },
            launch.grid,
            launch.block,
            launch.workgroups(),
            launch.lanes(),
            r.registers(),
            if arch == Arch::Sm90 {
                "registers"
            } else {
                "VGPRs"
            },
            r.sgprs().map_or("-".to_owned(), |s| s.to_string()),
            r.spilled(),
            r.scratch_bytes(),
            lds,
            occupancy,
            if arch == Arch::Sm90 {
                "SM sub-partition"
            } else {
                "SIMD"
            },
        );
        let values: Vec<String> = st
            .abi
            .params
            .iter()
            .zip(&launch.values)
            .filter_map(|(p, v)| v.map(|v| format!("{} = {v}", p.name)))
            .collect();
        if !values.is_empty() {
            println!(
                "{}values: {}",
                if multi { "  " } else { "" },
                values.join(", ")
            );
        }
        spills |= r.spills();
    }
    if let Ok(shared) = hand.shared_scratch() {
        for s in shared {
            println!(
                "scratch `{}`: {} x {} = {} bytes per rank, shared by the launches that take it",
                s.name,
                s.len,
                s.elem.name(),
                s.len * s.elem.bytes()
            );
        }
    }
    if let Some(q) = &hand.abi.quantise {
        println!(
            "quantised: `{}` to INT8 per token (s = max|x| / 127, q = clamp(rne(x * 127 / \
             max|x|), +-127)) by {}; the A/B allows for it (docs/abi.md)",
            q.input,
            q.kernel
                .as_deref()
                .map_or("the host".to_owned(), |k| format!("launch `{k}`"))
        );
    }
    if arch == Arch::Gfx906 {
        match modelled_mi50_symbol(
            &g.lowered,
            &artifact.image,
            &main.abi.symbol,
            &SymbolLaunch {
                lds_bytes: main_lds,
                ..hand.symbol_launch()
            },
            c.batch,
            main_occupancy,
            bounds,
        ) {
            Ok(m) if multi => {
                println!(
                    "launch `{}` (the weight loop): {:.1} us modelled (MI50), {}",
                    main.abi.symbol,
                    m.gemv_us() + m.fused_us,
                    m.inputs.counted
                );
                for l in &m.other_launches {
                    println!(
                        "launch `{}`: {:.1} us modelled (MI50): {:.3} MB / 0.85 TB/s + 5 us \
                         launch gap",
                        l.symbol,
                        l.us,
                        l.bytes / 1e6
                    );
                }
                println!(
                    "sum of {} launches: {:.1} us modelled (MI50) (not measured: no AMD GPU ran \
                     it)\n{m}",
                    stages.len(),
                    m.us
                );
            }
            Ok(m) => println!("{m} (not measured: no AMD GPU ran it)"),
            Err(e) => println!("modelled (MI50): none: {e}"),
        }
    }
    if spills {
        eprintln!("error: the kernel spills or uses scratch memory (a budget violation)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
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
    let compiler = compiler(arch, Purpose::Check(bounds));
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
    match modelled_mi50_image(
        &g.lowered,
        &compiled.artifact.image,
        kernel_batch(&kernel),
        occupancy,
        bounds,
    ) {
        Ok(Some(m)) => println!("{m} (not measured: no AMD GPU ran it)"),
        Ok(None) => {}
        Err(e) => println!("modelled (MI50): none: {e}"),
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
        compiler(arch, Purpose::Check(bounds)).id()
    );
    print!("{}", table(arch, &rows));
    let modelled: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Compiled {
                modelled: Ok(Some(m)),
                ..
            } => Some(format!("{:<28} {:>3}  {m}", r.id.name(), r.tp)),
            _ => None,
        })
        .collect();
    // The kernels whose code object could not be read: said, not a silently missing line.
    let unread: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Compiled {
                modelled: Err(e), ..
            } => Some(format!("{} TP {}: {e}", r.id.name(), r.tp)),
            _ => None,
        })
        .collect();
    if let Some(first) = unread.first() {
        println!(
            "
modelled (MI50): none for {} kernel(s); the first: {first}",
            unread.len()
        );
    }
    if !modelled.is_empty() {
        println!(
            "\nINT4 kernels, modelled (MI50, not measured: no AMD GPU ran them; \
             codegen/src/model/ gives the model and its sources):"
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
