//! The C library of a generated kernel, for engines without Python (DESIGN.md §10; usage in
//! docs/clib.md): an `extern "C"` launcher and its header, generated from the kernel's [`Abi`]
//! alone, and the script that compiles them with the kernel source into `lib<symbol>_<arch>.so`
//! (hipcc for gfx906, nvcc for sm_90).
//!
//! The launcher owns what the ABI says the runtime provides — counters (`epoch_state` among
//! them), flags, the error word, scratch, peer tables — allocated as each array's
//! [`Memory`] asks and zeroed once per rank (§5.4); the caller passes its data
//! arrays in an argument struct and a stream. A launch only enqueues: no allocation, no
//! synchronisation, so it may be captured in a graph and replayed (§10).
//!
//! Every file name carries the architecture (`<symbol>_<arch>`), so both targets of a kernel can
//! be written into one folder; the kernel source keeps its own name (`<symbol>.hip` / `.cu`).

mod header;
mod host;
mod launcher;

use crate::abi::{Abi, AbiKind, AbiParam, AbiPurpose, Memory};
use crate::back;
use crate::target::Arch;

pub use host::Host;

/// The files of one kernel's C library (besides the kernel source, which the launcher includes
/// by its ABI name, [`Abi::source`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CLibrary {
    /// `<symbol>_<arch>`: the stem of every file name and of the library, `lib<stem>.so`.
    pub stem: String,
    /// The header, the launcher source and the build script, in that order.
    pub files: Vec<LibFile>,
}

/// One file of a [`CLibrary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibFile {
    /// File name (no directory).
    pub name: String,
    /// Contents.
    pub text: String,
    /// Whether it is a script to make executable.
    pub executable: bool,
}

impl CLibrary {
    /// The shared library the build script writes.
    pub fn library_name(&self) -> String {
        format!("lib{}.so", self.stem)
    }

    /// The file called `name`, if the library has one.
    pub fn file(&self, name: &str) -> Option<&LibFile> {
        self.files.iter().find(|f| f.name == name)
    }
}

/// Why an ABI description has no C library.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CLibError {
    /// The ABI names an architecture wavefuse does not know.
    #[error("the ABI of `{kernel}` is for `{arch}`, which is not a wavefuse target")]
    Arch {
        /// The kernel.
        kernel: String,
        /// What the ABI says.
        arch: String,
    },
    /// An array parameter without its length.
    #[error("parameter `{param}` of `{kernel}` is an array without `len`")]
    NoLen {
        /// The kernel.
        kernel: String,
        /// The parameter.
        param: String,
    },
    /// A peer table whose slots are not a permutation of the ranks.
    #[error("the peer table of `{kernel}` has slots {slots:?}, not a permutation of 0..{tp}")]
    Slots {
        /// The kernel.
        kernel: String,
        /// The ABI's slots.
        slots: Vec<u32>,
        /// The TP size.
        tp: u32,
    },
    /// A 2-D or 3-D launch ([`Abi::grid_dims`], [`Abi::block_dims`]): the launcher writes 1-D
    /// launches only.
    #[error(
        "`{kernel}` has a 2-D/3-D launch (grid {grid:?}, block {block:?}): the C library launches 1-D grids only"
    )]
    MultiDim {
        /// The kernel.
        kernel: String,
        /// The ABI's grid dimensions.
        grid: Option<[u32; 3]>,
        /// The ABI's block dimensions.
        block: Option<[u32; 3]>,
    },
}

/// The C library of the kernel `abi` describes: `<stem>.h`, `<stem>_launch.hip|.cu` and
/// `build_<stem>.sh`. Deterministic: the same ABI gives the same text.
pub fn library(abi: &Abi) -> Result<CLibrary, CLibError> {
    if abi.grid_dims.is_some() || abi.block_dims.is_some() {
        return Err(CLibError::MultiDim {
            kernel: abi.kernel.clone(),
            grid: abi.grid_dims,
            block: abi.block_dims,
        });
    }
    let lib = Lib::new(abi)?;
    Ok(CLibrary {
        stem: lib.stem.clone(),
        files: vec![
            LibFile {
                name: lib.header_name(),
                text: header::write(&lib),
                executable: false,
            },
            LibFile {
                name: lib.launcher_name(),
                text: launcher::write(&lib),
                executable: false,
            },
            LibFile {
                name: format!("build_{}.sh", lib.stem),
                text: lib.build_script(),
                executable: true,
            },
        ],
    })
}

