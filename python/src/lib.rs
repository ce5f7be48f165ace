//! `_wavefuse`: the native half of the `wavefuse` Python package (DESIGN.md §10).
//!
//! Thin by design: everything here is a call into the pipeline the CLI uses. A kernel is generated
//! by [`wavefuse_harness::suite::generate`] (the one generation step: `wavefuse emit` prints the
//! same text), run on the CPU protocol simulator by [`wavefuse_codegen::sim::simulate_case`], or
//! compiled through the runtime's cache ([`wavefuse_harness::pipeline::artifact`]) and bound as a
//! [`KernelInstance`] that owns its synchronisation state and launches on the caller's streams
//! ([`KernelInstance::launch_on_streams`]). Argument checks against the ABI and the PyTorch glue
//! live in the Python package (`python/wavefuse/`).

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use wavefuse_codegen::Arch;
use wavefuse_codegen::abi::{AbiPurpose, AbiTy};
use wavefuse_codegen::lowered::Ty;
use wavefuse_codegen::sim::{Case, SimOptions, simulate_case};
use wavefuse_harness::policy::{Override, Placement, SchedulePolicy};
use wavefuse_harness::suite::{self, CaseSpec, ShapeKind, UserKernel};
use wavefuse_harness::tune::select::{ScheduleChoice, detect_device, tuned_for};
use wavefuse_harness::{KernelId, Shapes};
use wavefuse_ir::reference::{HostData, HostTensor, PackedInt4, RankInputs};
use wavefuse_ir::{BufferType, GptqLayout, GroupSize, Kernel, Role, WeightFormat, ZeroPoint};
use wavefuse_kernels::set;
use wavefuse_kernels::shapes::Model;
use wavefuse_runtime::exec;
use wavefuse_runtime::{
    Cache, CudaDevice, DataParam, Device, DeviceBuffer, HipDevice, KernelInstance, PeerMapping,
    RankGroup, SameDeviceMode,
};

create_exception!(
    _wavefuse,
    GenerateError,
    PyValueError,
    "A kernel could not be generated: unknown name, bad shape, invalid .wfir, or a lowering that \
     does not support it."
);
create_exception!(
    _wavefuse,
    DeviceError,
    PyRuntimeError,
    "No device, driver or compiler; or a compile, load or launch failed."
);

fn gen_err(m: impl std::fmt::Display) -> PyErr {
    GenerateError::new_err(m.to_string())
}

fn dev_err(m: impl std::fmt::Display) -> PyErr {
    DeviceError::new_err(m.to_string())
}

// ---------------------------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------------------------

/// Shape keywords of `wavefuse.kernel(...)`: per-rank sizes overriding the model's.
#[derive(Clone, Debug, Default)]
struct ShapeArgs {
    hidden: Option<usize>,
    n: Option<usize>,
    k: Option<usize>,
    nq: Option<usize>,
    nkv: Option<usize>,
    group_size: Option<i64>,
    zero_point: Option<String>,
    eps: Option<f64>,
}

impl ShapeArgs {
    fn is_empty(&self) -> bool {
        self.hidden.is_none()
            && self.n.is_none()
            && self.k.is_none()
            && self.nq.is_none()
            && self.nkv.is_none()
            && self.group_size.is_none()
            && self.zero_point.is_none()
            && self.eps.is_none()
    }

    /// The keywords kernel `id` has no use for.
    fn unused(&self, id: KernelId) -> Vec<&'static str> {
        use KernelId::*;
        let int4 = matches!(
            id,
            GemvInt4 | GemvInt4DualSilu | GemvInt4Qkv | GemvInt4AllreduceRmsnorm
        );
        let mut out = Vec::new();
        let mut check = |set: bool, name: &'static str, used: bool| {
            if set && !used {
                out.push(name);
            }
        };
        check(
            self.n.is_some(),
            "n",
            matches!(id, GemvF16 | GemvInt4 | GemvInt4DualSilu),
        );
        check(self.k.is_some(), "k", id == GemvInt4AllreduceRmsnorm);
        check(self.nq.is_some(), "nq", id == GemvInt4Qkv);
        check(self.nkv.is_some(), "nkv", id == GemvInt4Qkv);
        check(self.group_size.is_some(), "group_size", int4);
        check(self.zero_point.is_some(), "zero_point", int4);
        check(
            self.eps.is_some(),
            "eps",
            matches!(id, AllreduceResidualRmsnorm | GemvInt4AllreduceRmsnorm),
        );
        out
    }

    fn gptq(&self, base: GptqLayout) -> PyResult<GptqLayout> {
        let mut l = base;
        if let Some(g) = self.group_size {
            l.group = match g {
                -1 => GroupSize::PerChannel,
                g if g > 0 && g % 8 == 0 => GroupSize::Rows(g as u32),
                g => {
                    return Err(gen_err(format!(
                        "group_size={g}: use a positive multiple of 8 (32, 64, 128) or -1 for \
                         per-channel groups"
                    )));
                }
            };
        }
        if let Some(z) = &self.zero_point {
            l.zero = match z.as_str() {
                "v1" => ZeroPoint::V1,
                "v2" => ZeroPoint::V2,
                "symmetric" => ZeroPoint::Symmetric,
                other => {
                    return Err(gen_err(format!(
                        "zero_point={other:?}: use 'v1' (GPTQ `gptq` checkpoints store z - 1), \
                         'v2' (`gptq_v2`: z as is) or 'symmetric' (no qzeros)"
                    )));
                }
            };
        }
        Ok(l)
    }
}

