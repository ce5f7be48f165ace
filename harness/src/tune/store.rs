//! The tuned-schedule store: the winner of each search, keyed by (kernel, shape, arch, device).
//!
//! A store is a TOML file of `[[entry]]` tables. Three are read, later ones overriding earlier ones
//! key by key:
//! 1. the committed store `kernels-gen/tuned/tuned.toml`, compiled into the binary (results tuned
//!    on a GPU machine and committed are used by binaries built anywhere, CI included);
//! 2. `tuned.toml` in the wavefuse cache directory (`$WAVEFUSE_CACHE_DIR`, default
//!    `~/.cache/wavefuse`), where `wavefuse tune` writes;
//! 3. a file given with `--store PATH`.
//!
//! # Lookup
//! [`Store::lookup`] takes the kernel, shape and arch, and the device name when it is known:
//! - an entry for exactly that device wins;
//! - else a device-independent entry (device `*`: what the gfx906 static model writes);
//! - else, only when the device is unknown (no GPU on this machine, as for `wavefuse emit` in CI),
//!   the entry tuned on the first device by name, and the caller says which device that was;
//! - a known device with no entry of its own never borrows another device's schedule.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wavefuse_codegen::lower::Schedule;

/// The committed store, as compiled into the binary.
pub const COMMITTED: &str = wavefuse_kernels::TUNED_TOML;
/// Where the committed store lives in the repository.
pub const COMMITTED_PATH: &str = "kernels-gen/tuned/tuned.toml";
/// The store's file name in the cache directory.
pub const CACHE_FILE: &str = "tuned.toml";
/// The device of entries that hold for every device of their arch.
pub const ANY_DEVICE: &str = "*";

/// What identifies a tuned schedule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    /// Kernel name (`gemv_int4`).
    pub kernel: String,
    /// Shape set (`qwen27b-tp4`, `qwen27b-tp1-b8`).
    pub shape: String,
    /// Target (`sm90`, `gfx906`).
    pub arch: String,
    /// Device name as the driver reports it (`NVIDIA H200`), or `*`.
    pub device: String,
}

/// How a winner was chosen.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Event timing on the device, correctness checked against the f64 reference.
    Timed,
    /// The static model of `wavefuse tune --arch gfx906` (no timing).
    StaticModel,
}

/// One tuned schedule and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The key.
    #[serde(flatten)]
    pub key: Key,
    /// How it was chosen.
    pub method: Method,
    /// The winner's median time, µs (timed entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_us: Option<f64>,
    /// The default schedule's median time in the same run, µs (timed entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_median_us: Option<f64>,
    /// The commit of the binary that tuned it.
    pub commit: String,
    /// When (UTC, ISO 8601).
    pub date: String,
    /// The compiler and version the candidates were compiled with.
    pub compiler: String,
    /// The schedule.
    pub schedule: Schedule,
}

/// A set of entries, at most one per key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// The entries, sorted by key when written.
    #[serde(default, rename = "entry")]
    pub entries: Vec<Entry>,
}

/// A store that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the file.
    #[error("tuned-schedule store {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid store (a schedule field renamed since it was written, say).
    #[error("tuned-schedule store {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup<'s> {
    /// An entry for this device (or for every device of the arch).
    Exact(&'s Entry),
    /// The device is unknown here; this entry was tuned on `entry.key.device`.
    OtherDevice(&'s Entry),
    /// Nothing for this device; the devices that do have an entry, if any.
    Missing(Vec<String>),
}

impl Store {
    /// Parses a store; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Store, StoreError> {
        toml::from_str(text).map_err(|e| StoreError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Reads a store file; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<Store, StoreError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Store::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
            Err(source) => Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The committed store compiled into the binary.
    pub fn committed() -> Result<Store, StoreError> {
        Store::parse(COMMITTED, Path::new(COMMITTED_PATH))
    }

    /// The store in the wavefuse cache directory.
    pub fn cache_path() -> PathBuf {
        wavefuse_runtime::Cache::from_env().dir().join(CACHE_FILE)
    }

    /// The TOML text, entries sorted by key.
    pub fn to_toml(&self) -> String {
        let mut sorted = self.clone();
        sorted.entries.sort_by(|a, b| a.key.cmp(&b.key));
        let body = toml::to_string_pretty(&sorted).expect("a store serialises");
        format!(
            "# Tuned schedules (wavefuse tune), keyed by kernel, shape, arch and device.\n\
             # Read by `--schedule tuned`; see harness/src/tune/store.rs.\n\n{body}"
        )
    }

    /// Writes the store to `path` (creating its directory), through a temporary file renamed into
    /// place so a reader never sees half a store.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, self.to_toml()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Adds `entry`, replacing the entry of the same key.
    pub fn insert(&mut self, entry: Entry) {
        self.entries.retain(|e| e.key != entry.key);
        self.entries.push(entry);
    }

    /// Every entry of `other` inserted (`other` wins on equal keys).
    pub fn merge(&mut self, other: Store) {
        for e in other.entries {
            self.insert(e);
        }
    }

    /// The entry of exactly `key`.
    pub fn get(&self, key: &Key) -> Option<&Entry> {
        self.entries.iter().find(|e| &e.key == key)
    }

    /// The schedule for `kernel` at `shape` on `arch` and `device` (None: unknown here); see the
    /// module docs for the rules.
    pub fn lookup(
        &self,
        kernel: &str,
        shape: &str,
        arch: &str,
        device: Option<&str>,
    ) -> Lookup<'_> {
        let mut same: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.key.kernel == kernel && e.key.shape == shape && e.key.arch == arch)
            .collect();
        same.sort_by(|a, b| a.key.device.cmp(&b.key.device));
        if let Some(e) = device.and_then(|d| same.iter().find(|e| e.key.device == d)) {
            return Lookup::Exact(e);
        }
        if let Some(e) = same.iter().find(|e| e.key.device == ANY_DEVICE) {
            return Lookup::Exact(e);
        }
        match (device, same.first()) {
            (None, Some(e)) => Lookup::OtherDevice(e),
            _ => Lookup::Missing(same.iter().map(|e| e.key.device.clone()).collect()),
        }
    }
}