/// What a parameter is to the C library.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    /// The caller's array: a field of the argument struct.
    Data,
    /// The caller's peer table (a device pointer to `tp` pointers): a field of the struct.
    DataPeer,
    /// The caller's scalar: a field of the struct.
    DataScalar,
    /// An array the state owns.
    Owned(Memory),
    /// A peer array the state owns, passed as a table the state owns.
    OwnedPeer(Memory),
    /// The rank scalar, set once per state.
    Rank,
    /// A hand-written kernel's host-passed epoch: 1, 2, 3, … per launch on the state.
    Epoch,
}

/// One parameter with its role and C name.
struct Param<'a> {
    abi: &'a AbiParam,
    role: Role,
    /// A C identifier: the argument-struct field, or the stem of the state's fields.
    field: String,
}

impl Param<'_> {
    /// Elements per array (checked present for arrays in [`Lib::new`]).
    fn len(&self) -> u64 {
        self.abi.len.unwrap_or(0)
    }

    fn bytes(&self) -> u64 {
        self.len() * self.abi.ty.bytes()
    }

    fn is_error_word(&self) -> bool {
        self.abi.purpose == AbiPurpose::ErrorWord
    }
}

/// The ABI read for the writers.
struct Lib<'a> {
    abi: &'a Abi,
    arch: Arch,
    host: Host,
    /// `<symbol>_<arch>`.
    stem: String,
    /// `wf_<symbol>`: the prefix of every exported name.
    prefix: String,
    /// `WF_<SYMBOL>`: the prefix of every macro.
    macro_prefix: String,
    params: Vec<Param<'a>>,
    /// `slots[p]`: the table slot of rank p's array (`peer_slot`).
    slots: Vec<u32>,
}

impl<'a> Lib<'a> {
    fn new(abi: &'a Abi) -> Result<Lib<'a>, CLibError> {
        let arch: Arch = abi.arch.parse().map_err(|_| CLibError::Arch {
            kernel: abi.kernel.clone(),
            arch: abi.arch.clone(),
        })?;
        let host = Host::of(arch);
        let params = abi
            .params
            .iter()
            .map(|p| param(abi, host, p))
            .collect::<Result<Vec<_>, _>>()?;
        let slots = match &abi.peer_table {
            Some(t) => t.slots.clone(),
            None => (0..abi.tp).collect(),
        };
        let mut sorted = slots.clone();
        sorted.sort_unstable();
        if sorted != (0..abi.tp).collect::<Vec<_>>() {
            return Err(CLibError::Slots {
                kernel: abi.kernel.clone(),
                slots,
                tp: abi.tp,
            });
        }
        Ok(Lib {
            abi,
            arch,
            host,
            stem: format!("{}_{}", abi.symbol, arch.name()),
            prefix: format!("wf_{}", abi.symbol),
            macro_prefix: format!("WF_{}", abi.symbol.to_ascii_uppercase()),
            params,
            slots,
        })
    }

    fn header_name(&self) -> String {
        format!("{}.h", self.stem)
    }

    fn launcher_name(&self) -> String {
        format!("{}_launch.{}", self.stem, self.host.extension())
    }

    /// The state's peer arrays, in ABI order (the order of `peer_buffers` and `set_peers`).
    fn owned_peers(&self) -> impl Iterator<Item = &Param<'a>> {
        self.params
            .iter()
            .filter(|p| matches!(p.role, Role::OwnedPeer(_)))
    }

    fn has_rank(&self) -> bool {
        self.params.iter().any(|p| p.role == Role::Rank)
    }

    fn has_epoch(&self) -> bool {
        self.params.iter().any(|p| p.role == Role::Epoch)
    }

