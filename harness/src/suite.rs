//! The GPU suite (DESIGN.md §7, issue 5): every kernel of the set at TP = 1, 2, 4, 8 with all ranks
//! on one device, at the §1 shapes and odd shapes, against the f64 reference on fresh random inputs
//! with outputs poisoned first; 10,000 back-to-back launches of every synchronising kernel; a JSON
//! results file and a Markdown table. Also the pieces `wavefuse run` shares: the tolerance table,
//! case building, preparation (inputs and reference), and execution on a device.
//!
//! With `--placement per-device` ([`SuitePlacement::PerDevice`]) rank r runs on GPU r instead: the
//! communicating kernels at TP 2 and 4 (TP ≤ visible GPUs, refused otherwise), cross-device flags
//! and peer buffers, with a deliberate launch skew between the GPUs ([`Skew`]) on every launch,
//! including the 10,000-launch stress run.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Value as Json, json};
use wavefuse::ir::reference::{RankInputs, RankOutputs, evaluate};
use wavefuse::ir::{GptqLayout, GroupSize, Kernel, ZeroPoint, validate};
use wavefuse_codegen::lower::LowerError;
use wavefuse_codegen::lowered::LoweredKernel;
use wavefuse_codegen::{Arch, CompileError};
use wavefuse_runtime::compile::{Compiler, Nvrtc, default_compiler};
use wavefuse_runtime::exec::{self, ArtifactSource, OpKernel, OutputMetrics};
use wavefuse_runtime::rank::{Skew, per_device_ordinals};
use wavefuse_runtime::{
    Cache, CompileRequest, CudaDevice, Device, DeviceError, Error as RtError, HipDevice, RankGroup,
    SameDeviceMode,
};

