//! The embedded default workload: deterministic, realistically distributed, and packed exactly as
//! DESIGN.md §2 says (checked by unpacking here, by hand).

use wavefuse::ir::reference::HostData;
use wavefuse::ir::{GptqLayout, GroupSize, ZeroPoint};
use wavefuse_kernels::workload::{WEIGHT_STD, pack_gptq};
use wavefuse_kernels::{KernelId, Shapes, Workload};

fn nibble(word: i32, i: usize) -> i64 {
    i64::from((word as u32 >> (4 * i)) & 0xF)
}

#[test]
fn packer_round_trips_within_half_a_step() {
    for zero in [ZeroPoint::V1, ZeroPoint::V2, ZeroPoint::Symmetric] {
        let (k, n, g) = (256, 16, 64);
        let dense: Vec<f64> = (0..k * n)
            .map(|i| ((i * 7919 % 1000) as f64 / 1000.0 - 0.5) * 0.08)
            .collect();
        let l = GptqLayout::new(GroupSize::Rows(g as u32), zero);
        let p = pack_gptq(&dense, k, n, &l);
        for r in 0..k {
            for c in 0..n {
                let gi = r / g;
                let q = nibble(p.qweight[(r / 8) * n + c], r % 8);
                let z = match zero {
                    ZeroPoint::Symmetric => 8,
                    ZeroPoint::V2 => nibble(p.qzeros[gi * (n / 8) + c / 8], c % 8),
                    ZeroPoint::V1 => nibble(p.qzeros[gi * (n / 8) + c / 8], c % 8) + 1,
                };
                let s = p.scales[gi * n + c];
                let w = (q - z) as f64 * s;
                // Rounding to the nearest code: within half a step (plus FP16 scale rounding).
                assert!(
                    (w - dense[r * n + c]).abs() <= 0.5 * s * 1.01 + 1e-6,
                    "{zero:?} ({r},{c}): {w} vs {}",
                    dense[r * n + c]
                );
            }
        }
    }
}

#[test]
fn workload_is_deterministic_and_seed_dependent() {
    let kernel = KernelId::GemvInt4AllreduceRmsnorm.build(&Shapes::qwen27b(8));
    let a = Workload::new(1).inputs(&kernel);
    let b = Workload::new(1).inputs(&kernel);
    let c = Workload::new(2).inputs(&kernel);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Replicated inputs are identical across ranks; sharded ones differ.
    let res = kernel.buffer_by_name("residual").unwrap();
    let x = kernel.buffer_by_name("x").unwrap();
    assert_eq!(a[0][&res], a[7][&res]);
    assert_ne!(a[0][&x], a[7][&x]);
}

#[test]
fn workload_distributions_are_realistic() {
    let kernel = KernelId::AllreduceResidualRmsnorm.build(&Shapes::qwen27b(4));
    let inputs = Workload::new(Workload::DEFAULT_SEED).inputs(&kernel);
    let stats = |name: &str, rank: usize| {
        let HostData::Tensor(t) = &inputs[rank][&kernel.buffer_by_name(name).unwrap()] else {
            panic!()
        };
        let n = t.data.len() as f64;
        let mean = t.data.iter().sum::<f64>() / n;
        let rms = (t.data.iter().map(|x| x * x).sum::<f64>() / n).sqrt();
        (mean, rms)
    };
    let (_, rms) = stats("residual", 0);
    assert!((rms - 1.0).abs() < 0.05, "residual RMS {rms}");
    let (_, rms) = stats("partial", 2);
    assert!(
        (rms - 0.5).abs() < 0.03,
        "partial RMS {rms} (expected 1/sqrt(tp))"
    );
    let (mean, _) = stats("norm_w", 0);
    assert!((mean - 1.0).abs() < 0.02, "norm weight mean {mean}");

    let kernel = KernelId::GemvInt4.build(&Shapes::qwen27b(8));
    let inputs = Workload::new(3).inputs(&kernel);
    let HostData::Int4(p) = &inputs[0][&kernel.buffer_by_name("w").unwrap()] else {
        panic!()
    };
    let mean_scale = p.scales.iter().sum::<f64>() / p.scales.len() as f64;
    // Min/max over 128 draws of N(0, σ) spans ≈ 5.2σ, divided by 15 codes.
    assert!(
        (mean_scale / WEIGHT_STD - 5.2 / 15.0).abs() < 0.05,
        "mean scale {mean_scale}"
    );
    let zeros: Vec<i64> = p
        .qzeros
        .iter()
        .flat_map(|&w| (0..8).map(move |i| nibble(w, i) + 1))
        .collect();
    assert!(zeros.iter().all(|&z| (1..=15).contains(&z)));
    assert!(
        zeros.iter().any(|&z| z != 8),
        "zero points should vary (integer, asymmetric)"
    );
}
