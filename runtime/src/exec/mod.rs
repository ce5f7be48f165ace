//! Running an op-level kernel on a device: op-level inputs → device arrays → launch → op-level
//! outputs, for any validated op-level kernel, its ABI description and the compiled artifact.
//!
//! [`OpKernel`] owns one device array per rank for every `Data { buffer, part }` parameter of the
//! lowered kernel and binds it through [`KernelInstance::bind`]; the instance owns the
//! synchronisation state (counters, flags, error word, scratch; DESIGN.md §5.4, §5.11).
//!
//! The binding rules are those of the CPU simulator's binding (`wavefuse_codegen::sim`, private
//! there), restated here for device memory rather than shared:
//! - a parameter with purpose `Data { buffer, part }` is array `part` of op-level buffer `buffer`:
//!   `data` for a dense tensor or an FP16 weight, `qweight`, `scales`, `qzeros`, `g_idx` for a
//!   packed INT4 weight; its length in elements must equal the host array's;
//! - inputs are written by the host before a launch; outputs are tensors (part `data`), poisoned
//!   before a launch (NaN for floating-point elements) so an element the kernel never writes reads
//!   back as NaN, and read back after it;
//! - values convert to the parameter's element type: FP16 by IEEE round-to-nearest-even (every
//!   input of the workload is already representable, so this is exact), FP32 likewise, packed
//!   words as their 32-bit patterns;
//! - a GPTQ `qzeros` parameter of a floating-point type (FP16 or FP32 zero points, as some
//!   hand-written kernels store them) gets the zero points themselves, `[K/G, N]` row-major:
//!   element `8·w + i` is nibble `i` (least significant first) of packed word `w` decoded under
//!   the weight's convention ([`wavefuse_ir::ZeroPoint::decode`]: v1 adds 1, v2 does not), so
//!   `(q − z)·s` is the same number either way ([`encode_zeros`]).
//!
//! - an FP16 tensor bound to an `i8` `data` parameter is quantised on the host, per row (token)
//!   ([`quantise_rows`]: `s = max|x| / 127`, `q = clamp(rne(x · 127 / max|x|), ±127)`, the rule of
//!   the IR's `quantize_int8.rne`), and part `qscale` of the same buffer gets the rows' scales;
//! - several launches make one op ([`OpKernel::chain`]: a split-K GEMV then its reduce, an
//!   activation quantiser then a W4A8 GEMV): each op-level array is allocated once and bound to
//!   every launch that takes it, the shared scratch arrays ([`SharedScratch`]) likewise, and the
//!   launches go in order on each rank's stream.
//!
//! [`compare`](mod@compare) holds the error metrics; [`artifacts`] compiles through the cache
//! and falls back to prebuilt artifacts where no compiler is installed.

pub mod artifacts;
pub mod compare;

use wavefuse_codegen::abi::Abi;
use wavefuse_codegen::lowered::{ParamKind, Purpose, Ty};
use wavefuse_ir::reference::{HostData, HostTensor, RankInputs, RankOutputs};
use wavefuse_ir::{Buffer, BufferType, Kernel, Role, ScalarType, WeightFormat, ZeroPoint};

use crate::compile::Artifact;
use crate::device::{Device, MemKind};
use crate::error::{Error, Result};
use crate::rank::RankGroup;
use crate::sync::KernelInstance;

pub use artifacts::{ArtifactSource, artifact_for, nvrtc_candidates, nvrtc_fallback, prebuilt_key};
pub use compare::{OutputMetrics, compare};

/// One `Data` array of the lowered kernel: which op-level buffer and part, its element type and
/// length, and one device allocation per rank.
struct DataArray<B> {
    buffer: Buffer,
    name: String,
    part: &'static str,
    elem: Ty,
    len: usize,
    /// For outputs: the tensor's type and shape to read back into.
    output: Option<(ScalarType, Vec<usize>)>,
    /// For floating-point `qzeros`: the convention the packed zeros decode under.
    zeros: Option<ZeroPoint>,
    /// For an FP16 tensor bound as `i8` codes or as `qscale`: the row length to quantise by.
    quantised: Option<usize>,
    per_rank: Vec<B>,
}

