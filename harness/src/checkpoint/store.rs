//! Named tensors from a safetensors checkpoint: one file, or a sharded set behind a
//! `model.safetensors.index.json`. Only the header and the tensors asked for are read, so a
//! 15 GB shard costs the bytes of one layer.
//!
//! Every file is checked whole before any tensor of it is used: the header must parse (the
//! `safetensors` crate's own `Metadata` validation: contiguous offsets, sizes that match shape ×
//! dtype), and the file length must equal what the header declares. A truncated file names the
//! first tensor that lies past its end.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::Metadata;

use super::CheckpointError;

/// Largest header the `safetensors` crate accepts.
const MAX_HEADER: u64 = 100_000_000;

/// One tensor as stored: dtype, shape and its little-endian bytes.
#[derive(Clone, Debug)]
pub struct RawTensor {
    /// Element type in the file.
    pub dtype: Dtype,
    /// Shape in the file.
    pub shape: Vec<usize>,
    /// The tensor's bytes.
    pub bytes: Vec<u8>,
}

/// The tensors of a checkpoint, read on demand.
pub struct TensorStore {
    /// The directory whose config files describe the quantisation.
    pub dir: PathBuf,
    /// Tensor name → file, from an index; `None` for a single file.
    index: Option<BTreeMap<String, PathBuf>>,
    single: PathBuf,
    open: HashMap<PathBuf, TensorFile>,
}

impl TensorStore {
    /// `path` is a `.safetensors` file, a `model.safetensors.index.json`, or a directory holding
    /// one of `model.safetensors` / `model.safetensors.index.json`.
    pub fn open(path: &Path) -> Result<Self, CheckpointError> {
        let path = resolve(path)?;
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        let index = if path.extension().is_some_and(|e| e == "json") {
            Some(read_index(&path, &dir)?)
        } else {
            None
        };
        let mut store = TensorStore {
            dir,
            index,
            single: path.clone(),
            open: HashMap::new(),
        };
        if store.index.is_none() {
            // Check the file at once: a corrupt file is reported as such, not as a missing tensor.
            store.file(&path)?;
        }
        Ok(store)
    }

    /// Every tensor name of the checkpoint.
    pub fn names(&mut self) -> Result<Vec<String>, CheckpointError> {
        if let Some(index) = &self.index {
            return Ok(index.keys().cloned().collect());
        }
        let single = self.single.clone();
        let mut names: Vec<String> = self.file(&single)?.meta.tensors().into_keys().collect();
        names.sort();
        Ok(names)
    }

    /// The tensor's dtype and shape, without reading it; `None` if the checkpoint has no such
    /// tensor.
    pub fn info(&mut self, name: &str) -> Result<Option<(Dtype, Vec<usize>)>, CheckpointError> {
        let Some(path) = self.path_of(name) else {
            return Ok(None);
        };
        self.held(name, &path)?;
        let f = self.file(&path)?;
        Ok(f.meta.info(name).map(|i| (i.dtype, i.shape.clone())))
    }

    /// Read one tensor; `None` if the checkpoint has no such tensor.
    pub fn read(&mut self, name: &str) -> Result<Option<RawTensor>, CheckpointError> {
        let Some(path) = self.path_of(name) else {
            return Ok(None);
        };
        self.held(name, &path)?;
        self.file(&path)?.read(name)
    }

    /// With an index: the shard it names for `name` must hold it. The error says which shard
    /// the index names and which shard, if any, holds the tensor instead.
    fn held(&mut self, name: &str, shard: &Path) -> Result<(), CheckpointError> {
        if self.index.is_none() || self.file(shard)?.meta.info(name).is_some() {
            return Ok(());
        }
        let mut others: Vec<PathBuf> = (self.index.iter().flat_map(BTreeMap::values))
            .filter(|p| *p != shard)
            .cloned()
            .collect();
        others.sort();
        others.dedup();
        let holders: Vec<String> = others
            .iter()
            .filter(|p| self.file(p).is_ok_and(|f| f.meta.info(name).is_some()))
            .map(|p| format!("`{}`", file_name(p)))
            .collect();
        let instead = match &holders[..] {
            [] => format!(
                "no shard the index names holds it ({} shard file(s) looked at)",
                others.len() + 1
            ),
            [one] => format!("it is in {one}: fix weight_map[`{name}`]"),
            many => format!("it is in {}: fix weight_map[`{name}`]", many.join(", ")),
        };
        Err(CheckpointError::Corrupt {
            path: self.single.clone(),
            what: format!(
                "weight_map maps tensor `{name}` to shard `{}`, but that shard does not hold it; {instead}",
                file_name(shard)
            ),
        })
    }

    fn path_of(&self, name: &str) -> Option<PathBuf> {
        match &self.index {
            Some(index) => index.get(name).cloned(),
            None => Some(self.single.clone()),
        }
    }

    fn file(&mut self, path: &Path) -> Result<&mut TensorFile, CheckpointError> {
        if !self.open.contains_key(path) {
            let f = TensorFile::open(path)?;
            self.open.insert(path.to_owned(), f);
        }
        Ok(self.open.get_mut(path).expect("inserted above"))
    }
}

/// The file name of a shard (shards are bare names in the checkpoint's directory).
fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    )
}