/// The set's kernel `id` at `shapes` with the keywords' per-rank sizes.
fn build_set(id: KernelId, s: &Shapes, a: &ShapeArgs) -> PyResult<Kernel> {
    let (tp, batch) = (s.tp, s.batch);
    let hidden = a.hidden.unwrap_or(s.hidden());
    let eps = a.eps.unwrap_or(s.model.rms_eps);
    let gptq = a.gptq(s.gptq)?;
    Ok(match id {
        KernelId::GemvF16 => set::gemv_f16(tp, batch, hidden, a.n.unwrap_or(s.q_local())),
        KernelId::GemvInt4 => set::gemv_int4(tp, batch, hidden, a.n.unwrap_or(s.ffn_local()), gptq),
        KernelId::GemvInt4DualSilu => {
            set::gemv_int4_dual_silu(tp, batch, hidden, a.n.unwrap_or(s.ffn_local()), gptq)
        }
        KernelId::GemvInt4Qkv => set::gemv_int4_qkv(
            tp,
            batch,
            hidden,
            a.nq.unwrap_or(s.q_local()),
            a.nkv.unwrap_or(s.kv_local()),
            gptq,
        ),
        KernelId::AllreduceResidual => set::allreduce_residual(tp, batch, hidden),
        KernelId::AllreduceResidualRmsnorm => {
            set::allreduce_residual_rmsnorm(tp, batch, hidden, eps)
        }
        KernelId::GemvInt4AllreduceRmsnorm => set::gemv_int4_allreduce_rmsnorm(
            tp,
            batch,
            hidden,
            a.k.unwrap_or(s.ffn_local()),
            gptq,
            eps,
        ),
        KernelId::AllreduceInt8 => set::allreduce_int8(tp, batch, hidden),
    })
}

/// What `source` names, as a case of the pipeline.
fn case_of(
    kind: &str,
    source: &str,
    tp: u32,
    batch: usize,
    config: Option<&str>,
    shape: &ShapeArgs,
) -> PyResult<CaseSpec> {
    let user = |ir: Kernel, origin: String| -> PyResult<CaseSpec> {
        let u = Arc::new(UserKernel::new(ir, origin).map_err(gen_err)?);
        Ok(u.case())
    };
    match kind {
        "set" => {
            let id: KernelId = source.parse().map_err(gen_err)?;
            let model = match config {
                Some(p) => wavefuse_harness::model_config::read(Path::new(p)).map_err(gen_err)?,
                None => Model::QWEN27B,
            };
            model.check_tp(tp).map_err(gen_err)?;
            if shape.is_empty() {
                let kind = match config {
                    Some(_) => ShapeKind::Of(model),
                    None => ShapeKind::Model,
                };
                return Ok(CaseSpec::of(id, tp, batch, kind));
            }
            let unused = shape.unused(id);
            if !unused.is_empty() {
                return Err(gen_err(format!(
                    "`{id}` takes no {} (its shape keywords: {})",
                    unused.join(", "),
                    shape_keywords(id)
                )));
            }
            let s = Shapes {
                batch,
                ..Shapes::of(model, tp)
            };
            let ir = build_set(id, &s, shape)?;
            wavefuse_ir::validate(&ir)
                .map_err(|e| gen_err(format!("`{id}` at these shapes: {e}")))?;
            user(ir, format!("wavefuse.kernel({id:?})"))
        }
        "file" | "text" => {
            if config.is_some() || !shape.is_empty() {
                return Err(gen_err(
                    "a .wfir kernel has its own shapes: config= and shape keywords apply to the \
                     kernel set only",
                ));
            }
            let (ir, origin) = if kind == "file" {
                let path = Path::new(source);
                (
                    wavefuse_harness::generate::read_kernel_file(path).map_err(gen_err)?,
                    path.display().to_string(),
                )
            } else {
                let ir = wavefuse_ir::parse_named(source, "<text>")
                    .map_err(|e| gen_err(format!("<text>:{}", e.report(source))))?;
                (ir, "<text>".to_owned())
            };
            if ir.tp() != tp && tp != 0 {
                return Err(gen_err(format!(
                    "`{}` ({origin}) is written for TP {}, tp={tp} was asked for",
                    ir.name(),
                    ir.tp()
                )));
            }
            let case = user(ir, origin)?;
            if case.batch != batch && batch != 0 {
                return Err(gen_err(format!(
                    "`{}` has batch {} (its activations' rows), batch={batch} was asked for",
                    case.kernel.name(),
                    case.batch
                )));
            }
            Ok(case)
        }
        other => Err(gen_err(format!("unknown source kind {other:?}"))),
    }
}