/// One input array of an op, encoded for the device ([`OpKernel::encoded_inputs`]).
#[derive(Clone, Debug)]
pub struct EncodedInput {
    /// The op-level buffer's name.
    pub buffer: String,
    /// Its array (`data`, `qweight`, `scales`, `qzeros`, `g_idx`, `qscale`).
    pub part: &'static str,
    /// The bytes per rank.
    pub per_rank: Vec<Vec<u8>>,
}

/// An array of a hand-written op's that the runtime owns and several of its launches share (a
/// split-K's FP32 partials, written by the GEMV launch and read by the reduce; quantised
/// activations): allocated once per rank, zeroed once. A launch's parameter takes it as a `data`
/// parameter of buffer `name`, part `data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedScratch {
    /// The name the launches' parameters give as their `buffer`.
    pub name: String,
    /// Element type.
    pub elem: Ty,
    /// Elements per rank.
    pub len: usize,
}

/// An op-level kernel bound to a rank group: device arrays for its inputs and outputs, and the
/// [`KernelInstance`] that launches it.
pub struct OpKernel<'g, D: Device> {
    group: &'g RankGroup<D>,
    inst: KernelInstance<'g, D>,
    /// The op's further launches, in stream order after `inst` ([`OpKernel::chain`]).
    rest: Vec<KernelInstance<'g, D>>,
    arrays: Vec<DataArray<D::Buffer>>,
    /// The launches' shared scratch, per rank: owned here, the launches hold its addresses.
    _shared: Vec<Vec<D::Buffer>>,
    synchronises: bool,
}

impl<'g, D: Device> OpKernel<'g, D> {
    /// Loads `artifact`'s kernel on every rank of `group`, allocates one array per rank for every
    /// `Data` parameter of `abi` (checked against `ir`'s buffers) and binds them. A kernel is
    /// bound by its ABI description, generated ([`Abi::from_kernel`]) or hand-written alike.
    pub fn new(
        group: &'g RankGroup<D>,
        ir: &Kernel,
        abi: &Abi,
        artifact: &Artifact,
    ) -> Result<Self> {
        Self::chain(group, ir, std::slice::from_ref(abi), artifact, &[])
    }

