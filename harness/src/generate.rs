//! Code generation for the kernel set: `wavefuse emit --target`, `wavefuse check`, and the
//! pipeline the HIP/CUDA tests share (lower → C++ + ABI → real compiler → budget).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use wavefuse_codegen::Arch;
use wavefuse_codegen::cpp::budget::{Budgets, Verdict};
use wavefuse_codegen::cpp::{self};
use wavefuse_codegen::resources::ResourceUsage;
use wavefuse_runtime::compile::{
    Artifact, Bounds, CompileError, Compiler, DisasmError, disassemble,
};

use wavefuse_codegen::model::{HotLoop, LoopFacts, Modelled, inputs_for, inputs_with, model};

use crate::KernelId;
use crate::case::{CaseSpec, PrepError, ShapeKind};
pub use crate::case::{invalid_kernel, read_kernel_file};
use crate::pipeline::{self, Purpose};
use crate::policy::{Placement, SchedulePolicy};

/// The committed resource budget (DESIGN.md §7), embedded so `wavefuse check` works anywhere.
pub const BUDGETS_TOML: &str = wavefuse_kernels::BUDGETS_TOML;

/// Kernels outside the set that the budget file may name: the repository's example kernels
/// whose budgets their own tests enforce (`gemv_int4_q8`: `examples/gemv_int4_q8.wfir`,
/// `tests/tests/q8.rs`).
pub const EXAMPLE_KERNELS: [&str; 1] = ["gemv_int4_q8"];

/// The budget file, parsed and checked against the kernel set's and the examples' names.
pub fn budgets() -> Result<Budgets, cpp::budget::BudgetError> {
    let names: Vec<&str> = KernelId::ALL
        .map(KernelId::name)
        .into_iter()
        .chain(EXAMPLE_KERNELS)
        .collect();
    Budgets::parse(BUDGETS_TOML, &names)
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

/// A generated kernel of the set: the pipeline's one artifact ([`crate::pipeline::Generated`]).
pub type Generated = crate::pipeline::Generated;

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
    crate::pipeline::generate(&c, arch, policy, placement).map_err(|source| GenError {
        label: format!("{}@{arch}_tp{tp}", id.name()),
        source,
    })
}

/// Kernel `id` of the set at the model shapes through the pipeline ([`crate::pipeline::generate`])
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

/// A generated source compiled for [`Purpose::Check`]: the artifact (image, flags, the compiler's
/// log) and the kernel's resource report.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// What the compiler produced.
    pub artifact: Artifact,
    /// The kernel's resource report (from `artifact`).
    pub usage: ResourceUsage,
}

/// Compile `src` with `compiler`: the artifact and the resource report of `src`'s kernel.
pub fn compile_source(
    compiler: &dyn Compiler,
    src: &cpp::Source,
) -> Result<Compiled, CompileError> {
    let artifact = compiler.compile(&pipeline::request_named(&src.symbol, src))?;
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
        /// gfx906 INT4 kernels: the MI50 time model's prediction (modelled, not measured);
        /// `Err` says why the code object could not be read (llvm-objdump missing, timed out).
        modelled: Result<Option<Modelled>, ModelError>,
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
    let compiler = pipeline::compiler(arch, Purpose::Check(bounds));
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
                    let outcome = check_one(id, arch, (tp, shape), budgets, compiler, bounds);
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
    bounds: &Bounds,
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
            let modelled = modelled_mi50(&generated, &compiled, bounds);
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
/// occupancy. None for other kernels and targets; `Err` when the code object could not be
/// disassembled (llvm-objdump missing, failing or past `bounds`).
pub fn modelled_mi50(
    g: &Generated,
    compiled: &Compiled,
    bounds: &Bounds,
) -> Result<Option<Modelled>, ModelError> {
    if g.lowered.arch != Arch::Gfx906 {
        return Ok(None);
    }
    let occupancy = compiled.usage.occupancy(g.lowered.workgroup_size);
    modelled_mi50_image(
        &g.lowered,
        &compiled.artifact.image,
        g.spec.batch,
        occupancy,
        bounds,
    )
}

/// [`modelled_mi50`] of a compiled gfx906 code object `image` (an ELF, as the runtime's hipcc and
/// hiprtc write it) of lowered kernel `k` at hipcc's `occupancy`: what `tune --arch gfx906` ranks
/// its candidates by. None for other targets or a kernel without an INT4 hot loop; `Err` (the
/// reason, never silently no line) when llvm-objdump is missing, fails or runs past `bounds` —
/// the same timeout and failure rules as the compilers.
pub fn modelled_mi50_image(
    k: &wavefuse_codegen::lowered::LoweredKernel,
    image: &[u8],
    batch: usize,
    occupancy: u32,
    bounds: &Bounds,
) -> Result<Option<Modelled>, ModelError> {
    if k.arch != Arch::Gfx906 {
        return Ok(None);
    }
    let disasm = disassemble(image, Arch::Gfx906, bounds)?;
    let hot = HotLoop::from_disassembly_of(&disasm, &wavefuse_codegen::cpp::symbol(&k.name))
        .or_else(|| HotLoop::from_disassembly(&disasm));
    Ok(hot.and_then(|hot| Some(model(&inputs_for(k, &hot, batch, occupancy)?))))
}

/// How a hand-written kernel runs, for the MI50 model of its symbol: what its ABI says and the
/// machine code does not show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SymbolLaunch {
    /// Workgroups of the launch (all dimensions).
    pub grid: u32,
    /// Lanes per workgroup.
    pub workgroup_size: u32,
    /// The counted loop's weights per trip and branch period (the ABI's `[model]`).
    pub facts: LoopFacts,
    /// Bytes of the kernel's own scratch arrays (written once, read once: counted twice).
    pub scratch_bytes: f64,
    /// Grid barriers per launch.
    pub grid_barriers: u32,
    /// Flag rounds per launch (counted as PCIe round trips at TP > 1).
    pub flag_rounds: u32,
    /// Static LDS per workgroup, bytes (the compiler's report; 0: not known), which limits the
    /// occupancy the model takes.
    pub lds_bytes: u32,
    /// Bytes this launch moves, where it is one of several (each array it takes once); `None`:
    /// the op's data arrays once and the scratch twice.
    pub bytes: Option<f64>,
    /// The op's other launches (`[[launches]]`), in stream order: symbol and bytes moved. The
    /// model adds each as a streaming launch ([`wavefuse_codegen::model::OtherLaunch`]).
    pub other_launches: Vec<(String, f64)>,
}

