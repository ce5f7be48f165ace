//! The LLVM back end (feature `llvm`): a lowered kernel into LLVM IR with inkwell, then through
//! LLVM 16's AMDGPU target into a gfx906 code object (code object v4, what ROCm 5.2 loads) or
//! through its NVPTX target into sm_90 PTX.
//!
//! # The module it builds
//! - One kernel function named like the C++ kernel ([`crate::back::symbol`]), its parameters in ABI
//!   order: arrays and peer tables as `ptr addrspace(1)` (`noalias`, and `readonly` for inputs,
//!   where no atomic touches them, as the C++ `__restrict__`), scalars by value. LDS arrays are
//!   `addrspace(3)` globals. AMDGPU: calling convention `amdgpu_kernel`,
//!   `"amdgpu-flat-work-group-size"="W,W"` (DESIGN.md §6: without it the backend budgets for 1024
//!   lanes), the module flag `amdgpu_code_object_version` = 400. NVPTX: `ptx_kernel` with
//!   `nvvm.annotations` `kernel` and `maxntidx` = W, PTX ISA 7.8 (the newest LLVM 16 writes; it
//!   is the first with sm_90).
//! - The helper library (`helpers.rs`): every atomic, fence, barrier, hardware index, shuffle and
//!   transcendental as a small `alwaysinline` function, parsed from textual IR and linked in. On
//!   AMDGPU the atomics are LLVM atomics with the lowered IR's ordering and `syncscope`
//!   (`wavefront`, `workgroup`, `agent`; the system scope is LLVM's default scope); on NVPTX, whose
//!   LLVM 16 selector has no ordered atomics or fences, the PTX instruction nvcc would emit.
//! - Every synchronisation call carries `!wavefuse.sync !{!"5.N", !"<ordering>", !"<scope>",
//!   !"<invariant>"}` naming the DESIGN.md §5 invariant it upholds; [`audit`] checks them.
//!
//! [`emit_ir`] gives the module after `mem2reg` (what the snapshots hold); [`compile`] runs LLVM's
//! `default<O3>` pipeline and the target's code generator, timing each step. LLVM aborts the
//! process on some internal errors instead of returning them, so the module is verified before
//! code generation and only constructs both back ends are known to select are emitted.

mod audit;
mod emit;
mod helpers;
mod report;

use std::time::Instant;

use inkwell::OptimizationLevel;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{FlagBehavior, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};

pub use audit::{AuditError, SyncSite, audit};
pub use report::parse_amd_asm;

use crate::lowered::{LoweredInfo, LoweredKernel};
use crate::target::Arch;

/// Why a kernel could not be turned into LLVM IR or machine code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The LLVM back end cannot express something the kernel needs.
    #[error("not supported by the LLVM back end: {0}")]
    Unsupported(String),
    /// The lowered kernel breaks a rule of the lowered level (a lowering bug).
    #[error("malformed lowered kernel: {0}")]
    Malformed(String),
    /// LLVM rejected the module or failed to generate code.
    #[error("LLVM: {0}")]
    Llvm(String),
}

/// The two LLVM targets.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `amdgcn-amd-amdhsa`, code objects.
    Amdgpu,
    /// `nvptx64-nvidia-cuda`, PTX.
    Nvptx,
}

impl Flavor {
    /// The flavor of an architecture.
    pub fn of(arch: Arch) -> Flavor {
        match arch {
            Arch::Gfx906 => Flavor::Amdgpu,
            Arch::Sm90 => Flavor::Nvptx,
        }
    }

    /// `amdgpu` or `nvptx`.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Amdgpu => "amdgpu",
            Flavor::Nvptx => "nvptx",
        }
    }
}

/// Target triple, CPU and features for `arch`.
pub fn target_spec(arch: Arch) -> (&'static str, &'static str, &'static str) {
    match arch {
        Arch::Gfx906 => ("amdgcn-amd-amdhsa", "gfx906", ""),
        Arch::Sm90 => ("nvptx64-nvidia-cuda", "sm_90", "+ptx78"),
    }
}

/// LLVM's version (major, minor, patch), as linked.
pub fn llvm_version() -> (u32, u32, u32) {
    let (mut a, mut b, mut c) = (0u32, 0u32, 0u32);
    // SAFETY: writes three integers through valid pointers.
    unsafe { inkwell::llvm_sys::core::LLVMGetVersion(&mut a, &mut b, &mut c) };
    (a, b, c)
}