use crate::policy::{Placement, SchedulePolicy};
use crate::provenance::Provenance;
use crate::shapes::{HIDDEN, Model, TP_SIZES};
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
        "(q − z)·s is exact in FP32; one FP16 rounding of the FP32 sum",
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
        1e-3,
        "against its own compressed semantics (the reference quantises with the same f32 scale \
         absmax/127): the device's FP32 x/s can round to the neighbouring code only within an f32 \
         ulp of a half-integer (≈4e-6 per element), one code = s ≈ 3 % of a block's max on one \
         element: ≈2e-4 rel. L2 over 5120 features",
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
/// ([`generate`], [`prepare`], `ab`, `run`, `tune`); what it lacks is only what the set keeps per
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
    pub fn new(ir: Kernel, origin: impl Into<String>) -> Result<UserKernel, String> {
        let origin = origin.into();
        validate(&ir).map_err(|e| crate::generate::invalid_kernel(&origin, &e))?;
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
    pub fn read(path: &std::path::Path) -> Result<UserKernel, String> {
        let ir = crate::generate::read_kernel_file(path)?;
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
            (_, ShapeKind::Model | ShapeKind::Of(_)) => Some((name, crate::ab::shape_name(self))),
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
pub fn op_kernel(c: &CaseSpec) -> Result<Option<Kernel>, String> {
    let id = match (&c.kernel, c.shape) {
        (CaseKernel::Set(id), ShapeKind::Own) => {
            return Err(format!(
                "`{id}` has no shapes of its own; use the model shapes"
            ));
        }
        (CaseKernel::Set(id), _) => *id,
        (CaseKernel::User(u), ShapeKind::Own) => return Ok(Some(u.ir.clone())),
        (CaseKernel::User(u), shape) => {
            return Err(format!(
                "`{}` ({}) is a kernel at its own shapes; the {} shapes are the set's",
                u.name(),
                u.origin,
                shape.name()
            ));
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
    validate(&kernel).map_err(|e| e.to_string())?;
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
#[derive(Clone, Debug)]
pub enum PrepError {
    /// The shape does not apply to this kernel, or is not legal for it.
    NotApplicable(String),
    /// The lowering or writer does not support the kernel yet.
    Unsupported(String),
    /// Refused at compile time: the kernel has a grid barrier and the placement's grids cannot
    /// all be resident on one device (DESIGN.md §5.9), so it would never get past the barrier.
    NotCoResident(String),
    /// Refused: beyond one of the documented limits (docs/errors.md) — a buffer beyond the
    /// generated code's 32-bit indices, an op chain deeper than the lowering accepts, inputs
    /// beyond the host memory budget.
    Limit(String),
    /// A bug: lowering, writing or the reference failed.
    Failed(String),
}

impl std::error::Error for PrepError {}

impl std::fmt::Display for PrepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepError::NotApplicable(m) => write!(f, "not applicable: {m}"),
            PrepError::Unsupported(m) => write!(f, "not supported yet: {m}"),
            PrepError::NotCoResident(m) => write!(f, "refused, not co-resident: {m}"),
            PrepError::Limit(m) => write!(f, "refused: {m}"),
            PrepError::Failed(m) => f.write_str(m),
        }
    }
}

/// A case generated for a target (no data yet): the op-level kernel and the one
/// [`wavefuse_codegen::Generated`] (lowered kernel, source, ABI, schedule) that every consumer
/// uses; it dereferences to the latter.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The case.
    pub spec: CaseSpec,
    /// The op-level kernel.
    pub ir: Kernel,
    /// The placement its schedule was fitted for.
    pub placement: Placement,
    /// What [`wavefuse_codegen::compile`] made of it.
    pub code: wavefuse_codegen::Generated,
}

impl std::ops::Deref for Generated {
    type Target = wavefuse_codegen::Generated;
    fn deref(&self) -> &wavefuse_codegen::Generated {
        &self.code
    }
}

impl Generated {
    /// Per-rank weight and tensor shapes, `K→N` for weights.
    pub fn dims(&self) -> String {
        let ws: Vec<String> = self
            .ir
            .buffers()
            .filter_map(|(_, d)| match d.local_type() {
                wavefuse::ir::BufferType::Weight(w) => Some(format!("{}→{}", w.k, w.n)),
                wavefuse::ir::BufferType::Tensor(_) => None,
            })
            .collect();
        if ws.is_empty() {
            let first = self
                .ir
                .buffers()
                .next()
                .map(|(_, d)| d.local_type().to_string());
            return first.unwrap_or_default();
        }
        ws.join(" + ")
    }
}

/// The pipeline's generation step, the only one: build the case's kernel, resolve its schedule's
/// sources with `policy` for `placement` and generate it ([`SchedulePolicy::resolve`]: codegen
/// fits the schedule while lowering, once). `wavefuse emit`, `check`, the snapshots, `ab`, `run`,
/// the GPU suite and the examples all come through here, so what is reviewed is what is measured.
pub fn generate(
    c: &CaseSpec,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
) -> Result<Generated, PrepError> {
    let ir = match op_kernel(c) {
        Ok(Some(k)) => k,
        Ok(None) => return Err(PrepError::NotApplicable(c.shape.name().into())),
        Err(e) => return Err(PrepError::NotApplicable(e)),
    };
    let resolved = policy
        .resolve(c, arch, &ir, placement)
        .map_err(PrepError::from)?;
    if let Some(note) = &resolved.note {
        eprintln!("{note}");
    }
    Ok(Generated {
        spec: c.clone(),
        ir,
        placement,
        code: resolved.code,
    })
}

impl From<CompileError> for PrepError {
    fn from(e: CompileError) -> PrepError {
        match e {
            CompileError::Lower(LowerError::Unsupported(m)) => PrepError::Unsupported(m),
            CompileError::Lower(LowerError::NotCoResident(n)) => {
                PrepError::NotCoResident(n.to_string())
            }
            CompileError::Lower(
                e @ (LowerError::IndexWidth { .. } | LowerError::TooDeep { .. }),
            ) => PrepError::Limit(e.to_string()),
            CompileError::Lower(e) => PrepError::Failed(format!("lowering: {e}")),
            e if e.is_unsupported() => PrepError::Unsupported(e.to_string()),
            e => PrepError::Failed(e.to_string()),
        }
    }
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

/// A case ready to run: generated, with data, and fresh data for the last launch of the stress
/// run when the kernel synchronises.
pub struct Prepared {
    /// The generated kernel.
    pub g: Generated,
    /// The correctness run's data.
    pub data: Data,
    /// Data for the stress run's last launch.
    pub fresh: Option<Data>,
}

/// Generate a case ([`generate`]) and its data (seed `seed`; the stress run's fresh data uses a
/// derived seed).
pub fn prepare(
    c: &CaseSpec,
    arch: Arch,
    policy: &SchedulePolicy,
    placement: Placement,
    seed: u64,
    stress: bool,
) -> Result<Prepared, PrepError> {
    let g = generate(c, arch, policy, placement)?;
    let data = Data::new(&g.ir, seed)?;
    let fresh = if stress && synchronises(&g.lowered) {
        Some(Data::new(&g.ir, mix(seed, 0xF8E5))?)
    } else {
        None
    };
    Ok(Prepared { g, data, fresh })
}

/// Whether a lowered kernel has a grid barrier or cross-rank flags.
pub fn synchronises(k: &LoweredKernel) -> bool {
    k.coresidency.is_some() || k.flag_rounds_per_launch > 0
}

/// A seed derived from `seed` and `i` (splitmix64).
pub fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------------------------------------
// Execution on a device
// ---------------------------------------------------------------------------------------------

/// The compiler used for generated code: NVRTC without include paths for sm_90 (the generated
/// CUDA needs no header, and the cache key then does not depend on where headers live), the
/// default for other targets.
pub fn compiler_for(arch: Arch) -> Box<dyn Compiler> {
    match arch {
        Arch::Sm90 => Box::new(Nvrtc::with_includes(Vec::new())),
        Arch::Gfx906 => default_compiler(arch),
    }
}

/// Points `$WAVEFUSE_NVRTC_LIB` at a CUDA toolkit's NVRTC when it is unset and NVRTC is not on the
/// loader's path. Call before any thread is spawned (it sets an environment variable).
pub fn locate_nvrtc() -> Option<std::path::PathBuf> {
    let path = exec::artifacts::nvrtc_fallback()?;
    // SAFETY: called at the start of a command, before this process spawns any thread, so no
    // other thread reads the environment concurrently.
    unsafe { std::env::set_var("WAVEFUSE_NVRTC_LIB", &path) };
    Some(path)
}

/// The NVIDIA GPU, or the message to print when there is none.
pub fn open_cuda() -> Result<CudaDevice, String> {
    CudaDevice::new(0).map_err(|e| match e {
        DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. } => {
            format!("no NVIDIA GPU/driver found: {e}; run with --device cpu-ref or --device sim")
        }
        e => format!("opening the NVIDIA GPU: {e}"),
    })
}

/// What one back-to-back run found.
#[derive(Clone, Debug)]
pub struct Stress {
    /// Back-to-back launches completed (the burst; the launch on fresh data follows it).
    pub launches: u32,
    /// The epoch of the last launch.
    pub last_epoch: u32,
    /// Wall time of the burst.
    pub seconds: f64,
    /// Burst launches per second (all ranks of a launch count once).
    pub launches_per_s: f64,
    /// A timeout or launch failure, if any.
    pub error: Option<String>,
    /// The burst's last outputs against the reference of the unchanged inputs.
    pub burst: Vec<OutputMetrics>,
    /// The last launch (fresh inputs, outputs poisoned) against its reference.
    pub last: Vec<OutputMetrics>,
}

/// The outcome of running a prepared case on a device.
#[derive(Clone, Debug)]
pub struct Executed {
    /// Where the artifact came from.
    pub artifact: ArtifactSource,
    /// The compiler's version string.
    pub compiler: String,
    /// Per output and rank.
    pub metrics: Vec<OutputMetrics>,
    /// Wall time of the launch, including the wait.
    pub run_ms: f64,
    /// The stress run, when asked for and the kernel synchronises.
    pub stress: Option<Stress>,
}

/// Compile (through the cache), bind, upload, poison, launch, read back and compare; then, when
/// `stress_launches > 0` and the case has fresh data, the back-to-back run. All ranks on `device`.
pub fn execute<D: Device>(
    device: D,
    p: &Prepared,
    cache: &Cache,
    stress_launches: u32,
) -> Result<Executed, RtError> {
    let group = RankGroup::on_one_device(device, p.g.lowered.tp, SameDeviceMode::Streams)?;
    execute_on(
        &group,
        p,
        cache,
        stress_launches,
        crate::ab::LaunchMode::Stream,
    )
}

/// As [`execute`] without the stress run, the ranks launched one after another, each alone on
/// `device` (a kernel that does not communicate, fitted for one rank per device: how TP deploys
/// it where its ranks do not fit on one device together).
pub fn execute_alone<D: Device>(
    device: D,
    p: &Prepared,
    cache: &Cache,
) -> Result<Executed, RtError> {
    let group = RankGroup::on_one_device(device, p.g.lowered.tp, SameDeviceMode::Streams)?;
    let g = &p.g;
    let compiler = compiler_for(g.lowered.arch);
    let req = CompileRequest::new(&g.lowered.name, g.source.text.clone(), g.lowered.arch);
    let (artifact, source) = exec::artifact_for(cache, compiler.as_ref(), &req)?;
    let mut k = OpKernel::new(&group, &g.ir, &g.abi, &artifact)?;
    let start = Instant::now();
    let outputs = k.run_each_alone(&p.data.inputs)?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(Executed {
        artifact: source,
        compiler: artifact.compiler_version.clone(),
        metrics: exec::compare(&g.ir, &outputs, &p.data.reference),
        run_ms,
        stress: None,
    })
}

/// As [`execute`], on a rank group built by the caller (one rank per device, skewed, …).
pub fn execute_on<D: Device>(
    group: &RankGroup<D>,
    p: &Prepared,
    cache: &Cache,
    stress_launches: u32,
    launch: crate::ab::LaunchMode,
) -> Result<Executed, RtError> {
    let g = &p.g;
    let compiler = compiler_for(g.lowered.arch);
    let req = CompileRequest::new(&g.lowered.name, g.source.text.clone(), g.lowered.arch);
    let (artifact, source) = exec::artifact_for(cache, compiler.as_ref(), &req)?;
    let mut k = OpKernel::new(group, &g.ir, &g.abi, &artifact)?;
    if launch == crate::ab::LaunchMode::Dependent && g.abi.dependent_launch {
        k.instance().set_dependent_launch(true)?;
    }
    let start = Instant::now();
    let outputs = k.run(&p.data.inputs)?;
    let run_ms = start.elapsed().as_secs_f64() * 1e3;
    let metrics = exec::compare(&g.ir, &outputs, &p.data.reference);
    let stress = match &p.fresh {
        Some(fresh) if stress_launches > 0 => Some(stress(&mut k, g, p, fresh, stress_launches)),
        _ => None,
    };
    Ok(Executed {
        artifact: source,
        compiler: artifact.compiler_version.clone(),
        metrics,
        run_ms,
        stress,
    })
}

/// Launches `n` times back to back on unchanged inputs (checking the error words after chunks of
/// growing size, so a broken protocol costs a few timed-out launches, not thousands), compares
/// the last outputs (no drift), then uploads fresh inputs, poisons the outputs and launches once
/// more.
fn stress<D: Device>(
    k: &mut OpKernel<'_, D>,
    g: &Generated,
    p: &Prepared,
    fresh: &Data,
    n: u32,
) -> Stress {
    let mut s = Stress {
        launches: 0,
        last_epoch: 0,
        seconds: 0.0,
        launches_per_s: 0.0,
        error: None,
        burst: Vec::new(),
        last: Vec::new(),
    };
    let burst = n;
    let start = Instant::now();
    let mut done = 0u32;
    let mut chunk = 1u32;
    while done < burst {
        let todo = chunk.min(burst - done);
        let r = (0..todo).try_for_each(|_| k.instance().launch().map(drop));
        if let Err(e) = r.and_then(|()| k.instance().wait()) {
            s.error = Some(e.to_string());
            break;
        }
        done += todo;
        chunk = (chunk * 10).min(1000);
    }
    s.seconds = start.elapsed().as_secs_f64();
    s.launches = done;
    s.launches_per_s = f64::from(done) / s.seconds.max(1e-9);
    if s.error.is_some() {
        return s;
    }
    match k.read_outputs() {
        Ok(out) => s.burst = exec::compare(&g.ir, &out, &p.data.reference),
        Err(e) => s.error = Some(e.to_string()),
    }
    match k.run(&fresh.inputs) {
        Ok(out) => s.last = exec::compare(&g.ir, &out, &fresh.reference),
        Err(e) => s.error = Some(e.to_string()),
    }
    s.last_epoch = k.instance().last_epoch();
    s
}

/// The worst of a set of metrics: max relative L2 (NaN if any is NaN), max |error|, min cosine,
/// total non-finite, total cross-rank differences.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Worst {
    /// Largest relative L2 error.
    pub rel_l2: f64,
    /// Largest absolute error.
    pub max_abs: f64,
    /// Smallest cosine similarity.
    pub cosine: f64,
    /// Non-finite elements, summed.
    pub non_finite: usize,
    /// Elements of replicated outputs differing from rank 0, summed.
    pub rank_diffs: usize,
}

