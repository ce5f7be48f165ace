//! The compilers: hipcc and hiprtc for AMD, nvcc and NVRTC for NVIDIA, behind one [`Compiler`] trait.
//!
//! Every compiler turns a [`CompileRequest`] (generated C++ source, kernel name, target [`Arch`],
//! extra flags) into an [`Artifact`]: the loadable image (an AMD code object, a CUBIN, or PTX when
//! NVRTC cannot give a CUBIN), the per-kernel [`ResourceUsage`] parsed from the compiler's report,
//! and the full log. The exact flag list a compiler uses is part of the [`crate::Cache`] key, so
//! [`Compiler::flags`] must return every flag that can change the output.

pub mod child;
mod disasm;
mod hipcc;
mod hiprtc;
mod nvcc;
mod nvrtc;
mod process;
pub mod usage;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use wavefuse_codegen::Arch;
use wavefuse_codegen::target::Vendor;

pub use child::{Bounds, ChildError, DEFAULT_TIMEOUT};
pub use disasm::{DisasmError, disassemble, objdump};
pub use hipcc::Hipcc;
pub use hiprtc::Hiprtc;
pub use nvcc::Nvcc;
pub use nvrtc::{Nvrtc, load_nvrtc};
pub use usage::{AmdUsage, NvidiaUsage, ReportError, ResourceUsage};

/// Where to get every toolchain the runtime drives.
pub const INSTALL_HINT: &str =
    "run `bash scripts/install-deps.sh` and `source .venv-cuda/wavefuse-env.sh`";

/// Which compiler produced an artifact.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CompilerId {
    /// ROCm's `hipcc` driver (clang), run as a process.
    Hipcc,
    /// ROCm's runtime compiler, loaded from libhiprtc / libamdhip64.
    Hiprtc,
    /// CUDA's `nvcc` driver (with ptxas), run as a process.
    Nvcc,
    /// CUDA's runtime compiler, loaded through cudarc.
    Nvrtc,
    /// wavefuse's LLVM back end (feature `llvm` of wavefuse-codegen) targeting NVPTX: PTX built
    /// on another machine and loaded as is (`wavefuse llvm-diff`).
    LlvmNvptx,
}

impl CompilerId {
    /// Every compiler.
    pub const ALL: [CompilerId; 4] = [
        CompilerId::Hipcc,
        CompilerId::Hiprtc,
        CompilerId::Nvcc,
        CompilerId::Nvrtc,
    ];

    /// Lower-case name (`hipcc`, `hiprtc`, `nvcc`, `nvrtc`, `llvm-nvptx`).
    pub fn name(self) -> &'static str {
        match self {
            CompilerId::Hipcc => "hipcc",
            CompilerId::Hiprtc => "hiprtc",
            CompilerId::Nvcc => "nvcc",
            CompilerId::Nvrtc => "nvrtc",
            CompilerId::LlvmNvptx => "llvm-nvptx",
        }
    }

    /// The vendor whose GPUs it targets.
    pub fn vendor(self) -> Vendor {
        match self {
            CompilerId::Hipcc | CompilerId::Hiprtc => Vendor::Amd,
            CompilerId::Nvcc | CompilerId::Nvrtc | CompilerId::LlvmNvptx => Vendor::Nvidia,
        }
    }
}

impl fmt::Display for CompilerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an artifact's image is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArtifactFormat {
    /// An AMD GPU code object (ELF), loadable with `hipModuleLoadData`.
    AmdCodeObject,
    /// An NVIDIA CUBIN (ELF), loadable with `cuModuleLoadData`.
    Cubin,
    /// NVIDIA PTX text (NUL-free), JIT-compiled by the driver at load.
    Ptx,
}

/// One compilation: a translation unit that defines one or more `extern "C"` kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileRequest {
    /// A name for logs and temporary files (usually the kernel name).
    pub name: String,
    /// The complete C++ source (HIP for AMD, CUDA for NVIDIA).
    pub source: String,
    /// The target.
    pub arch: Arch,
    /// Flags added after the compiler's own (they are part of the cache key).
    pub extra_flags: Vec<String>,
}

impl CompileRequest {
    /// A request with no extra flags.
    pub fn new(name: &str, source: impl Into<String>, arch: Arch) -> Self {
        CompileRequest {
            name: name.to_owned(),
            source: source.into(),
            arch,
            extra_flags: Vec::new(),
        }
    }
}

