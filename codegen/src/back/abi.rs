//! The ABI description of a generated kernel: everything a launcher must know, generated from the
//! same [`LoweredKernel`] the C++ writer prints, and written next to the source as TOML (or JSON).
//! One schema for the runtime and for people; no hand-kept copies.
//!
//! Launch: a 1-D grid of [`Abi::grid`] workgroups of exactly [`Abi::workgroup_size`] lanes per
//! rank (a hand-written kernel may give [`Abi::grid_dims`] / [`Abi::block_dims`] for a 2-D or
//! 3-D launch), arguments in [`Abi::params`] order:
//! - `array`: a device pointer to `len` elements of `ty`, aligned to `align` bytes (vector
//!   accesses assume it), not aliasing any other array argument;
//! - `peer_arrays`: a device pointer to a table of `tp` device pointers, slot p holding rank p's
//!   array ([`crate::lowered::peer_slot`], the rule in [`PeerTable`]), identical on every rank;
//! - `scalar`: the value, passed by value (4 bytes): the rank, the epoch, or (`value`) the
//!   number in [`AbiParam::value`].
//!
//! Synchronisation state: `counter` and `flags` arrays are zeroed once when allocated and never
//! reset (DESIGN.md §5.4). A generated kernel counts nothing the host passes: its split-K arrivals
//! and grid barriers are weighted tickets on those counters (`lowered/ticket.rs`), and a kernel
//! with flags keeps its epoch on the device, in the `epoch_state` counter array (per workgroup,
//! the launches it completed): the same launch with the same arguments may be captured in a graph
//! and replayed any number of times. A hand-written
//! kernel may instead take an `epoch` scalar that the launcher sets to 1 for the first launch on
//! the state and grows by one per launch (correct for one replay of a captured launch only). The `error_word` is zero before a launch; afterwards a nonzero value is the
//! code of the wait site in [`Abi::wait_sites`] that timed out (§5.10). A kernel with
//! [`Abi::coresidency`] must be launched cooperatively or with all its workgroups co-resident
//! (§5.9).

use cranelift_entity::EntityRef;
use serde::{Deserialize, Serialize};
use wavefuse_ir::{MemorySpace, Scope};

use super::vector_words;
pub use crate::lower::CoResidency;
use crate::lowered::{
    Access, Base, Block, LoweredKernel, MemRef, ParamData, ParamKind, Purpose, Stmt, Ty, peer_slot,
};
use crate::target::Vendor;

/// Version of this schema; bumped on any incompatible change.
pub const ABI_SCHEMA: u32 = 1;

/// How a generated kernel is launched and bound. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Abi {
    /// [`ABI_SCHEMA`] of the writer.
    pub schema: u32,
    /// The exported (`extern "C"`) symbol.
    pub symbol: String,
    /// The kernel's name in the set.
    pub kernel: String,
    /// Target architecture (`gfx906`, `sm90`).
    pub arch: String,
    /// Source language (`hip`, `cuda`).
    pub language: String,
    /// File name of the generated source.
    pub source: String,
    /// Ranks in the TP group.
    pub tp: u32,
    /// Lanes per wave (warp).
    pub wave_size: u32,
    /// Lanes per workgroup: the exact block size to launch with.
    pub workgroup_size: u32,
    /// Workgroups per rank: the grid to launch.
    pub grid: u32,
    /// Statically declared LDS (shared memory) per workgroup, in bytes.
    pub static_lds_bytes: u64,
    /// Dynamic LDS to pass at launch, in bytes.
    pub dynamic_lds_bytes: u64,
    /// Grid barriers per launch (epoch arithmetic).
    pub barriers_per_launch: u32,
    /// Flag rounds per launch (epoch arithmetic).
    pub flag_rounds_per_launch: u32,
    /// Name of the host-passed epoch scalar (hand-written kernels; generated kernels keep their
    /// epoch on the device and have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_param: Option<String>,
    /// Name of the error word, when the kernel waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_word_param: Option<String>,
    /// Name of the rank scalar, when the kernel takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_param: Option<String>,
    /// The *ranks entry*, where the source has one (a kernel generated for ranks sharing one
    /// device): the same kernel for all `tp` ranks in one launch of `tp × grid` workgroups,
    /// workgroup `b` running workgroup `b mod grid` of rank `b / grid`. Its arguments are
    /// [`Abi::params`] in order, with each `array` passed `tp` times (rank 0's to rank `tp − 1`'s),
    /// the rank scalar left out, and peer tables and the other scalars passed once. All
    /// `tp × grid` workgroups must then be resident at once where the kernel has
    /// [`Abi::coresidency`] or flags (§5.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks_symbol: Option<String>,
    /// Set when all workgroups must be resident at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coresidency: Option<CoResidency>,
    /// Set when a parameter is a peer table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_table: Option<PeerTable>,
    /// Parameters in argument order.
    pub params: Vec<AbiParam>,
    /// Bounded waits, by the code each writes to the error word on timeout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_sites: Vec<WaitSite>,
    /// The kernel opens with the stream-order prologue (it waits for the previous kernel of its
    /// stream before touching memory), so a launcher may launch it as a programmatic dependent
    /// (CUDA: `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`) to overlap its start with
    /// that kernel's end. Absent: launch in plain stream order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dependent_launch: bool,
    /// A 2-D or 3-D launch (hand-written kernels): workgroups along x, y, z. When set, `grid`
    /// is their product. Absent: the 1-D grid `[grid, 1, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_dims: Option<[u32; 3]>,
    /// A 2-D or 3-D workgroup (hand-written kernels): lanes along x, y, z. When set,
    /// `workgroup_size` is their product. Absent: `[workgroup_size, 1, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_dims: Option<[u32; 3]>,
}

