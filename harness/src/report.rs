//! The main job's table: every kernel of the set, validated and evaluated with the f64 reference
//! semantics on the embedded default workload.

use std::fmt::Write as _;
use std::time::Instant;

use wavefuse::ir::reference::{EvalError, evaluate};
use wavefuse::ir::{BufferType, Kernel, ValidationError, validate};

use crate::set::KernelId;
use crate::shapes::Shapes;
use crate::workload::Workload;

/// One row of the reference table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The kernel.
    pub id: KernelId,
    /// TP size.
    pub tp: u32,
    /// Per-rank weight shapes, `K→N`.
    pub shape: String,
    /// Bytes one rank's launch must move (all inputs read once, all outputs written once).
    pub bytes_per_rank: usize,
    /// Per output: name, RMS and max |value| on rank 0.
    pub outputs: Vec<(String, f64, f64)>,
    /// Non-finite output values over all ranks.
    pub non_finite: usize,
    /// Whether all ranks agree on replicated outputs.
    pub ranks_agree: bool,
    /// Wall time of the reference evaluation.
    pub eval_ms: f64,
}

/// Why a row could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The kernel did not validate.
    #[error("{kernel}: {source}")]
    Invalid {
        /// Kernel name.
        kernel: &'static str,
        /// The validator's error.
        source: ValidationError,
    },
    /// Reference evaluation failed.
    #[error("{kernel}: {source}")]
    Eval {
        /// Kernel name.
        kernel: &'static str,
        /// The evaluator's error.
        source: EvalError,
    },
}

/// Validate and evaluate one kernel on the default workload.
pub fn row(id: KernelId, shapes: &Shapes, seed: u64) -> Result<Row, ReportError> {
    let kernel = id.build(shapes);
    validate(&kernel).map_err(|source| ReportError::Invalid {
        kernel: id.name(),
        source,
    })?;
    let inputs = Workload::new(seed).inputs(&kernel);
    let start = Instant::now();
    let outs = evaluate(&kernel, &inputs).map_err(|source| ReportError::Eval {
        kernel: id.name(),
        source,
    })?;
    let eval_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut outputs = Vec::new();
    let mut non_finite = 0;
    let mut ranks_agree = true;
    for b in kernel.outputs() {
        let d = kernel.buffer(b).expect("own buffer");
        let t = &outs[0][&b];
        let rms = (t.data.iter().map(|x| x * x).sum::<f64>() / t.data.len() as f64).sqrt();
        let max = t.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        outputs.push((d.name.clone(), rms, max));
        non_finite += outs
            .iter()
            .map(|o| o[&b].data.iter().filter(|x| !x.is_finite()).count())
            .sum::<usize>();
        if d.sharding == wavefuse::ir::Sharding::Replicated {
            ranks_agree &= outs.iter().all(|o| o[&b].data == t.data);
        }
    }
    let shape = weight_shapes(&kernel);
    let bytes_per_rank = kernel.buffers().map(|(_, d)| d.local_type().bytes()).sum();
    Ok(Row {
        id,
        tp: shapes.tp,
        shape,
        bytes_per_rank,
        outputs,
        non_finite,
        ranks_agree,
        eval_ms,
    })
}

fn weight_shapes(kernel: &Kernel) -> String {
    let shapes: Vec<String> = kernel
        .buffers()
        .filter_map(|(_, d)| match d.local_type() {
            BufferType::Weight(w) => Some(format!("{}→{}", w.k, w.n)),
            BufferType::Tensor(_) => None,
        })
        .collect();
    if shapes.is_empty() {
        let first = kernel
            .buffers()
            .next()
            .map(|(_, d)| d.local_type().to_string());
        return first.unwrap_or_default();
    }
    shapes.join(" + ")
}

/// Render rows as a fixed-width table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>2}  {:<22} {:>11}  {:>8}  {:<6} {}",
        "kernel",
        "tp",
        "per-rank K→N",
        "bytes/rank",
        "ref ms",
        "check",
        "outputs (rank 0: rms / max|y|)"
    );
    for r in rows {
        let outputs: Vec<String> = r
            .outputs
            .iter()
            .map(|(n, rms, max)| format!("{n} {rms:.3}/{max:.2}"))
            .collect();
        let ok = r.non_finite == 0 && r.ranks_agree && r.outputs.iter().all(|o| o.1 > 0.0);
        let _ = writeln!(
            out,
            "{:<28} {:>2}  {:<22} {:>11}  {:>8.1}  {:<6} {}",
            r.id.name(),
            r.tp,
            r.shape,
            r.bytes_per_rank,
            r.eval_ms,
            if ok { "ok" } else { "FAIL" },
            outputs.join(", ")
        );
    }
    out
}
