//! Cases: the kernel set's and a user's kernels at TP sizes, batches and shapes (the model's, odd,
//! small, a model's own, a user's own), the one tolerance table, and a case's data (the seeded
//! inputs and their f64 reference).

use std::path::PathBuf;
use std::sync::Arc;

use wavefuse::ir::reference::{RankInputs, RankOutputs, evaluate};
use wavefuse::ir::{GptqLayout, GroupSize, Kernel, ValidationError, ZeroPoint, validate};

use crate::shapes::{HIDDEN, Model};
use crate::sim::{SmallShapes, shrink, small_kernel};
use crate::{KernelId, Shapes, Workload};

// ---------------------------------------------------------------------------------------------
// Tolerances
// ---------------------------------------------------------------------------------------------

/// The relative-L2 tolerance of every kernel's outputs against the f64 reference, and why.
/// Every output is FP16 and the reference rounds at exactly the points the IR spells out, so what
/// remains is the device's FP32 arithmetic (accumulation order, `expf`, `rsqrtf`) against f64
/// flipping a rounding by one FP16 ulp (2⁻¹¹ relative) on a small fraction of elements: ~1e-4 in
/// L2 over a vector. A wrong, stale or missing value is off by O(1) and fails by orders of
/// magnitude. Besides the gate: every element finite (outputs are poisoned with NaN first), and
/// replicated outputs identical bit for bit on every rank.
pub const TOLERANCES: [(KernelId, f64, &str); 8] = [
    (
        KernelId::GemvF16,
        1e-3,
        "one FP16 rounding of an FP32 dot product of 5120 FP16 products",
    ),
    (
        KernelId::GemvInt4,
        1e-3,
        "(q − z)·s is exact in FP32; one FP16 rounding of the FP32 sum (on the sm_90 tensor cores \
         with mma_scale = weight, the default for two weights past batch 32, (q − z)·s is rounded \
         once to FP16: 2⁻¹¹ per weight, ≈3e-4 in L2)",
    ),
    (
        KernelId::GemvInt4DualSilu,
        1e-3,
        "two exact-dequant FP32 sums, silu with expf (≈1e-7 rel.), one FP16 rounding",
    ),
    (
        KernelId::GemvInt4Qkv,
        1e-3,
        "as gemv_int4; three outputs by column range, each rounded once",
    ),
    (
        KernelId::AllreduceResidual,
        1e-3,
        "FP32 sum of tp FP16 partials and the residual in rank order, one FP16 rounding",
    ),
    (
        KernelId::AllreduceResidualRmsnorm,
        1e-3,
        "as allreduce_residual; the norm reads the rounded residual_out (an IR rounding point) \
         and reduces squares in FP32",
    ),
    (
        KernelId::GemvInt4AllreduceRmsnorm,
        1e-3,
        "the FP16 published partial is an IR rounding point; a one-ulp flip there moves the sum \
         by 2⁻¹¹ of one partial; then as allreduce_residual_rmsnorm",
    ),
    (
        KernelId::AllreduceInt8,
        wavefuse_codegen::sim::INT8_TOLERANCE,
        "against its own compressed semantics (the reference quantises with the same f32 scale \
         absmax/127): the device's FP32 x/s can round to the neighbouring code only within an f32 \
         ulp of a half-integer (≈4e-6 per element), one code = s ≈ 3 % of a block's max on one \
         element: ≈2e-4 rel. L2 over 5120 features, but ≈1.1e-3 over the simulator's 128-feature \
         rows, so one gate for both, the simulator's (`sim::INT8_TOLERANCE`); a stale or missing \
         payload is off by whole values, far above it",
    ),
];

