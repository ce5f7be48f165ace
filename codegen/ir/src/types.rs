//! Scalar types, quantised-weight formats, memory spaces, index spaces and sharding.

use std::fmt;

/// A scalar element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE binary32.
    F32,
    /// Signed 8-bit integer.
    I8,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
}

impl ScalarType {
    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            ScalarType::F16 | ScalarType::Bf16 => 2,
            ScalarType::F32 | ScalarType::I32 | ScalarType::U32 => 4,
            ScalarType::I8 => 1,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32)
    }

    /// The textual-IR name.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::F16 => "f16",
            ScalarType::Bf16 => "bf16",
            ScalarType::F32 => "f32",
            ScalarType::I8 => "i8",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rows of K sharing one scale and zero point.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupSize {
    /// A group of this many consecutive rows of K (GPTQ uses 32, 64 or 128).
    Rows(u32),
    /// One group spanning all of K (per-channel quantisation).
    PerChannel,
}

impl GroupSize {
    /// The group length for a reduction length `k`.
    pub fn rows(self, k: usize) -> usize {
        match self {
            GroupSize::Rows(g) => g as usize,
            GroupSize::PerChannel => k,
        }
    }
}

impl fmt::Display for GroupSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupSize::Rows(g) => write!(f, "{g}"),
            GroupSize::PerChannel => f.write_str("per_channel"),
        }
    }
}

/// How zero points are stored. Never guessed: it is part of the weight's type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ZeroPoint {
    /// GPTQ v1 (`checkpoint_format = "gptq"`): the stored nibble is z − 1; add 1 on load.
    V1,
    /// GPTQ v2 (`checkpoint_format = "gptq_v2"`): the stored nibble is z.
    V2,
    /// No `qzeros` tensor: symmetric quantisation with the implied zero point 8.
    Symmetric,
}

impl ZeroPoint {
    /// The zero point z for a stored nibble (ignored for [`ZeroPoint::Symmetric`]).
    pub fn decode(self, stored: u32) -> i64 {
        match self {
            ZeroPoint::V1 => i64::from(stored & 0xF) + 1,
            ZeroPoint::V2 => i64::from(stored & 0xF),
            ZeroPoint::Symmetric => 8,
        }
    }

    /// The textual-IR name.
    pub fn name(self) -> &'static str {
        match self {
            ZeroPoint::V1 => "v1",
            ZeroPoint::V2 => "v2",
            ZeroPoint::Symmetric => "sym",
        }
    }
}

/// Nibble order of GPTQ packing: nibble `i` (bits 4i..4i+3) holds element `8·word + i`.
pub const GPTQ_NIBBLE_ORDER: [usize; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// Nibble order of AutoAWQ "GEMM" packing: nibble `i` holds column `8·word + AWQ_NIBBLE_ORDER[i]`.
pub const AWQ_NIBBLE_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// The GPTQ INT4 layout (DESIGN.md §2), exactly.
///
/// - `qweight`: i32 `[K/8, N]`, packed along K; nibble `i` of word `(kg, n)` is the unsigned code
///   of row `8·kg + i`, column `n` ([`GPTQ_NIBBLE_ORDER`]).
/// - `scales`: `scale` dtype `[K/G, N]`.
/// - `qzeros`: i32 `[K/G, N/8]`, packed along N with the same nibble order (absent when
///   [`ZeroPoint::Symmetric`]).
/// - `g_idx`: i32 `[K]` when `act_order`: row k belongs to group `g_idx[k]`; otherwise `k / G`.
/// - Dequantisation: `w = (q − z) · s`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct GptqLayout {
    /// Group size along K.
    pub group: GroupSize,
    /// Scale element type (FP16 in every checkpoint we know).
    pub scale: ScalarType,
    /// Zero-point convention.
    pub zero: ZeroPoint,
    /// Act-order: a `g_idx` tensor maps rows to groups.
    pub act_order: bool,
}

impl GptqLayout {
    /// GPTQ with FP16 scales, no act-order.
    pub fn new(group: GroupSize, zero: ZeroPoint) -> Self {
        GptqLayout {
            group,
            scale: ScalarType::F16,
            zero,
            act_order: false,
        }
    }
}

/// The AutoAWQ "GEMM" INT4 layout: `qweight` i32 `[K, N/8]` packed along N in
/// [`AWQ_NIBBLE_ORDER`], `qzeros` i32 `[K/G, N/8]` in the same order, `scales` `[K/G, N]`,
/// `w = (q − z) · s` with z stored as is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AwqLayout {
    /// Group size along K.
    pub group: GroupSize,
    /// Scale element type.
    pub scale: ScalarType,
}

/// The storage format of a weight matrix with logical shape `[K, N]` (y = Wᵀ-free notation:
/// `y[n] = Σ_k W[k, n] · x[k]`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// FP16, stored `[N, K]` row-major (the PyTorch `Linear` layout).
    F16,
    /// GPTQ INT4.
    Gptq(GptqLayout),
    /// AWQ INT4.
    Awq(AwqLayout),
}