impl Worst {
    /// Over `ms`.
    pub fn of(ms: &[OutputMetrics]) -> Worst {
        let mut w = Worst {
            cosine: 1.0,
            ..Worst::default()
        };
        for m in ms {
            if m.rel_l2.is_nan() || m.rel_l2 > w.rel_l2 {
                w.rel_l2 = if w.rel_l2.is_nan() {
                    w.rel_l2
                } else {
                    m.rel_l2
                };
            }
            w.max_abs = w.max_abs.max(m.max_abs);
            if m.cosine.is_nan() || m.cosine < w.cosine {
                w.cosine = if w.cosine.is_nan() {
                    w.cosine
                } else {
                    m.cosine
                };
            }
            w.non_finite += m.non_finite;
            w.rank_diffs += m.differs_from_rank0;
        }
        w
    }

    /// Whether everything passes at tolerance `tol`.
    pub fn passes(&self, tol: f64) -> bool {
        self.non_finite == 0 && self.rank_diffs == 0 && self.rel_l2 <= tol
    }
}

// ---------------------------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------------------------

/// What to run.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Fewer shapes and 1,000 instead of 10,000 back-to-back launches.
    pub quick: bool,
    /// Kernels (default: all).
    pub kernels: Vec<KernelId>,
    /// TP sizes (default: 1, 2, 4, 8).
    pub tps: Vec<u32>,
    /// Base seed; case i uses `mix(seed, i)`.
    pub seed: u64,
    /// Back-to-back launches per synchronising kernel (model shapes, batch 1), followed by one
    /// launch on fresh inputs.
    pub stress_launches: u32,
    /// The commit the binary was built from.
    pub commit: String,
    /// Threads preparing data (inputs and reference) while the GPU runs.
    pub threads: usize,
    /// Cases not started by this many seconds into the run are reported as skipped, so the
    /// results file is written within a time budget even when launches time out.
    pub deadline_s: Option<f64>,
    /// Where the ranks run.
    pub placement: SuitePlacement,
    /// The launch skew between ranks (applied before every launch, stress runs included).
    pub skew: Skew,
    /// Where the cases' schedules come from.
    pub policy: SchedulePolicy,
    /// The model shapes: Qwen 3.5 27B's ([`ShapeKind::Model`], with the odd shapes) or a model's
    /// own ([`ShapeKind::Of`]: its shapes at batch 1, 3 and 8).
    pub shape: ShapeKind,
    /// Kernels of one's own (`--kernel-file`), each one case at its own shapes (stress-run like
    /// the set's at batch 1 when it synchronises): the only cases when given.
    pub own: Vec<Arc<UserKernel>>,
    /// The GPU runtime the suite drives.
    pub runtime: GpuRuntime,
    /// How kernels are launched: in stream order, or as programmatic dependents where their ABI
    /// allows it (the check and the back-to-back run alike).
    pub launch: crate::ab::LaunchMode,
}