    /// Several launches that together compute op-level kernel `ir` (a hand-written split-K GEMV
    /// then its reduce kernel; an activation quantiser then a W4A8 GEMV), each described by its
    /// own ABI, all kernels of `artifact`: every op-level array is allocated once and bound to
    /// each launch that takes it, every `shared` scratch array too (zeroed once), and
    /// [`OpKernel::run`] launches them in order on each rank's stream. Every output must be a
    /// parameter of some launch; a `Data` parameter names an op-level buffer or a `shared` array.
    pub fn chain(
        group: &'g RankGroup<D>,
        ir: &Kernel,
        abis: &[Abi],
        artifact: &Artifact,
        shared: &[SharedScratch],
    ) -> Result<Self> {
        let Some(first) = abis.first() else {
            return Err(Error::Binding {
                kernel: ir.name().to_owned(),
                message: "no launch to bind".into(),
            });
        };
        let mut insts = Vec::with_capacity(abis.len());
        for abi in abis {
            if ir.tp() != abi.tp {
                return Err(binding(
                    abi,
                    format!(
                        "built for TP {}, the op-level kernel has TP {}",
                        abi.tp,
                        ir.tp()
                    ),
                ));
            }
            insts.push(KernelInstance::new(group, abi, artifact)?);
        }
        let mut shared_bufs = Vec::with_capacity(shared.len());
        for s in shared {
            let per_rank = group.alloc_per_rank(s.elem.bytes() * s.len, MemKind::Device)?;
            for (r, b) in per_rank.iter().enumerate() {
                group.device(r as u32).zero(b)?;
            }
            for (abi, inst) in abis.iter().zip(&mut insts) {
                if takes(abi, &s.name, "data")? {
                    inst.bind(&s.name, "data", &per_rank.iter().collect::<Vec<_>>())?;
                }
            }
            shared_bufs.push(per_rank);
        }
        let mut arrays: Vec<DataArray<D::Buffer>> = Vec::new();
        for (abi, i) in abis.iter().zip(0..) {
            let params = abi
                .param_data()
                .map_err(|m| binding(abi, format!("its ABI description: {m}")))?;
            for p in &params {
                let Some((elem, len, buffer, part)) = data_param(abi, p)? else {
                    continue;
                };
                if shared.iter().any(|s| s.name == *buffer) {
                    continue;
                }
                if let Some(a) = arrays.iter().find(|a| a.name == *buffer && a.part == part) {
                    if (a.elem, a.len) != (elem, len) {
                        return Err(binding(
                            abi,
                            format!(
                                "parameters for `{buffer}.{part}` disagree on type or length                                  ({} [{len}] here, {} [{}] before)",
                                elem.name(),
                                a.elem.name(),
                                a.len
                            ),
                        ));
                    }
                    continue;
                }
                let a = DataArray::alloc(group, ir, abi, &p.name, buffer, part, elem, len)?;
                arrays.push(a);
                // Bind to this launch and every other that takes it.
                let a = arrays.last().expect("pushed");
                let refs: Vec<&D::Buffer> = a.per_rank.iter().collect();
                for (other, inst) in abis.iter().zip(&mut insts).skip(i) {
                    if takes(other, buffer, part)? {
                        inst.bind(buffer, part, &refs)?;
                    }
                }
            }
        }
        for b in ir.outputs() {
            if !arrays.iter().any(|a| a.buffer == b) {
                let name = &ir.buffer(b).expect("own buffer").name;
                return Err(binding(
                    first,
                    format!("output `{name}` has no parameter in the lowered kernel"),
                ));
            }
        }
        let synchronises = abis.iter().any(Abi::synchronises);
        let mut insts = insts.into_iter();
        Ok(OpKernel {
            group,
            inst: insts.next().expect("one launch at least"),
            rest: insts.collect(),
            arrays,
            _shared: shared_bufs,
            synchronises,
        })
    }

    /// The number of launches of one run (1, or the launches of a [`OpKernel::chain`]).
    pub fn launches(&self) -> usize {
        1 + self.rest.len()
    }