/// A compiled, loadable image plus what the compiler said about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// The compiler that produced it.
    pub compiler: CompilerId,
    /// That compiler's version string.
    pub compiler_version: String,
    /// The target.
    #[serde(with = "arch_name")]
    pub arch: Arch,
    /// What `image` is.
    pub format: ArtifactFormat,
    /// The complete flag list used.
    pub flags: Vec<String>,
    /// Per-kernel resource usage from the compiler's report (empty when the compiler gives none:
    /// hiprtc, or NVRTC without ptxas verbosity).
    pub usage: BTreeMap<String, ResourceUsage>,
    /// The compiler's full log (warnings, remarks, ptxas report).
    pub log: String,
    /// The image itself.
    #[serde(skip)]
    pub image: Vec<u8>,
}

impl Artifact {
    /// The resource usage of kernel `name`, when the compiler reported it.
    pub fn usage_of(&self, name: &str) -> Option<&ResourceUsage> {
        self.usage.get(name)
    }
}

/// Why a compilation failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The compiler is not installed or could not be loaded.
    #[error("{compiler} not found: {detail}; to install it, {INSTALL_HINT}")]
    Missing {
        /// Which compiler.
        compiler: CompilerId,
        /// What was looked for and where.
        detail: String,
    },
    /// The compiler does not generate code for this target.
    #[error("{compiler} does not generate code for {}", arch.name())]
    WrongTarget {
        /// Which compiler.
        compiler: CompilerId,
        /// The requested target.
        arch: Arch,
    },
    /// The compiler rejected the source. Carries its full log and the source.
    #[error("{compiler} failed to compile `{name}` for {}:\n{log}\n--- source ---\n{}", arch.name(), numbered(source_text))]
    Failed {
        /// Which compiler.
        compiler: CompilerId,
        /// The request's name.
        name: String,
        /// The target.
        arch: Arch,
        /// The compiler's complete output.
        log: String,
        /// The source it was given.
        source_text: String,
    },
    /// The compiler could not be run, or ran but produced nothing usable.
    #[error("{compiler}: {detail}")]
    Tool {
        /// Which compiler.
        compiler: CompilerId,
        /// What went wrong.
        detail: String,
    },
    /// The compiler process did not finish: it ran past its timeout or was interrupted, and was
    /// killed with its process group; or it could not be started.
    #[error("{compiler}: {source}")]
    Stopped {
        /// Which compiler.
        compiler: CompilerId,
        /// What happened.
        source: ChildError,
    },
    /// The compiler's resource report could not be parsed.
    #[error("{compiler}: {source}")]
    Report {
        /// Which compiler.
        compiler: CompilerId,
        /// The parse error.
        source: ReportError,
    },
}

/// `source` with 1-based line numbers, as compilers refer to lines.
fn numbered(source: &str) -> String {
    source
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{:>5} | {l}\n", i + 1))
        .collect()
}

/// A compiler of generated C++ for one vendor's GPUs.
pub trait Compiler: Send + Sync {
    /// Which compiler this is.
    fn id(&self) -> CompilerId;

    /// The compiler's version string (part of the cache key). Fails with
    /// [`CompileError::Missing`] when the compiler is not installed.
    fn version(&self) -> Result<String, CompileError>;

    /// Every flag [`Compiler::compile`] passes for `req` (part of the cache key).
    fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError>;

    /// Compile `req`.
    fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError>;
}

/// The offload target name clang uses for an AMD arch.
fn amd_target(compiler: CompilerId, arch: Arch) -> Result<&'static str, CompileError> {
    match arch {
        Arch::Gfx906 => Ok("gfx906"),
        Arch::Sm90 => Err(CompileError::WrongTarget { compiler, arch }),
    }
}

/// The `-arch` value nvcc and NVRTC use for an NVIDIA arch.
fn nvidia_target(compiler: CompilerId, arch: Arch) -> Result<&'static str, CompileError> {
    match arch {
        Arch::Sm90 => Ok("sm_90"),
        Arch::Gfx906 => Err(CompileError::WrongTarget { compiler, arch }),
    }
}

/// (De)serialises an [`Arch`] as its name.
mod arch_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use wavefuse_codegen::Arch;

    pub fn serialize<S: Serializer>(arch: &Arch, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(arch.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arch, D::Error> {
        let name = String::deserialize(d)?;
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown arch `{name}`")))
    }
}
