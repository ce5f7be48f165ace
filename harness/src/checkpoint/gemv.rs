//! `gemv_int4` on a checkpoint layer: the kernel for the file's shapes, activations from `.npy`,
//! binding per rank, the f64 reference, and the output file.

use std::path::Path;

use wavefuse::ir::reference::{HostData, HostTensor, RankInputs, RankOutputs, evaluate, round_to};
use wavefuse::ir::{
    Buffer, BufferType, Builder, GptqLayout, Kernel, Parallelism, ScalarType, Sharding, Tensor,
    Weight, WeightFormat, validate,
};

use super::{CheckpointError, GptqWeight, LayerInfo, QuantOverrides, load_layer};
use crate::npy::{self, NpyDtype};

/// An activation read from `.npy`, rounded to FP16, as `[B, K]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Activation {
    /// `[B, K]` FP16 values.
    pub tensor: HostTensor,
    /// The file held a `[K]` vector (outputs are written as `[N]` then).
    pub vector: bool,
    /// The dtype in the file (f32 and f64 values are rounded to FP16, nearest-even).
    pub stored: NpyDtype,
}

/// The most tokens a kernel decodes at once ([`crate::shapes::MAX_BATCH`], `--batch 1..=64`);
/// a `[B, K]` activation with B above it is refused before any kernel is built (within it, a
/// batch the lowering cannot take is refused by the lowering, with the reason).
pub const MAX_BATCH: usize = crate::shapes::MAX_BATCH;

/// Read an activation for a layer with reduction length `k`: shape `[K]` or `[B, K]` with
/// B = 1..=64 (`MAX_BATCH`), f16 or f32 (f64 too), rounded to FP16. Values that overflow FP16, NaN
/// and infinities are errors.
pub fn load_activation(path: &Path, k: usize) -> Result<Activation, CheckpointError> {
    let a = npy::read(path)?;
    let err = |what: String| CheckpointError::Input {
        path: path.to_owned(),
        what,
    };
    let (batch, vector) = match a.shape[..] {
        [kk] if kk == k => (1, true),
        [b, kk] if kk == k && b > 0 => (b, false),
        _ => {
            return Err(err(format!(
                "activation shape {:?} does not fit the layer: expected [K={k}] or [B, K={k}]",
                a.shape
            )));
        }
    };
    if batch > MAX_BATCH {
        return Err(err(format!(
            "activation shape {:?} has batch B = {batch}, above the batch limit of {MAX_BATCH}: wavefuse's kernels \
             decode 1 to {MAX_BATCH} tokens at once (B = 1..={MAX_BATCH}); split the input into batches of at most {MAX_BATCH} rows",
            a.shape
        )));
    }
    let mut data = Vec::with_capacity(a.data.len());
    for (i, &x) in a.data.iter().enumerate() {
        let h = round_to(ScalarType::F16, x);
        if !h.is_finite() {
            return Err(err(format!("element {i} = {x} is not a finite FP16 value")));
        }
        data.push(h);
    }
    let tensor = HostTensor {
        dtype: ScalarType::F16,
        shape: vec![batch, k],
        data,
    };
    Ok(Activation {
        tensor,
        vector,
        stored: a.dtype,
    })
}

/// `gemv_int4` for a layer of any K and N: `y = round_f16(gemv.col(w, x))`, the weight
/// column-parallel over `tp` ranks (`n_local` columns each), x replicated. The IR is the one
/// `set::gemv_int4` builds, with K as a parameter.
pub fn gemv_int4_kernel(
    tp: u32,
    batch: usize,
    k: usize,
    n_local: usize,
    layout: GptqLayout,
) -> Kernel {
    let mut b = Builder::new("gemv_int4", tp);
    let col = Sharding::ColumnParallel { tp };
    let w = b.input(
        "w",
        Weight {
            format: WeightFormat::Gptq(layout),
            k,
            n: n_local,
        },
        col,
    );
    let x = b.input(
        "x",
        Tensor {
            dtype: ScalarType::F16,
            shape: vec![batch, k],
        },
        Sharding::Replicated,
    );
    let y = b.output(
        "y",
        Tensor {
            dtype: ScalarType::F16,
            shape: vec![batch, n_local],
        },
        col,
    );
    let xv = b.load(x);
    let g = b.gemv(w, xv, Parallelism::Column);
    let r = b.round_f16(g);
    b.store(r, y);
    b.finish()
}

/// A `gemv_int4` run on a checkpoint layer: the kernel for the file's shapes and its inputs.
#[derive(Clone, Debug)]
pub struct GemvCase {
    /// The kernel (see [`gemv_int4_kernel`]).
    pub kernel: Kernel,
    /// Per-rank inputs.
    pub inputs: Vec<RankInputs>,
    /// The layer.
    pub layer: LayerInfo,
    /// The activation file held a `[K]` vector.
    pub vector_input: bool,
}