fn target_machine(arch: Arch) -> Result<TargetMachine, Error> {
    let config = InitializationConfig::default();
    match arch {
        Arch::Gfx906 => Target::initialize_amd_gpu(&config),
        Arch::Sm90 => Target::initialize_nvptx(&config),
    }
    let (triple, cpu, features) = target_spec(arch);
    let triple = TargetTriple::create(triple);
    let target = Target::from_triple(&triple).map_err(|e| Error::Llvm(e.to_string()))?;
    target
        .create_target_machine(
            &triple,
            cpu,
            features,
            OptimizationLevel::Aggressive,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| Error::Llvm(format!("no target machine for {}", arch.name())))
}

/// The module for `k` after `mem2reg`, in `cx`.
fn build<'c>(cx: &'c Context, k: &LoweredKernel, tm: &TargetMachine) -> Result<Module<'c>, Error> {
    let flavor = Flavor::of(k.arch);
    check_launch(k)?;
    let symbol = crate::back::symbol(&k.name);
    // The validator's facts (types, atomically accessed parameters), derived without its checks:
    // this back end reports what it cannot build instead of assuming a validated kernel.
    let info = LoweredInfo::derive(k);
    let mut e = emit::Emitter::new(cx, k, &info, flavor, &symbol)?;
    let triple = tm.get_triple();
    let dl = tm.get_target_data().get_data_layout();
    e.m.set_triple(&triple);
    e.m.set_data_layout(&dl);
    e.kernel()?;
    kernel_attributes(cx, &e.m, k, flavor, &symbol)?;
    let lib_text = e.lib.text(
        triple.as_str().to_str().unwrap_or_default(),
        dl.as_str().to_str().unwrap_or_default(),
    );
    let buf = MemoryBuffer::create_from_memory_range_copy(lib_text.as_bytes(), "wavefuse-helpers");
    let lib = cx
        .create_module_from_ir(buf)
        .map_err(|e| Error::Llvm(format!("helper library: {e}\n{lib_text}")))?;
    e.m.link_in_module(lib)
        .map_err(|err| Error::Llvm(format!("linking the helper library: {err}")))?;
    // Linked with external linkage (an internal definition would not resolve the kernel's
    // declarations); made internal now, so they are inlined and dropped.
    let mut f = e.m.get_first_function();
    while let Some(func) = f {
        if func.get_name().to_bytes().starts_with(b"wf.") {
            func.set_linkage(inkwell::module::Linkage::Internal);
        }
        f = func.get_next_function();
    }
    e.m.verify()
        .map_err(|err| Error::Llvm(format!("invalid module: {err}")))?;
    e.m.run_passes("mem2reg", tm, PassBuilderOptions::create())
        .map_err(|err| Error::Llvm(err.to_string()))?;
    Ok(e.m)
}

fn check_launch(k: &LoweredKernel) -> Result<(), Error> {
    let wave = k.wave_size();
    let max = k.arch.max_workgroup_size();
    if k.workgroup_size == 0 || k.workgroup_size > max || k.workgroup_size % wave != 0 {
        return Err(Error::Unsupported(format!(
            "{}: workgroup size {} (must be a multiple of the wave size {wave}, at most {max})",
            k.arch, k.workgroup_size
        )));
    }
    if k.grid == 0 {
        return Err(Error::Malformed("empty grid".into()));
    }
    if k.lds_bytes() > k.arch.max_lds_per_workgroup() as usize {
        return Err(Error::Unsupported(format!(
            "{}: {} bytes of LDS",
            k.arch,
            k.lds_bytes()
        )));
    }
    Ok(())
}

