//! Code generation for the kernel set: `wavefuse emit --target`, `wavefuse check`, and the
//! pipeline the HIP/CUDA tests share (lower → C++ + ABI → real compiler → budget).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp::budget::{Budgets, Verdict};
use wavefuse_codegen::cpp::{self};
use wavefuse_codegen::resources::ResourceUsage;
use wavefuse_runtime::compile::{
    Artifact, Bounds, CompileError, CompileRequest, Compiler, Hipcc, Nvcc, disassemble,
};

use wavefuse_codegen::model::{HotLoop, Modelled, inputs_for, model};

use crate::KernelId;
use crate::policy::{Placement, SchedulePolicy};
use crate::suite::{CaseSpec, PrepError, ShapeKind};

/// The committed resource budget (DESIGN.md §7), embedded so `wavefuse check` works anywhere.
pub const BUDGETS_TOML: &str = wavefuse_kernels::BUDGETS_TOML;

/// The budget file, parsed and checked against the kernel set's names.
pub fn budgets() -> Result<Budgets, cpp::budget::BudgetError> {
    Budgets::parse(BUDGETS_TOML, &KernelId::ALL.map(KernelId::name))
}

/// Why a kernel of the set could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("{label}: {source}")]
pub struct GenError {
    /// `kernel@arch_tpN`.
    pub label: String,
    /// What went wrong.
    pub source: PrepError,
}

impl GenError {
    /// The lowering or writer does not support the kernel on this target (a known limitation,
    /// not a bug).
    pub fn is_unsupported(&self) -> bool {
        matches!(self.source, PrepError::Unsupported(_))
    }
}

/// A generated kernel of the set: the pipeline's one artifact ([`crate::suite::Generated`]).
pub type Generated = crate::suite::Generated;

/// Kernel `id` of the set at the model shapes (TP `tp`, batch `batch`) for `arch`, with the
/// default policy, placed as TP is deployed (one rank per device): exactly what the snapshots
/// hold, `check` compiles, `wavefuse emit` prints by default and the per-device GPU suite and
/// `mgpu-bench` run. `ab`, `run` and the default GPU suite put all ranks on one device, which
/// refits kernels with a grid barrier (and keeps the pull protocol): `wavefuse emit --placement
/// same-device` prints those ([`generate_with`]).
pub fn generate(id: KernelId, arch: Arch, tp: u32, batch: usize) -> Result<Generated, GenError> {
    generate_with(
        id,
        arch,
        tp,
        batch,
        &SchedulePolicy::default(),
        Placement::PerDevice,
    )
}

