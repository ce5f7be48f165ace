//! Compiled artifacts for a generated source: from the compile cache, compiled now, or — where no
//! compiler is installed — prebuilt on another machine.
//!
//! Every artifact compiled here is also stored under a second, compiler-version-free key
//! ([`prebuilt_key`]: the source, the arch and the compiler's id). A cache directory filled on a
//! build machine can therefore be carried to a GPU machine that has the driver but no NVRTC: the
//! ordinary key (which needs the compiler's version) cannot be computed there, and the prebuilt
//! entry is used instead, saying so. Where the compiler is installed the ordinary key is always
//! used, so a different compiler version recompiles as the cache's rules require.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::cache::Cache;
use crate::compile::{Artifact, CompileError, CompileRequest, Compiler};
use crate::error::{Error, Result};

/// Where an artifact came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactSource {
    /// The cache held it under its ordinary key.
    Cached,
    /// Compiled now (and stored).
    Compiled,
    /// The compiler is not installed; a prebuilt entry was used.
    Prebuilt {
        /// The compiler version that built it.
        compiler_version: String,
    },
}

/// The version-free key of `req` for `compiler`'s kind: source, arch and compiler id.
pub fn prebuilt_key(compiler: &dyn Compiler, req: &CompileRequest) -> String {
    let mut h = Sha256::new();
    for field in [
        b"wavefuse-prebuilt-1".as_slice(),
        compiler.id().name().as_bytes(),
        req.arch.name().as_bytes(),
        req.source.as_bytes(),
    ] {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The artifact for `req`: cached, compiled now, or prebuilt when `compiler` is missing. A cache
/// that cannot be written, or an entry stored under another key, does not fail the compile: it
/// is a warning on `cache` ([`Cache::take_warnings`]).
pub fn artifact_for(
    cache: &Cache,
    compiler: &dyn Compiler,
    req: &CompileRequest,
) -> Result<(Artifact, ArtifactSource)> {
    let prebuilt = prebuilt_key(compiler, req);
    let key = match Cache::key(compiler, req) {
        Ok(key) => key,
        Err(Error::Compile(missing @ CompileError::Missing { .. })) => {
            return match cache.get(&prebuilt) {
                Some(a) => {
                    let compiler_version = a.compiler_version.clone();
                    Ok((a, ArtifactSource::Prebuilt { compiler_version }))
                }
                None => Err(Error::Compile(missing)),
            };
        }
        Err(e) => return Err(e),
    };
    let (artifact, source) = match cache.get(&key) {
        Some(a) => (a, ArtifactSource::Cached),
        None => {
            let a = compiler.compile(req)?;
            cache.put_or_warn(&key, &a);
            (a, ArtifactSource::Compiled)
        }
    };
    // The prebuilt copy only if the first store worked (one warning per artifact, not two).
    if cache.get(&prebuilt).is_none() && cache.dir().is_dir() {
        cache.put_or_warn(&prebuilt, &artifact);
    }
    Ok((artifact, source))
}

/// Where NVRTC may be found when it is not on the loader's search path, most likely first:
/// `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`, then versioned toolkits, newest first. Only
/// existing files are returned. A caller that finds one loads it
/// ([`crate::compile::load_nvrtc`]) before the first NVRTC call.
pub fn nvrtc_candidates() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var_os(v).filter(|s| !s.is_empty()))
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    let mut versioned: Vec<PathBuf> = std::fs::read_dir("/usr/local")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("cuda-"))
                })
                .collect()
        })
        .unwrap_or_default();
    versioned.sort();
    versioned.reverse();
    roots.extend(versioned);
    let mut out = Vec::new();
    for root in roots {
        for dir in ["lib64", "lib", "targets/x86_64-linux/lib"] {
            out.extend(nvrtc_in(&root.join(dir)));
        }
    }
    out.dedup();
    out
}

/// The NVRTC library to load (or to name in `$WAVEFUSE_NVRTC_LIB`): `None` when that is set or NVRTC
/// loads by name (the names cudarc tries), else the first of [`nvrtc_candidates`].
pub fn nvrtc_fallback() -> Option<PathBuf> {
    if std::env::var_os("WAVEFUSE_NVRTC_LIB").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    for name in ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] {
        // SAFETY: loading NVRTC runs its initialisers, which have no preconditions; the handle is
        // dropped at once (the library stays loadable by the same name for cudarc).
        if unsafe { libloading::Library::new(name) }.is_ok() {
            return None;
        }
    }
    nvrtc_candidates().into_iter().next()
}

