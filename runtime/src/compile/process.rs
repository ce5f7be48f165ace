//! Finding and running compiler processes (hipcc, nvcc).

use std::path::{Path, PathBuf};
use std::process::Command;

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
                "${env} is {} but that file does not exist",
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
}

/// Runs `cmd` to completion, capturing its output.
pub(crate) fn run(compiler: CompilerId, cmd: &mut Command) -> Result<Output, CompileError> {
    let out = cmd.output().map_err(|e| CompileError::Tool {
        compiler,
        detail: format!("could not run {:?}: {e}", cmd.get_program()),
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let log = if stdout.is_empty() {
        stderr.clone()
    } else {
        format!("{stdout}{stderr}")
    };
    Ok(Output {
        success: out.status.success(),
        log,
        stderr,
    })
}

/// A tool's `--version` output, trimmed (the cache key includes all of it).
pub(crate) fn version(
    compiler: CompilerId,
    tool: &Path,
    extra_env: &[(&str, &str)],
) -> Result<String, CompileError> {
    let mut cmd = Command::new(tool);
    cmd.arg("--version");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = run(compiler, &mut cmd)?;
    if !out.success {
        return Err(CompileError::Tool {
            compiler,
            detail: format!("`{} --version` failed:\n{}", tool.display(), out.log),
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
