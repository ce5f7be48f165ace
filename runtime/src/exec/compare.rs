//! Error metrics of device outputs against the f64 reference, per output and rank.

use wavefuse_ir::reference::RankOutputs;
use wavefuse_ir::{Kernel, Sharding};

/// How far one output of one rank is from the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputMetrics {
    /// Output buffer name.
    pub output: String,
    /// Rank.
    pub rank: u32,
    /// Elements compared.
    pub elements: usize,
    /// ‖y − ref‖₂ / ‖ref‖₂; NaN when any element of y is not finite (NaN never passes).
    pub rel_l2: f64,
    /// max |y − ref| over finite elements.
    pub max_abs: f64,
    /// ⟨y, ref⟩ / (‖y‖ ‖ref‖); NaN when any element of y is not finite.
    pub cosine: f64,
    /// Elements of y that are NaN or infinite (an unwritten, poisoned element is NaN).
    pub non_finite: usize,
    /// The element with the largest |y − ref| (the first non-finite one, if any).
    pub worst: usize,
    /// y and ref at `worst`.
    pub worst_values: (f64, f64),
    /// For a replicated output: elements whose bits differ from the lowest rank's (every rank
    /// sums peers in the same order, so replicated outputs agree bit for bit). 0 otherwise.
    pub differs_from_rank0: usize,
}

impl OutputMetrics {
    /// Whether it passes at relative-L2 tolerance `tol`: every element finite, replicated outputs
    /// identical across ranks, and the relative L2 error within `tol`.
    pub fn passes(&self, tol: f64) -> bool {
        self.non_finite == 0 && self.differs_from_rank0 == 0 && self.rel_l2 <= tol
    }
}

/// Metrics for every output of every rank, in output declaration order, then rank order.
/// `got` and `want` hold one map per rank.
pub fn compare(ir: &Kernel, got: &[RankOutputs], want: &[RankOutputs]) -> Vec<OutputMetrics> {
    let mut out = Vec::new();
    for b in ir.outputs() {
        let decl = ir.buffer(b).expect("own buffer");
        let replicated = decl.sharding == Sharding::Replicated;
        for (r, (g, w)) in got.iter().zip(want).enumerate() {
            let (Some(y), Some(reference)) = (g.get(&b), w.get(&b)) else {
                continue;
            };
            let mut m = metrics(&y.data, &reference.data);
            m.output = decl.name.clone();
            m.rank = r as u32;
            if replicated && r > 0 {
                if let Some(y0) = got[0].get(&b) {
                    m.differs_from_rank0 = y
                        .data
                        .iter()
                        .zip(&y0.data)
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count();
                }
            }
            out.push(m);
        }
    }
    out
}

/// The metrics of `y` against `reference` (name and rank left empty).
pub fn metrics(y: &[f64], reference: &[f64]) -> OutputMetrics {
    let non_finite = y.iter().filter(|v| !v.is_finite()).count();
    let (mut num, mut den, mut yy, mut dot) = (0.0, 0.0, 0.0, 0.0);
    let (mut max_abs, mut worst) = (0.0f64, 0usize);
    let first_bad = y.iter().position(|v| !v.is_finite());
    for (i, (&a, &b)) in y.iter().zip(reference).enumerate() {
        if !a.is_finite() {
            continue;
        }
        let d = (a - b).abs();
        num += d * d;
        den += b * b;
        yy += a * a;
        dot += a * b;
        if d > max_abs {
            max_abs = d;
            worst = i;
        }
    }
    let worst = first_bad.unwrap_or(worst);
    let (rel_l2, cosine) = if non_finite > 0 || y.len() != reference.len() {
        (f64::NAN, f64::NAN)
    } else if den == 0.0 && yy == 0.0 {
        (0.0, 1.0)
    } else {
        let tiny = f64::MIN_POSITIVE;
        (
            num.sqrt() / den.sqrt().max(tiny),
            // Rounding can take an exact match a hair past 1.
            (dot / (yy.sqrt() * den.sqrt()).max(tiny)).clamp(-1.0, 1.0),
        )
    };
    OutputMetrics {
        output: String::new(),
        rank: 0,
        elements: y.len(),
        rel_l2,
        max_abs,
        cosine,
        non_finite,
        worst,
        worst_values: (
            y.get(worst).copied().unwrap_or(f64::NAN),
            reference.get(worst).copied().unwrap_or(f64::NAN),
        ),
        differs_from_rank0: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_output_has_zero_error_and_unit_cosine() {
        let m = metrics(&[1.0, -2.0, 3.0], &[1.0, -2.0, 3.0]);
        assert_eq!(
            (m.rel_l2, m.max_abs, m.cosine, m.non_finite),
            (0.0, 0.0, 1.0, 0)
        );
        assert!(m.passes(0.0));
    }

    #[test]
    fn errors_are_measured() {
        let m = metrics(&[1.0, 0.0], &[1.0, 1.0]);
        assert!((m.rel_l2 - (0.5f64).sqrt()).abs() < 1e-12);
        assert_eq!((m.max_abs, m.worst, m.worst_values), (1.0, 1, (0.0, 1.0)));
        assert!((m.cosine - (0.5f64).sqrt()).abs() < 1e-12);
        assert!(!m.passes(1e-3));
    }

    #[test]
    fn nan_never_passes() {
        let m = metrics(&[1.0, f64::NAN, 3.0], &[1.0, 2.0, 3.0]);
        assert_eq!((m.non_finite, m.worst), (1, 1));
        assert!(m.rel_l2.is_nan() && m.cosine.is_nan());
        assert!(!m.passes(f64::INFINITY));
    }
}