/// `libnvrtc.so.*` (not the builtins, not the `alt` variant) in `dir`, highest version first.
fn nvrtc_in(dir: &Path) -> Vec<PathBuf> {
    let mut libs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libnvrtc.so"))
                })
                .collect()
        })
        .unwrap_or_default();
    // `libnvrtc.so.13.0.88` before `libnvrtc.so.13` before `libnvrtc.so`: longest name first
    // within a directory picks the real file over a symlink, which loads the same object.
    libs.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    libs
}

#[cfg(test)]
mod tests {
    use wavefuse_codegen::Arch;

    use super::*;
    use crate::compile::{ArtifactFormat, CompilerId};

    /// A compiler that is "installed" or not, and counts its compiles.
    struct Fake {
        installed: bool,
        compiles: std::sync::atomic::AtomicUsize,
    }

    impl Compiler for Fake {
        fn id(&self) -> CompilerId {
            CompilerId::Nvrtc
        }
        fn version(&self) -> Result<String, CompileError> {
            if self.installed {
                Ok("fake 1.0".into())
            } else {
                Err(CompileError::Missing {
                    compiler: CompilerId::Nvrtc,
                    detail: "not here".into(),
                })
            }
        }
        fn flags(&self, _: &CompileRequest) -> Result<Vec<String>, CompileError> {
            Ok(vec!["-arch=sm_90".into()])
        }
        fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
            self.compiles
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Artifact {
                compiler: CompilerId::Nvrtc,
                compiler_version: "fake 1.0".into(),
                arch: req.arch,
                format: ArtifactFormat::Cubin,
                flags: vec![],
                usage: Default::default(),
                log: String::new(),
                image: req.source.as_bytes().to_vec(),
            })
        }
    }

    fn fake(installed: bool) -> Fake {
        Fake {
            installed,
            compiles: Default::default(),
        }
    }

    #[test]
    fn compiled_once_then_cached_then_prebuilt_without_the_compiler() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let req = CompileRequest::new("k", "extern \"C\" __global__ void k() {}", Arch::Sm90);
        let here = fake(true);
        let (a, s) = artifact_for(&cache, &here, &req).unwrap();
        assert_eq!(s, ArtifactSource::Compiled);
        let (b, s) = artifact_for(&cache, &here, &req).unwrap();
        assert_eq!((s, &b.image), (ArtifactSource::Cached, &a.image));
        assert_eq!(here.compiles.load(std::sync::atomic::Ordering::SeqCst), 1);

        let there = fake(false);
        let (c, s) = artifact_for(&cache, &there, &req).unwrap();
        assert_eq!(
            s,
            ArtifactSource::Prebuilt {
                compiler_version: "fake 1.0".into()
            }
        );
        assert_eq!(c.image, a.image);
        // Another source has no prebuilt entry: the compiler's own "missing" error.
        let other = CompileRequest::new("k", "// changed", Arch::Sm90);
        let err = artifact_for(&cache, &there, &other).unwrap_err();
        assert!(
            matches!(err, Error::Compile(CompileError::Missing { .. })),
            "{err}"
        );
    }

    #[test]
    fn unwritable_cache_is_a_warning_and_the_compile_proceeds() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the cache directory should be: every store fails.
        let blocked = dir.path().join("cache");
        std::fs::write(&blocked, "not a directory").unwrap();
        let cache = Cache::at(&blocked);
        let req = CompileRequest::new("k", "extern \"C\" __global__ void k() {}", Arch::Sm90);
        let here = fake(true);
        let (a, s) = artifact_for(&cache, &here, &req).unwrap();
        assert_eq!(
            (s, a.image.as_slice()),
            (ArtifactSource::Compiled, req.source.as_bytes())
        );
        let warnings = cache.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(matches!(
            warnings[0],
            crate::cache::CacheWarning::NotWritten(_)
        ));
        assert!(
            warnings[0].to_string().contains("not cached"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn nvrtc_candidates_are_existing_files() {
        for p in nvrtc_candidates() {
            assert!(p.is_file() || p.is_symlink(), "{}", p.display());
        }
    }
}