fn shape_keywords(id: KernelId) -> &'static str {
    use KernelId::*;
    match id {
        GemvF16 => "hidden, n",
        GemvInt4 | GemvInt4DualSilu => "hidden, n, group_size, zero_point",
        GemvInt4Qkv => "hidden, nq, nkv, group_size, zero_point",
        AllreduceResidual | AllreduceInt8 => "hidden",
        AllreduceResidualRmsnorm => "hidden, eps",
        GemvInt4AllreduceRmsnorm => "hidden, k, group_size, zero_point, eps",
    }
}

/// One array argument of a generated kernel, as the package checks tensors against it.
#[derive(Clone, Debug)]
struct Arg {
    name: String,
    buffer: String,
    part: &'static str,
    role: Role,
    ty: AbiTy,
    shape: Vec<usize>,
    align: u64,
    len: usize,
}

/// The per-rank shape of array `part` of `decl`, `len` elements.
fn part_shape(ty: &BufferType, part: &str, len: usize) -> Vec<usize> {
    let shape = match ty {
        BufferType::Tensor(t) => t.shape.clone(),
        BufferType::Weight(w) => match (&w.format, part) {
            (WeightFormat::F16, _) => vec![w.n, w.k],
            (WeightFormat::Gptq(_), "qweight") => vec![w.k / 8, w.n],
            (WeightFormat::Awq(_), "qweight") => vec![w.k, w.n / 8],
            (_, "scales") => vec![len / w.n.max(1), w.n],
            (_, "qzeros") => vec![len / (w.n / 8).max(1), w.n / 8],
            (_, "g_idx") => vec![w.k],
            _ => vec![len],
        },
    };
    if shape.iter().product::<usize>() == len {
        shape
    } else {
        vec![len]
    }
}

fn args_of(g: &suite::Generated) -> PyResult<Vec<Arg>> {
    let mut out: Vec<Arg> = Vec::new();
    for p in &g.abi.params {
        if p.purpose != AbiPurpose::Data {
            continue;
        }
        let (Some(buffer), Some(part)) = (&p.buffer, &p.part) else {
            return Err(gen_err(format!(
                "ABI parameter `{}` names no buffer",
                p.name
            )));
        };
        let part = wavefuse_codegen::abi::PARTS
            .into_iter()
            .find(|x| x == part)
            .ok_or_else(|| gen_err(format!("ABI parameter `{}`: unknown part `{part}`", p.name)))?;
        if out.iter().any(|a| a.buffer == *buffer && a.part == part) {
            continue;
        }
        let b = g
            .ir
            .buffer_by_name(buffer)
            .ok_or_else(|| gen_err(format!("ABI parameter `{}`: no buffer `{buffer}`", p.name)))?;
        let decl = g.ir.buffer(b).expect("found by name");
        let len = p.len.unwrap_or(0) as usize;
        out.push(Arg {
            name: if part == "data" {
                buffer.clone()
            } else {
                format!("{buffer}_{part}")
            },
            buffer: buffer.clone(),
            part,
            role: decl.role,
            ty: p.ty,
            shape: part_shape(&decl.local_type(), part, len),
            align: p.align.unwrap_or(1),
            len,
        });
    }
    Ok(out)
}

fn torch_dtype(ty: AbiTy) -> &'static str {
    match ty {
        AbiTy::Bool => "bool",
        AbiTy::I8 => "int8",
        AbiTy::I32 | AbiTy::U32 => "int32",
        AbiTy::F16 => "float16",
        AbiTy::F32 => "float32",
    }
}

/// A kernel generated by the pipeline: the op-level kernel, its lowering for one target, the
/// generated source and its ABI.
#[pyclass(frozen, module = "wavefuse._wavefuse")]
struct Generated {
    g: suite::Generated,
    args: Vec<Arg>,
}

#[pymethods]
impl Generated {
    /// The kernel's name (the IR's).
    #[getter]
    fn name(&self) -> String {
        self.g.ir.name().to_owned()
    }

    /// The target (`gfx906`, `sm90`).
    #[getter]
    fn arch(&self) -> String {
        self.g.lowered.arch.to_string()
    }

    /// The TP size it was built for.
    #[getter]
    fn tp(&self) -> u32 {
        self.g.lowered.tp
    }

    /// The generated HIP or CUDA source, exactly as `wavefuse emit` prints it.
    #[getter]
    fn source(&self) -> String {
        self.g.source.text.clone()
    }

    /// The op-level kernel as textual IR.
    #[getter]
    fn ir(&self) -> String {
        self.g.ir.to_string()
    }

    /// The ABI description as TOML (what `wavefuse emit --out` writes beside the source).
    #[getter]
    fn abi_toml(&self) -> PyResult<String> {
        self.g.abi.to_toml().map_err(gen_err)
    }

    /// Whether the kernel has a grid barrier or cross-rank flags.
    #[getter]
    fn synchronises(&self) -> bool {
        self.g.abi.synchronises()
    }