/// How peer tables are filled (DESIGN.md §5.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerTable {
    /// Entries per table (the TP size).
    pub entries: u32,
    /// `slots[p]` is the table slot of rank p's array.
    pub slots: Vec<u32>,
    /// The rule in words.
    pub rule: String,
}

/// Kinds of parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbiKind {
    /// A device pointer to one array.
    Array,
    /// A device pointer to a table of `tp` device pointers.
    PeerArrays,
    /// A value.
    Scalar,
}

/// Element and scalar types.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum AbiTy {
    Bool,
    I8,
    I32,
    U32,
    F16,
    F32,
}

impl AbiTy {
    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        Ty::from(self).bytes() as u64
    }
}

impl From<Ty> for AbiTy {
    fn from(t: Ty) -> Self {
        match t {
            Ty::Bool => AbiTy::Bool,
            Ty::I8 => AbiTy::I8,
            Ty::I32 => AbiTy::I32,
            Ty::U32 => AbiTy::U32,
            Ty::F16 => AbiTy::F16,
            Ty::F32 => AbiTy::F32,
        }
    }
}

impl From<AbiTy> for Ty {
    fn from(t: AbiTy) -> Self {
        match t {
            AbiTy::Bool => Ty::Bool,
            AbiTy::I8 => Ty::I8,
            AbiTy::I32 => Ty::I32,
            AbiTy::U32 => Ty::U32,
            AbiTy::F16 => Ty::F16,
            AbiTy::F32 => Ty::F32,
        }
    }
}

/// What a parameter is for; the runtime binds arguments by purpose.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum AbiPurpose {
    /// Part `part` of the op-level buffer `buffer`.
    Data,
    Scratch,
    Counter,
    Flags,
    ErrorWord,
    Rank,
    Epoch,
    /// A scalar passed by value whose number is the parameter's `value` (a hand-written
    /// kernel's `k`, `n`, `group_size`, a stride, a split count).
    Value,
}

/// How an array's memory must be allocated.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    /// Ordinary device memory of the executing rank.
    Device,
    /// Device memory other ranks reach coherently: fine-grained on AMD
    /// (`hipExtMallocWithFlags(.., hipDeviceMallocFinegrained)`), any device memory with peer
    /// access enabled on NVIDIA.
    FineGrained,
    /// Uncached device memory (AMD `hipDeviceMallocUncached`): flags polled across devices (§5.12).
    Uncached,
    /// Host memory mapped into the device address space.
    HostMapped,
}

/// How an array starts out.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// Zeroed once at allocation, never reset: epochs continue across launches (§5.4).
    ZeroOnce,
    /// Zero before each launch, read after it (the error word).
    ZeroBeforeLaunch,
}

/// One parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbiParam {
    /// Position in the argument list.
    pub index: u32,
    /// Name (the C++ parameter may be this with a suffix when it clashes with a keyword).
    pub name: String,
    /// Kind.
    pub kind: AbiKind,
    /// Element type (arrays) or value type (scalars).
    pub ty: AbiTy,
    /// What it is for.
    pub purpose: AbiPurpose,
    /// The op-level buffer, for `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    /// Which array of the buffer (`qweight`, `scales`, `qzeros`, `g_idx`, `data`), for `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Elements per array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// Bytes per array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Required alignment of each array's base address, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align: Option<u64>,
    /// How the kernel uses the array (`read`, `write`, `read_write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// The IR memory space (`global`, `host`, `peer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    /// How the array must be allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// How it must start out, when that matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<Init>,
    /// For a `value` scalar: its number. In a hand-written description an expression of the
    /// op-level shape (`"k"`, `"n / 64"`, `"group_size"`, `"w.k / 8"`) or a literal; in the
    /// description a runtime binds (`Hand::launch_abi`), the evaluated integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The array parts a `data` parameter may name (`Purpose::Data`). `qscale` is a hand-written