/// Where the suite's ranks run.
pub use crate::policy::Placement as SuitePlacement;

/// The kernels of the set that communicate across ranks: the per-device suite's default.
pub const COMMUNICATING: [KernelId; 4] = [
    KernelId::AllreduceResidual,
    KernelId::AllreduceResidualRmsnorm,
    KernelId::GemvInt4AllreduceRmsnorm,
    KernelId::AllreduceInt8,
];

/// The per-device suite's TP sizes by default: 2 and 4, as far as `visible` GPUs allow.
pub fn per_device_tps(visible: usize) -> Vec<u32> {
    [2, 4]
        .into_iter()
        .filter(|&t| t as usize <= visible)
        .collect()
}

/// The default launch skew of a per-device run: 20 µs steps, alternating which GPU starts first.
pub fn default_per_device_skew() -> Skew {
    "20:alt".parse().expect("a valid skew")
}

impl SuiteOptions {
    /// The full suite (or the quick one) over every kernel and TP size.
    pub fn new(quick: bool) -> SuiteOptions {
        SuiteOptions {
            quick,
            kernels: KernelId::ALL.to_vec(),
            tps: TP_SIZES.to_vec(),
            seed: Workload::DEFAULT_SEED,
            stress_launches: if quick { 1_000 } else { 10_000 },
            commit: "unknown".into(),
            threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .saturating_sub(2)
                .clamp(1, 12),
            deadline_s: None,
            placement: SuitePlacement::SameDevice,
            skew: Skew::none(),
            launch: crate::ab::LaunchMode::Stream,
            policy: SchedulePolicy::default(),
            shape: ShapeKind::Model,
            own: Vec::new(),
            runtime: GpuRuntime::Auto,
        }
    }
}

/// A case's status.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Ran; every output of every rank within tolerance; the stress run (if any) clean.
    Pass,
    /// Ran and failed, or failed to generate, compile or launch.
    Fail,
    /// Refused at compile time or by the runtime before launch: all ranks' workgroups cannot be
    /// resident on one device at once (DESIGN.md §5.9) — a capacity limit of one-device TP, not
    /// a wrong result.
    Refused,
    /// The lowering or writer does not support the case yet.
    Unsupported,
    /// The shape does not apply to the kernel.
    NotApplicable,
    /// Not run: the time budget (`--deadline`) was spent.
    Skipped,
}

impl Status {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Refused => "refused",
            Status::Unsupported => "unsupported",
            Status::NotApplicable => "n/a",
            Status::Skipped => "skipped",
        }
    }
}

/// One case's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case.
    pub spec: CaseSpec,
    /// Per-rank shapes.
    pub dims: String,
    /// Workload seed.
    pub seed: u64,
    /// Status.
    pub status: Status,
    /// Why, when not a pass.
    pub detail: String,
    /// Relative-L2 tolerance.
    pub tolerance: f64,
    /// Per output and rank (empty when it did not run).
    pub metrics: Vec<OutputMetrics>,
    /// The stress run.
    pub stress: Option<Stress>,
    /// Where the artifact came from, and the compiler version.
    pub artifact: String,
    /// Launch wall time (ms).
    pub run_ms: f64,
}

/// The suite's results.
pub struct Report {
    /// Device and toolchain.
    pub header: Provenance,
    /// The options it ran with.
    pub options: SuiteOptions,
    /// Every case.
    pub cases: Vec<CaseResult>,
    /// Wall time.
    pub seconds: f64,
}

/// Why the suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// No GPU or driver: nothing ran.
    #[error("{0}")]
    NoGpu(String),
    /// The placement asks for more GPUs than are visible: nothing ran.
    #[error("{0}")]
    Placement(String),
}

/// Which GPU runtime a command drives.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuRuntime {
    /// CUDA when an NVIDIA GPU is there, else HIP.
    #[default]
    Auto,
    /// The CUDA driver API (NVIDIA).
    Cuda,
    /// The HIP runtime (AMD; or any libamdhip64 on the library path, such as the test double of
    /// `tests/hip-double`, which drives an NVIDIA GPU through the HIP entry points).
    Hip,
}

/// Work generic over the device type, run by [`with_gpu`] on the device it opens.
pub trait OnGpu {
    /// What the work returns.
    type Out;
    /// Runs on `dev`, GPU 0 of the chosen runtime.
    fn on<D: Device>(self, dev: D) -> Self::Out;
}

/// Opens GPU 0 of `runtime` (with [`GpuRuntime::Auto`]: CUDA, else HIP when no NVIDIA GPU or
/// driver is there) and runs `work` on it; `Err` says why no GPU could be opened.
pub fn with_gpu<W: OnGpu>(runtime: GpuRuntime, work: W) -> Result<W::Out, String> {
    let absent = |e: &DeviceError| {
        matches!(
            e,
            DeviceError::NoDriver { .. } | DeviceError::NoDevice { .. }
        )
    };
    let hip = |work: W, cuda: Option<DeviceError>| match HipDevice::new(0) {
        Ok(dev) => Ok(work.on(dev)),
        Err(hip) if absent(&hip) => Err(match cuda {
            Some(cuda) => format!("no GPU found: {cuda}; {hip}"),
            None => format!("no GPU found: {hip}"),
        }),
        Err(e) => Err(format!("opening the AMD GPU: {e}")),
    };
    match runtime {
        GpuRuntime::Hip => hip(work, None),
        GpuRuntime::Cuda | GpuRuntime::Auto => match CudaDevice::new(0) {
            Ok(dev) => Ok(work.on(dev)),
            Err(cuda) if runtime == GpuRuntime::Auto && absent(&cuda) => hip(work, Some(cuda)),
            Err(e) if absent(&e) => Err(format!("no GPU found: {e}")),
            Err(e) => Err(format!("opening the NVIDIA GPU: {e}")),
        },
    }
}

/// The GPUs `runtime` sees (with [`GpuRuntime::Auto`]: NVIDIA's when there are any, else AMD's).
pub fn gpu_count(runtime: GpuRuntime) -> Result<usize, String> {
    match runtime {
        GpuRuntime::Cuda => CudaDevice::count().map_err(|e| e.to_string()),
        GpuRuntime::Hip => HipDevice::count().map_err(|e| e.to_string()),
        GpuRuntime::Auto => match CudaDevice::count() {
            Ok(n) if n > 0 => Ok(n),
            _ => HipDevice::count().map_err(|e| e.to_string()),
        },
    }
}