    /// Binds `per_rank` as array `part` of op-level buffer `buffer` in every launch that takes
    /// it (a rotation of input sets); `Err` when none does.
    pub fn bind_input(&mut self, buffer: &str, part: &str, per_rank: &[&D::Buffer]) -> Result<()> {
        let mut bound = false;
        let mut first_err = None;
        for inst in std::iter::once(&mut self.inst).chain(self.rest.iter_mut()) {
            match inst.bind(buffer, part, per_rank) {
                Ok(()) => bound = true,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match (bound, first_err) {
            (true, _) | (false, None) => Ok(()),
            (false, Some(e)) => Err(e),
        }
    }

    /// Enqueues one run: every launch in order on every rank; returns the first launch's epoch.
    pub fn launch(&mut self) -> Result<u32> {
        let epoch = self.inst.launch()?;
        for inst in &mut self.rest {
            inst.launch()?;
        }
        Ok(epoch)
    }

    /// Enqueues one run of rank `rank` alone: every launch in order on its stream.
    pub fn launch_alone(&mut self, rank: u32) -> Result<u32> {
        let epoch = self.inst.launch_alone(rank)?;
        for inst in &mut self.rest {
            inst.launch_alone(rank)?;
        }
        Ok(epoch)
    }

    /// Waits for every rank and checks every launch's error words.
    pub fn wait(&mut self) -> Result<()> {
        self.inst.wait()?;
        for inst in &mut self.rest {
            inst.wait()?;
        }
        Ok(())
    }

    /// Whether the kernel has a grid barrier or cross-rank flags (so co-residency matters and
    /// back-to-back launches exercise the epoch protocol).
    pub fn synchronises(&self) -> bool {
        self.synchronises
    }

    /// The kernel instance (launch, wait, epochs, error words); of a [`OpKernel::chain`], the
    /// first launch's ([`OpKernel::launch`] and [`OpKernel::wait`] run them all).
    pub fn instance(&mut self) -> &mut KernelInstance<'g, D> {
        &mut self.inst
    }

    /// Every rank's device array for part `part` of op-level buffer `buffer` (an input or an
    /// output), e.g. to bind one kernel's output as the next kernel's input.
    pub fn array(&self, buffer: &str, part: &str) -> Option<Vec<&D::Buffer>> {
        let a = self
            .arrays
            .iter()
            .find(|a| a.name == buffer && a.part == part)?;
        Some(a.per_rank.iter().collect())
    }

    /// Every input array's device bytes for every rank (`inputs[r]` for rank r), encoded as this
    /// kernel's parameters take them — FP16/FP32 zero points decoded from the packed words,
    /// host-quantised activations — exactly what [`OpKernel::upload_inputs`] writes: the input
    /// sets a timing rotation binds ([`OpKernel::bind_input`]) must be these bytes.
    pub fn encoded_inputs(&self, inputs: &[RankInputs]) -> Result<Vec<EncodedInput>> {
        let tp = self.group.tp() as usize;
        if inputs.len() != tp {
            return Err(self.err(format!(
                "inputs for {} ranks, the group has {tp}",
                inputs.len()
            )));
        }
        let mut out = Vec::new();
        for a in self.arrays.iter().filter(|a| a.output.is_none()) {
            let mut per_rank = Vec::with_capacity(tp);
            for (r, input) in inputs.iter().enumerate() {
                let data = input
                    .get(&a.buffer)
                    .ok_or_else(|| self.err(format!("rank {r}: no data for input `{}`", a.name)))?;
                let bytes = match (a.zeros, a.quantised, data) {
                    (Some(z), _, HostData::Int4(p)) => encode_zeros(&p.qzeros, z, a.elem, a.len),
                    (_, Some(cols), HostData::Tensor(t)) => {
                        encode_quantised(&t.data, cols, a.part, a.elem, a.len)
                    }
                    _ => encode(data, a.part, a.elem, a.len),
                }
                .map_err(|m| self.err(format!("rank {r}, `{}.{}`: {m}", a.name, a.part)))?;
                per_rank.push(bytes);
            }
            out.push(EncodedInput {
                buffer: a.name.clone(),
                part: a.part,
                per_rank,
            });
        }
        Ok(out)
    }

    /// Writes every rank's inputs (`inputs[r]` for rank r) into the device arrays.
    pub fn upload_inputs(&self, inputs: &[RankInputs]) -> Result<()> {
        let arrays = self.arrays.iter().filter(|a| a.output.is_none());
        for (a, e) in arrays.zip(self.encoded_inputs(inputs)?) {
            for (r, (buf, bytes)) in a.per_rank.iter().zip(&e.per_rank).enumerate() {
                self.group.device(r as u32).upload(buf, 0, bytes)?;
            }
        }
        Ok(())
    }

    /// Fills every output array of every rank with NaN (all-ones bytes for integer elements), so
    /// an element the kernel does not write cannot pass as a result.
    pub fn poison_outputs(&self) -> Result<()> {
        for a in self.arrays.iter().filter(|a| a.output.is_some()) {
            let bytes = poison(a.elem, a.len);
            for (r, buf) in a.per_rank.iter().enumerate() {
                self.group.device(r as u32).upload(buf, 0, &bytes)?;
            }
        }
        Ok(())
    }

    /// Reads every rank's outputs back (after waiting for all work on the device).
    pub fn read_outputs(&self) -> Result<Vec<RankOutputs>> {
        let mut out = vec![RankOutputs::new(); self.group.tp() as usize];
        for a in &self.arrays {
            let Some((dtype, shape)) = &a.output else {
                continue;
            };
            for (r, buf) in a.per_rank.iter().enumerate() {
                let mut bytes = vec![0u8; a.elem.bytes() * a.len];
                self.group.device(r as u32).download(buf, 0, &mut bytes)?;
                let data = decode(&bytes, a.elem);
                let t = HostTensor {
                    dtype: *dtype,
                    shape: shape.clone(),
                    data,
                };
                out[r].insert(a.buffer, t);
            }
        }
        Ok(out)
    }

    /// Upload `inputs`, poison the outputs, launch once on every rank, wait (checking the error
    /// words) and read the outputs back.
    pub fn run(&mut self, inputs: &[RankInputs]) -> Result<Vec<RankOutputs>> {
        self.upload_inputs(inputs)?;
        self.poison_outputs()?;
        self.launch()?;
        self.wait()?;
        self.read_outputs()
    }

    /// [`OpKernel::run`] with the ranks launched one after another, each alone on its device
    /// and waited for before the next ([`KernelInstance::launch_alone`]): how a kernel that does
    /// not communicate is checked when it is timed one rank alone.
    pub fn run_each_alone(&mut self, inputs: &[RankInputs]) -> Result<Vec<RankOutputs>> {
        self.upload_inputs(inputs)?;
        self.poison_outputs()?;
        for r in 0..self.group.tp() {
            self.launch_alone(r)?;
            self.wait()?;
        }
        self.read_outputs()
    }

    fn err(&self, message: String) -> Error {
        Error::Binding {
            kernel: self.inst.name().to_owned(),
            message,
        }
    }
}

fn binding(abi: &Abi, message: String) -> Error {
    Error::Binding {
        kernel: abi.symbol.clone(),
        message,
    }
}

/// Whether a launch has a `Data` parameter for `buffer.part`.
fn takes(abi: &Abi, buffer: &str, part: &str) -> Result<bool> {
    let params = abi
        .param_data()
        .map_err(|m| binding(abi, format!("its ABI description: {m}")))?;
    Ok(params.iter().any(|p| {
        matches!(&p.kind,
            ParamKind::Array { purpose: Purpose::Data { buffer: b, part: q }, .. }
            | ParamKind::PeerArrays { purpose: Purpose::Data { buffer: b, part: q }, .. }
            if b == buffer && *q == part)
    }))
}

/// A `Data` array parameter's element type, length, buffer and part (None for other purposes).
fn data_param<'p>(
    abi: &Abi,
    p: &'p wavefuse_codegen::lowered::ParamData,
) -> Result<Option<(Ty, usize, &'p String, &'static str)>> {
    Ok(match &p.kind {
        ParamKind::Array {
            elem,
            len,
            purpose: Purpose::Data { buffer, part },
            ..
        }
        | ParamKind::PeerArrays {
            elem,
            len,
            purpose: Purpose::Data { buffer, part },
            ..
        } => Some((*elem, *len, buffer, *part)),
        ParamKind::Scalar {
            purpose: Purpose::Data { buffer, .. },
            ..
        } => {
            return Err(binding(
                abi,
                format!(
                    "scalar parameter `{}` is bound to buffer `{buffer}`: not supported",
                    p.name
                ),
            ));
        }
        _ => None,
    })
}