fn kernel_attributes<'c>(
    cx: &'c Context,
    m: &Module<'c>,
    k: &LoweredKernel,
    flavor: Flavor,
    symbol: &str,
) -> Result<(), Error> {
    use inkwell::attributes::AttributeLoc;
    let f = m
        .get_function(symbol)
        .ok_or_else(|| Error::Llvm("kernel function missing".into()))?;
    let w = k.workgroup_size;
    let nounwind = inkwell::attributes::Attribute::get_named_enum_kind_id("nounwind");
    f.add_attribute(
        AttributeLoc::Function,
        cx.create_enum_attribute(nounwind, 0),
    );
    match flavor {
        Flavor::Amdgpu => {
            const AMDGPU_KERNEL: u32 = 91;
            f.set_call_conventions(AMDGPU_KERNEL);
            for (key, value) in [
                // Exact, as the HIP dialect's __launch_bounds__ + amdgpu_flat_work_group_size.
                ("amdgpu-flat-work-group-size", format!("{w},{w}")),
                ("uniform-work-group-size", "true".to_owned()),
            ] {
                f.add_attribute(
                    AttributeLoc::Function,
                    cx.create_string_attribute(key, &value),
                );
            }
            // Code object v4: what ROCm 5.2's loader takes (LLVM 16 reads this module flag).
            let v = cx.i32_type().const_int(400, false);
            m.add_basic_value_flag("amdgpu_code_object_version", FlagBehavior::Error, v);
        }
        Flavor::Nvptx => {
            const PTX_KERNEL: u32 = 71;
            f.set_call_conventions(PTX_KERNEL);
            let fp = f.as_global_value().as_pointer_value();
            // With a residency request (`LoweredKernel::min_resident_per_cu`) also `minctasm`,
            // what `__launch_bounds__`' second argument becomes in NVVM.
            let mut notes = vec![("kernel", 1), ("maxntidx", w)];
            if k.min_resident_per_cu > 0 {
                notes.push(("minctasm", k.min_resident_per_cu));
            }
            for (key, value) in notes {
                let node = cx.metadata_node(&[
                    fp.into(),
                    cx.metadata_string(key).into(),
                    cx.i32_type().const_int(u64::from(value), false).into(),
                ]);
                m.add_global_metadata("nvvm.annotations", &node)
                    .map_err(|e| Error::Llvm(format!("nvvm.annotations: {e}")))?;
            }
        }
    }
    Ok(())
}

/// The LLVM IR of `k` (after `mem2reg`, before optimisation): what the snapshots hold.
pub fn emit_ir(k: &LoweredKernel) -> Result<String, Error> {
    let tm = target_machine(k.arch)?;
    let cx = Context::create();
    let m = build(&cx, k, &tm)?;
    Ok(m.print_to_string().to_string())
}

/// What [`compile`] produced.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The kernel's exported symbol.
    pub symbol: String,
    /// The target.
    pub arch: Arch,
    /// The IR as [`emit_ir`] gives it.
    pub ir: String,
    /// A gfx906 code object (ELF) or sm_90 PTX text.
    pub image: Vec<u8>,
    /// The AMDGPU assembly (with the backend's resource comments), gfx906 only.
    pub asm: Option<String>,
    /// Milliseconds spent building and verifying the IR.
    pub build_ms: f64,
    /// Milliseconds in the `default<O3>` pipeline.
    pub opt_ms: f64,
    /// Milliseconds in the code generator (object or PTX).
    pub codegen_ms: f64,
}

impl Compiled {
    /// Build + optimise + generate code, in milliseconds.
    pub fn total_ms(&self) -> f64 {
        self.build_ms + self.opt_ms + self.codegen_ms
    }
}

/// `k` through LLVM: IR, `default<O3>`, then a code object (gfx906, also its assembly when
/// `with_asm`) or PTX (sm_90).
pub fn compile(k: &LoweredKernel, with_asm: bool) -> Result<Compiled, Error> {
    let t0 = Instant::now();
    let tm = target_machine(k.arch)?;
    let cx = Context::create();
    let m = build(&cx, k, &tm)?;
    let ir = m.print_to_string().to_string();
    let t1 = Instant::now();
    m.run_passes("default<O3>", &tm, PassBuilderOptions::create())
        .map_err(|e| Error::Llvm(e.to_string()))?;
    m.verify()
        .map_err(|e| Error::Llvm(format!("invalid module after optimisation: {e}")))?;
    let t_opt = Instant::now();
    // Code generation rewrites the module (AMDGPU control-flow intrinsics), so the assembly is
    // written from a copy: a module is never code-generated twice.
    let asm = if with_asm && k.arch == Arch::Gfx906 {
        let b = tm
            .write_to_memory_buffer(&m.clone(), FileType::Assembly)
            .map_err(|e| Error::Llvm(e.to_string()))?;
        Some(String::from_utf8_lossy(b.as_slice()).into_owned())
    } else {
        None
    };
    let t2 = Instant::now();
    let file_type = match k.arch {
        Arch::Gfx906 => FileType::Object,
        Arch::Sm90 => FileType::Assembly,
    };
    let image = tm
        .write_to_memory_buffer(&m, file_type)
        .map_err(|e| Error::Llvm(e.to_string()))?
        .as_slice()
        .to_vec();
    let t3 = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
    Ok(Compiled {
        symbol: crate::back::symbol(&k.name),
        arch: k.arch,
        ir,
        image,
        asm,
        build_ms: ms(t0, t1),
        opt_ms: ms(t1, t_opt),
        codegen_ms: ms(t2, t3),
    })
}