    /// Whether the kernel opens with the wait for the previous kernel of its stream, so it may be
    /// launched as a programmatic dependent of it (the ABI's `dependent_launch`; CUDA only).
    #[getter]
    fn dependent_launch(&self) -> bool {
        self.g.abi.dependent_launch
    }

    /// The array arguments a caller binds, in ABI order: dicts with `name`, `buffer`, `part`,
    /// `role` (`input`/`output`), `dtype` (a torch dtype name), `abi_type`, `shape` (per rank),
    /// `align` (bytes) and `numel`.
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.args
            .iter()
            .map(|a| {
                let d = PyDict::new(py);
                d.set_item("name", &a.name)?;
                d.set_item("buffer", &a.buffer)?;
                d.set_item("part", a.part)?;
                let role = match a.role {
                    Role::Input => "input",
                    Role::Output => "output",
                };
                d.set_item("role", role)?;
                d.set_item("dtype", torch_dtype(a.ty))?;
                d.set_item("abi_type", abi_ty_name(a.ty))?;
                d.set_item("shape", a.shape.clone())?;
                d.set_item("align", a.align)?;
                d.set_item("numel", a.len)?;
                Ok(d)
            })
            .collect()
    }

    /// Runs the kernel on the CPU protocol simulator: `inputs[r]` maps rank r's input argument
    /// names to their bytes (little-endian, the argument's dtype, row-major); returns rank r's
    /// output bytes by name, and the simulator's findings (empty when clean).
    #[pyo3(signature = (inputs, seed=0))]
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<HashMap<String, Vec<u8>>>,
        seed: u64,
    ) -> PyResult<(Vec<RankBytes<'py>>, Vec<String>)> {
        let tp = self.g.lowered.tp as usize;
        if inputs.len() != tp {
            return Err(PyValueError::new_err(format!(
                "inputs for {} ranks, the kernel has {tp}",
                inputs.len()
            )));
        }
        let ranks = inputs
            .iter()
            .map(|m| self.rank_inputs(m))
            .collect::<PyResult<Vec<RankInputs>>>()?;
        let (g, ir) = (&self.g, &self.g.ir);
        let report = py
            .detach(|| {
                let case = Case::new(ir, vec![ranks]).map_err(|e| e.to_string())?;
                simulate_case(&g.lowered, ir, &case, &SimOptions::new(seed))
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| PyRuntimeError::new_err(format!("simulator: {e}")))?;
        let findings: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
        let mut outs = Vec::with_capacity(tp);
        for r in 0..tp {
            let mut m = HashMap::new();
            let got = report.outputs.first().and_then(|l| l.get(r));
            for a in self.args.iter().filter(|a| a.role == Role::Output) {
                let b = ir.buffer_by_name(&a.buffer).expect("own buffer");
                let bytes = match got.and_then(|o| o.get(&b)) {
                    Some(t) => {
                        exec::encode(&HostData::Tensor(t.clone()), "data", Ty::from(a.ty), a.len)
                            .map_err(|e| PyRuntimeError::new_err(format!("`{}`: {e}", a.name)))?
                    }
                    // The launch did not complete (a finding says why): NaN, as the poison.
                    None => exec::encode(
                        &HostData::Tensor(HostTensor {
                            dtype: wavefuse_ir::ScalarType::F32,
                            shape: vec![a.len],
                            data: vec![f64::NAN; a.len],
                        }),
                        "data",
                        Ty::from(a.ty),
                        a.len,
                    )
                    .map_err(PyRuntimeError::new_err)?,
                };
                m.insert(a.name.clone(), PyBytes::new(py, &bytes));
            }
            outs.push(m);
        }
        Ok((outs, findings))
    }
}

/// One rank's arrays by argument name, as Python `bytes`.
type RankBytes<'py> = HashMap<String, Bound<'py, PyBytes>>;

fn abi_ty_name(t: AbiTy) -> &'static str {
    match t {
        AbiTy::Bool => "bool",
        AbiTy::I8 => "i8",
        AbiTy::I32 => "i32",
        AbiTy::U32 => "u32",
        AbiTy::F16 => "f16",
        AbiTy::F32 => "f32",
    }
}

