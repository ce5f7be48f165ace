//! The embedded default workload: deterministic synthetic data with realistic distributions.
//!
//! - Weights ~ N(0, 0.02), quantised to GPTQ INT4 per (group, column) with min/max scaling and an
//!   integer zero point in 1..=15 (so the v1 convention, which stores z − 1, can represent it);
//!   FP16 weights are the same draw rounded to FP16.
//! - Activations and residuals ~ N(0, 1) (RMS ≈ 1), rounded to FP16; partial sums ~ N(0, 1/tp) per
//!   rank so their sum has RMS ≈ 1.
//! - RMSNorm weights 1 + N(0, 0.1) (Gemma-style `1 + w` folded in at load).
//!
//! Every buffer of every rank has its own ChaCha8 stream seeded from (seed, kernel, buffer, rank);
//! replicated buffers drop the rank, so all ranks see identical data.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use wavefuse::ir::reference::{HostData, HostTensor, PackedInt4, RankInputs, round_to};
use wavefuse::ir::{
    AWQ_NIBBLE_ORDER, AwqLayout, BufferType, GptqLayout, Kernel, ScalarType, Sharding, Tensor,
    Weight, WeightFormat, ZeroPoint,
};

/// The most host memory the synthetic inputs of one kernel (all ranks) and the f64 reference
/// over them may take: 16 GiB. [`Workload::try_inputs`] refuses a kernel over it, before anything
/// is allocated (issue 39: `run --device cpu-ref` at hidden 2^30 asked for 48 TB and aborted).
/// The kernel set at Qwen 3.5 27B's shapes needs at most ~4 GiB by this estimate (TP 1's gate/up
/// GEMV).
pub const HOST_BUDGET_BYTES: u64 = 16 << 30;

/// Host bytes one element of an input costs while it is generated and evaluated: the f64 draw,
/// the stored form (at most 8 bytes), and the reference's f64 copy.
const BYTES_PER_ELEMENT: u64 = 24;

/// A kernel whose synthetic inputs and reference would exceed [`HOST_BUDGET_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`: its inputs and f64 reference on the host need {} bytes (buffer `{largest}`: {largest_elements} elements per rank, the largest), more than the {budget}-byte budget (HOST_BUDGET_BYTES)",
    needed.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
)]
pub struct OverBudget {
    /// The kernel's name.
    pub kernel: String,
    /// Bytes estimated (`None`: beyond `u64`).
    pub needed: Option<u64>,
    /// The input with the most elements per rank.
    pub largest: String,
    /// Its elements per rank, in decimal (it may not fit `u64`).
    pub largest_elements: String,
    /// [`HOST_BUDGET_BYTES`].
    pub budget: u64,
}

/// Elements of one rank's share of a buffer (every array of a weight counted as `K · N`, an
/// upper bound); `None` beyond `u64`.
fn local_elements(ty: &BufferType) -> Option<u64> {
    match ty {
        BufferType::Tensor(t) => t
            .shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)),
        BufferType::Weight(w) => (w.k as u64).checked_mul(w.n as u64),
    }
}

/// Standard deviation of synthetic weights.
pub const WEIGHT_STD: f64 = 0.02;

/// A seeded source of inputs for any kernel.
#[derive(Copy, Clone, Debug)]
pub struct Workload {
    /// Base seed.
    pub seed: u64,
}

impl Workload {
    /// The embedded default seed.
    pub const DEFAULT_SEED: u64 = 0x5EED_2026;

    /// A workload with the given seed.
    pub fn new(seed: u64) -> Self {
        Workload { seed }
    }

    /// [`Workload::inputs`], or an error if they and the reference over them would take more
    /// than [`HOST_BUDGET_BYTES`] of host memory (checked before anything is allocated).
    pub fn try_inputs(&self, kernel: &Kernel) -> Result<Vec<RankInputs>, OverBudget> {
        check_budget(kernel)?;
        Ok(self.inputs(kernel))
    }

    /// Inputs for every rank of `kernel`'s TP group. Allocates whatever the kernel's shapes ask
    /// for: use [`Workload::try_inputs`] for a kernel from a user.
    pub fn inputs(&self, kernel: &Kernel) -> Vec<RankInputs> {
        (0..kernel.tp() as usize)
            .map(|rank| {
                kernel
                    .inputs()
                    .map(|b| {
                        let d = kernel.buffer(b).expect("kernel's own buffer");
                        let shared = d.sharding == Sharding::Replicated;
                        let stream = [kernel.name(), &d.name];
                        let mut rng = self.rng(&stream, if shared { None } else { Some(rank) });
                        (b, generate(&d.local_type(), d.sharding, &mut rng))
                    })
                    .collect()
            })
            .collect()
    }