/// The tolerance and its reason for kernel `id`.
pub fn tolerance(id: KernelId) -> (f64, &'static str) {
    let (_, tol, why) = TOLERANCES
        .iter()
        .find(|(k, _, _)| *k == id)
        .expect("every kernel has a tolerance");
    (*tol, why)
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// Which shapes a case uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShapeKind {
    /// DESIGN.md §1 (Qwen 3.5 27B) per-rank shapes.
    Model,
    /// N not a multiple of the tile (INT4: N a multiple of 8 for `qzeros`, not of 32; FP16: not
    /// even of 8; allreduce kernels: hidden 4360, INT8: 4352, whole blocks of 128 as the validator
    /// requires, not a whole number of 1024-feature workgroup tiles).
    OddN,
    /// K with a partial group where legal: per-channel GPTQ groups with K = 4104, not a multiple
    /// of 128 nor of the lanes' K slices; FP16: the same K (the lowering requires K % 8 == 0 for
    /// FP16 and says so).
    OddK,
    /// The simulator's small shapes and schedule (`wavefuse sim`), for sanitizer runs.
    Small,
    /// A model's own dimensions (`--model-config config.json`), per rank as for
    /// [`ShapeKind::Model`]; tuned-store entries are under the model's shape-set names.
    Of(Model),
    /// A user's kernel at the shapes it was written with ([`UserKernel`]).
    Own,
}

impl ShapeKind {
    /// Its name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ShapeKind::Model => "model",
            ShapeKind::OddN => "odd-n",
            ShapeKind::OddK => "odd-k",
            ShapeKind::Small => "small",
            ShapeKind::Of(_) => "config",
            ShapeKind::Own => "own",
        }
    }
}

/// A user's kernel: the textual IR of a file (`--kernel-file`) or a kernel built in the user's
/// own crate, validated, at its own shapes. It goes through the same pipeline as the set's kernels
/// ([`generate`](crate::pipeline::generate), [`prepare`](crate::pipeline::prepare), `ab`, `run`, `tune`); what it lacks is only what the set keeps per
/// kernel: a shape family to rebuild it at (it has one shape, its own), a hand-written reference
/// (give one with `--manual`/`--abi`) and a per-kernel tolerance (it gets the one of its output
/// types, [`wavefuse_codegen::sim::tolerance_for`]).
#[derive(Clone, Debug, PartialEq)]
pub struct UserKernel {
    /// Where it came from: the file's path, or what the user's crate calls it.
    pub origin: String,
    /// The op-level kernel (validated).
    pub ir: Kernel,
    /// Tokens per launch: the rows of its activations (the leading dimension of its first 2-D
    /// tensor parameter; 1 when it has none).
    pub batch: usize,
    /// FNV-1a of the printed IR: which text a tuned-store entry was tuned for.
    fingerprint: u64,
}

impl UserKernel {
    /// `ir`, validated; `origin` says where it came from in messages.
    pub fn new(ir: Kernel, origin: impl Into<String>) -> Result<UserKernel, KernelError> {
        let origin = origin.into();
        if let Err(e) = validate(&ir) {
            return Err(KernelError::Invalid {
                origin,
                source: Box::new(e),
            });
        }
        let batch = ir
            .buffers()
            .find_map(|(_, d)| match d.local_type() {
                wavefuse::ir::BufferType::Tensor(t) if t.shape.len() == 2 => Some(t.shape[0]),
                _ => None,
            })
            .unwrap_or(1);
        let fingerprint = ir
            .to_string()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        Ok(UserKernel {
            origin,
            ir,
            batch,
            fingerprint,
        })
    }

    /// The kernel of a `.wfir` file: parse errors as `PATH:line:column` with the token, validation
    /// errors naming the file.
    pub fn read(path: &std::path::Path) -> Result<UserKernel, KernelError> {
        let ir = read_kernel_file(path)?;
        UserKernel::new(ir, path.display().to_string())
    }

    /// The kernel's name (the IR's).
    pub fn name(&self) -> &str {
        self.ir.name()
    }

    /// The tuned store's shape key of this exact kernel text: `ir-` and 16 hex digits.
    pub fn store_shape(&self) -> String {
        format!("ir-{:016x}", self.fingerprint)
    }