impl Generated {
    /// One rank's op-level inputs from the bytes of its input arguments.
    fn rank_inputs(&self, m: &HashMap<String, Vec<u8>>) -> PyResult<RankInputs> {
        let ir = &self.g.ir;
        let mut out = RankInputs::new();
        let get = |a: &Arg| -> PyResult<Vec<f64>> {
            let bytes = m
                .get(&a.name)
                .ok_or_else(|| PyValueError::new_err(format!("missing input `{}`", a.name)))?;
            let ty = Ty::from(a.ty);
            if bytes.len() != ty.bytes() * a.len {
                return Err(PyValueError::new_err(format!(
                    "`{}`: {} bytes, the kernel takes {} elements of {}",
                    a.name,
                    bytes.len(),
                    a.len,
                    abi_ty_name(a.ty)
                )));
            }
            Ok(exec::decode(bytes, ty))
        };
        let words = |a: &Arg| -> PyResult<Vec<i32>> {
            let bytes = m
                .get(&a.name)
                .ok_or_else(|| PyValueError::new_err(format!("missing input `{}`", a.name)))?;
            if bytes.len() != 4 * a.len {
                return Err(PyValueError::new_err(format!(
                    "`{}`: {} bytes, the kernel takes {} 32-bit words",
                    a.name,
                    bytes.len(),
                    a.len
                )));
            }
            Ok(bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect())
        };
        for b in ir.inputs() {
            let decl = ir.buffer(b).expect("own buffer");
            let parts: Vec<&Arg> = self.args.iter().filter(|a| a.buffer == decl.name).collect();
            let part = |p: &str| parts.iter().copied().find(|a| a.part == p);
            let data = match decl.local_type() {
                BufferType::Tensor(t) => {
                    let a = part("data")
                        .ok_or_else(|| gen_err(format!("no array for `{}`", decl.name)))?;
                    HostData::Tensor(HostTensor {
                        dtype: t.dtype,
                        shape: t.shape.clone(),
                        data: get(a)?,
                    })
                }
                BufferType::Weight(w) if w.format == WeightFormat::F16 => {
                    let a = part("data")
                        .ok_or_else(|| gen_err(format!("no array for `{}`", decl.name)))?;
                    HostData::F16Weight(get(a)?)
                }
                BufferType::Weight(_) => {
                    let need = |p: &str| {
                        part(p)
                            .ok_or_else(|| gen_err(format!("no `{p}` array for `{}`", decl.name)))
                    };
                    HostData::Int4(PackedInt4 {
                        qweight: words(need("qweight")?)?,
                        scales: get(need("scales")?)?,
                        qzeros: match part("qzeros") {
                            Some(a) => words(a)?,
                            None => Vec::new(),
                        },
                        g_idx: part("g_idx").map(words).transpose()?,
                    })
                }
            };
            out.insert(b, data);
        }
        Ok(out)
    }
}

/// Generates a kernel through the pipeline (`wavefuse emit`'s path).
///
/// `kind` is `set` (a kernel of the set by name), `file` (a `.wfir` path) or `text` (`.wfir`
/// text); `arch` `gfx906` or `sm90`; `schedule` `default` or `tuned`; `placement` `per_device`
/// or `same_device` (all ranks on one device: kernels with a grid barrier are refitted so every
/// rank's grid is resident at once). `tp` and `batch` 0: a `.wfir` kernel's own.
#[pyfunction]
#[pyo3(signature = (kind, source, *, tp=1, batch=1, arch="gfx906", schedule="default",
    placement="per_device", config=None, hidden=None, n=None, k=None, nq=None, nkv=None,
    group_size=None, zero_point=None, eps=None))]
#[allow(clippy::too_many_arguments)]
fn generate(
    py: Python<'_>,
    kind: &str,
    source: &str,
    tp: u32,
    batch: usize,
    arch: &str,
    schedule: &str,
    placement: &str,
    config: Option<String>,
    hidden: Option<usize>,
    n: Option<usize>,
    k: Option<usize>,
    nq: Option<usize>,
    nkv: Option<usize>,
    group_size: Option<i64>,
    zero_point: Option<String>,
    eps: Option<f64>,
) -> PyResult<Generated> {
    if kind == "set" && (tp == 0 || batch == 0) {
        return Err(gen_err("tp and batch must be at least 1"));
    }
    let arch: Arch = arch.parse().map_err(|e| gen_err(format!("target: {e}")))?;
    let shape = ShapeArgs {
        hidden,
        n,
        k,
        nq,
        nkv,
        group_size,
        zero_point,
        eps,
    };
    let case = case_of(kind, source, tp, batch, config.as_deref(), &shape)?;
    let choice = match schedule {
        "default" => ScheduleChoice::Default,
        "tuned" => ScheduleChoice::Tuned,
        other => {
            return Err(gen_err(format!(
                "schedule={other:?}: use 'default' or 'tuned'"
            )));
        }
    };
    let tuned = tuned_for(choice, None, detect_device(arch)).map_err(gen_err)?;
    // The environment's overrides (`$WAVEFUSE_SCHEDULE_SM90=field=value,...`), as the CLI reads
    // them: the same kernel under the same environment from either.
    let policy = SchedulePolicy::new(tuned, Override::from_vars(|v| std::env::var_os(v)));
    let placement = match placement {
        "per_device" => Placement::PerDevice,
        // One rank: the same kernel either way; say per-device, as `wavefuse emit` does.
        "same_device" if case.tp == 1 => Placement::PerDevice,
        "same_device" => Placement::SameDevice,
        other => return Err(gen_err(format!("unknown placement {other:?}"))),
    };
    let g = py
        .detach(|| suite::generate(&case, arch, &policy, placement))
        .map_err(|e| gen_err(format!("{}: {e}", case.label())))?;
    let args = args_of(&g)?;
    Ok(Generated { g, args })
}

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