/// Load a layer and an activation and build `gemv_int4` for them at TP = `tp` (columns split
/// evenly; N/tp must be a multiple of 8 when zero points are stored).
pub fn prepare_gemv(
    tp: u32,
    weights: &Path,
    layer: &str,
    input: &Path,
    over: &QuantOverrides,
) -> Result<GemvCase, CheckpointError> {
    let w = load_layer(weights, layer, over)?;
    let x = load_activation(input, w.info.k)?;
    let (k, n) = (w.info.k, w.info.n);
    let batch = x.tensor.shape[0];
    let kernel = gemv_int4_kernel(tp, batch, k, n / tp as usize, w.info.layout);
    let fits = |tp: u32| {
        n % tp as usize == 0
            && validate(&gemv_int4_kernel(
                tp,
                batch,
                k,
                n / tp as usize,
                w.info.layout,
            ))
            .is_ok()
    };
    let hint = || {
        let ok: Vec<String> = crate::shapes::TP_SIZES
            .iter()
            .filter(|&&t| fits(t))
            .map(|t| t.to_string())
            .collect();
        let default = if tp == 4 {
            " (4 is --tp's default)"
        } else {
            ""
        };
        match &ok[..] {
            [] => format!("; no TP size of 1, 2, 4, 8 fits N = {n}{default}"),
            ok => format!(
                "; TP sizes that divide this shape: {} (pass --tp {}){default}",
                ok.join(", "),
                ok[ok.len() - 1]
            ),
        }
    };
    if n % tp as usize != 0 {
        return Err(CheckpointError::Kernel {
            kernel: kernel.name().into(),
            what: format!(
                "N = {n} columns of `{}` do not split evenly over tp = {tp}{}",
                w.info.layer,
                hint()
            ),
        });
    }
    validate(&kernel).map_err(|e| CheckpointError::Kernel {
        kernel: kernel.name().into(),
        what: format!("at tp = {tp}: {e}{}", hint()),
    })?;
    let inputs = bind(&kernel, &w, &x)?;
    Ok(GemvCase {
        kernel,
        inputs,
        layer: w.info,
        vector_input: x.vector,
    })
}

impl GemvCase {
    /// The full output `[B, N]` (or `[N]` for a vector input) from the per-rank outputs.
    pub fn gather(&self, outputs: &[RankOutputs]) -> Result<HostTensor, CheckpointError> {
        let y = self
            .kernel
            .buffer_by_name("y")
            .expect("gemv_int4 has an output y");
        gather_columns(&self.kernel, y, outputs, self.vector_input)
    }
}

/// Inputs for every rank of `kernel`, its one GPTQ weight bound to layer `layer` of the
/// checkpoint and its one activation to the `.npy` at `input`. The kernel's weight type (K, N,
/// layout) must be exactly the layer's: build it with [`gemv_int4_kernel`] (or use
/// [`prepare_gemv`]) for shapes other than the kernel set's.
pub fn gemv_inputs(
    kernel: &Kernel,
    weights: &Path,
    layer: &str,
    input: &Path,
    over: &QuantOverrides,
) -> Result<Vec<RankInputs>, CheckpointError> {
    bindable(kernel)?;
    let w = load_layer(weights, layer, over)?;
    let x = load_activation(input, w.info.k)?;
    bind(kernel, &w, &x)
}

/// The kernel's weight and activation inputs, if it has exactly one of each and nothing else.
fn bindable(kernel: &Kernel) -> Result<(Buffer, Buffer), CheckpointError> {
    let err = |what: String| CheckpointError::Kernel {
        kernel: kernel.name().into(),
        what,
    };
    let (mut weights, mut tensors) = (Vec::new(), Vec::new());
    for b in kernel.inputs() {
        let d = kernel.buffer(b).expect("kernel's own buffer");
        match &d.ty {
            BufferType::Weight(w) if matches!(w.format, WeightFormat::Gptq(_)) => weights.push(b),
            BufferType::Tensor(_) => tensors.push(b),
            BufferType::Weight(w) => {
                return Err(err(format!(
                    "weight `{}` is {}, not GPTQ",
                    d.name, w.format
                )));
            }
        }
    }
    match (&weights[..], &tensors[..]) {
        (&[w], &[x]) => Ok((w, x)),
        _ => Err(err(format!(
            "--weights binds kernels with one GPTQ weight and one activation input (gemv_int4); this one has {} weights and {} other inputs",
            weights.len(),
            tensors.len()
        ))),
    }
}