    fn rng(&self, names: &[&str], rank: Option<usize>) -> ChaCha8Rng {
        let mut h = fnv1a(
            self.seed.to_le_bytes().iter().copied(),
            0xcbf2_9ce4_8422_2325,
        );
        for name in names {
            h = fnv1a(name.bytes().chain([0xff]), h);
        }
        let rank_tag = rank.map_or(u64::MAX, |r| r as u64);
        ChaCha8Rng::seed_from_u64(fnv1a(rank_tag.to_le_bytes().iter().copied(), h))
    }
}

/// Refuse `kernel` if its inputs (all ranks) and their reference exceed [`HOST_BUDGET_BYTES`].
pub fn check_budget(kernel: &Kernel) -> Result<(), OverBudget> {
    let mut needed = Some(0u64);
    let mut largest = (String::new(), Some(0u64));
    for (_, d) in kernel.buffers() {
        let elements = local_elements(&d.local_type());
        let bigger = match (elements, largest.1) {
            (_, None) => false,
            (None, _) => true,
            (Some(e), Some(l)) => e > l,
        };
        if bigger {
            largest = (d.name.clone(), elements);
        }
        needed = elements
            .and_then(|e| e.checked_mul(BYTES_PER_ELEMENT * u64::from(kernel.tp())))
            .and_then(|b| needed?.checked_add(b));
    }
    if needed.is_some_and(|b| b <= HOST_BUDGET_BYTES) {
        return Ok(());
    }
    Err(OverBudget {
        kernel: kernel.name().to_string(),
        needed,
        largest: largest.0,
        largest_elements: largest
            .1
            .map_or_else(|| "more than 2^64".to_string(), |e| e.to_string()),
        budget: HOST_BUDGET_BYTES,
    })
}

