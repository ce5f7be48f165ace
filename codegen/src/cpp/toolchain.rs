//! The real compilers: hipcc for gfx906 and nvcc for sm_90, run on generated sources, with their
//! resource reports (registers, spills, scratch, LDS, occupancy) parsed, and llvm-objdump for
//! AMD disassembly. Tools are found through the environment `scripts/install-deps.sh` writes
//! (`WAVEFUSE_HIPCC`, `WAVEFUSE_NVCC`, `WAVEFUSE_LLVM_OBJDUMP`), then `PATH`. Every tool runs
//! within [`Bounds`] (a timeout, [`child::DEFAULT_TIMEOUT`] unless given, and an optional
//! cancel flag): past it the tool's process group is killed and the error says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Source;
use super::child::{self, Bounds, ChildError};
use crate::target::Arch;

/// What to run to get the tools.
pub const INSTALL_HINT: &str = "install the toolchains with `bash scripts/install-deps.sh`, then `source .venv-cuda/wavefuse-env.sh`";

/// An external tool.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tool {
    /// hipcc (Debian's ROCm 5.2 clang 15) for AMD targets.
    Hipcc,
    /// nvcc (CUDA 13.0 wheels) for NVIDIA targets.
    Nvcc,
    /// llvm-objdump from the LLVM hipcc uses, for AMD disassembly.
    LlvmObjdump,
}

impl Tool {
    /// The compiler of a target.
    pub fn compiler(arch: Arch) -> Tool {
        match arch {
            Arch::Gfx906 => Tool::Hipcc,
            Arch::Sm90 => Tool::Nvcc,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Hipcc => "hipcc",
            Tool::Nvcc => "nvcc",
            Tool::LlvmObjdump => "llvm-objdump",
        }
    }

    fn env(self) -> &'static str {
        match self {
            Tool::Hipcc => "WAVEFUSE_HIPCC",
            Tool::Nvcc => "WAVEFUSE_NVCC",
            Tool::LlvmObjdump => "WAVEFUSE_LLVM_OBJDUMP",
        }
    }

    fn candidates(self) -> &'static [&'static str] {
        match self {
            Tool::Hipcc => &["hipcc", "/usr/bin/hipcc", "/opt/rocm/bin/hipcc"],
            Tool::Nvcc => &["nvcc", "/usr/local/cuda/bin/nvcc"],
            Tool::LlvmObjdump => &[
                "/usr/lib/llvm-15/bin/llvm-objdump",
                "llvm-objdump-15",
                "llvm-objdump",
            ],
        }
    }
}

/// Why a tool run failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The tool is not installed.
    #[error("{tool} not found ({looked}); {INSTALL_HINT}", tool = tool.name())]
    Missing {
        /// Which tool.
        tool: Tool,
        /// Where it was looked for: the variable's path that does not exist, or `$VAR` unset
        /// and the PATH and fallbacks searched.
        looked: String,
    },
    /// The tool did not finish (timeout, interrupt) or could not be started.
    #[error("{tool}: {source}", tool = tool.name())]
    Child {
        /// Which tool.
        tool: Tool,
        /// What happened.
        source: ChildError,
    },
    /// The tool ran and failed.
    #[error("{tool} failed on {file}: {log}", tool = tool.name())]
    Failed {
        /// Which tool.
        tool: Tool,
        /// The input file.
        file: String,
        /// How it ended and its output.
        log: String,
    },
    /// The tool succeeded but its report lacks a field.
    #[error("no `{field}` in the resource report {tool} gave for {file}:\n{log}", tool = tool.name())]
    Report {
        /// Which tool.
        tool: Tool,
        /// The input file.
        file: String,
        /// The missing field.
        field: &'static str,
        /// Its output.
        log: String,
    },
    /// Reading or writing a file, or starting the tool, failed.
    #[error("{0}")]
    Io(String),
}

/// The path of `tool`.
pub fn find(tool: Tool) -> Result<PathBuf, ToolError> {
    if let Some(p) = std::env::var_os(tool.env()).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(ToolError::Missing {
                tool,
                looked: format!(
                    "${} is {}, which does not exist; PATH was not searched",
                    tool.env(),
                    p.display()
                ),
            })
        };
    }
    for c in tool.candidates() {
        let c = Path::new(c);
        if c.is_absolute() {
            if c.is_file() {
                return Ok(c.to_owned());
            }
        } else if let Some(p) = search_path(c) {
            return Ok(p);
        }
    }
    Err(ToolError::Missing {
        tool,
        looked: format!(
            "${} is not set, and no {:?} on PATH or at the fallbacks",
            tool.env(),
            tool.candidates()
        ),
    })
}

