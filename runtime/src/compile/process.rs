//! Finding and running compiler processes (hipcc, nvcc).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::child::{self, Bounds};

use super::{CompileError, CompilerId};

/// Locates a tool: the environment variable `env` when set (an explicit choice: it must exist),
/// else `name` on `PATH`, else the first existing `fallbacks` entry. The error says where it
/// looked.
pub(crate) fn locate(env: &str, name: &str, fallbacks: &[&str]) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "${env} is {}, which does not exist (PATH was not searched: the variable is an \
                 explicit choice)",
                path.display()
            ))
        };
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name));
    on_path
        .chain(fallbacks.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("${env} is not set and no `{name}` on PATH or in {fallbacks:?}"))
}

/// The result of running a tool.
pub(crate) struct Output {
    pub success: bool,
    /// stdout then stderr, as the user would have seen them.
    pub log: String,
    pub stderr: String,
    /// How it ended and what it printed (`exit status 1 and printed nothing`).
    pub described: String,
}

/// Runs `cmd` to completion within `bounds`, capturing its output; past the timeout or on
/// cancellation its process group is killed ([`CompileError::Stopped`]).
pub(crate) fn run(
    compiler: CompilerId,
    cmd: &mut Command,
    bounds: &Bounds,
) -> Result<Output, CompileError> {
    let out =
        child::run(cmd, bounds).map_err(|source| CompileError::Stopped { compiler, source })?;
    Ok(Output {
        success: out.status.success(),
        log: out.log(),
        described: out.describe(),
        stderr: out.stderr,
    })
}

/// A tool's `--version` output, trimmed (the cache key includes all of it).
pub(crate) fn version(
    compiler: CompilerId,
    tool: &Path,
    extra_env: &[(&str, &str)],
    bounds: &Bounds,
) -> Result<String, CompileError> {
    let mut cmd = Command::new(tool);
    cmd.arg("--version");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = run(compiler, &mut cmd, bounds)?;
    if !out.success {
        return Err(CompileError::Tool {
            compiler,
            detail: format!("`{} --version` failed: {}", tool.display(), out.described),
        });
    }
    Ok(out.log.trim().to_owned())
}

/// A scratch directory for one compilation, removed when dropped.
pub(crate) fn scratch_dir(compiler: CompilerId) -> Result<tempfile::TempDir, CompileError> {
    tempfile::Builder::new()
        .prefix("wavefuse-")
        .tempdir()
        .map_err(|e| CompileError::Tool {
            compiler,
            detail: format!("could not create a temporary directory: {e}"),
        })
}

/// A file name stem safe for any file system, from a kernel name.
pub(crate) fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "kernel".to_owned()
    } else {
        stem
    }
}

/// Reads a file a tool wrote.
pub(crate) fn read_output(compiler: CompilerId, path: &Path) -> Result<Vec<u8>, CompileError> {
    std::fs::read(path).map_err(|e| CompileError::Tool {
        compiler,
        detail: format!("no output at {}: {e}", path.display()),
    })
}

/// Writes the source a tool will read.
pub(crate) fn write_source(
    compiler: CompilerId,
    path: &Path,
    source: &str,
) -> Result<(), CompileError> {
    std::fs::write(path, source).map_err(|e| CompileError::Tool {
        compiler,
        detail: format!("could not write {}: {e}", path.display()),
    })
}
