//! nvcc (CUDA's compiler driver, with ptxas) run as a process.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::process::{self, file_stem};
use super::usage::parse_ptxas;
use super::{
    Artifact, ArtifactFormat, Bounds, CompileError, CompileRequest, Compiler, CompilerId,
    ResourceUsage, nvidia_target,
};

const ID: CompilerId = CompilerId::Nvcc;

/// nvcc, compiling a CUDA translation unit into an sm_90 CUBIN and reporting resource usage
/// through `ptxas -v`.
#[derive(Debug)]
pub struct Nvcc {
    tool: Result<PathBuf, String>,
    /// Flags from `$WAVEFUSE_NVCC_FLAGS` (e.g. `-ccbin`), added before the request's.
    env_flags: Vec<String>,
    version: OnceLock<String>,
    /// Timeout and cancellation of every process run (default:
    /// [`DEFAULT_TIMEOUT`](super::DEFAULT_TIMEOUT)).
    bounds: Bounds,
}

impl Nvcc {
    /// nvcc from `$WAVEFUSE_NVCC`, else `nvcc` on `PATH`, else `/usr/local/cuda/bin/nvcc`; extra
    /// flags from `$WAVEFUSE_NVCC_FLAGS` (whitespace-separated).
    pub fn from_env() -> Self {
        let tool = process::locate("WAVEFUSE_NVCC", "nvcc", &["/usr/local/cuda/bin/nvcc"]);
        let env_flags = std::env::var("WAVEFUSE_NVCC_FLAGS")
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        Nvcc {
            tool,
            env_flags,
            version: OnceLock::new(),
            bounds: Bounds::default(),
        }
    }

    /// nvcc at an explicit path.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Nvcc {
            tool: Ok(path.into()),
            env_flags: Vec::new(),
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
        Nvcc { bounds, ..self }
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

impl Compiler for Nvcc {
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
        let v = process::version(ID, tool, &[], &self.bounds)?;
        Ok(self.version.get_or_init(|| v).clone())
    }

    fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError> {
        let target = nvidia_target(ID, req.arch)?;
        let mut flags: Vec<String> = [&format!("-arch={target}"), "-cubin", "-O3", "-Xptxas", "-v"]
            .map(str::to_owned)
            .to_vec();
        flags.extend(self.env_flags.iter().cloned());
        flags.extend(req.extra_flags.iter().cloned());
        Ok(flags)
    }

    fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
        let flags = self.flags(req)?;
        let version = self.version()?;
        let dir = process::scratch_dir(ID)?;
        let stem = file_stem(&req.name);
        let src = dir.path().join(format!("{stem}.cu"));
        let out_path = dir.path().join(format!("{stem}.cubin"));
        process::write_source(ID, &src, &req.source)?;
        let mut cmd = Command::new(self.tool()?);
        cmd.args(&flags).arg("-o").arg(&out_path).arg(&src);
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
        let usage = parse_ptxas(&out.log).map_err(|source| CompileError::Report {
            compiler: ID,
            source,
        })?;
        Ok(Artifact {
            compiler: ID,
            compiler_version: version,
            arch: req.arch,
            format: ArtifactFormat::Cubin,
            flags,
            usage: usage
                .into_iter()
                .map(|(k, u)| (k, ResourceUsage::Nvidia(u)))
                .collect(),
            log: out.log,
            image: process::read_output(ID, &out_path)?,
        })
    }
}