/// The MI50 time model of kernel `symbol` of a compiled gfx906 code object `image` that
/// implements lowered kernel `k` (a hand-written kernel, maybe one of several in its file): the
/// loop counted in `symbol`'s code only with the ABI's facts, the weights and data bytes of
/// `k`'s data arrays (which the hand-written kernel shares), its own scratch, launch, grid
/// barriers and flag rounds (`launch`). `Err` says why there is none.
pub fn modelled_mi50_symbol(
    k: &wavefuse_codegen::lowered::LoweredKernel,
    image: &[u8],
    symbol: &str,
    launch: &SymbolLaunch,
    batch: usize,
    occupancy: u32,
    bounds: &Bounds,
) -> Result<Modelled, ModelError> {
    let disasm = disassemble(image, Arch::Gfx906, bounds).map_err(ModelError::NoDisassembly)?;
    if !disasm.contains(&format!("<{symbol}>:")) {
        return Err(ModelError::NoSymbol(symbol.to_owned()));
    }
    let hot = HotLoop::from_disassembly_of(&disasm, symbol)
        .ok_or_else(|| ModelError::NoLoop(symbol.to_owned()))?;
    // The hand-written kernel's passes choose its loop (the K loop inside its batch tiles).
    let passes = launch.facts.weight_passes.unwrap_or(1.0);
    let facts = LoopFacts {
        weight_passes: Some(passes),
        ..launch.facts
    };
    let mut inputs =
        inputs_with(k, &hot, batch, occupancy, &facts).ok_or_else(|| ModelError::NoWeights {
            symbol: symbol.to_owned(),
            counted: hot.counted().to_string(),
            kernel: k.name.clone(),
        })?;
    inputs.bytes += 2.0 * (launch.scratch_bytes - wavefuse_codegen::model::scratch_bytes(k));
    if let Some(b) = launch.bytes {
        inputs.bytes = b;
    }
    wavefuse_codegen::model::with_weight_passes(&mut inputs, k, passes);
    // The hand-written kernel's own LDS (0: not known, no limit on the occupancy).
    inputs.lds_bytes_per_workgroup = launch.lds_bytes;
    (inputs.grid, inputs.workgroup_size) = (launch.grid, launch.workgroup_size);
    inputs.grid_barriers = launch.grid_barriers;
    inputs.flag_round_trips = if k.tp > 1 { launch.flag_rounds } else { 0 };
    let others = launch
        .other_launches
        .iter()
        .map(|(s, b)| wavefuse_codegen::model::OtherLaunch::streaming(s, *b))
        .collect();
    Ok(model(&inputs).with_launches(others))
}

/// Why a compiled kernel has no MI50 model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The code object could not be disassembled (llvm-objdump missing, failing, timed out).
    #[error(transparent)]
    Disasm(#[from] DisasmError),
    /// As [`ModelError::Disasm`], for a hand-written kernel's symbol.
    #[error("no disassembly: {0}")]
    NoDisassembly(DisasmError),
    /// The symbol is not in the code object.
    #[error("symbol `{0}` is not in the code object")]
    NoSymbol(String),
    /// The symbol's code has no backward branch.
    #[error("`{0}` has no loop (a backward branch) to count")]
    NoLoop(String),
    /// The hottest loop has no weight products and the ABI no `[model]` facts.
    #[error(
        "`{symbol}`'s hottest loop ({counted}) has no weight products and its ABI no \
         `[model] weight_words_per_trip`, or `{kernel}` no INT4 weight"
    )]
    NoWeights {
        /// The symbol.
        symbol: String,
        /// What was counted in the loop.
        counted: String,
        /// The lowered kernel it implements.
        kernel: String,
    },
}