fn search_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What the compiler reports about one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resources {
    /// Vector registers per lane (AMD VGPRs; NVIDIA registers per thread).
    pub vgprs: u32,
    /// Scalar registers per wave (AMD only).
    pub sgprs: Option<u32>,
    /// Spilled registers (AMD: VGPR + SGPR spills; NVIDIA: spill store + load bytes).
    pub spills: u32,
    /// Private memory per lane in bytes (AMD scratch; NVIDIA stack frame).
    pub scratch_bytes: u32,
    /// LDS / shared memory per workgroup in bytes.
    pub lds_bytes: u32,
    /// Resident waves per SIMD (AMD, from the compiler) or warps per SM sub-partition (NVIDIA,
    /// computed from registers, shared memory and the block size).
    pub occupancy: u32,
}

/// A compiled kernel.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The code object (AMD, unbundled) or cubin (NVIDIA).
    pub object: PathBuf,
    /// The resource report.
    pub resources: Resources,
    /// The compiler's full output.
    pub log: String,
}

/// Write `src` into `dir` and compile it for its target, reading the resource report.
/// `workgroup_size` is the launch's block size (for the NVIDIA occupancy computation). The
/// compiler runs within the default [`Bounds`].
pub fn compile(src: &Source, workgroup_size: u32, dir: &Path) -> Result<Compiled, ToolError> {
    compile_within(src, workgroup_size, dir, &Bounds::default())
}

/// [`compile`] within `bounds`.
pub fn compile_within(
    src: &Source,
    workgroup_size: u32,
    dir: &Path,
    bounds: &Bounds,
) -> Result<Compiled, ToolError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| ToolError::Io(format!("creating {}: {e}", dir.display())))?;
    let file = dir.join(src.file_name());
    std::fs::write(&file, &src.text)
        .map_err(|e| ToolError::Io(format!("writing {}: {e}", file.display())))?;
    match src.arch {
        Arch::Gfx906 => compile_hip(&file, src.arch, bounds),
        Arch::Sm90 => compile_cuda(&file, workgroup_size, bounds),
    }
}

fn run(tool: Tool, mut cmd: Command, file: &Path, bounds: &Bounds) -> Result<String, ToolError> {
    let out = child::run(&mut cmd, bounds).map_err(|source| ToolError::Child { tool, source })?;
    if out.status.success() {
        Ok(out.log())
    } else {
        Err(ToolError::Failed {
            tool,
            file: file.display().to_string(),
            log: out.describe(),
        })
    }
}

fn compile_hip(file: &Path, arch: Arch, bounds: &Bounds) -> Result<Compiled, ToolError> {
    let object = file.with_extension("co");
    let mut cmd = Command::new(find(Tool::Hipcc)?);
    // hipcc picks the NVIDIA platform when it sees nvcc on PATH; this is an AMD compile.
    cmd.env("HIP_PLATFORM", "amd")
        .arg(format!("--offload-arch={}", arch.name()))
        .args([
            "--genco",
            "--no-gpu-bundle-output",
            "-O3",
            "-Rpass-analysis=kernel-resource-usage",
            "-o",
        ])
        .arg(&object)
        .arg(file);
    let log = run(Tool::Hipcc, cmd, file, bounds)?;
    let resources = parse_hipcc_report(&log).map_err(|field| ToolError::Report {
        tool: Tool::Hipcc,
        file: file.display().to_string(),
        field,
        log: log.clone(),
    })?;
    Ok(Compiled {
        object,
        resources,
        log,
    })
}

fn compile_cuda(file: &Path, workgroup_size: u32, bounds: &Bounds) -> Result<Compiled, ToolError> {
    let object = file.with_extension("cubin");
    let mut cmd = Command::new(find(Tool::Nvcc)?);
    cmd.args(["-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o"])
        .arg(&object)
        .arg(file);
    if let Ok(flags) = std::env::var("WAVEFUSE_NVCC_FLAGS") {
        cmd.args(flags.split_whitespace());
    }
    let log = run(Tool::Nvcc, cmd, file, bounds)?;
    let resources =
        parse_ptxas_report(&log, workgroup_size).map_err(|field| ToolError::Report {
            tool: Tool::Nvcc,
            file: file.display().to_string(),
            field,
            log: log.clone(),
        })?;
    Ok(Compiled {
        object,
        resources,
        log,
    })
}

