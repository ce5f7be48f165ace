//! The user's journey with kernels of one's own (docs/tutorial.md walks through it): two fused
//! decode kernels that the wavefuse kernel set does not have, written in the DSL, built at the
//! shapes of the small Llama-style model whose `config.json` ships with this crate, and taken
//! through the same pipeline as the set's kernels — snapshot tests of the generated HIP and CUDA,
//! the protocol simulator against the f64 oracle, an A/B against one's own hand-written CUDA and
//! HIP kernels bound by ABI descriptions (`hand/`), tuning, and the `wavefuse` commands through
//! `--kernel-file` (`cargo run -p own-kernels -- DIR` writes the kernels' textual IR there).
//!
//! Everything the tests check is built by [`kernels`], which is also what `main` writes.

use std::path::Path;

use wavefuse::host::{ColParallel, Gptq, Input, Output, f16};
use wavefuse::ir::reference::{HostData, RankInputs};
use wavefuse::ir::{GptqLayout, GroupSize, Kernel, ZeroPoint};
use wavefuse_kernels::shapes::Model;

wavefuse::kernel! {
    /// The attention output projection with the residual add folded into its epilogue:
    /// `y = round_f16(W_o·a + r)`, INT4 GPTQ weights, column-parallel over `tp` (each rank its
    /// slice of the hidden features, no communication). One FP16 rounding, after the add. `k` and
    /// `n` are one rank's (as every size of a declaration): `n` is the rank's share of the outputs.
    pub fn gemv_residual(tp: u32, batch: usize, k: usize, n: usize, gptq: GptqLayout) across tp {
        in w: gptq(gptq)[k, n] col_parallel;
        in a: f16[batch, k];
        in r: f16[batch, n] col_parallel;
        out y: f16[batch, n] col_parallel;

        y = round_f16(gemv.col(w, a) + r);
    }

    /// The FFN's down projection with its activation computed in front and the TP reduction and
    /// residual behind, in one launch per rank: `h = round_f16(silu(gate) · up)` (every
    /// workgroup recomputes it from the 2 · ffn/tp FP16 inputs), the row-parallel INT4 GEMV
    /// `W_down·h`, published as FP16 partial sums, allreduced over the TP group and added to the
    /// residual stream. `ffn` is one rank's K-shard of the intermediate size.
    pub fn silu_mul_down(tp: u32, batch: usize, ffn: usize, hidden: usize, gptq: GptqLayout) across tp {
        in gate: f16[batch, ffn] col_parallel;
        in up: f16[batch, ffn] col_parallel;
        in w_down: gptq(gptq)[ffn, hidden] row_parallel;
        in residual: f16[batch, hidden];
        out residual_out: f16[batch, hidden];

        let h = round_f16(silu(gate) * up);
        let partial = round_f16(gemv.row(w_down, h));
        residual_out = round_f16(allreduce(partial) + residual);
    }
}

/// The model's GPTQ format: 4 bits, groups of 128 rows, v1 zero points (what AutoGPTQ writes).
pub fn gptq() -> GptqLayout {
    GptqLayout::new(GroupSize::Rows(128), ZeroPoint::V1)
}

/// The model of this crate's `config.json`.
pub fn model() -> Model {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.json");
    wavefuse_harness::model_config::read(&path).expect("the crate's config.json reads")
}

/// Both kernels at `model`'s shapes, TP `tp`, batch `batch`: `gemv_residual` as the attention
/// output projection (hidden → hidden, column-parallel: each rank `hidden / tp` outputs) and
/// `silu_mul_down` as the FFN's down projection (intermediate → hidden, row-parallel: each rank
/// a K-shard of `intermediate / tp` rows). A declaration's sizes are per rank, as in the IR.
pub fn kernels(model: &Model, tp: u32, batch: usize) -> Vec<Kernel> {
    let tp_us = tp as usize;
    vec![
        gemv_residual(tp, batch, model.hidden, model.hidden / tp_us, gptq()),
        silu_mul_down(tp, batch, model.ffn / tp_us, model.hidden, gptq()),
    ]
}

/// One rank's host memory for [`gemv_residual`], as an engine would hold it — the GPTQ arrays of
/// the layer's shard, the activations, the residual and room for the output — and the typed
/// arguments ([`GemvResidualArgs`]) that bind it for `wavefuse::pipeline::launch`.
#[derive(Clone, Debug, PartialEq)]
pub struct GemvResidualData {
    /// GPTQ `qweight`, i32 `[K/8, N]`.
    pub qweight: Vec<i32>,
    /// GPTQ scales, FP16 `[K/128, N]`.
    pub scales: Vec<f16>,
    /// GPTQ zero points, i32 `[K/128, N/8]`.
    pub qzeros: Vec<i32>,
    /// Activations `[batch, K]`.
    pub a: Vec<f16>,
    /// Residual `[batch, N]` (this rank's columns).
    pub r: Vec<f16>,
    /// Output `[batch, N]` (this rank's columns), written by a launch.
    pub y: Vec<f16>,
}

impl GemvResidualData {
    /// The memory of one rank holding `inputs` (as the reference semantics hold them: e.g. a
    /// `wavefuse_kernels::Workload`'s), the output poisoned with NaN.
    pub fn from_inputs(kernel: &Kernel, inputs: &RankInputs) -> Result<Self, String> {
        let get = |name: &str| {
            let b = wavefuse::host::buffer_named(kernel, name).ok_or(format!("no `{name}`"))?;
            inputs.get(&b).ok_or(format!("no input `{name}`"))
        };
        let f16s = |d: &HostData| match d {
            HostData::Tensor(t) => Ok(t.data.iter().map(|&v| f16::from_f64(v)).collect()),
            _ => Err("not a tensor".to_string()),
        };
        let HostData::Int4(w) = get("w")? else {
            return Err("`w` is not an INT4 weight".into());
        };
        let y_len = match wavefuse::host::buffer_named(kernel, "y")
            .and_then(|b| kernel.buffer(b))
            .map(|d| d.local_type())
        {
            Some(wavefuse::ir::BufferType::Tensor(t)) => t.len(),
            _ => return Err("no output `y`".into()),
        };
        Ok(GemvResidualData {
            qweight: w.qweight.clone(),
            scales: w.scales.iter().map(|&v| f16::from_f64(v)).collect(),
            qzeros: w.qzeros.clone(),
            a: f16s(get("a")?)?,
            r: f16s(get("r")?)?,
            y: vec![f16::NAN; y_len],
        })
    }

    /// The typed arguments binding this memory.
    pub fn args(&mut self) -> GemvResidualArgs<'_> {
        GemvResidualArgs {
            w: Gptq::<ColParallel>::new(gptq(), &self.qweight, &self.scales, &self.qzeros, None),
            a: Input::new(&self.a),
            r: Input::new(&self.r),
            y: Output::new(&mut self.y),
        }
    }
}