/// A kernel instance on a rank group it owns. The instance borrows the group, so the group is
/// boxed (its address never moves) and the instance is dropped first.
struct BoundKernel<D: Device + 'static> {
    inst: ManuallyDrop<KernelInstance<'static, D>>,
    group: ManuallyDrop<Box<RankGroup<D>>>,
    data: Vec<DataParam>,
    /// The error word's parameter name, when the kernel has one.
    error_word: Option<String>,
    /// The one rank this process launches, in a group of one process per rank (None: all).
    local: Option<u32>,
    /// Other processes' arrays mapped into this one (dropped after the instance that uses them).
    mappings: Vec<PeerMapping>,
}

impl<D: Device + 'static> Drop for BoundKernel<D> {
    fn drop(&mut self) {
        // SAFETY: each field is dropped exactly once, the instance (which borrows the group)
        // before the group.
        unsafe {
            ManuallyDrop::drop(&mut self.inst);
            self.mappings.clear();
            ManuallyDrop::drop(&mut self.group);
        }
    }
}

/// What the Python side calls on a bound kernel, whatever the vendor.
trait Launcher: Send + Sync {
    fn data(&self) -> &[DataParam];
    /// Whether a launch of all ranks is one launch of the kernel's ranks entry on `streams[0]`
    /// ([`KernelInstance::launches_ranks_entry`]).
    fn ranks_entry(&self) -> bool;
    /// # Safety
    /// As [`KernelInstance::launch_on_streams`].
    unsafe fn launch(
        &mut self,
        ptrs: &[Vec<u64>],
        streams: &[u64],
    ) -> wavefuse_runtime::Result<u32>;
    fn error_codes(&self) -> wavefuse_runtime::Result<Vec<u32>>;
    /// Every rank's error word's device address (None: the kernel has none).
    fn error_words(&self) -> Option<Vec<u64>>;
    fn reset(&mut self) -> wavefuse_runtime::Result<()>;
    fn last_epoch(&self) -> u32;
    /// This process's rank's IPC exports ([`KernelInstance::ipc_exports`]).
    fn ipc_exports(&self) -> wavefuse_runtime::Result<Vec<(usize, Vec<u8>)>>;
    /// Maps every other rank's exports ([`KernelInstance::import_peers`]).
    fn import_peers(&mut self, exports: &[Vec<(usize, Vec<u8>)>]) -> wavefuse_runtime::Result<()>;
}

impl<D: Device + 'static> Launcher for BoundKernel<D>
where
    KernelInstance<'static, D>: Send + Sync,
{
    fn data(&self) -> &[DataParam] {
        &self.data
    }

    fn ranks_entry(&self) -> bool {
        self.local.is_none() && self.inst.launches_ranks_entry()
    }

    unsafe fn launch(
        &mut self,
        ptrs: &[Vec<u64>],
        streams: &[u64],
    ) -> wavefuse_runtime::Result<u32> {
        if let Some(me) = self.local {
            // One rank launches; the others' slots are bound to the same arrays, never used.
            let tp = self.group.tp() as usize;
            for (d, p) in self.data.iter().zip(ptrs) {
                self.inst
                    .bind_addresses(&d.buffer, d.part, &vec![p[0]; tp])?;
            }
            // SAFETY: the caller vouches for the addresses and the stream.
            return unsafe { self.inst.launch_rank_on_stream(me, streams[0]) };
        }
        for (d, p) in self.data.iter().zip(ptrs) {
            self.inst.bind_addresses(&d.buffer, d.part, p)?;
        }
        if self.inst.launches_ranks_entry() {
            // Ranks sharing the device: one grid of them all on the first stream.
            // SAFETY: the caller vouches for the addresses and the stream.
            return unsafe { self.inst.launch_ranks_on_stream(streams[0]) };
        }
        // SAFETY: the caller vouches for the addresses and streams.
        unsafe { self.inst.launch_on_streams(streams) }
    }

    fn ipc_exports(&self) -> wavefuse_runtime::Result<Vec<(usize, Vec<u8>)>> {
        self.inst.ipc_exports(self.local.unwrap_or(0))
    }

    fn import_peers(&mut self, exports: &[Vec<(usize, Vec<u8>)>]) -> wavefuse_runtime::Result<()> {
        let me = self.local.unwrap_or(0);
        let maps = self.inst.import_peers(me, exports)?;
        self.mappings.extend(maps);
        Ok(())
    }

    fn error_codes(&self) -> wavefuse_runtime::Result<Vec<u32>> {
        (0..self.group.tp())
            .map(|r| self.inst.error_code(r))
            .collect()
    }

    fn reset(&mut self) -> wavefuse_runtime::Result<()> {
        self.inst.reset()
    }

    fn error_words(&self) -> Option<Vec<u64>> {
        let name = self.error_word.as_deref()?;
        (0..self.group.tp())
            .map(|r| self.inst.owned(name, r).map(|b| b.ptr()))
            .collect()
    }

    fn last_epoch(&self) -> u32 {
        self.inst.last_epoch()
    }
}

