//! NVRTC, CUDA's runtime compiler, through cudarc (loaded at run time, never linked).

use std::ffi::{CString, c_char};
use std::path::Path;
use std::sync::OnceLock;

use cudarc::nvrtc::{result, sys};

use super::process::file_stem;
use super::usage::parse_ptxas;
use super::{
    Artifact, ArtifactFormat, CompileError, CompileRequest, Compiler, CompilerId, ResourceUsage,
    nvidia_target,
};

const ID: CompilerId = CompilerId::Nvrtc;

/// NVRTC compiling a CUDA translation unit straight to an sm_90 CUBIN (PTX when the library cannot
/// give a CUBIN), with ptxas's report in the program log.
#[derive(Debug)]
pub struct Nvrtc {
    include_dirs: Vec<String>,
    version: OnceLock<String>,
}

impl Nvrtc {
    /// NVRTC with include directories from `$WAVEFUSE_CUDA_INCLUDE` (colon-separated). The library
    /// is `$WAVEFUSE_NVRTC_LIB` when set, else `libnvrtc.so.13` (or another name cudarc knows) on
    /// the loader's search path.
    pub fn from_env() -> Self {
        let include_dirs = std::env::var("WAVEFUSE_CUDA_INCLUDE")
            .map(|s| {
                s.split(':')
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Nvrtc {
            include_dirs,
            version: OnceLock::new(),
        }
    }

    /// NVRTC with explicit include directories.
    pub fn with_includes(include_dirs: Vec<String>) -> Self {
        Nvrtc {
            include_dirs,
            version: OnceLock::new(),
        }
    }
}

/// Makes NVRTC loadable, or says why not. cudarc finds the library by name (`libnvrtc.so.13`, …)
/// and panics when it cannot, so this runs before any cudarc NVRTC call. When
/// `$WAVEFUSE_NVRTC_LIB` names the library (the PyPI wheel keeps it off the loader's path), it is
/// loaded by full path first, with the `libnvrtc-builtins` beside it: the dynamic loader then
/// resolves cudarc's by-name load to the already-loaded object through its SONAME.
pub fn ensure_loaded() -> Result<(), CompileError> {
    load(None)
}

/// Loads NVRTC from `lib` (a CUDA toolkit's, off the loader's search path) for the rest of the
/// process, as `$WAVEFUSE_NVRTC_LIB` would, the path given as a value: a command calls it before
/// its first NVRTC use (the first load, by either way, is the one that holds). Its error is also
/// what every later NVRTC use reports.
pub fn load_nvrtc(lib: &Path) -> Result<(), CompileError> {
    load(Some(lib))
}

/// Loads NVRTC once per process: from `lib`, else from `$WAVEFUSE_NVRTC_LIB`, else by name.
fn load(lib: Option<&Path>) -> Result<(), CompileError> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let state = LOADED.get_or_init(|| {
        if let Some(lib) = lib {
            preload(lib, "NVRTC")?;
        } else if let Some(lib) = std::env::var_os("WAVEFUSE_NVRTC_LIB").filter(|v| !v.is_empty()) {
            preload(Path::new(&lib), "$WAVEFUSE_NVRTC_LIB")?;
        }
        // SAFETY: only tries to dlopen NVRTC under its known names; no NVRTC function is called.
        if unsafe { sys::is_culib_present() } {
            Ok(())
        } else {
            Err("libnvrtc.so.13 is not on the loader's search path and $WAVEFUSE_NVRTC_LIB is not set"
                .to_owned())
        }
    });
    state.clone().map_err(|detail| CompileError::Missing {
        compiler: ID,
        detail,
    })
}

/// Loads NVRTC and its builtins library by path and keeps them loaded for the process's life;
/// `what` names where the path came from in an error.
fn preload(lib: &Path, what: &str) -> Result<(), String> {
    let dir = lib.parent().unwrap_or(Path::new("."));
    let builtins = std::fs::read_dir(dir)
        .map_err(|e| format!("{what}={}: {e}", lib.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
        });
    for path in builtins.chain(std::iter::once(lib.to_path_buf())) {
        // SAFETY: loading a shared library runs its initialisers; NVRTC's have no preconditions.
        let handle = unsafe { libloading::Library::new(&path) }
            .map_err(|e| format!("{what}: could not load {}: {e}", path.display()))?;
        // Kept loaded for good: cudarc's own handle resolves to this object by SONAME.
        std::mem::forget(handle);
    }
    Ok(())
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program came from nvrtcCreateProgram and is destroyed exactly once, here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

impl Program {
    fn log(&self) -> String {
        // SAFETY: the program is live (owned by self).
        let raw = unsafe { result::get_program_log(self.0) }.unwrap_or_default();
        c_chars_to_string(&raw)
    }

    /// The CUBIN, or `None` when NVRTC compiled to PTX only (a virtual architecture).
    fn cubin(&self) -> Result<Option<Vec<u8>>, String> {
        let mut size = 0usize;
        // SAFETY: the program is live and compiled; `size` is a valid out-pointer.
        let rc = unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) };
        rc.result()
            .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
        if size == 0 {
            return Ok(None);
        }
        let mut image = vec![0u8; size];
        // SAFETY: `image` has exactly the size NVRTC reported for the CUBIN.
        let rc = unsafe { sys::nvrtcGetCUBIN(self.0, image.as_mut_ptr().cast::<c_char>()) };
        rc.result().map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
        Ok(Some(image))
    }