impl<B> DataArray<B> {
    /// One array per rank for `buffer.part` of `ir`, checked against the buffer's declaration.
    #[allow(clippy::too_many_arguments)]
    fn alloc<D: Device<Buffer = B>>(
        group: &RankGroup<D>,
        ir: &Kernel,
        abi: &Abi,
        param: &str,
        buffer: &str,
        part: &'static str,
        elem: Ty,
        len: usize,
    ) -> Result<Self> {
        let err = |m: String| binding(abi, m);
        let b = ir
            .buffer_by_name(buffer)
            .ok_or_else(|| err(format!("parameter `{param}`: no buffer `{buffer}`")))?;
        let decl = ir.buffer(b).expect("found by name");
        let output = match decl.role {
            Role::Input => None,
            Role::Output => {
                let BufferType::Tensor(t) = decl.local_type() else {
                    return Err(err(format!("output `{buffer}` is not a tensor")));
                };
                if part != "data" || t.len() != len {
                    return Err(err(format!(
                        "parameter `{param}` ({part}, {len} elements) does not match output \
                         `{buffer}` ({} elements)",
                        t.len()
                    )));
                }
                Some((t.dtype, t.shape.clone()))
            }
        };
        let zeros = match (part, elem, decl.local_type()) {
            ("qzeros", Ty::F16 | Ty::F32, BufferType::Weight(w)) => match w.format {
                WeightFormat::Gptq(l) => Some(l.zero),
                _ => {
                    return Err(err(format!(
                        "parameter `{param}`: {} zero points of `{buffer}` are supported for \
                         GPTQ weights only (bind the packed u32 qzeros)",
                        elem.name()
                    )));
                }
            },
            _ => None,
        };
        // An FP16 tensor taken as INT8 codes, or its per-row scales: quantised on the host.
        let quantised = match (part, elem, decl.local_type(), &output) {
            ("data", Ty::I8, BufferType::Tensor(t), None)
            | ("qscale", _, BufferType::Tensor(t), None)
                if t.dtype != ScalarType::I8 =>
            {
                Some(*t.shape.last().unwrap_or(&1))
            }
            ("qscale", _, _, _) => {
                return Err(err(format!(
                    "parameter `{param}`: `qscale` is the per-row scale of an input tensor \
                     quantised on the host; `{buffer}` is not one"
                )));
            }
            _ => None,
        };
        let per_rank = group.alloc_per_rank(elem.bytes() * len, MemKind::Device)?;
        Ok(DataArray {
            buffer: b,
            name: buffer.to_owned(),
            part,
            elem,
            len,
            output,
            zeros,
            quantised,
            per_rank,
        })
    }
}