    /// The case of this kernel at its own shapes.
    pub fn case(self: &Arc<Self>) -> CaseSpec {
        CaseSpec {
            kernel: CaseKernel::User(Arc::clone(self)),
            tp: self.ir.tp(),
            batch: self.batch,
            shape: ShapeKind::Own,
        }
    }

    /// The relative-L2 tolerance of its outputs: the largest of its output types' (as the
    /// simulator judges them).
    pub fn tolerance(&self) -> f64 {
        self.ir
            .buffers()
            .filter(|(_, d)| d.role == wavefuse::ir::Role::Output)
            .map(|(b, _)| {
                wavefuse_codegen::sim::tolerance_for(&self.ir, crate::sim::dtype(&self.ir, b))
            })
            .fold(0.0, f64::max)
    }
}

/// The kernel of a case: one of the set's (built at the case's shapes) or a user's.
#[derive(Clone, Debug)]
pub enum CaseKernel {
    /// A kernel of the set.
    Set(KernelId),
    /// A user's kernel at its own shapes.
    User(Arc<UserKernel>),
}

impl CaseKernel {
    /// Its name in tables, labels and the tuned store.
    pub fn name(&self) -> &str {
        match self {
            CaseKernel::Set(id) => id.name(),
            CaseKernel::User(u) => u.name(),
        }
    }

    /// The set's kernel, if it is one.
    pub fn set_id(&self) -> Option<KernelId> {
        match self {
            CaseKernel::Set(id) => Some(*id),
            CaseKernel::User(_) => None,
        }
    }

    /// The relative-L2 tolerance of its outputs against the f64 reference, and why.
    pub fn tolerance(&self) -> (f64, &'static str) {
        match self {
            CaseKernel::Set(id) => tolerance(*id),
            CaseKernel::User(u) => (
                u.tolerance(),
                "a user's kernel: the tolerance of its output types (FP16 outputs: one rounding \
                 of FP32 arithmetic)",
            ),
        }
    }
}

impl From<KernelId> for CaseKernel {
    fn from(id: KernelId) -> CaseKernel {
        CaseKernel::Set(id)
    }
}

impl PartialEq for CaseKernel {
    fn eq(&self, other: &CaseKernel) -> bool {
        match (self, other) {
            (CaseKernel::Set(a), CaseKernel::Set(b)) => a == b,
            (CaseKernel::User(a), CaseKernel::User(b)) => {
                Arc::ptr_eq(a, b) || (a.fingerprint == b.fingerprint && a.ir == b.ir)
            }
            _ => false,
        }
    }
}

impl Eq for CaseKernel {}

impl std::hash::Hash for CaseKernel {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            CaseKernel::Set(id) => id.hash(h),
            CaseKernel::User(u) => u.fingerprint.hash(h),
        }
    }
}

impl std::fmt::Display for CaseKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One case: a kernel, TP size, batch and shapes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CaseSpec {
    /// The kernel.
    pub kernel: CaseKernel,
    /// TP size (ranks on one device).
    pub tp: u32,
    /// Tokens decoded at once.
    pub batch: usize,
    /// Shapes.
    pub shape: ShapeKind,
}

impl CaseSpec {
    /// The set's kernel `id` at TP `tp`, batch `batch`, shapes `shape`.
    pub fn of(id: KernelId, tp: u32, batch: usize, shape: ShapeKind) -> CaseSpec {
        CaseSpec {
            kernel: CaseKernel::Set(id),
            tp,
            batch,
            shape,
        }
    }

    /// `kernel@tpN/shape/bB`.
    pub fn label(&self) -> String {
        format!(
            "{}@tp{}/{}/b{}",
            self.kernel.name(),
            self.tp,
            self.shape.name(),
            self.batch
        )
    }