/// [`generate_with`] at `shape` ([`ShapeKind::Model`] or a model's own, [`ShapeKind::Of`]).
pub fn generate_at(
    id: KernelId,
    arch: Arch,
    c: (u32, usize, ShapeKind),
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<Generated, GenError> {
    let (tp, batch, shape) = c;
    let c = CaseSpec {
        kernel: id.into(),
        tp,
        batch,
        shape,
    };
    crate::suite::generate(&c, arch, policy, placement).map_err(|source| GenError {
        label: format!("{}@{arch}_tp{tp}", id.name()),
        source,
    })
}

/// Kernel `id` of the set at the model shapes through the pipeline ([`crate::suite::generate`])
/// with `policy` at `placement`: `wavefuse emit` with `--schedule`, `--placement` and overrides.
pub fn generate_with(
    id: KernelId,
    arch: Arch,
    tp: u32,
    batch: usize,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<Generated, GenError> {
    generate_at(id, arch, (tp, batch, ShapeKind::Model), policy, placement)
}

/// A generated source compiled by [`check_compiler`]: the artifact (image, flags, the compiler's
/// log) and the kernel's resource report.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// What the compiler produced.
    pub artifact: Artifact,
    /// The kernel's resource report (from `artifact`).
    pub usage: ResourceUsage,
}

/// The compiler `check` (and the ISA tests) use for `arch`, every run within `bounds`: hipcc for
/// gfx906 and nvcc for sm_90 — the runtime's drivers, with the resource reports of the toolchains
/// a user installs (`ab` compiles sm_90 with NVRTC, whose ptxas reports the same).
pub fn check_compiler(arch: Arch, bounds: &Bounds) -> Box<dyn Compiler> {
    match arch {
        Arch::Gfx906 => Box::new(Hipcc::from_env().with_bounds(bounds.clone())),
        Arch::Sm90 => Box::new(Nvcc::from_env().with_bounds(bounds.clone())),
    }
}

/// Compile `src` with `compiler`: the artifact and the resource report of `src`'s kernel.
pub fn compile_source(
    compiler: &dyn Compiler,
    src: &cpp::Source,
) -> Result<Compiled, CompileError> {
    let artifact = compiler.compile(&CompileRequest::new(
        &src.symbol,
        src.text.clone(),
        src.arch,
    ))?;
    let usage = artifact
        .usage_of(&src.symbol)
        .cloned()
        .ok_or_else(|| CompileError::Tool {
            compiler: compiler.id(),
            detail: format!("no resource report for kernel `{}`", src.symbol),
        })?;
    Ok(Compiled { artifact, usage })
}

/// One row of `wavefuse check`.
#[derive(Debug)]
pub struct CheckRow {
    /// Which kernel.
    pub id: KernelId,
    /// TP size.
    pub tp: u32,
    /// What happened.
    pub outcome: Outcome,
}

/// The outcome for one kernel.
#[derive(Debug)]
pub enum Outcome {
    /// Compiled; resources and the budget verdict.
    Compiled {
        /// The generated kernel.
        generated: Box<Generated>,
        /// The compiler's output.
        compiled: Compiled,
        /// The budget verdict.
        verdict: Verdict,
        /// gfx906 INT4 kernels: the MI50 time model's prediction (modelled, not measured).
        modelled: Option<Modelled>,
    },
    /// Not generated: the lowering or writer does not support it yet.
    Unsupported(String),
    /// Generation or compilation failed.
    Failed(String),
}

impl CheckRow {
    /// Whether this row makes `check` fail.
    pub fn failed(&self) -> bool {
        match &self.outcome {
            Outcome::Compiled { verdict, .. } => !verdict.ok(),
            Outcome::Unsupported(_) => false,
            Outcome::Failed(_) => true,
        }
    }
}

/// Generate and compile every kernel of the set for `arch` at each of `tps`, on `jobs` threads,
/// and check each against `budgets`. Rows come back in set order, then TP order.
/// Fails only when the compiler is missing.
pub fn check(
    arch: Arch,
    tps: &[u32],
    budgets: &Budgets,
    jobs: usize,
) -> Result<Vec<CheckRow>, CompileError> {
    check_within(
        arch,
        tps,
        ShapeKind::Model,
        budgets,
        jobs,
        &Bounds::default(),
    )
}

/// [`check`] at `shape` (a model's own, [`ShapeKind::Of`]) with every compiler run within
/// `bounds` (timeout, cancellation).
pub fn check_within(
    arch: Arch,
    tps: &[u32],
    shape: ShapeKind,
    budgets: &Budgets,
    jobs: usize,
    bounds: &Bounds,
) -> Result<Vec<CheckRow>, CompileError> {
    let compiler = check_compiler(arch, bounds);
    compiler.version()?;
    let compiler = &*compiler;
    let work: Vec<(KernelId, u32)> = KernelId::ALL
        .iter()
        .flat_map(|&id| tps.iter().map(move |&tp| (id, tp)))
        .collect();
    let next = AtomicUsize::new(0);
    let rows: Mutex<Vec<(usize, CheckRow)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, work.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(id, tp)) = work.get(i) else { break };
                    let outcome = check_one(id, arch, (tp, shape), budgets, compiler);
                    rows.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, CheckRow { id, tp, outcome }));
                }
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|e| e.into_inner());
    rows.sort_by_key(|(i, _)| *i);
    Ok(rows.into_iter().map(|(_, r)| r).collect())
}