fn bind<D: Device + 'static>(
    g: &suite::Generated,
    ordinals: &[usize],
    cache: &Cache,
    local: Option<u32>,
    dependent: bool,
) -> Result<Box<dyn Launcher>, String>
where
    KernelInstance<'static, D>: Send + Sync,
{
    let tp = g.lowered.tp;
    if ordinals.len() != tp as usize {
        return Err(format!("{} devices for TP {tp}", ordinals.len()));
    }
    let same = ordinals.iter().all(|&o| o == ordinals[0]);
    let group = if same {
        let d = D::new(ordinals[0]).map_err(|e| e.to_string())?;
        RankGroup::on_one_device(d, tp, SameDeviceMode::FusedGrid)
    } else {
        let mut devs = Vec::new();
        for (r, &o) in ordinals.iter().enumerate() {
            if ordinals[..r].contains(&o) {
                return Err(format!(
                    "device {o} holds several ranks of a multi-device group: give one device \
                     per rank, or the same device for all"
                ));
            }
            devs.push(D::new(o).map_err(|e| e.to_string())?);
        }
        RankGroup::one_per_device(devs)
    }
    .map_err(|e| match e {
        wavefuse_runtime::Error::RankGroup(m) if m.contains("cannot access") => format!(
            "{m}: the devices cannot reach each other's memory (no P2P); run this layer with \
             torch.distributed's allreduce (NCCL/RCCL) and the unfused kernels instead"
        ),
        e => e.to_string(),
    })?;
    let (artifact, _) = suite::artifact(cache, g).map_err(|e| e.to_string())?;
    let group = Box::new(group);
    // SAFETY: the group is boxed and owned by the same `Bound`, which drops the instance first
    // and never moves or replaces the box while the instance lives.
    let group_ref: &'static RankGroup<D> = unsafe { &*(group.as_ref() as *const RankGroup<D>) };
    let mut inst = KernelInstance::new(group_ref, &g.abi, &artifact).map_err(|e| e.to_string())?;
    // §5.7 across launches: only a kernel whose ABI says it waits for its stream predecessor.
    if dependent && g.abi.dependent_launch {
        inst.set_dependent_launch(true).map_err(|e| e.to_string())?;
    }
    match local {
        // The other ranks run in other processes: only this rank's grid must fit.
        Some(me) => inst.check_coresidency_alone(me),
        None => inst.check_coresidency(),
    }
    .map_err(|e| e.to_string())?;
    let data = inst.data_params();
    Ok(Box::new(BoundKernel {
        inst: ManuallyDrop::new(inst),
        group: ManuallyDrop::new(group),
        data,
        error_word: g.abi.error_word_param.clone(),
        local,
        mappings: Vec::new(),
    }))
}

/// A generated kernel compiled, loaded and bound on a rank group of GPUs, with its
/// synchronisation state (counters, flags, error word) allocated and zeroed once.
#[pyclass(module = "wavefuse._wavefuse")]
struct GpuKernel {
    inner: Option<Box<dyn Launcher>>,
    tp: usize,
}

impl GpuKernel {
    fn inner(&mut self) -> PyResult<&mut Box<dyn Launcher>> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the kernel was closed"))
    }
}