    /// The case at the simulator's small shapes: the set's kernel rebuilt small; a user's kernel
    /// has only its own shapes, so it is simulated at those.
    pub fn small(&self) -> CaseSpec {
        match self.kernel {
            CaseKernel::Set(_) => CaseSpec {
                shape: ShapeKind::Small,
                ..self.clone()
            },
            CaseKernel::User(_) => self.clone(),
        }
    }

    /// The tuned store's key of the case (kernel name, shape-set name), when the store has
    /// entries for its kind of shapes: the model shapes (Qwen's or a config's, by shape-set
    /// name) and a user's kernel (by the fingerprint of its text); not the odd or small shapes.
    pub fn store_key(&self) -> Option<(String, String)> {
        let name = self.kernel.name().to_owned();
        match (&self.kernel, self.shape) {
            (CaseKernel::User(u), _) => Some((name, u.store_shape())),
            (_, ShapeKind::Model | ShapeKind::Of(_)) => Some((name, shape_name(self))),
            _ => None,
        }
    }
}

/// The odd dimensions (see [`ShapeKind`]).
const ODD_INT4_N: usize = 4360;
const ODD_F16_N: usize = 3001;
const ODD_HIDDEN: usize = 4360;
const ODD_INT8_HIDDEN: usize = 4352;
const ODD_Q: usize = 1544;
const ODD_KV: usize = 264;
const ODD_K: usize = 4104;
const ODD_FFN_K: usize = 2184;

/// Every feature dimension of the set at `s`, mapped to itself.
fn identity(s: &Shapes) -> Vec<(usize, usize)> {
    let (q, kv) = (s.q_local(), s.kv_local());
    [s.hidden(), s.ffn_local(), q, kv, q + kv, q + 2 * kv, 0]
        .into_iter()
        .map(|d| (d, d))
        .collect()
}

fn set(map: &mut [(usize, usize)], from: usize, to: usize) {
    for m in map.iter_mut().filter(|m| m.0 == from) {
        m.1 = to;
    }
}

/// The dimension map of an odd case, or `None` when the shape does not apply to the kernel.
fn odd_map(id: KernelId, s: &Shapes, kind: ShapeKind) -> Option<Vec<(usize, usize)>> {
    use KernelId::*;
    let mut map = identity(s);
    let (q, kv, ffn) = (s.q_local(), s.kv_local(), s.ffn_local());
    match (kind, id) {
        (ShapeKind::OddN, GemvF16) => set(&mut map, q, ODD_F16_N),
        (ShapeKind::OddN, GemvInt4 | GemvInt4DualSilu) => set(&mut map, ffn, ODD_INT4_N),
        (ShapeKind::OddN, GemvInt4Qkv) => {
            set(&mut map, q, ODD_Q);
            set(&mut map, kv, ODD_KV);
            set(&mut map, q + kv, ODD_Q + ODD_KV);
            set(&mut map, q + 2 * kv, ODD_Q + 2 * ODD_KV);
        }
        // INT8 blocks must be whole (the validator): 34 blocks, not a multiple of the tile.
        (ShapeKind::OddN, AllreduceInt8) => set(&mut map, HIDDEN, ODD_INT8_HIDDEN),
        (ShapeKind::OddN, _) => set(&mut map, HIDDEN, ODD_HIDDEN),
        (ShapeKind::OddK, GemvF16) => set(&mut map, HIDDEN, ODD_K),
        (ShapeKind::OddK, GemvInt4 | GemvInt4DualSilu | GemvInt4Qkv) => {
            set(&mut map, HIDDEN, ODD_K)
        }
        (ShapeKind::OddK, GemvInt4AllreduceRmsnorm) => set(&mut map, ffn, ODD_FFN_K),
        (ShapeKind::OddK, _) => return None,
        (ShapeKind::Model | ShapeKind::Small | ShapeKind::Of(_) | ShapeKind::Own, _) => {
            unreachable!("not an odd shape")
        }
    }
    Some(map)
}