    fn ptx(&self) -> Result<Vec<u8>, String> {
        // SAFETY: the program is live and compiled.
        let raw = unsafe { result::get_ptx(self.0) }.map_err(|e| format!("nvrtcGetPTX: {e:?}"))?;
        Ok(c_chars_to_string(&raw).into_bytes())
    }
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Nvrtc {
    /// Whether this NVRTC caches compiled programs by itself (12.9 and later), which would hide
    /// ptxas's resource report on a hit unless `--no-cache` is given.
    pub fn caches_programs(&self) -> Result<bool, CompileError> {
        let v = self.version()?;
        let (major, minor) = v
            .trim_start_matches("NVRTC ")
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .ok_or_else(|| CompileError::Tool {
                compiler: ID,
                detail: format!("unreadable NVRTC version `{v}`"),
            })?;
        Ok((major, minor) >= (12, 9))
    }
}

impl Compiler for Nvrtc {
    fn id(&self) -> CompilerId {
        ID
    }

    fn version(&self) -> Result<String, CompileError> {
        if let Some(v) = self.version.get() {
            return Ok(v.clone());
        }
        ensure_loaded()?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: NVRTC is loaded (checked above); both out-pointers are valid.
        let rc = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        rc.result().map_err(|e| CompileError::Tool {
            compiler: ID,
            detail: format!("nvrtcVersion: {e:?}"),
        })?;
        Ok(self
            .version
            .get_or_init(|| format!("NVRTC {major}.{minor}"))
            .clone())
    }

    fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError> {
        let target = nvidia_target(ID, req.arch)?;
        let mut flags = vec![format!("-arch={target}"), "--ptxas-options=-v".to_owned()];
        // NVRTC 12.9 and later keep their own on-disk cache of compiled programs (shared with the
        // driver's compute cache); on a hit ptxas does not run, so the log has no `ptxas info`
        // and the artifact would have no resource report (seen on the H200: `tune` then rejected
        // every candidate). wavefuse caches artifacts itself (`Cache`), so NVRTC's is turned off.
        if self.caches_programs()? {
            flags.push("--no-cache".to_owned());
        }
        flags.extend(self.include_dirs.iter().map(|d| format!("-I{d}")));
        flags.extend(req.extra_flags.iter().cloned());
        Ok(flags)
    }

    fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
        let flags = self.flags(req)?;
        let version = self.version()?;
        let tool_err = |detail: String| CompileError::Tool {
            compiler: ID,
            detail,
        };
        let src = CString::new(req.source.as_str())
            .map_err(|_| tool_err("the source contains a NUL byte".to_owned()))?;
        let name =
            CString::new(format!("{}.cu", file_stem(&req.name))).expect("file_stem has no NUL");
        let prog = Program(
            result::create_program(&src, Some(&name))
                .map_err(|e| tool_err(format!("nvrtcCreateProgram: {e:?}")))?,
        );
        // SAFETY: the program is live; the options are plain strings.
        let compiled = unsafe { result::compile_program(prog.0, &flags) };
        let log = prog.log();
        if let Err(e) = compiled {
            return Err(CompileError::Failed {
                compiler: ID,
                name: req.name.clone(),
                arch: req.arch,
                log: format!("{e:?}\n{log}"),
                source_text: req.source.clone(),
            });
        }
        let usage = parse_ptxas(&log).map_err(|source| CompileError::Report {
            compiler: ID,
            source,
        })?;
        let (format, image) = match prog.cubin().map_err(tool_err)? {
            Some(cubin) => (ArtifactFormat::Cubin, cubin),
            None => (ArtifactFormat::Ptx, prog.ptx().map_err(tool_err)?),
        };
        Ok(Artifact {
            compiler: ID,
            compiler_version: version,
            arch: req.arch,
            format,
            flags,
            usage: usage
                .into_iter()
                .map(|(k, u)| (k, ResourceUsage::Nvidia(u)))
                .collect(),
            log,
            image,
        })
    }
}