impl WeightFormat {
    /// The group layout, for quantised formats.
    pub fn group(&self) -> Option<GroupSize> {
        match self {
            WeightFormat::F16 => None,
            WeightFormat::Gptq(l) => Some(l.group),
            WeightFormat::Awq(l) => Some(l.group),
        }
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightFormat::F16 => f.write_str("f16_nk"),
            WeightFormat::Gptq(l) => {
                write!(
                    f,
                    "gptq<group={}, zero={}, scale={}",
                    l.group,
                    l.zero.name(),
                    l.scale
                )?;
                if l.act_order {
                    f.write_str(", g_idx")?;
                }
                f.write_str(">")
            }
            WeightFormat::Awq(l) => write!(f, "awq<group={}, scale={}>", l.group, l.scale),
        }
    }
}

/// Where a buffer lives. LDS and registers are private to one workgroup (or lane) by type: they
/// can never carry a value between workgroups (DESIGN.md §5.2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemorySpace {
    /// Per-lane registers.
    Register,
    /// Workgroup-shared memory (LDS on AMD, shared memory on NVIDIA).
    Lds,
    /// Device memory of the executing GPU.
    Global,
    /// Device memory of a peer GPU of the TP group, reached over NVLink / PCIe / xGMI.
    PeerGlobal,
    /// Host memory mapped into the device address space.
    HostVisible,
}

impl MemorySpace {
    /// The textual-IR name.
    pub fn name(self) -> &'static str {
        match self {
            MemorySpace::Register => "reg",
            MemorySpace::Lds => "lds",
            MemorySpace::Global => "global",
            MemorySpace::PeerGlobal => "peer",
            MemorySpace::HostVisible => "host",
        }
    }
}

/// The index space in which a buffer's declared shape is expressed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndexSpace {
    /// The shape is the per-rank shard (what one rank's kernel sees).
    Local,
    /// The shape is the whole, unsharded tensor; a sharded axis is divided by `tp` per rank.
    Global,
}

/// How a buffer is distributed over the TP group.
///
/// For a weight `[K, N]`: column-parallel splits N (each rank computes a slice of the outputs),
/// row-parallel splits K (each rank computes partial sums of all outputs). For an activation
/// `[B, F]`: column-parallel splits F into contiguous per-rank slices, and `Partial` holds per-rank
/// partial sums whose sum over ranks is the true value.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sharding {
    /// Every rank holds the same whole tensor.
    Replicated,
    /// Split along N (weights) or along the feature axis (activations), over `tp` ranks.
    ColumnParallel {
        /// Ranks in the TP group.
        tp: u32,
    },
    /// A weight split along K over `tp` ranks.
    RowParallel {
        /// Ranks in the TP group.
        tp: u32,
    },
    /// Per-rank partial sums over `tp` ranks.
    Partial {
        /// Ranks in the TP group.
        tp: u32,
    },
}

impl Sharding {
    /// The TP size this sharding refers to (1 for replicated).
    pub fn tp(self) -> u32 {
        match self {
            Sharding::Replicated => 1,
            Sharding::ColumnParallel { tp }
            | Sharding::RowParallel { tp }
            | Sharding::Partial { tp } => tp,
        }
    }
}

impl fmt::Display for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sharding::Replicated => f.write_str("replicated"),
            Sharding::ColumnParallel { tp } => write!(f, "col_parallel(tp={tp})"),
            Sharding::RowParallel { tp } => write!(f, "row_parallel(tp={tp})"),
            Sharding::Partial { tp } => write!(f, "partial(tp={tp})"),
        }
    }
}

/// The one peer-addressing rule of a TP group (DESIGN.md §5.5): in every rank's table of the
/// group's exchange buffers, slot `peer_slot(p)` holds rank p's buffer. The rule is ascending rank
/// order and does not depend on the executing rank, so every rank also sums the group's partials in
/// the same order and replicated results agree bit for bit. Host code (the facade's `Peers`, the
/// runtime's peer tables) and device code (the lowering and the simulator) all call this function.
pub fn peer_slot(peer: u32) -> usize {
    peer as usize
}

/// Memory ordering of an atomic or fence (used by the lowered level).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ordering {
    /// Atomicity only; no ordering of other accesses.
    Relaxed,
    /// Later accesses of this thread cannot move before it; pairs with a release.
    Acquire,
    /// Earlier accesses of this thread cannot move after it; pairs with an acquire.
    Release,
    /// Both acquire and release.
    AcqRel,
    /// Acquire/release plus a single total order of all seq_cst operations.
    SeqCst,
}

/// The set of threads an atomic or fence synchronises with (used by the lowered level).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The lanes of one wave (warp).
    Wave,
    /// The threads of one workgroup (block).
    Workgroup,
    /// All workgroups of the executing device.
    Agent,
    /// All devices and the host: needed for cross-GPU flags.
    System,
}