    /// Whether `set_peers` must run before a launch (a single rank's table is filled at creation).
    fn needs_peers(&self) -> bool {
        self.abi.tp > 1 && self.owned_peers().next().is_some()
    }

    /// Whether `set_rank` must run before a launch.
    fn needs_rank(&self) -> bool {
        self.abi.tp > 1 && self.has_rank()
    }

    /// Whether the library offers a programmatic dependent launch: a CUDA kernel that opens
    /// with the stream-order prologue ([`Abi::dependent_launch`]).
    fn dependent_launch(&self) -> bool {
        self.host == Host::Cuda && self.abi.dependent_launch
    }

    fn error_word(&self) -> Option<&Param<'a>> {
        self.params.iter().find(|p| p.is_error_word())
    }

    /// `build_<stem>.sh`: the one compiler command.
    fn build_script(&self) -> String {
        let (var, env, flags) = self.host.compiler(self.arch);
        let launcher = self.launcher_name();
        let lib = format!("lib{}.so", self.stem);
        let about = wrap(
            "#",
            &format!(
                "Generated by wavefuse: builds {lib} (kernel `{kernel}` for {arch}, TP = {tp}) \
                 from {launcher}, which includes {header} and {source}. ${var} names the \
                 compiler (default: {tool} on PATH); ${var}_FLAGS adds flags (e.g. -L for the \
                 runtime library). Usage: docs/clib.md. Do not edit; regenerate.",
                kernel = self.abi.kernel,
                arch = self.arch.name(),
                tp = self.abi.tp,
                header = self.header_name(),
                source = self.abi.source,
                tool = var.to_ascii_lowercase(),
            ),
        );
        format!(
            "#!/bin/sh\n{about}set -eu\ncd \"$(dirname \"$0\")\"\n\
             {env}\"${{{var}:-{tool}}}\" {flags} ${{{var}_FLAGS:-}} -o {lib} {launcher}\n",
            tool = var.to_ascii_lowercase(),
        )
    }
}

/// `text` as comment lines (`prefix` then a space) of at most 100 columns; a longer word gets a
/// line of its own.
fn wrap(prefix: &str, text: &str) -> String {
    let mut out = String::new();
    let mut line = prefix.to_owned();
    for word in text.split_whitespace() {
        if line.len() > prefix.len() && line.len() + 1 + word.len() > 100 {
            out.push_str(&line);
            out.push('\n');
            line = prefix.to_owned();
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The role of `p` and its C name.
fn param<'a>(abi: &Abi, host: Host, p: &'a AbiParam) -> Result<Param<'a>, CLibError> {
    let array = matches!(p.kind, AbiKind::Array | AbiKind::PeerArrays);
    if array && p.len.is_none() {
        return Err(CLibError::NoLen {
            kernel: abi.kernel.clone(),
            param: p.name.clone(),
        });
    }
    let role = match (p.kind, p.purpose) {
        (AbiKind::Scalar, AbiPurpose::Rank) => Role::Rank,
        (AbiKind::Scalar, AbiPurpose::Epoch) => Role::Epoch,
        (AbiKind::Scalar, _) => Role::DataScalar,
        (AbiKind::Array, AbiPurpose::Data) => Role::Data,
        (AbiKind::PeerArrays, AbiPurpose::Data) => Role::DataPeer,
        (AbiKind::Array, purpose) => Role::Owned(
            p.memory
                .unwrap_or(host.default_memory(purpose, abi.tp, false)),
        ),
        (AbiKind::PeerArrays, purpose) => Role::OwnedPeer(
            p.memory
                .unwrap_or(host.default_memory(purpose, abi.tp, true)),
        ),
    };
    Ok(Param {
        abi: p,
        role,
        field: back::identifier(&p.name),
    })
}

/// The C type of an element or scalar (FP16 as its 16 bits: C has no portable half type).
fn c_type(ty: crate::abi::AbiTy) -> &'static str {
    use crate::abi::AbiTy;
    match ty {
        AbiTy::Bool => "uint8_t",
        AbiTy::I8 => "int8_t",
        AbiTy::I32 => "int32_t",
        AbiTy::U32 => "uint32_t",
        AbiTy::F16 => "uint16_t",
        AbiTy::F32 => "float",
    }
}

