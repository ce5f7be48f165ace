//! The compile cache: compiled artifacts on disk, keyed by a content hash.
//!
//! The key is the SHA-256 of the source, the compiler's id and version, the complete flag list and
//! the target arch (each length-prefixed, so no two different inputs hash the same bytes). An
//! unchanged kernel is therefore never recompiled, and any change to what could alter the output —
//! including upgrading the compiler — misses.
//!
//! Each entry is one file `<key>.wfa`: a magic line, the SHA-256 of everything after it, then the
//! metadata as JSON (the entry's own key, the compiler's resource report, the image's SHA-256)
//! and the image. Everything read back is verified: a read recomputes the checksum over the whole
//! entry — metadata and resource report included, so an edited register or spill count is caught
//! like a flipped bit in the image — and compares the stored key with the one asked for, so an
//! entry renamed or copied under another key is never served for it. Either is a miss, the
//! artifact is compiled again and the entry overwritten, and a warning
//! ([`CacheWarning::Corrupt`], [`CacheWarning::Stale`]) is collected on the cache
//! ([`Cache::take_warnings`]) rather than printed. Entries are written to a unique temporary file
//! in the same directory and renamed into place, so concurrent writers (several test processes,
//! several engineers) never expose a partial entry: a reader sees either no entry or a complete
//! one. An entry of a previous format reads as a plain miss (no warning) and is overwritten.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::compile::{Artifact, CompileRequest, Compiler};
use crate::error::Error;

/// The entry format: 2 stored the entry's key, 3 a checksum over the whole entry.
const MAGIC: &[u8] = b"WAVEFUSE-ARTIFACT-3\n";
/// The magic lines of earlier formats: plain misses, not corrupt entries.
const OLD_MAGICS: [&[u8]; 2] = [b"WAVEFUSE-ARTIFACT-1\n", b"WAVEFUSE-ARTIFACT-2\n"];
/// The domain the key's hash starts with (unchanged by the entry format, so keys stay stable).
const KEY_DOMAIN: &[u8] = b"WAVEFUSE-ARTIFACT-1\n";
const EXT: &str = "wfa";
const TEMP_PREFIX: &str = ".tmp-";

/// A failure reading or writing the cache directory.
#[derive(Debug, thiserror::Error)]
#[error("compile cache at {}: {what}: {source}", path.display())]
pub struct CacheError {
    /// The file or directory involved.
    pub path: PathBuf,
    /// What was being done.
    pub what: &'static str,
    /// The I/O error.
    pub source: std::io::Error,
}

/// Something the cache noticed that did not stop the compile: for the caller to show.
#[derive(Debug, thiserror::Error)]
pub enum CacheWarning {
    /// The entry file for one key holds another key's entry (renamed or copied by hand): not
    /// served; the artifact is compiled again and the entry overwritten.
    #[error(
        "compile cache entry {} holds the entry of key {stored}, not {wanted}: ignored (recompiled)",
        path.display()
    )]
    Stale {
        /// The entry file.
        path: PathBuf,
        /// The key asked for.
        wanted: String,
        /// The key stored in the entry.
        stored: String,
    },
    /// The entry file for a key fails its checksum or cannot be decoded (a flipped bit, an edited
    /// resource report, a truncated file): not served; compiled again and overwritten.
    #[error(
        "compile cache entry {} is corrupt ({why}): ignored (recompiled and rewritten)",
        path.display()
    )]
    Corrupt {
        /// The entry file.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// A compiled artifact could not be stored; the compile itself succeeded.
    #[error("{0} (the artifact is used, not cached)")]
    NotWritten(CacheError),
}

/// What the cache holds under a key.
#[derive(Debug)]
pub enum Lookup {
    /// An intact entry written under this key.
    Hit(Artifact),
    /// No entry, or one of a previous format.
    Miss,
    /// An entry that fails its checksum or cannot be decoded.
    Corrupt {
        /// What failed.
        why: String,
    },
    /// An intact entry written under another key.
    Stale {
        /// The key the entry was written under.
        stored: String,
    },
}

/// The compile cache in one directory. Clones share the warnings collected so far.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
    warnings: Arc<Mutex<Vec<CacheWarning>>>,
}

/// The metadata stored in front of the image.
#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    artifact: Artifact,
    image_sha256: String,
}