/// Run the suite on GPU 0: an NVIDIA GPU through CUDA when there is one, else an AMD GPU
/// through HIP (gfx906: the kernels compiled by hipcc or hiprtc), or the runtime `o.runtime`
/// names. Cases are prepared (inputs, reference) on `threads` threads while the GPU runs earlier
/// ones.
pub fn run_suite(o: &SuiteOptions) -> Result<Report, SuiteError> {
    struct Suite<'a>(&'a SuiteOptions);
    impl OnGpu for Suite<'_> {
        type Out = Result<Report, SuiteError>;
        fn on<D: Device>(self, dev: D) -> Self::Out {
            run_suite_on(dev, self.0)
        }
    }
    with_gpu(o.runtime, Suite(o)).unwrap_or_else(|why| {
        Err(SuiteError::NoGpu(format!(
            "{why}; run with --device cpu-ref or --device sim"
        )))
    })
}

/// [`run_suite`] on `dev` (GPU 0) and, with [`SuitePlacement::PerDevice`], the GPUs after it
/// of the same kind.
fn run_suite_on<D: Device>(dev: D, o: &SuiteOptions) -> Result<Report, SuiteError> {
    let arch = dev.info().arch.ok_or_else(|| {
        SuiteError::NoGpu(format!(
            "{} is not a wavefuse target (gfx906 or sm_90)",
            dev.info().name
        ))
    })?;
    let mut header = Provenance::of_device(&dev, arch, &o.commit)
        .map_err(|e| SuiteError::NoGpu(e.to_string()))?;
    // Kept open to the end: they hold the GPUs' primary contexts, which every case's devices then
    // share instead of creating and destroying one per case.
    let mut _primary = vec![dev];
    if o.placement == SuitePlacement::PerDevice {
        let visible = D::count().map_err(|e| SuiteError::NoGpu(e.to_string()))?;
        let most = o.tps.iter().copied().max().unwrap_or(1);
        per_device_ordinals(most, visible).map_err(|e| SuiteError::Placement(e.to_string()))?;
        for ordinal in 1..most as usize {
            let d = D::new(ordinal).map_err(|e| SuiteError::NoGpu(e.to_string()))?;
            if d.info().arch != Some(arch) {
                let why = format!("GPU {ordinal} ({}) is not {}", d.info().name, arch.name());
                return Err(SuiteError::Placement(why));
            }
            _primary.push(d);
        }
        header = header.with_devices(most);
    }
    let open = |ordinal: usize| D::new(ordinal).map_err(|e| e.to_string());
    Ok(run_cases(o, arch, header, &Cache::from_env(), open))
}