fn check_one(
    id: KernelId,
    arch: Arch,
    (tp, shape): (u32, ShapeKind),
    budgets: &Budgets,
    compiler: &dyn Compiler,
) -> Outcome {
    let generated = match generate_at(
        id,
        arch,
        (tp, 1, shape),
        &SchedulePolicy::default(),
        Placement::PerDevice,
    ) {
        Ok(g) => g,
        Err(e) if e.is_unsupported() => return Outcome::Unsupported(e.to_string()),
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    match compile_source(compiler, &generated.source) {
        Ok(compiled) => {
            if let Err(e) = coresident_as_compiled(&generated.lowered, &compiled.usage, 1) {
                return Outcome::Failed(e.to_string());
            }
            let verdict = budgets.check(
                arch,
                id.name(),
                tp,
                &compiled.usage,
                generated.lowered.workgroup_size,
            );
            let modelled = modelled_mi50(&generated, &compiled);
            Outcome::Compiled {
                generated: Box::new(generated),
                compiled,
                verdict,
                modelled,
            }
        }
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// Whether `ranks_per_device` grids of `k` fit on one device at the occupancy the real compiler
/// reported (`usage`): a grid barrier's co-residency decided at compile time (DESIGN.md
/// §5.9), before any launch.
pub fn coresident_as_compiled(
    k: &wavefuse_codegen::lowered::LoweredKernel,
    usage: &ResourceUsage,
    ranks_per_device: u32,
) -> Result<(), wavefuse_codegen::lowered::NotCoResident> {
    k.coresident(
        ranks_per_device,
        wavefuse_codegen::lowered::Occupancy::Compiled {
            waves_per_simd: usage.occupancy(k.workgroup_size),
            registers: usage.registers(),
        },
    )
}

/// The MI50 time model of a compiled gfx906 INT4 kernel ([`wavefuse_codegen::model`]): its hot
/// loop counted in the code object's disassembly, its bytes and weights from the ABI, hipcc's
/// occupancy. None for other kernels and targets, or when the disassembler is missing.
pub fn modelled_mi50(g: &Generated, compiled: &Compiled) -> Option<Modelled> {
    if g.lowered.arch != Arch::Gfx906 {
        return None;
    }
    let occupancy = compiled.usage.occupancy(g.lowered.workgroup_size);
    modelled_mi50_image(
        &g.lowered,
        &compiled.artifact.image,
        g.spec.batch,
        occupancy,
    )
}

/// [`modelled_mi50`] of a compiled gfx906 code object `image` (an ELF, as the runtime's hipcc and
/// hiprtc write it) of lowered kernel `k` at hipcc's `occupancy`: what `tune --arch gfx906` ranks
/// its candidates by. None for other targets, a kernel without an INT4 hot loop, or when the
/// disassembler is missing.
pub fn modelled_mi50_image(
    k: &wavefuse_codegen::lowered::LoweredKernel,
    image: &[u8],
    batch: usize,
    occupancy: u32,
) -> Option<Modelled> {
    if k.arch != Arch::Gfx906 {
        return None;
    }
    let disasm = disassemble(image, Arch::Gfx906, &Bounds::default()).ok()?;
    let hot = HotLoop::from_disassembly(&disasm)?;
    Some(model(&inputs_for(k, &hot, batch, occupancy)?))
}

/// The resource table of `check`.
pub fn table(arch: Arch, rows: &[CheckRow]) -> String {
    let regs = if arch == Arch::Sm90 { "regs" } else { "VGPRs" };
    let occ = if arch == Arch::Sm90 {
        "occ(w/SMSP)"
    } else {
        "occ(w/SIMD)"
    };
    let mut out = format!(
        "{:<28} {:>3} {:>6} {:>6} {:>7} {:>8} {:>7} {:>11}  budget\n",
        "kernel", "tp", regs, "SGPRs", "spills", "scratch", "LDS", occ
    );
    for r in rows {
        let name = r.id.name();
        let line = match &r.outcome {
            Outcome::Compiled {
                generated,
                compiled,
                verdict,
                ..
            } => {
                let u = &compiled.usage;
                let (vgprs, spills, scratch_bytes, lds_bytes) =
                    (u.registers(), u.spilled(), u.scratch_bytes(), u.lds_bytes());
                let occupancy = u.occupancy(generated.lowered.workgroup_size);
                let sgprs = u.sgprs().map_or("-".to_owned(), |s| s.to_string());
                format!(
                    "{name:<28} {:>3} {vgprs:>6} {sgprs:>6} {spills:>7} {scratch_bytes:>8} {lds_bytes:>7} {occupancy:>11}  {}",
                    r.tp,
                    verdict.describe()
                )
            }
            Outcome::Unsupported(why) => format!("{name:<28} {:>3}  not generated: {why}", r.tp),
            Outcome::Failed(why) => format!(
                "{name:<28} {:>3}  FAILED: {}",
                r.tp,
                why.lines().next().unwrap_or("")
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `wavefuse emit KERNEL --target T [--tp N] [--out DIR]`: the source on stdout, or the source
/// and the ABI description written into DIR. With `lowered`, the lowered form instead.
#[allow(clippy::too_many_arguments)]
pub fn emit_cmd(
    id: KernelId,
    arch: Arch,
    case: (u32, usize, ShapeKind),
    policy: &SchedulePolicy,
    placement: Placement,
    out: Option<PathBuf>,
    lowered: bool,
) -> ExitCode {
    let g = match generate_at(id, arch, case, policy, placement) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    show(&g, out, lowered)
}

/// What `emit` shows of a generated kernel: the lowered kernel (`lowered`), the source and ABI
/// written into `out`, or the source on stdout.
fn show(g: &wavefuse_codegen::Generated, out: Option<PathBuf>, lowered: bool) -> ExitCode {
    if lowered {
        return print_out(&g.lowered.to_string());
    }
    let Some(dir) = out else {
        return print_out(&g.source.text);
    };
    match write_outputs(g, &dir) {
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

/// Why the kernel from `origin` (a file, a crate) is not valid: the error, which starts with
/// `file:line:column` where it is about an op whose place is known, else after `origin`.
pub fn invalid_kernel(origin: &str, e: &wavefuse::ir::ValidationError) -> String {
    match e {
        wavefuse::ir::ValidationError::Op { at: Some(_), .. } => {
            format!("{e} (the kernel is not valid)")
        }
        _ => format!("{origin}: the kernel is not valid: {e}"),
    }
}

/// A kernel from a file in the textual IR, parsed; the error (with `PATH:line:column`, the token
/// and the offending line) when it cannot be read or does not parse.
pub fn read_kernel_file(path: &Path) -> Result<wavefuse::ir::Kernel, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    wavefuse::ir::parse_named(&text, &path.display().to_string())
        .map_err(|e| format!("{}:{}", path.display(), e.report(&text)))
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

/// Write `<symbol>.hip|.cu` and `<symbol>.abi.toml` into `dir`.
pub fn write_outputs(g: &wavefuse_codegen::Generated, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let src = dir.join(g.source.file_name());
    let abi = dir.join(format!("{}.abi.toml", g.source.symbol));
    let abi_text = g
        .abi
        .to_toml()
        .map_err(|e| format!("ABI description: {e}"))?;
    // Both or neither: a failed write leaves the previous pair, never a new source beside an
    // old ABI.
    crate::outputs::atomic_write_all(&[
        (&src, g.source.text.as_bytes()),
        (&abi, abi_text.as_bytes()),
    ])
    .map_err(|e| {
        format!(
            "writing {} and {} (neither changed): {e}",
            src.display(),
            abi.display()
        )
    })?;
    Ok(vec![src, abi])
}

/// `wavefuse emit --kernel-file PATH`: a kernel written in the textual IR (`docs/ir-format.md`),
/// at the shapes and TP size the file gives, through the same pipeline as the set's kernels
/// ([`SchedulePolicy::resolve_kernel`], then [`wavefuse_codegen::compile`]). Without a target
/// (`--ir`), the kernel as parsed and printed back. Exit 2 for a file that does not parse, 1 for a
/// kernel that does not validate or lower.
pub fn emit_file_cmd(
    path: &Path,
    arch: Option<Arch>,
    policy: &SchedulePolicy,
    placement: Placement,
    out: Option<PathBuf>,
    lowered: bool,
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
        Ok(g) => show(&g, out, lowered),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// [`read_kernel_file`], validated; the exit code is 2 for a file that cannot be read or parsed.
fn read_valid_kernel_file(path: &Path) -> Result<wavefuse::ir::Kernel, (String, ExitCode)> {
    let kernel = read_kernel_file(path).map_err(|e| (e, ExitCode::from(2)))?;
    wavefuse::ir::validate(&kernel).map_err(|e| {
        (
            invalid_kernel(&path.display().to_string(), &e),
            ExitCode::FAILURE,
        )
    })?;
    Ok(kernel)
}

/// A kernel read from `path` through the schedule policy and [`wavefuse_codegen::compile`]: what
/// `emit --kernel-file` prints and `check --kernel-file` compiles.
fn generate_file_kernel(
    path: &Path,
    kernel: &wavefuse::ir::Kernel,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<wavefuse_codegen::Generated, String> {
    // The user's kernel as a case at its own shapes: the same generation step (and tuned-store
    // key) as `ab`, `run` and `tune --kernel-file`.
    let user = std::sync::Arc::new(crate::suite::UserKernel::new(
        kernel.clone(),
        path.display().to_string(),
    )?);
    crate::suite::generate(&user.case(), arch, policy, placement)
        .map(|g| g.code)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// `wavefuse check --kernel-file PATH --target T [--placement P]`: generate a kernel of one's
/// own, compile it with the real compiler, print its resources, and fail when it spills, when
/// its grids (with a grid barrier) are not co-resident at the compiled occupancy for the
/// placement, or when it does not generate or compile. gfx906 INT4 kernels also get the MI50
/// time model (modelled, not measured).
pub fn check_file_cmd(
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
pub fn check_cmd(
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