/// The op-level kernel of a case (validated), or `Ok(None)` when the shape does not apply.
pub fn op_kernel(c: &CaseSpec) -> Result<Option<Kernel>, KernelError> {
    let id = match (&c.kernel, c.shape) {
        (CaseKernel::Set(id), ShapeKind::Own) => return Err(KernelError::NoOwnShapes(*id)),
        (CaseKernel::Set(id), _) => *id,
        (CaseKernel::User(u), ShapeKind::Own) => return Ok(Some(u.ir.clone())),
        (CaseKernel::User(u), shape) => {
            return Err(KernelError::OwnShapesOnly {
                name: u.name().to_owned(),
                origin: u.origin.clone(),
                shape: shape.name(),
            });
        }
    };
    let mut s = Shapes {
        batch: c.batch,
        ..Shapes::qwen27b(c.tp)
    };
    let kernel = match c.shape {
        ShapeKind::Model => id.build(&s),
        ShapeKind::Of(model) => id.build(&Shapes {
            model,
            gptq: model.gptq,
            ..s
        }),
        ShapeKind::Small => small_kernel(id, &s, &SmallShapes::DEFAULT)?,
        odd => {
            if odd == ShapeKind::OddK {
                s.gptq = GptqLayout::new(GroupSize::PerChannel, ZeroPoint::V1);
            }
            let Some(map) = odd_map(id, &s, odd) else {
                return Ok(None);
            };
            shrink(&id.build(&s), &map)?
        }
    };
    validate(&kernel).map_err(|e| KernelError::NotValid(Box::new(e)))?;
    Ok(Some(kernel))
}

/// The suite's cases. Full: per TP, the model shapes at batch 1, 3 and 8, odd N at batch 3, odd
/// K at batch 1 and 8. Quick: per TP, the model shapes at batch 1 and odd N at batch 3.
pub fn cases(quick: bool, kernels: &[KernelId], tps: &[u32]) -> Vec<CaseSpec> {
    cases_at(quick, kernels, tps, ShapeKind::Model)
}