/// The suite's cases on the devices `open` returns (by ordinal: GPU 0 for every rank, or GPU r
/// for rank r with [`SuitePlacement::PerDevice`]; opened per case), for `arch`: prepared on
/// `o.threads` threads while this thread runs earlier ones.
pub fn run_cases<D: Device>(
    o: &SuiteOptions,
    arch: Arch,
    header: Provenance,
    cache: &Cache,
    open: impl Fn(usize) -> Result<D, String>,
) -> Report {
    let start = Instant::now();
    let specs = if o.own.is_empty() {
        cases_at(o.quick, &o.kernels, &o.tps, o.shape)
    } else {
        o.own.iter().map(|k| k.case()).collect()
    };
    let total = specs.len();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<Prepared, PrepError>)>(2);
    let mut results: Vec<(usize, CaseResult)> = Vec::with_capacity(total);
    std::thread::scope(|scope| {
        for _ in 0..o.threads.max(1) {
            let tx = tx.clone();
            let (specs, next) = (&specs, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = specs.get(i) else { break };
                    let stress = matches!(
                        c.shape,
                        ShapeKind::Model | ShapeKind::Of(_) | ShapeKind::Own
                    ) && c.batch == 1;
                    let seed = mix(o.seed, i as u64);
                    let p = prepare(c, arch, &o.policy, o.placement, seed, stress);
                    if tx.send((i, p)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, p) in rx {
            let seed = mix(o.seed, i as u64);
            let late = o
                .deadline_s
                .is_some_and(|d| start.elapsed().as_secs_f64() > d);
            let r = if late {
                skipped(&specs[i], seed)
            } else {
                run_case(&specs[i], p, cache, &open, o, seed)
            };
            eprintln!("[{:>3}/{total}] {}", results.len() + 1, progress_line(&r));
            results.push((i, r));
        }
    });
    results.sort_by_key(|(i, _)| *i);
    Report {
        header,
        options: o.clone(),
        cases: results.into_iter().map(|(_, r)| r).collect(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn skipped(c: &CaseSpec, seed: u64) -> CaseResult {
    CaseResult {
        spec: c.clone(),
        dims: String::new(),
        seed,
        status: Status::Skipped,
        detail: "time budget spent".into(),
        tolerance: c.kernel.tolerance().0,
        metrics: Vec::new(),
        stress: None,
        artifact: String::new(),
        run_ms: 0.0,
    }
}

fn run_case<D: Device>(
    c: &CaseSpec,
    p: Result<Prepared, PrepError>,
    cache: &Cache,
    open: &dyn Fn(usize) -> Result<D, String>,
    o: &SuiteOptions,
    seed: u64,
) -> CaseResult {
    let (tol, _) = c.kernel.tolerance();
    let mut r = CaseResult {
        spec: c.clone(),
        dims: String::new(),
        seed,
        status: Status::Fail,
        detail: String::new(),
        tolerance: tol,
        metrics: Vec::new(),
        stress: None,
        artifact: String::new(),
        run_ms: 0.0,
    };
    let p = match p {
        Ok(p) => p,
        Err(e) => {
            r.status = match e {
                PrepError::NotApplicable(_) => Status::NotApplicable,
                PrepError::Unsupported(_) => Status::Unsupported,
                PrepError::NotCoResident(_) | PrepError::Limit(_) => Status::Refused,
                PrepError::Failed(_) => Status::Fail,
            };
            r.detail = e.to_string();
            return r;
        }
    };
    r.dims = p.g.dims();
    let group = match open_group(c.tp, o.placement, open) {
        Ok(g) => g.with_skew(o.skew),
        Err(e) => {
            r.detail = e;
            return r;
        }
    };
    match execute_on(&group, &p, cache, o.stress_launches, o.launch) {
        Ok(x) => judge(&mut r, x),
        Err(e @ RtError::NotCoResident { .. }) => {
            r.status = Status::Refused;
            r.detail = e.to_string();
        }
        Err(e) => r.detail = e.to_string(),
    }
    r
}

/// The rank group of one case: `tp` ranks on GPU 0, or rank r on GPU r.
fn open_group<D: Device>(
    tp: u32,
    placement: SuitePlacement,
    open: &dyn Fn(usize) -> Result<D, String>,
) -> Result<RankGroup<D>, String> {
    let group = match placement {
        SuitePlacement::SameDevice => {
            RankGroup::on_one_device(open(0)?, tp, SameDeviceMode::Streams)
        }
        SuitePlacement::PerDevice => {
            let devices = (0..tp as usize).map(open).collect::<Result<Vec<_>, _>>()?;
            RankGroup::one_per_device(devices)
        }
    };
    group.map_err(|e| e.to_string())
}

fn judge(r: &mut CaseResult, x: Executed) {
    r.artifact = format!("{} ({})", x.compiler, artifact_name(&x.artifact));
    r.run_ms = x.run_ms;
    let w = Worst::of(&x.metrics);
    let mut problems = Vec::new();
    if !w.passes(r.tolerance) {
        problems.push(failure_text(&x.metrics, r.tolerance));
    }
    if let Some(s) = &x.stress {
        if let Some(e) = &s.error {
            problems.push(format!("stress after {} launches: {e}", s.launches));
        } else if !Worst::of(&s.burst).passes(r.tolerance) {
            problems.push(format!(
                "drift after {} launches: {}",
                s.launches,
                failure_text(&s.burst, r.tolerance)
            ));
        } else if !Worst::of(&s.last).passes(r.tolerance) {
            problems.push(format!(
                "last launch (epoch {}): {}",
                s.last_epoch,
                failure_text(&s.last, r.tolerance)
            ));
        }
    }
    r.metrics = x.metrics;
    r.stress = x.stress;
    r.status = if problems.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    r.detail = problems.join("; ");
}

/// The first failing output, in words.
fn failure_text(ms: &[OutputMetrics], tol: f64) -> String {
    match ms.iter().find(|m| !m.passes(tol)) {
        Some(m) => format!(
            "rank {} `{}`: rel L2 {:.3e} (tol {tol:.0e}), {} of {} non-finite, {} differ from rank 0; \
             worst [{}] {} vs {}",
            m.rank,
            m.output,
            m.rel_l2,
            m.non_finite,
            m.elements,
            m.differs_from_rank0,
            m.worst,
            m.worst_values.0,
            m.worst_values.1
        ),
        None => "no outputs".into(),
    }
}

/// `cached`, `compiled` or `prebuilt`.
pub fn artifact_name(s: &ArtifactSource) -> &'static str {
    match s {
        ArtifactSource::Cached => "cached",
        ArtifactSource::Compiled => "compiled",
        ArtifactSource::Prebuilt { .. } => "prebuilt",
    }
}

fn progress_line(r: &CaseResult) -> String {
    let mut line = format!("{:<44} {:<11}", r.spec.label(), r.status.name());
    if !r.metrics.is_empty() {
        let _ = write!(line, " rel L2 {:.2e}", Worst::of(&r.metrics).rel_l2);
    }
    if let Some(s) = &r.stress {
        let _ = write!(line, "; {} launches, {:.0}/s", s.launches, s.launches_per_s);
    }
    if r.status != Status::Pass && !r.detail.is_empty() {
        let _ = write!(line, " — {}", clip(&r.detail, 300));
    }
    line
}

// ---------------------------------------------------------------------------------------------
// Results: JSON and Markdown
// ---------------------------------------------------------------------------------------------

impl Report {
    /// Cases per status.
    pub fn count(&self, s: Status) -> usize {
        self.cases.iter().filter(|c| c.status == s).count()
    }

    /// The results file.
    pub fn to_json(&self) -> Json {
        self.header.json_with(json!({
            "schema": "wavefuse-gpu-suite/1",
            "mode": if self.options.quick { "quick" } else { "full" },
            "seed": self.options.seed,
            "stress_launches": self.options.stress_launches,
            "same_device_mode": "streams",
            "placement": self.options.placement.name(),
            "skew": self.options.skew.to_string(),
            "launch": self.options.launch.name(),
            "seconds": self.seconds,
            "summary": {
                "cases": self.cases.len(),
                "pass": self.count(Status::Pass),
                "fail": self.count(Status::Fail),
                "refused": self.count(Status::Refused),
                "unsupported": self.count(Status::Unsupported),
                "not_applicable": self.count(Status::NotApplicable),
                "skipped": self.count(Status::Skipped),
            },
            "tolerances": TOLERANCES
                .iter()
                .map(|(k, t, why)| json!({"kernel": k.name(), "rel_l2": t, "why": why}))
                .collect::<Vec<_>>(),
            "cases": self.cases.iter().map(case_json).collect::<Vec<_>>(),
        }))
    }

    /// The Markdown tables: correctness per case, then the back-to-back runs.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## wavefuse GPU suite ({})\n\n{}; {}; {}; launch skew {}; {:.0} s\n",
            if self.options.quick { "quick" } else { "full" },
            self.header.line(),
            self.header.origin(),
            match self.options.placement {
                SuitePlacement::SameDevice => "all ranks on one device",
                SuitePlacement::PerDevice => "one rank per device",
            },
            if self.options.skew.is_none() {
                "none".to_string()
            } else {
                format!(
                    "{} µs steps ({})",
                    self.options.skew.step.as_micros(),
                    self.options.skew
                )
            },
            self.seconds
        );
        let _ = writeln!(
            out,
            "| kernel | tp | shape | batch | per-rank K→N | status | rel L2 (worst) | tol | max abs \
             | min cosine | non-finite |"
        );
        let _ = writeln!(out, "|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|");
        for c in &self.cases {
            let w = Worst::of(&c.metrics);
            let ran = !c.metrics.is_empty();
            let num = |v: f64, f: &dyn Fn(f64) -> String| if ran { f(v) } else { "–".into() };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {:.0e} | {} | {} | {} |",
                c.spec.kernel.name(),
                c.spec.tp,
                c.spec.shape.name(),
                c.spec.batch,
                c.dims,
                status_cell(c),
                num(w.rel_l2, &|v| format!("{v:.2e}")),
                c.tolerance,
                num(w.max_abs, &|v| format!("{v:.2e}")),
                num(w.cosine, &|v| format!("{v:.6}")),
                if ran {
                    w.non_finite.to_string()
                } else {
                    "–".into()
                },
            );
        }
        let stressed: Vec<&CaseResult> = self.cases.iter().filter(|c| c.stress.is_some()).collect();
        if !stressed.is_empty() {
            let _ = writeln!(
                out,
                "\n| kernel | tp | launches | last epoch | launches/s | timeouts \
                 | drift (rel L2 after burst) | last launch rel L2 |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|---:|");
            for c in stressed {
                let s = c.stress.as_ref().expect("filtered");
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {:.0} | {} | {:.2e} | {:.2e} |",
                    c.spec.kernel.name(),
                    c.spec.tp,
                    s.launches,
                    s.last_epoch,
                    s.launches_per_s,
                    s.error.as_deref().unwrap_or("none"),
                    Worst::of(&s.burst).rel_l2,
                    Worst::of(&s.last).rel_l2,
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{} cases: {} pass, {} FAIL, {} refused (not co-resident on one device), \
             {} unsupported, {} n/a, {} skipped (time budget)",
            self.cases.len(),
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Refused),
            self.count(Status::Unsupported),
            self.count(Status::NotApplicable),
            self.count(Status::Skipped)
        );
        out
    }
}