/// kernel's: the per-row (token) scales of an FP16 tensor it takes quantised to INT8 on the host
/// (an `i8` `data` array of the same buffer; `wavefuse_runtime::exec::quantise_rows`).
pub const PARTS: [&str; 6] = ["data", "qweight", "scales", "qzeros", "g_idx", "qscale"];

impl AbiParam {
    /// What the parameter is for, as the lowered level says it.
    pub fn lowered_purpose(&self) -> Result<Purpose, String> {
        let missing = |field: &str| {
            format!(
                "parameter `{}` ({:?}) has no `{field}`",
                self.name, self.purpose
            )
        };
        Ok(match self.purpose {
            AbiPurpose::Data => {
                let buffer = self.buffer.clone().ok_or_else(|| missing("buffer"))?;
                let part = self.part.as_deref().ok_or_else(|| missing("part"))?;
                let part = PARTS.into_iter().find(|x| *x == part).ok_or_else(|| {
                    format!(
                        "parameter `{}`: part `{part}` is not one of {PARTS:?}",
                        self.name
                    )
                })?;
                Purpose::Data { buffer, part }
            }
            AbiPurpose::Scratch => Purpose::Scratch,
            AbiPurpose::Counter => Purpose::Counter,
            AbiPurpose::Flags => Purpose::Flags,
            AbiPurpose::ErrorWord => Purpose::ErrorWord,
            AbiPurpose::Rank => Purpose::Rank,
            AbiPurpose::Epoch => Purpose::Epoch,
            AbiPurpose::Value => Purpose::Value,
        })
    }

    /// How the kernel uses the array (read-write when the description does not say).
    pub fn lowered_access(&self) -> Access {
        match self.access.as_deref() {
            Some("read") => Access::Read,
            Some("write") => Access::Write,
            _ => Access::ReadWrite,
        }
    }

    /// The parameter's kind at the lowered level.
    pub fn param_kind(&self) -> Result<ParamKind, String> {
        let purpose = self.lowered_purpose()?;
        let len = || {
            self.len.map(|l| l as usize).ok_or_else(|| {
                format!(
                    "parameter `{}` ({:?}) has no `len`",
                    self.name, self.purpose
                )
            })
        };
        let space = match self.space.as_deref() {
            Some("host") => MemorySpace::HostVisible,
            _ => MemorySpace::Global,
        };
        Ok(match self.kind {
            AbiKind::Array => ParamKind::Array {
                elem: Ty::from(self.ty),
                len: len()?,
                space,
                access: self.lowered_access(),
                purpose,
            },
            AbiKind::PeerArrays => ParamKind::PeerArrays {
                elem: Ty::from(self.ty),
                len: len()?,
                access: self.lowered_access(),
                purpose,
            },
            AbiKind::Scalar => ParamKind::Scalar {
                ty: Ty::from(self.ty),
                purpose,
            },
        })
    }
}

/// A bounded wait of the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSite {
    /// The code written to the error word on timeout.
    pub code: u32,
    /// The parameter polled.
    pub polls: String,
    /// `grid_barrier` (counter) or `peer_flag` (flags) or `other`.
    pub what: String,
    /// Scope of the acquire (`agent`, `system`).
    pub scope: String,
    /// Polls before the timeout.
    pub budget: u32,
}