/// Rows of `cols` values quantised to INT8 per row (a token of an activation `[batch, K]`), the
/// rule of the IR's `quantize_int8.rne` with clamp 127 over a whole row
/// ([`wavefuse_ir::reference::quant::q8_rne_quantize`]): `m = max|x|`, `s = m / 127`, `r = 127 / m`
/// (f32 divisions; 0 where m = 0), `q = clamp(rne(x · r), −127, 127)`. Returns the codes and the
/// per-row scales `s`; `q · s` approximates `x` within `s / 2` per element.
pub fn quantise_rows(x: &[f64], cols: usize) -> (Vec<i8>, Vec<f64>) {
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len() / cols.max(1));
    for row in x.chunks(cols.max(1)) {
        let (q, s) = wavefuse_ir::reference::quant::q8_rne_quantize(row, 127);
        codes.extend(q.iter().map(|&c| c as i8));
        scales.push(s);
    }
    (codes, scales)
}

/// The device bytes of a tensor quantised on the host ([`quantise_rows`], rows of `cols`): its
/// INT8 codes for part `data`, its per-row scales (as `elem`) for part `qscale`.
pub fn encode_quantised(
    x: &[f64],
    cols: usize,
    part: &str,
    elem: Ty,
    len: usize,
) -> Result<Vec<u8>, String> {
    let (codes, scales) = quantise_rows(x, cols);
    let out: Vec<u8> = match part {
        "data" => codes.iter().map(|&c| c as u8).collect(),
        "qscale" => {
            if !matches!(elem, Ty::F32 | Ty::F16) {
                return Err(format!("scales as {} are not supported", elem.name()));
            }
            let mut out = Vec::new();
            push_values(&scales, elem, &mut out);
            out
        }
        _ => return Err(format!("a quantised tensor has no `{part}` array")),
    };
    if out.len() != elem.bytes() * len {
        return Err(format!(
            "the kernel takes {len} elements, the quantised data has {}",
            out.len() / elem.bytes()
        ));
    }
    Ok(out)
}