fn status_cell(c: &CaseResult) -> String {
    match c.status {
        Status::Pass => "pass".into(),
        s => format!("{} ({})", s.name(), clip(&c.detail, 160).replace('|', "/")),
    }
}

/// The first line of `text`, at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

fn metrics_json(ms: &[OutputMetrics]) -> Vec<Json> {
    ms.iter()
        .map(|m| {
            json!({
                "output": m.output, "rank": m.rank, "elements": m.elements,
                "rel_l2": finite_or_null(m.rel_l2), "max_abs": m.max_abs,
                "cosine": finite_or_null(m.cosine), "non_finite": m.non_finite,
                "differs_from_rank0": m.differs_from_rank0,
            })
        })
        .collect()
}

/// At most `max` characters of `text` (a failed compile's message carries the whole source).
fn clip_chars(text: &str, max: usize) -> &str {
    text.char_indices()
        .nth(max)
        .map_or(text, |(i, _)| &text[..i])
}

fn finite_or_null(v: f64) -> Json {
    if v.is_finite() { json!(v) } else { Json::Null }
}

fn case_json(c: &CaseResult) -> Json {
    let w = Worst::of(&c.metrics);
    json!({
        "kernel": c.spec.kernel.name(),
        "tp": c.spec.tp,
        "shape": c.spec.shape.name(),
        "batch": c.spec.batch,
        "dims": c.dims,
        "seed": c.seed,
        "status": c.status.name(),
        "detail": clip_chars(&c.detail, 4000),
        "tolerance": c.tolerance,
        "artifact": c.artifact,
        "run_ms": c.run_ms,
        "worst": {
            "rel_l2": finite_or_null(w.rel_l2), "max_abs": w.max_abs,
            "cosine": finite_or_null(w.cosine), "non_finite": w.non_finite,
        },
        "outputs": metrics_json(&c.metrics),
        "stress": c.stress.as_ref().map(|s| json!({
            "launches": s.launches,
            "last_epoch": s.last_epoch,
            "seconds": s.seconds,
            "launches_per_s": s.launches_per_s,
            "error": s.error,
            "burst_rel_l2": finite_or_null(Worst::of(&s.burst).rel_l2),
            "last_rel_l2": finite_or_null(Worst::of(&s.last).rel_l2),
            "last_outputs": metrics_json(&s.last),
        })),
    })
}

// ---------------------------------------------------------------------------------------------
// Prebuilding
// ---------------------------------------------------------------------------------------------

