//! The block: two kernels of the set, their seeded inputs, and the f64 reference of the chain.
//!
//! Per rank r of the TP group: `y_r = gemv_int4_dual_silu(w_gate_r, w_up_r, x)` (column-parallel,
//! 5120 → 4352 at TP 4), then `gemv_int4_allreduce_rmsnorm(w_down_r, y_r, residual, norm_w)`
//! (row-parallel, 4352 → 5120: partial sums, allreduce, residual add, RMSNorm; outputs the new
//! residual stream and the normalised activation of the next layer).
//!
//! The reference of the chain is the f64 evaluator of each kernel, composed: the first kernel's
//! reference output `y` (rounded to FP16, a rounding point of its IR) is the second kernel's input
//! `x`. On a device the second kernel reads the first one's output itself, so what is compared
//! is the whole block.

use wavefuse::ir::Kernel;
use wavefuse::ir::reference::{HostData, RankInputs, RankOutputs, evaluate};
use wavefuse_kernels::Workload;

/// Ranks of the TP group (all on one device).
pub const TP: u32 = 4;
/// Decoder layers of Qwen 3.5 27B: each has one FFN block.
pub const LAYERS: usize = 64;
/// The first kernel's output, the intermediate of the block.
pub const GATE_UP_OUT: &str = "y";
/// The second kernel's activation input.
pub const DOWN_IN: &str = "x";

/// The relative-L2 tolerance of every output of the block (and of the intermediate `y`) against
/// the chained f64 reference, and why.
pub const TOLERANCE: f64 = 1e-3;
/// Why [`TOLERANCE`] is what it is.
pub const TOLERANCE_WHY: &str = "both kernels are held to 1e-3 alone (suite tolerances); the \
    intermediate y is an FP16 rounding point in the IR and on the device, where FP32 \
    accumulation order may flip a rounding by one FP16 ulp (2^-11 relative) on a few elements \
    (~1e-4 in L2), and that perturbation passes through a 4352-term dot product into the partials \
    at the same relative size; a wrong, stale or unwritten value is off by O(1) and NaN never \
    passes (outputs are poisoned first); replicated outputs must agree bit for bit across ranks";

/// The block's two op-level kernels (validated, same TP and batch).
#[derive(Clone, Debug)]
pub struct Block {
    /// `gemv_int4_dual_silu`.
    pub gate_up: Kernel,
    /// `gemv_int4_allreduce_rmsnorm`.
    pub down: Kernel,
}

/// Inputs of both kernels and the chained reference.
#[derive(Clone, Debug)]
pub struct BlockData {
    /// Per rank: the first kernel's inputs.
    pub gate_up_inputs: Vec<RankInputs>,
    /// Per rank: its f64 reference output `y`.
    pub gate_up_ref: Vec<RankOutputs>,
    /// Per rank: the second kernel's inputs, `x` being the reference `y` of the same rank.
    pub down_inputs: Vec<RankInputs>,
    /// Per rank: the block's reference outputs (`residual_out`, `normed`).
    pub down_ref: Vec<RankOutputs>,
}

impl BlockData {
    /// Fresh seeded inputs (the default workload's distributions) and the chained reference. The
    /// second kernel's inputs are generated on a second thread while the first is evaluated.
    pub fn new(block: &Block, seed: u64) -> Result<BlockData, String> {
        let w = Workload::new(seed);
        let (first, down_raw) = std::thread::scope(|s| {
            let down = s.spawn(|| w.inputs(&block.down));
            let inputs = w.inputs(&block.gate_up);
            let reference = evaluate(&block.gate_up, &inputs);
            (
                reference.map(|r| (inputs, r)),
                down.join().expect("input generation does not panic"),
            )
        });
        let (gate_up_inputs, gate_up_ref) =
            first.map_err(|e| format!("reference of {}: {e}", block.gate_up.name()))?;
        let down_inputs = feed(block, down_raw, &gate_up_ref)?;
        let down_ref = evaluate(&block.down, &down_inputs)
            .map_err(|e| format!("reference of {}: {e}", block.down.name()))?;
        Ok(BlockData {
            gate_up_inputs,
            gate_up_ref,
            down_inputs,
            down_ref,
        })
    }
}

/// The second kernel's inputs with `x` of rank r replaced by the first kernel's output `y` of
/// rank r (`y[r]`: reference or device outputs).
pub fn feed(
    block: &Block,
    mut down_inputs: Vec<RankInputs>,
    y: &[RankOutputs],
) -> Result<Vec<RankInputs>, String> {
    let y_buf = block
        .gate_up
        .buffer_by_name(GATE_UP_OUT)
        .ok_or_else(|| format!("{} has no output `{GATE_UP_OUT}`", block.gate_up.name()))?;
    let x_buf = block
        .down
        .buffer_by_name(DOWN_IN)
        .ok_or_else(|| format!("{} has no input `{DOWN_IN}`", block.down.name()))?;
    if y.len() != down_inputs.len() {
        return Err(format!(
            "{} ranks of `{GATE_UP_OUT}` for {} ranks",
            y.len(),
            down_inputs.len()
        ));
    }
    for (r, (inputs, outs)) in down_inputs.iter_mut().zip(y).enumerate() {
        let t = outs
            .get(&y_buf)
            .ok_or_else(|| format!("rank {r}: no `{GATE_UP_OUT}`"))?;
        let Some(HostData::Tensor(x)) = inputs.get(&x_buf) else {
            return Err(format!("rank {r}: `{DOWN_IN}` is not a tensor input"));
        };
        if x.shape != t.shape {
            return Err(format!(
                "rank {r}: `{GATE_UP_OUT}` is {:?}, `{DOWN_IN}` is {:?}",
                t.shape, x.shape
            ));
        }
        inputs.insert(x_buf, HostData::Tensor(t.clone()));
    }
    Ok(down_inputs)
}