/// The number after `key` on the first line containing it.
fn field(log: &str, key: &'static str) -> Result<u32, &'static str> {
    log.lines()
        .find_map(|l| {
            let rest = &l[l.find(key)? + key.len()..];
            rest.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .ok_or(key)
}

/// Parse the remarks of `-Rpass-analysis=kernel-resource-usage` (one kernel per source).
pub fn parse_hipcc_report(log: &str) -> Result<Resources, &'static str> {
    Ok(Resources {
        vgprs: field(log, " VGPRs:")?,
        sgprs: Some(field(log, " SGPRs:")?),
        spills: field(log, "VGPRs Spill:")? + field(log, "SGPRs Spill:")?,
        scratch_bytes: field(log, "ScratchSize [bytes/lane]:")?,
        lds_bytes: field(log, "LDS Size [bytes/block]:")?,
        occupancy: field(log, "Occupancy [waves/SIMD]:")?,
    })
}

/// Parse `ptxas -v` output (one kernel per source) and compute the occupancy on sm_90.
pub fn parse_ptxas_report(log: &str, workgroup_size: u32) -> Result<Resources, &'static str> {
    let regs = field(log, "Used").map_err(|_| "Used N registers")?;
    let frame = field_before(log, "bytes stack frame").ok_or("bytes stack frame")?;
    let spill_stores = field_before(log, "bytes spill stores").ok_or("bytes spill stores")?;
    let spill_loads = field_before(log, "bytes spill loads").ok_or("bytes spill loads")?;
    let smem = field_before(log, "bytes smem").unwrap_or(0);
    Ok(Resources {
        vgprs: regs,
        sgprs: None,
        spills: spill_stores + spill_loads,
        scratch_bytes: frame,
        lds_bytes: smem,
        occupancy: sm90_occupancy(regs, smem, workgroup_size),
    })
}

/// The number just before `suffix` (e.g. `0 bytes stack frame`).
fn field_before(log: &str, suffix: &str) -> Option<u32> {
    log.lines().find_map(|l| {
        let head = l[..l.find(suffix)?].trim_end();
        head.rsplit(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

/// Warps per SM sub-partition on sm_90 for a block of `workgroup_size` threads: the smallest of
/// the register-file, shared-memory, warp-slot and block-slot limits.
pub fn sm90_occupancy(regs: u32, smem: u32, workgroup_size: u32) -> u32 {
    let warps_per_block = workgroup_size.div_ceil(32).max(1);
    // Registers are allocated per warp in units of 256.
    let regs_per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
    let by_regs = 65536 / (regs_per_warp * warps_per_block);
    let by_smem = if smem == 0 {
        u32::MAX
    } else {
        (228 * 1024) / (smem + 1024)
    };
    let by_warps = 64 / warps_per_block;
    let blocks = by_regs.min(by_smem).min(by_warps).min(32);
    blocks * warps_per_block / 4
}

/// Disassemble an AMD code object.
pub fn disassemble(object: &Path, arch: Arch) -> Result<String, ToolError> {
    let mut cmd = Command::new(find(Tool::LlvmObjdump)?);
    cmd.arg("-d")
        .arg(format!("--mcpu={}", arch.name()))
        .arg(object);
    run(Tool::LlvmObjdump, cmd, object, &Bounds::default())
}

/// A fresh scratch directory for compiler runs (under the system temp directory, a unique name
/// starting `wavefuse-{tag}-`), removed with everything in it when dropped: on every return,
/// error and unwinding panic of the caller.
pub fn scratch_dir(tag: &str) -> Result<tempfile::TempDir, ToolError> {
    tempfile::Builder::new()
        .prefix(&format!("wavefuse-{tag}-"))
        .tempdir()
        .map_err(|e| ToolError::Io(format!("creating a temporary directory: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hipcc_remarks() {
        let log = "\
k.hip:2:1: remark: Function Name: k [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     SGPRs: 14 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     VGPRs: 3 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     Occupancy [waves/SIMD]: 10 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     VGPRs Spill: 2 [-Rpass-analysis=kernel-resource-usage]
k.hip:2:1: remark:     LDS Size [bytes/block]: 16 [-Rpass-analysis=kernel-resource-usage]
";
        let r = parse_hipcc_report(log).unwrap();
        assert_eq!(
            r,
            Resources {
                vgprs: 3,
                sgprs: Some(14),
                spills: 2,
                scratch_bytes: 0,
                lds_bytes: 16,
                occupancy: 10
            }
        );
        assert_eq!(parse_hipcc_report("nothing"), Err(" VGPRs:"));
    }

    #[test]
    fn a_hanging_tool_is_stopped_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.cu");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 60"]);
        let t0 = std::time::Instant::now();
        let err = run(
            Tool::Nvcc,
            cmd,
            &file,
            &Bounds::timeout(std::time::Duration::from_secs(1)),
        )
        .unwrap_err();
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
        let text = err.to_string();
        assert!(
            text.starts_with("nvcc: sh did not finish within 1 s"),
            "{text}"
        );
    }

    #[test]
    fn a_failing_tool_reports_its_exit_status() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 2"]);
        let err = run(Tool::Hipcc, cmd, Path::new("k.hip"), &Bounds::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "hipcc failed on k.hip: exit status 2 and printed nothing"
        );
    }

    #[test]
    fn scratch_dir_is_removed_when_dropped() {
        let dir = scratch_dir("test").unwrap();
        let path = dir.path().to_owned();
        std::fs::write(path.join("x"), "x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn parses_ptxas_verbose() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem
";
        let r = parse_ptxas_report(log, 256).unwrap();
        assert_eq!(
            (r.vgprs, r.spills, r.scratch_bytes, r.lds_bytes),
            (40, 8, 8, 1024)
        );
        // 40 regs → 1280 per warp; 8 warps per block → 6 blocks by registers → 48 warps / 4.
        assert_eq!(r.occupancy, 12);
    }
}