/// Every source the suite (full mode) and the sanitizer runs of `scripts/gpu-suite.sh` (small
/// shapes, batch 1) compile for `arch`, deduplicated.
pub fn sources_to_prebuild(
    arch: Arch,
    policy: &SchedulePolicy,
) -> Vec<Result<Generated, (CaseSpec, PrepError)>> {
    let mut specs = cases(false, &KernelId::ALL, &TP_SIZES);
    for id in KernelId::ALL {
        for tp in TP_SIZES {
            specs.push(CaseSpec {
                kernel: id.into(),
                tp,
                batch: 1,
                shape: ShapeKind::Small,
            });
        }
    }
    let per_device = cases(false, &COMMUNICATING, &[2, 4]);
    let variants = specs
        .into_iter()
        .map(|c| (c, Placement::SameDevice))
        .chain(per_device.into_iter().map(|c| (c, Placement::PerDevice)));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (c, placement) in variants {
        match generate(&c, arch, policy, placement) {
            Ok(g) => {
                if seen.insert(g.source.text.clone()) {
                    out.push(Ok(g));
                }
            }
            Err(PrepError::NotApplicable(_)) => {}
            Err(e) => out.push(Err((c, e))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wavefuse_codegen::lower::fit::{fit_coresident, fits_coresident, resident_per_cu};
    use wavefuse_codegen::lower::{AllreduceProtocol, Schedule};

    /// The split-K fused kernel (128-lane workgroups, 8 per SM) keeps its K parts on a device of
    /// its own and gives them up first where ranks share one; 512-lane fused workgroups count as
    /// 2 per SM, so two ranks' 160 on one H200 go back to 256 lanes (4 per SM).
    #[test]
    fn coresidency_counts_workgroup_sizes_and_lowers_the_split_first() {
        assert_eq!(
            [64, 128, 256, 512, 1024].map(resident_per_cu),
            [8, 8, 4, 2, 1]
        );
        let ir = KernelId::GemvInt4AllreduceRmsnorm.build(&Shapes::qwen27b(2));
        let s = Schedule::default_for(Arch::Sm90, &ir);
        assert_eq!((s.workgroup_size, s.k_split), (128, 4));
        let (k, one) = fit_coresident(&ir, Arch::Sm90, s.clone(), 1).expect("lowers");
        assert_eq!((one.k_split, k.grid), (4, 640));
        let (k, two) = fit_coresident(&ir, Arch::Sm90, s.clone(), 2).expect("lowers");
        assert_eq!((two.k_split, two.workgroup_size, k.grid), (2, 128, 320));
        assert!(fits_coresident(&k, Arch::Sm90, 2));
        let (k, four) = fit_coresident(&ir, Arch::Sm90, s, 4).expect("lowers");
        assert_eq!((four.k_split, k.grid), (1, 160));
        assert!(fits_coresident(&k, Arch::Sm90, 4));

        let wide = Schedule {
            workgroup_size: 512,
            threads_per_column: 16,
            k_split: 1,
            ..Schedule::default_for(Arch::Sm90, &ir)
        };
        let (_, one) = fit_coresident(&ir, Arch::Sm90, wide.clone(), 1).expect("lowers");
        assert_eq!(one.workgroup_size, 512);
        let (k, two) = fit_coresident(&ir, Arch::Sm90, wide, 2).expect("lowers");
        assert_eq!((two.workgroup_size, two.threads_per_column), (256, 8));
        assert!(fits_coresident(&k, Arch::Sm90, 2));
    }

    /// Every case of the full suite is generated for both targets with all its ranks on one
    /// device, as `wavefuse gpu-suite` does (the H200 run of 07e9adc3cb11 found batch 8 at TP 2
    /// and 4 with the split lowered to fit but the activations still staged for 4 parts: 75 KB
    /// of LDS, refused by the CUDA writer).
    ///
    /// On sm_90 (the GPU the suite runs on) every case generates. On gfx906 the fused kernel's
    /// grids at TP 4 and 8 (and TP 2 at batch 8) cannot all be resident on one MI50 (60 CUs; its cross-slice sums take
    /// 16–32 KiB of LDS per workgroup): refused at compile time with the numbers, never at launch.
    #[test]
    fn every_suite_case_generates_with_its_ranks_on_one_device() {
        let mut refused = Vec::new();
        for arch in Arch::ALL {
            for c in cases(false, &KernelId::ALL, &[1, 2, 4, 8]) {
                let what = format!(
                    "{}@{arch} tp {} {:?} batch {}",
                    c.kernel, c.tp, c.shape, c.batch
                );
                match generate(&c, arch, &SchedulePolicy::default(), Placement::SameDevice) {
                    Ok(_) | Err(PrepError::NotApplicable(_)) => {}
                    Err(PrepError::NotCoResident(m)) if arch == Arch::Gfx906 => {
                        assert!(m.contains("must be resident at once"), "{what}: {m}");
                        refused.push(what);
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
        }
        assert!(
            refused
                .iter()
                .all(|w| w.starts_with("gemv_int4_allreduce_rmsnorm@gfx906")),
            "{refused:#?}"
        );
    }

    /// One rank per device: the fused GEMV + allreduce kernel pushes (measured faster over
    /// NVLink); ranks sharing a device, kernels without a GEMV and one rank keep pull.
    #[test]
    fn one_rank_per_device_pushes_the_fused_kernel() {
        let protocol = |id: KernelId, tp: u32, per_device: u32| {
            let ir = id.build(&Shapes::qwen27b(tp));
            let c = CaseSpec {
                kernel: id.into(),
                tp,
                batch: 1,
                shape: ShapeKind::Model,
            };
            SchedulePolicy::default()
                .resolve(&c, Arch::Sm90, &ir, Placement::of(per_device))
                .expect("schedule")
                .code
                .schedule
                .protocol
        };
        let fused = KernelId::GemvInt4AllreduceRmsnorm;
        assert_eq!(protocol(fused, 2, 1), AllreduceProtocol::Push);
        assert_eq!(protocol(fused, 4, 1), AllreduceProtocol::Push);
        assert_eq!(protocol(fused, 2, 2), AllreduceProtocol::Pull);
        assert_eq!(protocol(fused, 1, 1), AllreduceProtocol::Pull);
        assert_eq!(
            protocol(KernelId::AllreduceResidualRmsnorm, 2, 1),
            AllreduceProtocol::Pull
        );
    }

    #[test]
    fn every_kernel_has_one_tolerance() {
        for id in KernelId::ALL {
            assert_eq!(
                TOLERANCES.iter().filter(|(k, _, _)| *k == id).count(),
                1,
                "{id}"
            );
            let (tol, why) = tolerance(id);
            assert!(tol > 0.0 && tol <= 1e-3 && !why.is_empty());
        }
    }

    /// The set's per-kernel tolerances and the rule by output type that a user's kernel gets
    /// (`wavefuse_codegen::sim::tolerance_for`) are one policy: a kernel of the set is never
    /// judged more leniently than the same kernel would be as a user's.
    #[test]
    fn the_sets_tolerances_are_never_looser_than_a_users() {
        for id in KernelId::ALL {
            for tp in [1, 4] {
                let ir = id.build(&Shapes::qwen27b(tp));
                let users = UserKernel::new(ir, id.name()).expect("valid").tolerance();
                let (set, _) = tolerance(id);
                assert!(set <= users, "{id}@tp{tp}: set {set} > user's {users}");
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

    /// At a model's own shapes: its cases at batch 1, 3, 8 (quick: 1), every one generating for
    /// both targets at those shapes (hidden 2048 here), no Qwen odd shapes.
    #[test]
    fn a_models_cases_are_its_shapes_at_three_batches() {
        let m = Model {
            hidden: 2048,
            ffn: 5632,
            q_gate: 2048,
            kv: 256,
            head_dim: 64,
            rms_eps: 1e-5,
            gptq: Model::QWEN27B.gptq,
        };
        let of = ShapeKind::Of(m);
        assert_eq!(cases_at(true, &KernelId::ALL, &[1, 2], of).len(), 8 * 2);
        let full = cases_at(false, &KernelId::ALL, &[1, 2], of);
        assert_eq!(full.len(), 8 * 2 * 3);
        for c in &full {
            assert_eq!(c.shape, of);
            for arch in Arch::ALL {
                let g = generate(c, arch, &SchedulePolicy::default(), Placement::SameDevice)
                    .unwrap_or_else(|e| panic!("{}@{arch}: {e}", c.label()));
                assert!(
                    g.ir.buffers().any(|(_, b)| matches!(b.local_type(),
                        wavefuse::ir::BufferType::Tensor(t) if t.shape.last() == Some(&2048))),
                    "{}: no 2048-wide buffer",
                    c.label()
                );
            }
        }
    }

    #[test]
    fn symbols_are_the_lowered_names() {
        for id in KernelId::ALL {
            let c = CaseSpec {
                kernel: id.into(),
                tp: 4,
                batch: 1,
                shape: ShapeKind::Model,
            };
            let g = generate(
                &c,
                Arch::Sm90,
                &SchedulePolicy::default(),
                Placement::SameDevice,
            )
            .unwrap();
            assert_eq!(
                g.source.symbol, g.lowered.name,
                "the runtime loads the lowered name"
            );
        }
    }

    #[test]
    fn odd_cases_prepare_with_a_finite_reference() {
        for (id, tp, shape) in [
            (KernelId::GemvInt4AllreduceRmsnorm, 8, ShapeKind::OddK),
            (KernelId::AllreduceInt8, 2, ShapeKind::OddN),
            (KernelId::GemvInt4Qkv, 8, ShapeKind::OddN),
        ] {
            let c = CaseSpec {
                kernel: id.into(),
                tp,
                batch: 3,
                shape,
            };
            let p = prepare(
                &c,
                Arch::Sm90,
                &SchedulePolicy::default(),
                Placement::SameDevice,
                1,
                true,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            assert_eq!(
                p.fresh.is_some(),
                synchronises(&p.g.lowered),
                "{}",
                c.label()
            );
            for outs in &p.data.reference {
                assert!(outs.values().all(|t| t.data.iter().all(|v| v.is_finite())));
            }
        }
    }

    #[test]
    fn worst_keeps_nan() {
        let ok = exec::compare::metrics(&[1.0], &[1.0]);
        let bad = exec::compare::metrics(&[f64::NAN], &[1.0]);
        let w = Worst::of(&[ok.clone(), bad, ok]);
        assert!(w.rel_l2.is_nan() && w.cosine.is_nan() && w.non_finite == 1);
        assert!(!w.passes(1.0));
    }
}