impl Cache {
    /// The cache at `$WAVEFUSE_CACHE_DIR`, else `$HOME/.cache/wavefuse` (falling back to the
    /// system temporary directory when `HOME` is unset).
    pub fn from_env() -> Cache {
        let dir = match std::env::var_os("WAVEFUSE_CACHE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(home) => PathBuf::from(home).join(".cache").join("wavefuse"),
                None => std::env::temp_dir().join("wavefuse-cache"),
            },
        };
        Cache::at(dir)
    }

    /// The cache in `dir` (created on first write).
    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache {
            dir: dir.into(),
            warnings: Arc::default(),
        }
    }

    /// The warnings collected since the last call (stale entries, entries that could not be
    /// written), oldest first.
    pub fn take_warnings(&self) -> Vec<CacheWarning> {
        std::mem::take(&mut *self.lock())
    }

    /// Record a warning for the caller.
    pub fn warn(&self, w: CacheWarning) {
        self.lock().push(w);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<CacheWarning>> {
        // A panic while holding the lock cannot leave the list inconsistent.
        self.warnings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of compiling `req` with `compiler`: a hex SHA-256.
    pub fn key(compiler: &dyn Compiler, req: &CompileRequest) -> Result<String, Error> {
        let version = compiler.version()?;
        let flags = compiler.flags(req)?;
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(KEY_DOMAIN);
        field(compiler.id().name().as_bytes());
        field(version.as_bytes());
        field(req.arch.name().as_bytes());
        field(&(flags.len() as u64).to_le_bytes());
        for f in &flags {
            field(f.as_bytes());
        }
        field(req.source.as_bytes());
        Ok(hex(&h.finalize()))
    }

    /// The artifact compiled from `req` by `compiler`: from the cache when present, else compiled
    /// now and stored (a failure to store is a warning, see [`Cache::take_warnings`]).
    pub fn compile(
        &self,
        compiler: &dyn Compiler,
        req: &CompileRequest,
    ) -> Result<Artifact, Error> {
        let key = Cache::key(compiler, req)?;
        if let Some(hit) = self.get(&key) {
            return Ok(hit);
        }
        let artifact = compiler.compile(req)?;
        self.put_or_warn(&key, &artifact);
        Ok(artifact)
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.{EXT}"))
    }

    /// What the cache holds under `key`.
    pub fn lookup(&self, key: &str) -> Lookup {
        let Ok(bytes) = std::fs::read(self.path(key)) else {
            return Lookup::Miss;
        };
        match decode(&bytes) {
            Ok((stored, artifact)) if stored == key => Lookup::Hit(artifact),
            Ok((stored, _)) => Lookup::Stale { stored },
            Err(Undecodable::OldFormat) => Lookup::Miss,
            Err(Undecodable::Corrupt(why)) => Lookup::Corrupt { why },
        }
    }

    /// The entry under `key`, if present, intact and written under that key; an entry of
    /// another key is a miss and a [`CacheWarning::Stale`], a corrupt one a miss and a
    /// [`CacheWarning::Corrupt`].
    pub fn get(&self, key: &str) -> Option<Artifact> {
        match self.lookup(key) {
            Lookup::Hit(a) => Some(a),
            Lookup::Miss => None,
            Lookup::Corrupt { why } => {
                self.warn(CacheWarning::Corrupt {
                    path: self.path(key),
                    why,
                });
                None
            }
            Lookup::Stale { stored } => {
                self.warn(CacheWarning::Stale {
                    path: self.path(key),
                    wanted: key.to_owned(),
                    stored,
                });
                None
            }
        }
    }

    /// Stores `artifact` under `key`, atomically.
    pub fn put(&self, key: &str, artifact: &Artifact) -> Result<(), CacheError> {
        let err = |path: &Path, what, source| CacheError {
            path: path.to_owned(),
            what,
            source,
        };
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| err(&self.dir, "creating the directory", e))?;
        let temp = self.dir.join(temp_name());
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&temp)?;
            f.write_all(&encode(key, artifact))?;
            f.sync_all()
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&temp);
            return Err(err(&temp, "writing an entry", e));
        }
        let dest = self.path(key);
        std::fs::rename(&temp, &dest).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            err(&dest, "renaming an entry into place", e)
        })
    }

    /// [`Cache::put`], with a failure recorded as a [`CacheWarning::NotWritten`]: a cache that
    /// cannot be written costs a recompile next time, never this compile.
    pub fn put_or_warn(&self, key: &str, artifact: &Artifact) {
        if let Err(e) = self.put(key, artifact) {
            self.warn(CacheWarning::NotWritten(e));
        }
    }

    /// Removes every entry (and any temporary file a crashed writer left); returns how many
    /// entries were removed. Files that are not the cache's own are left alone.
    pub fn clear(&self) -> Result<usize, CacheError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => {
                return Err(CacheError {
                    path: self.dir.clone(),
                    what: "listing",
                    source: e,
                });
            }
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.ends_with(&format!(".{EXT}"));
            if !ours && !name.starts_with(TEMP_PREFIX) {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed += usize::from(ours),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {} // another clear() won
                Err(e) => {
                    return Err(CacheError {
                        path,
                        what: "removing an entry",
                        source: e,
                    });
                }
            }
        }
        Ok(removed)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .ends_with(&format!(".{EXT}"))
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    /// Whether the cache has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A temporary file name unique across processes and threads.
fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{TEMP_PREFIX}{}-{nanos}-{n}", std::process::id())
}