#[pymethods]
impl GpuKernel {
    /// Compiles `generated` (through the content-hash cache at `cache_dir`, or the default
    /// cache), loads it on `ordinals[r]` for rank r (all equal: every rank on one device) of the
    /// `runtime` (`cuda` or `hip`), allocates its synchronisation state and checks that every
    /// rank's grid can be resident at once (DESIGN.md §5.9).
    ///
    /// With `local_rank`, this process drives that rank alone of a group of one process per
    /// rank (`ordinals`: this process's device, repeated): exchange `ipc_exports()` with the other
    /// processes and pass them all to `import_peers` before the first launch.
    ///
    /// With `dependent`, each launch is a programmatic dependent of the previous kernel of its
    /// stream where the kernel's ABI allows it (it opens with the wait for that kernel); other
    /// kernels stay in plain stream order.
    #[new]
    #[pyo3(signature = (generated, ordinals, runtime="cuda", cache_dir=None, local_rank=None,
        dependent=false))]
    fn new(
        py: Python<'_>,
        generated: &Generated,
        ordinals: Vec<usize>,
        runtime: &str,
        cache_dir: Option<String>,
        local_rank: Option<u32>,
        dependent: bool,
    ) -> PyResult<GpuKernel> {
        let cache = match cache_dir {
            Some(d) => Cache::at(d),
            None => Cache::from_env(),
        };
        let g = &generated.g;
        let inner = py
            .detach(|| match runtime {
                "cuda" => bind::<CudaDevice>(g, &ordinals, &cache, local_rank, dependent),
                "hip" => bind::<HipDevice>(g, &ordinals, &cache, local_rank, dependent),
                other => Err(format!("unknown runtime {other:?}")),
            })
            .map_err(dev_err)?;
        Ok(GpuKernel {
            inner: Some(inner),
            tp: if local_rank.is_some() {
                1
            } else {
                ordinals.len()
            },
        })
    }

    /// This process's rank's IPC handles of its peer arrays, `(parameter index, handle bytes)`:
    /// what it sends every other process of the group.
    fn ipc_exports<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<(usize, Bound<'py, PyBytes>)>> {
        let ex = self.inner()?.ipc_exports().map_err(dev_err)?;
        Ok(ex
            .into_iter()
            .map(|(i, h)| (i, PyBytes::new(py, &h)))
            .collect())
    }

    /// Maps every rank's exports (`exports[p]`: rank p's `ipc_exports()`) into this process and
    /// points this rank's peer tables at them. Fails when this GPU cannot reach a peer's memory.
    fn import_peers(
        &mut self,
        py: Python<'_>,
        exports: Vec<Vec<(usize, Vec<u8>)>>,
    ) -> PyResult<()> {
        let inner = self.inner()?;
        py.detach(|| inner.import_peers(&exports)).map_err(dev_err)
    }

    /// Whether `launch` launches every rank as one grid on `streams[0]` (ranks sharing one GPU,
    /// through the kernel's ranks entry): no side streams are needed.
    fn ranks_entry(&mut self) -> PyResult<bool> {
        Ok(self.inner()?.ranks_entry())
    }

    /// `(buffer, part)` of every array argument, in the order `launch` takes their addresses.
    fn data_params(&mut self) -> PyResult<Vec<(String, String)>> {
        Ok(self
            .inner()?
            .data()
            .iter()
            .map(|d| (d.buffer.clone(), d.part.to_owned()))
            .collect())
    }

    /// Enqueues one launch of every rank: `ptrs[i][r]` is rank r's device address for array
    /// argument i (`data_params` order), `streams[r]` the raw stream rank r launches on. No
    /// allocation, compile or host synchronisation. The caller (the Python package) has checked
    /// every address against the ABI and keeps the tensors alive in stream order.
    fn launch(&mut self, ptrs: Vec<Vec<u64>>, streams: Vec<u64>) -> PyResult<u32> {
        let tp = self.tp;
        let inner = self.inner()?;
        if ptrs.len() != inner.data().len() || ptrs.iter().any(|p| p.len() != tp) {
            return Err(PyValueError::new_err(format!(
                "{} address lists, the kernel has {} arrays of {tp} ranks",
                ptrs.len(),
                inner.data().len()
            )));
        }
        // SAFETY: the Python package checked dtype, shape, device, contiguity and alignment of
        // every tensor whose address this is; the streams are PyTorch's live streams of each
        // rank's device.
        unsafe { inner.launch(&ptrs, &streams) }.map_err(dev_err)
    }

    /// Every rank's error word (0: no wait timed out). Waits for the device first.
    fn error_codes(&mut self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let inner = self.inner()?;
        py.detach(|| inner.error_codes()).map_err(dev_err)
    }

    /// Every rank's error word (one u32 in device memory) as a device address, for an
    /// asynchronous copy on the caller's stream; None when the kernel has no error word.
    fn error_words(&mut self) -> PyResult<Option<Vec<u64>>> {
        Ok(self.inner()?.error_words())
    }

    /// Re-zeroes the synchronisation state (after a timeout) and restarts the epochs.
    fn reset(&mut self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner()?;
        py.detach(|| inner.reset()).map_err(dev_err)
    }

    /// The epoch of the last launch.
    fn last_epoch(&mut self) -> PyResult<u32> {
        Ok(self.inner()?.last_epoch())
    }

    /// Frees the device state; later calls raise.
    fn close(&mut self) {
        self.inner = None;
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }
}

/// The number of GPUs the `runtime` (`cuda` or `hip`) sees (0 without a driver).
#[pyfunction]
#[pyo3(signature = (runtime="cuda"))]
fn device_count(runtime: &str) -> usize {
    match runtime {
        "cuda" => CudaDevice::count().unwrap_or(0),
        "hip" => HipDevice::count().unwrap_or(0),
        _ => 0,
    }
}

/// Where NVRTC was found when it does not load by name and `$WAVEFUSE_NVRTC_LIB` is unset (the
/// caller sets that variable to it), else None.
#[pyfunction]
fn nvrtc_fallback() -> Option<String> {
    exec::nvrtc_fallback().map(|p| p.display().to_string())
}

/// The kernel set's names.
#[pyfunction]
fn kernel_set() -> Vec<&'static str> {
    KernelId::ALL.map(KernelId::name).to_vec()
}

/// Module initialisation.
#[pymodule]
fn _wavefuse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Generated>()?;
    m.add_class::<GpuKernel>()?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_set, m)?)?;
    m.add_function(wrap_pyfunction!(nvrtc_fallback, m)?)?;
    m.add("GenerateError", m.py().get_type::<GenerateError>())?;
    m.add("DeviceError", m.py().get_type::<DeviceError>())?;
    Ok(())
}