impl Abi {
    /// The ABI description of `k`.
    pub fn from_kernel(k: &LoweredKernel) -> Abi {
        let symbol = super::symbol(&k.name);
        let language = super::language(k.arch);
        let mut align = vec![0u64; k.params.len()];
        vector_alignment(k, &k.body, &mut align);
        let params = k
            .params
            .iter()
            .enumerate()
            .map(|(i, (_, d))| param(k, i, &d.name, &d.kind, align[i]))
            .collect();
        let has_peers = k
            .params
            .values()
            .any(|d| matches!(d.kind, ParamKind::PeerArrays { .. }));
        let name_of = |p: Option<crate::lowered::Param>| p.map(|p| k.params[p].name.clone());
        let rank_param = k
            .params
            .values()
            .find(|d| {
                matches!(
                    d.kind,
                    ParamKind::Scalar {
                        purpose: Purpose::Rank,
                        ..
                    }
                )
            })
            .map(|d| d.name.clone());
        let mut wait_sites = Vec::new();
        collect_waits(k, &k.body, &mut wait_sites);
        Abi {
            schema: ABI_SCHEMA,
            source: format!("{symbol}.{}", language.extension()),
            symbol,
            kernel: k.name.clone(),
            arch: k.arch.name().to_owned(),
            language: language.name().to_owned(),
            tp: k.tp,
            wave_size: k.wave_size(),
            workgroup_size: k.workgroup_size,
            grid: k.grid,
            static_lds_bytes: match k.dynamic_lds_layout() {
                Some(_) => 0,
                None => k.lds_bytes() as u64,
            },
            dynamic_lds_bytes: k.dynamic_lds_layout().map_or(0, |(_, bytes)| bytes as u64),
            barriers_per_launch: k.barriers_per_launch,
            flag_rounds_per_launch: k.flag_rounds_per_launch,
            epoch_param: name_of(k.epoch),
            error_word_param: name_of(k.error_word),
            rank_param,
            ranks_symbol: None,
            coresidency: k.coresidency.clone(),
            peer_table: has_peers.then(|| PeerTable {
                entries: k.tp,
                slots: (0..k.tp).map(|p| peer_slot(p) as u32).collect(),
                rule: "slot p holds rank p's array (ascending rank order), the same table contents on every rank; peer access enabled".into(),
            }),
            params,
            wait_sites,
            dependent_launch: k.stream_order_prologue(),
            grid_dims: None,
            block_dims: None,
        }
    }

    /// The parameters as a runtime binds them, in ABI order, from the description alone (a
    /// hand-written kernel is its description and its source; a generated one's description is
    /// [`Abi::from_kernel`]): each array's element type, length, space, access and purpose.
    /// `Err` names the parameter whose description is incomplete.
    pub fn param_data(&self) -> Result<Vec<ParamData>, String> {
        self.params
            .iter()
            .map(|p| {
                Ok(ParamData {
                    name: p.name.clone(),
                    kind: p.param_kind()?,
                })
            })
            .collect()
    }

    /// Whether every workgroup of a launch must be resident at once (DESIGN.md §5.9): the kernel
    /// waits on other workgroups of its grid (a grid barrier) or on other ranks (flags). A
    /// counter alone may be a last-arriver count nobody waits on.
    pub fn synchronises(&self) -> bool {
        self.coresidency.is_some()
            || self.flag_rounds_per_launch > 0
            || (self.tp > 1 && self.params.iter().any(|p| p.purpose == AbiPurpose::Flags))
    }

    /// The description as TOML.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        let body = toml::to_string(self)?;
        Ok(format!(
            "# ABI of the generated kernel `{}` ({}, TP = {}), written by wavefuse; see\n\
             # wavefuse_codegen::abi for the meaning of every field. Do not edit; regenerate.\n\n{body}",
            self.kernel, self.arch, self.tp
        ))
    }

    /// Read a TOML description.
    pub fn from_toml(text: &str) -> Result<Abi, toml::de::Error> {
        toml::from_str(text)
    }

    /// The description as JSON.
    pub fn to_json(&self) -> String {
        // Plain structs of strings and integers: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Read a JSON description.
    pub fn from_json(text: &str) -> Result<Abi, serde_json::Error> {
        serde_json::from_str(text)
    }
}

fn param(
    k: &LoweredKernel,
    index: usize,
    name: &str,
    kind: &ParamKind,
    vector_align: u64,
) -> AbiParam {
    let mut p = AbiParam {
        index: index as u32,
        name: name.to_owned(),
        kind: AbiKind::Scalar,
        ty: AbiTy::U32,
        purpose: AbiPurpose::Data,
        buffer: None,
        part: None,
        len: None,
        bytes: None,
        align: None,
        access: None,
        space: None,
        memory: None,
        init: None,
        value: None,
    };
    let (ty, purpose) = match kind {
        ParamKind::Array {
            elem,
            len,
            space,
            access,
            purpose,
        } => {
            p.kind = AbiKind::Array;
            array_fields(&mut p, *elem, *len, *access, vector_align);
            p.space = Some(space.name().to_owned());
            p.memory = Some(memory(k, *space, purpose, false));
            (*elem, purpose)
        }
        ParamKind::PeerArrays {
            elem,
            len,
            access,
            purpose,
        } => {
            p.kind = AbiKind::PeerArrays;
            array_fields(&mut p, *elem, *len, *access, vector_align);
            p.space = Some(MemorySpace::PeerGlobal.name().to_owned());
            p.memory = Some(memory(k, MemorySpace::PeerGlobal, purpose, true));
            (*elem, purpose)
        }
        ParamKind::Scalar { ty, purpose } => (*ty, purpose),
    };
    p.ty = ty.into();
    p.purpose = match purpose {
        Purpose::Data { buffer, part } => {
            p.buffer = Some(buffer.clone());
            p.part = Some((*part).to_owned());
            AbiPurpose::Data
        }
        Purpose::Scratch => AbiPurpose::Scratch,
        Purpose::Counter => AbiPurpose::Counter,
        Purpose::Flags => AbiPurpose::Flags,
        Purpose::ErrorWord => AbiPurpose::ErrorWord,
        Purpose::Rank => AbiPurpose::Rank,
        Purpose::Epoch => AbiPurpose::Epoch,
        Purpose::Value => AbiPurpose::Value,
    };
    p.init = match p.purpose {
        AbiPurpose::Counter | AbiPurpose::Flags => Some(Init::ZeroOnce),
        AbiPurpose::ErrorWord => Some(Init::ZeroBeforeLaunch),
        _ => None,
    };
    p
}