fn bind(
    kernel: &Kernel,
    w: &GptqWeight,
    x: &Activation,
) -> Result<Vec<RankInputs>, CheckpointError> {
    let (wb, xb) = bindable(kernel)?;
    let err = |what: String| CheckpointError::Kernel {
        kernel: kernel.name().into(),
        what,
    };
    let wd = kernel.buffer(wb).expect("kernel's own buffer");
    let BufferType::Weight(local) = wd.local_type() else {
        unreachable!("a weight")
    };
    let tp = kernel.tp() as usize;
    let ranks_n = match wd.sharding {
        Sharding::ColumnParallel { .. } => local.n * tp,
        Sharding::Replicated => local.n,
        s => {
            return Err(err(format!(
                "weight `{}` is {s:?}; only column-parallel or replicated weights are bound from a file",
                wd.name
            )));
        }
    };
    let file_ty = w.info.weight();
    if local.format != file_ty.format || local.k != file_ty.k || ranks_n != file_ty.n {
        return Err(err(format!(
            "weight `{}` is {}[{}, {ranks_n}] over all ranks but layer `{}` is {}[{}, {}]; build the kernel for the \
             file's shapes (checkpoint::gemv_int4_kernel / prepare_gemv)",
            wd.name, local.format, local.k, w.info.layer, file_ty.format, file_ty.k, file_ty.n
        )));
    }
    let xd = kernel.buffer(xb).expect("kernel's own buffer");
    if xd.local_type()
        != BufferType::Tensor(Tensor {
            dtype: ScalarType::F16,
            shape: x.tensor.shape.clone(),
        })
    {
        return Err(err(format!(
            "input `{}` is {}, the activation is f16{:?}",
            xd.name,
            xd.local_type(),
            x.tensor.shape
        )));
    }
    let per_rank = |rank: usize| match wd.sharding {
        Sharding::ColumnParallel { .. } => w.columns(rank * local.n, local.n),
        _ => w.packed.clone(),
    };
    Ok((0..tp)
        .map(|rank| {
            RankInputs::from([
                (wb, HostData::Int4(per_rank(rank))),
                (xb, HostData::Tensor(x.tensor.clone())),
            ])
        })
        .collect())
}

/// Concatenate a column-parallel `[B, n_local]` output over ranks into `[B, N]`.
fn gather_columns(
    kernel: &Kernel,
    y: Buffer,
    outputs: &[RankOutputs],
    vector: bool,
) -> Result<HostTensor, CheckpointError> {
    let err = |what: String| CheckpointError::Kernel {
        kernel: kernel.name().into(),
        what,
    };
    let parts: Vec<&HostTensor> = outputs
        .iter()
        .enumerate()
        .map(|(rank, o)| {
            o.get(&y)
                .ok_or_else(|| err(format!("rank {rank} produced no output `y`")))
        })
        .collect::<Result<_, _>>()?;
    let first = parts.first().ok_or_else(|| err("no ranks".into()))?;
    let (batch, n_local) = (first.shape[0], first.shape[1]);
    let n = n_local * parts.len();
    let mut data = Vec::with_capacity(batch * n);
    for b in 0..batch {
        for p in &parts {
            data.extend_from_slice(&p.data[b * n_local..(b + 1) * n_local]);
        }
    }
    let shape = if vector && batch == 1 {
        vec![n]
    } else {
        vec![batch, n]
    };
    Ok(HostTensor {
        dtype: first.dtype,
        shape,
        data,
    })
}

/// `wavefuse run gemv_int4 --device cpu-ref` on a checkpoint: the f64 reference at TP = 1;
/// `[B, N]` FP16 (or `[N]` for a `[K]` input).
pub fn run_reference(
    weights: &Path,
    layer: &str,
    input: &Path,
    over: &QuantOverrides,
) -> Result<HostTensor, CheckpointError> {
    let case = prepare_gemv(1, weights, layer, input, over)?;
    let outputs = evaluate(&case.kernel, &case.inputs)?;
    case.gather(&outputs)
}

/// Write an FP16 output as `.npy` (`<f2`, C order, the tensor's shape).
pub fn write_output_npy(path: &Path, y: &HostTensor) -> Result<(), CheckpointError> {
    if y.dtype != ScalarType::F16 {
        return Err(CheckpointError::Input {
            path: path.to_owned(),
            what: format!("outputs are written as f16, this one is {}", y.dtype),
        });
    }
    Ok(npy::write_f16(path, &y.shape, &y.data)?)
}

#[cfg(test)]
mod tests {
    use wavefuse::ir::{GroupSize, ZeroPoint};

    use super::*;
    use crate::shapes::HIDDEN;

    /// The builder version is the kernel set's `gemv_int4` with K free.
    #[test]
    fn gemv_int4_kernel_is_the_set_kernel_at_hidden() {
        for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
            let layout = GptqLayout::new(GroupSize::Rows(128), zero);
            for (tp, batch) in [(1, 1), (4, 3)] {
                let ours = gemv_int4_kernel(tp, batch, HIDDEN, 4352, layout);
                assert_eq!(ours, crate::set::gemv_int4(tp, batch, HIDDEN, 4352, layout));
            }
        }
    }
}