/// The device bytes of array `part` of `data`, as `len` elements of type `elem`.
pub fn encode(data: &HostData, part: &str, elem: Ty, len: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(elem.bytes() * len);
    match (data, part) {
        (HostData::Tensor(t), "data") => push_values(&t.data, elem, &mut out),
        (HostData::F16Weight(v), "data") => push_values(v, elem, &mut out),
        (HostData::Int4(p), "scales") => push_values(&p.scales, elem, &mut out),
        (HostData::Int4(p), "qweight") => push_words(&p.qweight, elem, &mut out)?,
        (HostData::Int4(p), "qzeros") => push_words(&p.qzeros, elem, &mut out)?,
        (HostData::Int4(p), "g_idx") => {
            let g = p.g_idx.as_deref().ok_or("the weight has no g_idx")?;
            push_words(g, elem, &mut out)?
        }
        _ => return Err(format!("the data has no `{part}` array")),
    }
    if out.len() != elem.bytes() * len {
        return Err(format!(
            "the kernel takes {len} elements, the data has {}",
            out.len() / elem.bytes()
        ));
    }
    Ok(out)
}

/// The zero points of packed GPTQ `qzeros` (`[K/G, N/8]` words, nibble i of word w is column
/// 8·(w mod N/8) + i) as `len` floating-point elements `[K/G, N]` of type `elem`: element 8·w + i
/// is `zero.decode(nibble i of word w)` (v1: the stored nibble + 1; v2: the nibble; exact in FP16).
pub fn encode_zeros(
    qzeros: &[i32],
    zero: ZeroPoint,
    elem: Ty,
    len: usize,
) -> Result<Vec<u8>, String> {
    if !matches!(elem, Ty::F16 | Ty::F32) {
        return Err(format!("zero points as {} are not supported", elem.name()));
    }
    if qzeros.len() * 8 != len {
        return Err(format!(
            "the kernel takes {len} zero points, the data has {} ({} packed words)",
            qzeros.len() * 8,
            qzeros.len()
        ));
    }
    let values: Vec<f64> = zeros_of(qzeros, zero);
    let mut out = Vec::with_capacity(elem.bytes() * len);
    push_values(&values, elem, &mut out);
    Ok(out)
}

/// The zero points of packed GPTQ `qzeros`, one per column and group, in `[K/G, N]` order.
pub fn zeros_of(qzeros: &[i32], zero: ZeroPoint) -> Vec<f64> {
    qzeros
        .iter()
        .flat_map(|&w| (0..8).map(move |i| zero.decode((w as u32) >> (4 * i)) as f64))
        .collect()
}

fn push_values(values: &[f64], elem: Ty, out: &mut Vec<u8>) {
    for &x in values {
        match elem {
            Ty::F16 => out.extend(half::f16::from_f64(x).to_bits().to_le_bytes()),
            Ty::F32 => out.extend((x as f32).to_le_bytes()),
            Ty::I32 => out.extend((x as i32).to_le_bytes()),
            Ty::U32 => out.extend((x as u32).to_le_bytes()),
            Ty::I8 => out.push(x as i8 as u8),
            Ty::Bool => out.push(u8::from(x != 0.0)),
        }
    }
}

/// Packed 32-bit words keep their bit patterns.
fn push_words(words: &[i32], elem: Ty, out: &mut Vec<u8>) -> Result<(), String> {
    if !matches!(elem, Ty::I32 | Ty::U32) {
        return Err(format!("packed words bound to a {} array", elem.name()));
    }
    out.extend(words.iter().flat_map(|w| w.to_le_bytes()));
    Ok(())
}

/// The poison pattern: a quiet NaN per floating-point element, all-ones bytes otherwise.
fn poison(elem: Ty, len: usize) -> Vec<u8> {
    match elem {
        Ty::F16 => 0x7E00u16.to_le_bytes().repeat(len),
        Ty::F32 => 0x7FC0_0000u32.to_le_bytes().repeat(len),
        _ => vec![0xFF; elem.bytes() * len],
    }
}