/// Why `emit --out` or `--lib` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The directory could not be created.
    #[error("creating {}: {source}", dir.display())]
    Create {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ABI could not be written as TOML.
    #[error("ABI description: {0}")]
    Abi(toml::ser::Error),
    /// The C library could not be made from the ABI.
    #[error(transparent)]
    Library(#[from] wavefuse_codegen::clib::CLibError),
    /// The files could not be written (none was).
    #[error("writing {what}: {source}")]
    Write {
        /// Which files.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// The library's build script could not be made executable.
    #[error("making {} executable: {source}", path.display())]
    Executable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Why a kernel file was not generated.
#[derive(Debug, thiserror::Error)]
pub enum FileKernelError {
    /// The kernel is not valid.
    #[error(transparent)]
    Kernel(#[from] crate::case::KernelError),
    /// It did not generate.
    #[error("{}: {source}", path.display())]
    Generate {
        /// The file.
        path: PathBuf,
        /// Why.
        source: PrepError,
    },
}

/// Where a caller still words errors as text.
impl From<WriteError> for String {
    fn from(e: WriteError) -> String {
        e.to_string()
    }
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

/// Write `<symbol>.hip|.cu` and `<symbol>.abi.toml` into `dir`.
pub fn write_outputs(
    g: &wavefuse_codegen::Generated,
    dir: &Path,
) -> Result<Vec<PathBuf>, WriteError> {
    create_dir(dir)?;
    let src = dir.join(g.source.file_name());
    let abi = dir.join(format!("{}.abi.toml", g.source.symbol));
    let abi_text = g.abi.to_toml().map_err(WriteError::Abi)?;
    // Both or neither: a failed write leaves the previous pair, never a new source beside an
    // old ABI.
    crate::outputs::atomic_write_all(&[
        (&src, g.source.text.as_bytes()),
        (&abi, abi_text.as_bytes()),
    ])
    .map_err(|source| WriteError::Write {
        what: format!("{} and {}", src.display(), abi.display()),
        source,
    })?;
    Ok(vec![src, abi])
}

fn create_dir(dir: &Path) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Create {
        dir: dir.to_owned(),
        source,
    })
}

/// Write the C library of `g` into `dir` (docs/clib.md): the kernel source as `emit` prints it
/// (`<symbol>.hip|.cu`), its ABI as `<symbol>_<arch>.abi.toml`, and the header, `extern "C"`
/// launcher and build script of [`wavefuse_codegen::clib::library`], all from `g` itself. Every
/// name but the source's carries the architecture, and the sources differ by extension, so both
/// targets of a kernel can share `dir`. All files or none are written.
pub fn write_library(
    g: &wavefuse_codegen::Generated,
    dir: &Path,
) -> Result<Vec<PathBuf>, WriteError> {
    let lib = wavefuse_codegen::clib::library(&g.abi)?;
    create_dir(dir)?;
    let abi_text = g.abi.to_toml().map_err(WriteError::Abi)?;
    let mut files: Vec<(PathBuf, &[u8])> = vec![
        (dir.join(g.source.file_name()), g.source.text.as_bytes()),
        (
            dir.join(format!("{}.abi.toml", lib.stem)),
            abi_text.as_bytes(),
        ),
    ];
    files.extend(
        lib.files
            .iter()
            .map(|f| (dir.join(&f.name), f.text.as_bytes())),
    );
    let refs: Vec<(&Path, &[u8])> = files.iter().map(|(p, b)| (p.as_path(), *b)).collect();
    crate::outputs::atomic_write_all(&refs).map_err(|source| WriteError::Write {
        what: format!("the C library into {}", dir.display()),
        source,
    })?;
    for f in lib.files.iter().filter(|f| f.executable) {
        make_executable(&dir.join(&f.name))?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), WriteError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|source| {
        WriteError::Executable {
            path: path.to_owned(),
            source,
        }
    })
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<(), WriteError> {
    Ok(())
}

/// A kernel read from `path` through the schedule policy and [`wavefuse_codegen::compile`]: what
/// `emit --kernel-file` prints and `check --kernel-file` compiles.
pub fn generate_file_kernel(
    path: &Path,
    kernel: &wavefuse::ir::Kernel,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<wavefuse_codegen::Generated, FileKernelError> {
    // The user's kernel as a case at its own shapes: the same generation step (and tuned-store
    // key) as `ab`, `run` and `tune --kernel-file`.
    let user = std::sync::Arc::new(crate::case::UserKernel::new(
        kernel.clone(),
        path.display().to_string(),
    )?);
    crate::pipeline::generate(&user.case(), arch, policy, placement)
        .map(|g| g.code)
        .map_err(|source| FileKernelError::Generate {
            path: path.to_owned(),
            source,
        })
}
