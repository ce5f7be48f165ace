//! hipcc (ROCm's clang driver) run as a process.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::process::{self, file_stem};
use super::usage::parse_amd_remarks;
use super::{
    Artifact, ArtifactFormat, Bounds, CompileError, CompileRequest, Compiler, CompilerId,
    ResourceUsage, amd_target,
};

const ID: CompilerId = CompilerId::Hipcc;

/// hipcc, compiling a HIP translation unit into a gfx906 code object and reporting resource usage
/// through clang's kernel-resource-usage remarks.
#[derive(Debug)]
pub struct Hipcc {
    tool: Result<PathBuf, String>,
    version: OnceLock<String>,
    /// Timeout and cancellation of every process run (default:
    /// [`DEFAULT_TIMEOUT`](super::DEFAULT_TIMEOUT)).
    bounds: Bounds,
}

impl Hipcc {
    /// hipcc from `$WAVEFUSE_HIPCC`, else `hipcc` on `PATH`, else `/usr/bin/hipcc`.
    pub fn from_env() -> Self {
        let tool = process::locate(
            "WAVEFUSE_HIPCC",
            "hipcc",
            &["/usr/bin/hipcc", "/opt/rocm/bin/hipcc"],
        );
        Hipcc {
            tool,
            version: OnceLock::new(),
            bounds: Bounds::default(),
        }
    }

    /// hipcc at an explicit path.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Hipcc {
            tool: Ok(path.into()),
            version: OnceLock::new(),
            bounds: Bounds::default(),
        }
    }

    /// The same compiler with every process run limited to `timeout`.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let bounds = Bounds {
            timeout,
            ..self.bounds.clone()
        };
        self.with_bounds(bounds)
    }

    /// The same compiler with every process run within `bounds` (a timeout, a cancel flag).
    pub fn with_bounds(self, bounds: Bounds) -> Self {
        Hipcc { bounds, ..self }
    }

    /// Where the compiler is (what [`Compiler::compile`] runs), or why it was not found: for
    /// build scripts that run it themselves (the C library of `wavefuse emit --lib`).
    pub fn path(&self) -> Result<&std::path::Path, CompileError> {
        self.tool().map(PathBuf::as_path)
    }

    fn tool(&self) -> Result<&PathBuf, CompileError> {
        self.tool.as_ref().map_err(|detail| CompileError::Missing {
            compiler: ID,
            detail: detail.clone(),
        })
    }
}

/// hipcc picks the CUDA platform when it finds nvcc on PATH; wavefuse always wants AMD.
const ENV: [(&str, &str); 2] = [("HIP_PLATFORM", "amd"), ("HIP_COMPILER", "clang")];

impl Compiler for Hipcc {
    fn id(&self) -> CompilerId {
        ID
    }

    fn version(&self) -> Result<String, CompileError> {
        if let Some(v) = self.version.get() {
            return Ok(v.clone());
        }
        let tool = self.tool()?;
        if !tool.is_file() {
            return Err(CompileError::Missing {
                compiler: ID,
                detail: format!("{} does not exist", tool.display()),
            });
        }
        let v = process::version(ID, tool, &ENV, &self.bounds)?;
        Ok(self.version.get_or_init(|| v).clone())
    }

    fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError> {
        let target = amd_target(ID, req.arch)?;
        let mut flags: Vec<String> = [
            &format!("--offload-arch={target}"),
            "--genco",
            // A plain code object: loadable by hipModuleLoadData and readable by llvm-objdump.
            "--no-gpu-bundle-output",
            "-O3",
            "-Rpass-analysis=kernel-resource-usage",
        ]
        .map(str::to_owned)
        .to_vec();
        flags.extend(req.extra_flags.iter().cloned());
        Ok(flags)
    }

    fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
        let flags = self.flags(req)?;
        let version = self.version()?;
        let dir = process::scratch_dir(ID)?;
        let stem = file_stem(&req.name);
        let src = dir.path().join(format!("{stem}.hip"));
        let out_path = dir.path().join(format!("{stem}.hsaco"));
        process::write_source(ID, &src, &req.source)?;
        let mut cmd = Command::new(self.tool()?);
        cmd.envs(ENV)
            // clang's HIP driver makes a `<stem>-xxxxxx` directory in TMPDIR per compilation and
            // leaves it behind (empty); inside the scratch directory it goes when that does.
            .env("TMPDIR", dir.path())
            .args(&flags)
            .arg("-o")
            .arg(&out_path)
            .arg(&src);
        let out = process::run(ID, &mut cmd, &self.bounds)?;
        if !out.success {
            return Err(CompileError::Failed {
                compiler: ID,
                name: req.name.clone(),
                arch: req.arch,
                log: out.described,
                source_text: req.source.clone(),
            });
        }
        let usage = parse_amd_remarks(&out.stderr).map_err(|source| CompileError::Report {
            compiler: ID,
            source,
        })?;
        Ok(Artifact {
            compiler: ID,
            compiler_version: version,
            arch: req.arch,
            format: ArtifactFormat::AmdCodeObject,
            flags,
            usage: usage
                .into_iter()
                .map(|(k, u)| (k, ResourceUsage::Amd(u)))
                .collect(),
            log: out.log,
            image: process::read_output(ID, &out_path)?,
        })
    }
}