/// Device bytes of elements of type `elem`, as f64.
pub fn decode(bytes: &[u8], elem: Ty) -> Vec<f64> {
    let n = elem.bytes();
    bytes
        .chunks_exact(n)
        .map(|c| match elem {
            Ty::F16 => half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64(),
            Ty::F32 => f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))),
            Ty::I32 => f64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))),
            Ty::U32 => f64::from(u32::from_le_bytes(c.try_into().expect("4 bytes"))),
            Ty::I8 => f64::from(c[0] as i8),
            Ty::Bool => f64::from(c[0]),
        })
        .collect()
}

/// The CUDA version the installed driver supports (`cuDriverGetVersion`), as (major, minor).
/// Call only after a [`crate::CudaDevice`] was opened (the driver is then loaded).
pub fn cuda_driver_version() -> Result<(u32, u32), crate::DeviceError> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: the driver library is loaded (a device was opened); `v` is a valid out-pointer.
    let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if rc != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(crate::DeviceError::Api {
            api: "cuDriverGetVersion",
            code: rc as i64,
            message: format!("{rc:?}"),
        });
    }
    let v = v.max(0) as u32;
    Ok((v / 1000, (v % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use wavefuse_ir::reference::PackedInt4;

    use super::*;

    #[test]
    fn values_round_trip_through_device_bytes() {
        let t = HostData::Tensor(HostTensor {
            dtype: ScalarType::F16,
            shape: vec![3],
            data: vec![1.5, -0.000_061_035_156_25, 65504.0],
        });
        let bytes = encode(&t, "data", Ty::F16, 3).unwrap();
        assert_eq!(bytes[..2], 0x3E00u16.to_le_bytes());
        assert_eq!(
            decode(&bytes, Ty::F16),
            [1.5, -0.000_061_035_156_25, 65504.0]
        );
        let w = HostData::Int4(PackedInt4 {
            qweight: vec![-1, 0x1234_5678],
            scales: vec![0.25],
            qzeros: vec![],
            g_idx: None,
        });
        let q = encode(&w, "qweight", Ty::U32, 2).unwrap();
        assert_eq!(q, [0xFF, 0xFF, 0xFF, 0xFF, 0x78, 0x56, 0x34, 0x12]);
        assert_eq!(decode(&q, Ty::U32), [4_294_967_295.0, 305_419_896.0]);
        assert!(
            encode(&w, "g_idx", Ty::I32, 0)
                .unwrap_err()
                .contains("no g_idx")
        );
        assert!(
            encode(&w, "scales", Ty::F16, 2)
                .unwrap_err()
                .contains("2 elements")
        );
        assert!(
            encode(&t, "qweight", Ty::U32, 3)
                .unwrap_err()
                .contains("no `qweight`")
        );
        assert!(
            encode(&w, "qweight", Ty::F16, 4).is_err(),
            "words into an f16 array"
        );
    }

    #[test]
    fn packed_zero_points_unpack_column_by_column_under_their_convention() {
        // Word 0 holds columns 0..8 (nibble i = column i), word 1 columns 8..16.
        let packed = [0x7654_3210u32 as i32, 0xFEDC_BA98u32 as i32];
        let v2 = zeros_of(&packed, ZeroPoint::V2);
        assert_eq!(v2, (0..16).map(f64::from).collect::<Vec<_>>());
        let v1 = zeros_of(&packed, ZeroPoint::V1);
        assert_eq!(v1, (1..17).map(f64::from).collect::<Vec<_>>());
        let bytes = encode_zeros(&packed, ZeroPoint::V1, Ty::F16, 16).unwrap();
        assert_eq!(decode(&bytes, Ty::F16), v1, "exact in FP16");
        assert!(encode_zeros(&packed, ZeroPoint::V1, Ty::U32, 16).is_err());
        assert!(encode_zeros(&packed, ZeroPoint::V1, Ty::F16, 8).is_err());
    }

    #[test]
    fn poison_reads_back_as_nan() {
        for elem in [Ty::F16, Ty::F32] {
            assert!(decode(&poison(elem, 4), elem).iter().all(|v| v.is_nan()));
        }
        assert_eq!(decode(&poison(Ty::U32, 1), Ty::U32), [f64::from(u32::MAX)]);
    }
}