/// FNV-1a: a stable hash (std's hasher may change between Rust releases).
fn fnv1a(bytes: impl IntoIterator<Item = u8>, mut h: u64) -> u64 {
    for b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn normal(std: f64) -> Normal<f64> {
    Normal::new(0.0, std).expect("positive standard deviation")
}

fn generate(ty: &BufferType, sharding: Sharding, rng: &mut ChaCha8Rng) -> HostData {
    match ty {
        BufferType::Tensor(t) => HostData::Tensor(tensor(t, sharding, rng)),
        BufferType::Weight(w) => weight(w, rng),
    }
}

fn tensor(t: &Tensor, sharding: Sharding, rng: &mut ChaCha8Rng) -> HostTensor {
    let (mean, std) = match (t.shape.len(), sharding) {
        (1, _) => (1.0, 0.1),
        (_, Sharding::Partial { tp }) => (0.0, 1.0 / f64::from(tp).sqrt()),
        _ => (0.0, 1.0),
    };
    let dist = normal(std);
    let values = (0..t.len()).map(|_| mean + dist.sample(rng));
    HostTensor::rounded(t.dtype, t.shape.clone(), values)
}

fn weight(w: &Weight, rng: &mut ChaCha8Rng) -> HostData {
    let dist = normal(WEIGHT_STD);
    let dense: Vec<f64> = (0..w.k * w.n).map(|_| dist.sample(rng)).collect();
    match w.format {
        WeightFormat::F16 => {
            // Stored [N, K]: transpose the [K, N] draw.
            let nk = (0..w.n * w.k).map(|i| dense[(i % w.k) * w.n + i / w.k]);
            HostData::F16Weight(nk.map(|x| round_to(ScalarType::F16, x)).collect())
        }
        WeightFormat::Gptq(l) => HostData::Int4(pack_gptq(&dense, w.k, w.n, &l)),
        WeightFormat::Awq(l) => HostData::Int4(pack_awq(&dense, w.k, w.n, &l)),
    }
}

/// Quantise a dense `[K, N]` weight to AutoAWQ "GEMM" INT4 ([`AwqLayout`]): per (group, column)
/// min/max scaling with an integer zero point in 1..=15 stored as is; `qweight` `[K, N/8]` and
/// `qzeros` `[K/G, N/8]` packed along N in [`AWQ_NIBBLE_ORDER`].
pub fn pack_awq(dense: &[f64], k: usize, n: usize, l: &AwqLayout) -> PackedInt4 {
    let g = l.group.rows(k);
    let groups = k / g;
    let mut scales = vec![0.0; groups * n];
    let mut zeros = vec![0u32; groups * n / 8];
    let mut qweight = vec![0i32; k * n / 8];
    // Nibble `i` of a word holds column `8·word + AWQ_NIBBLE_ORDER[i]`.
    let shift = |col: usize| {
        let pos = AWQ_NIBBLE_ORDER
            .iter()
            .position(|&c| c == col % 8)
            .expect("a permutation");
        4 * pos
    };
    for gi in 0..groups {
        for col in 0..n {
            let column = (gi * g..(gi + 1) * g).map(|r| dense[r * n + col]);
            let (s, z) = scale_and_zero(column, ZeroPoint::V2);
            let s = round_to(l.scale, s);
            scales[gi * n + col] = s;
            zeros[gi * (n / 8) + col / 8] |= (z as u32 & 0xF) << shift(col);
            for r in gi * g..(gi + 1) * g {
                let q = ((dense[r * n + col] / s).round() as i64 + z).clamp(0, 15) as u32;
                qweight[r * (n / 8) + col / 8] |= (q << shift(col)) as i32;
            }
        }
    }
    PackedInt4 {
        qweight,
        scales,
        qzeros: zeros.into_iter().map(|z| z as i32).collect(),
        g_idx: None,
    }
}

/// Quantise a dense `[K, N]` weight to GPTQ INT4 (no act-order) and pack it per DESIGN.md §2.
pub fn pack_gptq(dense: &[f64], k: usize, n: usize, l: &GptqLayout) -> PackedInt4 {
    let g = l.group.rows(k);
    let groups = k / g;
    let mut scales = vec![0.0; groups * n];
    let mut zeros = vec![8i64; groups * n];
    for gi in 0..groups {
        for col in 0..n {
            let column = (gi * g..(gi + 1) * g).map(|r| dense[r * n + col]);
            let (s, z) = scale_and_zero(column, l.zero);
            scales[gi * n + col] = round_to(l.scale, s);
            zeros[gi * n + col] = z;
        }
    }
    let mut qweight = vec![0i32; k / 8 * n];
    for r in 0..k {
        for col in 0..n {
            let gi = r / g;
            let (s, z) = (scales[gi * n + col], zeros[gi * n + col]);
            let q = ((dense[r * n + col] / s).round() as i64 + z).clamp(0, 15) as u32;
            qweight[(r / 8) * n + col] |= (q << (4 * (r % 8))) as i32;
        }
    }
    let qzeros = match l.zero {
        ZeroPoint::Symmetric => Vec::new(),
        zp => pack_zeros(&zeros, groups, n, zp),
    };
    PackedInt4 {
        qweight,
        scales,
        qzeros,
        g_idx: None,
    }
}

/// Scale and integer zero point of one (group, column).
fn scale_and_zero(column: impl Iterator<Item = f64>, zp: ZeroPoint) -> (f64, i64) {
    let (lo, hi) = column.fold((0.0f64, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if zp == ZeroPoint::Symmetric {
        let amax = lo.abs().max(hi).max(1e-8);
        return (2.0 * amax / 15.0, 8);
    }
    let s = ((hi - lo) / 15.0).max(1e-8);
    (s, ((-lo / s).round() as i64).clamp(1, 15))
}

fn pack_zeros(zeros: &[i64], groups: usize, n: usize, zp: ZeroPoint) -> Vec<i32> {
    let stored = |z: i64| (if zp == ZeroPoint::V1 { z - 1 } else { z }) as u32 & 0xF;
    let mut out = vec![0i32; groups * n / 8];
    for gi in 0..groups {
        for col in 0..n {
            out[gi * (n / 8) + col / 8] |= (stored(zeros[gi * n + col]) << (4 * (col % 8))) as i32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(k: usize, n: usize) -> Kernel {
        wavefuse::ir::parse(&format!(
            "kernel big(tp=2) {{
    buf0 = input w : f16_nk[k={k}, n={n}] col_parallel(tp=2) @global index=global
    buf1 = input x : f16[1, {k}] replicated @global index=global
    buf2 = output y : f16[1, {n}] col_parallel(tp=2) @global index=global
    v0 = load buf1
    v1 = gemv.col buf0, v0
    v2 = round_f16 v1
    store v2, buf2
}}"
        ))
        .expect("parses")
    }

    /// Issue 39 item 5: inputs were allocated whatever their size (`run --device cpu-ref` at
    /// hidden 2^30 asked for 48 TB and aborted; `hidden_size` 2^63 panicked in `weight`). A
    /// kernel over the budget is refused before anything is allocated, naming the kernel, the
    /// largest buffer and the budget; one under it gets its inputs.
    #[test]
    fn invalid_inputs_over_the_host_budget_are_refused_before_allocating() {
        // A 2^17 × 2^17 weight over 2 ranks: 2^33 elements per rank, × 24 bytes × 2 ranks.
        let e = Workload::new(1)
            .try_inputs(&kernel(1 << 17, 1 << 17))
            .unwrap_err();
        assert_eq!(
            (e.largest.as_str(), e.largest_elements.as_str(), e.needed),
            (
                "w",
                "8589934592",
                Some(48 * ((1 << 33) + (1 << 17) + (1 << 16)))
            )
        );
        let msg = e.to_string();
        assert!(
            msg.contains("kernel `big`") && msg.contains("17179869184-byte budget"),
            "{msg}"
        );
        let ok = Workload::new(1)
            .try_inputs(&kernel(256, 64))
            .expect("under the budget");
        assert_eq!(ok.len(), 2);
    }
}