fn array_fields(p: &mut AbiParam, elem: Ty, len: usize, access: Access, vector_align: u64) {
    p.len = Some(len as u64);
    p.bytes = Some((len * elem.bytes()) as u64);
    p.align = Some(vector_align.max(elem.bytes() as u64));
    p.access = Some(cpp_access(access).to_owned());
}

fn cpp_access(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
        Access::ReadWrite => "read_write",
    }
}

fn memory(k: &LoweredKernel, space: MemorySpace, purpose: &Purpose, peer: bool) -> Memory {
    let amd = k.arch.vendor() == Vendor::Amd;
    match (space, purpose) {
        (MemorySpace::HostVisible, _) => Memory::HostMapped,
        // Flags are polled by other devices: uncached on AMD so a poll never hits a stale line.
        (_, Purpose::Flags) if amd && (peer || k.tp > 1) => Memory::Uncached,
        _ if peer => Memory::FineGrained,
        _ => Memory::Device,
    }
}

/// The widest vector access (bytes) made through each parameter.
fn vector_alignment(k: &LoweredKernel, block: &Block, align: &mut [u64]) {
    for s in block {
        match s {
            Stmt::Load { dst, mem } => note_vector(k, mem, dst.len(), align),
            Stmt::Store { mem, values } => note_vector(k, mem, values.len(), align),
            Stmt::For { body, .. } => vector_alignment(k, body, align),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                vector_alignment(k, then_body, align);
                vector_alignment(k, else_body, align);
            }
            _ => {}
        }
    }
}

fn note_vector(k: &LoweredKernel, m: &MemRef, n: usize, align: &mut [u64]) {
    let (Base::Param(p) | Base::Peer { param: p, .. }) = &m.base else {
        return;
    };
    let elem = match &k.params[*p].kind {
        ParamKind::Array { elem, .. } | ParamKind::PeerArrays { elem, .. } => *elem,
        ParamKind::Scalar { .. } => return,
    };
    if let Some((words, _)) = vector_words(elem, n) {
        align[p.index()] = align[p.index()].max(words as u64 * 4);
    }
}

fn collect_waits(k: &LoweredKernel, block: &Block, out: &mut Vec<WaitSite>) {
    for s in block {
        match s {
            Stmt::WaitGe {
                mem,
                scope,
                budget,
                code,
                ..
            } => {
                let (Base::Param(p) | Base::Peer { param: p, .. }) = &mem.base else {
                    continue;
                };
                let d = &k.params[*p];
                let what = match &d.kind {
                    ParamKind::Array {
                        purpose: Purpose::Counter,
                        ..
                    } => "grid_barrier",
                    ParamKind::Array {
                        purpose: Purpose::Flags,
                        ..
                    }
                    | ParamKind::PeerArrays {
                        purpose: Purpose::Flags,
                        ..
                    } => "peer_flag",
                    _ => "other",
                };
                let scope = match scope {
                    Scope::Wave => "wave",
                    Scope::Workgroup => "workgroup",
                    Scope::Agent => "agent",
                    Scope::System => "system",
                };
                out.push(WaitSite {
                    code: *code,
                    polls: d.name.clone(),
                    what: what.into(),
                    scope: scope.into(),
                    budget: *budget,
                });
            }
            Stmt::For { body, .. } => collect_waits(k, body, out),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_waits(k, then_body, out);
                collect_waits(k, else_body, out);
            }
            _ => {}
        }
    }
}