fn encode(key: &str, artifact: &Artifact) -> Vec<u8> {
    let entry = Entry {
        key: key.to_owned(),
        artifact: artifact.clone(),
        image_sha256: hex(&Sha256::digest(&artifact.image)),
    };
    let meta = serde_json::to_vec(&entry).expect("artifact metadata serialises");
    let mut body = Vec::with_capacity(8 + meta.len() + artifact.image.len());
    body.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    body.extend_from_slice(&meta);
    body.extend_from_slice(&artifact.image);
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&Sha256::digest(&body));
    out.extend_from_slice(&body);
    out
}

/// Why an entry file is not served.
enum Undecodable {
    /// An entry of a previous format.
    OldFormat,
    /// Anything else: what failed.
    Corrupt(String),
}

/// The key and artifact of an entry whose checksum over everything after the magic line holds.
fn decode(bytes: &[u8]) -> Result<(String, Artifact), Undecodable> {
    let corrupt = |why: &str| Undecodable::Corrupt(why.to_owned());
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return Err(if OLD_MAGICS.iter().any(|m| bytes.starts_with(m)) {
            Undecodable::OldFormat
        } else {
            corrupt("not a wavefuse cache entry: bad magic line")
        });
    };
    let (sum, body) = rest
        .split_first_chunk::<32>()
        .ok_or_else(|| corrupt("truncated before its checksum"))?;
    if Sha256::digest(body).as_slice() != sum.as_slice() {
        return Err(corrupt("checksum mismatch"));
    }
    // Past the checksum the entry is what `encode` wrote; these checks guard only against an
    // entry forged with a matching checksum.
    let (len, rest) = body
        .split_first_chunk::<8>()
        .ok_or_else(|| corrupt("truncated metadata length"))?;
    let len = usize::try_from(u64::from_le_bytes(*len))
        .ok()
        .filter(|&l| l <= rest.len())
        .ok_or_else(|| corrupt("metadata length past the end"))?;
    let (meta, image) = rest.split_at(len);
    let entry: Entry =
        serde_json::from_slice(meta).map_err(|e| Undecodable::Corrupt(format!("metadata: {e}")))?;
    if hex(&Sha256::digest(image)) != entry.image_sha256 {
        return Err(corrupt("image hash mismatch"));
    }
    let artifact = Artifact {
        image: image.to_vec(),
        ..entry.artifact
    };
    Ok((entry.key, artifact))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use wavefuse_codegen::Arch;

    use super::*;
    use crate::compile::{ArtifactFormat, CompileError, CompilerId};

    /// A compiler that counts its invocations and echoes the source as the image.
    struct Counting {
        calls: AtomicUsize,
        version: Mutex<String>,
    }

    impl Counting {
        fn new() -> Self {
            Counting {
                calls: AtomicUsize::new(0),
                version: Mutex::new("fake 1.0".into()),
            }
        }
        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    impl Compiler for Counting {
        fn id(&self) -> CompilerId {
            CompilerId::Nvrtc
        }
        fn version(&self) -> Result<String, CompileError> {
            Ok(self.version.lock().unwrap().clone())
        }
        fn flags(&self, req: &CompileRequest) -> Result<Vec<String>, CompileError> {
            Ok(req.extra_flags.clone())
        }
        fn compile(&self, req: &CompileRequest) -> Result<Artifact, CompileError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Artifact {
                compiler: self.id(),
                compiler_version: self.version()?,
                arch: req.arch,
                format: ArtifactFormat::Ptx,
                flags: self.flags(req)?,
                usage: BTreeMap::new(),
                log: "ok".into(),
                image: req.source.as_bytes().to_vec(),
            })
        }
    }

    fn nvidia_usage(registers: u32) -> crate::compile::ResourceUsage {
        crate::compile::ResourceUsage::Nvidia(crate::compile::NvidiaUsage {
            registers,
            ..Default::default()
        })
    }

    fn req(source: &str) -> CompileRequest {
        CompileRequest::new("k", source, Arch::Sm90)
    }

    #[test]
    fn unchanged_kernel_is_never_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        let a = cache.compile(&cc, &req("kernel A")).unwrap();
        let b = cache.compile(&cc, &req("kernel A")).unwrap();
        assert_eq!(cc.calls(), 1);
        assert_eq!(a, b);
        // A second cache object on the same directory (another process) also hits.
        let again = Cache::at(dir.path())
            .compile(&cc, &req("kernel A"))
            .unwrap();
        assert_eq!(
            (cc.calls(), again.image.as_slice()),
            (1, b"kernel A".as_slice())
        );
    }

    #[test]
    fn source_flags_arch_and_version_each_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        cache.compile(&cc, &req("k")).unwrap();
        cache.compile(&cc, &req("k2")).unwrap();
        let mut flagged = req("k");
        flagged.extra_flags.push("-DX=1".into());
        cache.compile(&cc, &flagged).unwrap();
        cache
            .compile(&cc, &CompileRequest::new("k", "k", Arch::Gfx906))
            .unwrap();
        *cc.version.lock().unwrap() = "fake 1.1".into();
        cache.compile(&cc, &req("k")).unwrap();
        assert_eq!(cc.calls(), 5);
        assert_eq!(cache.len(), 5);
    }

    #[test]
    fn flag_boundaries_are_part_of_the_key() {
        let cc = Counting::new();
        let mut a = req("k");
        a.extra_flags = vec!["-DA".into(), "-DB".into()];
        let mut b = req("k");
        b.extra_flags = vec!["-DA-DB".into()];
        assert_ne!(Cache::key(&cc, &a).unwrap(), Cache::key(&cc, &b).unwrap());
    }

    #[test]
    fn clear_removes_entries_and_forces_recompile() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        cache.compile(&cc, &req("a")).unwrap();
        cache.compile(&cc, &req("b")).unwrap();
        std::fs::write(dir.path().join("unrelated.txt"), "keep").unwrap();
        assert_eq!(cache.clear().unwrap(), 2);
        assert!(cache.is_empty());
        assert!(dir.path().join("unrelated.txt").exists());
        cache.compile(&cc, &req("a")).unwrap();
        assert_eq!(cc.calls(), 3);
        assert_eq!(
            Cache::at(dir.path().join("never-created")).clear().unwrap(),
            0
        );
    }

    /// An edited resource report (a register count changed in the JSON metadata, the image
    /// untouched) is caught by the whole-entry checksum: a miss, a warning, recompiled and
    /// rewritten. Format 2 checked only the image's hash and served it.
    #[test]
    fn edited_resource_report_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        let mut with_usage = cc.compile(&req("a")).unwrap();
        with_usage.usage.insert("k".into(), nvidia_usage(40));
        let key = Cache::key(&cc, &req("a")).unwrap();
        cache.put(&key, &with_usage).unwrap();
        let path = cache.path(&key);
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert!(text.contains("\"registers\":40"), "{text}");
        // Same length, valid JSON, the image and its hash untouched.
        let edited = text.replace("\"registers\":40", "\"registers\":24");
        std::fs::write(&path, edited.as_bytes()).unwrap();
        assert!(matches!(cache.lookup(&key), Lookup::Corrupt { .. }));
        let got = cache.compile(&cc, &req("a")).unwrap();
        assert_eq!(cc.calls(), 2, "recompiled, not served");
        assert!(got.usage.is_empty(), "{got:?}");
        let warnings = cache.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].to_string().contains("checksum mismatch"),
            "{}",
            warnings[0]
        );
        assert!(matches!(cache.lookup(&key), Lookup::Hit(_)), "rewritten");
    }

    /// Every single-bit flip anywhere in an entry (magic line, checksum, metadata, image) is a
    /// miss or a corrupt entry, never a hit (format 2 served 26 of 64 randomly flipped entries).
    #[test]
    fn no_bit_flip_is_served() {
        let cc = Counting::new();
        let mut artifact = cc.compile(&req("kernel source")).unwrap();
        artifact.usage.insert("k".into(), nvidia_usage(32));
        let key = Cache::key(&cc, &req("kernel source")).unwrap();
        let bytes = encode(&key, &artifact);
        assert!(decode(&bytes).is_ok());
        for byte in 0..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[byte] ^= 1 << bit;
                assert!(decode(&flipped).is_err(), "bit {bit} of byte {byte} served");
            }
        }
    }

    #[test]
    fn corrupt_entry_is_a_miss_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        cache.compile(&cc, &req("a")).unwrap();
        let key = Cache::key(&cc, &req("a")).unwrap();
        let path = cache.path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        assert!(cache.get(&key).is_none());
        let a = cache.compile(&cc, &req("a")).unwrap();
        assert_eq!((cc.calls(), a.image.as_slice()), (2, b"a".as_slice()));
        assert!(cache.get(&key).is_some());
    }

    #[test]
    fn renamed_entry_is_a_miss_and_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        cache.compile(&cc, &req("kernel A")).unwrap();
        let (a, b) = (
            Cache::key(&cc, &req("kernel A")).unwrap(),
            Cache::key(&cc, &req("kernel B")).unwrap(),
        );
        // A's entry under B's name: intact, its image hash right, but not B's.
        std::fs::rename(cache.path(&a), cache.path(&b)).unwrap();
        assert!(matches!(cache.lookup(&b), Lookup::Stale { stored } if stored == a));
        assert!(cache.take_warnings().is_empty(), "lookup only reports");
        let got = cache.compile(&cc, &req("kernel B")).unwrap();
        assert_eq!(
            (cc.calls(), got.image.as_slice()),
            (2, b"kernel B".as_slice()),
            "B was compiled, not served A's image"
        );
        let warnings = cache.take_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            matches!(&warnings[0], CacheWarning::Stale { wanted, stored, .. } if *wanted == b && *stored == a)
        );
        assert!(warnings[0].to_string().contains(&a), "{}", warnings[0]);
        // The entry was overwritten with B's own.
        assert!(matches!(cache.lookup(&b), Lookup::Hit(h) if h.image == b"kernel B"));
        assert!(cache.take_warnings().is_empty());
    }

    #[test]
    fn entry_of_the_previous_format_is_a_plain_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path());
        let cc = Counting::new();
        let key = Cache::key(&cc, &req("a")).unwrap();
        let artifact = cc.compile(&req("a")).unwrap();
        for magic in OLD_MAGICS {
            let mut old = encode(&key, &artifact);
            old.splice(..MAGIC.len(), magic.iter().copied());
            std::fs::write(cache.path(&key), old).unwrap();
            assert!(matches!(cache.lookup(&key), Lookup::Miss));
            assert!(cache.get(&key).is_none());
        }
        assert!(
            cache.take_warnings().is_empty(),
            "an old format is no warning"
        );
    }

    #[test]
    fn concurrent_writers_leave_one_intact_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cc = Counting::new();
        let key = Cache::key(&cc, &req("shared")).unwrap();
        let artifact = cc.compile(&req("shared")).unwrap();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let cache = Cache::at(dir.path());
                    for _ in 0..25 {
                        cache.put(&key, &artifact).unwrap();
                        assert_eq!(cache.get(&key).as_ref(), Some(&artifact));
                    }
                });
            }
        });
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "temporary files left behind: {names:?}");
    }

    #[test]
    fn default_dir_honours_env() {
        // Read-only check of the rule; the variable is not modified (tests run in parallel).
        let cache = Cache::from_env();
        match std::env::var_os("WAVEFUSE_CACHE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => assert_eq!(cache.dir(), Path::new(&dir)),
            None => assert!(
                cache.dir().ends_with(".cache/wavefuse") || cache.dir().ends_with("wavefuse-cache")
            ),
        }
    }
}