/// [`cases`] at `model`: a model's own shapes ([`ShapeKind::Of`]) at batch 1, 3 and 8 (quick:
/// batch 1) — the odd shapes are Qwen 3.5 27B's — or [`cases`] for [`ShapeKind::Model`].
pub fn cases_at(quick: bool, kernels: &[KernelId], tps: &[u32], model: ShapeKind) -> Vec<CaseSpec> {
    if let ShapeKind::Of(_) = model {
        let batches: &[usize] = if quick { &[1] } else { &[1, 3, 8] };
        return kernels
            .iter()
            .flat_map(|&id| {
                tps.iter().flat_map(move |&tp| {
                    batches.iter().map(move |&batch| CaseSpec {
                        kernel: id.into(),
                        tp,
                        batch,
                        shape: model,
                    })
                })
            })
            .collect();
    }
    let shapes: &[(ShapeKind, usize)] = if quick {
        &[(ShapeKind::Model, 1), (ShapeKind::OddN, 3)]
    } else {
        &[
            (ShapeKind::Model, 1),
            (ShapeKind::Model, 3),
            (ShapeKind::Model, 8),
            (ShapeKind::OddN, 3),
            (ShapeKind::OddK, 1),
            (ShapeKind::OddK, 8),
        ]
    };
    let mut out = Vec::new();
    for &id in kernels {
        for &tp in tps {
            for &(shape, batch) in shapes {
                let c = CaseSpec {
                    kernel: id.into(),
                    tp,
                    batch,
                    shape,
                };
                let applies = !matches!(shape, ShapeKind::OddN | ShapeKind::OddK)
                    || odd_map(id, &Shapes::qwen27b(tp), shape).is_some();
                if applies {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Why a case could not be prepared.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PrepError {
    /// The shape does not apply to this kernel, or is not legal for it.
    #[error("not applicable: {0}")]
    NotApplicable(String),
    /// The lowering or writer does not support the kernel yet.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    /// Refused at compile time: the kernel has a grid barrier and the placement's grids cannot
    /// all be resident on one device (DESIGN.md §5.9), so it would never get past the barrier.
    #[error("refused, not co-resident: {0}")]
    NotCoResident(String),
    /// Refused: beyond one of the documented limits (docs/errors.md) — a buffer beyond the
    /// generated code's 32-bit indices, an op chain deeper than the lowering accepts, inputs
    /// beyond the host memory budget.
    #[error("refused: {0}")]
    Limit(String),
    /// A bug: lowering, writing or the reference failed.
    #[error("{0}")]
    Failed(String),
}

/// Inputs and the f64 reference outputs for them.
#[derive(Clone, Debug)]
pub struct Data {
    /// The workload seed.
    pub seed: u64,
    /// Per rank.
    pub inputs: Vec<RankInputs>,
    /// Per rank: [`evaluate`] on `inputs`.
    pub reference: Vec<RankOutputs>,
}

impl Data {
    /// The seeded workload's inputs for `ir` and their reference.
    pub fn new(ir: &Kernel, seed: u64) -> Result<Data, PrepError> {
        let inputs = Workload::new(seed)
            .try_inputs(ir)
            .map_err(|e| PrepError::Limit(e.to_string()))?;
        let reference =
            evaluate(ir, &inputs).map_err(|e| PrepError::Failed(format!("reference: {e}")))?;
        Ok(Data {
            seed,
            inputs,
            reference,
        })
    }
}

/// A seed derived from `seed` and `i` (splitmix64).
pub fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------------------------------------
// Names and files
// ---------------------------------------------------------------------------------------------

/// A shape set: the Qwen 3.5 27B decode shapes at one TP size and batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ShapeSet {
    /// TP size.
    pub tp: u32,
    /// Tokens per launch.
    pub batch: usize,
}

impl ShapeSet {
    /// `qwen27b-tp4`, `qwen27b-tp4-b8`.
    pub fn name(&self) -> String {
        let mut s = format!("qwen27b-tp{}", self.tp);
        if self.batch != 1 {
            s.push_str(&format!("-b{}", self.batch));
        }
        s
    }
}

/// `qwen27b-tp4` (with `-bB` past batch 1).
pub fn shape_name(c: &CaseSpec) -> String {
    let qwen = ShapeSet {
        tp: c.tp,
        batch: c.batch,
    }
    .name();
    match c.shape {
        // `h2048-f5632-q2048-kv256-d64-tp2`, `…-tp2-b8`.
        ShapeKind::Of(m) => qwen.replacen("qwen27b", &m.name(), 1),
        // A user's kernel at its own shapes: `own-tp4`, `own-tp4-b4`.
        ShapeKind::Own => qwen.replacen("qwen27b", "own", 1),
        _ => qwen,
    }
}

/// Why the kernel from `origin` (a file, a crate) is not valid: the error, which starts with
/// `file:line:column` where it is about an op whose place is known, else after `origin`.
pub fn invalid_kernel(origin: &str, e: &wavefuse::ir::ValidationError) -> String {
    match e {
        wavefuse::ir::ValidationError::Op { at: Some(_), .. } => {
            format!("{e} (the kernel is not valid)")
        }
        _ => format!("{origin}: the kernel is not valid: {e}"),
    }
}

/// A kernel from a file in the textual IR, parsed; the error (with `PATH:line:column`, the token
/// and the offending line) when it cannot be read or does not parse.
pub fn read_kernel_file(path: &std::path::Path) -> Result<wavefuse::ir::Kernel, KernelError> {
    let text = std::fs::read_to_string(path).map_err(|source| KernelError::Read {
        path: path.to_owned(),
        source,
    })?;
    wavefuse::ir::parse_named(&text, &path.display().to_string()).map_err(|e| KernelError::Parse {
        path: path.to_owned(),
        report: e.report(&text),
    })
}

/// Why a case's or a user's kernel could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A kernel file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A kernel file does not parse.
    #[error("{}:{report}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// `line:column`, the token and the offending line.
        report: String,
    },
    /// A user's kernel does not validate ([`invalid_kernel`] words it).
    #[error("{}", invalid_kernel(origin, source))]
    Invalid {
        /// Where the kernel came from.
        origin: String,
        /// What the validator found.
        source: Box<ValidationError>,
    },
    /// A set kernel was asked for its own shapes ([`ShapeKind::Own`]).
    #[error("`{0}` has no shapes of its own; use the model shapes")]
    NoOwnShapes(KernelId),
    /// A user's kernel was asked for the set's shapes.
    #[error("`{name}` ({origin}) is a kernel at its own shapes; the {shape} shapes are the set's")]
    OwnShapesOnly {
        /// The kernel's name.
        name: String,
        /// Where it came from.
        origin: String,
        /// The shapes asked for.
        shape: &'static str,
    },
    /// The kernel could not be shrunk to the small or odd shapes.
    #[error(transparent)]
    Shrink(#[from] crate::sim::ShrinkError),
    /// A set kernel built at the case's shapes does not validate.
    #[error("{0}")]
    NotValid(Box<ValidationError>),
}

/// Where a caller still words errors as text.
impl From<KernelError> for String {
    fn from(e: KernelError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::TP_SIZES;

    #[test]
    fn every_kernel_has_one_tolerance() {
        for id in KernelId::ALL {
            assert_eq!(
                TOLERANCES.iter().filter(|(k, _, _)| *k == id).count(),
                1,
                "{id}"
            );
            let (tol, why) = tolerance(id);
            let most = if id == KernelId::AllreduceInt8 {
                wavefuse_codegen::sim::INT8_TOLERANCE
            } else {
                1e-3
            };
            assert!(tol > 0.0 && tol <= most && !why.is_empty());
        }
    }

    /// The set's per-kernel tolerances and the rule by output type that a user's kernel gets
    /// (`wavefuse_codegen::sim::tolerance_for`, what the simulator judges by) are one policy: a
    /// kernel of the set is never judged more leniently than the same kernel would be as a
    /// user's, and `allreduce_int8` is judged by the same gate on a GPU and in the simulator.
    #[test]
    fn the_sets_tolerances_are_never_looser_than_a_users() {
        for id in KernelId::ALL {
            for tp in [1, 4] {
                let ir = id.build(&Shapes::qwen27b(tp));
                let users = UserKernel::new(ir, id.name()).expect("valid").tolerance();
                let (set, _) = tolerance(id);
                assert!(set <= users, "{id}@tp{tp}: set {set} > user's {users}");
                if id == KernelId::AllreduceInt8 {
                    assert_eq!(set, users, "{id}@tp{tp}: one gate, GPU and simulator");
                }
            }
        }
    }

    #[test]
    fn odd_shapes_are_odd_and_legal() {
        for c in cases(false, &KernelId::ALL, &TP_SIZES) {
            if c.shape == ShapeKind::Model {
                continue;
            }
            let k = op_kernel(&c)
                .unwrap_or_else(|e| panic!("{}: {e}", c.label()))
                .expect("listed cases apply");
            for (_, d) in k.buffers() {
                if let wavefuse::ir::BufferType::Weight(w) = d.local_type() {
                    assert!(
                        w.n % 32 != 0 || w.k % 128 != 0,
                        "{}: {}→{} is not odd",
                        c.label(),
                        w.k,
                        w.n
                    );
                }
            }
        }
    }

    #[test]
    fn quick_cases_cover_every_kernel_and_tp() {
        let c = cases(true, &KernelId::ALL, &TP_SIZES);
        assert_eq!(c.len(), 8 * 4 * 2);
        let full = cases(false, &KernelId::ALL, &TP_SIZES);
        // Odd K applies to the five kernels with weights.
        assert_eq!(full.len(), 8 * 4 * 4 + 5 * 4 * 2);
    }
}