/// `f16`, `u32`, … as the ABI writes it.
fn ty_name(ty: crate::abi::AbiTy) -> &'static str {
    use crate::abi::AbiTy;
    match ty {
        AbiTy::Bool => "bool",
        AbiTy::I8 => "i8",
        AbiTy::I32 => "i32",
        AbiTy::U32 => "u32",
        AbiTy::F16 => "f16",
        AbiTy::F32 => "f32",
    }
}

/// How an owned array is allocated, in words.
fn memory_name(m: Memory) -> &'static str {
    match m {
        Memory::Device => "device",
        Memory::FineGrained => "fine-grained",
        Memory::Uncached => "uncached",
        Memory::HostMapped => "host-mapped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-written kernel's description (what it exercises: the file's comment).
    const HAND: &str = include_str!("../../tests/clib/hand.abi.toml");

    fn hand(arch: &str) -> Abi {
        let mut abi = Abi::from_toml(HAND).expect("parses");
        if arch == "sm90" {
            abi.arch = "sm90".into();
            abi.language = "cuda".into();
            abi.source = "hand.cu".into();
        }
        abi
    }

    #[test]
    fn a_hand_written_abi_gets_its_epoch_scalar_and_table_from_the_state() {
        for arch in ["gfx906", "sm90"] {
            let lib = library(&hand(arch)).expect("a library");
            let names: Vec<&str> = lib.files.iter().map(|f| f.name.as_str()).collect();
            let ext = if arch == "sm90" { "cu" } else { "hip" };
            assert_eq!(
                names,
                [
                    format!("hand_{arch}.h"),
                    format!("hand_{arch}_launch.{ext}"),
                    format!("build_hand_{arch}.sh"),
                ]
            );
            let (header, launcher) = (&lib.files[0].text, &lib.files[1].text);
            // The keyword is renamed, the caller's scalar is a field, the state's arrays are not.
            assert!(header.contains("    const void* class_; // f32[16], read"));
            assert!(header.contains("    float scale; // f32 scalar"));
            assert!(!header.contains("payload;") && !header.contains("err;"));
            let prose = header.replace("\n// ", " ");
            assert!(prose.contains("correct for one replay only"), "{header}");
            assert!(launcher.contains("unsigned v2 = ++s->epoch; // epoch"));
            assert!(launcher.contains("float v1 = a->scale; // scale"));
            // TP 1: the one rank's table is filled at creation; no set_peers needed to launch.
            assert!(launcher.contains("s->peers_set = 1;"));
            assert!(launcher.contains("Memcpy(s->table_payload, &own"));
            // An error word in device memory is copied back (that waits for the device).
            assert!(launcher.contains("Memcpy(&v, s->dev_err, sizeof v"));
            // It waits on its grid: the co-residency check runs at creation.
            assert!(launcher.contains("rc = wfl_check_coresident(device);"));
        }
    }

    #[test]
    fn the_library_is_deterministic() {
        assert_eq!(library(&hand("gfx906")), library(&hand("gfx906")));
    }

    #[test]
    fn invalid_abi_slots_or_arch_or_length_are_errors_naming_the_kernel() {
        let mut abi = hand("gfx906");
        abi.tp = 2;
        abi.peer_table = Some(crate::abi::PeerTable {
            entries: 2,
            slots: vec![0, 0],
            rule: String::new(),
        });
        let e = library(&abi).unwrap_err();
        assert!(matches!(e, CLibError::Slots { .. }), "{e}");
        let mut abi = hand("gfx906");
        abi.arch = "gfx1100".into();
        assert!(library(&abi).unwrap_err().to_string().contains("gfx1100"));
        let mut abi = hand("gfx906");
        abi.params[0].len = None;
        let e = library(&abi).unwrap_err().to_string();
        assert!(e.contains("`class`") && e.contains("`hand`"), "{e}");
    }
}