/// A directory becomes the file inside it.
fn resolve(path: &Path) -> Result<PathBuf, CheckpointError> {
    if !path.is_dir() {
        return Ok(path.to_owned());
    }
    for name in ["model.safetensors", "model.safetensors.index.json"] {
        if path.join(name).is_file() {
            return Ok(path.join(name));
        }
    }
    Err(CheckpointError::Corrupt {
        path: path.to_owned(),
        what: "is a directory without model.safetensors or model.safetensors.index.json; \
               give the .safetensors file itself"
            .into(),
    })
}

/// `{"weight_map": {"tensor": "model-00001-of-00002.safetensors", …}}`.
fn read_index(path: &Path, dir: &Path) -> Result<BTreeMap<String, PathBuf>, CheckpointError> {
    let io = |e| CheckpointError::Io {
        path: path.to_owned(),
        source: e,
    };
    let bad = |what: String| CheckpointError::Corrupt {
        path: path.to_owned(),
        what,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let map = json
        .get("weight_map")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| bad("no `weight_map` object: not a safetensors index".into()))?;
    map.iter()
        .map(|(name, file)| match file.as_str() {
            // Shards live beside the index: a bare file name, never a path that leaves the
            // checkpoint's directory (`/etc/passwd`, `../x`).
            Some(f) if is_bare_name(f) => Ok((name.clone(), dir.join(f))),
            Some(f) => Err(bad(format!(
                "weight_map[`{name}`] is `{f}`: shard files must be plain file names in the \
                 checkpoint's directory {}",
                dir.display()
            ))),
            None => Err(bad(format!("weight_map[`{name}`] is not a file name"))),
        })
        .collect()
}

/// One normal path component: no directory, no `..`, not absolute.
fn is_bare_name(f: &str) -> bool {
    let mut parts = Path::new(f).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    )
}

/// One open safetensors file.
struct TensorFile {
    path: PathBuf,
    file: File,
    /// Byte offset of the data section.
    data_start: u64,
    meta: Metadata,
    /// Data bytes actually present, when fewer than the header declares.
    truncated_at: Option<u64>,
}

impl TensorFile {
    fn open(path: &Path) -> Result<Self, CheckpointError> {
        let io = |e| CheckpointError::Io {
            path: path.to_owned(),
            source: e,
        };
        let bad = |what: String| CheckpointError::Corrupt {
            path: path.to_owned(),
            what,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut n = [0u8; 8];
        if len < 8 {
            return Err(bad(format!(
                "{len} bytes: too short for a safetensors file (truncated?)"
            )));
        }
        file.read_exact(&mut n).map_err(io)?;
        let n = u64::from_le_bytes(n);
        if n > MAX_HEADER {
            return Err(bad(format!(
                "declares a {n}-byte header: not a safetensors file"
            )));
        }
        if 8 + n > len {
            return Err(bad(format!(
                "truncated inside its header: {n} header bytes declared, {} present",
                len - 8
            )));
        }
        let mut header = vec![0u8; n as usize];
        file.read_exact(&mut header).map_err(io)?;
        let meta: Metadata = serde_json::from_slice(&header)
            .map_err(|e| bad(format!("invalid safetensors header: {e}")))?;
        let (data_start, declared) = (8 + n, meta.data_len() as u64);
        let present = len - data_start;
        if present > declared {
            return Err(bad(format!(
                "corrupt: the header describes {declared} data bytes but the file holds {present}"
            )));
        }
        let truncated_at = (present < declared).then_some(present);
        Ok(TensorFile {
            path: path.to_owned(),
            file,
            data_start,
            meta,
            truncated_at,
        })
    }

    fn read(&mut self, name: &str) -> Result<Option<RawTensor>, CheckpointError> {
        let Some(info) = self.meta.info(name) else {
            return Ok(None);
        };
        let (start, end) = info.data_offsets;
        if let Some(present) = self.truncated_at {
            return Err(self.truncation(name, present));
        }
        let mut bytes = vec![0u8; end - start];
        let io = |e| CheckpointError::Io {
            path: self.path.clone(),
            source: e,
        };
        self.file
            .seek(SeekFrom::Start(self.data_start + start as u64))
            .map_err(io)?;
        self.file.read_exact(&mut bytes).map_err(io)?;
        Ok(Some(RawTensor {
            dtype: info.dtype,
            shape: info.shape.clone(),
            bytes,
        }))
    }

    /// The error for a truncated file: names `wanted` if it is cut, else the first cut tensor.
    fn truncation(&self, wanted: &str, present: u64) -> CheckpointError {
        let cut = |name: &String| {
            self.meta
                .info(name)
                .is_some_and(|i| i.data_offsets.1 as u64 > present)
        };
        let keys = self.meta.offset_keys();
        let tensor = if cut(&wanted.to_owned()) {
            wanted.to_owned()
        } else {
            keys.iter().find(|k| cut(k)).cloned().unwrap_or_default()
        };
        let (s, e) = self.meta.info(&tensor).map_or((0, 0), |i| i.data_offsets);
        CheckpointError::Truncated {
            path: self.path.clone(),
            tensor,
            needed: e as u64,
            present,
            range: (s as u64, e as u64),
        }
    }
}
